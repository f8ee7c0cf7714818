"""The exact output law of the SanText engine for any tables, and its distances, as numpy functions.

The exact engine (integer alias proposal over a per-row head of K outputs plus a uniform tail,
corrected by an exact Bernoulli(exp(−γ)) acceptance; :mod:`ldptext.santext_tables`,
``native/santext_sampler.c``) samples, for row x and output y,

* head slot j: proportional to ``mass_j · exp(−γ_j)`` (``mass`` the alias table's exact integer
  masses, :func:`ldptext.alias.realised_masses`);
* tail output y: proportional to ``mass_K / T · exp(−γ_K − (ε_e/2)·(d(x, y) − floor_x))``, T the
  number of tail outputs, ε_e the *engine* ε the table was made with, d the engine's own float64
  distance (:func:`ldptext._fallback.distance_from_dot`, bit for bit the C sampler's);
* a kept row (``keep_row``) is released unchanged with probability 1 − p first.

The comparison mechanisms that are exponential mechanisms (:mod:`ldptext.custext`,
:mod:`ldptext.tem`) are run on this engine with tables of their own; this module computes what the
engine realises for them — with no sampling — so that the runtimes can report exact probabilities and
the tests can compare them with an independent evaluation of each paper's formula.
"""
from __future__ import annotations

import math

import numpy as np

from . import alias as _alias
from ._fallback import distance_from_dot
from .santext_tables import SanTextTables

__all__ = ["engine_log_probabilities", "engine_distance_rows", "engine_distances", "engine_dots"]


def engine_distance_rows(tables: SanTextTables, xs: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """d(x, y) for every x of ``xs`` and y of ``cols``, exactly as the C sampler computes it.

    Parameters
    ----------
    tables : SanTextTables
        The metric embedding (int8 codes, per-row scales, exact squared norms).
    xs : np.ndarray of int, shape (n,)
        Row ids.
    cols : np.ndarray of int, shape (c,)
        Column ids.

    Returns
    -------
    np.ndarray of float64, shape (n, c)
        Bit-identical to ``ldp_distance`` (the integer dot products are exact in float32 below
        2^24, i.e. for m < 1040; float64 beyond), then the sampler's float64 formula.
    """
    xs = np.asarray(xs, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    dot = engine_dots(tables, xs, cols)
    return distance_from_dot(tables.emb_scale[xs][:, None], tables.emb_sqnorm[xs][:, None],
                             tables.emb_scale[cols][None, :], tables.emb_sqnorm[cols][None, :], dot)


#: Columns whose int8 codes :func:`engine_dots` widens at a time (bounds its temporary memory).
_DOT_COLUMNS = 256


def engine_dots(tables: SanTextTables, xs: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """The integer dot products <q_x, q_y> of the int8 codes for every x of ``xs`` and y of
    ``cols``, exactly, as float64.

    Each product is an integer below 2^24 for m < 1040, exact in float32 in any summation order
    (float64 beyond), so the columns are widened a block at a time: the temporary memory is a
    block, not the whole ``cols × m`` embedding, and the values are the same.

    Parameters
    ----------
    tables : SanTextTables
    xs : np.ndarray of int, shape (n,)
    cols : np.ndarray of int, shape (c,)

    Returns
    -------
    np.ndarray of float64, shape (n, c)
    """
    dt = np.float32 if tables.dim < 1040 else np.float64
    q = tables.emb_q[np.asarray(xs, dtype=np.int64)].astype(dt)
    cols = np.asarray(cols, dtype=np.int64)
    out = np.empty((q.shape[0], cols.size), dtype=np.float64)
    for start in range(0, cols.size, _DOT_COLUMNS):
        part = cols[start:start + _DOT_COLUMNS]
        out[:, start:start + part.size] = q @ tables.emb_q[part].astype(dt).T
    return out


def engine_distances(tables: SanTextTables, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """d(a[i], b[i]) for pairs, exactly as the C sampler computes it.

    Parameters
    ----------
    tables : SanTextTables
    a, b : np.ndarray of int, shape (n,)

    Returns
    -------
    np.ndarray of float64, shape (n,)
    """
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    dot = np.einsum("ij,ij->i", tables.emb_q[a].astype(np.int32), tables.emb_q[b].astype(np.int32))
    return distance_from_dot(tables.emb_scale[a], tables.emb_sqnorm[a], tables.emb_scale[b],
                             tables.emb_sqnorm[b], dot)


def engine_log_probabilities(tables: SanTextTables, xs: np.ndarray, *, engine_epsilon: float,
                             p: float) -> np.ndarray:
    """The log-probabilities log Pr[engine(x) = y] for every x of ``xs`` and every row y, as the sampler realises it.

    Parameters
    ----------
    tables : SanTextTables
        Validated tables.
    xs : np.ndarray of int, shape (n,)
        Input rows.
    engine_epsilon : float
        The ε the sampler table was made with (``make_santext_table(epsilon=...)``); the sampler
        uses ``engine_epsilon / 2.0`` in float64, and so does this function.
    p : float
        Probability of sanitizing a kept row (``keep_row``), in [0, 1].

    Returns
    -------
    np.ndarray of float64, shape (n, V)
        Normalised log-probabilities; ``-inf`` where the probability is exactly 0.
    """
    t, k, outs = tables, tables.head_size, tables.outputs
    xs = np.atleast_1d(np.asarray(xs, dtype=np.int64))
    gamma = t.stored("accept_gamma")[xs].astype(np.float64)  # the rows only, widened exactly
    mass = _alias.realised_masses(t.alias_threshold[xs], t.stored("alias_index")[xs])
    with np.errstate(divide="ignore"):
        log_q = np.log(mass.astype(np.float64))
    rows = np.arange(xs.size)
    lp = np.full((xs.size, t.n_rows), -np.inf)
    tail_count = outs.size - k
    half = float(engine_epsilon) / 2.0
    if tail_count > 0 and (mass[:, k] > 0).any():
        d = engine_distance_rows(t, xs, outs)
        with np.errstate(invalid="ignore"):  # rows whose tail slot has mass 0: -inf
            base = log_q[:, k] - math.log(tail_count) - gamma[:, k]
            lp[:, outs] = base[:, None] - half * (d - t.tail_floor[xs][:, None])
    lp[rows[:, None], t.stored("head_ids")[xs]] = log_q[:, :k] - gamma[:, :k]
    m = lp.max(axis=1, keepdims=True)
    lp -= m + np.log(np.exp(lp - m).sum(axis=1, keepdims=True))
    keep = t.keep_row[xs].astype(bool)
    if keep.any():  # kept row: sanitized w.p. p, released unchanged w.p. 1 - p
        kr = rows[keep]
        if p <= 0.0:
            lp[kr] = -np.inf
            lp[kr, xs[kr]] = 0.0
        else:
            lp[kr] += math.log(p)
            if p < 1.0:
                lp[kr, xs[kr]] = np.logaddexp(lp[kr, xs[kr]], math.log1p(-p))
    return lp
