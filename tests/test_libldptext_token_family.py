"""TEM, CusText and CusText+ in libldptext (the C library, through ctypes) against the Python runtimes.

* the library opens the bundles the Python builders write and states the same public facts
  (``ldp_bundle_info``: mechanism, ε, γ / β, K / similarity, D_max, ledger unit, worst case) as the
  Python runtime's report;
* seeded C sanitizers give exactly the Python runtime's seeded output (the C extension backend; the
  numpy fallback's seeded stream is its own), document by document and for ``ldp_sample_ids``:
  the same key, the same exact engine and the same order of random draws;
* OS-seeded C draws follow the law the Python runtime states (``probabilities``, itself checked
  against each paper's formula by tests/test_tem.py and tests/test_custext.py), by chi-square;
* a trusted signer's relabelled ε, γ or similarity is refused at open (LDP_E_PARAMETER_MISMATCH),
  and re-signed arrays that break a mechanism's invariants with the mechanism's own code;
* CMP and Mahalanobis bundles are refused with LDP_E_MECHANISM, whose message says they run in
  the Python SDK only.
"""
from __future__ import annotations

import ctypes
import json
import math
import warnings

import numpy as np
import pytest
from scipy import stats

from conftest import edited_bundle, random_word_embeddings
import test_libldptext
from test_libldptext import OK

from ldptext.custext import CusTextSanitizer
from ldptext.rng import SeededModeWarning
from ldptext.tem import TEMSanitizer
from ldptext_precompute.custext.build import build_custext_bundle
from ldptext_precompute.tem.build import build_tem_bundle

E_MECHANISM = -53
E_PARAMETER_MISMATCH = -100
E_TEM_TABLES = -120
E_CUSTEXT_TABLES = -121
MECH = {3: "tem", 4: "custext", 5: "custext+"}
DOCS = ["w1 w2 w3, w4!", "w5 w6 w7 w8 w9 w10 w11 " * 7, "", "w0", "w12\tw13\nw14  w15.",
        "unknown words w16 東京 w17"]


def _load(cls, path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        return cls.load(path, **kw)


@pytest.fixture(scope="session")
def clib() -> test_libldptext.LibLdptext:
    return test_libldptext.clib.__wrapped__()


@pytest.fixture(scope="session")
def dev_key(ldptext_home) -> bytes:
    return test_libldptext.dev_key.__wrapped__(ldptext_home)


@pytest.fixture(scope="module")
def emb():
    return random_word_embeddings(47, 5, 8)


@pytest.fixture(scope="module")
def bundles(tmp_path_factory, emb):
    d = tmp_path_factory.mktemp("family")
    stop = d / "stop.txt"
    stop.write_text("w0\nw1\nw2\nw7\n")
    return {
        "tem": build_tem_bundle(d / "tem.ldpb", embeddings="unused", loaded=emb, epsilon=3.0,
                                gamma=2.4, head_size=6),
        "tem-beta": build_tem_bundle(d / "temb.ldpb", embeddings="unused", loaded=emb, epsilon=2.0,
                                     beta=0.05, head_size=6),
        "tem-huge": build_tem_bundle(d / "temh.ldpb", embeddings="unused", loaded=emb, epsilon=3.0,
                                     gamma=50.0, head_size=6),
        "custext": build_custext_bundle(d / "c.ldpb", embeddings="unused", loaded=emb, epsilon=2.5,
                                        k=5, device="cpu"),
        "custext+": build_custext_bundle(d / "cp.ldpb", embeddings="unused", loaded=emb, epsilon=1.5,
                                         k=4, mechanism="custext+", non_sensitive=str(stop),
                                         similarity="cosine", device="cpu"),
    }


CLASS = {"tem": TEMSanitizer, "tem-beta": TEMSanitizer, "tem-huge": TEMSanitizer,
         "custext": CusTextSanitizer, "custext+": CusTextSanitizer}
KINDS = list(CLASS)


@pytest.mark.parametrize("kind", KINDS)
def test_bundle_info_states_what_the_python_runtime_reports(clib, bundles, dev_key, kind):
    san = _load(CLASS[kind], bundles[kind])
    rc, b = clib.open(bundles[kind], [dev_key])
    assert rc == OK, clib.strerror(rc)
    try:
        info = clib.bundle_info(b)
    finally:
        clib.close(b)
    rep = san.privacy_report(10)
    assert info["mechanism"] == san.mechanism
    assert info["epsilon"] == san.epsilon
    assert info["ledger_unit"] == san.ledger_unit
    assert info["worst_case_token_epsilon"] == rep.worst_case_token_epsilon
    assert info["worst_case_note"] == rep.worst_case_note
    assert info["tolerance"] == rep.numeric_tolerance
    assert info["manifest"] == json.loads(json.dumps(san.manifest))
    assert info["key_id"] == san.key_id
    if san.mechanism == "tem":
        assert info["gamma"] == san.gamma and info["beta"] == san.beta and info["d_max"] == san.d_max
        assert info["p"] is None and info["epsilon0"] == 0.0
    else:
        assert info["k"] == san.k and info["similarity"] == san.similarity
        assert info["d_max"] is None
        assert info["p"] == (0.0 if san.mechanism == "custext+" else None)
        assert info["epsilon0"] == (None if san.mechanism == "custext+" else 0.0)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", [0, 3, 2**63 + 5])
def test_seeded_c_output_is_the_python_seeded_output(clib, bundles, dev_key, kind, seed):
    san = _load(CLASS[kind], bundles[kind], seed=seed, backend="native")
    rc, b = clib.open(bundles[kind], [dev_key])
    assert rc == OK, clib.strerror(rc)
    s = clib.sanitizer(b, seed=seed)
    try:
        for doc in DOCS:  # one call per document on both sides: the same stream
            rc, text, rep = clib.sanitize(s, doc)
            expected = san.sanitize(doc)
            assert rc == OK, clib.strerror(rc)
            assert text == expected.text
            assert rep.n_tokens == expected.report.n_tokens
            assert rep.seeded == 1 and MECH[rep.mechanism] == san.mechanism
            assert rep.epsilon == expected.report.epsilon
            worst = expected.report.worst_case_token_epsilon
            assert rep.worst_case_epsilon == (math.inf if worst is None else worst)
            assert rep.tolerance == expected.report.numeric_tolerance
        ids = np.tile(np.arange(san.n_rows), 30)[:1200]
        ids = ids[san.valid_input[ids]]
        rc, ys = clib.sample(s, ids)
        assert rc == OK
        assert np.array_equal(ys, san.sample_ids(ids))
    finally:
        clib.free_sanitizer(s)
        clib.close(b)
        san.close()


@pytest.mark.parametrize("kind", ["tem", "custext+"])
def test_c_draws_follow_the_stated_law(clib, bundles, dev_key, kind):
    san = _load(CLASS[kind], bundles[kind])
    rc, b = clib.open(bundles[kind], [dev_key])
    assert rc == OK
    s = clib.sanitizer(b)  # OS-keyed
    try:
        for x in np.flatnonzero(san.valid_input)[:4]:
            probs = san.probabilities([x])[0]
            rc, ys = clib.sample(s, np.full(20000, x))
            assert rc == OK
            counts = np.bincount(ys, minlength=san.n_rows)
            assert counts[probs == 0].sum() == 0, "an output of probability 0 was drawn"
            live = probs > 0
            if live.sum() > 1:
                expected = probs[live] * ys.size
                assert stats.chisquare(counts[live], expected).pvalue > 1e-4
    finally:
        clib.free_sanitizer(s)
        clib.close(b)
        san.close()


def _resigned(src, dst, edit=None, arrays_edit=None):
    from ldptext import keys as K
    return edited_bundle(src, dst, edit or (lambda m: None), arrays_edit, sign_key=K.developer_key())


@pytest.mark.parametrize("kind,edit", [
    ("tem", lambda m: m["params"].update(epsilon=m["params"]["epsilon"] * 1.5)),
    ("tem", lambda m: m["params"].update(gamma=m["params"]["gamma"] * 1.01)),
    ("tem-beta", lambda m: m["params"].update(beta=0.1)),
    ("tem", lambda m: m["privacy"].update(worst_case_token_epsilon=1.0)),
    ("tem", lambda m: m["privacy"].update(d_max=m["privacy"]["d_max"] / 3)),
    ("tem", lambda m: m["params"].update(p=0.5)),
    ("custext", lambda m: m["params"].update(epsilon=m["params"]["epsilon"] * 2)),
    ("custext+", lambda m: m["params"].update(similarity="euclidean")),
    ("custext+", lambda m: m["params"].update(p=0.5)),
    ("custext", lambda m: m["privacy"].update(groups=m["privacy"]["groups"] + 1)),
    ("custext", lambda m: m["privacy"].update(worst_case_token_epsilon=2.5)),
], ids=["tem-eps", "tem-gamma", "tem-beta", "tem-worst", "tem-dmax", "tem-p", "custext-eps",
        "custext-similarity", "custext-p", "custext-groups", "custext-worst"])
def test_a_trusted_signers_relabelled_parameters_are_refused(clib, bundles, dev_key, tmp_path, kind, edit):
    bad = _resigned(bundles[kind], tmp_path / "bad.ldpb", edit)
    rc, b = clib.open(bad, [dev_key])
    assert rc == E_PARAMETER_MISMATCH, clib.strerror(rc)
    from ldptext.errors import ParameterMismatchError
    with pytest.raises(ParameterMismatchError):
        _load(CLASS[kind], bad, backend="fallback")


def test_the_unedited_resigned_bundles_still_open(clib, bundles, dev_key, tmp_path):
    for kind in KINDS:
        good = _resigned(bundles[kind], tmp_path / f"{kind}.ldpb")
        rc, b = clib.open(good, [dev_key])
        assert rc == OK, (kind, clib.strerror(rc))
        clib.close(b)


def _set(name, fn):
    def edit(arrays):
        arrays[name] = fn(arrays[name].copy())
    return edit


@pytest.mark.parametrize("kind,arrays_edit,code", [
    ("tem", _set("bot_gamma", lambda a: np.where(np.arange(a.size) == 3, -1.0, a)), E_TEM_TABLES),
    ("tem", _set("bot_count", lambda a: np.where(np.arange(a.size) == 3, 10**6, a).astype(np.int32)),
     E_TEM_TABLES),
    ("tem", _set("keep_row", lambda a: np.where(np.arange(a.size) == 5, 1, a).astype(a.dtype)), E_TEM_TABLES),
    ("custext", _set("group_id", lambda a: np.where(a == 0, 1, a).astype(np.int32)), E_CUSTEXT_TABLES),
    ("custext", _set("keep_row", lambda a: np.where(np.arange(a.size) == 5, 1, a).astype(a.dtype)),
     E_CUSTEXT_TABLES),
], ids=["tem-negative-bot-gamma", "tem-bot-count", "tem-keeps", "custext-groups-merged", "custext-keeps"])
def test_resigned_arrays_that_break_a_mechanism_are_refused(clib, bundles, dev_key, tmp_path, kind,
                                                            arrays_edit, code):
    bad = _resigned(bundles[kind], tmp_path / "bad.ldpb", arrays_edit=arrays_edit)
    rc, b = clib.open(bad, [dev_key])
    assert rc == code, clib.strerror(rc)
    from ldptext.errors import BundleError
    with pytest.raises(BundleError):
        _load(CLASS[kind], bad, backend="fallback")


def test_cmp_and_mahalanobis_are_refused_as_python_only(clib, dev_key, tmp_path, emb):
    pytest.importorskip("faiss")
    from ldptext_precompute.cmp.build import build_cmp_bundle
    path = build_cmp_bundle(tmp_path / "cmp.ldpb", embeddings="unused", loaded=emb, epsilon=5.0)
    rc, b = clib.open(path, [dev_key])
    assert rc == E_MECHANISM
    assert "Python SDK only" in clib.strerror(rc) and "CMP" in clib.strerror(rc)


def test_pins_name_the_new_mechanisms(clib, bundles, dev_key):
    class Expect(ctypes.Structure):
        _fields_ = [("size", ctypes.c_size_t), ("mechanisms", ctypes.c_uint),
                    ("epsilon_min", ctypes.c_double), ("epsilon_max", ctypes.c_double),
                    ("bundle_id", ctypes.c_char_p), ("min_format_version", ctypes.c_int64)]
    lib = clib.lib
    lib.ldp_bundle_expect.argtypes = [ctypes.c_void_p, ctypes.POINTER(Expect)]
    bits = {"santext": 1 << 1, "santext+": 1 << 2, "tem": 1 << 3, "custext": 1 << 4, "custext+": 1 << 5}
    for kind in ("tem", "custext", "custext+"):
        rc, b = clib.open(bundles[kind], [dev_key])
        assert rc == OK
        try:
            mech = kind
            ok = Expect(size=ctypes.sizeof(Expect), mechanisms=bits[mech])
            assert lib.ldp_bundle_expect(b, ctypes.byref(ok)) == OK
            other = Expect(size=ctypes.sizeof(Expect), mechanisms=bits["santext"] | bits["santext+"])
            assert lib.ldp_bundle_expect(b, ctypes.byref(other)) == -101
            unknown = Expect(size=ctypes.sizeof(Expect), mechanisms=1 << 6)
            assert lib.ldp_bundle_expect(b, ctypes.byref(unknown)) == -1
        finally:
            clib.close(b)


@pytest.mark.parametrize("kind", ["tem", "custext+"])
def test_the_example_program_sanitizes_the_token_family(clib, bundles, dev_key, tmp_path, kind):
    import base64
    import subprocess
    pub = tmp_path / "dev.pub"
    pub.write_text(base64.b64encode(dev_key).decode() + "\n")
    res = subprocess.run([str(test_libldptext.EXAMPLE), "--report", str(bundles[kind]), str(pub)],
                         input=b"w1 w2 w3\nw4 w5\n", capture_output=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert [len(x.split()) for x in res.stdout.decode().split("\n")[:2]] == [3, 2]
    assert res.stderr.decode().count(f"line 1: {kind} eps=") == 1
