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
"""
from __future__ import annotations

import math
import os
import secrets
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .engine_rows import engine_distance_rows, engine_dots
from .errors import ParameterMismatchError, WeakPrivacyError
from .santext_tables import SanTextTables, unique_rows

__all__ = ["NEAR_IDENTITY_MEDIAN", "VerbatimRate", "WeakPrivacyError", "verbatim_probabilities",
           "sensitive_inputs", "verbatim_rate", "refuse_near_identity", "check_stated_maximum",
           "check_stated_median", "median_threshold", "random_sensitive_rows"]

#: A median verbatim rate over the sensitive inputs at or above this refuses the bundle (nine
#: sensitive words in ten released unchanged: the output is close to the input).
NEAR_IDENTITY_MEDIAN = 0.9

#: Rows per block of the exact computation (a block holds rows × |O| float64 values).
_BLOCK = 256


@dataclass(frozen=True)
class VerbatimRate:
    """The verbatim rate P(M(x) = x) over a bundle's sensitive inputs.

    Attributes
    ----------
    maximum, median : float
        Largest and median P(M(x) = x) over the sensitive inputs.
    inputs : int
        Number of sensitive inputs they are taken over.
    """

    maximum: float
    median: float
    inputs: int

    @property
    def near_identity(self) -> bool:
        """True when the median is at least :data:`NEAR_IDENTITY_MEDIAN`."""
        return self.median >= NEAR_IDENTITY_MEDIAN

    def as_manifest(self) -> dict:
        """The manifest's ``privacy.verbatim`` section."""
        return {"max": self.maximum, "median": self.median, "inputs": self.inputs,
                "near_identity_median": NEAR_IDENTITY_MEDIAN}

    @classmethod
    def from_manifest(cls, section: object) -> "VerbatimRate | None":
        """Read ``privacy.verbatim`` (``None`` when absent: a bundle older than the field)."""
        if section is None:
            return None
        try:
            rate = cls(float(section["max"]), float(section["median"]), int(section["inputs"]))
        except (KeyError, TypeError, ValueError):
            raise ParameterMismatchError("manifest privacy.verbatim is malformed") from None
        if not (0.0 <= rate.median <= rate.maximum <= 1.0) or rate.inputs < 0:
            raise ParameterMismatchError("manifest privacy.verbatim is not a probability summary")
        return rate

    def describe(self) -> str:
        """One phrase for reports and ``bundle inspect``."""
        return (f"sensitive words released unchanged with probability {self.median:.3g} (median) "
                f"to {self.maximum:.3g} (largest) over {self.inputs} inputs")


def sensitive_inputs(t: SanTextTables) -> np.ndarray:
    """The rows the rate is taken over: valid inputs that are not kept in the clear (V_S for
    SanText+, every valid input for SanText)."""
    return np.flatnonzero(t.valid_input.astype(bool) & ~t.keep_row.astype(bool))


def _block(t: SanTextTables, xs: np.ndarray, half: float, outs: np.ndarray, out_scale: np.ndarray,
           out_sq: np.ndarray, out_pos: np.ndarray) -> np.ndarray:
    # d² = s_x²|q_x|² + s_y²|q_y|² − 2 s_x s_y <q_x, q_y> in float64 from an exact integer dot
    # product, in place: a block is the only rows × |O| array alive (the outputs' codes are widened
    # a chunk at a time; each dot product is an exact integer, so chunking changes no value)
    acc = engine_dots(t, xs, outs)
    sx = t.emb_scale[xs].astype(np.float64)
    nx = sx * sx * t.emb_sqnorm[xs].astype(np.float64)
    acc *= (-2.0 * sx)[:, None]
    acc *= out_scale[None, :]
    acc += nx[:, None]
    acc += out_sq[None, :]
    np.maximum(acc, 0.0, out=acc)
    np.sqrt(acc, out=acc)
    acc *= -half
    np.exp(acc, out=acc)
    # the numerator from the same entry as the sum's own term (d(x, x) is 0 up to rounding)
    pos = out_pos[xs]
    own = acc[np.arange(xs.size), np.maximum(pos, 0)]
    with np.errstate(invalid="ignore", divide="ignore"):  # a non-output row may underflow to 0/0
        rate = own / acc.sum(axis=1)
    return np.where(pos >= 0, rate, 0.0)


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


def verbatim_rate(t: SanTextTables, epsilon: float, *, threads: int | None = None) -> VerbatimRate:
    """The verbatim rate over every sensitive input of the tables (build time: |inputs| × |O| work).

    Returns
    -------
    VerbatimRate
    """
    rows = sensitive_inputs(t)
    if rows.size == 0:
        return VerbatimRate(0.0, 0.0, 0)
    v = verbatim_probabilities(t, epsilon, rows, threads=threads)
    return VerbatimRate(float(v.max()), float(np.median(v)), int(rows.size))


def refuse_near_identity(rate: VerbatimRate, *, allow: bool, flag: str) -> None:
    """Refuse a near-identity rate unless the caller opted in.

    Raises
    ------
    WeakPrivacyError
        ``rate.near_identity`` and not ``allow``.
    """
    if rate.near_identity and not allow:
        raise WeakPrivacyError(
            f"epsilon is so large that the output is close to the input: the median sensitive word is "
            f"released unchanged with probability {rate.median:.3g} (>= {NEAR_IDENTITY_MEDIAN:g}); use a "
            f"smaller epsilon, or {flag} to accept it (every report will say so)")


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
    if worst > stated.maximum + 1e-9 * max(1.0, math.fabs(stated.maximum)) + 1e-12:
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


def check_stated_median(t: SanTextTables, epsilon: float, stated: VerbatimRate, random_rows: np.ndarray) -> None:
    """Refuse a stated median verbatim rate that sensitive rows drawn at random at load contradict.

    A uniformly random sensitive input lies above the true median with probability at most 1/2, so
    of n random sensitive rows at least :func:`median_threshold` (n) lie above a true median with
    probability at most :data:`MEDIAN_REFUSAL`. A row's rate is decided by bounds from its head
    where they suffice (not above: the head's terms alone; above: every tail term is at most
    e^(−ε/2·(floor − d(x, x)))), else computed over the outputs for at most
    :data:`MEDIAN_EXACT_ROWS` rows; an undecided row counts as not above (a refusal only gets
    rarer). libldptext's ``check_stated_median`` (``native/lib/check.c``) is the same test.

    Parameters
    ----------
    t : SanTextTables
    epsilon : float
    stated : VerbatimRate
    random_rows : np.ndarray of int
        Sensitive inputs drawn uniformly at random at this load (:func:`random_sensitive_rows`).

    Raises
    ------
    ParameterMismatchError
        Too many of the random sensitive rows lie above the stated median.
    """
    rows = np.asarray(random_rows, dtype=np.int64)
    rows = rows[t.valid_input[rows].astype(bool) & ~t.keep_row[rows].astype(bool)]
    if rows.size == 0:
        return
    level, half, k = stated.median, float(epsilon) / 2.0, t.head_size
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
    if int(above.sum()) >= median_threshold(int(rows.size)):
        raise ParameterMismatchError(
            f"manifest states a median verbatim rate of {stated.median:.6g}, but {int(above.sum())} of "
            f"{rows.size} sensitive inputs drawn at random are released unchanged more often")
