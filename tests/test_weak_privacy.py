"""The weak-privacy rule in every runtime: a near-identity bundle (its median sensitive word released
unchanged with probability >= 0.9) opens only with the application's opt-in, and every report of it
says so; a stated median that the rows drawn at load contradict is refused as a misstatement.

The rule and its threshold are the same in the Python SDK (ldptext.verbatim), libldptext
(ldp_expect.allow_weak_privacy, LDP_E_WEAK_PRIVACY), the web wrapper (tests/test_wasm.py) and the JVM
binding (tests/test_jvm.py).
"""
from __future__ import annotations

import ctypes
import math
import warnings
from fractions import Fraction

import pytest

from conftest import build_tiny_bundle, edited_bundle
from ldptext import keys
from ldptext.errors import ParameterMismatchError, WeakPrivacyError
from ldptext.rng import SeededModeWarning
from ldptext.santext import Sanitizer
from ldptext.verbatim import MEDIAN_REFUSAL, NEAR_IDENTITY_MEDIAN, VerbatimRate, median_threshold

from test_libldptext import OK, Expect, Report, clib, dev_key  # noqa: F401 (fixtures)
from wasm_node import run_node_script

E_WEAK_PRIVACY = -105
E_PARAMETER_MISMATCH = -100


def open_expect(clib, path, key, *, allow_weak: bool, memory: bool = False):  # noqa: F811
    """ldp_bundle_open_expect / _memory_expect with only the opt-in set (or not)."""
    lib = clib.lib
    e = Expect(size=ctypes.sizeof(Expect), allow_weak_privacy=int(allow_weak))
    handle = ctypes.c_void_p()
    kb = clib._keys([key])
    if memory:
        data = open(path, "rb").read()
        rc = lib.ldp_bundle_open_memory_expect(data, len(data), kb, 1, ctypes.byref(e), ctypes.byref(handle))
    else:
        rc = lib.ldp_bundle_open_expect(str(path).encode(), kb, 1, ctypes.byref(e), ctypes.byref(handle))
    return rc, handle


@pytest.fixture(scope="module")
def weak(tmp_path_factory):
    d = tmp_path_factory.mktemp("weak")
    path = build_tiny_bundle(d / "weak.ldpb", n=80, epsilon=80.0, mechanism="santext+", p=0.3, w=0.7,
                             allow_weak_privacy=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        with Sanitizer.load(path, seed=0, allow_weak_privacy=True) as san:
            stated = VerbatimRate.from_manifest(san.manifest["privacy"]["verbatim"])
    assert stated.median >= NEAR_IDENTITY_MEDIAN  # the fixture is what it is named

    def understate(m):
        m["privacy"]["verbatim"]["median"] = 0.5
    misstated = edited_bundle(path, d / "misstated.ldpb", understate, sign_key=keys.developer_key())
    return path, misstated, stated


def test_python_refuses_a_near_identity_bundle_without_opt_in(weak):
    path, _, stated = weak
    with pytest.raises(WeakPrivacyError):
        Sanitizer.load(path)
    with Sanitizer.load(path, allow_weak_privacy=True) as san:
        report = san.sanitize("w1 w2").report
        assert report.weak_privacy and report.verbatim_median == stated.median


@pytest.mark.parametrize("memory", [False, True])
def test_the_c_library_refuses_it_without_opt_in(clib, dev_key, weak, memory):  # noqa: F811
    path, _, stated = weak
    rc, _ = clib.open(path.read_bytes() if memory else path, [dev_key], allow_weak=False)
    assert rc == E_WEAK_PRIVACY and "opt in" in clib.strerror(rc)
    rc, b = open_expect(clib, path, dev_key, allow_weak=False, memory=memory)
    assert rc == E_WEAK_PRIVACY and not b.value
    rc, b = open_expect(clib, path, dev_key, allow_weak=True, memory=memory)
    assert rc == OK, clib.strerror(rc)
    try:
        info = clib.bundle_info(b)
        assert info["weak_privacy"] is True
        assert info["verbatim_median"] == stated.median and info["verbatim_max"] == stated.maximum
        s = clib.sanitizer(b, seed=0)
        rc, _, rep = clib.sanitize(s, "w1 w2")
        assert rc == OK and rep.weak_privacy == 1 and rep.verbatim_median == stated.median
        clib.free_sanitizer(s)
    finally:
        clib.close(b)


def test_an_ordinary_bundle_reports_no_weak_privacy(clib, dev_key, tmp_path):  # noqa: F811
    path = build_tiny_bundle(tmp_path / "ok.ldpb", epsilon=1.0, mechanism="santext+", allow_weak_privacy=False)
    rc, b = clib.open(path, [dev_key])
    assert rc == OK
    try:
        info = clib.bundle_info(b)
        assert info["weak_privacy"] is False and info["verbatim_median"] < NEAR_IDENTITY_MEDIAN
    finally:
        clib.close(b)


def test_an_understated_median_is_refused_by_python_and_c(clib, dev_key, weak):  # noqa: F811
    _, misstated, _ = weak
    with pytest.raises(ParameterMismatchError, match="verbatim rate"):  # libldptext's test
        Sanitizer.load(misstated, allow_weak_privacy=True)
    with pytest.raises(ParameterMismatchError, match="median verbatim rate"):  # the fallback's own
        Sanitizer.load(misstated, allow_weak_privacy=True, backend="fallback")
    rc, _ = open_expect(clib, misstated, dev_key, allow_weak=True)
    assert rc == E_PARAMETER_MISMATCH
    rc, _ = clib.open(misstated, [dev_key], allow_weak=False)  # not near identity as stated: still refused
    assert rc == E_PARAMETER_MISMATCH


def test_the_median_threshold_is_the_exact_binomial_tail():
    """median_threshold(n) against exact rational arithmetic: the smallest k whose tail
    P(Bin(n, 1/2) >= k) is at most MEDIAN_REFUSAL."""
    bound = Fraction(MEDIAN_REFUSAL)
    for n in range(0, 80):
        tails = [Fraction(sum(math.comb(n, i) for i in range(k, n + 1)), 2 ** n) for k in range(n + 2)]
        want = next(k for k in range(n + 2) if tails[k] <= bound)
        assert median_threshold(n) == want, n


def test_the_web_wrapper_refuses_it_without_opt_in(weak, dev_key, tmp_path):  # noqa: F811
    """In node, on the wasm build: LDP_E_WEAK_PRIVACY without allowWeakPrivacy; with it, a report
    that says weak_privacy with the stated rates."""
    import json

    path, misstated, stated = weak
    out = run_node_script(f"""
const out = {{}};
for (const [name, file] of [['weak', {json.dumps(str(path))}], ['misstated', {json.dumps(str(misstated))}]]) {{
  const bytes = new Uint8Array(await readFile(file));
  try {{ await api.LdpText.open(bytes, [key]); out[name + '_plain'] = 'opened'; }}
  catch (e) {{ out[name + '_plain'] = e.code; }}
  try {{
    const ldp = await api.LdpText.open(bytes, [key], {{ allowWeakPrivacy: true }});
    const r = ldp.sanitize('w1 w2').report;
    out[name + '_allowed'] = [r.weak_privacy, r.verbatim_median];
    ldp.close();
  }} catch (e) {{ out[name + '_allowed'] = e.code; }}
}}
process.stdout.write(JSON.stringify(out));
""", tmp_path / "weak.mjs", dev_key)
    assert out["weak_plain"] == E_WEAK_PRIVACY
    assert out["weak_allowed"] == [True, stated.median]
    assert out["misstated_plain"] == E_PARAMETER_MISMATCH and out["misstated_allowed"] == E_PARAMETER_MISMATCH


def test_the_jvm_binding_refuses_it_without_opt_in(weak, dev_key, tmp_path):  # noqa: F811
    from test_jvm import _tool, compile_and_run
    jdk = {"javac": _tool("javac"), "java": _tool("java")}
    import subprocess
    from test_jvm import ROOT as JROOT
    done = subprocess.run(["make", "-s", "-C", str(JROOT), "jvm"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    build = JROOT / "build" / "jvm"
    path, _, stated = weak
    key = ",".join(str(b if b < 128 else b - 256) for b in dev_key)
    source = f"""
import java.nio.file.Paths;
import org.ldptext.*;
public class Weak {{
    public static void main(String[] args) throws Exception {{
        byte[] key = new byte[] {{{key}}};
        try (LdpText l = LdpText.open(Paths.get(args[0]), key)) {{
            System.out.println("plain opened " + l.info().mechanism());
        }} catch (LdpTextException e) {{
            System.out.println("plain " + e.code());
        }}
        try (LdpText l = LdpText.openAllowingWeakPrivacy(Paths.get(args[0]), key)) {{
            Report r = l.sanitize("w1 w2").report();
            System.out.println("allowed " + r.weakPrivacy() + " " + l.info().verbatimMedian());
        }}
    }}
}}
"""
    done = compile_and_run(jdk, build, tmp_path, "Weak", source, [str(path)])
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    lines = done.stdout.split("\n")
    assert lines[0] == f"plain {E_WEAK_PRIVACY}"
    assert lines[1] == f"allowed true {stated.median!r}"
