"""Build a SanText / SanText+ bundle (SPEC §2, seed 000 §2.4.2–2.4.3).

Target, for every input row x over the output domain O (O = V minus special tokens for SanText,
O = V_S for SanText+):  Pr[M(x) = y] ∝ exp(−ε·d(x, y)/2).

Sampling tables (consumed by ``native/santext_sampler.c``): slots 0..K-1 are the K nearest outputs
("head"), slot K stands for the T = |O| − K others ("tail"). With log-weights
``W_j = −ε d_j / 2`` for the head and ``W_T = log T − ε·floor/2`` for the tail (floor ≤ every tail
distance), an integer alias table gives the exact proposal q̂ and the acceptance is
exp(−γ_j) with ``γ_j = (log q̂_j − W_j) − min_i (log q̂_i − W_i) ≥ 0``. After rejection-and-restart the
output law is exactly ∝ exp(−ε d/2) — no truncation, and everything stays in log space, so no
probability underflows whatever ε is. The only rounding is float64 rounding of the γ's, stated in
the manifest as ``numeric.max_relative_error``.
"""
from __future__ import annotations

import datetime as _dt
import math
import platform
import time
from pathlib import Path

import numpy as np

import ldptext
from ldptext import alias as _alias
from ldptext import bundle as _bundle
from ldptext import keys as _keys
from ldptext.errors import ParameterError

from . import embeddings as _emb
from . import frequency as _freq
from .knn import Neighbours, cached_neighbours

U = 2.0 ** -53
MECHANISMS = ("santext", "santext+")


def quantize_int8(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The bundle's metric embedding: per-row scale (float32) times int8 codes.

    The mechanism's distance is the Euclidean distance of these exact values (the public
    embeddings rounded to 8 bits per coordinate, ~0.4 % of each vector's largest coordinate). Any
    public embedding defines a valid metric, so the guarantee is unchanged; the sampler reads 4×
    fewer bytes per candidate (it is memory-bound) and the bundle shrinks accordingly.
    """
    v = np.asarray(vectors, dtype=np.float64)
    top = np.abs(v).max(axis=1)
    scale = np.where(top > 0, top / 127.0, 1.0).astype(np.float32)
    q = np.clip(np.rint(v / scale.astype(np.float64)[:, None]), -127, 127).astype(np.int8)
    return q, scale


def dequantize(q: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Exact float64 values of the metric embedding (float32 × int8 fits a double exactly)."""
    return scale.astype(np.float64)[:, None] * q.astype(np.float64)


def check_parameters(epsilon: float, mechanism: str, p: float | None, w: float | None) -> None:
    if mechanism not in MECHANISMS:
        raise ParameterError(f"mechanism must be one of {MECHANISMS}")
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise ParameterError("epsilon must be a finite number > 0")
    if mechanism == "santext+":
        if p is None or not (0.0 < p <= 1.0):
            raise ParameterError("p must be in (0, 1]")
        if w is None or not (0.0 <= w <= 1.0):
            raise ParameterError("w must be in [0, 1]")


def sampling_tables(nb: Neighbours, n_outputs: int, epsilon: float) -> dict[str, np.ndarray]:
    """ε-dependent tables from the ε-independent neighbour structure."""
    rows, k = nb.head_ids.shape
    half = epsilon / 2.0
    tail_count = n_outputs - k
    log_w = np.empty((rows, k + 1), dtype=np.float64)
    log_w[:, :k] = -half * nb.head_dist
    log_w[:, k] = (math.log(tail_count) - half * nb.tail_floor) if tail_count > 0 else -np.inf
    mass = _alias.integer_masses(log_w)
    threshold, alias_index = _alias.build_tables(mass)
    with np.errstate(divide="ignore", invalid="ignore"):  # zero-mass slots: -inf, masked below
        log_q = np.log(mass.astype(np.float64)) - math.log((k + 1) * _alias.COLUMN)
        ratio = np.where(mass > 0, log_q - log_w, np.inf)
    gamma = ratio - ratio.min(axis=1, keepdims=True)
    gamma[mass == 0] = 0.0  # never proposed
    return {"alias_threshold": threshold, "alias_index": alias_index, "accept_gamma": gamma,
            "tail_floor": nb.tail_floor.astype(np.float64)}


def numeric_tolerance(epsilon: float, nb: Neighbours, metric_vectors: np.ndarray,
                      n_outputs: int) -> float:
    """Bound on the relative error of any realised probability against the exact formula:
    float64 rounding of γ (a few operations on numbers of magnitude ≤ ε·D_max/2 + log(S·2^32·T)),
    of the head distances ((m+2)u relative), and of the runtime's tail distance, whose d² is within
    E = 8u(|a|²+|b|²) of the truth, so d is within min(√E, E/(2·floor)) (floor ≤ d)."""
    rows, k = nb.head_ids.shape
    dim = metric_vectors.shape[1]
    sq = np.einsum("ij,ij->i", metric_vectors, metric_vectors)
    e = 8 * U * (sq + sq.max())
    with np.errstate(divide="ignore"):
        dd = np.minimum(np.sqrt(e), np.where(nb.tail_floor > 0, e / (2 * nb.tail_floor), np.inf))
    magnitude = epsilon * nb.d_max / 2 + math.log((k + 1) * _alias.COLUMN) + \
        math.log(max(n_outputs, 2))
    return float(16 * U * magnitude + epsilon / 2 * nb.d_max * (dim + 2) * U
                 + (epsilon / 2 * float(dd.max()) if n_outputs > k else 0.0))


def build_santext_bundle(out: str | Path, *, embeddings: str = _emb.GLOVE, epsilon: float,
                         mechanism: str = "santext+", p: float | None = 0.3, w: float | None = 0.9,
                         vocab_size: int | None = None, head_size: int = 64, sign_key=None,
                         passphrase: bytes | None = None, device: str = "auto",
                         cache_dir: str | Path | None = None, progress: bool = True,
                         loaded: "_emb.Embeddings | None" = None,
                         frequencies: np.ndarray | None = None) -> Path:
    """Build and sign a SanText(+) bundle.

    ``sign_key=None`` signs with the local developer key (``ldptext.keys.developer_key``);
    ``sign_key=False`` writes an unsigned development bundle. ``loaded`` passes embeddings already
    in memory; ``frequencies`` a public frequency per vocabulary entry (default: wordfreq).
    """
    t0 = time.perf_counter()
    if mechanism == "santext":
        p = w = None
    check_parameters(epsilon, mechanism, p, w)
    if not (isinstance(head_size, int) and 1 <= head_size < 65535):
        raise ParameterError("head size must be an integer in [1, 65534]")
    emb = loaded or _emb.load_embeddings(embeddings, vocab_size)
    n_rows = len(emb.vocab)

    if mechanism == "santext+":
        freqs = (_freq.token_frequencies(emb.vocab, emb.kind, emb.tokenizer_json)
                 if frequencies is None else np.asarray(frequencies, dtype=np.float64))
        if freqs.shape != (n_rows,):
            raise ParameterError("frequencies must have one entry per vocabulary row")
        sensitive = _freq.sensitive_mask(freqs, emb.valid_input, w)
        keep_row = (emb.valid_input & ~sensitive).astype(np.uint8)
        output_mask = sensitive & ~emb.special
    else:
        sensitive = emb.valid_input.copy()
        keep_row = np.zeros(n_rows, dtype=np.uint8)
        output_mask = ~emb.special
    outputs = np.flatnonzero(output_mask).astype(np.int32)
    if outputs.size == 0:
        raise ParameterError("the output domain is empty (w too small?)")
    k = min(head_size, int(outputs.size))

    emb_q, emb_scale = quantize_int8(emb.vectors)
    metric_vectors = dequantize(emb_q, emb_scale)
    nb = cached_neighbours(cache_dir, metric_vectors, outputs, emb.valid_input, k,
                           device=device, progress=progress)
    tables = sampling_tables(nb, int(outputs.size), float(epsilon))

    arrays = {
        "emb_q": emb_q, "emb_scale": emb_scale, "outputs": outputs, "head_ids": nb.head_ids,
        "keep_row": keep_row, "sensitive": sensitive, "valid_input": emb.valid_input,
        **tables,
    }
    dim = emb.vectors.shape[1]
    quant_err = float(np.abs(metric_vectors - emb.vectors).max())
    manifest = {
        "params": {"epsilon": float(epsilon), "p": p, "w": w, "head_size": k,
                   "epsilon0": (math.log(1.0 / p) if mechanism == "santext+" else 0.0)},
        "privacy": {"d_max": nb.d_max,
                    "metric": "euclidean over the bundle's int8-quantized embeddings",
                    "quantization_max_abs_error": quant_err,
                    "notion": "UMLDP" if mechanism == "santext+" else "MLDP"},
        "vocab": {"size": n_rows, "dim": int(dim), "outputs": int(outputs.size),
                  "sensitive": int(sensitive.sum()), "kind": emb.kind},
        "sources": {"embeddings": emb.source,
                    "frequencies": (None if mechanism == "santext" else
                                    _freq.SOURCE if frequencies is None else "caller-supplied")},
        "numeric": {"max_relative_error": numeric_tolerance(float(epsilon), nb, metric_vectors,
                                                            int(outputs.size))},
        "build": {"tool": f"ldptext {ldptext.__version__}", "backend": nb.backend,
                  "neighbour_seconds": round(nb.seconds, 3),
                  "seconds": round(time.perf_counter() - t0, 3),
                  "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                  "python": platform.python_version()},
    }
    blobs = {"tokenizer.json": emb.tokenizer_json.encode("utf-8"),
             "vocab.json": _emb.vocab_json(emb.vocab)}
    key = _keys.build_signing_key(sign_key)
    return _bundle.write_bundle(out, mechanism=mechanism, arrays=arrays, manifest=manifest,
                                blobs=blobs, sign_key=key, passphrase=passphrase)
