"""Properties of the random generator (private by default, exact samplers): CSPRNG streams, fork safety, seeded
mode, and exactness of every sampler against float64 / mpmath references."""
import math
import os
import struct
import warnings

import mpmath
import numpy as np
import pytest
from scipy import stats

from ldptext import rng
from ldptext.rng import Generator, SeededModeWarning

BACKENDS = ["native", "fallback"]


def seeded(seed, backend):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        return Generator(seed=seed, backend=backend)


def chi2_pvalue(counts, probs):
    """Chi-square goodness of fit, merging cells with expected count < 5 into one."""
    counts = np.asarray(counts, dtype=np.float64)
    expected = np.asarray(probs, dtype=np.float64) * counts.sum()
    small = expected < 5
    if small.any():
        counts = np.append(counts[~small], counts[small].sum())
        expected = np.append(expected[~small], expected[small].sum())
    return stats.chisquare(counts, expected).pvalue


def test_native_extension_is_built():
    assert rng.native_available()


def test_chacha20_block_matches_rfc8439_vector():
    from ldptext import _native
    key = bytes(range(32))
    nonce = bytes.fromhex("000000090000004a00000000")
    state = struct.pack("<4I", 0x61707865, 0x3320646E, 0x79622D32, 0x6B206574) + key + \
        struct.pack("<I", 1) + nonce
    expected = bytes.fromhex(
        "10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e"
        "d2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e")
    assert _native.chacha20_block(state) == expected


@pytest.mark.parametrize("backend", BACKENDS)
def test_unseeded_streams_differ_between_generators(backend):
    a, b = Generator(backend=backend), Generator(backend=backend)
    assert not a.seeded
    assert a.random_bytes(64) != b.random_bytes(64)


@pytest.mark.parametrize("backend", BACKENDS)
def test_seeded_mode_reproduces_and_warns(backend):
    with pytest.warns(SeededModeWarning, match="NOT private"):
        a = Generator(seed=42, backend=backend)
    with pytest.warns(SeededModeWarning):
        b = Generator(seed=42, backend=backend)
    assert a.seeded
    assert np.array_equal(a.uniform_int(1000, 50), b.uniform_int(1000, 50))
    assert not np.array_equal(seeded(43, backend).uniform_int(1000, 50),
                              seeded(42, backend).uniform_int(1000, 50))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", [None, 7])
def test_forked_child_never_continues_parent_stream(backend, seed):
    g = Generator(backend=backend) if seed is None else seeded(seed, backend)
    g.random_bytes(10)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report its next 32 bytes
        os.close(r)
        os.write(w, g.random_bytes(32))
        os._exit(0)
    os.close(w)
    child = os.read(r, 32)
    os.waitpid(pid, 0)
    parent = g.random_bytes(32)
    assert len(child) == 32 and child != parent


def test_fork_is_detected_even_without_the_at_fork_hook(monkeypatch):
    g = Generator()
    monkeypatch.setattr(g, "_pid", -1)  # as if we were in a child the hook missed
    before = g._g
    g.random_bytes(8)
    assert g._g is not before and g._pid == os.getpid()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [1, 3, 10, 1000, 2**31 + 1])
def test_uniform_int_is_uniform_and_in_range(backend, n):
    g = seeded(1, backend)
    x = g.uniform_int(n, 60000)
    assert x.min() >= 0 and x.max() < n
    if n == 1:
        assert (x == 0).all()
    elif n <= 1000:
        assert chi2_pvalue(np.bincount(x, minlength=n), np.full(n, 1 / n)) > 1e-4
    else:  # top bit balance: a "u*n" truncation or modulo bias shows up here
        assert abs((x >= n // 2).mean() - 0.5) < 0.01


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("p", [0.0, 1e-300, 0.3, 0.5, 1 - 2**-40, 1.0])
def test_bernoulli_probability(backend, p):
    x = seeded(2, backend).bernoulli(p, 200000)
    if p in (0.0, 1.0):
        assert x.mean() == p
    else:
        assert stats.binomtest(int(x.sum()), x.size, p).pvalue > 1e-4


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("gamma", [0.0, 1e-9, 0.37, 1.0, 2.5, 7.0])
def test_bernoulli_exp_matches_exp(backend, gamma):
    x = seeded(3, backend).bernoulli_exp(gamma, 200000)
    assert stats.binomtest(int(x.sum()), x.size, math.exp(-gamma)).pvalue > 1e-4


@pytest.mark.parametrize("gamma", [0.5, 1.0, 1.7, 3.2])
def test_bernoulli_exp_native_many_draws(gamma):
    """The C construction draws the 1-in-K events of CKS's loop for K = 2..12 from one uniform on
    {0..12!-1} (native/samplers.c): 4M draws resolve P(accept) to ~2.4e-4 (one standard
    deviation), so a wrong threshold for one of the first K (which decide all draws but a fraction
    of about 1/K!) would show."""
    pytest.importorskip("ldptext._native")
    x = seeded(5, "native").bernoulli_exp(gamma, 4_000_000)
    assert stats.binomtest(int(x.sum()), x.size, math.exp(-gamma)).pvalue > 1e-4


@pytest.mark.parametrize("backend", BACKENDS)
def test_bernoulli_exp_never_underflows_but_is_zero_for_huge_gamma(backend):
    g = seeded(4, backend)
    assert not g.bernoulli_exp(np.array([1e4, 1e300, np.finfo(float).max])).any()
    with pytest.raises(ValueError):
        g.bernoulli_exp(np.array([-1e-12]))
    with pytest.raises(ValueError):
        g.bernoulli_exp(np.array([np.nan]))


def _discrete_pmf(logw, support):
    w = np.array([mpmath.e ** logw(k) for k in support], dtype=object)
    z = sum(w)
    return np.array([float(x / z) for x in w])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("scale", [0.3, 1.0, 2.5, 40.0])
def test_discrete_laplace_pmf(backend, scale):
    x = seeded(5, backend).discrete_laplace(scale, 100000)
    lim = int(30 * scale) + 10
    support = range(-lim, lim + 1)
    pmf = _discrete_pmf(lambda k: -abs(k) / mpmath.mpf(scale), support)
    counts = np.bincount(np.clip(x, -lim, lim) + lim, minlength=2 * lim + 1)
    assert chi2_pvalue(counts, pmf) > 1e-4


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("sigma", [0.4, 1.0, 3.7, 50.0])
def test_discrete_gaussian_pmf(backend, sigma):
    x = seeded(6, backend).discrete_gaussian(sigma, 100000)
    lim = int(12 * sigma) + 5
    support = range(-lim, lim + 1)
    pmf = _discrete_pmf(lambda k: -mpmath.mpf(k) ** 2 / (2 * mpmath.mpf(sigma) ** 2), support)
    counts = np.bincount(np.clip(x, -lim, lim) + lim, minlength=2 * lim + 1)
    assert chi2_pvalue(counts, pmf) > 1e-4
    assert abs(x.var() / sum(p * k * k for p, k in zip(pmf, support)) - 1) < 0.03


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_noise_samplers_reject_bad_parameters(backend, bad):
    g = seeded(7, backend)
    with pytest.raises(ValueError):
        g.discrete_gaussian(bad, 3)
    with pytest.raises(ValueError):
        g.discrete_laplace(bad, 3)


def test_generator_keystream_is_chacha20_blocks_in_counter_order():
    """The generator's bytes are the ChaCha20 blocks for counters 0, 1, 2, ... (checked against the
    RFC-tested block function), across two 16-block refill boundaries (native/chacha20.c refills
    sixteen blocks at a time: with AVX-512 where the CPU has it, else two 8-block AVX2 or four
    4-block SSE2 or scalar passes)."""
    from ldptext import _native
    key = bytes(range(100, 132))
    stream = 0x0123456789ABCDEF
    g = _native.Generator(key, stream)
    got = g.random_bytes(64 * 40)
    const = struct.pack("<4I", 0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)
    expected = b"".join(_native.chacha20_block(const + key + struct.pack("<QQ", c, stream))
                        for c in range(40))
    assert got == expected


def test_auto_backend_without_the_extension_warns_once_that_the_fallback_runs(monkeypatch):
    monkeypatch.setattr(rng, "_native", None)  # as if ldptext._native had failed to import
    monkeypatch.setattr(rng, "_fallback_warned", False)
    with pytest.warns(rng.FallbackBackendWarning, match="900x slower") as caught:
        assert Generator().backend == "fallback"
        Generator()  # a second runtime in the same process: no second warning
    assert len([w for w in caught if issubclass(w.category, rng.FallbackBackendWarning)]) == 1
    assert rng.available_backend() == "fallback"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Generator(backend="fallback")  # chosen on purpose: silent


def test_available_backend_names_what_the_extension_offers():
    expected = "fallback" if rng._native is None else (
        "libldptext" if hasattr(rng._native, "Bundle") else "native")
    assert rng.available_backend() == expected
