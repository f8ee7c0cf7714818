"""CMP and Mahalanobis at runtime: metric LDP per token by noise, then the nearest vocabulary token.

* **CMP** — Feyisetan, Balle, Drake & Diethe 2020, *Privacy- and Utility-Preserving Textual Analysis
  via Calibrated Multivariate Perturbations* (WSDM; the calibrated multivariate perturbation, also
  "FBDD" in Yue 2023, *Data Synthesis: Boosting Utility and Privacy in Natural Language
  Processing* (dissertation), §2.5.2 and Table 2.1): release the output token nearest
  (Euclidean) to φ(x) + z, z with density ∝ exp(−ε‖z‖₂).
* **Mahalanobis** — Xu, Aggarwal, Feyisetan & Teissier 2020, *A Differentially Private Text
  Perturbation Method Using a Regularized Mahalanobis Metric* (PrivateNLP@EMNLP): the same with
  elliptical noise S·z, S = Σ_λ^{1/2}, Σ_λ = λ·Σ + (1 − λ)·I, Σ the covariance of the public
  embedding (scaled here to trace m, so that λ trades shape, not scale), then the Euclidean nearest
  token.

(The statements below are re-derived here from the two papers.)

**Guarantee** (what is private: each token; neighbouring relation: any two tokens x, x', at the price
of their distance). The noisy point has density ∝ exp(−ε·‖S⁻¹(v − φ(x))‖₂) (S = I for CMP), so by the
triangle inequality its density ratio between inputs x and x' is at most exp(ε·d(x, x')) everywhere,
with d(x, x') = ‖S⁻¹(φ(x) − φ(x'))‖₂ (CMP: the Euclidean distance of the bundle's metric embedding,
the same int8-quantized embedding as SanText's; Mahalanobis: the regularized Mahalanobis distance).
The nearest-neighbour step is post-processing, so Pr[M(x)=y] ≤ exp(ε·d(x, x'))·Pr[M(x')=y] for every
output y: **ε·d-metric LDP per token**, ε·D_max-LDP in the worst case (D_max the bundle's bound of
the largest input distance). This holds for *any* deterministic nearest-neighbour search, exact
(``IndexFlatL2``) or approximate (``IndexHNSWFlat``): only utility depends on the index. The input
token itself may be released. Documents: ε·Σᵢ d(xᵢ, x'ᵢ) for two documents of the same length; the
number of tokens is not hidden. Ledger: ε per token in ``metric:<id>`` of the bundle's metric — for
CMP the same unit as a SanText or TEM bundle over the same embedding and vocabulary.

**Randomness and floating point**: the noise is drawn by :mod:`ldptext.multivariate_laplace` from the
CSPRNG; its float64 caveat and the bound on what it changes (only draws whose ideal noisy point lies
within ~1e-9·(1 + ‖z‖) of a nearest-neighbour boundary, or on an event of probability ⌈m/2⌉·2^−24)
are stated there; the noisy vector is never
released or stored. The output law is not computable in closed form, so reports state no numeric
tolerance (``None``); ``tests/test_cmp.py`` checks the sampler statistically against an independent
float64 reference.

**Nearest neighbour**: a faiss index (``blob/index.faiss``, built by precompute over the output tokens'
float32 vectors) answers the queries; faiss is the ``faiss`` extra (``pip install
'ldptext[faiss]'``, the ``faiss-cpu`` package) and is imported when a bundle is loaded.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import registry as _registry
from .description import check_description
from .errors import BundleFormatError, BundleIntegrityError, ParameterMismatchError
from .multivariate_laplace import laplace_noise
from .mechanisms.cmp import ledger_unit as _ledger_unit
from .mechanisms.cmp import mahalanobis_metric_id, shapes_noise, worst_case_epsilon
from .token_runtime import TokenRuntime, check_stated_d_max, check_stated_worst_case

__all__ = ["CMPSanitizer", "MECHANISMS", "load_faiss", "worst_case_epsilon", "mahalanobis_metric_id"]

MECHANISMS = _registry.names(family="cmp")


def load_faiss():
    """The ``faiss`` module (the ``faiss`` extra).

    Returns
    -------
    module

    Raises
    ------
    ModuleNotFoundError
        faiss is not installed (the message names the extra).
    """
    try:
        import faiss
    except ImportError:
        raise ModuleNotFoundError("CMP and Mahalanobis bundles need faiss: pip install 'ldptext[faiss]' "
                                  "(the faiss-cpu package)", name="faiss") from None
    return faiss


def regularized_transform(vectors: np.ndarray, lam: float) -> np.ndarray | None:
    """S = Σ_λ^{1/2}, Σ_λ = λ·Σ + (1 − λ)·I, Σ the covariance of ``vectors`` scaled to trace m.

    The same construction as the precompute side's ``mahalanobis_transform`` (re-stated here so that
    the SDK can check a bundle's S against its stated λ).

    Parameters
    ----------
    vectors : np.ndarray of float, shape (n, m)
        The output tokens' embeddings.
    lam : float
        λ ∈ [0, 1].

    Returns
    -------
    np.ndarray of float64, shape (m, m) or None
        ``None`` when Σ_λ is singular.
    """
    v = np.asarray(vectors, dtype=np.float64)
    m = v.shape[1]
    cov = np.cov(v, rowvar=False)
    cov = cov * (m / np.trace(cov))
    sig = lam * cov + (1.0 - lam) * np.eye(m)
    w, q = np.linalg.eigh((sig + sig.T) / 2)
    if w.min() <= 1e-12 * w.max():
        return None
    return (q * np.sqrt(w)) @ q.T


class CMPSanitizer(TokenRuntime):
    """Sanitize text with CMP or Mahalanobis from a verified bundle; create one with :meth:`load`.

    **Guarantee** (per token, module docstring): ε·d(x, x')-metric LDP,
    Pr[M(x)=y] ≤ exp(ε·d(x, x'))·Pr[M(x')=y], d Euclidean on the bundle's metric embedding (CMP) or
    ‖S⁻¹(φ(x) − φ(x'))‖ (Mahalanobis); ε·D_max-LDP in the worst case; up to the floating-point
    coupling bound of :mod:`ldptext.multivariate_laplace` (the noisy vector is never released).
    **Neighbouring relation**: any two tokens x, x' of the input domain, at the price ε·d(x, x'); a
    document composes position by position over documents of the same length. Ledger: ε per token in
    ``metric:<id>`` of the guarantee's metric. **Reference**: Feyisetan, Balle, Drake & Diethe 2020,
    *Privacy- and Utility-Preserving Textual Analysis via Calibrated Multivariate Perturbations*
    (WSDM), the calibrated multivariate perturbation and its d_χ-privacy proof (also Yue 2023,
    *Data Synthesis: Boosting Utility and Privacy in Natural Language Processing*, §2.5.2);
    Xu, Aggarwal, Feyisetan & Teissier 2020, *A Differentially Private
    Text Perturbation Method Using a Regularized Mahalanobis Metric* (PrivateNLP@EMNLP), the
    regularized Mahalanobis mechanism and its privacy proof (section numbers not checked).

    Attributes
    ----------
    embeddings : np.ndarray of float64, shape (V, m)
        φ: the metric embedding (int8 code × row scale), exactly.
    outputs : np.ndarray of int32, shape (O,)
        The output domain (the index's label i is ``outputs[i]``).
    noise_transform : np.ndarray of float64, shape (m, m) or None
        S (Mahalanobis), ``None`` for CMP.
    d_max : float
        Upper bound of the largest distance between two inputs, in the guarantee's metric.
    index_kind : str
        ``"flat"`` (exact) or ``"hnsw"`` (approximate).
    """

    MECHANISMS = MECHANISMS
    _RELEASED = TokenRuntime._RELEASED + ("embeddings", "outputs", "noise_transform", "_index")

    def __init__(self, bundle: Any, **kwargs: Any) -> None:
        super().__init__(bundle, **kwargs)
        faiss = load_faiss()
        try:
            self.d_max: float = float(self.manifest["privacy"]["d_max"])
            self.index_kind: str = str(self.params["index"])
            self.lam: float | None = None if self.params.get("lambda") is None else float(self.params["lambda"])
        except (KeyError, TypeError, ValueError):
            raise BundleFormatError("CMP manifest lacks d_max or the index kind") from None
        emb_q, scale = bundle.array("emb_q"), bundle.array("emb_scale")
        outputs = bundle.array("outputs")
        if emb_q.dtype != np.int8 or emb_q.ndim != 2 or emb_q.shape[0] != self.n_rows \
                or scale.dtype != np.float32 or scale.shape != (self.n_rows,) \
                or outputs.dtype != np.int32 or outputs.ndim != 1 or outputs.size == 0:
            raise BundleIntegrityError("CMP arrays have the wrong dtype or shape")
        if not (np.isfinite(scale).all() and (scale >= 0).all()):
            raise BundleIntegrityError("embedding scales are not finite and non-negative")
        if (outputs < 0).any() or (outputs >= self.n_rows).any() or (np.diff(outputs) <= 0).any() \
                or not self.valid_input[outputs].all():
            raise BundleIntegrityError("output ids are out of range, unsorted or not valid inputs")
        if not (math.isfinite(self.d_max) and self.d_max >= 0):
            raise BundleIntegrityError("bundle d_max is not finite")
        self.embeddings: np.ndarray = scale.astype(np.float64)[:, None] * emb_q.astype(np.float64)
        self.outputs: np.ndarray = outputs
        self.noise_transform: np.ndarray | None = None
        if shapes_noise(self.mechanism):
            s = bundle.array("noise_transform")
            m = emb_q.shape[1]
            if s.dtype != np.float64 or s.shape != (m, m) or not np.isfinite(s).all():
                raise BundleIntegrityError("array 'noise_transform' is not a finite float64 (m, m) matrix")
            if not (self.lam is not None and 0.0 <= self.lam <= 1.0):
                raise BundleIntegrityError("bundle lambda is not in [0, 1]")
            if np.linalg.matrix_rank(s) < m:
                raise BundleIntegrityError("array 'noise_transform' is singular")
            self.noise_transform = s
        try:
            index = faiss.deserialize_index(np.frombuffer(bundle.blob("index.faiss"), dtype=np.uint8).copy())
        except RuntimeError:
            raise BundleIntegrityError("blob 'index.faiss' is not a faiss index") from None
        if index.ntotal != outputs.size or index.d != emb_q.shape[1]:
            raise BundleIntegrityError("the faiss index does not cover the output domain")
        stored = index.reconstruct_n(0, index.ntotal)
        if not np.array_equal(stored, self.embeddings[outputs].astype(np.float32)):
            raise BundleIntegrityError("the faiss index's vectors are not the bundle's output embeddings")
        self._index = index
        check_description(self.manifest, rows=self.n_rows, outputs=outputs, dim=emb_q.shape[1],
                          valid_input=self.valid_input)

    @property
    def ledger_unit(self) -> str:
        """``"metric:<id>"`` of the guarantee's metric (CMP: shared with SanText over the same one)."""
        unit = _ledger_unit(self.manifest)
        if unit is None:
            raise BundleFormatError("manifest lacks the metric's hashes")
        return unit

    def check_parameters(self) -> None:
        """Refuse stated parameters that the arrays do not realise (``ldptext bundle sign``).

        ε is in no array: the noise is drawn at the manifest's ε, so the stated ε is the realised one
        by construction (as SanText+'s p); what the arrays fix is checked. D_max must bound the sampled
        input distances in the guarantee's metric (Euclidean, or ‖S⁻¹(φ(x) − φ(x'))‖); the stated
        worst case must be ε·D_max; the index kind must be ``flat`` or ``hnsw``; for Mahalanobis, S
        must be Σ_λ^{1/2} of the stated λ, Σ the covariance of the output embeddings scaled to trace m
        (relative Frobenius difference ≤ 1e-8), and CMP states no λ and no S.

        Raises
        ------
        ParameterMismatchError
        """
        self._check_open()
        if self.index_kind not in ("flat", "hnsw"):
            raise ParameterMismatchError(f"manifest index {self.index_kind!r} is not flat or hnsw")
        points = self.embeddings
        if shapes_noise(self.mechanism):
            s = self.noise_transform
            expected = regularized_transform(self.embeddings[self.outputs], float(self.lam))
            if expected is None or np.linalg.norm(s - expected) > 1e-8 * np.linalg.norm(expected):
                raise ParameterMismatchError(f"manifest lambda {self.lam:g} is not what array 'noise_transform' "
                                             f"realises (S = Sigma_lambda^(1/2) of the output embeddings)")
            points = np.linalg.solve(s, points.T).T
        elif self.lam is not None or "noise_transform" in self.manifest.get("arrays", {}):
            raise ParameterMismatchError("a CMP bundle states lambda or a noise transform (Mahalanobis only)")
        check_stated_d_max(points, np.flatnonzero(self.valid_input), self.d_max)
        check_stated_worst_case(self.manifest, worst_case_epsilon(self.epsilon, self.d_max))

    def noisy_points(self, flat: np.ndarray) -> np.ndarray:
        """φ(x) + noise for each id (float64). Never released: for the tests' and evaluation's checks.

        Parameters
        ----------
        flat : np.ndarray of int, shape (n,)

        Returns
        -------
        np.ndarray of float64, shape (n, m)
        """
        self._check_open()
        xs = np.asarray(flat, dtype=np.int64)
        return self.embeddings[xs] + laplace_noise(self._rng, self.embeddings.shape[1], self.epsilon, xs.size,
                                                   transform=self.noise_transform)

    def nearest(self, points: np.ndarray) -> np.ndarray:
        """The output id whose embedding is nearest to each point, by the bundle's faiss index.

        Parameters
        ----------
        points : np.ndarray of float, shape (n, m)

        Returns
        -------
        np.ndarray of int64, shape (n,)
        """
        self._check_open()
        _, labels = self._index.search(np.ascontiguousarray(points, dtype=np.float32), 1)
        labels = labels[:, 0]
        if (labels < 0).any():  # an approximate index found nothing (never for these sizes)
            raise RuntimeError("the faiss index returned no neighbour")
        return self.outputs[labels].astype(np.int64)

    def _draw(self, flat: np.ndarray) -> np.ndarray:
        out = np.empty(flat.size, dtype=np.int64)
        for start in range(0, flat.size, 4096):  # bounded memory per call
            out[start:start + 4096] = self.nearest(self.noisy_points(flat[start:start + 4096]))
        return out
