"""DP-BART calibration and discrete noise (issue 3 properties 1, 2, 4).

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


# ----------------------------------------------------------------------------- property 1
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


# ----------------------------------------------------------------------------- property 2
class RecordingGenerator:
    """Wraps the CSPRNG and records every call (what was asked, how many draws)."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def discrete_gaussian(self, sigma, size):
        self.calls.append(("gaussian", sigma, size))
        return self.inner.discrete_gaussian(sigma, size)

    def discrete_laplace(self, scale, size):
        self.calls.append(("laplace", scale, size))
        return self.inner.discrete_laplace(scale, size)


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
    assert rec.calls == [(mechanism, cal.scale_grid, reps * n)]
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


# ----------------------------------------------------------------------------- property 4
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
        assert rec.calls == [("gaussian", cal.scale_grid, n)]
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
