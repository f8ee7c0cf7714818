"""Build a CMP or Mahalanobis bundle: the metric embedding, D_max, the noise map and a faiss index.

CMP: Feyisetan et al. 2020 (WSDM). Mahalanobis: Xu et al. 2020 (PrivateNLP), Σ_λ = λΣ + (1 − λ)I.
Formula and guarantee are stated once, in :mod:`ldptext.cmp`. Steps: embeddings → domain (outputs:
the vocabulary minus special tokens) → int8 metric embedding (as SanText's) → Mahalanobis: Σ from the
public output embeddings, scaled to trace m, S = Σ_λ^{1/2} (:func:`mahalanobis_transform`) → D_max in
the guarantee's metric (:func:`max_distance`, a rigorous upper bound) → faiss index over the outputs'
float32 vectors (:mod:`ldptext_precompute.metricdp.faiss_search`) → manifest → signed bundle.
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from ldptext import registry
from ldptext.cmp import worst_case_epsilon
from ldptext.errors import ParameterError

from ..metricdp import common as _common
from ..metricdp import faiss_search as _faiss
from ..metricdp.engine import U
from ..progress import Progress
from ..santext import build as _st
from ..santext import embeddings as _emb

__all__ = ["MECHANISMS", "mahalanobis_transform", "max_distance", "build_cmp_bundle"]

MECHANISMS = registry.names(family="cmp")


def mahalanobis_transform(vectors: np.ndarray, lam: float) -> np.ndarray:
    """S = Σ_λ^{1/2}, Σ_λ = λ·Σ + (1 − λ)·I, Σ the covariance of ``vectors`` scaled to trace m.

    Parameters
    ----------
    vectors : np.ndarray of float, shape (n, m)
        Public embeddings (the output tokens').
    lam : float
        λ ∈ [0, 1] (0: CMP's spherical noise).

    Returns
    -------
    np.ndarray of float64, shape (m, m)
        Symmetric positive definite.

    Raises
    ------
    ParameterError
        λ outside [0, 1], or Σ_λ singular (λ = 1 with a rank-deficient covariance).
    """
    if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not (0.0 <= float(lam) <= 1.0):
        raise ParameterError("lambda must be in [0, 1]")
    v = np.asarray(vectors, dtype=np.float64)
    m = v.shape[1]
    cov = np.cov(v, rowvar=False)
    cov = cov * (m / np.trace(cov))
    sig = float(lam) * cov + (1.0 - float(lam)) * np.eye(m)
    w, q = np.linalg.eigh((sig + sig.T) / 2)
    if w.min() <= 1e-12 * w.max():
        raise ParameterError("the regularized covariance is singular: use lambda < 1")
    return (q * np.sqrt(w)) @ q.T


def max_distance(vectors: np.ndarray, block: int = 2048, *, progress: bool = False) -> float:
    """A rigorous upper bound of the largest Euclidean distance between two rows.

    Parameters
    ----------
    vectors : np.ndarray of float64, shape (n, m)
    block : int
    progress : bool
        Progress on stderr (:mod:`ldptext_precompute.progress`).

    Returns
    -------
    float
        max ‖a − b‖ over pairs, rounded up (expanded-formula error bound added).
    """
    v = np.asarray(vectors, dtype=np.float64)
    sq = np.einsum("ij,ij->i", v, v)
    best = 0.0
    with Progress(v.shape[0], "cmp largest distance", unit="row", enabled=progress) as bar:
        for start in range(0, v.shape[0], block):
            a = v[start:start + block]
            d2 = sq[start:start + block, None] + sq[None, :] - 2.0 * (a @ v.T)
            best = max(best, float(d2.max()))
            bar.update(a.shape[0])
    err = 4.0 * (v.shape[1] + 8) * U * 2 * float(sq.max())
    return float(np.nextafter(math.sqrt(max(best, 0.0) + err) * (1.0 + 4 * U), np.inf))


def build_cmp_bundle(out: str | Path, *, embeddings: str = _emb.GLOVE, epsilon: float,
                     mechanism: str = "cmp", lam: float = 0.5, index: str = "flat",
                     vocab_size: int | None = None, sign_key: Any = None, passphrase: bytes | None = None,
                     loaded: "_emb.Embeddings | None" = None, progress: bool = False) -> Path:
    """Build and sign a CMP or Mahalanobis bundle.

    Parameters
    ----------
    out : str or Path
    embeddings : str
        ``"glove-6b-50d"``, ``"minilm-wordpiece"`` or a file.
    epsilon : float
        ε (finite, > 0).
    mechanism : str
        ``"cmp"`` or ``"mahalanobis"``.
    lam : float
        Mahalanobis: λ ∈ [0, 1] (ignored for CMP).
    index : str
        ``"flat"`` (exact nearest neighbour) or ``"hnsw"`` (approximate; the same guarantee).
    vocab_size : int or None
    sign_key : key, path, None or False
    passphrase : bytes or None
    loaded : Embeddings or None
    progress : bool
        Progress of the D_max search on stderr.

    Returns
    -------
    Path

    Raises
    ------
    ParameterError
        ε, λ or the index kind out of range.
    ModuleNotFoundError
        faiss is not installed.

    Notes
    -----
    Guarantee of the runtime (:class:`ldptext.cmp.CMPSanitizer`): ε·d(x, x')-metric LDP per token,
    ε·D_max in the worst case; Feyisetan et al. 2020, Xu et al. 2020.
    """
    started = time.perf_counter()
    epsilon = _common.check_epsilon(epsilon)
    if mechanism not in MECHANISMS:
        raise ParameterError(f"mechanism must be one of {MECHANISMS}")
    if index not in _faiss.INDEX_KINDS:
        raise ParameterError(f"index must be one of {_faiss.INDEX_KINDS}")
    _faiss.require_faiss()
    emb = loaded or _emb.load_embeddings(embeddings, vocab_size)
    domain = _st.split_domain(emb, mechanism="santext")
    emb_q, emb_scale = _st.quantize_int8(emb.vectors)
    vectors = _st.dequantize(emb_q, emb_scale)
    outputs = domain.outputs
    arrays: dict[str, np.ndarray] = {"emb_q": emb_q, "emb_scale": emb_scale, "outputs": outputs,
                                     "valid_input": emb.valid_input.astype(bool)}
    valid = vectors[emb.valid_input]
    if mechanism == "mahalanobis":
        s = mahalanobis_transform(vectors[outputs], lam)
        arrays["noise_transform"] = s
        d_max = max_distance(np.linalg.solve(s, valid.T).T, progress=progress)
        metric = "regularized Mahalanobis ||S^-1 (phi(x) - phi(x'))||, S = noise_transform = Sigma_lambda^(1/2)"
    else:
        lam = None
        d_max = max_distance(valid, progress=progress)
        metric = "euclidean over the bundle's int8-quantized embeddings"
    t_index = time.perf_counter()
    faiss_index = _faiss.build_index(vectors[outputs], index)
    blob = _faiss.serialize_index(faiss_index)
    index_seconds = time.perf_counter() - t_index
    manifest = dict(
        params=dict(epsilon=epsilon, index=index, **({"lambda": float(lam)} if lam is not None else {})),
        privacy=dict(d_max=d_max, metric=metric, notion="metric-LDP",
                     not_outputs=_st.read_back_statement(domain),
                     worst_case_token_epsilon=worst_case_epsilon(epsilon, d_max),
                     noise="density proportional to exp(-eps ||S^-1 z||): uniform direction x Gamma(m, 1/eps)"
                           + (" mapped by S" if mechanism == "mahalanobis" else ""),
                     covariance=("of the public output embeddings, scaled to trace m"
                                 if mechanism == "mahalanobis" else None)),
        vocab=dict(size=len(emb.vocab), dim=int(emb.vectors.shape[1]), outputs=int(outputs.size),
                   kind=emb.kind),
        sources=dict(embeddings=emb.source),
        numeric=dict(max_relative_error=None,
                     meaning="continuous float64 noise: no exact output law; see ldptext.multivariate_laplace"),
        build=_common.build_info(started, index_seconds=round(index_seconds, 3),
                                 faiss=getattr(_faiss.require_faiss(), "__version__", None)),
    )
    return _common.write_mechanism_bundle(out, mechanism=mechanism, arrays=arrays, manifest=manifest, emb=emb,
                                          sign_key=sign_key, passphrase=passphrase,
                                          blobs={"index.faiss": blob})
