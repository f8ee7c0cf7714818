"""libldptext in the browser: the WebAssembly build (``make wasm``: native/build/wasm/) through its
ES module ldptext-web.js, in node and in headless Chromium.

* node (tests/web/node_run.mjs running tests/web/runner.js): the module opens tiny SanText and
  SanText+ bundles and the web-sized GloVe bundle; seeded sanitizers give byte-identical text and
  the same report as the Python runtime and as the native C library (ctypes) for the same seed, and
  so do tokenize, sample_ids and detokenize; tampered (bit flips all over the file), truncated,
  unsigned and foreign bundles, and untrusted or malformed keys, are refused with the native C
  library's error code; open/sanitize/close and every refusal free all they allocate; an unseeded
  sanitizer keys itself from crypto.getRandomValues, never from Math.random.
* headless Chromium on a server bound to 127.0.0.1 only (examples/web/serve.py; --dump-dom reads
  the page back, host resolution is off for everything but 127.0.0.1): the same cases in a page
  (tests/web/check.html), then the example page (examples/web/) driven like a user: type, click
  "Sanitize & upload", read the sanitized text, the report and the would-be upload.
* the web-sized bundle: the one precompute command of the README, at most 10 MB.
* pins (options.expect, Python's BundleExpectation) in node and in the page: an app that pins
  epsilon_max 3 is refused an eps = 10 bundle of the same trusted signer and opens the eps = 2 one;
  every pin refuses exactly where the Python runtime does, with its LDP_E_EXPECT_* code, the pin's
  name and Python's message; malformed pins are refused as Python refuses them; and the
  "relabelled" bundle (eps = 10 tables, a manifest saying 3, re-signed by the same trusted key) is
  refused with LDP_E_PARAMETER_MISMATCH, pinned or not.
* TEM (gamma given, beta given), CusText and CusText+ (cosine, stop words), built by their Python
  builders, in node and in the page: seeded documents, tokenize / detokenize and sample_ids equal to
  the Python runtime's on the C extension backend (and, for the documents, the native C library's);
  the reports are Python's PrivacyReport field for field, prose included, and the LdpText's
  facts (epsilon, gamma / beta, K / similarity, ledger unit, worst case) the Python runtime's; pins
  on 'tem', 'custext', 'custext+' open or refuse as Python's do,
  with its message; a trusted signer's relabelled epsilon or gamma is refused with
  LDP_E_PARAMETER_MISMATCH, broken TEM / CusText tables with LDP_E_TEM_TABLES / LDP_E_CUSTEXT_TABLES,
  each with ldp_strerror's message.

The C unit tests and the byte-for-byte cross check in wasm are ``make -C native/wasm test``.
Skipped, with the reason, only when emcc, node or chromium are absent; with LDPTEXT_REQUIRE_WASM=1
(CI) their absence fails instead.
"""
from __future__ import annotations

import base64
import html
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import build_lock, build_tiny_bundle, load_seeded, require_tool
from test_libldptext import CODES_OF, LibLdptext, build_library, python_error
from test_santext_check import KEY as PIN_SIGNER, relabelled, set_epsilon

ROOT = Path(__file__).resolve().parents[1]
WASM_BUILD = ROOT / "native" / "build" / "wasm"
WEB_TESTS = ROOT / "tests" / "web"
WEB_BUNDLE_MAX = 10_000_000  # bytes: "a web-sized bundle (<= 10 MB)"
# the web bundle, exactly as README and `make web-bundle` build it
WEB_BUNDLE_ARGS = ["precompute", "santext", "--embeddings", "glove-6b-50d", "--vocab-size", "20000",
                   "--head-size", "16", "--tail-clusters", "16", "--epsilon", "3", "--mechanism", "santext+",
                   "--p", "0.3"]
SEED = 20240611

TINY_TEXTS = ["w1 w2 w3 w4 w5 w6 w7 w8", "W12, w13! w14?", "w40 unknownword w41", "",
              "  w2\tw3\n", "wé ü 漢字 🙂 w5"]
REAL_TEXTS = ["Emily was diagnosed with asthma at Mercy Hospital",
              "I live at 42 Elm Street in Springfield; call me on 555-0199 before 9 p.m.!",
              "Café São Paulo: naïve façade, Zürich résumé. ¿Qué tal? 東京 🙂",
              "", "   ",
              "The patient, a 54-year-old teacher from Ohio, was prescribed insulin for her diabetes "
              "and referred to Dr. Smith's cardiology clinic after chest pain on Tuesday."]
EXAMPLE_TEXT = "My name is Emily Stone and I was treated for depression at Mercy Hospital in Boston."


def _tool(names: list[str], why: str) -> str:
    return require_tool(names, why, "LDPTEXT_REQUIRE_WASM")


# ---- fixtures -------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def node() -> str:
    return _tool(["node", "nodejs"], "the wasm tests run in node (Debian: nodejs; .ci/run installs it)")


@pytest.fixture(scope="session")
def wasm_build(node) -> Path:
    """make -C native/wasm (incremental; `make test` has built it already)."""
    _tool(["emcc"], "the browser build needs emscripten (Debian: emscripten; .ci/run installs it)")
    with build_lock():
        done = subprocess.run(["make", "-s", "-C", str(ROOT / "native" / "wasm")], capture_output=True,
                              text=True)
    if done.returncode != 0:
        pytest.fail("make -C native/wasm failed:\n" + (done.stdout + done.stderr)[-3000:])
    return WASM_BUILD


@pytest.fixture(scope="session")
def chromium() -> str:
    return _tool(["chromium", "chromium-browser", "google-chrome"],
                 "the browser test needs headless Chromium (Debian: chromium; .ci/run installs it)")


@pytest.fixture(scope="session")
def dev_key(ldptext_home) -> bytes:
    from ldptext import keys
    return keys.public_bytes(keys.developer_key().public_key())


@pytest.fixture(scope="session")
def clib() -> LibLdptext:
    build_library()
    return LibLdptext(ROOT / "native" / "build" / "libldptext.so")


@pytest.fixture(scope="session")
def web_bundle(tmp_path_factory, ldptext_home) -> Path:
    """The web-sized bundle, built by the documented precompute command (about 15 s)."""
    out = tmp_path_factory.mktemp("web") / "web.ldpb"
    exe = Path(sys.executable).with_name("ldptext")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "ldptext"]
    subprocess.run(cmd + WEB_BUNDLE_ARGS + ["--out", str(out)], check=True, capture_output=True)
    return out


def _b64(key: bytes) -> str:
    return base64.b64encode(key).decode()


def _flip(data: bytes, offset: int) -> bytes:
    out = bytearray(data)
    out[offset] ^= 0x01
    return bytes(out)


def _header_end(data: bytes) -> int:
    return 8 + int.from_bytes(data[:8], "little")


def python_ops(path: Path, seed: int, ops: list, **load) -> list:
    """What the Python runtime returns for the ops, on a fresh sanitizer seeded with `seed`."""
    return run_ops(load_seeded(path, seed=seed, **load), ops)


def run_ops(san, ops: list, report=lambda d: d) -> list:
    """Each op's result on ``san`` (closed afterwards); ``report`` maps a report's dict."""
    out = []
    try:
        for op, arg in ops:
            if op == "sanitize":
                r = san.sanitize(arg)
                out.append({"text": r.text, "report": report(r.report.to_dict())})
            elif op == "tokenize":
                out.append([int(i) for i in san.tokenize(arg)])
            elif op == "sample_ids":
                out.append([int(i) for i in san.sample_ids(np.asarray(arg, dtype=np.int32))])
            elif op == "detokenize":
                out.append(san.detokenize(np.asarray(arg, dtype=np.int32)))
            else:
                raise AssertionError(op)
    finally:
        san.close()
    return out


def c_texts(clib: LibLdptext, path: Path, key: bytes, seed: int, texts: list[str]) -> list[str]:
    """The native C library's seeded ldp_sanitize output for the texts, in order."""
    rc, b = clib.open(path, [key])
    assert rc == 0, clib.strerror(rc)
    s = clib.sanitizer(b, seed=seed)
    try:
        out = []
        for t in texts:
            rc, text, _ = clib.sanitize(s, t)
            assert rc == 0, clib.strerror(rc)
            out.append(text)
        return out
    finally:
        clib.free_sanitizer(s)
        clib.close(b)


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory, dev_key, clib, web_bundle):
    """The fixture directory (spec.json and its bundles) and what every case must return."""
    d = tmp_path_factory.mktemp("wasm_fixtures")
    bundles = {"tiny-santext.ldpb": build_tiny_bundle(d / "tiny-santext.ldpb", mechanism="santext"),
               "tiny-santext+.ldpb": build_tiny_bundle(d / "tiny-santext+.ldpb", mechanism="santext+",
                                                       p=0.3, w=0.7)}
    shutil.copyfile(web_bundle, d / "web.ldpb")
    bundles["web.ldpb"] = d / "web.ldpb"
    build_tiny_bundle(d / "unsigned.ldpb", mechanism="santext+", p=0.3, w=0.7, sign_key=False)
    trusted = [_b64(dev_key)]
    stranger = _b64(bytes(range(32)))
    cases, expected = [], {}

    # seeded runs: the same ops on Python and (sanitize) the native C library
    for name, texts in (("tiny-santext.ldpb", TINY_TEXTS), ("tiny-santext+.ldpb", TINY_TEXTS),
                        ("web.ldpb", REAL_TEXTS)):
        path = bundles[name]
        ops = [["sanitize", t] for t in texts] + [["tokenize", texts[1]]]
        py = python_ops(path, SEED, ops)
        ids = py[-1]
        ops += [["detokenize", ids]]
        py = python_ops(path, SEED, ops)
        c = c_texts(clib, path, dev_key, SEED, texts)
        assert c == [r["text"] for r in py[:len(texts)]], "native C and Python disagree"
        cases.append({"name": f"seeded {name}", "bundle": name, "keys": trusted, "seed": SEED, "ops": ops})
        expected[f"seeded {name}"] = py
        sample_ops = [["sample_ids", (ids * 40)[:200]]]
        cases.append({"name": f"sample_ids {name}", "bundle": name, "keys": trusted, "seed": SEED + 1,
                      "ops": sample_ops})
        expected[f"sample_ids {name}"] = python_ops(path, SEED + 1, sample_ops)

    # a 64-bit seed (both halves used)
    big = 2**64 - 12345
    ops = [["sanitize", TINY_TEXTS[0]]]
    cases.append({"name": "seed near 2^64", "bundle": "tiny-santext+.ldpb", "keys": trusted,
                  "seed": str(big), "ops": ops})
    expected["seed near 2^64"] = python_ops(bundles["tiny-santext+.ldpb"], big, ops)

    # refusals inside a verified bundle: bad input is refused, nothing returned
    with load_seeded(bundles["tiny-santext+.ldpb"]) as san:
        v = len(san.vocab)
    cases.append({"name": "bad input", "bundle": "tiny-santext+.ldpb", "keys": trusted, "seed": SEED,
                  "ops": [["sanitize", "w1 \ud800 w2"], ["sanitize_bytes", [0x77, 0x31, 0xFF, 0xFE]],
                          ["sample_ids", [0, -1]], ["sample_ids", [v + 10]],
                          ["close_then_sanitize", "w1"]]})

    # bundles the C library refuses: every one with its native error code
    good = bundles["tiny-santext+.ldpb"].read_bytes()
    end = _header_end(good)
    header = good[8:end]
    sig_at = 8 + header.index(b'"ldptext.signature":"') + len(b'"ldptext.signature":"') + 5
    manifest_at = 8 + header.index(b"epsilon")
    rng = np.random.default_rng(7)
    variants = {"flip in the signature": _flip(good, sig_at),
                "flip in the manifest": _flip(good, manifest_at),
                "flip in the length prefix": _flip(good, 0),
                "flip in the first array": _flip(good, end + 3),
                "flip in the last byte": _flip(good, len(good) - 1),
                "truncated": good[:-7],
                "not a bundle": b"this is not a bundle" * 8,
                "empty": b""}
    for i, offset in enumerate(sorted(rng.choice(len(good), size=16, replace=False))):
        variants[f"flip at {int(offset)}"] = _flip(good, int(offset))
    refused = {}
    for label, data in variants.items():
        fname = f"bad-{len(refused)}.ldpb"
        (d / fname).write_bytes(data)
        rc, b = clib.open(data, [dev_key])
        if rc == 0:
            clib.close(b)
        assert rc != 0, f"native C accepts the bundle with a {label}"
        if data:
            kind = python_error(data, dev_key)
            assert kind is not None and rc in CODES_OF[kind], (label, kind, rc)
        refused[label] = rc
        cases.append({"name": f"refuse {label}", "bundle": fname, "keys": trusted})
        expected[f"refuse {label}"] = rc
    for label, fname, keys_ in (("unsigned", "unsigned.ldpb", trusted),
                                ("untrusted key", "tiny-santext+.ldpb", [stranger]),
                                ("no trusted key", "tiny-santext+.ldpb", []),
                                ("web bundle, untrusted key", "web.ldpb", [stranger])):
        rc, b = clib.open((d / fname).read_bytes(), [base64.b64decode(k) for k in keys_])
        assert rc != 0
        cases.append({"name": f"refuse {label}", "bundle": fname, "keys": keys_})
        expected[f"refuse {label}"] = rc
    cases.append({"name": "refuse a malformed key", "bundle": "tiny-santext+.ldpb",
                  "keys": [_b64(bytes(31))]})
    expected["refuse a malformed key"] = -1  # LDP_E_ARG, before the C library is called

    pins = pin_cases(d, clib, cases, expected)

    spec = {"cases": cases, "rounds": 2,
            "random": {"bundle": "tiny-santext+.ldpb", "keys": trusted,
                       "text": " ".join(f"w{i % 60}" for i in range(40))},
            "example": {"url": "/", "text": EXAMPLE_TEXT}}
    (d / "spec.json").write_text(json.dumps(spec))
    return {"dir": d, "expected": expected, "bundles": bundles, "refused": refused, "pins": pins}


# native/include/ldptext.h
E_ARG, E_PARAMETER_MISMATCH = -1, -100
E_EXPECT = {"mechanism": -101, "min_format_version": -102, "bundle_id": -103,
            "epsilon_min": -104, "epsilon_max": -104}
PIN_TEXT = "w1 w2 w3 w4 w5"


def pin_cases(d: Path, clib: LibLdptext, cases: list, expected: dict) -> dict:
    """Cases of options.expect, added to `cases` / `expected`, over bundles of one trusted signer
    (test_santext_check's key): eps = 2 and eps = 10 SanText+ bundles and the relabelled eps = 10
    one. Each case's outcome is the Python runtime's for the same pins; returns, per refused case,
    what the error must say: {"error", "pin", "message"} (message: Python's, for unmet pins)."""
    from ldptext import bundle as B
    from ldptext import registry
    from ldptext import keys
    from ldptext.errors import BundleExpectationError, ParameterError, ParameterMismatchError

    pub = PIN_SIGNER.public_key()
    raw = keys.public_bytes(pub)
    eps2 = build_tiny_bundle(d / "pin-eps2.ldpb", mechanism="santext+", epsilon=2.0, sign_key=PIN_SIGNER)
    eps10 = build_tiny_bundle(d / "pin-eps10.ldpb", mechanism="santext+", epsilon=10.0, sign_key=PIN_SIGNER)
    lie = relabelled(eps10, d / "pin-relabelled.ldpb", set_epsilon(3.0))
    B.read_bundle(lie, trusted_keys=[pub])  # signature and hashes valid: only the numbers lie
    rc, b = clib.open(lie, [raw])
    assert rc == E_PARAMETER_MISMATCH, rc
    id2 = B.read_bundle(eps2, trusted_keys=[pub]).bundle_id
    ops = [["sanitize", PIN_TEXT]]
    outputs = {p: python_ops(p, SEED, ops, trusted_keys=[pub]) for p in (eps2, eps10)}

    table = [  # (label, bundle, pins, what the web wrapper must do: 0 opens, else (code, pin))
        ("epsilon_max 3, eps 10", eps10, {"epsilon_max": 3}, (-104, "epsilon_max")),
        ("epsilon_max 3, eps 2", eps2, {"epsilon_max": 3}, 0),
        ("epsilon_max 10 (inclusive)", eps10, {"epsilon_max": 10}, 0),
        ("epsilon_min 10.5", eps10, {"epsilon_min": 10.5}, (-104, "epsilon_min")),
        ("epsilon_min 2.5, eps 2", eps2, {"epsilon_min": 2.5, "epsilon_max": 20}, (-104, "epsilon_min")),
        ("epsilon in [1, 20]", eps10, {"epsilon_min": 1, "epsilon_max": 20}, 0),
        ("mechanism list", eps10, {"mechanism": ["santext+", "santext"]}, 0),
        ("mechanism santext or tem", eps10, {"mechanism": ["tem", "santext"]}, (-101, "mechanism")),
        ("mechanism before epsilon", eps10, {"mechanism": "santext", "epsilon_max": 3}, (-101, "mechanism")),
        ("min_format_version 1", eps10, {"min_format_version": 1}, 0),
        ("min_format_version 2", eps10, {"min_format_version": 2}, (-102, "min_format_version")),
        ("format before bundle id", eps10, {"min_format_version": 2, "bundle_id": id2},
         (-102, "min_format_version")),
        ("bundle_id of eps 2", eps2, {"bundle_id": id2}, 0),
        ("bundle_id of eps 2 on eps 10", eps10, {"bundle_id": id2}, (-103, "bundle_id")),
        ("bundle id before epsilon", eps10, {"bundle_id": "0" * 64, "epsilon_max": 3}, (-103, "bundle_id")),
        ("no pins (null)", eps10, None, 0),
        ("relabelled", lie, None, (E_PARAMETER_MISMATCH, None)),
        ("relabelled, epsilon_max 3", lie, {"epsilon_max": 3}, (E_PARAMETER_MISMATCH, None)),
    ]
    # every mechanism name Python knows: the wrapper's list must be the same
    table += [(f"mechanism {m}", eps10, {"mechanism": m}, 0 if m == "santext+" else (-101, "mechanism"))
              for m in registry.names()]
    # malformed pins: refused before the bundle is read, as Python's ParameterError
    table += [(f"malformed {json.dumps(p)}", eps2, p, (E_ARG, None)) for p in (
        {"epsilon": 3}, {"epsilon_max": 0}, {"epsilon_max": -1}, {"epsilon_max": True},
        {"epsilon_max": "3"}, {"epsilon_min": 3, "epsilon_max": 2}, {"bundle_id": id2.upper()},
        {"bundle_id": id2[:63]}, {"min_format_version": 0}, {"min_format_version": 1.5},
        {"mechanism": []}, {"mechanism": "bogus"}, {"mechanism": ["santext", 7]})]

    refusals = {}
    for label, path, pins, want in table:
        name = f"pin: {label}"
        try:
            got = load_seeded(path, seed=SEED, trusted_keys=[pub], expect=pins)
        except (BundleExpectationError, ParameterError, ParameterMismatchError) as e:
            got = e
        if want == 0:
            assert not isinstance(got, Exception), (label, got)
            got.close()
            expected[name] = outputs[path]
        else:
            code, pin = want
            kind = {E_ARG: ParameterError, E_PARAMETER_MISMATCH: ParameterMismatchError}.get(
                code, BundleExpectationError)
            assert isinstance(got, kind), (label, got)
            expected[name] = code
            refusals[name] = {"error": "LdpTextExpectationError" if pin else "LdpTextError", "pin": pin,
                              "message": str(got) if pin else None}
        cases.append({"name": name, "bundle": path.name, "keys": [_b64(raw)], "seed": SEED,
                      "expect": pins, "ops": ops})
    return refusals



# ---- shared assertions ------------------------------------------------------------------------------

def check_results(results: dict, fixtures: dict) -> None:
    assert "fatal" not in results, results.get("fatal")
    assert results["version"] == "0.1.0"
    expected = fixtures["expected"]
    by_name = {c["name"]: c for c in results["cases"]}
    assert set(by_name) == set(expected) | {"bad input"}
    for name, want in expected.items():
        got = by_name[name]
        if isinstance(want, int):  # a refusal
            assert got["ok"] is False and got["at"] == "open", (name, got)
            assert got["code"] == want, (name, got)
            continue
        assert got["ok"], (name, got)
        values = []
        for r in got["results"]:
            assert r["ok"], (name, r)
            values.append(r["value"])
        assert values == want, name  # text byte for byte, report field for field, ids

    for name, want in fixtures["pins"].items():  # pins: which error, which pin, Python's words
        got = by_name[name]
        assert (got["error"], got["pin"]) == (want["error"], want["pin"]), (name, got)
        if want["message"] is not None:
            assert got["message"] == want["message"], (name, got)

    bad = [r for r in by_name["bad input"]["results"]]
    assert [r.get("code") for r in bad] == [-5, -5, -6, -6, -1]
    assert all(not r["ok"] and "value" not in r for r in bad)
    assert "closed" in bad[-1]["message"]

    heap = results["heap"]
    assert heap[1] == heap[2], f"the wasm heap in use grew from one round to the next: {heap}"
    assert heap[1] == heap[0], f"memory not freed after the first round: {heap}"

    rnd = results["random"]
    assert rnd["math_random_calls"] == 0
    assert rnd["crypto_calls"] >= 2 * 32, "each unseeded sanitizer reads 32 key bytes from crypto.getRandomValues"
    assert rnd["seeded"] is False
    assert rnd["texts"][0] != rnd["texts"][1], "two unseeded sanitizers drew the same 40 tokens"


# ---- tests --------------------------------------------------------------------------------------------

def test_web_bundle_is_web_sized(web_bundle, dev_key):
    size = web_bundle.stat().st_size
    assert size <= WEB_BUNDLE_MAX, f"web bundle is {size:,} bytes"
    san = load_seeded(web_bundle)
    assert san.mechanism == "santext+" and san.epsilon == 3.0 and san.p == 0.3
    assert len(san.vocab) == 20001  # 20,000 GloVe words and <unk>
    assert san.manifest["params"]["head_size"] == 16


def test_wasm_in_node_matches_python_and_native_c(wasm_build, node, fixtures):
    start = time.perf_counter()
    done = subprocess.run([node, str(WEB_TESTS / "node_run.mjs"), str(wasm_build), str(fixtures["dir"])],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout)
    check_results(results, fixtures)
    print(f"node: {len(results['cases'])} cases x 2 rounds in {time.perf_counter() - start:.1f} s")


class _Server:
    """examples/web/serve.py's server on 127.0.0.1, with the test pages and fixtures mounted."""

    def __init__(self, bundle: Path, keys: list[bytes], fixture_dir: Path) -> None:
        spec = importlib.util.spec_from_file_location("ldptext_web_serve", ROOT / "examples" / "web" / "serve.py")
        serve = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(serve)
        self.httpd = serve.make_server(bundle, keys, mounts={"/tests/": WEB_TESTS, "/fixtures/": fixture_dir})
        assert self.httpd.server_address[0] == "127.0.0.1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def run_chromium(chromium: str, url: str) -> str:
    """The DOM of `url` after its scripts ran (chromium --headless --dump-dom), no outside network."""
    with tempfile.TemporaryDirectory() as profile:
        cmd = [chromium, "--headless", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
               # a throwaway profile; root in CI containers cannot use Chromium's sandbox
               f"--user-data-dir={profile}", "--no-sandbox",
               # nothing but the local server: no name resolution, no proxy, no background traffic
               "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--no-proxy-server",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-extensions", "--disable-default-apps",
               "--virtual-time-budget=600000", "--dump-dom", url]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_wasm_in_headless_chromium_and_the_example_page(wasm_build, chromium, fixtures, web_bundle, dev_key):
    start = time.perf_counter()
    with _Server(web_bundle, [dev_key], fixtures["dir"]) as base:
        dom = run_chromium(chromium, base + "/tests/check.html")
    m = re.search(r'<pre id="results">(.*?)</pre>', dom, re.S)
    assert m and m.group(1), "the page wrote no results:\n" + dom[-3000:]
    results = json.loads(html.unescape(m.group(1)))
    check_results(results, fixtures)

    ex = results["example"]
    assert ex["state"] == "ready", ex
    assert "Bundle verified" in ex["status"]
    assert not ex["error_shown"]
    from ldptext.santext import Sanitizer
    with Sanitizer.load(web_bundle) as san:
        n = len(san.tokenize(EXAMPLE_TEXT))
        want_report = san.privacy_report(n).to_dict()
    upload = ex["upload"]
    assert set(upload) == {"text", "privacy_report"}, "the upload holds the sanitized text and its report only"
    assert upload["text"] == ex["sanitized"] and ex["sanitized"].strip()
    assert upload["privacy_report"] == want_report
    assert EXAMPLE_TEXT not in json.dumps(upload, ensure_ascii=False)
    rows = dict(ex["report_rows"])
    assert rows["Tokens released"] == str(n)
    assert rows["Mechanism"] == "SanText+ (UMLDP)"
    assert any("number of tokens" in item for item in ex["not_protected"])
    assert any("1 − p = 0.7" in item for item in ex["not_protected"])
    assert any("Sensitive words are always re-drawn" in item for item in ex["protected"])
    print(f"chromium: {len(results['cases'])} cases x 2 rounds + the example page in "
          f"{time.perf_counter() - start:.1f} s")


# ---- TEM, CusText and CusText+ ------------------------------------------------------------------------
# The token-level mechanisms on the SanText engine, built by their Python builders, in the same
# runner: seeded output equal to the Python runtime's (backend "native": the C extension and the C
# library draw the same stream for a seed; the numpy fallback's stream is its own), the facts and
# reports the Python runtime states, pins on the new mechanism names, and a trusted signer's
# relabelled parameters or broken tables refused with the C library's code and ldp_strerror message.

FAMILY_DOCS = ["w1 w2 w3, w4!", "w5 w6 w7 w8 w9 w10 w11 " * 7, "", "w0", "w12\tw13\nw14  w15.",
               "unknown words w16 東京 w17"]
E_TEM_TABLES, E_CUSTEXT_TABLES = -120, -121


def _family_class(path: Path):
    from ldptext import bundle as B
    from ldptext.custext import CusTextSanitizer
    from ldptext.tem import TEMSanitizer
    mechanism = B.open_unverified(path)[0].mechanism
    return TEMSanitizer if mechanism == "tem" else CusTextSanitizer


def family_load(path: Path, **kw):
    """The Python runtime of a TEM / CusText(+) bundle, seeded runs on the C extension backend."""
    from ldptext.rng import SeededModeWarning
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        return _family_class(path).load(path, **kw)


def wasm_report(py_report: dict) -> dict:
    """What the wasm report must be for the Python runtime's PrivacyReport.to_dict(): the same
    fields, prose included (generated from the registry), sampled by the C library."""
    # the C extension's stream (it names itself "libldptext" where it runs on the C library), not
    # the numpy fallback's
    assert py_report["backend"] in ("native", "libldptext"), py_report["backend"]
    return {k: ("libldptext" if k == "backend" else v) for k, v in py_report.items()}


def family_python_ops(path: Path, seed: int, ops: list) -> list:
    """The Python runtime's results for the ops on a fresh sanitizer seeded with `seed` (one sanitize
    call per document, as the wasm side makes)."""
    return run_ops(family_load(path, seed=seed, backend="native"), ops, wasm_report)


def family_facts(path: Path) -> dict:
    """What LdpText must state for the bundle ('facts' op): the Python runtime's values."""
    from ldptext import bundle as B
    san = family_load(path)
    try:
        rep = san.privacy_report(10)
        tem = san.mechanism == "tem"
        plus = san.mechanism == "custext+"
        return {"mechanism": san.mechanism, "epsilon": san.epsilon,
                # header: epsilon0 0 (TEM, CusText), null for CusText+; p null where none is stated,
                # 0 for CusText+'s stop words
                "epsilon0": None if plus else 0.0, "p": 0.0 if plus else None,
                "dMax": san.d_max if tem else None,
                "gamma": san.gamma if tem else None, "beta": san.beta if tem else None,
                "k": None if tem else san.k, "similarity": None if tem else san.similarity,
                "ledgerUnit": san.ledger_unit, "worstCaseTokenEpsilon": rep.worst_case_token_epsilon,
                "worstCaseNote": rep.worst_case_note, "seeded": True,
                # and in ldp_bundle_info (LdpText.info)
                "info": {"key_id": san.key_id, "bundle_id": B.read_bundle(path).bundle_id,
                         "tolerance": rep.numeric_tolerance, "mechanism": san.mechanism,
                         "ledger_unit": san.ledger_unit}}
    finally:
        san.close()


def _resign(src: Path, dst: Path, edit=None, arrays_edit=None) -> Path:
    """src re-signed by the trusted developer key after an edit: a misused trusted key."""
    from conftest import edited_bundle
    from ldptext import keys
    return edited_bundle(src, dst, edit or (lambda m: None), arrays_edit, sign_key=keys.developer_key())


@pytest.fixture(scope="module")
def family(tmp_path_factory, dev_key, clib):
    """The token-family fixture directory (spec.json and its bundles) and what each case must give."""
    from conftest import random_word_embeddings
    from ldptext.errors import BundleError, BundleExpectationError, ParameterMismatchError
    from ldptext_precompute.custext.build import build_custext_bundle
    from ldptext_precompute.tem.build import build_tem_bundle

    d = tmp_path_factory.mktemp("wasm_family")
    emb = random_word_embeddings(47, 5, 8)
    stop = d / "stop.txt"
    stop.write_text("w0\nw1\nw2\nw7\n")
    bundles = {
        "tem.ldpb": build_tem_bundle(d / "tem.ldpb", embeddings="unused", loaded=emb, epsilon=3.0,
                                     gamma=2.4, head_size=6),
        "tem-beta.ldpb": build_tem_bundle(d / "tem-beta.ldpb", embeddings="unused", loaded=emb,
                                          epsilon=2.0, beta=0.05, head_size=6),
        "custext.ldpb": build_custext_bundle(d / "custext.ldpb", embeddings="unused", loaded=emb,
                                             epsilon=2.5, k=5, device="cpu"),
        "custext+.ldpb": build_custext_bundle(d / "custext+.ldpb", embeddings="unused", loaded=emb,
                                              epsilon=1.5, k=4, mechanism="custext+",
                                              non_sensitive=str(stop), similarity="cosine", device="cpu"),
    }
    trusted = [_b64(dev_key)]
    cases, expected, facts, refusals = [], {}, {}, {}

    for name, path in bundles.items():
        # (a) seeded documents, tokenize / detokenize, then sample_ids, against Python and native C
        ops = [["sanitize", t] for t in FAMILY_DOCS] + [["tokenize", FAMILY_DOCS[0]]]
        ids = family_python_ops(path, SEED, ops)[-1]
        ops += [["detokenize", ids]]
        py = family_python_ops(path, SEED, ops)
        c = c_texts(clib, path, dev_key, SEED, FAMILY_DOCS)
        assert c == [r["text"] for r in py[:len(FAMILY_DOCS)]], "native C and Python disagree"
        cases.append({"name": f"seeded {name}", "bundle": name, "keys": trusted, "seed": SEED, "ops": ops})
        expected[f"seeded {name}"] = py
        with family_load(path) as san:
            rows = np.tile(np.arange(san.n_rows), 13)[:600]
            rows = [int(i) for i in rows[san.valid_input[rows]]]
        sample_ops = [["sample_ids", rows]]
        cases.append({"name": f"sample_ids {name}", "bundle": name, "keys": trusted, "seed": SEED + 1,
                      "ops": sample_ops})
        expected[f"sample_ids {name}"] = family_python_ops(path, SEED + 1, sample_ops)
        # (b) the facts
        cases.append({"name": f"facts {name}", "bundle": name, "keys": trusted, "seed": SEED,
                      "ops": [["facts", None]]})
        facts[f"facts {name}"] = family_facts(path)

    # (c) pins on the new names: each outcome is the Python runtime's for the same pins
    first = [["sanitize", FAMILY_DOCS[0]]]
    pin_table = [  # (label, bundle, pins, 0: opens, else (code, pin))
        ("tem on tem", "tem.ldpb", {"mechanism": "tem"}, 0),
        ("santext on tem", "tem.ldpb", {"mechanism": "santext"}, (E_EXPECT["mechanism"], "mechanism")),
        ("santext or santext+ on tem", "tem.ldpb", {"mechanism": ["santext+", "santext"]},
         (E_EXPECT["mechanism"], "mechanism")),
        ("cmp on tem (never opens here)", "tem.ldpb", {"mechanism": "cmp"}, (E_EXPECT["mechanism"], "mechanism")),
        ("tem, epsilon_max 2, on eps 3", "tem.ldpb", {"mechanism": "tem", "epsilon_max": 2},
         (E_EXPECT["epsilon_max"], "epsilon_max")),
        ("custext on custext", "custext.ldpb", {"mechanism": "custext"}, 0),
        ("custext+ on custext", "custext.ldpb", {"mechanism": "custext+"}, (E_EXPECT["mechanism"], "mechanism")),
        ("custext+ or tem on custext+", "custext+.ldpb", {"mechanism": ["tem", "custext+"]}, 0),
        ("tem or custext on custext+", "custext+.ldpb", {"mechanism": ["tem", "custext"]},
         (E_EXPECT["mechanism"], "mechanism")),
    ]
    for label, name, pins, want in pin_table:
        case = f"pin: {label}"
        try:
            got = family_load(bundles[name], seed=SEED, backend="native", expect=pins)
        except BundleExpectationError as e:
            got = e
        cases.append({"name": case, "bundle": name, "keys": trusted, "seed": SEED, "expect": pins,
                      "ops": first})
        if want == 0:
            assert not isinstance(got, Exception), (label, got)
            got.close()
            expected[case] = family_python_ops(bundles[name], SEED, first)
        else:
            assert isinstance(got, BundleExpectationError), (label, got)
            expected[case] = want[0]
            refusals[case] = {"error": "LdpTextExpectationError", "pin": want[1], "message": str(got)}

    # (d) a trusted signer's relabelled parameters (-100) and broken tables (-120 / -121), pinned
    # or not: refused by the native C library and the Python runtime alike
    def scale_epsilon(f):
        return lambda m: m["params"].update(epsilon=m["params"]["epsilon"] * f)

    def set_array(name_, fn):
        def edit(arrays):
            arrays[name_] = fn(arrays[name_].copy())
        return edit

    bad = [  # (label, source, manifest edit, arrays edit, expect, code)
        ("relabelled epsilon tem", "tem.ldpb", scale_epsilon(1.5), None, None, E_PARAMETER_MISMATCH),
        ("relabelled epsilon tem, pinned tem", "tem.ldpb", scale_epsilon(1.5), None,
         {"mechanism": "tem", "epsilon_max": 5}, E_PARAMETER_MISMATCH),
        ("relabelled epsilon tem-beta", "tem-beta.ldpb", scale_epsilon(0.5), None, None, E_PARAMETER_MISMATCH),
        ("relabelled gamma tem", "tem.ldpb", lambda m: m["params"].update(gamma=m["params"]["gamma"] * 1.01),
         None, None, E_PARAMETER_MISMATCH),
        ("relabelled epsilon custext", "custext.ldpb", scale_epsilon(2.0), None, None, E_PARAMETER_MISMATCH),
        ("relabelled epsilon custext+", "custext+.ldpb", scale_epsilon(0.5), None,
         {"mechanism": "custext+"}, E_PARAMETER_MISMATCH),
        ("tem tables keep a row", "tem.ldpb", None,
         set_array("keep_row", lambda a: np.where(np.arange(a.size) == 5, 1, a).astype(a.dtype)), None,
         E_TEM_TABLES),
        ("custext groups merged", "custext.ldpb", None,
         set_array("group_id", lambda a: np.where(a == 0, 1, a).astype(np.int32)), None, E_CUSTEXT_TABLES),
    ]
    for i, (label, src, edit, arrays_edit, pins, code) in enumerate(bad):
        fname = f"bad-{i}.ldpb"
        path = _resign(bundles[src], d / fname, edit, arrays_edit)
        rc, b = clib.open(path, [dev_key])
        if rc == 0:
            clib.close(b)
        assert rc == code, (label, clib.strerror(rc))
        with pytest.raises(ParameterMismatchError if code == E_PARAMETER_MISMATCH else BundleError):
            family_load(path, backend="fallback")
        case = f"refuse {label}"
        cases.append({"name": case, "bundle": fname, "keys": trusted, "seed": SEED, "expect": pins,
                      "ops": first})
        expected[case] = code
        refusals[case] = {"error": "LdpTextError", "pin": None, "message": clib.strerror(rc)}

    spec = {"cases": cases, "rounds": 2}
    (d / "spec.json").write_text(json.dumps(spec))
    return {"dir": d, "bundles": bundles, "expected": expected, "facts": facts, "refusals": refusals}


def check_family(results: dict, family: dict) -> None:
    assert "fatal" not in results, results.get("fatal")
    by_name = {c["name"]: c for c in results["cases"]}
    assert set(by_name) == set(family["expected"]) | set(family["facts"])
    for name, want in family["expected"].items():
        got = by_name[name]
        if isinstance(want, int):  # a refusal at open, with the C library's code
            assert got["ok"] is False and got["at"] == "open", (name, got)
            assert got["code"] == want, (name, got)
            r = family["refusals"][name]
            assert (got["error"], got["pin"], got["message"]) == (r["error"], r["pin"], r["message"]), name
            continue
        assert got["ok"], (name, got)
        values = []
        for r in got["results"]:
            assert r["ok"], (name, r)
            values.append(r["value"])
        assert values == want, name  # text byte for byte, report field for field, ids
    for name, want in family["facts"].items():
        got = by_name[name]
        assert got["ok"] and got["results"][0]["ok"], (name, got)
        f = dict(got["results"][0]["value"])
        info = f.pop("info")
        want = dict(want)
        want_info = want.pop("info")
        assert f == want, name
        assert {k: info[k] for k in want_info} == want_info, name
    heap = results["heap"]
    assert heap[0] == heap[1] == heap[2], f"the wasm heap in use changed over the rounds: {heap}"


def test_token_family_in_node_matches_python(wasm_build, node, family):
    start = time.perf_counter()
    done = subprocess.run([node, str(WEB_TESTS / "node_run.mjs"), str(wasm_build), str(family["dir"])],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout)
    check_family(results, family)
    print(f"node: {len(results['cases'])} TEM / CusText cases x 2 rounds in {time.perf_counter() - start:.1f} s")


def test_token_family_in_headless_chromium_matches_python(wasm_build, chromium, family, dev_key):
    start = time.perf_counter()
    with _Server(family["bundles"]["tem.ldpb"], [dev_key], family["dir"]) as base:
        dom = run_chromium(chromium, base + "/tests/check.html")
    m = re.search(r'<pre id="results">(.*?)</pre>', dom, re.S)
    assert m and m.group(1), "the page wrote no results:\n" + dom[-3000:]
    results = json.loads(html.unescape(m.group(1)))
    check_family(results, family)
    assert results["example"] is None
    print(f"chromium: {len(results['cases'])} TEM / CusText cases x 2 rounds in "
          f"{time.perf_counter() - start:.1f} s")
