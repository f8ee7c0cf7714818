"""ADePT (corrected) baseline: ℓ₂ clipping, corrected sensitivity 2C√n, the published flaw stated,
exact discrete noise, parameter checks, and an end-to-end run on a tiny DP-BART bundle.

References are computed independently here (numpy norms, mpmath log-densities, Fractions), never by
calling the code under test for the expected value."""
from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from ldptext import noise as N
from ldptext.errors import ParameterError
from ldptext.rng import Generator, SeededModeWarning
from ldptext_precompute.dpbart import adept as A
from ldptext_precompute.dpbart import adept_noise as AN


def _gen(seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        return Generator(seed=seed)


def _antipodal(n, L=None, scale=7.0):
    """±scale·(1, …, 1), shaped (1, L, n/L): after clipping, every coordinate is ±C/√n."""
    L = L or n
    z = np.full((1, L, n // L), scale)
    return z, -z


# ------------------------------------------------------------------------------ (1) sensitivity
@pytest.mark.parametrize("L,d,clip", [(4, 4, 1.0), (10, 24, 0.1 * math.sqrt(240)), (3, 7, 2.5)])
def test_l1_distance_of_clipped_outputs_never_exceeds_2c_sqrt_n_and_is_tight(L, d, clip):
    n = L * d
    sens = A.corrected_l1_sensitivity(clip, n)
    ref = 2 * clip * math.sqrt(n)
    assert ref <= sens <= ref * (1 + 1e-15)
    rng = np.random.default_rng(0)
    worst = 0.0
    for i in range(400):
        s = 10.0 ** rng.uniform(-3, 3)
        z, z2 = rng.normal(size=(2, 1, L, d)) * s
        if i % 4 == 0:  # heavy tails and sign-structured pairs
            z = rng.standard_cauchy(size=(1, L, d))
            z2 = -np.sign(z) * rng.uniform(0, 1e3, size=z.shape)
        a, b = AN.clip_l2_norm(z, clip), AN.clip_l2_norm(z2, clip)
        assert np.linalg.norm(a) <= clip * (1 + 1e-12) and np.linalg.norm(b) <= clip * (1 + 1e-12)
        worst = max(worst, float(np.abs(a - b).sum()))
    assert worst <= sens
    za, zb = _antipodal(n, L)
    dist = float(np.abs(AN.clip_l2_norm(za, clip) - AN.clip_l2_norm(zb, clip)).sum())
    assert dist <= sens and abs(dist - ref) <= 1e-9 * ref  # tight: the bound is reached
    # the published Δ₁ = 2C is exceeded by a factor √n on this pair
    assert dist / (A.PUBLISHED_SENSITIVITY * clip) == pytest.approx(math.sqrt(n), rel=1e-9)


def test_integer_grid_keeps_the_ball_exactly_and_the_sensitivity_is_reached():
    clip, L, d, k = 0.7, 4, 4, 12  # n = 16: C/√n = C/4 is on the grid, so the bound is met exactly
    n, K = L * d, 1 << k
    rng = np.random.default_rng(1)
    qs = []
    bad = [np.full((1, L, d), 1e308), np.full((1, L, d), np.inf), np.full((1, L, d), np.nan),
           np.where(np.arange(n).reshape(1, L, d) % 2, -np.inf, 3.0)]
    for z in bad + [rng.normal(size=(1, L, d)) * 10.0 ** rng.uniform(-2, 3) for _ in range(200)]:
        q = AN.l2_ball_grid(z, clip, k)
        assert q.dtype == np.int64
        assert sum(int(v) ** 2 for v in q.ravel()) <= K * K  # exact integer check
        qs.append(q)
    for a in qs[:40]:
        for b in qs[:40]:
            l1 = int(np.abs(a - b).sum())
            assert Fraction(l1) ** 2 <= 4 * K * K * n  # ‖q − q'‖₁ ≤ 2K√n, exactly
    za, zb = _antipodal(n, L)
    qa, qb = AN.l2_ball_grid(za, clip, k), AN.l2_ball_grid(zb, clip, k)
    assert int(np.abs(qa - qb).sum()) == 2 * K * 4  # = 2K√16: reached exactly


# ------------------------------------------------------------------------------ (2) privacy loss
def _laplace_log_ratio(y, a, b, scale):
    """log p(y | a) − log p(y | b) for i.i.d. continuous Laplace(scale), in mpmath (50 digits)."""
    mpmath.mp.dps = 50
    s = mpmath.mpf(0)
    for yi, ai, bi in zip(np.ravel(y), np.ravel(a), np.ravel(b)):
        la = -mpmath.log(2 * mpmath.mpf(scale)) - abs(mpmath.mpf(yi) - mpmath.mpf(ai)) / mpmath.mpf(scale)
        lb = -mpmath.log(2 * mpmath.mpf(scale)) - abs(mpmath.mpf(yi) - mpmath.mpf(bi)) / mpmath.mpf(scale)
        s += la - lb
    return s


@pytest.mark.parametrize("n,eps", [(16, 1.0), (64, 3.0), (240, 0.5)])
def test_published_scale_breaks_epsilon_and_the_corrected_scale_keeps_it(n, eps):
    clip = 1.3
    za, zb = _antipodal(n)
    a, b = AN.clip_l2_norm(za, clip), AN.clip_l2_norm(zb, clip)
    y = a  # the worst output for this pair: every coordinate on a's side
    for s, factor in ((2.0, math.sqrt(n)), (1.0, 2 * math.sqrt(n))):  # as published (2C/ε) and the C/ε reading
        flawed = A.published_laplace_scale(eps, clip, published_sensitivity=s)
        assert flawed == pytest.approx(s * clip / eps)
        loss = _laplace_log_ratio(y, a, b, flawed)
        assert loss > eps + 1e-6  # privacy-loss ratio exceeds exp(ε)
        assert float(loss) == pytest.approx(eps * factor, rel=1e-9)
        stated = A.flawed_actual_epsilon(eps, n, published_sensitivity=s)
        assert stated >= float(loss) * (1 - 1e-12) and stated == pytest.approx(eps * factor, rel=1e-12)
    corrected = A.corrected_laplace_scale(eps, clip, n)
    assert corrected >= 2 * clip * math.sqrt(n) / eps
    rng = np.random.default_rng(2)
    for yy in [y, b] + [a + rng.laplace(scale=corrected, size=a.shape) for _ in range(5)]:
        assert _laplace_log_ratio(yy, a, b, corrected) <= eps + 1e-30
    # the discrete noise actually used: exact rational log-ratio at the worst integer point
    cal = A.corrected_calibration(eps, clip=clip, n=n)
    num, den = cal.sampler_parameters
    qa, qb = AN.l2_ball_grid(za, clip), AN.l2_ball_grid(zb, clip)
    l1 = int(np.abs(qa - qb).sum())
    assert Fraction(l1 * den, num) <= Fraction(eps)  # (‖q − q'‖₁ / t) ≤ ε exactly
    assert cal.epsilon_bound <= eps and Fraction(cal.epsilon_bound) ** 2 * Fraction(num, den) ** 2 >= \
        4 * (1 << cal.grid_bits) ** 2 * n


def test_gaussian_variant_uses_l2_sensitivity_2c():
    cal = A.corrected_calibration(2.0, clip=0.5, n=100, mechanism="gaussian", delta=1e-5)
    assert cal.sensitivity == pytest.approx(1.0) and cal.n == 100 and cal.delta_bound <= 1e-5
    # independent: analytic-Gaussian σ for Δ₂ = 2C (continuous) is a lower bound of the discrete σ used
    assert cal.scale >= N.analytic_gaussian_sigma(2.0, 1e-5, 1.0)
    assert cal.scale < 1.2 * N.analytic_gaussian_sigma(2.0, 1e-5, 1.0)  # and not absurdly above it


# ------------------------------------------------------------------------------ (3) noise statistics
def test_noise_variance_and_scale_match_the_calibration():
    L, d, eps, clip = 8, 8, 4.0, 0.9
    n = L * d
    cal = A.corrected_calibration(eps, clip=clip, n=n)
    docs = 3000
    out = AN.privatize_l2_ball(np.zeros((docs, L, d)), cal, _gen(7)).astype(np.float64)
    noise = out.ravel()  # zero input: the release is the noise (on the grid)
    N_ = noise.size
    # independent reference: discrete Laplace P(k) ∝ q^|k| on the grid, q = exp(−1/t)
    num, den = cal.sampler_parameters
    t = num / den
    qq = math.exp(-1.0 / t)
    var_ref = 2 * qq / (1 - qq) ** 2 * cal.grid_unit ** 2
    mabs_ref = 2 * qq / (1 - qq * qq) * cal.grid_unit
    assert mabs_ref == pytest.approx(2 * clip * math.sqrt(n) / eps, rel=1e-6)  # ≈ the continuous scale b
    # Laplace: Var(Y²)/σ⁴ = 5 and Var(|Y|)/E|Y|² = 1, so with N = 192,000 draws the relative standard
    # errors are √(5/N) ≈ 0.51 % and √(1/N) ≈ 0.23 %: 5 standard errors → 2.6 % and 1.2 %
    assert abs(noise.var() / var_ref - 1) < 5 * math.sqrt(5 / N_)
    assert abs(np.abs(noise).mean() / mabs_ref - 1) < 5 * math.sqrt(1 / N_)
    assert abs(noise.mean()) < 5 * math.sqrt(var_ref / N_)
    assert cal.variance == pytest.approx(var_ref, rel=1e-9)
    # and the noise is independent per coordinate (not one vector broadcast over tokens)
    blk = noise.reshape(docs, L, d)
    assert abs(np.corrcoef(blk[:, 0, 0], blk[:, 1, 0])[0, 1]) < 5 / math.sqrt(docs)


def test_release_is_input_grid_plus_integer_noise_and_pruned_stay_zero():
    L, d, clip = 5, 6, 2.0
    pruned = np.array([1, 4])
    n = L * (d - 2)
    cal = A.corrected_calibration(10.0, clip=clip, n=n)
    z = np.random.default_rng(3).normal(size=(4, L, d)) * 5
    out = AN.privatize_l2_ball(z, cal, _gen(1), pruned=pruned)
    assert np.all(out[..., pruned] == 0)
    # at ε = ∞ (evaluation) the release is exactly the clipped grid value
    inf = A.corrected_calibration(math.inf, clip=clip, n=n, allow_infinite_epsilon=True)
    exact = AN.privatize_l2_ball(z, inf, _gen(1), pruned=pruned).astype(np.float64)
    q = AN.l2_ball_grid(z, clip, pruned=pruned)
    assert np.array_equal(np.rint(exact / inf.grid_unit).astype(np.int64), q)
    assert np.allclose(exact, AN.clip_l2_norm(z, clip, pruned), atol=2 * inf.grid_unit)


# ------------------------------------------------------------------------------ (4) bad parameters
@pytest.mark.parametrize("kwargs", [
    dict(epsilon=1.0, clip=0.0, n=10), dict(epsilon=1.0, clip=-1.0, n=10), dict(epsilon=1.0, clip=math.nan, n=10),
    dict(epsilon=1.0, clip=math.inf, n=10), dict(epsilon=0.0, clip=1.0, n=10), dict(epsilon=-2.0, clip=1.0, n=10),
    dict(epsilon=math.nan, clip=1.0, n=10), dict(epsilon=math.inf, clip=1.0, n=10), dict(epsilon=1e400, clip=1.0, n=10),
    dict(epsilon=10 ** 400, clip=1.0, n=10), dict(epsilon=1.0, clip=1.0, n=0),
    dict(epsilon=1.0, clip=1.0, n=10, mechanism="gaussian"), dict(epsilon=1.0, clip=1.0, n=10, mechanism="uniform"),
    dict(epsilon="1", clip=1.0, n=10),
])
def test_bad_parameters_are_refused(kwargs):
    with pytest.raises(ParameterError):
        A.corrected_calibration(**kwargs)


def test_infinite_epsilon_only_with_the_evaluation_flag_and_n_mismatch_refused():
    cal = A.corrected_calibration(math.inf, clip=1.0, n=12, allow_infinite_epsilon=True)
    assert not cal.private and cal.sampler_parameters is None
    good = A.corrected_calibration(1.0, clip=1.0, n=12)
    with pytest.raises(ParameterError, match="n=12"):
        AN.privatize_l2_ball(np.zeros((1, 3, 5)), good, _gen(0))
    with pytest.raises(ParameterError):
        AN.privatize_l2_ball(np.zeros((1, 3, 4)), good, _gen(0), pruned=np.array([9]))
    with pytest.raises(ParameterError):
        A.flawed_actual_epsilon(0.0, 10)
    with pytest.raises(ParameterError):
        A.flawed_actual_epsilon(1.0, 0)


# ------------------------------------------------------------------------------ (5) end to end
@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("transformers")
    from conftest_dpbart import build_tiny_bundle, single_thread_torch

    with single_thread_torch():
        path, _, _ = build_tiny_bundle(tmp_path_factory.mktemp("adept") / "pr.ldpb", quantize=None, prune_rounds=2)
    return path


def _rewriter(path):
    from ldptext.bundle import UnsignedBundleWarning
    from ldptext.dpbart import Rewriter

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsignedBundleWarning)
        warnings.simplefilter("ignore", SeededModeWarning)
        return Rewriter.load(path, allow_unsigned=True, threads=1)


def test_end_to_end_on_the_tiny_dpbart_model_gives_text_and_a_report(bundle):
    rw = _rewriter(bundle)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        ad = A.AdeptRewriter(rw, seed=5)
    n = rw.n
    assert ad.clip == pytest.approx(rw.clip * math.sqrt(n))
    r = ad.rewrite("the cat sat on the mat", epsilon=50.0)
    assert isinstance(r.text, str)
    rep = r.report
    assert rep.mechanism == "adept-corrected" and rep.noise == "discrete_laplace" and rep.clip_norm == "l2"
    assert rep.epsilon == 50.0 and rep.total_epsilon == 50.0 and rep.chunks == 1 and rep.private and rep.seeded
    assert rep.sensitivity == pytest.approx(2 * ad.clip * math.sqrt(n))
    assert rep.scale >= 2 * ad.clip * math.sqrt(n) / 50.0
    assert rep.published_scale == pytest.approx(2 * ad.clip / 50.0)
    assert rep.published_epsilon_actual == pytest.approx(50.0 * math.sqrt(n))
    assert "adept-corrected" in rep.summary() and f"{rep.published_epsilon_actual:.4g}" in rep.summary()
    json.dumps(rep.to_dict())
    # Gaussian, evaluation-only ε = ∞ (reproduces the ℓ₂-clipped decoding), and refusals
    g = ad.rewrite("the dog ran", epsilon=500.0, delta=1e-5, mechanism="gaussian").report
    assert g.noise == "discrete_gaussian" and g.published_epsilon_actual is None and g.delta_bound <= 1e-5
    assert not ad.rewrite("the dog", epsilon=math.inf, allow_infinite_epsilon=True).report.private
    with pytest.raises(ParameterError):
        ad.rewrite("the dog", epsilon=math.inf)
    long = " ".join(["the cat sat on the mat"] * 4)
    assert ad.rewrite(long, epsilon=5.0).report.total_epsilon == 5.0 * ad.rewrite(long, epsilon=5.0).report.chunks
    # the comparison rows name the mechanism and the flawed ε
    rows = A.compare_rows(rw, 5.0)
    assert [r["method"] for r in rows][1:] == ["adept-corrected", "adept-published (flawed, not runnable)"]
    assert rows[1]["noise_scale"] == pytest.approx(rows[0]["noise_scale"], rel=1e-6)  # default C: same noise
    assert rows[2]["epsilon_actual"] == pytest.approx(5.0 * math.sqrt(n))


def test_cli_runs_and_prints_json(bundle):
    p = subprocess.run([sys.executable, "-W", "ignore", "-m", "ldptext_precompute.dpbart.adept", "--bundle",
                        str(bundle), "--epsilon", "20", "--seed", "1", "--allow-unsigned"],
                       input="the cat\nthe dog ran\n", capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    assert len(lines) == 2 and all(x["report"]["mechanism"] == "adept-corrected" for x in lines)


def test_the_runtime_ships_no_adept_noise():
    # ADePT is an offline baseline: its ℓ₂-ball noise lives with the offline package only
    assert not {"clip_l2_norm", "l2_ball_grid", "calibrate_l2_ball", "privatize_l2_ball"} & set(dir(N))
