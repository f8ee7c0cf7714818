"""Calibration and discrete noise for DP-BART.

Mechanism: Igamberdiev & Habernal 2023, *DP-BART for Privatized Text Rewriting under Local
Differential Privacy* (Findings of ACL), as presented in Igamberdiev 2023, *Differentially Private
Methods in NLP* (PhD thesis, TU Darmstadt), §6.3.3–6.3.4 (background: its chapter 2). Discrete
Gaussian: Canonne, Kamath & Steinke 2020, *The Discrete Gaussian for Differential Privacy* (NeurIPS),
Prop. 12 and Thm 14. Analytic Gaussian: Balle & Wang 2018, *Improving the Gaussian Mechanism for
Differential Privacy: Analytical Calibration and Optimal Denoising* (ICML), Thm 8 and Alg. 1.

What is private, and with respect to what
-----------------------------------------
The released object is the noised, clipped, pruned encoder output of **one document** (one chunk of at
most L tokens). Neighbouring inputs are *any* two documents x, x' (local DP: the whole document is the
unit). With clip constant C, sequence length L, hidden size d and pruned set P, the released vector has
n = L·(d − |P|) informative coordinates, each in [−C, C], so (thesis Thms 6.3.1, 6.3.2)

    Δ₁ = 2·C·n        Δ₂ = 2·C·√n.

Pruned coordinates are the same for every input and are constant zero, so they add nothing to Δ.

Why the noise is discrete
-------------------------
Floating-point Laplace/Gaussian samples leak the noiseless value through their low-order bits
(Mironov 2012, *On Significance of the Least Significant Bits for Differential Privacy*, CCS). Here
the clipped value is first mapped to an integer grid with unit γ = C / 2^k (``grid_bits`` = k, exact in
binary floating point): ``q = clip(round(z̄/γ), −K, K)`` with K = 2^k. q is a deterministic function of
the input with |q − q'| ≤ 2K per coordinate, so its integer sensitivities are Δ₁/γ = 2Kn and
Δ₂/γ = 2K√n: **the grid does not change the sensitivity**. Integer noise Y is then drawn by the CSPRNG
(``ldptext.rng.Generator``) with exact discrete samplers, and the release is (q + Y)·γ, a
post-processing of the integer vector q + Y. No continuous sample is ever formed.

* **Laplace** (pure ε): Y_i i.i.d. discrete Laplace, P(k) ∝ exp(−|k|/t), t = Δ₁/(γ·ε) rounded up.
  For integer vectors the likelihood ratio is exp((‖y−q'‖₁ − ‖y−q‖₁)/t) ≤ exp(2Kn/t) ≤ e^ε: exact
  (ε, 0)-LDP. We check 2Kn/t ≤ ε in exact rational arithmetic.
* **Gaussian** ((ε, δ)): Y_i i.i.d. discrete Gaussian N_Z(0, σ_Z²) (Canonne–Kamath–Steinke 2020).
  The analytic-Gaussian σ of Balle & Wang (2018, Alg. 1), the usual calibration, is exact for
  *continuous* noise only. For the discrete Gaussian we use a bound we can prove here:

  1. Rényi divergence. For integer shift v and order α > 1, expanding the square,
     αk² + (1−α)(k−v)² = (k − (1−α)v)² + α(1−α)v², hence
     Σ_k p(k)^α p'(k)^{1−α} = e^{α(α−1)v²/(2σ²)} · θ((1−α)v)/θ(0), θ(c) = Σ_k e^{−(k−c)²/(2σ²)}.
     By Poisson summation θ(c) = σ√(2π) Σ_m e^{−2π²σ²m²} cos(2πmc) ≤ θ(0), so
     D_α ≤ α v²/(2σ²), and for independent coordinates D_α ≤ α‖v‖₂²/(2σ²) ≤ αρ with
     ρ = Δ₂²/(2σ²) (this is CKS 2020 Thm 14: the same ρ-zCDP as the continuous Gaussian).
  2. Conversion to (ε, δ) (CKS 2020 Prop. 12; derivation: bound (1 − e^{ε−L})₊ ≤ c·e^{(α−1)L} for the
     privacy loss L and minimise c): for every α > 1,
     δ ≤ exp((α−1)(αρ − ε)) · (1/α) · (1 − 1/α)^{α−1}.
  ``discrete_gaussian_sigma`` returns the smallest σ (bisection, rounded up) whose best bound over α
  is ≤ δ. For the continuous Gaussian this bound is looser than the analytic one, so this σ is never
  below the analytic σ (it is a few per cent larger at ε ≫ 1): **conservative**. The report carries
  both (``sigma`` used, ``sigma_analytic`` for reference) and the δ bound actually achieved.

Exact sampling: the noise parameters are rationals, rounded up
--------------------------------------------------------------
The samplers get **integers**, not floats, and work in integer arithmetic only
(``Generator.discrete_laplace_exact`` / ``discrete_gaussian_exact``, CKS 2020 Alg. 1–3; every
Bernoulli is a comparison of uniform integers): the pmf of the noise is *exactly* the formula at the
stated rational parameter, so no floating-point error enters the guarantee and **no slack is added to
ε** (``epsilon_slack = 0``). (The earlier float64 samplers formed their acceptance exponents u/t,
σ²/t and a²/(2σ²) by rounded division: each pmf term was off by a relative ~1e-16; for Laplace that
is an unaccounted ε slack of up to 2⁻⁵³·(2Kn/⌊t⌋ + 3n) ≈ 2e-12 at n = 5,760, for the Gaussian an
unbounded relative error in the far tail.)

* Laplace: t is the float64 rounded up until 2Kn/t ≤ ε holds in rational arithmetic; it is passed
  exactly as t = num/den (every float64 is a dyadic rational), so the proved level is
  ``epsilon_bound`` = 2Kn·den/num ≤ ε exactly.
* Gaussian: σ² = t·m with t = ⌊σ⌋ + 1 and m = ⌈σ²/t⌉ (σ the calibrated float), so σ²_realised ≥ σ²
  (relative excess < 1/σ, ~2e-7 at DP-BART's scales); ρ = (2K√n)²/(2σ²_realised) = 2K²n/(t·m) is
  an exact rational and ``delta_bound`` is the δ of the Rényi conversion at that ρ (rounded up).

How the grid enters: only through K = 2^k. The integer query q has |q − q'| ≤ 2K per coordinate
whatever γ is, so the calibration in grid units (t, σ in multiples of γ) is exact, and the release
(q + Y)·γ (float64, then float32 for the decoder) is post-processing of the integer vector q + Y.

Numerics round outward: σ and t are rounded up, the analytic-Gaussian condition is evaluated in log
space (log Φ) so it stays correct for ε up to 5,000 and beyond and δ down to 1e-12 and below.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, asdict
from fractions import Fraction
from typing import Any, Protocol

import numpy as np

from .errors import ParameterError

__all__ = [
    "DEFAULT_GRID_BITS", "NoiseCalibration", "effective_dim", "l1_sensitivity", "l2_sensitivity",
    "log_ndtr", "analytic_gaussian_log_delta", "analytic_gaussian_sigma", "laplace_scale",
    "rdp_gaussian_delta", "discrete_gaussian_sigma", "calibrate", "privatize", "discrete_laplace_variance",
    "validate_privacy_parameters", "EXACT_PARAMETER_MAX", "check_clip_n", "round_up",
    "rational_at_least",
]

#: grid unit γ = C / 2**DEFAULT_GRID_BITS: ~1e-7 for C = 0.1, far below any useful noise scale and
#: below float32 resolution of the decoder input, so the grid costs no utility.
DEFAULT_GRID_BITS = 20
# relative safety margin added after bisection so floating-point error in the δ evaluation can never
# make σ smaller than the exact root (1e-9 ≪ the 1e-6 tolerance the tests demand)
_SAFETY = 1e-9
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
#: largest noise scale (t, or σ) in grid units the exact samplers are given: far from int64 overflow
#: of a draw (probability ~exp(−2^12)), and far beyond any useful noise (σ ≈ 4.3e9·C at k = 20)
EXACT_PARAMETER_MAX = 1 << 52
_INF_MESSAGE = ("epsilon = inf (or a value too large for a float, e.g. 1e400) adds no noise: the output "
                "would not be private")


class _IntegerNoiseSource(Protocol):
    """What ``privatize`` needs from ``ldptext.rng.Generator`` (the randomness contract)."""

    def discrete_laplace_exact(self, num: int, den: int, size: int) -> np.ndarray: ...
    def discrete_gaussian_exact(self, t: int, m: int, size: int) -> np.ndarray: ...


# --------------------------------------------------------------------------------------------------
# parameters and sensitivities
# --------------------------------------------------------------------------------------------------
def validate_privacy_parameters(epsilon: Any, delta: Any, mechanism: str) -> tuple[float, float]:
    """Check (ε, δ, mechanism) and return them as floats.

    Parameters
    ----------
    epsilon : Any
        A real number > 0 (``math.inf`` means *no noise, no privacy*: evaluation only).
    delta : Any
        Gaussian: δ ∈ (0, 1) (``None`` only with ε = ∞). Laplace is pure ε: ``None`` or [0, 1),
        reported as 0.
    mechanism : str
        ``"gaussian"`` or ``"laplace"``.

    Returns
    -------
    epsilon : float
    delta : float

    Raises
    ------
    ParameterError
        Any value out of range or of the wrong type.
    """
    if mechanism not in ("gaussian", "laplace"):
        raise ParameterError(f"unknown mechanism {mechanism!r}: expected 'gaussian' or 'laplace'")
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, np.floating, np.integer)):
        raise ParameterError("epsilon must be a real number")
    try:
        eps = float(epsilon)
    except OverflowError:  # an int beyond the float range, e.g. 10**400
        eps = math.inf if epsilon > 0 else -math.inf
    if math.isnan(eps):
        raise ParameterError("epsilon must be a number > 0, got nan")
    if eps <= 0.0:
        raise ParameterError(f"epsilon must be > 0, got {eps!r}")
    if mechanism == "laplace":
        if delta is None:
            return eps, 0.0
        d = float(delta)
        if math.isnan(d) or not 0.0 <= d < 1.0:
            raise ParameterError(f"delta must be in [0, 1) for the Laplace mechanism, got {d!r}")
        return eps, 0.0  # Laplace is pure ε whatever δ was offered
    if delta is None:
        if math.isinf(eps):
            return eps, 0.0  # no noise at all: δ is meaningless
        raise ParameterError("the Gaussian mechanism needs delta in (0, 1)")
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.floating, np.integer)):
        raise ParameterError("delta must be a real number")
    d = float(delta)
    if math.isnan(d) or not 0.0 < d < 1.0:
        raise ParameterError(f"delta must be in (0, 1), got {d!r}")
    return eps, d


def require_finite_epsilon(epsilon: float, *, allow_infinite: bool, flag: str) -> None:
    """Refuse ε = ∞ (no noise, no privacy) unless the caller opted in for evaluation.

    Parameters
    ----------
    epsilon : float
        A validated ε (:func:`validate_privacy_parameters`): > 0, possibly ``math.inf``.
    allow_infinite : bool
        The caller's explicit evaluation-only opt-in.
    flag : str
        How the caller opts in, for the message (``"--allow-infinite-epsilon"``,
        ``"allow_infinite_epsilon=True"``).

    Raises
    ------
    ParameterError
        ε = ∞ without the opt-in.
    """
    if math.isinf(epsilon) and not allow_infinite:
        raise ParameterError(f"{_INF_MESSAGE}; it is refused unless {flag} is given (no privacy, "
                             "evaluation only)")


def effective_dim(seq_len: int, hidden: int, n_pruned: int = 0) -> int:
    """The number of released coordinates that carry information: n = L·(d − |P|) (thesis §6.3.4).

    Parameters
    ----------
    seq_len : int
        L > 0.
    hidden : int
        d > 0.
    n_pruned : int
        |P|, 0 ≤ |P| < d.

    Returns
    -------
    int

    Raises
    ------
    ParameterError
        Out of range.
    """
    if seq_len <= 0 or hidden <= 0 or not 0 <= n_pruned < hidden:
        raise ParameterError("need seq_len > 0, hidden > 0 and 0 <= n_pruned < hidden")
    return int(seq_len) * (int(hidden) - int(n_pruned))


def check_clip_n(clip: float, n: int) -> None:
    """Raise ParameterError unless C is a finite number > 0 and n a positive integer."""
    if not (isinstance(clip, (int, float, np.floating)) and math.isfinite(clip) and clip > 0):
        raise ParameterError("clip constant C must be a finite number > 0")
    if int(n) <= 0:
        raise ParameterError("n must be a positive integer")


def l1_sensitivity(clip: float, n: int) -> float:
    """Δ₁ = 2Cn for n values clipped to [−C, C] (thesis Thm 6.3.1), rounded up.

    Parameters
    ----------
    clip : float
        C > 0.
    n : int
        Informative coordinates.

    Returns
    -------
    float
        ≥ 2Cn exactly (rational arithmetic).
    """
    check_clip_n(clip, n)
    return round_up(Fraction(2) * Fraction(float(clip)) * int(n))


def l2_sensitivity(clip: float, n: int) -> float:
    """Δ₂ = 2C√n for n values clipped to [−C, C] (thesis Thm 6.3.2), rounded up.

    Parameters
    ----------
    clip : float
        C > 0.
    n : int
        Informative coordinates.

    Returns
    -------
    float
        ≥ 2C√n (one ulp above the correctly rounded value).
    """
    check_clip_n(clip, n)
    v = 2.0 * float(clip) * math.sqrt(int(n))
    return math.nextafter(v, math.inf)  # sqrt and product are correctly rounded: one ulp covers both


def round_up(x: Fraction) -> float:
    """The smallest float64 ≥ x."""
    f = float(x)
    return f if Fraction(f) >= x else math.nextafter(f, math.inf)


# --------------------------------------------------------------------------------------------------
# log Φ and the analytic Gaussian (Balle & Wang 2018, Alg. 1)
# --------------------------------------------------------------------------------------------------
def log_ndtr(x: float) -> float:
    """Logarithm of the standard normal CDF, log Φ(x), accurate in both tails.

    Parameters
    ----------
    x : float

    Returns
    -------
    float
        No underflow down to x = −1e150. x ≥ −5: from erfc (accurate relative tail values);
        x < −5: log of the Mills ratio by its continued fraction
        Q(t)/φ(t) = 1/(t + 1/(t + 2/(t + 3/(t + …)))), t = −x.
    """
    if math.isnan(x):
        return math.nan
    if x > 5.0:
        return math.log1p(-0.5 * math.erfc(x / math.sqrt(2.0)))
    if x >= -5.0:
        return math.log(0.5 * math.erfc(-x / math.sqrt(2.0)))
    t = -x
    # evaluate the continued fraction from the tail (backward recurrence); 200 terms reach double
    # precision for t ≥ 5 (the fraction converges faster as t grows)
    frac = 0.0
    for k in range(200, 0, -1):
        frac = k / (t + frac)
    mills = 1.0 / (t + frac)
    return -0.5 * t * t - _LOG_SQRT_2PI + math.log(mills)


def _log1mexp(a: float) -> float:
    """log(1 − e^a) for a < 0 (Mächler 2012): stable near 0 and for very negative a."""
    if a >= 0.0:
        return -math.inf
    return math.log(-math.expm1(a)) if a > -math.log(2.0) else math.log1p(-math.exp(a))


def analytic_gaussian_log_delta(epsilon: float, sigma: float, l2: float) -> float:
    """Logarithm of δ(σ) = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ) (Balle & Wang 2018, Thm 8).

    The exact privacy profile of the continuous Gaussian mechanism N(0, σ²) with ℓ₂ sensitivity Δ.

    Parameters
    ----------
    epsilon : float
        ε > 0.
    sigma : float
        σ > 0.
    l2 : float
        Δ₂ > 0.

    Returns
    -------
    float
        log δ, computed in log space (stable for ε up to 5,000 and beyond).
    """
    u = epsilon * sigma / l2
    v = l2 / (2.0 * sigma)
    la = log_ndtr(v - u)
    lb = log_ndtr(-v - u)
    return la + _log1mexp(epsilon + lb - la)


def _bisect_sigma(log_delta_of_sigma, log_target: float, guess: float) -> float:
    """Smallest σ with log_delta(σ) ≤ log_target, for a function decreasing in σ; returns the upper end."""
    lo, hi = guess, guess
    while log_delta_of_sigma(hi) > log_target:
        hi *= 2.0
    while log_delta_of_sigma(lo) <= log_target:
        lo /= 2.0
        if lo < 1e-300:
            return hi
    for _ in range(200):
        if hi - lo <= hi * 1e-13:
            break
        mid = math.sqrt(lo * hi)
        if not lo < mid < hi:
            break
        if log_delta_of_sigma(mid) <= log_target:
            hi = mid
        else:
            lo = mid
    return hi * (1.0 + _SAFETY)


def analytic_gaussian_sigma(epsilon: float, delta: float, l2: float) -> float:
    """Smallest σ such that N(0, σ²) noise gives (ε, δ)-DP for ℓ₂ sensitivity Δ (Balle & Wang 2018, Alg. 1).

    Parameters
    ----------
    epsilon : float
        ε > 0 (tested 0.1 … 5,000).
    delta : float
        δ ∈ (0, 1) (tested down to 1e-12).
    l2 : float
        Δ₂ > 0.

    Returns
    -------
    float
        Log-space bisection on σ, rounded up by a relative 1e-9 (conservative: never below the exact
        root). This is the calibration of *continuous* Gaussian noise; see
        :func:`discrete_gaussian_sigma` for the noise actually added.
    """
    eps, d = validate_privacy_parameters(epsilon, delta, "gaussian")
    if not (math.isfinite(l2) and l2 > 0):
        raise ParameterError("l2 sensitivity must be finite and > 0")
    guess = l2 / math.sqrt(2.0 * eps) if eps > 1 else l2 * math.sqrt(2 * math.log(1.25 / d)) / eps
    return _bisect_sigma(lambda s: analytic_gaussian_log_delta(eps, s, l2), math.log(d), guess)


# --------------------------------------------------------------------------------------------------
# discrete Gaussian: RDP → (ε, δ)
# --------------------------------------------------------------------------------------------------
def _log_rdp_delta_at(alpha: float, rho: float, epsilon: float) -> float:
    # log of exp((α−1)(αρ−ε)) · (1/α) · (1 − 1/α)^(α−1)
    return (alpha - 1.0) * (alpha * rho - epsilon) - math.log(alpha) + (alpha - 1.0) * math.log1p(-1.0 / alpha)


def rdp_gaussian_log_delta(epsilon: float, rho: float) -> float:
    """Logarithm of the best δ over α > 1 such that a ρ-zCDP mechanism (D_α ≤ αρ) is (ε, δ)-DP.

    Canonne, Kamath & Steinke 2020, *The Discrete Gaussian for Differential Privacy* (NeurIPS),
    Prop. 12 (see the module docstring). Any α gives a valid bound, so an imprecise minimisation only
    makes δ larger (never unsafe).

    Parameters
    ----------
    epsilon : float
        ε > 0.
    rho : float
        ρ ≥ 0 (ρ = Δ₂²/(2σ²) for Gaussian noise).

    Returns
    -------
    float
        log δ (−inf for ρ = 0).
    """
    if rho <= 0:
        return -math.inf
    # unconstrained optimum of the dominant term: α* ≈ (ε + ρ)/(2ρ); search a log-grid around it,
    # then refine by golden section
    centre = max((epsilon + rho) / (2.0 * rho), 1.0 + 1e-9)
    grid = [1.0 + (centre - 1.0) * f for f in (0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.5, 2.0, 4.0)]
    grid += [1.0 + 10.0 ** e for e in range(-6, 7)]
    best_a = min(grid, key=lambda a: _log_rdp_delta_at(a, rho, epsilon))
    lo, hi = 1.0 + (best_a - 1.0) / 4.0, 1.0 + (best_a - 1.0) * 4.0
    g = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = _log_rdp_delta_at(a, rho, epsilon), _log_rdp_delta_at(b, rho, epsilon)
    for _ in range(100):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = _log_rdp_delta_at(a, rho, epsilon)
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = _log_rdp_delta_at(b, rho, epsilon)
    return min(fa, fb, _log_rdp_delta_at(best_a, rho, epsilon))


def rdp_gaussian_delta(epsilon: float, rho: float) -> float:
    """δ achieved at ε by a ρ-zCDP mechanism (discrete or continuous Gaussian, ρ = Δ₂²/(2σ²)).

    Parameters
    ----------
    epsilon : float
    rho : float

    Returns
    -------
    float
        min(1, exp(:func:`rdp_gaussian_log_delta`)); Canonne, Kamath & Steinke 2020, *The Discrete
        Gaussian for Differential Privacy* (NeurIPS), Prop. 12.
    """
    return min(1.0, math.exp(rdp_gaussian_log_delta(epsilon, rho)))


def discrete_gaussian_sigma(epsilon: float, delta: float, l2: float) -> float:
    """Smallest σ such that i.i.d. discrete Gaussian noise N_Z(0, σ²) is (ε, δ)-DP for ℓ₂ sensitivity Δ.

    By the Rényi bound of the module docstring: Canonne, Kamath & Steinke 2020, *The Discrete
    Gaussian for Differential Privacy* (NeurIPS), Thm 14 (ρ-zCDP of the multivariate discrete
    Gaussian) and Prop. 12 (conversion to (ε, δ)).

    Parameters
    ----------
    epsilon : float
        ε > 0.
    delta : float
        δ ∈ (0, 1).
    l2 : float
        Δ₂ of the integer query, in grid units.

    Returns
    -------
    float
        σ in the units of Δ, rounded up; always ≥ :func:`analytic_gaussian_sigma` (the RDP bound is
        looser than the exact continuous profile).
    """
    eps, d = validate_privacy_parameters(epsilon, delta, "gaussian")
    sigma_a = analytic_gaussian_sigma(eps, d, l2)
    f = lambda s: rdp_gaussian_log_delta(eps, l2 * l2 / (2.0 * s * s))  # noqa: E731
    return max(sigma_a, _bisect_sigma(f, math.log(d), sigma_a))


def laplace_scale(epsilon: float, l1: float) -> float:
    """Laplace scale b = Δ₁/ε rounded up.

    Pure ε-DP: Dwork & Roth 2014, *The Algorithmic Foundations of Differential Privacy*, Thm 3.6.

    Parameters
    ----------
    epsilon : float
        ε > 0.
    l1 : float
        Δ₁ > 0.

    Returns
    -------
    float
        ≥ Δ₁/ε exactly (rational arithmetic).
    """
    eps, _ = validate_privacy_parameters(epsilon, None, "laplace")
    if not (math.isfinite(l1) and l1 > 0):
        raise ParameterError("l1 sensitivity must be finite and > 0")
    return round_up(Fraction(l1) / Fraction(eps))


def discrete_laplace_variance(t: float) -> float:
    """Variance of the discrete Laplace distribution P(k) ∝ exp(−|k|/t) on the integers.

    Parameters
    ----------
    t : float
        Scale t > 0.

    Returns
    -------
    float
        2e^{−1/t}/(1 − e^{−1/t})².
    """
    q = math.exp(-1.0 / t)
    return 2.0 * q / (-math.expm1(-1.0 / t)) ** 2


# --------------------------------------------------------------------------------------------------
# calibration record and the noise step
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NoiseCalibration:
    """Everything that determines the noise of one release (one chunk), and its guarantee.

    Attributes
    ----------
    mechanism : str
        ``"gaussian"`` or ``"laplace"``.
    epsilon, delta : float
        The requested guarantee (δ = 0 for Laplace).
    n : int
        Informative coordinates, L·(d − |P|).
    clip : float
        C.
    sensitivity : float
        Δ₂ (Gaussian) or Δ₁ (Laplace).
    scale : float
        σ (Gaussian) or b (Laplace) in real units.
    scale_grid : float
        The same in grid units (exactly ``scale / grid_unit``).
    grid_bits : int
        k: the grid unit is C / 2^k.
    grid_unit : float
        γ = C / 2^k.
    variance : float
        Per-coordinate noise variance in real units.
    sigma_analytic : float or None
        The continuous analytic-Gaussian σ, for reference.
    epsilon_bound, delta_bound : float or None
        The ε and δ actually proved for the discrete noise (≤ the requested ones).
    private : bool
        False only for ε = ∞ (no noise at all: evaluation mode).
    notes : tuple of str
    sampler_parameters : tuple of (int, int) or None
        The integers the exact sampler is given: ``(num, den)`` for Laplace (scale t = num/den grid
        units), ``(t, m)`` for Gaussian (σ² = t·m grid units²); ``None`` at ε = ∞ (no noise).
    noise_exact : bool
        True: the noise pmf is exactly the formula at ``sampler_parameters`` (integer arithmetic).
    epsilon_slack : float
        What sampling adds to ε beyond ``epsilon_bound``: 0 (exact sampling).
    """

    mechanism: str
    epsilon: float
    delta: float
    n: int
    clip: float
    sensitivity: float
    scale: float
    scale_grid: float
    grid_bits: int
    grid_unit: float
    variance: float
    sigma_analytic: float | None = None
    epsilon_bound: float | None = None
    delta_bound: float | None = None
    private: bool = True
    notes: tuple[str, ...] = field(default_factory=tuple)
    sampler_parameters: tuple[int, int] | None = None
    noise_exact: bool = True
    epsilon_slack: float = 0.0

    @property
    def noise_parameter(self) -> str:
        """The exact noise parameter in words, e.g. ``"t = 24159191/1 grid units"``."""
        if self.sampler_parameters is None:
            return "none (epsilon = inf: no noise)"
        a, b = self.sampler_parameters
        if self.mechanism == "laplace":
            return f"t = {a}/{b} grid units (exact rational)"
        return f"sigma^2 = {a}*{b} = {a * b} grid units^2 (exact integer)"

    def as_dict(self) -> dict:
        """JSON-ready form of every field."""
        d = asdict(self)
        d["notes"] = list(self.notes)
        d["sampler_parameters"] = None if self.sampler_parameters is None else list(self.sampler_parameters)
        return d


def calibrate(mechanism: str, epsilon: float, delta: float | None, *, clip: float, n: int,
              grid_bits: int = DEFAULT_GRID_BITS) -> NoiseCalibration:
    """Calibrate discrete noise for one release of n values clipped to [−C, C].

    Parameters
    ----------
    mechanism : str
        ``"gaussian"`` or ``"laplace"``.
    epsilon : float
        ε > 0 (``math.inf``: no noise, ``private=False``).
    delta : float or None
        δ ∈ (0, 1) for the Gaussian mechanism.
    clip : float
        C > 0.
    n : int
        Informative coordinates per release, L·(d − |P|).
    grid_bits : int
        k ∈ [4, 40]: grid unit C / 2^k.

    Returns
    -------
    NoiseCalibration

    Raises
    ------
    ParameterError
        A parameter is out of range.

    Notes
    -----
    Guarantee: ``privatize(z, ...)`` with the returned calibration is (ε, 0)-LDP (Laplace) or
    (ε, δ)-LDP (Gaussian) with respect to *any* two inputs (neighbouring relation: replace the whole
    chunk), for the n unpruned coordinates. Igamberdiev & Habernal 2023, *DP-BART for Privatized Text
    Rewriting under Local Differential Privacy* (Findings of ACL), as presented in Igamberdiev 2023,
    *Differentially Private Methods in NLP* (PhD thesis, TU Darmstadt), §6.3.3; discrete Gaussian:
    Canonne, Kamath & Steinke 2020, *The Discrete Gaussian for Differential Privacy* (NeurIPS),
    Thm 14 and Prop. 12 (accounting in the module docstring).
    """
    eps, d = validate_privacy_parameters(epsilon, delta, mechanism)
    check_clip_n(clip, n)
    if not 4 <= int(grid_bits) <= 40:
        raise ParameterError("grid_bits must be between 4 and 40")
    gamma = math.ldexp(float(clip), -int(grid_bits))  # exact: C / 2^k
    k_max = 1 << int(grid_bits)
    if math.isinf(eps):
        sens = l1_sensitivity(clip, n) if mechanism == "laplace" else l2_sensitivity(clip, n)
        return NoiseCalibration(mechanism, eps, d, int(n), float(clip), sens, 0.0, 0.0, int(grid_bits),
                                gamma, 0.0, None, math.inf, d, private=False,
                                notes=("epsilon=inf: no noise is added, the output is NOT private "
                                       "(evaluation only)",))
    if mechanism == "laplace":
        l1 = l1_sensitivity(clip, n)
        # work in grid units: the integer query has ℓ₁ sensitivity exactly 2Kn, so t = 2Kn/ε rounded
        # up gives (2Kn/t ≤ ε) exactly; the sampler gets t as the exact rational num/den
        num, den = rational_at_least(Fraction(2 * k_max * int(n)) / Fraction(eps))
        t_exact = Fraction(num, den)
        eps_exact = Fraction(2 * k_max * int(n)) / t_exact
        assert eps_exact <= Fraction(eps)
        t = round_up(t_exact)
        b = t * gamma
        eps_bound = round_up(eps_exact)
        return NoiseCalibration("laplace", eps, 0.0, int(n), float(clip), l1, b, t, int(grid_bits), gamma,
                                discrete_laplace_variance(t) * gamma * gamma, None, min(eps_bound, eps), 0.0,
                                sampler_parameters=(num, den))
    l2 = l2_sensitivity(clip, n)
    sigma_a = analytic_gaussian_sigma(eps, d, l2)
    # integer ℓ₂ sensitivity 2K√n in grid units, rounded up; calibrate the discrete Gaussian there
    l2_grid = math.nextafter(2.0 * k_max * math.sqrt(int(n)), math.inf)
    sigma_cal = discrete_gaussian_sigma(eps, d, l2_grid)
    if not sigma_cal < EXACT_PARAMETER_MAX:
        raise ParameterError(f"the noise (sigma = {sigma_cal:.3g} grid units) is too large for the exact "
                             "sampler: epsilon is too small for this clip and grid")
    # σ² = t·m ≥ σ_cal², t = ⌊σ⌋ + 1 (the sampler's proposal scale): both exact integers
    t_int = math.floor(sigma_cal) + 1
    m_int = -((-Fraction(sigma_cal) ** 2) // t_int)  # ⌈σ²/t⌉ ≤ t
    while True:
        s2 = t_int * m_int
        rho = round_up(Fraction(2 * k_max * k_max * int(n), s2))  # (2K√n)²/(2σ²), exact then up
        delta_bound = rdp_gaussian_delta(eps, rho)
        if delta_bound <= d:
            break
        # never taken in practice (σ_cal already meets δ); more noise is always safe, and the
        # sampler's m ≤ t ≤ 4m is kept
        t_int, m_int = (t_int, m_int + 1) if m_int < t_int else (t_int + 1, t_int)
    sigma_grid = _sqrt_up(s2)
    sigma = sigma_grid * gamma
    return NoiseCalibration("gaussian", eps, d, int(n), float(clip), l2, sigma, sigma_grid, int(grid_bits),
                            gamma, float(Fraction(s2) * Fraction(gamma) ** 2), sigma_a, eps, delta_bound,
                            notes=("discrete Gaussian calibrated by the Renyi (zCDP) bound; "
                                   "sigma_analytic is the continuous analytic-Gaussian value",),
                            sampler_parameters=(t_int, m_int))


def rational_at_least(x: Fraction) -> tuple[int, int]:
    """(num, den) with num/den ≥ x > 0, both ≤ 2^56: x itself when it fits, else rounded up."""
    if not x < EXACT_PARAMETER_MAX:
        raise ParameterError(f"the noise scale ({float(x):.3g} grid units) is too large for the exact "
                             "sampler: epsilon is too small for this clip and grid")
    limit = 1 << 56
    if x.numerator <= limit and x.denominator <= limit:
        return x.numerator, x.denominator
    den = 1 << 56
    while den > 1 and math.ceil(x * den) > limit:
        den >>= 1
    num = math.ceil(x * den)
    g = math.gcd(num, den)
    return num // g, den // g


def _sqrt_up(v: int) -> float:
    """A float64 ≥ √v for a positive integer v."""
    r = math.sqrt(v)
    while Fraction(r) ** 2 < v:
        r = math.nextafter(r, math.inf)
    return r


def privatize(z: np.ndarray, calibration: NoiseCalibration, rng: _IntegerNoiseSource,
              pruned: np.ndarray | None = None) -> np.ndarray:
    """Clip, prune and noise encoder outputs: the private release.

    Parameters
    ----------
    z : np.ndarray of float, shape (..., L, d)
        Encoder outputs (one document per leading index).
    calibration : NoiseCalibration
        From :func:`calibrate`, for n = L·(d − |P|).
    rng : ldptext.rng.Generator
        The CSPRNG (anything with ``discrete_laplace`` / ``discrete_gaussian``).
    pruned : np.ndarray of int, shape (|P|,), or None
        P.

    Returns
    -------
    np.ndarray of float32, same shape as z
        Values on the grid γ·ℤ; pruned indices exactly 0.

    Raises
    ------
    ParameterError
        Shape, pruned indices or n do not match the calibration.

    Notes
    -----
    Steps (Igamberdiev 2023, *Differentially Private Methods in NLP* (PhD thesis, TU Darmstadt),
    Eqns 6.2, 6.9 and Alg. 1 PRUNE): NaN → 0 (a NaN would survive clipping and make
    the output depend on the input deterministically); clip to [−C, C]; map to the integer grid; set
    the pruned hidden indices to exactly 0 *by assignment* (0·NaN would be NaN); draw one independent
    integer per unpruned coordinate (n = L·(d − |P|) draws per document, never a vector broadcast
    over tokens); release (q + Y)·γ. Pruned coordinates stay exactly 0 and receive no noise, so the
    output there is a constant, independent of both the input and the randomness.
    The number of random draws depends only on the shape and P, never on the values of z; the
    draws of document i are the i-th block of n, so one document's release does not depend on the
    values of another's. Guarantee per document: as :func:`calibrate` (Igamberdiev & Habernal 2023,
    *DP-BART for Privatized Text Rewriting under Local Differential Privacy* (Findings of ACL),
    §6.3.3–6.3.5 of the thesis above; Canonne, Kamath & Steinke 2020, *The Discrete Gaussian for
    Differential Privacy* (NeurIPS), Thm 14).
    """
    z = np.asarray(z, dtype=np.float64)
    if z.ndim < 2:
        raise ParameterError("z must have shape (..., L, d)")
    d = z.shape[-1]
    keep = np.ones(d, dtype=bool)
    if pruned is not None and len(pruned):
        idx = np.asarray(pruned, dtype=np.int64)
        if idx.min() < 0 or idx.max() >= d:
            raise ParameterError("pruned index out of range")
        keep[idx] = False
    n_doc = int(np.prod(z.shape[-2:-1])) * int(keep.sum())
    if n_doc != calibration.n:
        raise ParameterError(f"calibration is for n={calibration.n} but this input has n={n_doc}")
    k_max = 1 << calibration.grid_bits
    gamma = calibration.grid_unit
    c = calibration.clip
    clipped = np.clip(np.nan_to_num(z, nan=0.0, posinf=c, neginf=-c), -c, c)
    q = np.clip(np.rint(clipped / gamma), -k_max, k_max).astype(np.int64)
    q[..., ~keep] = 0
    if calibration.private:
        count = int(q[..., keep].size)
        if calibration.sampler_parameters is None:
            raise ParameterError("a private calibration needs its exact sampler parameters")
        a, b = calibration.sampler_parameters
        if calibration.mechanism == "laplace":
            noise = np.asarray(rng.discrete_laplace_exact(a, b, count), dtype=np.int64)
        else:
            noise = np.asarray(rng.discrete_gaussian_exact(a, b, count), dtype=np.int64)
        if noise.shape != (count,):
            raise ParameterError("random generator returned the wrong number of draws")
        kept = q[..., keep]
        q[..., keep] = kept + noise.reshape(kept.shape)
    out = q.astype(np.float64) * gamma
    out[..., ~keep] = 0.0
    return out.astype(np.float32)
