"""Do a bundle's stated privacy parameters match what its arrays realise? Checked before (re-)signing.

A signature vouches for the manifest; ``ldptext bundle sign`` (with or without ``--force``) must
therefore never sign a manifest whose numbers the tables do not implement. :func:`check_parameters`
recomputes what it can from the arrays and refuses a mismatch with
:class:`~ldptext.errors.ParameterMismatchError`:

SanText / SanText+
    The full runtime schema and semantic checks (:class:`ldptext.santext.Sanitizer`: array dtypes
    and shapes, ``head_size`` = K of ``head_ids``, p ∈ (0, 1], ε > 0); ε₀ = ln(1/p) for SanText+;
    **ε from the tables**: for sampled rows x, the realised log-probabilities of the K head outputs
    (alias masses and acceptance exponents, :meth:`ldptext.santext.Sanitizer.log_probabilities`) must
    satisfy log Pr[y₁] − log Pr[y₂] = −ε·(d(x, y₁) − d(x, y₂))/2 for the manifest's ε, within the
    stated numeric tolerance (the realised ε, a least-squares fit, is named in the error); **D_max**:
    the distance from sampled rows (the largest-norm rows and an even spread) to every valid input
    must not exceed the stated D_max (a sampled, one-sided check: it catches an understated D_max
    whenever a sampled pair exceeds it).
DP-BART
    The structural fields the noise calibration uses: |P| (``n_pruned``) = length of ``pruned``, its
    indices distinct and in [0, d); the encoder graph, run on one input of length L (``seq_len``),
    returns shape (1, L, d) with d = ``hidden``.

TEM, CusText / CusText+, CMP, Mahalanobis
    :func:`ldptext.token_runtime.check_parameters`: the bundle must load with its runtime class, then
    the runtime's ``check_parameters`` (TEM: ε and γ from the realised log-probabilities against
    −ε·min(d, γ)/2, γ against β, ``bot_count``, D_max; CusText: ε and the similarity from the realised
    log-probabilities over sampled output sets, p, group statistics; CMP / Mahalanobis: D_max in the
    guarantee's metric, S against λ — ε is in no array, the noise reads it from the manifest); every
    mechanism's stated worst case must be the one its parameters give.

p itself is not encoded in any array (the sampler reads it from the manifest), so the manifest's p
is by construction the realised one; it is range-checked.
"""
from __future__ import annotations

import math

import numpy as np

from .bundle import Bundle
from .errors import BundleError, ParameterMismatchError

__all__ = ["check_parameters"]

_ROWS = 16
_COMPARISON = ("tem", "custext", "custext+", "cmp", "mahalanobis")


def check_parameters(bundle: Bundle) -> None:
    """Refuse a bundle whose manifest parameters disagree with its arrays.

    Parameters
    ----------
    bundle : Bundle
        A bundle whose structure and hashes were verified (trust need not be decided).

    Raises
    ------
    ParameterMismatchError
        A stated parameter (ε, ε₀, p, head size, D_max, L, d, |P|) is not what the arrays realise, or the
        bundle is not a loadable bundle of its mechanism.
    """
    if bundle.mechanism in ("santext", "santext+"):
        _check_santext(bundle)
    elif bundle.mechanism == "dpbart":
        _check_dpbart(bundle)
    elif bundle.mechanism in _COMPARISON:  # TEM, CusText(+), CMP, Mahalanobis: their runtimes' checks
        from .token_runtime import check_parameters as check_comparison

        check_comparison(bundle)
    else:  # pragma: no cover - read_bundle refuses unknown mechanisms
        raise ParameterMismatchError(f"no parameter check for mechanism {bundle.mechanism!r}")


def _sample_rows(candidates: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Up to ``_ROWS`` rows: the highest-scoring half, and an even spread for the rest."""
    if candidates.size <= _ROWS:
        return candidates
    top = candidates[np.argsort(-score[candidates], kind="stable")[:_ROWS // 2]]
    spread = candidates[np.linspace(0, candidates.size - 1, _ROWS // 2).astype(np.int64)]
    return np.unique(np.concatenate([top, spread]))


def _check_santext(bundle: Bundle) -> None:
    from ._fallback import distance_from_dot
    from .santext import Sanitizer

    params = bundle.manifest.get("params")
    if bundle.mechanism == "santext" and isinstance(params, dict) and params.get("p") is not None:
        raise ParameterMismatchError("a SanText bundle states p (SanText+ only)")
    try:
        san = Sanitizer(bundle, backend="fallback")
    except BundleError as e:
        raise ParameterMismatchError(f"not a loadable {bundle.mechanism} bundle: {e}") from None
    except ValueError:  # the sampler's own parameter check
        raise ParameterMismatchError(f"not a loadable {bundle.mechanism} bundle: parameters out of range") from None
    t, k, eps = san.tables, san.head_size, san.epsilon
    if san.mechanism == "santext+":
        if not math.isclose(san.epsilon0, math.log(1.0 / san.p), rel_tol=1e-12, abs_tol=1e-12):
            raise ParameterMismatchError(f"manifest epsilon0 {san.epsilon0:.12g} is not ln(1/p) = "
                                         f"{math.log(1.0 / san.p):.12g}")
    elif san.epsilon0 != 0:
        raise ParameterMismatchError("a SanText bundle states a non-zero epsilon0")
    scale = t.emb_scale.astype(np.float64)
    norms = scale * np.sqrt(t.emb_sqnorm.astype(np.float64))
    valid = np.flatnonzero(t.valid_input)
    rows = _sample_rows(valid, norms)

    def dist(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
        dot = t.emb_q[xs].astype(np.float64) @ t.emb_q[ys].astype(np.float64).T
        return distance_from_dot(scale[xs][:, None], t.emb_sqnorm[xs][:, None].astype(np.float64),
                                 scale[ys][None, :], t.emb_sqnorm[ys][None, :].astype(np.float64), dot)

    # D_max: no sampled pair of valid inputs may be farther apart than stated
    far = float(dist(rows, valid).max()) if rows.size and valid.size else 0.0
    if far > san.d_max * (1 + 1e-9) + 1e-12:
        raise ParameterMismatchError(f"manifest D_max {san.d_max:.6g} is below a realised distance "
                                     f"{far:.6g} between two valid inputs")
    # epsilon: the head's realised log-ratios against the distances
    # the manifest bounds |log P_realised - log P_formula| by `tolerance` per probability, so a
    # difference of two log-probabilities by twice that (plus float rounding of eps * d / 2)
    tol = 2.0 * san.tolerance + 1e-12 * (1.0 + eps * san.d_max)
    lp = san.log_probabilities(rows)
    checked = 0
    slopes = []
    for i, x in enumerate(rows):
        head = t.head_ids[x]
        keep = head != x if t.keep_row[x] else np.ones(k, dtype=bool)
        realised = lp[i, head]
        keep &= np.isfinite(realised)
        d = dist(np.array([x]), head)[0]
        if keep.sum() < 2 or np.ptp(d[keep]) <= 1e-9:
            continue
        r, dd = realised[keep], d[keep]
        residual = r + eps / 2 * dd
        slopes.append(-2 * np.polyfit(dd, r, 1)[0])
        checked += 1
        if np.ptp(residual) > tol:
            raise ParameterMismatchError(
                f"manifest epsilon {eps:.10g} is not what the tables realise (about "
                f"{float(np.median(slopes)):.10g}: log-probability ratios of head outputs)")
    if checked == 0:
        raise ParameterMismatchError("cannot check epsilon against the tables: no sampled row has two "
                                     "head outputs at different distances")


def _check_dpbart(bundle: Bundle) -> None:
    cfg = bundle.manifest.get("dpbart")
    if not isinstance(cfg, dict):
        raise ParameterMismatchError("dpbart manifest section is missing")
    try:
        seq_len, hidden = int(cfg["seq_len"]), int(cfg["hidden"])
        n_pruned = cfg.get("n_pruned")
    except (KeyError, TypeError, ValueError):
        raise ParameterMismatchError("dpbart manifest lacks seq_len or hidden") from None
    if seq_len < 1 or hidden < 1:
        raise ParameterMismatchError("dpbart seq_len and hidden must be positive")
    pruned = np.asarray(bundle.arrays["pruned"], dtype=np.int64) if "pruned" in bundle.arrays \
        else np.zeros(0, np.int64)
    if pruned.ndim != 1:
        raise ParameterMismatchError("array 'pruned' is not one-dimensional")
    if n_pruned is not None and n_pruned != pruned.size:
        raise ParameterMismatchError(f"manifest n_pruned {n_pruned} is not |P| = {pruned.size} (array 'pruned')")
    if pruned.size and (pruned.min() < 0 or pruned.max() >= hidden or np.unique(pruned).size != pruned.size):
        raise ParameterMismatchError(f"pruned indices are not distinct indices in [0, {hidden})")
    try:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        enc = ort.InferenceSession(bundle.blob("encoder.onnx"), sess_options=opts,
                                   providers=["CPUExecutionProvider"])
        pad = int(cfg.get("special", {}).get("pad", 0))
        ids = np.full((1, seq_len), pad, dtype=np.int64)
        ids[0, 0] = int(cfg.get("special", {}).get("bos") or pad)
        out = enc.run(None, {"input_ids": ids, "attention_mask": np.ones((1, seq_len), np.int64)})[0]
    except BundleError as e:
        raise ParameterMismatchError(f"not a loadable dpbart bundle: {e}") from None
    except Exception as e:  # ONNX Runtime raises its own types
        raise ParameterMismatchError(f"the encoder graph does not run on an input of length L={seq_len}: "
                                     f"{type(e).__name__}") from None
    if tuple(out.shape) != (1, seq_len, hidden):
        raise ParameterMismatchError(f"the encoder graph returns shape {tuple(out.shape)}, but the manifest "
                                     f"states L={seq_len}, d={hidden}")
