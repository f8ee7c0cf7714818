"""Run a node script against the wasm build's web wrapper (``native/build/wasm/ldptext-web.js``): the
tests that compare its verdicts and reports with Python's and C's (test_verbatim_tail.py,
test_weak_privacy.py, test_conformance_corpus.py) share the build, the prelude and the run."""
from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any


def run_node_script(body: str, script: Path, key: bytes, *, timeout: int = 120) -> Any:
    """Build the wasm wrapper where stale (``make -C native/wasm``), then run ``body`` in node after a
    prelude that imports ``readFile``, the wrapper as ``api`` and ``key`` (the base64 of ``key``, a
    trusted public key); ``body`` writes one JSON value to stdout, which is returned parsed."""
    from conftest import build_lock
    from test_wasm import WASM_BUILD, _tool
    node = _tool(["node", "nodejs"], "the wasm tests run in node")
    _tool(["emcc"], "the browser build needs emscripten")
    with build_lock():
        done = subprocess.run(["make", "-s", "-C", str(WASM_BUILD.parents[2] / "native" / "wasm")],
                              capture_output=True, text=True)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    script.write_text(f"""
import {{ readFile }} from 'node:fs/promises';
import {{ pathToFileURL }} from 'node:url';
const api = await import(pathToFileURL({json.dumps(str(WASM_BUILD / 'ldptext-web.js'))}).href);
const key = {json.dumps(base64.b64encode(key).decode())};
{body.lstrip()}""", encoding="utf-8")
    done = subprocess.run([node, str(script)], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)
