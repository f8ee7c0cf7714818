"""The SanText / SanText+ conditional distributions as row functions for :mod:`.metrics`.

SanText / SanText+ (Yue et al. 2021, *Differential Privacy for Text Analytics via Natural Text
Sanitization* (Findings of ACL), as presented in Yue 2023, *Data Synthesis: Boosting Utility and
Privacy in NLP* (PhD thesis, Ohio State), §2.4): with d the Euclidean distance of the bundle's
embeddings and O the output domain,

* SanText, and SanText+ for a sensitive input x: ``Pr[M(x)=y] = exp(−ε d(x,y)/2) / Σ_{y'∈O} exp(−ε
  d(x,y')/2)`` for y ∈ O;
* SanText+ for a non-sensitive input x: ``(1 − p)·[y = x] + p·(the row above)``.

:func:`santext_log_prob_rows` evaluates these formulas for a chunk of rows at once (one float64 matrix
product per chunk, log-sum-exp normalisation, so no underflow at any ε). The sampler realises them up
to the relative tolerance its bundle states (≤ 1e-9, ``Sanitizer.tolerance``); ``Sanitizer.log_probabilities``
returns the realised values exactly but one row at a time (~3 ms per row at 20k words), too slow for
a whole vocabulary on every ε. The runner therefore uses the formula for the full pass and checks it
against ``Sanitizer.log_probabilities`` on a sample of rows, recording the largest difference.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["santext_log_prob_rows", "santext_keep_rows", "realised_agreement"]


def santext_keep_rows(san) -> np.ndarray:
    """Inputs that SanText+ may release unchanged (V_N): valid, non-sensitive; none for SanText.

    Parameters
    ----------
    san : ldptext.santext.Sanitizer
        A loaded bundle.

    Returns
    -------
    numpy.ndarray, bool, shape (V,)
    """
    if san.mechanism != "santext+":
        return np.zeros(len(san.valid_input), dtype=bool)
    return np.asarray(san.valid_input, bool) & ~np.asarray(san.sensitive, bool)


def santext_log_prob_rows(san) -> Callable[[np.ndarray], np.ndarray]:
    """Row function of the SanText(+) formula over the Sanitizer's own embeddings, outputs, ε and p.

    Parameters
    ----------
    san : ldptext.santext.Sanitizer
        A loaded bundle (see the module docstring for the formula).

    Returns
    -------
    callable
        ``rows(xs)``: for int64 input ids ``xs`` of shape (n,), the float64 array of shape (n, V) of
        natural-log probabilities ``log Pr[M(x)=y]`` (``-inf`` outside the support); rows sum to 1.
    """
    emb = np.asarray(san.embeddings, dtype=np.float64)
    outputs = np.asarray(san.outputs, dtype=np.int64)
    v = emb.shape[0]
    out_emb = emb[outputs]
    out_sq = np.einsum("ij,ij->i", out_emb, out_emb)
    half_eps = float(san.epsilon) / 2.0
    keep = santext_keep_rows(san)
    p = float(san.p) if san.p is not None else 1.0
    log_p, log_keep = (np.log(p), np.log1p(-p)) if p < 1.0 else (0.0, -np.inf)

    def rows(xs: np.ndarray) -> np.ndarray:
        xs = np.asarray(xs, dtype=np.int64)
        q = emb[xs]
        sq = np.maximum(np.einsum("ij,ij->i", q, q)[:, None] + out_sq[None, :] - 2.0 * (q @ out_emb.T),
                        0.0)
        dist = np.sqrt(sq)
        # an input that is itself an output is at distance exactly 0 from itself (no cancellation)
        self_col = np.full(v, -1, dtype=np.int64)
        self_col[outputs] = np.arange(outputs.size)
        pos = self_col[xs]
        has = pos >= 0
        dist[np.nonzero(has)[0], pos[has]] = 0.0
        logits = -half_eps * dist
        mx = logits.max(axis=1, keepdims=True)
        logits -= mx + np.log(np.exp(logits - mx).sum(axis=1, keepdims=True))
        res = np.full((xs.size, v), -np.inf)
        res[:, outputs] = logits
        kr = np.nonzero(keep[xs])[0]
        if kr.size:
            res[kr] += log_p
            res[kr, xs[kr]] = np.logaddexp(res[kr, xs[kr]], log_keep)
        return res

    return rows


def realised_agreement(san, rows_fn: Callable[[np.ndarray], np.ndarray],
                       sample: np.ndarray) -> dict:
    """Largest differences between the formula rows and ``san.log_probabilities`` on sample rows.

    Parameters
    ----------
    san : ldptext.santext.Sanitizer
        The bundle whose sampler realises the distribution.
    rows_fn : callable
        The formula, as returned by :func:`santext_log_prob_rows`.
    sample : numpy.ndarray, integer, shape (n,)
        Input ids to compare.

    Returns
    -------
    dict
        ``rows_checked`` (int), ``max_abs_diff`` (float, in probability), ``max_rel_diff`` (float,
        where the realised probability is positive) and ``zero_pattern_equal`` (bool: both have the
        same zero entries).
    """
    sample = np.asarray(sample, dtype=np.int64)
    formula = np.exp(rows_fn(sample))
    realised = np.exp(np.asarray(san.log_probabilities(sample), dtype=np.float64))
    pos = realised > 0
    rel = np.abs(formula[pos] - realised[pos]) / realised[pos]
    return {"rows_checked": int(sample.size),
            "max_abs_diff": float(np.abs(formula - realised).max()) if sample.size else 0.0,
            "max_rel_diff": float(rel.max()) if rel.size else 0.0,
            "zero_pattern_equal": bool(np.array_equal(formula > 0, pos))}
