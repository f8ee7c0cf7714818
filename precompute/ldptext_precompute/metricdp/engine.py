"""Exponential-mechanism rows expressed as tables of the exact SanText engine.

The engine (:mod:`ldptext.santext_tables`, ``native/santext_sampler.c``) samples slot j of row x with
probability ∝ q̂_j·exp(−γ_j), q̂ an integer alias proposal and γ_j ≥ 0 an exactly sampled acceptance
exponent. Any target row with log-weights W_j over a head of K outputs is realised exactly (up to
float64 rounding of γ) by ``q̂ = integer_masses(W)`` and ``γ_j = (log q̂_j − W_j) − min_i(log q̂_i −
W_i)``: after rejection-and-restart the output law is ∝ q̂_j·exp(−γ_j) ∝ exp(W_j). This is the
construction of ``ldptext_precompute.santext.build.sampling_tables`` for arbitrary log-weights and no
tail (the tail slot gets −∞, i.e. no proposal mass): CusText's rows are their output sets, so the
C sampler runs them unchanged.
"""
from __future__ import annotations

import math

import numpy as np

from ldptext import alias as _alias

U = 2.0 ** -53

__all__ = ["head_only_proposal", "head_only_tolerance"]


def head_only_proposal(log_w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Alias thresholds, alias slots and acceptance exponents for rows of head log-weights.

    Parameters
    ----------
    log_w : np.ndarray of float64, shape (V, K)
        Unnormalised log-weights of each row's K head slots; ``-inf`` for a slot that must never be
        output (padding); at least one finite per row.

    Returns
    -------
    alias_threshold : np.ndarray of uint32, shape (V, K + 1)
    alias_index : np.ndarray of uint16, shape (V, K + 1)
    accept_gamma : np.ndarray of float64, shape (V, K + 1)
        Minimum 0 per row; the tail slot K has no mass.
    """
    rows, k = log_w.shape
    full = np.full((rows, k + 1), -np.inf)
    full[:, :k] = log_w
    mass = _alias.integer_masses(full)
    threshold, alias_index = _alias.build_tables(mass)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_q = np.log(mass.astype(np.float64)) - math.log((k + 1) * _alias.COLUMN)
        ratio = np.where(mass > 0, log_q - full, np.inf)
    gamma = ratio - ratio.min(axis=1, keepdims=True)
    gamma[mass == 0] = 0.0  # never proposed
    return threshold, alias_index, gamma


def head_only_tolerance(log_w: np.ndarray, score_error: np.ndarray) -> float:
    """Bound on |log P̂ − log P| of every realised probability of :func:`head_only_proposal`'s rows.

    Each realised log-weight ``log q̂_j − γ_j`` is within ``16·u·magnitude`` of the computed W_j
    (float64 rounding of γ: a few operations on numbers of magnitude ≤ max|W| + log((K+1)·2^32)), and
    the computed W_j is within ``score_error`` (per row, supplied by the mechanism: its own float64
    error of the score against the exact formula) of the exact one; normalising at most doubles the
    bound.

    Parameters
    ----------
    log_w : np.ndarray of float64, shape (V, K)
        The log-weights the tables were built from (``-inf`` for padding).
    score_error : np.ndarray of float64, shape (V,)
        Per row, a bound on |W_computed − W_exact| over its finite slots.

    Returns
    -------
    float
        The tolerance a bundle states (``numeric.max_relative_error``).
    """
    k = log_w.shape[1]
    finite = np.where(np.isfinite(log_w), np.abs(log_w), 0.0)
    magnitude = float(finite.max()) + math.log((k + 1) * _alias.COLUMN)
    return float(2 * (16 * U * magnitude + float(np.max(score_error, initial=0.0))))
