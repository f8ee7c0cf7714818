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

from conftest import build_lock, build_tiny_bundle, edited_bundle
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
    with build_lock():
        done = subprocess.run(["make", "-s", "-C", str(JROOT), "jvm"], capture_output=True, text=True,
                              timeout=600)
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


# ---- near identity decided at load: no stated median, the kept-in-clear share, the median's slack ----
#
# Each rule is checked against the rates computed here, in float64 from the bundle's dequantized
# metric vectors and each mechanism's formula (not the runtimes' code), over EVERY sensitive input;
# the fixtures are chosen so that the verdict is certain whatever rows a load draws: no sensitive
# rate at or above 0.9, or all but the one of <unk> (not an output: rate 0), so that a wrong verdict
# has probability below 1e-9 per load (computed exactly from the reference rates).

import numpy as np  # noqa: E402

from ldptext import registry  # noqa: E402
from ldptext.verbatim import kept_in_clear_majority, sampled_near_identity  # noqa: E402


def _arrays(path) -> tuple[dict, dict]:
    """The bundle's arrays (numpy) and manifest, read without any runtime."""
    from ldptext import bundle as B
    b, _ = B.open_unverified(path)
    return {n: np.asarray(a) for n, a in b.arrays.items()}, b.manifest


def reference_rates(path) -> np.ndarray:
    """P(M(x) = x) over every sensitive input (valid, not kept), float64, from each mechanism's formula:
    SanText exp(-eps d / 2) over the outputs; TEM the same truncated at gamma (|far| exp(-eps gamma / 2));
    CusText exp(eps u / 2) over the input's group, u the similarity min-max normalised over it."""
    a, m = _arrays(path)
    mech, eps = m["mechanism"], float(m["params"]["epsilon"])
    vec = a["emb_q"].astype(np.float64) * a["emb_scale"].astype(np.float64)[:, None]
    outs = a["outputs"].astype(np.int64)
    xs = np.flatnonzero(a["valid_input"].astype(bool) & ~a["keep_row"].astype(bool))
    rates = []
    for x in xs:
        if mech.startswith("custext"):
            g = a["group_id"]
            members = outs[g[outs] == g[x]]
            if x not in members:
                rates.append(0.0)
                continue
            if m["params"]["similarity"] == "cosine":
                q = a["emb_q"].astype(np.float64)
                sim = q[members] @ q[x] / (np.linalg.norm(q[members], axis=1) * np.linalg.norm(q[x]))
            else:
                sim = -np.linalg.norm(vec[members] - vec[x], axis=1)
            span = sim.max() - sim.min()
            u = (sim - sim.min()) / span if span > 0 else np.ones_like(sim)
            w = np.exp(eps / 2 * (u - u.max()))
            rates.append(float(w[members == x][0] / w.sum()))
            continue
        if x not in outs:
            rates.append(0.0)
            continue
        d = np.linalg.norm(vec[outs] - vec[x], axis=1)
        if mech == "tem":
            gamma = float(m["params"]["gamma"])
            near = d <= gamma
            w = np.exp(-eps / 2 * (d[near] - d.min()))
            z = w.sum() + (~near).sum() * np.exp(-eps / 2 * (gamma - d.min()))
            rates.append(float(np.exp(-eps / 2 * (min(d[outs == x][0], gamma) - d.min())) / z))
        else:
            w = np.exp(-eps / 2 * (d - d.min()))
            rates.append(float(w[outs == x][0] / w.sum()))
    return np.array(rates)


def _build(path, mechanism: str, epsilon: float, **kw):
    from conftest import random_word_embeddings
    n = kw.pop("n", 60)
    emb = random_word_embeddings(n, 8, 3, 0.6)
    if mechanism == "tem":
        from ldptext_precompute.tem.build import build_tem_bundle
        return build_tem_bundle(path, embeddings="unused", loaded=emb, epsilon=epsilon, beta=None,
                                gamma=kw.pop("gamma", 4.0), head_size=8, allow_weak_privacy=True, **kw)
    if mechanism.startswith("custext"):
        from ldptext_precompute.custext.build import build_custext_bundle
        return build_custext_bundle(path, embeddings="unused", loaded=emb, epsilon=epsilon, mechanism=mechanism,
                                    k=kw.pop("k", 3), allow_weak_privacy=True, **kw)
    return build_tiny_bundle(path, n=n, epsilon=epsilon, mechanism=mechanism, **kw)


def _drop_verbatim(m):
    m["privacy"].pop("verbatim")
    m["privacy"].pop("weak_privacy", None)


def _load(path, *, backend: str, allow_weak: bool):
    _, m = _arrays(path)
    cls = registry.get(m["mechanism"]).runtime_class()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        return cls.load(path, backend=backend, allow_weak_privacy=allow_weak, seed=0)


# (mechanism, near-identity eps, private eps): at the first every sensitive rate is >= 0.9, at the
# second none is (checked against reference_rates)
DROPPED = [("santext", 80.0, 1.0), ("tem", 80.0, 1.0), ("custext", 30.0, 1.0)]


@pytest.fixture(scope="module")
def dropped(tmp_path_factory):
    """Per mechanism: (weak, private) bundles whose privacy.verbatim section is left out."""
    d = tmp_path_factory.mktemp("dropped")
    out = {}
    for mech, weak_eps, ok_eps in DROPPED:
        pair = []
        for eps in (weak_eps, ok_eps):
            src = _build(d / f"{mech}-{eps}.ldpb", mech, eps, n=400)
            pair.append(edited_bundle(src, d / f"{mech}-{eps}-dropped.ldpb", _drop_verbatim,
                                      sign_key=keys.developer_key()))
        out[mech] = tuple(pair)
    return out


@pytest.mark.parametrize("mech", [m for m, _, _ in DROPPED])
def test_the_fixtures_are_certain_either_way(dropped, mech):
    weak, ok = dropped[mech]
    rates = reference_rates(weak)
    q = Fraction(int((rates >= NEAR_IDENTITY_MEDIAN).sum()), rates.size)  # a uniform draw at or above 0.9
    n, need = 64, median_threshold(64)
    wrong = sum(math.comb(n, i) * q ** i * (1 - q) ** (n - i) for i in range(need))  # P(Bin(n, q) < need)
    assert wrong < Fraction(1, 10 ** 9)
    assert (reference_rates(ok) < NEAR_IDENTITY_MEDIAN).all()
    assert "verbatim" not in _arrays(weak)[1]["privacy"]


@pytest.mark.parametrize("backend", ["auto", "fallback"])
@pytest.mark.parametrize("mech", [m for m, _, _ in DROPPED])
def test_python_decides_near_identity_without_a_stated_median(dropped, mech, backend):
    weak, ok = dropped[mech]
    with pytest.raises(WeakPrivacyError, match="no median verbatim rate is stated"):
        _load(weak, backend=backend, allow_weak=False)
    with _load(weak, backend=backend, allow_weak=True) as rt:
        report = rt.sanitize("w1 w2 w3").report
        assert report.weak_privacy is True and "WEAK PRIVACY" in report.summary()
    with _load(ok, backend=backend, allow_weak=False) as rt:
        assert rt.sanitize("w1 w2 w3").report.weak_privacy is False


@pytest.mark.parametrize("memory", [False, True])
@pytest.mark.parametrize("mech", [m for m, _, _ in DROPPED])
def test_the_c_library_decides_near_identity_without_a_stated_median(clib, dev_key, dropped, mech,  # noqa: F811
                                                                      memory):
    weak, ok = dropped[mech]
    rc, _ = clib.open(weak.read_bytes() if memory else weak, [dev_key], allow_weak=False)
    assert rc == E_WEAK_PRIVACY
    rc, b = open_expect(clib, weak, dev_key, allow_weak=True, memory=memory)
    assert rc == OK, clib.strerror(rc)
    try:
        info = clib.bundle_info(b)
        assert info["weak_privacy"] is True and info["verbatim_median"] is None
        s = clib.sanitizer(b, seed=0)
        rc, _, rep = clib.sanitize(s, "w1 w2")
        assert rc == OK and rep.weak_privacy == 1 and math.isnan(rep.verbatim_median)
        clib.free_sanitizer(s)
    finally:
        clib.close(b)
    rc, b = clib.open(ok.read_bytes() if memory else ok, [dev_key], allow_weak=False)
    assert rc == OK, clib.strerror(rc)
    try:
        assert clib.bundle_info(b)["weak_privacy"] is False
    finally:
        clib.close(b)


def test_the_sampled_rule_is_the_binomial_threshold_at_or_above_the_level():
    """Near identity from n drawn rates when at least median_threshold(n) (exact binomial tail, the
    stated median's test) are at or above 0.9, a rate of exactly 0.9 counting."""
    n = 64
    need = median_threshold(n)
    tail = Fraction(sum(math.comb(n, i) for i in range(need, n + 1)), 2 ** n)
    assert tail <= Fraction(MEDIAN_REFUSAL) < tail + Fraction(math.comb(n, need - 1), 2 ** n)
    for at in range(n + 1):
        rates = np.array([NEAR_IDENTITY_MEDIAN] * at + [np.nextafter(NEAR_IDENTITY_MEDIAN, 0)] * (n - at))
        assert sampled_near_identity(rates) == (at >= need, at)
    assert sampled_near_identity(np.empty(0))[0] is False


# ---- the kept-in-clear share (SanText+'s V_N at 1 - p, CusText+'s stop words always) -----------------


def _kept_share(path) -> tuple[int, int]:
    a, _ = _arrays(path)
    valid = a["valid_input"].astype(bool)
    return int((valid & a["keep_row"].astype(bool)).sum()), int(valid.sum())


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """SanText+ and CusText+ bundles whose kept-in-clear set is most of the vocabulary or not, at a
    small sensitive-word eps (their median verbatim rate is far below 0.9)."""
    d = tmp_path_factory.mktemp("kept")
    most, few = d / "most.txt", d / "few.txt"
    most.write_text("\n".join(f"w{i}" for i in range(40)) + "\n")  # 40 of 61 valid inputs
    few.write_text("\n".join(f"w{i}" for i in range(20)) + "\n")
    out = {}
    for name, words, p in (("most-p0.05", most, 0.05), ("most-p0.2", most, 0.2), ("few-p0.05", few, 0.05)):
        out["santext+", name] = _build(d / f"sp-{name}.ldpb", "santext+", 1.0, p=p, w=None, non_sensitive=words)
    out["custext+", "most"] = _build(d / "cp-most.ldpb", "custext+", 1.0, non_sensitive=most)
    out["custext+", "few"] = _build(d / "cp-few.ldpb", "custext+", 1.0, non_sensitive=few)
    return out


# (bundle, near identity): the rule computed here from the arrays and the stated p
KEPT = [(("santext+", "most-p0.05"), True), (("santext+", "most-p0.2"), False), (("santext+", "few-p0.05"), False),
        (("custext+", "most"), True), (("custext+", "few"), False)]


def _kept_rule(path) -> bool:
    """More than half of the valid inputs kept, each with probability 1 - p >= 0.9 (exact rationals)."""
    n_kept, n_valid = _kept_share(path)
    _, m = _arrays(path)
    p = m["params"].get("p")
    keep = Fraction(1) - Fraction(str(p)) if p is not None else Fraction(1)
    return 2 * n_kept > n_valid and keep >= Fraction(9, 10)


@pytest.mark.parametrize("which,weak", KEPT, ids=[f"{a}-{b}" for (a, b), _ in KEPT])
def test_a_kept_in_clear_majority_is_near_identity(clib, dev_key, kept, which, weak):  # noqa: F811
    path = kept[which]
    assert _kept_rule(path) is weak  # the fixture is what it is named
    assert (reference_rates(path) < NEAR_IDENTITY_MEDIAN).all()  # the sensitive words alone: not weak
    for backend in ("auto", "fallback"):
        if weak:
            with pytest.raises(WeakPrivacyError, match="kept in the clear"):
                _load(path, backend=backend, allow_weak=False)
        with _load(path, backend=backend, allow_weak=True) as rt:
            assert rt.sanitize("w1 w2 w50").report.weak_privacy is weak
    rc, b = clib.open(path, [dev_key], allow_weak=False)
    assert rc == (E_WEAK_PRIVACY if weak else OK), clib.strerror(rc)
    if not weak:
        clib.close(b)
    rc, b = open_expect(clib, path, dev_key, allow_weak=True)
    assert rc == OK
    try:
        assert clib.bundle_info(b)["weak_privacy"] is weak
    finally:
        clib.close(b)


def test_the_kept_rule_counts_a_strict_majority():
    from types import SimpleNamespace
    valid = np.ones(10, dtype=bool)
    for n_kept, weak in ((5, False), (6, True)):
        t = SimpleNamespace(valid_input=valid, keep_row=np.arange(10) < n_kept)
        assert (kept_in_clear_majority(t, 0.05) is not None) is weak
    t = SimpleNamespace(valid_input=valid, keep_row=np.arange(10) < 9)
    assert kept_in_clear_majority(t, 0.2) is None and kept_in_clear_majority(t, None) is not None


# ---- the stated median's slack ----------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [12.0, 40.0])
def test_an_honest_custext_k2_bundle_whose_rates_are_all_equal_opens(clib, dev_key, tmp_path, epsilon):  # noqa: F811
    """K = 2: every sensitive rate is 1 / (1 + e^(-eps/2)), so the stated median is every row's rate, and
    a row's rate rounded a few ulps above it must not count as above (the stated maximum's slack)."""
    path = _build(tmp_path / "k2.ldpb", "custext", epsilon, k=2, n=240)
    rates = reference_rates(path)
    assert (rates == 0).sum() == 1  # <unk>: not in its group's outputs
    assert np.allclose(rates[rates > 0], 1 / (1 + math.exp(-epsilon / 2)), rtol=1e-12, atol=0)
    stated = _arrays(path)[1]["privacy"]["verbatim"]["median"]
    assert stated == pytest.approx(1 / (1 + math.exp(-epsilon / 2)), rel=1e-12)
    for _ in range(3):  # random rows at each open
        for backend in ("auto", "fallback"):
            with _load(path, backend=backend, allow_weak=True) as rt:
                assert rt.sanitize("w1 w2 w3").report.weak_privacy is True
        rc, b = open_expect(clib, path, dev_key, allow_weak=True)
        assert rc == OK, clib.strerror(rc)
        clib.close(b)
