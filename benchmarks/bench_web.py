"""Per-call speed of the web build (WebAssembly, ``ldptext-web.js``) against the C library, on
50-word documents, in node and in headless Chromium, side by side in one run.

Documents: consecutive 50-word pieces of the 300 English news documents shipped with gensim
(``lee_background.cor``, bench_santext.py's ``english_documents``), ``--docs`` of them (300).
Bundles: bench_santext.py's (``CONFIGS``: MiniLM with the frequency split w = 0.9 and with the
default split, GloVe-50k w = 0.9; SanText+, p = 0.3), built by its ``ensure_bundle`` into the same
``--workdir`` and reused from there; ``--epsilons`` (3).

One call = one document in, its text and its privacy report out:

* **C**: ``ldp_sanitize`` (with an ``ldp_report``) then ``ldp_free``, in a small C driver compiled
  here against ``native/build/libldptext.so``; the bundle opened with ``ldp_bundle_open_expect``
  (the weak-privacy opt-in: the bench's ε = 10-15 bundles are near identity), the native open.
* **node**: ``LdpText.sanitize(text)`` of ``native/build/wasm/ldptext-web.js`` (a string in,
  ``{text, report}`` out), the bytes of the bundle given to ``LdpText.open``.
* **Chromium**: the same module in a headless Chromium page served from 127.0.0.1 by this script
  (nothing else reachable; cross-origin isolated, so ``performance.now()`` has 5 µs steps, not
  100); the page asks the server for each round and posts its times back.

Timing: wall clock (a browser has no CPU clock); with ``--cpu-time`` C and node time CPU time
instead (the C thread's clock, node's ``process.cpuUsage``, 1 µs steps), Chromium still wall. Each
runtime opens every bundle and sanitizes every document once first (every row the documents need is
then checked, and the engine has compiled its optimizing tier), then waits. The runs go in rounds,
C, node, Chromium in turn (each round starting with the next side), each round ``--passes`` passes
over the documents in chunks of ``--chunk``; a chunk's time is its best over every pass and round,
and the per-call time is the sum of the chunks' bests over the number of documents. A chunk is long
enough for the browser's clock (0.2-2 ms) and short enough to fall between two preemptions of a
shared machine. The ratio is each web runtime's per-call time over C's from the same run.
``--wasm-dir`` (repeatable, ``LABEL=DIR``) adds another build of the module to compare in node and
Chromium (A/B in the same rounds).

Usage: python benchmarks/bench_web.py [--epsilons 3] [--bundles KEYS] [--docs 300] [--words 50]
       [--rounds 5] [--passes 4] [--chunk 10] [--no-chromium] [--cpu-time] [--wasm-dir LABEL=DIR]
       [--workdir DIR]
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_santext  # noqa: E402  (the bundles, their cache and the documents)

ROOT = Path(__file__).resolve().parents[1]
LIB_DIR = ROOT / "native" / "build"
WASM_DIR = ROOT / "native" / "build" / "wasm"
WASM_FILES = ("ldptext-web.js", "ldptext.js", "ldptext.wasm")
TARGET = 1.5  # the goal: the web build per call within 1.5x of C


def documents(n: int, words: int) -> list[str]:
    """``n`` documents of ``words`` words each: the Lee corpus's words in order, cut into pieces."""
    flat = " ".join(bench_santext.english_documents()).split()
    docs = [" ".join(flat[i:i + words]) for i in range(0, len(flat) - words + 1, words)]
    if len(docs) < n:
        raise SystemExit(f"the corpus has {len(docs)} documents of {words} words, fewer than {n}")
    return docs[:n]


# ---- C: a small driver over libldptext.so -----------------------------------------------------

C_DRIVER = r"""
/* bench_web.py's C side: cdrv KEY_B64 DOCS_FILE CHUNK BUNDLE...; documents NUL-separated in
 * DOCS_FILE; the thread's CPU clock where LDP_BENCH_CPU is set, else the monotonic one. Opens
 * every bundle, sanitizes every document once, prints "ready"; then for each line "P" on stdin
 * runs P passes and prints one JSON line: per bundle, each chunk's best us. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ldptext.h"

static clockid_t clock_id = CLOCK_MONOTONIC;

static double now(void) {
    struct timespec t;
    clock_gettime(clock_id, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int one(ldp_sanitizer *san, const char *doc, size_t len) {
    char *out;
    size_t n;
    ldp_report rep = LDP_REPORT_INIT;
    int rc = ldp_sanitize(san, doc, len, &out, &n, &rep);
    if (rc == LDP_OK) ldp_free(out);
    return rc;
}

int main(int argc, char **argv) {
    uint8_t key[32];
    FILE *f;
    char *buf, line[64];
    long size;
    size_t n = 0, i, chunk, nb, nc, b, c;
    const char **doc;
    size_t *len;
    ldp_sanitizer **san;
    if (argc < 5 || ldp_public_key_parse(argv[1], strlen(argv[1]), key) != LDP_OK) return 2;
    if (getenv("LDP_BENCH_CPU") != NULL) clock_id = CLOCK_THREAD_CPUTIME_ID;
    f = fopen(argv[2], "rb");
    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0) return 2;
    rewind(f);
    buf = malloc((size_t)size + 1);
    if (buf == NULL || fread(buf, 1, (size_t)size, f) != (size_t)size) return 2;
    fclose(f);
    buf[size] = 0;
    for (i = 0; i <= (size_t)size; i++) n += buf[i] == 0;
    doc = malloc(n * sizeof *doc);
    len = malloc(n * sizeof *len);
    for (i = 0, n = 0; i < (size_t)size; i += len[n++] + 1) {
        doc[n] = buf + i;
        len[n] = strlen(buf + i);
    }
    chunk = (size_t)atoi(argv[3]);
    nb = (size_t)argc - 4;
    nc = (n + chunk - 1) / chunk;
    san = malloc(nb * sizeof *san);
    for (b = 0; b < nb; b++) {
        ldp_bundle *bundle;
        ldp_expect e = LDP_EXPECT_INIT;
        int rc;
        e.allow_weak_privacy = 1;
        rc = ldp_bundle_open_expect(argv[4 + b], (const uint8_t(*)[32])key, 1, &e, &bundle);
        if (rc == LDP_OK) rc = ldp_sanitizer_new(bundle, &san[b]);
        for (i = 0; rc == LDP_OK && i < n; i++) rc = one(san[b], doc[i], len[i]);
        if (rc != LDP_OK) {
            fprintf(stderr, "%s: %s\n", argv[4 + b], ldp_strerror(rc));
            return 1;
        }
    }
    printf("ready\n");
    fflush(stdout);
    while (fgets(line, sizeof line, stdin) != NULL) {
        int passes = atoi(line), p;
        double *best = malloc(nb * nc * sizeof *best);
        for (i = 0; i < nb * nc; i++) best[i] = 1e300;
        for (p = 0; p < passes; p++)
            for (b = 0; b < nb; b++)
                for (c = 0; c < nc; c++) {
                    double t = now();
                    for (i = c * chunk; i < n && i < (c + 1) * chunk; i++)
                        if (one(san[b], doc[i], len[i]) != LDP_OK) return 1;
                    t = now() - t;
                    if (t < best[b * nc + c]) best[b * nc + c] = t;
                }
        printf("[");
        for (b = 0; b < nb; b++) {
            printf("%s[", b ? "," : "");
            for (c = 0; c < nc; c++) printf("%s%.3f", c ? "," : "", best[b * nc + c] * 1e6);
            printf("]");
        }
        printf("]\n");
        fflush(stdout);
        free(best);
    }
    return 0;
}
"""

# ---- the web side: one timing core for node and Chromium ----------------------------------------

# setup: open every bundle, sanitize every document once (rows checked, optimizing tier compiled);
# run: `passes` passes, per bundle each chunk's best time in us
WEB_CORE = r"""
export async function setup(LdpText, bundles, key, docs) {
  const sans = [];
  for (const bytes of bundles) {
    const san = await LdpText.open(bytes, [key], { allowWeakPrivacy: true });
    for (const d of docs) san.sanitize(d);
    sans.push(san);
  }
  return sans;
}

// cpu: node's process CPU time (us steps) instead of the wall clock
export function run(sans, docs, passes, chunk, cpu = false) {
  const clock = cpu ? () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; }
    : () => performance.now();
  const nc = Math.ceil(docs.length / chunk);
  const best = sans.map(() => new Array(nc).fill(Infinity));
  let sink = 0;
  for (let p = 0; p < passes; p++) {
    sans.forEach((san, b) => {
      for (let c = 0; c < nc; c++) {
        const end = Math.min(docs.length, (c + 1) * chunk);
        const t = clock();
        for (let i = c * chunk; i < end; i++) sink += san.sanitize(docs[i]).report.n_tokens;
        const dt = (clock() - t) * 1000;
        if (dt < best[b][c]) best[b][c] = dt;
      }
    });
  }
  if (sink < 0) throw new Error('unreachable');
  return best;
}
"""

NODE_DRIVER = r"""
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { setup, run } from './core.mjs';
const [modPath, key, docsPath, chunk, ...bundlePaths] = process.argv.slice(2);
const { LdpText } = await import(pathToFileURL(modPath).href);
const docs = JSON.parse(readFileSync(docsPath, 'utf8'));
const sans = await setup(LdpText, bundlePaths.map((p) => readFileSync(p)), key, docs);
console.log('ready');
for await (const line of createInterface({ input: process.stdin })) {
  console.log(JSON.stringify(run(sans, docs, Number(line), Number(chunk), process.env.LDP_BENCH_CPU !== undefined)));
}
"""

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>ldptext bench_web</title>
<script type="module">
import { setup, run } from '/core.mjs';
const post = (path, body) => fetch(path, { method: 'POST', body: JSON.stringify(body) });
try {
  const config = await (await fetch('/config.json')).json();
  const { LdpText } = await import(config.module);
  const docs = await (await fetch('/docs.json')).json();
  const bundles = [];
  for (let b = 0; b < config.bundles; b++) {
    bundles.push(new Uint8Array(await (await fetch(`/bundle/${b}`)).arrayBuffer()));
  }
  const sans = await setup(LdpText, bundles, config.key, docs);
  bundles.length = 0;
  await post('/ready', { isolated: globalThis.crossOriginIsolated === true, agent: navigator.userAgent });
  for (;;) {
    const cmd = await (await fetch('/next')).json();
    if (cmd.stop) break;
    await post('/result', run(sans, docs, cmd.passes, config.chunk));
  }
} catch (e) {
  await post('/error', { message: String(e && e.stack || e) });
}
</script></head><body>bench_web</body></html>
"""

TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript", ".mjs": "text/javascript",
         ".json": "application/json", ".wasm": "application/wasm"}


class _PageServer:
    """The Chromium side's server on 127.0.0.1: the page, the timing core, the module's files
    (under /web/<label>/), the documents, the bundles; /next hands out rounds, /ready, /result and
    /error come back. Cross-origin isolated (COOP + COEP) for the 5 us clock."""

    def __init__(self, wasm_dirs: dict[str, Path], docs: list[str], bundles: list[Path], key: str,
                 chunk: int, label: str) -> None:
        self.commands: queue.Queue = queue.Queue()
        self.replies: queue.Queue = queue.Queue()
        files: dict[str, bytes | Path] = {
            "/": PAGE.encode(), "/core.mjs": WEB_CORE.encode(), "/docs.json": json.dumps(docs).encode(),
            "/config.json": json.dumps({"module": f"/web/{label}/ldptext-web.js", "key": key,
                                        "bundles": len(bundles), "chunk": chunk}).encode()}
        for name, d in wasm_dirs.items():
            files.update({f"/web/{name}/{f}": d / f for f in WASM_FILES})
        files.update({f"/bundle/{i}": p for i, p in enumerate(bundles)})
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, data: bytes, ctype: str) -> None:
                self.send_response(HTTPStatus.OK)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Cache-Control", "no-store")
                self.send_header("Cross-Origin-Opener-Policy", "same-origin")
                self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
                self.send_header("Cross-Origin-Resource-Policy", "same-origin")
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                path = self.path.split("?", 1)[0]
                if path == "/next":
                    self._send(json.dumps(server.commands.get()).encode(), "application/json")
                    return
                content = files.get(path)
                if content is None:
                    self.send_error(HTTPStatus.NOT_FOUND)
                    return
                data = content.read_bytes() if isinstance(content, Path) else content
                suffix = Path(content.name).suffix if isinstance(content, Path) else Path(path).suffix
                self._send(data, TYPES.get(suffix or ".html", "application/octet-stream"))

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.replies.put((self.path, body))
                self._send(b"{}", "application/json")

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"

    def reply(self, timeout: float) -> tuple[str, object]:
        path, body = self.replies.get(timeout=timeout)
        if path == "/error":
            raise RuntimeError(f"Chromium page: {body['message']}")
        return path, body

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Side:
    """One runtime holding its bundles open: ``start`` (opens and warms), ``run(passes)`` (per
    bundle each chunk's best µs), ``stop``."""

    name = ""

    def start(self) -> None: ...
    def run(self, passes: int) -> list[list[float]]: ...
    def stop(self) -> None: ...


class PipeSide(Side):
    """A child process speaking the line protocol of the C and node drivers."""

    def __init__(self, name: str, cmd: list[str]) -> None:
        self.name, self.cmd, self.proc = name, cmd, None

    def start(self) -> None:
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"{self.name}: did not start ({line!r}, exit {self.proc.poll()})")

    def run(self, passes: int) -> list[list[float]]:
        self.proc.stdin.write(f"{passes}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.name}: exited ({self.proc.wait()})")
        return json.loads(line)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


class ChromiumSide(Side):
    def __init__(self, name: str, chromium: str, server_args: tuple, profile: Path) -> None:
        self.name, self.chromium, self.server_args, self.profile = name, chromium, server_args, profile
        self.server = self.proc = None
        self.isolated = None

    def start(self) -> None:
        self.server = _PageServer(*self.server_args)
        cmd = [self.chromium, "--headless", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
               f"--user-data-dir={self.profile}", "--no-sandbox",
               # nothing but the local server: no name resolution, no proxy, no background traffic
               "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--no-proxy-server",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-extensions", "--disable-default-apps",
               # a hidden page's timers and tasks are not throttled
               "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
               "--disable-backgrounding-occluded-windows", self.server.url]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        path, body = self.server.reply(timeout=900)
        if path != "/ready":
            raise RuntimeError(f"{self.name}: unexpected {path}")
        self.isolated = body["isolated"]

    def run(self, passes: int) -> list[list[float]]:
        self.server.commands.put({"passes": passes})
        path, body = self.server.reply(timeout=900)
        if path != "/result":
            raise RuntimeError(f"{self.name}: unexpected {path}")
        return body

    def stop(self) -> None:
        if self.server is not None:
            self.server.commands.put({"stop": True})
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self.server is not None:
            self.server.close()


def build_driver(tmp: Path) -> Path:
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")
    if cc is None or not (LIB_DIR / "libldptext.so").exists():
        raise SystemExit("needs a C compiler and native/build/libldptext.so (make libldptext)")
    src, exe = tmp / "cdrv.c", tmp / "cdrv"
    src.write_text(C_DRIVER)
    subprocess.run([cc, "-O2", "-I", str(ROOT / "native" / "include"), str(src), "-L", str(LIB_DIR),
                    "-lldptext", f"-Wl,-rpath,{LIB_DIR}", "-o", str(exe)], check=True)
    return exe


def fmt_ratio(r: float) -> str:
    return f"{r:.2f}×" + ("" if r <= TARGET else " (missed)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epsilons", default="3", help="comma-separated ε values")
    ap.add_argument("--bundles", default=",".join(c[0] for c in bench_santext.CONFIGS),
                    help="comma-separated bundles: " + ", ".join(c[0] for c in bench_santext.CONFIGS))
    ap.add_argument("--docs", type=int, default=300, help="documents")
    ap.add_argument("--words", type=int, default=50, help="words per document")
    ap.add_argument("--rounds", type=int, default=5, help="rounds (C, node, Chromium in turn)")
    ap.add_argument("--passes", type=int, default=4, help="passes over the documents per round")
    ap.add_argument("--chunk", type=int, default=10, help="documents per timed chunk")
    ap.add_argument("--no-chromium", dest="chromium", action="store_false", help="node and C only")
    ap.add_argument("--cpu-time", action="store_true",
                    help="C and node time CPU time, not wall time (Chromium: wall time still)")
    ap.add_argument("--wasm-dir", action="append", default=[], metavar="LABEL=DIR",
                    help="another build of the module (ldptext-web.js, ldptext.js, ldptext.wasm) to "
                         "time beside native/build/wasm")
    ap.add_argument("--workdir", default=str(Path.home() / ".cache" / "ldptext" / "bench-santext"),
                    help="the bench bundles (bench_santext.py's cache, reused)")
    args = ap.parse_args()

    from ldptext import keys
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None or not all((WASM_DIR / f).exists() for f in WASM_FILES):
        raise SystemExit("needs node and the wasm build (make wasm)")
    chromium = next((shutil.which(c) for c in ("chromium", "chromium-browser", "google-chrome")
                     if shutil.which(c)), None) if args.chromium else None
    if args.chromium and chromium is None:
        raise SystemExit("needs headless Chromium (Debian: chromium), or --no-chromium")
    wasm_dirs = {"web": WASM_DIR}
    for spec in args.wasm_dir:
        label, _, d = spec.partition("=")
        wasm_dirs[label] = Path(d).resolve()

    if args.cpu_time:
        os.environ["LDP_BENCH_CPU"] = "1"  # read by the C and node drivers
    else:
        os.environ.pop("LDP_BENCH_CPU", None)
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    public = keys.developer_key().public_key()
    key = base64.b64encode(keys.public_bytes(public)).decode()
    configs = [c for c in bench_santext.CONFIGS if c[0] in args.bundles.split(",")]
    rows, paths = [], []
    for config in configs:
        for eps in (float(e) for e in args.epsilons.split(",")):
            path = work / f"{config[0]}-santext+-{eps:g}.ldpb"
            built = bench_santext.ensure_bundle(path, config, eps, work / "neighbours", [public])
            if built is not None:
                print(f"built {config[1]}, ε = {eps:g} in {built:.1f} s", file=sys.stderr)
            rows.append({"label": config[1], "eps": eps})
            paths.append(path)
    docs = documents(args.docs, args.words)

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "docs.bin").write_bytes(b"\0".join(t.encode() for t in docs))
        (tmp / "docs.json").write_text(json.dumps(docs))
        (tmp / "core.mjs").write_text(WEB_CORE)
        (tmp / "node.mjs").write_text(NODE_DRIVER)
        (tmp / "package.json").write_text('{"type": "module"}\n')
        sides: list[Side] = [PipeSide("C", [str(build_driver(tmp)), key, str(tmp / "docs.bin"),
                                            str(args.chunk)] + [str(p) for p in paths])]
        for label, wdir in wasm_dirs.items():
            sides.append(PipeSide(f"node:{label}", [node, str(tmp / "node.mjs"), str(wdir / "ldptext-web.js"),
                                                    key, str(tmp / "docs.json"), str(args.chunk)]
                                  + [str(p) for p in paths]))
        if chromium is not None:
            for label in wasm_dirs:
                profile = tmp / f"profile-{label}"
                profile.mkdir()
                sides.append(ChromiumSide(f"chromium:{label}", chromium,
                                          (wasm_dirs, docs, paths, key, args.chunk, label), profile))
        best: dict[str, list[list[float]]] = {}
        loads: list[float] = []
        try:
            for side in sides:
                t = time.perf_counter()
                side.start()
                print(f"{side.name}: opened and warmed in {time.perf_counter() - t:.1f} s", file=sys.stderr)
            for r in range(args.rounds):
                loads.append(os.getloadavg()[0])
                # each round starts with another side, so that no side always runs first or last
                for side in sides[r % len(sides):] + sides[:r % len(sides)]:
                    times = side.run(args.passes)
                    prev = best.get(side.name)
                    best[side.name] = times if prev is None else \
                        [[min(a, b) for a, b in zip(pa, pb)] for pa, pb in zip(prev, times)]
        finally:
            for side in sides:
                side.stop()

    per_call = {name: [sum(chunks) / len(docs) for chunks in v] for name, v in best.items()}
    web = [s.name for s in sides if s.name != "C"]
    print(f"\n## Per call on {args.words}-word documents: C, and the web build in node and headless Chromium\n")
    print("| bundle | ε | C µs | " + " | ".join(f"{n} µs | {n} / C" for n in web) + " |")
    print("|---|---|---|" + "---|---|" * len(web))
    for i, r in enumerate(rows):
        c = per_call["C"][i]
        cells = " | ".join(f"{per_call[n][i]:.1f} | {fmt_ratio(per_call[n][i] / c)}" for n in web)
        print(f"| {r['label']} | {r['eps']:g} | {c:.1f} | {cells} |")
    clock = "CPU time (C, node; Chromium wall time)" if args.cpu_time else "Wall time"
    print(f"\nTarget: web ≤ {TARGET}× C per call. {clock}; {len(docs)} documents of {args.words} words "
          f"(the Lee corpus in order), chunks of {args.chunk}, each chunk's best of {args.rounds} rounds × "
          f"{args.passes} passes; every runtime warm (every row checked, optimizing tier compiled). "
          f"Load average {min(loads):.2f}–{max(loads):.2f} over the rounds, {os.cpu_count()} CPUs.")
    node_version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"node {node_version}" + "".join(
        f"; {s.name}: cross-origin isolated {s.isolated}" for s in sides if isinstance(s, ChromiumSide)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
