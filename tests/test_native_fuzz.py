"""The C extension under hostile input: regression tests for what fuzzing found, and a bounded
fuzz run of every entry point (``fuzz/fuzz_bundle.py``; run longer from the command line). Also
run by ``make test-asan`` against an AddressSanitizer/UBSan build of the extension."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from ldptext import _native

ROOT = Path(__file__).resolve().parents[1]


def _load_fuzzer():
    spec = importlib.util.spec_from_file_location("fuzz_bundle", ROOT / "fuzz" / "fuzz_bundle.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


F = _load_fuzzer()


def test_asan_build_is_the_one_loaded_when_expected():
    if os.environ.get("LDPTEXT_EXPECT_ASAN"):
        assert "asan" in _native.__file__, _native.__file__


def _in_subprocess(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run code that used to hang in a child, so a regression fails instead of hanging."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout)


def test_discrete_gaussian_with_underflowing_sigma_terminates():
    # sigma^2 underflowed to 0 -> acceptance exponent 0/0 = NaN -> rejected forever (a hang)
    r = _in_subprocess("""
        import numpy as np
        from ldptext import _native
        g = _native.Generator(bytes(32), 0)
        for sigma in (1e-170, 1e-300, 5e-324):
            out = np.empty(64, np.int64)
            g.discrete_gaussian(sigma, out)
            assert (out == 0).all(), out
        print("ok")
    """, timeout=60)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-2000:]


def test_uniform_int_refuses_bounds_that_do_not_fit_int64():
    g = _native.Generator(bytes(32), 0)
    out = np.empty(256, np.int64)
    with pytest.raises(ValueError):
        g.uniform_int(2**63 + 1, out)
    with pytest.raises(ValueError):
        g.uniform_int(2**64 - 1, out)
    g.uniform_int(2**63, out)
    assert (out >= 0).all()


def test_discrete_laplace_near_the_scale_limit_never_wraps():
    g = _native.Generator(bytes(32), 1)
    for _ in range(50):
        out = np.empty(16, np.int64)
        try:
            g.discrete_laplace(3.9e18, out)
        except ValueError as e:  # a draw beyond int64 is reported, not wrapped (was UB)
            assert "overflow" in str(e)


def _table_arrays(rows=6, k=2, dim=3):
    rng = np.random.default_rng(0)
    return dict(**F.embedding_arrays(rng.standard_normal((rows, dim))),
                outputs=np.arange(rows, dtype=np.int32),
                head_ids=np.tile(np.arange(k, dtype=np.int32), (rows, 1)),
                alias_threshold=np.full((rows, k + 1), 2**32 - 1, np.uint32),
                alias_index=np.zeros((rows, k + 1), np.uint16),
                accept_gamma=np.zeros((rows, k + 1)), tail_floor=np.zeros(rows),
                keep_row=np.zeros(rows, np.uint8), tail_cluster=np.zeros(rows, np.uint8),
                cluster_gamma=np.zeros((rows, 1), np.uint8), dim=dim, head_size=k, epsilon=1.0, p=0.5)


def test_failed_reinitialisation_leaves_no_dangling_table():
    kw = _table_arrays()
    t = _native.SantextTable(**kw)
    g = _native.Generator(bytes(32), 0)
    xs = np.arange(6, dtype=np.int32)
    g.santext_sample(t, xs, np.empty_like(xs))
    with pytest.raises(ValueError):
        t.__init__(**dict(kw, dim=-1))   # releases the old views, then fails
    del kw                               # the arrays can now be freed
    with pytest.raises(IndexError):      # was: reads of freed memory
        g.santext_sample(t, xs, np.empty_like(xs))


def test_unsorted_outputs_or_head_rows_are_refused():
    kw = _table_arrays()
    bad = dict(kw, outputs=kw["outputs"][::-1].copy())
    with pytest.raises(ValueError):
        _native.SantextTable(**bad)
    head = kw["head_ids"].copy()
    head[3] = head[3][::-1]
    with pytest.raises(ValueError):
        _native.SantextTable(**dict(kw, head_ids=head))
    dup = kw["head_ids"].copy()
    dup[2, 1] = dup[2, 0]
    with pytest.raises(ValueError):
        _native.SantextTable(**dict(kw, head_ids=dup))


def test_tail_clusters_out_of_range_are_refused():
    kw = _table_arrays()
    _native.SantextTable(**dict(kw, tail_cluster=np.full(6, 2, np.uint8),
                                cluster_gamma=np.zeros((6, 3), np.uint8)))  # C = 3: fine
    with pytest.raises(ValueError, match="clusters"):   # a cluster id >= C
        _native.SantextTable(**dict(kw, tail_cluster=np.full(6, 3, np.uint8),
                                    cluster_gamma=np.zeros((6, 3), np.uint8)))
    with pytest.raises(ValueError, match="inconsistent sizes"):   # C = 0, and C not whole
        _native.SantextTable(**dict(kw, cluster_gamma=np.zeros((6, 0), np.uint8)))
    with pytest.raises(ValueError, match="inconsistent sizes"):
        _native.SantextTable(**dict(kw, cluster_gamma=np.zeros(7, np.uint8)))
    with pytest.raises(ValueError, match="inconsistent sizes"):   # C > 256
        _native.SantextTable(**dict(kw, cluster_gamma=np.zeros((6, 257), np.uint8)))


def test_uninitialised_objects_fail_cleanly():
    t = _native.SantextTable.__new__(_native.SantextTable)
    g = _native.Generator(bytes(32), 0)
    g.santext_sample(t, np.empty(0, np.int32), np.empty(0, np.int32))
    with pytest.raises(IndexError):
        g.santext_sample(t, np.zeros(3, np.int32), np.empty(3, np.int32))


@pytest.mark.parametrize("target, seconds", [("native", 3.0), ("bundle", 2.0)])
def test_bounded_fuzz_run_finds_nothing(tmp_path, monkeypatch, target, seconds):
    monkeypatch.setenv("LDPTEXT_HOME", str(tmp_path / "home"))
    t = F.BundleTarget(tmp_path) if target == "bundle" else F.NativeTarget()
    n = F.builtin_fuzz(t, seconds, seed=1234, crash_file=tmp_path / "current.bin", label=target,
                       mutate=t.mutate if target == "bundle" else None)
    assert n > 100
