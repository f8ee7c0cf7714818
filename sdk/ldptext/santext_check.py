"""Are a SanText(+) bundle's stated parameters what its tables realise? Checked at every load.

A signature says who vouches for a manifest, not that its numbers are right: a signing key can be
misused and a build script can be wrong. So the device recomputes what it can from the arrays and
refuses a mismatch with :class:`~ldptext.errors.ParameterMismatchError`, at
:class:`ldptext.santext.Sanitizer` construction (every load, every backend), in ``ldptext bundle
verify`` and ``bundle sign`` (:mod:`ldptext.bundle_check`, on a larger sample), and in libldptext
(``native/lib/check.c``, the same checks, ``LDP_E_PARAMETER_MISMATCH``):

ε
    For each checked row x the head outputs y₁..y_K (the K nearest) must satisfy
    log Pr[y_i] − log Pr[y_j] = −ε·(d(x, y_i) − d(x, y_j))/2 for the stated ε, within the stated
    numeric tolerance. Only the head is needed: the realised log-probability of head slot i is
    log(alias mass_i) − γ_i plus a per-row constant (the normaliser, and ln p for a kept SanText+
    row), which cancels in the differences. The rows are a fixed sample (the largest-norm rows and
    an even spread) plus rows drawn at random at each load, so a table that lies about ε on some
    rows cannot know in advance which rows a device reads.
ε₀ and p
    SanText+: ε₀ = ln(1/p); SanText: no p, ε₀ = 0. (p itself is in no array: the sampler reads the
    stated p, so it is by construction the realised one.)
D_max
    The largest distance from the checked rows' first few to every valid input must not exceed the
    stated D_max (a one-sided check: an understated D_max is refused whenever a checked pair exceeds
    it; the largest-norm row is always among them).

Yue et al. 2021, *Differential Privacy for Text Analytics via Natural Text Sanitization* (Findings of
ACL), as presented in Yue 2023, *Data Synthesis: Boosting Utility and Privacy in NLP* (PhD thesis,
Ohio State), §2.4: Pr[M(x) = y] ∝ exp(−ε·d(x, y)/2).
"""
from __future__ import annotations

import math
import secrets

import numpy as np

from .mechanisms.santext import STATEMENTS
from . import alias as _alias
from .engine_rows import engine_distance_rows, engine_distances
from .guarantee import checked_tolerance
from .errors import ParameterMismatchError
from .santext_tables import SanTextTables, unique_rows
from .token_runtime import sampled_rows

__all__ = ["check_realised", "fixed_rows", "load_rows", "FIXED_ROWS", "RANDOM_ROWS", "DMAX_ROWS"]

#: Rows of the fixed sample (half the largest-norm rows, half an even spread of the valid inputs).
FIXED_ROWS = 16
#: Rows drawn at random (OS entropy) at each load, on top of the fixed sample.
RANDOM_ROWS = 48
#: Rows whose distance to every valid input bounds D_max from below at load (the largest-norm row
#: and the first random one).
DMAX_ROWS = 2


def _norms(t: SanTextTables) -> np.ndarray:
    return t.emb_scale.astype(np.float64) * np.sqrt(t.emb_sqnorm.astype(np.float64))


def fixed_rows(t: SanTextTables, n: int = FIXED_ROWS) -> np.ndarray:
    """The fixed sample (:func:`ldptext.token_runtime.sampled_rows` by norm: the ``n // 2`` valid
    inputs of largest norm and an even spread), largest norm first.

    Returns
    -------
    np.ndarray of int64
        Distinct row ids, the largest-norm row first.
    """
    norms = _norms(t)
    rows = sampled_rows(np.flatnonzero(t.valid_input), norms, n)
    return rows[np.argsort(-norms[rows], kind="stable")]


def load_rows(t: SanTextTables, n_random: int = RANDOM_ROWS) -> np.ndarray:
    """The fixed sample followed by ``n_random`` valid inputs drawn from OS entropy (not a release:
    the draw only chooses which rows are checked)."""
    rows = fixed_rows(t)
    valid = np.flatnonzero(t.valid_input)
    if valid.size == 0 or n_random <= 0:
        return rows
    # (secrets: OS entropy, without numpy.random's resident memory at every load)
    drawn = valid[np.array([secrets.randbelow(valid.size) for _ in range(n_random)], dtype=np.int64)]
    # the largest-norm row stays first, a random row second (DMAX_ROWS reads both)
    return np.concatenate([rows[:1], drawn, rows[1:]])


def check_realised(t: SanTextTables, *, mechanism: str, epsilon: float, epsilon0: float,
                   p: float | None, d_max: float, tolerance: float, rows: np.ndarray,
                   dmax_rows: np.ndarray) -> None:
    """Refuse stated parameters that the tables do not realise.

    Parameters
    ----------
    t : SanTextTables
        Validated tables (schema and invariants already hold).
    mechanism, epsilon, epsilon0, p, d_max, tolerance
        What the manifest states.
    rows : np.ndarray of int
        Input rows whose head log-probability ratios are checked against ε.
    dmax_rows : np.ndarray of int
        Rows whose distance to every valid input is checked against D_max.

    Raises
    ------
    ParameterMismatchError
        ε, ε₀, p or D_max is not what the tables realise (the message gives the realised ε, a
        least-squares fit, where ε is wrong).
    """
    if STATEMENTS[mechanism].kept_in_clear is not None:  # SanText+: p and eps0 = ln(1/p)
        if p is None or not math.isclose(epsilon0, math.log(1.0 / p), rel_tol=1e-12, abs_tol=1e-12):
            raise ParameterMismatchError(f"manifest epsilon0 {epsilon0:.12g} is not ln(1/p) = "
                                         f"{math.log(1.0 / p) if p else math.inf:.12g}")
    else:
        if p is not None:
            raise ParameterMismatchError("a SanText bundle states p (SanText+ only)")
        if epsilon0 != 0:
            raise ParameterMismatchError("a SanText bundle states a non-zero epsilon0")
    valid = np.flatnonzero(t.valid_input)
    dmax_rows = np.asarray(dmax_rows, dtype=np.int64)
    if dmax_rows.size and valid.size:
        far = float(engine_distance_rows(t, dmax_rows, valid).max())
        if far > d_max * (1 + 1e-9) + 1e-12:
            raise ParameterMismatchError(f"manifest D_max {d_max:.6g} is below a realised distance "
                                         f"{far:.6g} between two valid inputs")
    rows = unique_rows(rows)
    if rows.size == 0:
        return
    k = t.head_size
    # the checked rows of the stored arrays (a compact bundle's narrow ones widen exactly here)
    head = t.stored("head_ids")[rows].astype(np.int64)
    with np.errstate(divide="ignore"):
        realised = np.log(_alias.realised_masses(t.alias_threshold[rows], t.stored("alias_index")[rows])
                          [:, :k].astype(np.float64)) - t.stored("accept_gamma")[rows, :k].astype(np.float64)
    d = engine_distances(t, np.repeat(rows, k), head.ravel()).reshape(head.shape)
    # |log P_realised − log P_formula| ≤ tolerance per probability (the manifest's statement), so a
    # difference of two by twice that, plus the float rounding of ε·d/2
    tol = 2.0 * checked_tolerance(tolerance, epsilon, d_max)
    keep = np.isfinite(realised) & ~(t.keep_row[rows].astype(bool)[:, None] & (head == rows[:, None]))
    def ptp(a: np.ndarray) -> np.ndarray:  # spread over the kept entries of each row
        return np.where(keep, a, -np.inf).max(axis=1) - np.where(keep, a, np.inf).min(axis=1)

    with np.errstate(invalid="ignore"):  # -inf - -inf in rows without kept entries: not usable
        usable = (keep.sum(axis=1) >= 2) & (ptp(d) > 1e-9)
        spread = ptp(np.where(keep, realised + epsilon / 2 * d, 0.0))
    if not usable.any():
        raise ParameterMismatchError("cannot check epsilon against the tables: no checked row has two "
                                     "head outputs at different distances")
    if (spread[usable] > tol).any():
        slopes = [-2 * np.polyfit(d[i][keep[i]], realised[i][keep[i]], 1)[0]
                  for i in np.flatnonzero(usable)]
        raise ParameterMismatchError(
            f"manifest epsilon {epsilon:.10g} is not what the tables realise (about "
            f"{float(np.median(slopes)):.10g}: log-probability ratios of head outputs)")
