"""How often a sensitive word leaves the device unchanged: the verbatim rate, and when it is too high.

A metric-LDP guarantee holds at every finite ε, but at a large enough ε it says little: SanText
releases most sensitive words as themselves. The verbatim rate of an input x is P(M(x) = x); for
SanText and for SanText+'s sensitive words (V_S) it is

    P(M(x) = x) = 1 / Σ_{y ∈ O} exp(−ε·(d(x, y) − d(x, x))/2)        (0 when x is not an output),

O the output domain (Yue et al. 2021, *Differential Privacy for Text Analytics via Natural Text
Sanitization* (Findings of ACL), as presented in Yue 2023, *Data Synthesis: Boosting Utility and
Privacy in NLP* (PhD thesis, Ohio State), §2.4; N_x of §2.5.5). The build computes it for every
sensitive input of the bundle's tables (the sampler realises this formula to the bundle's stated
tolerance) and states the largest and the median; each load checks the stated largest value
against rows it computes itself.

**Near identity.** A bundle whose median verbatim rate is at least :data:`NEAR_IDENTITY_MEDIAN`
releases most sensitive words unchanged: it is refused at build and at load unless explicitly
allowed (``--allow-weak-privacy`` / ``allow_weak_privacy=True``), and then every report says so.
At load (:func:`near_identity_at_load`, the same rule as libldptext's ``ldp_near_identity``) a
bundle is also near identity when it states no median and the sensitive rows drawn at random show
one at or above the threshold (:func:`sampled_near_identity`), and when most of its valid inputs are
kept in the clear with probability at least the threshold (:func:`kept_in_clear_majority`).
"""
from __future__ import annotations

import dataclasses
import math
import os
import secrets
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .engine_rows import engine_distance_rows, engine_dots
from .errors import ParameterMismatchError, WeakPrivacyError
from .santext_tables import SanTextTables, unique_rows

__all__ = ["NEAR_IDENTITY_MEDIAN", "TAIL_LEVELS", "TAIL_QUANTILES", "VerbatimRate", "format_probability",
           "quantile_rank", "WeakPrivacyError", "verbatim_probabilities",
           "sensitive_inputs", "verbatim_rate", "refuse_near_identity", "check_stated_maximum", "with_kept_in_clear",
           "check_stated_median", "median_threshold", "random_sensitive_rows", "relative_weights",
           "kept_in_clear_majority", "sampled_near_identity", "near_identity_at_load"]

#: A median verbatim rate over the sensitive inputs at or above this refuses the bundle (nine
#: sensitive words in ten released unchanged: the output is close to the input).
NEAR_IDENTITY_MEDIAN = 0.9

#: Rows per block of the exact computation (a block holds rows × |O| float64 values).
_BLOCK = 256


#: The two levels whose counts a manifest states (``above_0_5``, ``above_0_9``): the number of
#: sensitive inputs released unchanged with probability at least each.
TAIL_LEVELS = (0.5, 0.9)
#: The percentiles a manifest states (``p90``, ``p99``), as fractions.
TAIL_QUANTILES = (0.9, 0.99)


def quantile_rank(q: float, n: int) -> int:
    """The 1-based rank of the ``q`` quantile of ``n`` sorted values: the smallest value with at
    least q·n values at or below it (numpy's ``inverted_cdf``), so a stated percentile is always one
    of the rates, and the counts above it follow from the rank alone."""
    return min(n, max(1, math.ceil(q * n - 1e-9)))


def format_probability(v: float) -> str:
    """A probability with enough digits that a value below 1 never reads as 1 (0.99998, not 1).

    Three significant digits, and for a value in [0.99, 1) as many decimals as 1 − v needs for two
    significant digits of its own."""
    if 0.99 <= v < 1.0:
        decimals = min(17, max(3, 1 - math.floor(math.log10(1.0 - v))))
        return f"{v:.{decimals}f}".rstrip("0")
    return f"{v:.3g}"


@dataclass(frozen=True)
class VerbatimRate:
    """The verbatim rate P(M(x) = x) over a bundle's sensitive inputs.

    Attributes
    ----------
    maximum, median : float
        Largest and median P(M(x) = x) over the sensitive inputs.
    inputs : int
        Number of sensitive inputs they are taken over.
    cap : float or None
        The cap τ the build enforced (every sensitive input's rate ≤ τ); ``None``: no cap (or a
        bundle older than the field).
    p90, p99 : float or None
        The 90th and 99th percentiles (:func:`quantile_rank`: each is one of the rates); ``None`` in
        a bundle older than the fields.
    above_0_5, above_0_9 : int or None
        How many sensitive inputs are released unchanged with probability ≥ 0.5 and ≥ 0.9.
    verdict : bool or None
        Near identity as the load decided it (:func:`near_identity_at_load`); ``None``: the median
        decides (a stated rate, or a build).
    reason : str or None
        Why the load's verdict is near identity, in words (no input text).
    estimated : bool
        The rates are those of sensitive inputs drawn at load (the bundle states none).
    """

    maximum: float
    median: float
    inputs: int
    cap: float | None = None
    p90: float | None = None
    p99: float | None = None
    above_0_5: int | None = None
    above_0_9: int | None = None
    verdict: bool | None = None
    reason: str | None = None
    estimated: bool = False

    @property
    def near_identity(self) -> bool:
        """The load's verdict where it made one (:func:`near_identity_at_load`), else whether the
        median is at least :data:`NEAR_IDENTITY_MEDIAN`."""
        return self.median >= NEAR_IDENTITY_MEDIAN if self.verdict is None else self.verdict

    @property
    def has_tail(self) -> bool:
        """Whether the tail statistics (percentiles and counts) are stated."""
        return self.p90 is not None

    @classmethod
    def of(cls, rates: np.ndarray, cap: float | None = None) -> "VerbatimRate":
        """The summary of the rates of every sensitive input (build time).

        Parameters
        ----------
        rates : np.ndarray of float64
            P(M(x) = x) of every sensitive input.
        cap : float or None
            The cap the build enforced (stated, not applied here).
        """
        v = np.sort(np.asarray(rates, dtype=np.float64))
        n = int(v.size)
        if n == 0:
            return cls(0.0, 0.0, 0, cap, 0.0, 0.0, 0, 0)
        p90, p99 = (float(v[quantile_rank(q, n) - 1]) for q in TAIL_QUANTILES)
        counts = [int(n - np.searchsorted(v, level, side="left")) for level in TAIL_LEVELS]
        return cls(float(v[-1]), float(np.median(v)), n, cap, p90, p99, counts[0], counts[1])

    def as_manifest(self) -> dict:
        """The manifest's ``privacy.verbatim`` section."""
        out = {"max": self.maximum, "median": self.median, "inputs": self.inputs,
               "near_identity_median": NEAR_IDENTITY_MEDIAN, "cap": self.cap}
        if self.has_tail:
            out.update(p90=self.p90, p99=self.p99, above_0_5=self.above_0_5, above_0_9=self.above_0_9)
        return out

    @classmethod
    def from_manifest(cls, section: object) -> "VerbatimRate | None":
        """Read ``privacy.verbatim`` (``None`` when absent: a bundle older than the field; the cap and
        the tail statistics are ``None`` in a bundle older than they are).

        Raises
        ------
        ParameterMismatchError
            The section is malformed, or its numbers contradict one another: not probabilities, a
            largest rate above the stated cap, percentiles out of order, or counts that the
            percentiles and the largest rate rule out.
        """
        if section is None:
            return None
        try:
            cap = section.get("cap")
            tail = [section.get(k) for k in ("p90", "p99", "above_0_5", "above_0_9")]
            if any(x is None for x in tail) and any(x is not None for x in tail):
                raise ValueError("partial tail")
            rate = cls(_number(section["max"]), _number(section["median"]), _count(section["inputs"]),
                       None if cap is None else _number(cap),
                       *(None if x is None else _number(x) for x in tail[:2]),
                       *(None if x is None else _count(x) for x in tail[2:]))
        except (AttributeError, KeyError, TypeError, ValueError):
            raise ParameterMismatchError("manifest privacy.verbatim is malformed") from None
        if not (0.0 <= rate.median <= rate.maximum <= 1.0) or rate.inputs < 0:
            raise ParameterMismatchError("manifest privacy.verbatim is not a probability summary")
        if rate.cap is not None:
            if not 0.0 < rate.cap <= 1.0:
                raise ParameterMismatchError("manifest privacy.verbatim.cap is not in (0, 1]")
            if rate.maximum > rate.cap:
                raise ParameterMismatchError(
                    f"manifest states a largest verbatim rate of {rate.maximum!r} above its own cap "
                    f"{rate.cap!r}")
        if rate.has_tail:
            rate._check_tail()
        return rate

    def _check_tail(self) -> None:
        """Refuse tail statistics that contradict each other or the largest rate and the median.

        With p_q the value of rank r_q = :func:`quantile_rank` (q, n) among the n sorted rates, at
        least n − r_q + 1 rates are ≥ p_q and at most n − r_q are > p_q; a count above a level is
        bounded accordingly. The largest rate is one of the rates: a level at or below it has a count
        of at least 1, a level above it a count of 0."""
        n = self.inputs
        if not (self.median <= self.p90 <= self.p99 <= self.maximum):
            raise ParameterMismatchError("manifest privacy.verbatim: percentiles are not ordered "
                                         "(median <= p90 <= p99 <= max)")
        counts = (self.above_0_5, self.above_0_9)
        if not (0 <= counts[1] <= counts[0] <= n):
            raise ParameterMismatchError("manifest privacy.verbatim: counts are not ordered "
                                         "(0 <= above_0_9 <= above_0_5 <= inputs)")
        if n == 0:
            if self.maximum or self.p90 or self.p99 or counts[0]:
                raise ParameterMismatchError("manifest privacy.verbatim: statistics of no input")
            return
        for level, count in zip(TAIL_LEVELS, counts):
            if (count >= 1) != (self.maximum >= level):
                raise ParameterMismatchError(f"manifest privacy.verbatim: {count} inputs stated at or above "
                                             f"{level:g} but a largest rate of {self.maximum!r}")
            for q, value in zip(TAIL_QUANTILES, (self.p90, self.p99)):
                r = quantile_rank(q, n)
                if (value >= level and count < n - r + 1) or (value < level and count > n - r):
                    raise ParameterMismatchError(
                        f"manifest privacy.verbatim: the count at or above {level:g} contradicts the "
                        f"stated {round(q * 100)}th percentile")

    def weak_privacy_statement(self) -> dict:
        """The manifest's ``privacy.weak_privacy`` entry of a near-identity build (allowed with
        ``--allow-weak-privacy``); empty otherwise."""
        return {"weak_privacy": "allowed at build: " + self.describe()} if self.near_identity else {}

    def describe(self) -> str:
        """One phrase for reports and ``bundle inspect``."""
        text = (f"sensitive words released unchanged with probability {self.median:.3g} (median) "
                f"to {format_probability(self.maximum)} (largest) over {self.inputs} inputs")
        if self.estimated:
            text += " drawn at load (the bundle states none)"
        return text + (f"; near identity: {self.reason}" if self.verdict and self.reason else "")


def _number(x: object) -> float:
    """A finite JSON number (not a bool, not a string)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise ValueError("not a finite number")
    return float(x)


def _count(x: object) -> int:
    """A JSON integer ≥ 0 (an integral float such as 3.0 is accepted)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or x != int(x) or x < 0:
        raise ValueError("not a count")
    return int(x)


def sensitive_inputs(t: SanTextTables) -> np.ndarray:
    """The rows the rate is taken over: valid inputs that are not kept in the clear (V_S for
    SanText+, every valid input for SanText)."""
    return np.flatnonzero(t.valid_input.astype(bool) & ~t.keep_row.astype(bool))


def _weights(t: SanTextTables, xs: np.ndarray, half: float, cols: np.ndarray, col_scale: np.ndarray,
             col_sq: np.ndarray) -> np.ndarray:
    """exp(−ε/2·d(x, y)) for x of ``xs`` and y of ``cols`` (col_scale, col_sq: the columns' scales
    and squared norms, in float64)."""
    # d² = s_x²|q_x|² + s_y²|q_y|² − 2 s_x s_y <q_x, q_y> in float64 from an exact integer dot
    # product, in place: a block is the only rows × |cols| array alive (the columns' codes are
    # widened a chunk at a time; each dot product is an exact integer, so chunking changes no value)
    acc = engine_dots(t, xs, cols)
    sx = t.emb_scale[xs].astype(np.float64)
    nx = sx * sx * t.emb_sqnorm[xs].astype(np.float64)
    acc *= (-2.0 * sx)[:, None]
    acc *= col_scale[None, :]
    acc += nx[:, None]
    acc += col_sq[None, :]
    np.maximum(acc, 0.0, out=acc)
    np.sqrt(acc, out=acc)
    acc *= -half
    np.exp(acc, out=acc)
    return acc


def _block(t: SanTextTables, xs: np.ndarray, half: float, outs: np.ndarray, out_scale: np.ndarray,
           out_sq: np.ndarray, out_pos: np.ndarray) -> np.ndarray:
    acc = _weights(t, xs, half, outs, out_scale, out_sq)
    # the numerator from the same entry as the sum's own term (d(x, x) is 0 up to rounding)
    pos = out_pos[xs]
    own = acc[np.arange(xs.size), np.maximum(pos, 0)]
    with np.errstate(invalid="ignore", divide="ignore"):  # a non-output row may underflow to 0/0
        rate = own / acc.sum(axis=1)
    return np.where(pos >= 0, rate, 0.0)


def relative_weights(t: SanTextTables, epsilon: float, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """exp(−ε·(d(x, y) − d(x, x))/2) for x of ``rows`` and y of ``cols``: the terms whose sum over the
    outputs is 1 / P(M(x) = x), in the arithmetic of :func:`verbatim_probabilities` (bit for bit).

    Parameters
    ----------
    t : SanTextTables
        The metric embedding (or any object with its ``emb_q``, ``emb_scale``, ``emb_sqnorm``).
    epsilon : float
    rows, cols : np.ndarray of int

    Returns
    -------
    np.ndarray of float64, shape (len(rows), len(cols))
    """
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    half = float(epsilon) / 2.0

    def scale_sq(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sc = t.emb_scale[ids].astype(np.float64)
        return sc, sc * sc * t.emb_sqnorm[ids].astype(np.float64)

    w = _weights(t, rows, half, cols, *scale_sq(cols))
    own = np.diagonal(_weights(t, rows, half, rows, *scale_sq(rows)))
    return w / own[:, None]


def verbatim_probabilities(t: SanTextTables, epsilon: float, rows: np.ndarray, *,
                           threads: int | None = None) -> np.ndarray:
    """P(M(x) = x) for each row x of ``rows`` (the formula above, in float64).

    Parameters
    ----------
    t : SanTextTables
        The bundle's tables (metric embedding and output domain).
    epsilon : float
        The metric ε.
    rows : np.ndarray of int
        Input rows, not kept in the clear (a kept SanText+ row adds 1 − p, not computed here).
    threads : int, optional
        Worker threads (default: the CPU count, at most 4).

    Returns
    -------
    np.ndarray of float64, same length as ``rows``
    """
    rows = np.asarray(rows, dtype=np.int64)
    outs = t.outputs.astype(np.int64)
    out_scale = t.emb_scale[outs].astype(np.float64)
    out_sq = out_scale * out_scale * t.emb_sqnorm[outs].astype(np.float64)
    out_pos = np.full(t.n_rows, -1, dtype=np.int64)
    out_pos[outs] = np.arange(outs.size)
    half = float(epsilon) / 2.0
    starts = range(0, rows.size, _BLOCK)
    workers = max(1, min(threads or os.cpu_count() or 1, 4, len(starts)))
    def block(s: int) -> np.ndarray:
        return _block(t, rows[s:s + _BLOCK], half, outs, out_scale, out_sq, out_pos)

    if workers == 1:  # (a load-time check: no thread, whose memory arena would stay resident)
        parts = [block(s) for s in starts]
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:  # numpy releases the GIL in its kernels
            parts = list(pool.map(block, starts))
    return np.concatenate(parts) if parts else np.empty(0)


def verbatim_rate(t: SanTextTables, epsilon: float, *, threads: int | None = None,
                  cap: float | None = None) -> VerbatimRate:
    """The verbatim rate over every sensitive input of the tables (build time: |inputs| × |O| work).

    Parameters
    ----------
    t : SanTextTables
    epsilon : float
    threads : int, optional
    cap : float or None
        The cap the build enforced, stated with the summary (a rate above it is refused here).

    Returns
    -------
    VerbatimRate
        Largest, median, 90th and 99th percentiles, and the counts at or above 0.5 and 0.9.

    Raises
    ------
    ParameterMismatchError
        ``cap`` is given and a sensitive input's rate exceeds it (the build's removal was wrong).
    """
    rows = sensitive_inputs(t)
    v = verbatim_probabilities(t, epsilon, rows, threads=threads) if rows.size else np.empty(0)
    rate = VerbatimRate.of(v, cap)
    if cap is not None and rate.maximum > cap:
        raise ParameterMismatchError(f"a sensitive input is released unchanged with probability "
                                     f"{rate.maximum!r}, above the cap {cap!r}")
    return rate


def refuse_near_identity(rate: VerbatimRate, *, allow: bool, flag: str) -> None:
    """Refuse a near-identity rate unless the caller opted in.

    Raises
    ------
    WeakPrivacyError
        ``rate.near_identity`` and not ``allow``.
    """
    if rate.near_identity and not allow and rate.reason:
        raise WeakPrivacyError(
            f"the output is close to the input: {rate.reason}; use a smaller epsilon or a smaller "
            f"kept-in-clear set, or {flag} to accept it (every report will say so)")
    if rate.near_identity and not allow:
        raise WeakPrivacyError(
            f"epsilon is so large that the output is close to the input: the median sensitive word is "
            f"released unchanged with probability {rate.median:.3g} (>= {NEAR_IDENTITY_MEDIAN:g}); use a "
            f"smaller epsilon, or {flag} to accept it (every report will say so)")


def _with_slack(stated: float) -> float:
    """A stated verbatim rate with the slack a realised rate may round past it by (libldptext's
    ``with_slack``): a rate counts as above the statement only beyond this."""
    return stated + 1e-9 * max(1.0, math.fabs(stated)) + 1e-12


def check_stated_maximum(t: SanTextTables, epsilon: float, stated: VerbatimRate, rows: np.ndarray) -> None:
    """Refuse a stated largest verbatim rate that one of ``rows`` exceeds (computed here).

    Raises
    ------
    ParameterMismatchError
        A checked sensitive row is released unchanged more often than the stated maximum.
    """
    rows = unique_rows(rows)  # (as np.intersect1d with sensitive_inputs, without numpy.ma)
    rows = rows[t.valid_input[rows].astype(bool) & ~t.keep_row[rows].astype(bool)]
    if rows.size == 0:
        return
    v = verbatim_probabilities(t, epsilon, rows, threads=1)
    worst = float(v.max())
    if worst > _with_slack(stated.maximum):
        raise ParameterMismatchError(f"manifest states a largest verbatim rate of {stated.maximum:.6g}, "
                                     f"but a checked input is released unchanged with probability {worst:.6g}")


#: An honest bundle's stated median is refused at most this often per load (check_stated_median).
MEDIAN_REFUSAL = 1e-11
#: Rows whose rate check_stated_median computes over every output when its bounds do not decide.
MEDIAN_EXACT_ROWS = 8
#: Sensitive inputs drawn at each load for check_stated_median (refused from 58 of 64 above).
MEDIAN_ROWS = 64


def median_threshold(n: int) -> int:
    """The smallest k with P(Bin(n, 1/2) >= k) <= :data:`MEDIAN_REFUSAL` (n + 1 when none)."""
    tail = 0.0
    for i in range(n, -1, -1):
        tail += math.comb(n, i) / 2.0 ** n
        if tail > MEDIAN_REFUSAL:
            return i + 1
    return 0


def random_sensitive_rows(t: SanTextTables, n: int = MEDIAN_ROWS) -> np.ndarray:
    """``n`` sensitive inputs drawn uniformly with replacement from OS entropy (not a release: the
    draw only chooses which rows a check reads); empty when there are none."""
    rows = sensitive_inputs(t)
    if rows.size == 0:
        return rows
    return rows[np.array([secrets.randbelow(rows.size) for _ in range(n)], dtype=np.int64)]


def check_stated_median(t: SanTextTables, epsilon: float | None, stated: VerbatimRate, random_rows: np.ndarray,
                        own_probability: Callable[[np.ndarray], np.ndarray] | None = None) -> None:
    """Refuse a stated median verbatim rate that sensitive rows drawn at random at load contradict.

    A uniformly random sensitive input lies above the true median with probability at most 1/2, so
    of n random sensitive rows at least :func:`median_threshold` (n) lie above a true median with
    probability at most :data:`MEDIAN_REFUSAL`. A row counts as above when its rate exceeds the stated
    median by more than the slack of :func:`check_stated_maximum` (rounding). A row's rate is
    decided by bounds from its head where they suffice (not above: the head's terms alone; above:
    every tail term is at most e^(−ε/2·(floor − d(x, x)))), else computed over the outputs for at
    most :data:`MEDIAN_EXACT_ROWS` rows; an undecided row counts as not above (a refusal only gets
    rarer). libldptext's ``check_stated_median`` (``native/lib/check.c``) is the same test. A
    runtime whose law is not SanText's formula (TEM, CusText on the same tables) passes
    ``own_probability``: the rows' rates are then its realised ones, not bounds.

    Parameters
    ----------
    t : SanTextTables
    epsilon : float or None
        SanText's ε (not used when ``own_probability`` is given).
    stated : VerbatimRate
    random_rows : np.ndarray of int
        Sensitive inputs drawn uniformly at random at this load (:func:`random_sensitive_rows`).
    own_probability : callable, optional
        Rows -> the realised P(M(x) = x) of each.

    Raises
    ------
    ParameterMismatchError
        Too many of the random sensitive rows lie above the stated median.
    """
    rows = np.asarray(random_rows, dtype=np.int64)
    rows = rows[t.valid_input[rows].astype(bool) & ~t.keep_row[rows].astype(bool)]
    if rows.size == 0:
        return
    # a row counts as above with the slack of check_stated_maximum: an honest bundle whose rates are
    # all equal (CusText with K = 2) states a median that its rows' rates, rounded, may exceed
    level = _with_slack(stated.median)
    if own_probability is not None:
        above = np.asarray(own_probability(rows)) > level
    else:
        above = _above_by_bounds(t, float(epsilon), level, rows)
    if int(above.sum()) >= median_threshold(int(rows.size)):
        raise ParameterMismatchError(
            f"manifest states a median verbatim rate of {stated.median:.6g}, but {int(above.sum())} of "
            f"{rows.size} sensitive inputs drawn at random are released unchanged more often")


def _above_by_bounds(t: SanTextTables, epsilon: float, level: float, rows: np.ndarray) -> np.ndarray:
    """Per row of ``rows`` (sensitive inputs): whether SanText's P(M(x) = x) is above ``level``,
    decided by its head's bounds, else exactly for at most :data:`MEDIAN_EXACT_ROWS` rows (an
    undecided row: False)."""
    half, k = epsilon / 2.0, t.head_size
    outs = t.outputs.astype(np.int64)
    pos = np.minimum(np.searchsorted(outs, rows), outs.size - 1)
    is_out = outs[pos] == rows
    head = t.stored("head_ids")[rows].astype(np.int64)
    own = engine_distance_rows(t, rows, rows)[np.arange(rows.size), np.arange(rows.size)]
    d = engine_distance_rows(t, rows, np.unique(head))
    cols = np.searchsorted(np.unique(head), head)
    head_sum = np.exp(-half * (d[np.arange(rows.size)[:, None], cols] - own[:, None])).sum(axis=1)
    head_sum += ~(head == rows[:, None]).any(axis=1)  # the numerator's own term, if x is not in its head
    tail = (outs.size - k) * np.exp(-half * np.maximum(t.tail_floor[rows] - own, 0.0))
    above = is_out & (1.0 / (head_sum + tail) > level)
    undecided = np.flatnonzero(is_out & ~above & (1.0 / head_sum > level))[:MEDIAN_EXACT_ROWS]
    if undecided.size:
        above[undecided] = verbatim_probabilities(t, epsilon, rows[undecided], threads=1) > level
    return above


def kept_in_clear_majority(t: SanTextTables, p: float | None) -> str | None:
    """Why the bundle is near identity by its kept-in-clear inputs, or ``None``.

    A kept row (``keep_row``: SanText+'s V_N, released unchanged with probability 1 − p; CusText+'s
    stop words, always) is no sensitive input, so the median verbatim rate does not count it. When
    the kept rows are more than half of the valid inputs and kept with probability 1 − p ≥
    :data:`NEAR_IDENTITY_MEDIAN` (``p`` ``None``: always), most of the vocabulary leaves unchanged
    nine times in ten or more: near identity. Exact (counts and p), the same as libldptext's
    ``ldp_near_identity``."""
    valid = t.valid_input.astype(bool)
    n_valid = int(valid.sum())
    kept = int((valid & t.keep_row.astype(bool)).sum())
    keep_probability = 1.0 if p is None else 1.0 - float(p)
    if 2 * kept > n_valid and keep_probability >= NEAR_IDENTITY_MEDIAN:
        return (f"{kept} of {n_valid} valid inputs are kept in the clear with probability "
                f"{format_probability(keep_probability)} (>= {NEAR_IDENTITY_MEDIAN:g})")
    return None


def with_kept_in_clear(t: SanTextTables, rate: VerbatimRate, *, p: float | None) -> VerbatimRate:
    """``rate`` with the verdict of :func:`kept_in_clear_majority` where that makes it near identity
    (a build states what every load will decide: ``weak_privacy_statement``).

    Parameters
    ----------
    t : SanTextTables
    rate : VerbatimRate
    p : float or None
        SanText+'s p (a kept row is kept with probability 1 − p); ``None``: always kept.
    """
    kept = kept_in_clear_majority(t, p)
    return rate if kept is None else dataclasses.replace(rate, verdict=True, reason=kept)


def sampled_near_identity(rates: np.ndarray) -> tuple[bool, int]:
    """``(near identity, count)``: of the verbatim rates of n sensitive inputs drawn uniformly at
    load, ``count`` are at or above :data:`NEAR_IDENTITY_MEDIAN`; near identity when that is at least
    :func:`median_threshold` (n) — the test :func:`check_stated_median` applies to a stated median,
    applied to one just below the threshold (an honest bundle whose median is below it is called
    near identity at most once in 1/:data:`MEDIAN_REFUSAL` loads, and leaving the statement out gains
    a publisher nothing over stating such a median). No input: not near identity."""
    v = np.asarray(rates, dtype=np.float64)
    count = int((v >= NEAR_IDENTITY_MEDIAN).sum())
    return bool(v.size) and count >= median_threshold(int(v.size)), count


def near_identity_at_load(t: SanTextTables, stated: VerbatimRate | None, *, p: float | None,
                          rates_of: Callable[[np.ndarray], np.ndarray]) -> VerbatimRate:
    """The verbatim rate a load reports, with its near-identity verdict (libldptext's
    ``ldp_near_identity`` decides the same). Near identity when

    1. the stated median is at least :data:`NEAR_IDENTITY_MEDIAN`; or
    2. none is stated (``privacy.verbatim`` left out) and :func:`sampled_near_identity` holds for
       :data:`MEDIAN_ROWS` sensitive inputs drawn at random now (the reported rate is then theirs:
       largest and median of the draws); or
    3. :func:`kept_in_clear_majority`.

    Parameters
    ----------
    t : SanTextTables
    stated : VerbatimRate or None
        The manifest's statement (checked by the caller).
    p : float or None
        SanText+'s and CusText+'s p (a kept row is kept with probability 1 − p); ``None``: none.
    rates_of : callable
        Rows -> each row's P(M(x) = x) (the mechanism's own).

    Returns
    -------
    VerbatimRate
        ``stated`` (with ``verdict`` set where rule 3 makes it near identity), or the estimate.
    """
    if stated is not None:
        return with_kept_in_clear(t, stated, p=p)
    kept = kept_in_clear_majority(t, p)
    rows = random_sensitive_rows(t)
    v = np.asarray(rates_of(rows), dtype=np.float64) if rows.size else np.empty(0)
    weak, count = sampled_near_identity(v)
    reason = kept
    if weak and kept is None:
        reason = (f"no median verbatim rate is stated, and {count} of {v.size} sensitive inputs drawn at "
                  f"random are released unchanged with probability >= {NEAR_IDENTITY_MEDIAN:g}")
    if v.size == 0:
        return VerbatimRate(0.0, 0.0, 0, verdict=kept is not None, reason=reason, estimated=True)
    return VerbatimRate(float(v.max()), float(np.median(v)), int(np.unique(rows).size),
                        verdict=weak or kept is not None, reason=reason, estimated=True)
