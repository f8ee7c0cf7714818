"""The npm package (``make npm``: build/npm/ldptext-VERSION.tgz, bindings/npm/) installed as a user
installs it: ``npm install --offline`` of the tarball into an empty folder, then

* node: ``import { LdpText } from 'ldptext'`` resolves through the package's exports map, the .wasm
  is found by the package itself, a seeded sanitizer's text and report equal the Python runtime's
  for the same seed, a stranger's key and a flipped byte are refused with the C library's codes,
  close() frees the wasm heap; the snippet of docs/web.md runs as written (bundle path and key
  filled in);
* tsc (Debian's, ``--strict``): a program using the declarations type-checks, and one that misuses a
  report field does not (the types are real, not ``any``);
* headless Chromium, a page served on 127.0.0.1 from the install folder, the bare specifier mapped
  to the exports map's ``browser`` entry: the same seeded output as Python.

Skipped when emcc, node, npm, tsc or chromium is missing; with LDPTEXT_REQUIRE_NPM=1 (CI) their
absence fails instead."""
from __future__ import annotations

import base64
import functools
import html
import http.server
import json
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import build_lock, build_tiny_bundle, load_seeded, require_tool

ROOT = Path(__file__).resolve().parents[1]
SEED = 20240611
TEXTS = ["w1 w2 w3 w4 w5 w6 w7 w8", "W12, w13! w14?", "w40 unknownword w41", "", "wé ü 漢字 🙂 w5"]
E_UNTRUSTED_KEY = -43  # native/include/ldptext.h


def _version() -> str:
    m = re.search(r'^__version__ = "(.+)"$', (ROOT / "sdk" / "ldptext" / "__init__.py").read_text(), re.M)
    assert m
    return m.group(1)


def _tool(names: list[str], why: str) -> str:
    return require_tool(names, why, "LDPTEXT_REQUIRE_NPM")


@pytest.fixture(scope="module")
def node() -> str:
    return _tool(["node", "nodejs"], "the package runs in node (Debian: nodejs; scripts/system-deps.sh web)")


@pytest.fixture(scope="module")
def installed(node, tmp_path_factory) -> Path:
    """make npm, then the tarball installed offline into an empty folder; returns that folder."""
    _tool(["emcc"], "make npm builds the wasm module (Debian: emscripten)")
    npm = _tool(["npm"], "make npm runs npm pack (Debian: npm)")
    app = tmp_path_factory.mktemp("npm_app")
    tgz = ROOT / "build" / "npm" / f"ldptext-{_version()}.tgz"
    with build_lock():  # build/npm/ is removed and packed again by every make npm: copied before another
        done = subprocess.run(["make", "-s", "npm"], cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        assert tgz.is_file(), f"make npm did not produce {tgz.name}"
        shutil.copyfile(tgz, app / tgz.name)
    done = subprocess.run([npm, "install", "--offline", "--no-audit", "--no-fund", f"./{tgz.name}"],
                          cwd=app, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    pkg = json.loads((app / "node_modules" / "ldptext" / "package.json").read_text())
    assert pkg["name"] == "ldptext" and pkg["version"] == _version() and pkg["type"] == "module"
    return app


@pytest.fixture(scope="module")
def bundle(installed, ldptext_home) -> dict:
    """A tiny SanText+ bundle in the app folder, the trusted key, and Python's seeded results."""
    from ldptext import keys
    path = build_tiny_bundle(installed / "tiny.ldpb", mechanism="santext+", p=0.3, w=0.7)
    key = base64.b64encode(keys.public_bytes(keys.developer_key().public_key())).decode()
    (installed / "key.txt").write_text(key)
    san = load_seeded(path, seed=SEED)
    try:
        want = []
        for t in TEXTS:
            r = san.sanitize(t)
            want.append({"text": r.text, "report": r.report.to_dict()})
    finally:
        san.close()
    flipped = bytearray(path.read_bytes())
    flipped[len(flipped) // 2] ^= 0x01
    (installed / "flipped.ldpb").write_bytes(bytes(flipped))
    return {"path": path, "key": key, "want": want}


# what the app does, in node and in the page: ``load(name)`` gives a file's bytes or text
APP_BODY = """
const key = (await load('key.txt', 'text')).trim();
const bytes = await load('tiny.ldpb');
const out = { texts: TEXTS.length };
const heap0 = await heapInUse();
const san = await LdpText.open(bytes, [key], { seed: SEED });
out.results = TEXTS.map((t) => san.sanitize(t));
out.facts = { mechanism: san.mechanism, epsilon: san.epsilon, p: san.p, seeded: san.seeded };
san.close();
out.closed = san.closed;
out.heap = [heap0, await heapInUse()];
const refuse = async (data, keys) => {
  try { (await LdpText.open(data, keys)).close(); return null; }
  catch (e) { return { isError: e instanceof LdpTextError, code: e.code }; }
};
out.stranger = await refuse(bytes, [new Uint8Array(32).fill(7)]);
out.flipped = await refuse(await load('flipped.ldpb'), [key]);
out.untrustedCode = LDP_E_UNTRUSTED_KEY;
"""
IMPORT = "import { LdpText, LdpTextError, heapInUse, LDP_E_UNTRUSTED_KEY } from 'ldptext';\n"


def _app_js(header: str, footer: str) -> str:
    """The app for node or the page: ``header`` defines ``load``, ``footer`` reports ``out``."""
    return (IMPORT + header + f"const TEXTS = {json.dumps(TEXTS, ensure_ascii=False)};\n"
            f"const SEED = {SEED};\n" + APP_BODY + footer)


def _check(out: dict, bundle: dict) -> None:
    assert [r["text"] for r in out["results"]] == [w["text"] for w in bundle["want"]], "text differs from Python"
    assert [r["report"] for r in out["results"]] == [w["report"] for w in bundle["want"]], "report differs"
    assert all(r["report"]["seeded"] for r in out["results"])
    assert out["facts"] == {"mechanism": "santext+", "epsilon": 2.0, "p": 0.3, "seeded": True}
    assert out["closed"] is True
    assert out["heap"][0] == out["heap"][1], "close() left wasm memory behind"
    assert out["stranger"] == {"isError": True, "code": out["untrustedCode"]}
    assert out["untrustedCode"] == E_UNTRUSTED_KEY
    assert out["flipped"] is not None and out["flipped"]["isError"] and out["flipped"]["code"] < 0


def test_npm_package_in_node_matches_python(installed, bundle, node):
    header = ("import { readFile } from 'node:fs/promises';\n"
              "const load = async (name, kind) => kind === 'text' ? readFile(name, 'utf8') "
              ": new Uint8Array(await readFile(name));\n")
    (installed / "app.mjs").write_text(_app_js(header, "console.log(JSON.stringify(out));\n"))
    done = subprocess.run([node, "app.mjs"], cwd=installed, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    _check(json.loads(done.stdout.strip().splitlines()[-1]), bundle)


def _doc_snippet() -> str:
    """The first ```js block of docs/web.md after the line marking it as tested."""
    text = (ROOT / "docs" / "web.md").read_text()
    m = re.search(r"<!-- tested by tests/test_npm.py -->\s*```js\n(.*?)```", text, re.S)
    assert m, "docs/web.md has no tested snippet"
    return m.group(1)


def test_docs_snippet_runs_in_node(installed, bundle, node):
    code = _doc_snippet()
    assert "'web.ldpb'" in code and "'PUBLISHER_KEY_BASE64'" in code
    code = code.replace("'web.ldpb'", "'tiny.ldpb'").replace("'PUBLISHER_KEY_BASE64'", json.dumps(bundle["key"]))
    (installed / "snippet.mjs").write_text(code)
    done = subprocess.run([node, "snippet.mjs"], cwd=installed, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "epsilon 2 per token" in done.stdout, done.stdout[-2000:]
    assert "untrusted" in done.stdout, done.stdout[-2000:]


TS_GOOD = """
import { LdpText, LdpTextError, LdpTextExpectationError, LDP_E_UNTRUSTED_KEY, version } from 'ldptext';
import type { Notion, Report, PrivacyReport, Sanitized } from 'ldptext';

export async function run(bytes: Uint8Array, key: string): Promise<string> {
  const v: string = await version();
  let san: LdpText;
  try {
    san = await LdpText.open(bytes, [key], { expect: { mechanism: 'santext+', epsilon_max: 3 } });
  } catch (e) {
    if (e instanceof LdpTextExpectationError) return e.pin;
    if (e instanceof LdpTextError && e.code === LDP_E_UNTRUSTED_KEY) return 'untrusted';
    throw e;
  }
  const out: Sanitized = san.sanitize('some text');
  const r: Report = out.report;
  const eps: number = r.epsilon;
  const n: number = r.n_tokens;
  const seeded: boolean = r.seeded;
  const worst: number | null = r.worst_case_token_epsilon;
  const pr: PrivacyReport = r;
  const notion: Notion = pr.notion;
  const p = pr.parameters.p;
  void p; void notion;
  const note: string = san.worstCaseNote;
  san.close();
  return `${v} ${out.text} ${eps} ${n} ${seeded} ${worst} ${note} ${san.closed}`;
}
"""
TS_BAD = """
import { LdpText } from 'ldptext';
export async function run(bytes: Uint8Array): Promise<number> {
  const san = await LdpText.open(bytes, ['k']);
  const t: number = san.sanitize('x').text;
  return san.sanitize('x').report.n_tokenz + t;
}
"""


def test_typescript_declarations_check_with_tsc(installed):
    tsc = _tool(["tsc"], "the declarations are checked by Debian's TypeScript (node-typescript)")
    args = [tsc, "--noEmit", "--strict", "--target", "es2022", "--module", "node16", "--moduleResolution",
            "node16"]
    (installed / "good.mts").write_text(TS_GOOD)
    done = subprocess.run(args + ["good.mts"], cwd=installed, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    (installed / "bad.mts").write_text(TS_BAD)
    done = subprocess.run(args + ["bad.mts"], cwd=installed, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "n_tokenz" in done.stdout and "TS2322" in done.stdout, done.stdout[-3000:]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".wasm": "application/wasm", ".js": "text/javascript", ".mjs": "text/javascript"}

    def log_message(self, *args) -> None:
        pass


def test_npm_package_in_headless_chromium(installed, bundle):
    chromium = _tool(["chromium", "chromium-browser", "google-chrome"],
                     "the page test needs headless Chromium (Debian: chromium)")
    from test_wasm import run_chromium

    exports = json.loads((installed / "node_modules" / "ldptext" / "package.json").read_text())["exports"]
    entry = "./node_modules/ldptext/" + exports["."]["browser"].removeprefix("./")
    header = ("const load = async (name, kind) => { const r = await fetch(name); "
              "return kind === 'text' ? r.text() : new Uint8Array(await r.arrayBuffer()); };\n")
    page = ("<!doctype html><meta charset=utf-8>\n"
            f'<script type="importmap">{json.dumps({"imports": {"ldptext": entry}})}</script>\n'
            '<pre id="results"></pre>\n<script type="module">\n'
            + _app_js(header, "document.getElementById('results').textContent = JSON.stringify(out);\n")
            + "</script>\n")
    (installed / "index.html").write_text(page)
    handler = functools.partial(_Quiet, directory=str(installed))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        dom = run_chromium(chromium, f"http://127.0.0.1:{httpd.server_address[1]}/index.html")
    finally:
        httpd.shutdown()
        httpd.server_close()
    m = re.search(r'<pre id="results">(.*?)</pre>', dom, re.S)
    assert m and m.group(1), "the page wrote no results:\n" + dom[-3000:]
    _check(json.loads(html.unescape(m.group(1))), bundle)
