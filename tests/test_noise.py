"""DP-BART calibration and discrete noise: sensitivities, the noise source, pruned coordinates.

The references here are written independently of ``ldptext.noise``: mpmath at 40 digits for the
analytic Gaussian and log Φ, exact summation for the 1-D discrete Gaussian privacy profile.
"""
from __future__ import annotations

import math
import warnings
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest

from ldptext import noise
from ldptext.errors import ParameterError


@pytest.fixture()
def seeded_rng():
    from ldptext.rng import Generator, SeededModeWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        return Generator(seed=1234)


# ----------------------------------------------------------------------------- references (mpmath)
def ref_analytic_sigma(eps: float, delta: float, sens: float) -> mp.mpf:
    """Balle & Wang 2018 Thm 8, solved by bisection in mpmath (independent of the module)."""
    with mp.workdps(40):
        e, d, s = mp.mpf(eps), mp.mpf(delta), mp.mpf(sens)

        def excess(sig):
            return mp.ncdf(s / (2 * sig) - e * sig / s) - mp.exp(e) * mp.ncdf(-s / (2 * sig) - e * sig / s) - d

        lo, hi = s * mp.mpf(10) ** -8, s * mp.mpf(10) ** 8
        for _ in range(200):
            mid = mp.sqrt(lo * hi)
            if excess(mid) > 0:
                lo = mid
            else:
                hi = mid
            if (hi - lo) / hi < mp.mpf(10) ** -15:
                break
        return hi


# ----------------------------------------------------------------------------- sensitivities
@pytest.mark.parametrize("clip,L,d,pruned", [(0.1, 20, 768, 0), (0.1, 20, 768, 586), (0.25, 7, 32, 5)])
def test_sensitivities_are_2Cn_and_2C_sqrt_n_with_pruned_dimensions_removed(clip, L, d, pruned):
    n = noise.effective_dim(L, d, pruned)
    assert n == L * (d - pruned)
    assert noise.l1_sensitivity(clip, n) == pytest.approx(2 * clip * n, rel=1e-15)
    assert noise.l1_sensitivity(clip, n) >= 2 * clip * n
    assert noise.l2_sensitivity(clip, n) == pytest.approx(2 * clip * math.sqrt(n), rel=1e-15)
    assert noise.l2_sensitivity(clip, n) >= 2 * clip * math.sqrt(n)
    cal = noise.calibrate("gaussian", 10.0, 1e-6, clip=clip, n=n)
    assert cal.n == n and cal.sensitivity == noise.l2_sensitivity(clip, n)


def test_analytic_sigma_matches_mpmath_and_is_never_below_it():
    sens = 24.787  # arbitrary; σ scales linearly in Δ at fixed (ε, δ)
    for eps in (0.1, 0.5, 1.0, 10.0, 100.0, 500.0, 1000.0, 5000.0):
        for delta in (1e-3, 1e-5, 1e-9, 1e-12):
            ours = noise.analytic_gaussian_sigma(eps, delta, sens)
            ref = ref_analytic_sigma(eps, delta, sens)
            assert ours >= ref, (eps, delta, ours, ref)
            assert (ours - ref) / ref <= 1e-6, (eps, delta, ours, ref)


@pytest.mark.parametrize("n,expected_l2,expected_sigma", [(15360, 24.79, 0.8957), (3640, 12.07, 0.4360)])
def test_spec_worked_values(n, expected_l2, expected_sigma):
    l2 = noise.l2_sensitivity(0.1, n)
    assert l2 == pytest.approx(expected_l2, abs=0.005)
    assert noise.analytic_gaussian_sigma(500.0, 1e-5, l2) == pytest.approx(expected_sigma, abs=1e-4)


def test_classical_gaussian_is_not_used_at_large_epsilon():
    # the classical formula √(2 ln(1.25/δ))·Δ/ε gives ~0.48 here: far too little noise
    classical = math.sqrt(2 * math.log(1.25 / 1e-5)) * 24.79 / 250
    assert noise.analytic_gaussian_sigma(250.0, 1e-5, 24.79) > 2.5 * classical


def test_log_ndtr_matches_mpmath_in_both_tails():
    with mp.workdps(40):
        for x in (-5000.0, -800.0, -40.0, -38.0, -10.0, -5.0001, -5.0, -4.999, -1.0, 0.0, 1.5, 5.0, 5.001, 9.0, 30.0):
            ref = mp.log(mp.ncdf(mp.mpf(x)))
            ours = noise.log_ndtr(x)
            assert abs(ours - float(ref)) <= 1e-13 * max(1.0, abs(float(ref))), x


def test_laplace_path_is_pure_epsilon_exactly():
    for eps in (0.1, 1.0, 7.3, 500.0):
        cal = noise.calibrate("laplace", eps, None, clip=0.1, n=15360)
        assert cal.delta == 0.0 and cal.delta_bound == 0.0
        k = 1 << cal.grid_bits
        # integer ℓ₁ sensitivity 2Kn over the integer scale t, exactly
        assert Fraction(2 * k * cal.n) / Fraction(cal.scale_grid) <= Fraction(eps)
        assert cal.scale == pytest.approx(2 * 0.1 * 15360 / eps, rel=1e-12)
        assert cal.scale >= 2 * 0.1 * 15360 / eps * (1 - 1e-15)
    # δ offered with Laplace is ignored (reported 0), an invalid δ is still rejected
    assert noise.calibrate("laplace", 1.0, 1e-5, clip=0.1, n=10).delta == 0.0


def test_rdp_conversion_upper_bounds_the_exact_gaussian_profile():
    # sanity check of the (ε, δ) conversion used for the discrete Gaussian: applied to the continuous
    # Gaussian (same ρ) it must never be below that mechanism's exact δ
    for eps in (0.1, 1.0, 10.0, 500.0, 5000.0):
        for ratio in (0.5, 1.0, 2.0):
            sigma = noise.analytic_gaussian_sigma(eps, 1e-6, 10.0) * ratio
            exact = math.exp(noise.analytic_gaussian_log_delta(eps, sigma, 10.0))
            rho = 100.0 / (2 * sigma * sigma)
            assert noise.rdp_gaussian_delta(eps, rho) >= exact


def test_discrete_gaussian_calibration_is_conservative():
    for eps in (0.1, 1.0, 500.0, 5000.0):
        for delta in (1e-3, 1e-12):
            cal = noise.calibrate("gaussian", eps, delta, clip=0.1, n=15360)
            assert cal.scale >= cal.sigma_analytic
            assert cal.delta_bound <= delta
            assert cal.scale <= 1.25 * cal.sigma_analytic  # conservative, but not absurdly so


def test_discrete_gaussian_exact_1d_privacy_profile_is_within_delta():
    # Independent check on a small grid (K = 16, n = 1): sum the hockey-stick divergence of the 1-D
    # discrete Gaussian exactly for every integer shift |v| ≤ 2K and compare with the requested δ.
    for eps, delta in ((1.0, 1e-5), (5.0, 1e-9), (0.5, 1e-3)):
        cal = noise.calibrate("gaussian", eps, delta, clip=1.0, n=1, grid_bits=4)
        s = cal.scale_grid
        span = int(s * 40) + 64
        ks = np.arange(-span, span + 1, dtype=np.float64)
        logp = -ks * ks / (2 * s * s)
        p = np.exp(logp - logp.max())
        p /= math.fsum(p)
        for v in range(1, 2 * 16 + 1):
            # privacy loss of output k between centres 0 and v: (−k² + (k − v)²)/(2σ²)
            loss = ((ks - v) ** 2 - ks * ks) / (2 * s * s)
            hs = math.fsum(p * np.maximum(0.0, -np.expm1(eps - loss)))
            assert hs <= delta, (eps, delta, v, hs)


@pytest.mark.parametrize("eps,delta,mech", [
    (0, 1e-5, "gaussian"), (-1, 1e-5, "gaussian"), (float("nan"), 1e-5, "gaussian"),
    (1.0, 0.0, "gaussian"), (1.0, 1.0, "gaussian"), (1.0, float("nan"), "gaussian"), (1.0, None, "gaussian"),
    (1.0, -0.1, "laplace"), (1.0, 1e-5, "uniform"), ("1", 1e-5, "gaussian"), (True, 1e-5, "gaussian"),
])
def test_bad_privacy_parameters_raise_parameter_error(eps, delta, mech):
    with pytest.raises(ParameterError):
        noise.calibrate(mech, eps, delta, clip=0.1, n=10)


def test_infinite_epsilon_means_no_noise_and_is_flagged_not_private(seeded_rng):
    cal = noise.calibrate("gaussian", math.inf, 1e-5, clip=0.5, n=6)
    assert not cal.private and cal.scale == 0.0
    z = np.linspace(-1, 1, 6).reshape(2, 3)
    out = noise.privatize(z, cal, seeded_rng)
    np.testing.assert_allclose(out, np.clip(z, -0.5, 0.5), atol=1e-6)


# ----------------------------------------------------------------------------- noise source
class RecordingGenerator:
    """Wraps the CSPRNG and records every call (what was asked, how many draws)."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def discrete_gaussian_exact(self, t, m, size):
        self.calls.append(("gaussian", (t, m), size))
        return self.inner.discrete_gaussian_exact(t, m, size)

    def discrete_laplace_exact(self, num, den, size):
        self.calls.append(("laplace", (num, den), size))
        return self.inner.discrete_laplace_exact(num, den, size)


@pytest.mark.parametrize("mechanism", ["gaussian", "laplace"])
def test_noise_is_iid_per_coordinate_from_the_csprng_on_the_grid(mechanism, seeded_rng):
    L, d, pruned = 6, 10, np.array([2, 7])
    n = noise.effective_dim(L, d, len(pruned))
    cal = noise.calibrate(mechanism, 2.0 if mechanism == "gaussian" else 200.0, 1e-5, clip=0.1, n=n)
    rec = RecordingGenerator(seeded_rng)
    reps = 400
    z = np.zeros((reps, L, d))
    out = noise.privatize(z, cal, rec, pruned=pruned).astype(np.float64)
    # one draw per unpruned coordinate of every document, from the generator's discrete sampler
    assert rec.calls == [(mechanism, cal.sampler_parameters, reps * n)]
    # discrete: every released value is an integer multiple of the grid unit (float32 rounding aside)
    grid = out[..., [j for j in range(d) if j not in pruned]] / cal.grid_unit
    assert np.all(np.abs(grid - np.rint(grid)) <= np.abs(grid) * 2 ** -23 + 1e-9)
    kept = out[..., [j for j in range(d) if j not in pruned]].reshape(reps, -1)
    # empirical variance of every coordinate's noise matches the calibrated variance
    var = kept.var(axis=0).mean()
    assert var == pytest.approx(cal.variance, rel=0.05)
    # not one vector broadcast over tokens: token 0 and token 1 of the same dimension are independent
    corr = np.corrcoef(out[:, 0, 0], out[:, 1, 0])[0, 1]
    assert abs(corr) < 0.2
    assert not np.allclose(out[:, 0, :], out[:, 1, :])
    # and coordinates are uncorrelated overall
    c = np.corrcoef(kept.T)
    off = c[~np.eye(c.shape[0], dtype=bool)]
    assert np.abs(off).mean() < 0.06


def test_variance_formula_of_discrete_laplace_matches_sampler(seeded_rng):
    x = seeded_rng.discrete_laplace(3.5, 200_000).astype(np.float64)
    assert x.var() == pytest.approx(noise.discrete_laplace_variance(3.5), rel=0.03)


# ----------------------------------------------------------------------------- pruned coordinates
def test_pruned_coordinates_are_exactly_zero_and_receive_no_noise(seeded_rng):
    L, d, pruned = 5, 12, np.array([0, 3, 11])
    n = noise.effective_dim(L, d, len(pruned))
    cal = noise.calibrate("gaussian", 1.0, 1e-5, clip=0.2, n=n)
    base = np.random.default_rng(0).normal(size=(L, d))
    weird = base.copy()
    weird[:, pruned] = np.array([np.nan, np.inf, 1e30])  # whatever the encoder emits there
    for z in (base, weird, -base * 100):
        rec = RecordingGenerator(seeded_rng)
        out = noise.privatize(z, cal, rec, pruned=pruned)
        assert np.all(out[:, pruned] == 0.0) and not np.signbit(out[:, pruned]).any()
        # the randomness consumed does not depend on the input values, only on n
        assert rec.calls == [("gaussian", cal.sampler_parameters, n)]
    # the kept coordinates are unaffected by what the encoder put in pruned coordinates
    from ldptext.rng import Generator, SeededModeWarning
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        a = noise.privatize(base, cal, Generator(seed=5), pruned=pruned)
        b = noise.privatize(weird, cal, Generator(seed=5), pruned=pruned)
    np.testing.assert_array_equal(a, b)


def test_nan_and_inf_in_kept_coordinates_cannot_bypass_clipping(seeded_rng):
    cal = noise.calibrate("laplace", math.inf, None, clip=0.1, n=4)
    out = noise.privatize(np.array([[np.nan, np.inf, -np.inf, 0.05]]), cal, seeded_rng)
    assert np.all(np.isfinite(out)) and np.all(np.abs(out) <= 0.1)
    np.testing.assert_allclose(out, [[0.0, 0.1, -0.1, 0.05]], atol=1e-6)


def test_calibration_for_wrong_n_is_refused(seeded_rng):
    cal = noise.calibrate("gaussian", 1.0, 1e-5, clip=0.1, n=10)
    with pytest.raises(ParameterError):
        noise.privatize(np.zeros((3, 4)), cal, seeded_rng)


# ----------------------------------------------------------------------------- exact noise
# The sampler gets integers: (num, den) with t = num/den for Laplace, (t, m) with σ² = t·m for the
# Gaussian. The references below recompute the guarantee from those integers alone, in Fraction
# and mpmath at 60 digits, independently of the module's float code.
_EPSILONS = (1e-3, 0.1, 1.0, 7.3, 500.0, 1234.5678, 5000.0)


@pytest.mark.parametrize("eps", _EPSILONS)
@pytest.mark.parametrize("clip,n,bits", [(0.1, 15360, 20), (0.199, 5760, 20), (0.37, 3, 4), (1.0, 1, 40)])
def test_laplace_parameter_is_an_exact_rational_whose_epsilon_is_at_most_the_reported(eps, clip, n, bits):
    cal = noise.calibrate("laplace", eps, None, clip=clip, n=n, grid_bits=bits)
    num, den = cal.sampler_parameters
    assert isinstance(num, int) and isinstance(den, int) and 1 <= num <= 2**56 and 1 <= den <= 2**56
    assert cal.noise_exact is True and cal.epsilon_slack == 0.0
    k = 1 << bits
    t = Fraction(num, den)
    # the realised mechanism: integer query with ℓ₁ sensitivity 2Kn, noise P(y) ∝ exp(−|y|/t):
    # its exact privacy level is 2Kn/t (grid units), i.e. Δ₁/(t·γ) in real units
    realised = Fraction(2 * k * n) / t
    assert realised <= Fraction(eps) and realised <= Fraction(cal.epsilon_bound)
    assert cal.epsilon_bound <= eps
    with mp.workdps(60):
        gamma = mp.mpf(clip) / 2 ** bits
        eps_real = 2 * mp.mpf(clip) * n / (mp.mpf(num) / den * gamma)  # Δ₁ / b, b = t·γ
        assert eps_real <= mp.mpf(eps) * (1 + mp.mpf(10) ** -50)  # equal when 2Kn/ε fits (mpmath rounding)
        assert abs(eps_real - mp.mpf(realised.numerator) / realised.denominator) <= mp.mpf(10) ** -50 * eps_real
    # t is not needlessly large: at most 2^-50 relative above 2Kn/ε
    assert t <= Fraction(2 * k * n) / Fraction(eps) * (1 + Fraction(1, 2**50))
    assert cal.scale_grid == pytest.approx(float(t), rel=1e-15) and cal.scale_grid >= t


def _mp_rdp_delta(eps, rho):
    """min over α > 1 of exp((α−1)(αρ−ε))·(1/α)·(1−1/α)^(α−1) (CKS 2020 Prop. 12 / Cor. 13), in mpmath.

    Any α gives a valid bound; the minimum is found by golden section on log α around
    α* = (ε + ρ)/(2ρ), in 60-digit arithmetic."""
    with mp.workdps(60):
        eps, rho = mp.mpf(eps), mp.mpf(rho)

        def log_bound(a):
            return (a - 1) * (a * rho - eps) - mp.log(a) + (a - 1) * mp.log1p(-1 / a)

        centre = max((eps + rho) / (2 * rho), mp.mpf(1) + mp.mpf(10) ** -12)
        lo, hi = mp.log(1 + (centre - 1) / 64), mp.log(1 + (centre - 1) * 64)
        g = (mp.sqrt(5) - 1) / 2
        f = lambda la: log_bound(mp.exp(la))  # noqa: E731
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        fa, fb = f(a), f(b)
        for _ in range(300):
            if fa < fb:
                hi, b, fb = b, a, fa
                a = hi - g * (hi - lo)
                fa = f(a)
            else:
                lo, a, fa = a, b, fb
                b = lo + g * (hi - lo)
                fb = f(b)
        return mp.exp(min(fa, fb))


@pytest.mark.parametrize("eps,delta", [(0.1, 1e-5), (1.0, 1e-5), (10.0, 1e-9), (500.0, 1e-5), (5000.0, 1e-12)])
@pytest.mark.parametrize("clip,n,bits", [(0.1, 15360, 20), (0.199, 5760, 20), (1.0, 1, 4)])
def test_gaussian_parameter_is_an_exact_integer_variance_meeting_delta_in_mpmath(eps, delta, clip, n, bits):
    cal = noise.calibrate("gaussian", eps, delta, clip=clip, n=n, grid_bits=bits)
    t, m = cal.sampler_parameters
    assert isinstance(t, int) and isinstance(m, int) and 1 <= m <= t <= 2**52
    assert cal.noise_exact is True and cal.epsilon_slack == 0.0
    s2 = t * m  # the realised σ² in grid units², exactly
    k = 1 << bits
    # ρ-zCDP of the discrete Gaussian with integer ℓ₂ sensitivity 2K√n (CKS 2020 Thm 14): ρ = (2K√n)²/(2σ²)
    rho = Fraction(4 * k * k * n, 2 * s2)
    ref = _mp_rdp_delta(eps, mp.mpf(rho.numerator) / rho.denominator)
    assert ref <= mp.mpf(delta), (ref, delta)  # the guarantee holds at the realised σ²
    if ref > 1e-300:  # and the report does not understate δ (below that the float underflows to 0)
        assert mp.mpf(cal.delta_bound) >= ref * (1 - mp.mpf(10) ** -9)
    assert cal.delta_bound <= delta
    # σ² realised ≥ the calibrated σ², and not needlessly larger (t = ⌊σ⌋+1, m = ⌈σ²/t⌉)
    assert cal.scale_grid ** 2 >= s2 * (1 - 1e-15)
    assert math.isqrt(s2) + 1 >= cal.scale_grid >= math.sqrt(s2)
    assert cal.scale >= cal.sigma_analytic
    if t > 10:
        assert s2 <= cal.scale_grid ** 2 * (1 + 2.0 / t)


def test_gaussian_exact_1d_privacy_profile_at_the_realised_integer_variance():
    # exact hockey-stick divergence of the 1-D discrete Gaussian with σ² = t·m (the integers the sampler
    # gets), summed in mpmath over the integers for every shift |v| ≤ 2K: ≤ δ
    for eps, delta in ((1.0, 1e-5), (5.0, 1e-9)):
        cal = noise.calibrate("gaussian", eps, delta, clip=1.0, n=1, grid_bits=4)
        t, m = cal.sampler_parameters
        with mp.workdps(40):
            s2 = mp.mpf(t * m)
            span = int(40 * math.sqrt(t * m)) + 64
            w = [mp.exp(-mp.mpf(x) ** 2 / (2 * s2)) for x in range(-span, span + 1)]
            z = mp.fsum(w)
            for v in (1, 7, 32):
                hs = mp.fsum(w[i] / z * max(0, 1 - mp.exp(eps - ((x - v) ** 2 - x * x) / (2 * s2)))
                             for i, x in enumerate(range(-span, span + 1)))
                assert hs <= delta, (eps, delta, v, hs)


def test_float_epsilon_with_a_long_binary_expansion_rounds_t_up_not_down():
    # 0.1 is 3602879701896397/2^55: 2Kn/ε does not fit 56 bits, so t is rounded up to num/den
    cal = noise.calibrate("laplace", 0.1, None, clip=0.1, n=15360)
    num, den = cal.sampler_parameters
    exact = Fraction(2 * (1 << cal.grid_bits) * 15360) / Fraction(0.1)
    assert Fraction(num, den) >= exact and exact.numerator > 2**56 and num <= 2**56


def test_noise_parameter_out_of_the_exact_range_is_refused_clearly():
    with pytest.raises(ParameterError, match="too small"):
        noise.calibrate("laplace", 1e-30, None, clip=0.1, n=15360)
    with pytest.raises(ParameterError, match="too small"):
        noise.calibrate("gaussian", 1e-30, 1e-20, clip=0.1, n=15360)


@pytest.mark.parametrize("value", [math.inf, float("1e400"), 10**400, np.float64("inf")])
def test_infinite_epsilon_is_refused_without_the_explicit_opt_in(value):
    eps, _ = noise.validate_privacy_parameters(value, None, "laplace")
    assert math.isinf(eps)
    with pytest.raises(ParameterError, match="allow_infinite_epsilon=True") as e:
        noise.require_finite_epsilon(eps, allow_infinite=False, flag="allow_infinite_epsilon=True")
    assert "not be private" in str(e.value) and "evaluation only" in str(e.value)
    noise.require_finite_epsilon(eps, allow_infinite=True, flag="x")  # the opt-in
    noise.require_finite_epsilon(5.0, allow_infinite=False, flag="x")
    with pytest.raises(ParameterError, match="nan"):
        noise.validate_privacy_parameters(float("nan"), None, "laplace")


# ----------------------------------------------------------------------------- the exact samplers' pmf
def _exact_pmf(logw, support):
    with mp.workdps(30):
        w = [mp.exp(logw(k)) for k in support]
        z = mp.fsum(w)
        return np.array([float(x / z) for x in w])


def _chi2(counts, probs):
    from scipy import stats

    counts = np.asarray(counts, dtype=np.float64)
    expected = np.asarray(probs, dtype=np.float64) * counts.sum()
    small = expected < 5
    if small.any():
        counts = np.append(counts[~small], counts[small].sum())
        expected = np.append(expected[~small], expected[small].sum())
    return stats.chisquare(counts, expected * counts.sum() / expected.sum()).pvalue


def _seeded(seed, backend):
    from ldptext.rng import Generator, SeededModeWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        return Generator(seed=seed, backend=backend)


@pytest.mark.parametrize("backend", ["native", "fallback"])
@pytest.mark.parametrize("num,den", [(1, 3), (1, 1), (7, 2), (5, 1), (123457, 1000)])
def test_exact_discrete_laplace_matches_its_pmf(backend, num, den):
    x = _seeded(21, backend).discrete_laplace_exact(num, den, 100_000)
    scale = num / den
    lim = int(30 * scale) + 10
    support = range(-lim, lim + 1)
    pmf = _exact_pmf(lambda k: -abs(k) * mp.mpf(den) / num, support)
    counts = np.bincount(np.clip(x, -lim, lim) + lim, minlength=2 * lim + 1)
    if lim > 200:  # bin the wide support into 101 equal-probability-ish cells
        edges = np.unique(np.searchsorted(np.cumsum(pmf), np.linspace(0, 1, 102)[1:-1]))
        counts = np.add.reduceat(counts, np.r_[0, edges])
        pmf = np.add.reduceat(pmf, np.r_[0, edges])
    assert _chi2(counts, pmf) > 1e-4


@pytest.mark.parametrize("backend", ["native", "fallback"])
@pytest.mark.parametrize("t,m", [(1, 1), (2, 1), (4, 3), (51, 50), (3, 1)])
def test_exact_discrete_gaussian_matches_its_pmf(backend, t, m):
    x = _seeded(22, backend).discrete_gaussian_exact(t, m, 100_000)
    lim = int(12 * math.sqrt(t * m)) + 5
    support = range(-lim, lim + 1)
    pmf = _exact_pmf(lambda k: -mp.mpf(k) ** 2 / (2 * t * m), support)
    counts = np.bincount(np.clip(x, -lim, lim) + lim, minlength=2 * lim + 1)
    assert _chi2(counts, pmf) > 1e-4
    assert abs(x.var() / sum(p * k * k for p, k in zip(pmf, support)) - 1) < 0.03


@pytest.mark.parametrize("backend", ["native", "fallback"])
def test_exact_samplers_with_two_word_integers_have_the_stated_variance(backend):
    # 2tm > 2^64: the acceptance ratio needs the 128-bit path of the C code
    g = _seeded(23, backend)
    t = m = 2**40
    x = g.discrete_gaussian_exact(t, m, 20_000).astype(np.float64)
    assert x.var() / (t * m) == pytest.approx(1.0, rel=0.05)
    assert abs(x.mean()) < 4 * math.sqrt(t * m / 20_000)
    y = g.discrete_laplace_exact(2**53 - 1, 2**28, 20_000).astype(np.float64)  # t ≈ 2^25
    assert y.var() == pytest.approx(noise.discrete_laplace_variance((2**53 - 1) / 2**28), rel=0.05)


@pytest.mark.parametrize("backend", ["native", "fallback"])
@pytest.mark.parametrize("bad", [0, -1, 2**62 + 1, 2**64, 2**70])
def test_exact_samplers_refuse_parameters_out_of_range(backend, bad):
    g = _seeded(24, backend)
    for f in (g.discrete_laplace_exact, g.discrete_gaussian_exact):
        with pytest.raises(ValueError):
            f(bad, 1, 3)
        with pytest.raises(ValueError):
            f(1, bad, 3)
    with pytest.raises(TypeError):
        g.discrete_laplace_exact(1.5, 1, 3)


@pytest.mark.parametrize("backend", ["native", "fallback"])
def test_exact_gaussian_refuses_a_proposal_scale_outside_sigma_to_two_sigma(backend):
    # t = 1, m = 2^40 would accept with probability ~exp(-2^39) per try: a hang, refused instead
    g = _seeded(25, backend)
    for t, m in ((1, 2**40), (3, 4), (5, 1), (2**40, 2**20)):
        with pytest.raises(ValueError, match="m <= t <= 4m"):
            g.discrete_gaussian_exact(t, m, 3)
    assert g.discrete_gaussian_exact(4, 1, 3).shape == (3,)
