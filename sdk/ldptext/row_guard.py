"""Nothing is drawn from a row that was not checked: each row's whole law, before its first draw.

A bundle's load-time checks (:mod:`ldptext.santext_check`, each runtime's ``check_parameters``) read a
sample of rows. A table that lies on one row only — its input released unchanged with probability 1,
say — passes a sample most of the time, so every runtime also checks a row's *whole* output law the
first time a draw needs it, and refuses the call before any draw if it is wrong (a
:class:`~ldptext.errors.ParameterMismatchError`, a bundle error: the document releases nothing).
With the C extension the check is libldptext's (``native/lib/check.c``: ``ldp_check_rows_of`` in
every sampling call, ``ldp_bundle_check_rows`` for ranges); this module is the same check for the
samplers that run outside the library (numpy, and the extension's own sampler), and for checking
every row of a bundle in ``ldptext bundle sign`` and ``bundle verify --full``.

What a row's law is checked against is its mechanism's (each runtime's ``_row_laws_ok``); for the
rows on the SanText engine, :func:`engine_tail_ok` adds what the law alone cannot show: every tail
output's second-trial exponent is >= 0 as the sampler computes it (the tail floor and the cluster
bounds are lower bounds), so that no draw can fail half-way through a document.
"""
from __future__ import annotations

import decimal
import threading
from fractions import Fraction
from typing import Callable

import numpy as np

from .engine_rows import engine_distance_rows
from .errors import ParameterMismatchError
from .santext_tables import SanTextTables

__all__ = ["RowGuard", "ROW_REFUSAL", "cluster_log", "engine_tail_ok", "law_matches", "check_all_rows"]

#: The refusal when a row is wrong. It names no row: a row id can reveal the word typed.
ROW_REFUSAL = ("a row of this bundle's tables is not what its stated parameters give (its whole output "
               "law was checked before its first draw); nothing was released")

#: Rows checked together (a block holds rows × |O| float64 values).
BLOCK = 128


def _cluster_log_table() -> np.ndarray:
    """LDP_CLUSTER_LOG of ``native/cluster_bounds.h``: −ln(⌈2³²·e^(−q/32)⌉ / 2³²) rounded down to a
    double, q = 0..255 (``native/gen_cluster_bounds.py`` explains it; recomputed here with ``decimal``
    so the check needs no generated file)."""
    out = np.empty(256)
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        for q in range(256):
            keep = int(((decimal.Decimal(-q) / 32).exp() * (1 << 32)).to_integral_value(decimal.ROUND_CEILING))
            x = -(decimal.Decimal(keep) / (1 << 32)).ln()
            exact = Fraction(x)
            f = float(x)
            if Fraction(f) > exact:
                f = float(np.nextafter(f, -np.inf))
            out[q] = max(f, 0.0)
    return out


_CLUSTER_LOG: np.ndarray | None = None


def cluster_log() -> np.ndarray:
    """The sampler's table LOG[q] (256 doubles), computed on first use."""
    global _CLUSTER_LOG
    if _CLUSTER_LOG is None:
        _CLUSTER_LOG = _cluster_log_table()
    return _CLUSTER_LOG


def engine_tail_ok(t: SanTextTables, xs: np.ndarray, *, engine_epsilon: float,
                   d: np.ndarray | None = None) -> np.ndarray:
    """Per row of ``xs``: every tail output's second-trial exponent is >= 0 (not NaN).

    The exponent is ``(ε_e/2·(d(x, y) − floor_x) − LOG[q]) + γ_K`` with q the row's bound for y's
    cluster, in the sampler's own order of operations (``native/santext_sampler.c`` tail_exponent):
    a negative one makes the sampler refuse mid-document; a floor or cluster bound that is not a
    lower bound is what makes it negative.

    Parameters
    ----------
    t : SanTextTables
    xs : np.ndarray of int, shape (n,)
    engine_epsilon : float
    d : np.ndarray of float64, shape (n, |O|), optional
        ``engine_distance_rows(t, xs, t.outputs)`` when the caller has it.

    Returns
    -------
    np.ndarray of bool, shape (n,)
    """
    xs = np.asarray(xs, dtype=np.int64)
    outs = t.outputs.astype(np.int64)
    if d is None:
        d = engine_distance_rows(t, xs, outs)
    k = t.head_size
    half = float(engine_epsilon) / 2.0
    gamma_k = t.stored("accept_gamma")[xs, k].astype(np.float64)
    q = t.cluster_gamma[xs][:, t.tail_cluster[outs]]
    e = (half * (d - t.tail_floor[xs][:, None]) - cluster_log()[q]) + gamma_k[:, None]
    in_head = np.zeros(d.shape, dtype=bool)
    pos = np.searchsorted(outs, t.stored("head_ids")[xs].astype(np.int64))
    in_head[np.arange(xs.size)[:, None], np.minimum(pos, outs.size - 1)] = True
    return np.where(in_head, True, e >= 0.0).all(axis=1)


class RowGuard:
    """The rows of one runtime whose whole law was checked; checks the others before a draw.

    Parameters
    ----------
    n_rows : int
        The bundle's V.
    laws_ok : callable
        ``laws_ok(rows) -> bool array``: each row's whole law is right (the runtime's own check).
    """

    def __init__(self, n_rows: int, laws_ok: Callable[[np.ndarray], np.ndarray]) -> None:
        self._state = np.zeros(n_rows, dtype=np.int8)  # 0 unchecked, 1 right, -1 refused
        self._laws_ok = laws_ok
        self._lock = threading.Lock()

    def require(self, xs: np.ndarray) -> None:
        """Check every row of ``xs`` not checked before; refuse if any is wrong.

        Raises
        ------
        ParameterMismatchError
            A row of ``xs`` is wrong (now or at an earlier check): no draw may use it.
        """
        state = self._state[xs]
        if (state == 1).all():
            return
        if (state < 0).any():
            raise ParameterMismatchError(ROW_REFUSAL)
        rows = np.unique(np.asarray(xs, dtype=np.int64)[state == 0])
        for start in range(0, rows.size, BLOCK):
            part = rows[start:start + BLOCK]
            ok = np.asarray(self._laws_ok(part), dtype=bool)
            with self._lock:  # a verdict is deterministic: two threads write the same one
                self._state[part] = np.where(ok, 1, -1)
            if not ok.all():
                raise ParameterMismatchError(ROW_REFUSAL)

    def check_all(self, rows: np.ndarray) -> np.ndarray:
        """Check ``rows`` (not raising); returns those that are wrong."""
        bad = []
        for start in range(0, rows.size, BLOCK):
            part = rows[start:start + BLOCK]
            ok = np.asarray(self._laws_ok(part), dtype=bool)
            self._state[part] = np.where(ok, 1, -1)
            bad.append(part[~ok])
        return np.concatenate(bad) if bad else np.empty(0, dtype=np.int64)


def check_all_rows(runtime) -> None:
    """Check every input row of ``runtime`` now (``bundle sign``, ``bundle verify --full``, a batch
    job that wants no check on its way): in libldptext, on every core, when the runtime samples
    there; else with the runtime's own row check.

    Raises
    ------
    ParameterMismatchError
        A row is wrong (:data:`ROW_REFUSAL`).
    """
    check_open = getattr(runtime, "_check_open", None)
    if check_open is not None:
        check_open()
    library = getattr(runtime, "_library", None)
    if library is not None and hasattr(library, "check_rows"):
        import os
        from concurrent.futures import ThreadPoolExecutor

        n = int(runtime.n_rows)
        workers = max(1, min(os.cpu_count() or 1, 8))
        step = max(1, -(-n // (workers * 4)))
        with ThreadPoolExecutor(max_workers=workers) as pool:  # the C call releases the GIL
            bad = [r for r in pool.map(lambda s: library.check_rows(s, step), range(0, n, step)) if r >= 0]
        if bad:
            raise ParameterMismatchError(ROW_REFUSAL)
        return
    guard = getattr(runtime, "_row_guard", None)
    if guard is None:  # a mechanism whose law is not a table per row (CMP, a plugin's own runtime)
        return
    rows = np.flatnonzero(np.asarray(runtime.valid_input, dtype=bool))
    if guard.check_all(rows).size:
        raise ParameterMismatchError(ROW_REFUSAL)


def law_matches(realised: np.ndarray, log_weights: np.ndarray, tol: float) -> np.ndarray:
    """Per row: the realised log-probabilities equal the normalised ``log_weights`` within ``tol``.

    Parameters
    ----------
    realised : np.ndarray of float64, shape (n, c)
        Normalised log-probabilities over the c outputs a row can release (the runtime's exact
        ``log_probabilities`` restricted to them).
    log_weights : np.ndarray of float64, shape (n, c)
        The formula's unnormalised log-weights (e.g. −ε·d/2).
    tol : float
        Largest allowed |realised − formula|.

    Returns
    -------
    np.ndarray of bool, shape (n,)
        False also where a realised probability is 0 (an output the formula gives mass never drawn).
    """
    mx = log_weights.max(axis=1, keepdims=True)
    formula = log_weights - (mx + np.log(np.exp(log_weights - mx).sum(axis=1, keepdims=True)))
    with np.errstate(invalid="ignore"):
        diff = np.abs(realised - formula).max(axis=1, initial=0.0)
    return np.isfinite(realised).all(axis=1) & (diff <= tol)
