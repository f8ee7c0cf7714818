"""ℓ₂-norm clipping with exact discrete noise: the noise of the ADePT family (an offline baseline).

Krishna et al. 2021, *ADePT: Auto-encoder based Differentially Private Text Transformation* (EACL),
clip the latent vector in ℓ₂ norm, z·min(1, C/‖z‖₂), and add noise. Their Laplace scale used the
ℓ₁ sensitivity 2C, which is wrong for ℓ₂ clipping (Habernal 2021, *When differential privacy
meets NLP: The devil is in the detail* (EMNLP), Thm 5.1; Igamberdiev 2023, *Differentially
Private Methods in NLP* (PhD thesis, TU Darmstadt), §5.4.1 Eqns 5.2–5.3 and §6.3.1). The correct
sensitivities of n values clipped to the ℓ₂ ball of radius C are

    Δ₂ = 2C               (two points of the ball are at most a diameter apart)
    Δ₁ = 2C·√n            (‖v‖₁ ≤ √n·‖v‖₂ by Cauchy–Schwarz; equality for antipodal vectors whose
                           coordinates all have the same magnitude C/√n).

Discrete noise on the grid γ = C/2^k, exactly as DP-BART's (:func:`ldptext.noise.calibrate`,
:func:`ldptext.noise.privatize`): the clipped vector is mapped to integers q by rounding **towards
zero** and then checked in exact integer arithmetic to satisfy Σ q_i² ≤ K² (K = 2^k; shrunk again if a
float rounding ever broke it), so ‖q − q'‖₂ ≤ 2K and ‖q − q'‖₁ ≤ 2K√n hold *exactly* for the integer
query: the grid does not change the sensitivity. The integer noise is drawn by
:func:`ldptext.noise.privatize` (the same exact samplers on the CSPRNG); q·γ is passed to it, which
maps it back to exactly q. The grid only moves the clipped value by less than γ per coordinate
towards zero (deterministically, before the noise).

Only the ADePT baseline (:mod:`.adept`) uses it; the runtime's DP-BART clips each value instead. It
builds on the runtime's exact calibration and samplers, so both draw their noise the same way.
"""
from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

import numpy as np

from ldptext.errors import ParameterError
from ldptext.noise import (DEFAULT_GRID_BITS, EXACT_PARAMETER_MAX, NoiseCalibration, calibrate, check_clip_n,
                           discrete_laplace_variance, l2_sensitivity, privatize, rational_at_least, round_up,
                           validate_privacy_parameters)
from ldptext.rng import Generator

__all__ = ["l2_ball_l1_sensitivity", "l2_ball_l2_sensitivity", "clip_l2_norm", "l2_ball_grid", "calibrate_l2_ball",
           "privatize_l2_ball"]


def l2_ball_l1_sensitivity(clip: float, n: int) -> float:
    """Δ₁ = 2C√n of n values clipped to the ℓ₂ ball of radius C, rounded up.

    Habernal 2021, *When differential privacy meets NLP: The devil is in the detail* (EMNLP),
    Thm 5.1; Igamberdiev 2023, *Differentially Private Methods in NLP* (PhD thesis, TU Darmstadt),
    §5.4.1 and §6.3.1.

    Parameters
    ----------
    clip : float
        C > 0 (the ℓ₂ radius).
    n : int
        Released coordinates.

    Returns
    -------
    float
        ≥ 2C√n (one ulp above the correctly rounded value).
    """
    return l2_sensitivity(clip, n)  # same number as the value-clipping Δ₂: 2C·√n


def l2_ball_l2_sensitivity(clip: float) -> float:
    """Δ₂ = 2C of vectors clipped to the ℓ₂ ball of radius C (any dimension), rounded up.

    Parameters
    ----------
    clip : float
        C > 0.

    Returns
    -------
    float
    """
    check_clip_n(clip, 1)
    return round_up(Fraction(2) * Fraction(float(clip)))


def _keep_mask(d: int, pruned: np.ndarray | None) -> np.ndarray:
    keep = np.ones(d, dtype=bool)
    if pruned is not None and len(pruned):
        idx = np.asarray(pruned, dtype=np.int64)
        if idx.min() < 0 or idx.max() >= d:
            raise ParameterError("pruned index out of range")
        keep[idx] = False
    return keep


def clip_l2_norm(z: np.ndarray, clip: float, pruned: np.ndarray | None = None) -> np.ndarray:
    """ADePT's clipping (real-valued): z·min(1, C/‖z‖₂) per document over its (L, d) block.

    Parameters
    ----------
    z : np.ndarray of float, shape (..., L, d)
        One document (release) per leading index; the norm is over its whole (L, d) block without
        the pruned hidden indices.
    clip : float
        C > 0.
    pruned : np.ndarray of int or None
        Hidden indices set to exactly 0 first (they are not part of the released vector).

    Returns
    -------
    np.ndarray of float64, same shape
        ‖·‖₂ ≤ C per document (up to float64 rounding; :func:`privatize_l2_ball` enforces the bound
        exactly on the integer grid). NaN → 0; a document with an infinite value is mapped to the
        limit direction (its infinite coordinates, ±1 each, normalised), finite huge values do not
        overflow (the norm is computed after dividing by the largest magnitude).

    Notes
    -----
    Krishna et al. 2021, *ADePT* (EACL), Eqn 5.2 of Igamberdiev 2023, *Differentially Private
    Methods in NLP* (PhD thesis, TU Darmstadt), §5.4.1.
    """
    check_clip_n(clip, 1)
    x = np.array(z, dtype=np.float64)
    if x.ndim < 2:
        raise ParameterError("z must have shape (..., L, d)")
    keep = _keep_mask(x.shape[-1], pruned)
    x = np.nan_to_num(x, nan=0.0, posinf=np.inf, neginf=-np.inf)
    x[..., ~keep] = 0.0
    flat = x.reshape(-1, x.shape[-2] * x.shape[-1])
    for row in flat:  # one document at a time: its scale never depends on another document
        m = float(np.max(np.abs(row))) if row.size else 0.0
        if m == 0.0:
            continue
        if math.isinf(m):
            row[:] = np.where(np.isinf(row), np.sign(row), 0.0)
            m = 1.0
        y = row / m
        norm = m * float(np.sqrt(np.dot(y, y)))
        if norm > clip:
            row[:] = y * (float(clip) * (m / norm))
    return flat.reshape(x.shape)


def _l2_ball_grid(clipped: np.ndarray, k_max: int, gamma: float) -> np.ndarray:
    """Integers q = trunc(x/γ) per document with Σq² ≤ K² checked exactly (shrunk until it holds)."""
    flat = clipped.reshape(-1, clipped.shape[-2] * clipped.shape[-1])
    q = np.trunc(flat / gamma).astype(np.int64)
    bound = k_max * k_max
    for i in range(q.shape[0]):
        while True:
            s = sum(int(v) * int(v) for v in q[i][q[i] != 0])  # exact (Python integers)
            if s <= bound:
                break
            f = (k_max / math.sqrt(s)) * (1.0 - 2.0 ** -40)
            q[i] = np.trunc(q[i].astype(np.float64) * f).astype(np.int64)  # towards zero: shrinks
    return q.reshape(clipped.shape)


def l2_ball_grid(z: np.ndarray, clip: float, grid_bits: int = DEFAULT_GRID_BITS,
                 pruned: np.ndarray | None = None) -> np.ndarray:
    """The integer query of the ℓ₂-clipped mechanism: q with Σ q_i² ≤ K² per document, exactly.

    Parameters
    ----------
    z : np.ndarray of float, shape (..., L, d)
    clip : float
        C > 0.
    grid_bits : int
        k: grid unit γ = C/2^k, K = 2^k.
    pruned : np.ndarray of int or None

    Returns
    -------
    np.ndarray of int64, same shape
        trunc(:func:`clip_l2_norm`(z)/γ), pruned indices 0; ‖q − q'‖₂ ≤ 2K and ‖q − q'‖₁ ≤ 2K√n for
        any two inputs (exact integer statements).
    """
    if not 4 <= int(grid_bits) <= 40:
        raise ParameterError("grid_bits must be between 4 and 40")
    gamma = math.ldexp(float(clip), -int(grid_bits))
    return _l2_ball_grid(clip_l2_norm(z, clip, pruned), 1 << int(grid_bits), gamma)


def calibrate_l2_ball(mechanism: str, epsilon: float, delta: float | None, *, clip: float, n: int,
                      grid_bits: int = DEFAULT_GRID_BITS) -> NoiseCalibration:
    """Calibrate discrete noise for one release of n values clipped to the ℓ₂ ball of radius C.

    Parameters
    ----------
    mechanism : str
        ``"laplace"`` (pure ε, Δ₁ = 2C√n) or ``"gaussian"`` ((ε, δ), Δ₂ = 2C).
    epsilon : float
        ε > 0 (``math.inf``: no noise, ``private=False``; callers refuse it without an explicit
        evaluation-only opt-in, :func:`ldptext.noise.require_finite_epsilon`).
    delta : float or None
        δ ∈ (0, 1) for the Gaussian mechanism.
    clip : float
        C > 0.
    n : int
        Released (unpruned) coordinates per release.
    grid_bits : int
        k ∈ [4, 40].

    Returns
    -------
    NoiseCalibration
        For :func:`privatize_l2_ball`. ``sensitivity`` is Δ₁ = 2C√n (Laplace) or Δ₂ = 2C
        (Gaussian) in the units of z; ``clip`` is the ℓ₂ radius C.

    Notes
    -----
    Laplace: the integer query has ℓ₁ sensitivity exactly 2K√n (irrational in general); the scale
    t = num/den is chosen with (t·ε)² ≥ 4K²n checked in rational arithmetic, so 2K√n/t ≤ ε exactly
    and the discrete Laplace P(k) ∝ exp(−|k|/t) per coordinate gives exact (ε, 0)-LDP
    (``epsilon_bound`` is 2K√n/t rounded up, ≤ ε). Gaussian: the integer ℓ₂ sensitivity is 2K,
    i.e. the value-clipping calibration of :func:`ldptext.noise.calibrate` at n = 1 (Δ₂ = 2K·√1), which is reused
    as is (same Rényi accounting, same exact sampler). Habernal 2021, *When differential privacy
    meets NLP: The devil is in the detail* (EMNLP), Thm 5.1; Igamberdiev 2023, *Differentially
    Private Methods in NLP* (PhD thesis, TU Darmstadt), §5.4.1 and §6.3.1.
    """
    eps, d = validate_privacy_parameters(epsilon, delta, mechanism)
    check_clip_n(clip, n)
    if not 4 <= int(grid_bits) <= 40:
        raise ParameterError("grid_bits must be between 4 and 40")
    note = ("l2-norm clipping to C (ADePT family): sensitivity 2C*sqrt(n) (l1) / 2C (l2); integer grid "
            "by truncation towards zero with sum(q^2) <= K^2 checked exactly")
    if mechanism == "gaussian" or math.isinf(eps):
        base = calibrate(mechanism, eps, delta, clip=clip, n=1, grid_bits=grid_bits)
        sens = l2_ball_l2_sensitivity(clip) if mechanism == "gaussian" else l2_ball_l1_sensitivity(clip, n)
        return replace(base, n=int(n), sensitivity=sens, notes=base.notes + (note,))
    k_max = 1 << int(grid_bits)
    gamma = math.ldexp(float(clip), -int(grid_bits))
    target = Fraction(4 * k_max * k_max * int(n))  # (2K√n)²
    fe = Fraction(eps)
    t = 2.0 * k_max * math.sqrt(int(n)) / eps
    if not math.isfinite(t) or not t < EXACT_PARAMETER_MAX:
        raise ParameterError("the noise scale is too large for the exact sampler: epsilon is too small for "
                             "this clip and grid")
    while (Fraction(t) * fe) ** 2 < target:
        t = math.nextafter(t, math.inf)
    num, den = rational_at_least(Fraction(t))
    t_exact = Fraction(num, den)
    assert (t_exact * fe) ** 2 >= target
    e = 2.0 * k_max * math.sqrt(int(n)) / float(t_exact)
    while (Fraction(e) * t_exact) ** 2 < target:
        e = math.nextafter(e, math.inf)
    t_f = round_up(t_exact)
    return NoiseCalibration("laplace", eps, 0.0, int(n), float(clip), l2_ball_l1_sensitivity(clip, n),
                            t_f * gamma, t_f, int(grid_bits), gamma, discrete_laplace_variance(t_f) * gamma * gamma,
                            None, min(e, eps), 0.0, notes=(note,), sampler_parameters=(num, den))


def privatize_l2_ball(z: np.ndarray, calibration: NoiseCalibration, rng: Generator,
                      pruned: np.ndarray | None = None) -> np.ndarray:
    """ℓ₂-clip, prune and noise encoder outputs (the ADePT family's release), with exact discrete noise.

    Parameters
    ----------
    z : np.ndarray of float, shape (..., L, d)
        One document (release) per leading index.
    calibration : NoiseCalibration
        From :func:`calibrate_l2_ball` for n = L·(d − |P|) and the ℓ₂ radius C.
    rng : ldptext.rng.Generator
        The CSPRNG.
    pruned : np.ndarray of int or None

    Returns
    -------
    np.ndarray of float32, same shape
        (q + Y)·γ with q = :func:`l2_ball_grid` (Σq² ≤ K² per document) and Y i.i.d. exact discrete
        Laplace / Gaussian integers, one per unpruned coordinate; pruned indices exactly 0.

    Raises
    ------
    ParameterError
        Shape, pruned indices or n do not match the calibration.

    Notes
    -----
    The noise step is :func:`ldptext.noise.privatize` itself, given q·γ: every |q| ≤ K, so q·γ lies in [−C, C]
    and :func:`privatize` maps it back to exactly q (|q| ≤ 2^40, far below float64 precision), then
    draws the noise from the exact samplers. Guarantee per document as :func:`calibrate_l2_ball`.
    """
    x = np.asarray(z, dtype=np.float64)
    if x.ndim < 2:
        raise ParameterError("z must have shape (..., L, d)")
    keep = _keep_mask(x.shape[-1], pruned)
    n_doc = int(x.shape[-2]) * int(keep.sum())
    if n_doc != calibration.n:
        raise ParameterError(f"calibration is for n={calibration.n} but this input has n={n_doc}")
    q = l2_ball_grid(x, calibration.clip, calibration.grid_bits, pruned)
    return privatize(q.astype(np.float64) * calibration.grid_unit, calibration, rng, pruned=pruned)
