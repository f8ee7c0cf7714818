"""Alias tables with integer thresholds, and their exact realised probabilities.

A row of ``S`` slots is stored as ``threshold`` (uint32) and ``alias`` (uint16): draw a column ``j``
uniformly, keep ``j`` if a uniform 32-bit word is ``< threshold[j]``, else take ``alias[j]`` (a full
column has ``alias[j] == j``). Because the table is built from *integer* masses that sum to exactly
``S · 2^32``, the probability the sampler realises for slot ``i`` is exactly ``mass[i] / (S · 2^32)``
with no rounding: :func:`realised_masses` recomputes those masses from a stored table, which is how the
runtime and the tests know the exact proposal distribution (Walker 1977; Vose 1991).
"""
from __future__ import annotations

import numpy as np

COLUMN = 1 << 32  # units of probability mass per column


def integer_masses(log_weights: np.ndarray, floor_units: int = 1 << 12) -> np.ndarray:
    """Integer masses (int64, summing to ``S·2^32`` per row) proportional to ``exp(log_weights)``.

    Slots with weight 0 (``-inf``) get mass 0; every other slot gets at least ``floor_units`` so that
    no positive-probability slot becomes unreachable (the sampler's acceptance step corrects the
    proposal back to the exact target, see ``ldptext_precompute.santext.build``).

    Parameters
    ----------
    log_weights : np.ndarray of float, shape (rows, S)
        Unnormalised log-weights; ``-inf`` for an impossible slot, at least one finite per row.
    floor_units : int
        Smallest mass of a possible slot, in units of 2^-32 of a column.

    Returns
    -------
    np.ndarray of int64, shape (rows, S)
        Non-negative masses, each row summing to exactly ``S · 2^32``.

    Raises
    ------
    ValueError
        A row has no finite weight, or too many slots for the floor.
    """
    lw = np.asarray(log_weights, dtype=np.float64)
    rows, slots = lw.shape
    total = slots * COLUMN
    positive = np.isfinite(lw)
    if not positive.any(axis=1).all():
        raise ValueError("every row needs at least one slot of positive weight")
    shifted = np.where(positive, lw - np.max(np.where(positive, lw, -np.inf), axis=1,
                                             keepdims=True), -np.inf)
    prob = np.exp(shifted)
    prob /= prob.sum(axis=1, keepdims=True)
    mass = np.floor(prob * total).astype(np.int64)
    mass = np.where(positive, np.maximum(mass, floor_units), 0)
    # put the rounding remainder on each row's largest slot (it stays far above the floor)
    big = np.argmax(mass, axis=1)
    mass[np.arange(rows), big] += total - mass.sum(axis=1)
    if (mass[np.arange(rows), big] <= 0).any():
        raise ValueError("too many slots for the requested floor")
    return mass


def build_tables(mass: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vose's alias construction on exact integer masses.

    Parameters
    ----------
    mass : np.ndarray of int64, shape (rows, S)
        Non-negative masses summing to ``S · 2^32`` per row (:func:`integer_masses`), S < 65536.

    Returns
    -------
    threshold : np.ndarray of uint32, shape (rows, S)
        Keep column j if a uniform 32-bit word is below ``threshold[j]``.
    alias : np.ndarray of uint16, shape (rows, S)
        Otherwise take slot ``alias[j]`` (``alias[j] == j`` for a full column).

    Raises
    ------
    ValueError
        Too many slots, or masses that are negative or do not sum to ``S · 2^32``.
    """
    rows, slots = mass.shape
    if slots >= 1 << 16:
        raise ValueError("at most 65535 slots per row")
    if (mass.sum(axis=1) != slots * COLUMN).any() or (mass < 0).any():
        raise ValueError("masses must be non-negative and sum to slots * 2^32 per row")
    threshold = np.zeros((rows, slots), dtype=np.uint32)
    alias = np.tile(np.arange(slots, dtype=np.uint16), (rows, 1))
    full = np.uint32(COLUMN - 1)
    for r in range(rows):
        m = [int(v) for v in mass[r]]
        small = [i for i in range(slots) if m[i] < COLUMN]
        large = [i for i in range(slots) if m[i] >= COLUMN]
        thr, ali = threshold[r], alias[r]
        while small and large:
            s, big = small.pop(), large[-1]
            thr[s] = m[s]
            ali[s] = big
            m[big] -= COLUMN - m[s]
            if m[big] < COLUMN:
                large.pop()
                small.append(big)
        for i in large + small:  # exactly COLUMN left (integer conservation): a full column
            if m[i] != COLUMN:
                raise AssertionError("alias construction lost mass")
            thr[i] = full
            ali[i] = i
    return threshold, alias


def realised_masses(threshold: np.ndarray, alias: np.ndarray) -> np.ndarray:
    """Exact integer mass (out of ``S·2^32``) that a stored table gives each slot.

    Parameters
    ----------
    threshold : np.ndarray of uint32, shape (rows, S)
        Stored thresholds.
    alias : np.ndarray of int (uint16 in bundles), shape (rows, S)
        Stored alias slots, each < S.

    Returns
    -------
    np.ndarray of int64, shape (rows, S)
        The proposal probability of slot i is exactly ``mass[i] / (S · 2^32)``.
    """
    threshold = np.asarray(threshold, dtype=np.int64)
    alias = np.asarray(alias, dtype=np.int64)
    rows, slots = threshold.shape
    own = np.where(alias == np.arange(slots), COLUMN, threshold)
    mass = own.copy()
    away = np.where(alias == np.arange(slots), 0, COLUMN - threshold)
    np.add.at(mass, (np.repeat(np.arange(rows), slots), alias.ravel()), away.ravel())
    return mass
