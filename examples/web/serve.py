"""Serve the browser example (examples/web/) on 127.0.0.1, with the WebAssembly build and a bundle.

    make web-demo        # builds the wasm module and a web-sized bundle, then runs this
    .venv/bin/python examples/web/serve.py --bundle web.ldpb --trust signing.pub [--port 8000]

Routes: ``/`` this directory (index.html, app.js, style.css); ``/ldptext/`` the three files of
``make wasm`` (native/build/wasm: ldptext-web.js, ldptext.js, ldptext.wasm); ``/bundle.ldpb`` the
bundle; ``/config.json`` its name and the trusted public keys (base64 of the raw 32 bytes), which a
real app ships with its code. Only 127.0.0.1 is bound; every response carries a Content-Security-
Policy that lets the page connect to nothing but this server (``connect-src 'self'``), so the page
cannot upload anywhere. The tests (tests/test_wasm.py) use :func:`make_server` with extra mounts.
"""
from __future__ import annotations

import argparse
import base64
import json
import sys
from functools import partial
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
WASM_DIR = ROOT / "native" / "build" / "wasm"
WASM_FILES = ("ldptext-web.js", "ldptext.js", "ldptext.wasm")
CSP = ("default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; connect-src 'self'; "
       "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'self'")
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".mjs": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
         ".json": "application/json", ".wasm": "application/wasm",
         ".ldpb": "application/octet-stream"}


class Handler(SimpleHTTPRequestHandler):
    """GET/HEAD of the mounted directories and files only; no listings, no paths outside them."""

    mounts: dict[str, Path] = {}   # URL prefix ("/ldptext/") -> directory
    files: dict[str, bytes | Path] = {}  # exact URL path -> content or file
    quiet = True

    def _resolve(self) -> "bytes | Path | None":
        path = unquote(self.path.split("?", 1)[0].split("#", 1)[0])
        if path in self.files:
            return self.files[path]
        for prefix in sorted(self.mounts, key=len, reverse=True):
            if path.startswith(prefix):
                rel = path[len(prefix):] or "index.html"
                base = self.mounts[prefix].resolve()
                target = (base / rel).resolve()
                if base in target.parents and target.is_file():
                    return target
                return None
        return None

    def _send(self, head_only: bool) -> None:
        content = self._resolve()
        if content is None:
            self.send_error(HTTPStatus.NOT_FOUND)
            return
        name = self.path.split("?", 1)[0]
        data = content.read_bytes() if isinstance(content, Path) else content
        suffix = Path(content.name if isinstance(content, Path) else name).suffix
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", TYPES.get(suffix, "application/octet-stream"))
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        if not head_only:
            self.wfile.write(data)

    def do_GET(self) -> None:
        """Serve a mounted file."""
        self._send(head_only=False)

    def do_HEAD(self) -> None:
        """Headers of a mounted file."""
        self._send(head_only=True)

    def log_message(self, format: str, *args) -> None:
        """Log a request unless quiet."""
        if not self.quiet:
            super().log_message(format, *args)


def make_server(bundle: Path, trusted_keys: list[bytes], *, port: int = 0,
                mounts: dict[str, Path] | None = None, quiet: bool = True) -> ThreadingHTTPServer:
    """An HTTP server on 127.0.0.1 for the example page (not started).

    Parameters
    ----------
    bundle : Path
        The bundle served as ``/bundle.ldpb``.
    trusted_keys : list of bytes
        Raw 32-byte Ed25519 public keys written into ``/config.json``.
    port : int
        0 picks a free port (``server.server_address[1]``).
    mounts : dict, optional
        More URL prefixes -> directories (the tests mount their pages and fixtures).
    quiet : bool
        No request log.

    Returns
    -------
    ThreadingHTTPServer
    """
    config = {"bundle": "bundle.ldpb",
              "trusted_keys": [base64.b64encode(k).decode() for k in trusted_keys]}
    files: dict[str, bytes | Path] = {"/config.json": json.dumps(config).encode(),
                                      "/bundle.ldpb": Path(bundle)}
    files.update({f"/ldptext/{name}": WASM_DIR / name for name in WASM_FILES})
    handler = type("ExampleHandler", (Handler,), {
        "mounts": {**(mounts or {}), "/": HERE}, "files": files, "quiet": quiet})
    return ThreadingHTTPServer(("127.0.0.1", port), partial(handler, directory=str(HERE)))


def _public_key(path: str) -> bytes:
    raw = base64.b64decode(Path(path).read_text().strip(), validate=True)
    if len(raw) != 32:
        raise SystemExit(f"{path}: not a public key file (base64 of 32 bytes)")
    return raw


def main(argv: list[str] | None = None) -> int:
    """Serve until Ctrl-C.

    Parameters
    ----------
    argv : list of str, optional
        Command line (default ``sys.argv[1:]``).

    Returns
    -------
    int
        Exit status.
    """
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bundle", required=True, help="the .ldpb bundle the page loads")
    ap.add_argument("--trust", action="append", default=[], metavar="PUB",
                    help="a public key file (ldptext keys generate's .pub); repeatable")
    ap.add_argument("--developer", action="store_true",
                    help="trust this machine's developer key (bundles built here without --sign-key)")
    ap.add_argument("--port", type=int, default=8000, help="port on 127.0.0.1 (default 8000)")
    ap.add_argument("--verbose", action="store_true", help="log every request")
    args = ap.parse_args(argv)
    keys = [_public_key(p) for p in args.trust]
    if args.developer:
        from ldptext import keys as ldp_keys

        keys.append(ldp_keys.public_bytes(ldp_keys.developer_key().public_key()))
    if not keys:
        ap.error("give --trust PUB or --developer: the page refuses bundles from unknown signers")
    missing = [n for n in WASM_FILES if not (WASM_DIR / n).is_file()]
    if missing:
        ap.error(f"{WASM_DIR} lacks {', '.join(missing)}: run `make wasm` first")
    server = make_server(Path(args.bundle), keys, port=args.port, quiet=not args.verbose)
    print(f"serving the example on http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
