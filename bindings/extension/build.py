"""Assemble the unpacked "sanitize before send" extension (``make extension``, docs/extension.md).

Copies the extension's sources (this folder), the WebAssembly build (native/build/wasm: ldptext.js,
ldptext.wasm, ldptext-web.js) and one bundle into ``--out``, and writes ``publisher.js``: the
publisher's public keys, part of the extension's code (never next to the bundle, as an app ships
them). The bundle is checked here against those keys with the Python runtime, so a build never
ships a bundle that would not open; the extension verifies it again, with the C library, every time
its service worker starts.

    python bindings/extension/build.py --bundle web.ldpb --trust publisher.pub --out build/extension
    python bindings/extension/build.py --bundle web.ldpb --developer --out build/extension
"""
from __future__ import annotations

import argparse
import base64
import json
import re
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SOURCES = ["manifest.json", "background.js", "content.js", "page-hooks.js", "popup.html", "popup.js", "popup.css"]
WASM = ["ldptext.js", "ldptext.wasm", "ldptext-web.js"]
BUNDLE_NAME = "bundle.ldpb"


def _public_key(path: str) -> bytes:
    raw = base64.b64decode(Path(path).read_text().strip(), validate=True)
    if len(raw) != 32:
        raise SystemExit(f"{path}: not a public key file (base64 of 32 bytes)")
    return raw


def _version() -> str:
    m = re.search(r'^__version__ = "(.+)"$', (ROOT / "sdk" / "ldptext" / "__init__.py").read_text(), re.M)
    if not m:
        raise SystemExit("no __version__ in sdk/ldptext/__init__.py")
    return m.group(1)


def build(bundle: Path, keys: list[bytes], out: Path, wasm_dir: Path) -> Path:
    """Write the unpacked extension.

    Parameters
    ----------
    bundle : Path
        The .ldpb bundle shipped inside the extension (SanText, SanText+, TEM, CusText(+)).
    keys : list of bytes
        The publisher's raw 32-byte Ed25519 public keys; the bundle must be signed by one of them.
    out : Path
        The folder to (re)create: load it with chrome://extensions, "Load unpacked".
    wasm_dir : Path
        The WebAssembly build (``make wasm``).

    Returns
    -------
    Path
        ``out``.
    """
    from ldptext import bundle as B
    from ldptext import keys as K

    if not keys:
        raise SystemExit("give --trust PUB or --developer: the extension refuses bundles from unknown signers")
    B.read_bundle(bundle, trusted_keys=[K.load_public_key(k) for k in keys])  # raises if it would not open
    missing = [n for n in WASM if not (wasm_dir / n).is_file()]
    if missing:
        raise SystemExit(f"{wasm_dir}: {', '.join(missing)} missing (make wasm)")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for name in SOURCES:
        shutil.copyfile(HERE / name, out / name)
    for name in WASM:
        shutil.copyfile(wasm_dir / name, out / name)
    shutil.copyfile(bundle, out / BUNDLE_NAME)
    manifest = json.loads((HERE / "manifest.json").read_text())
    manifest["version"] = _version()
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    b64 = [base64.b64encode(k).decode() for k in keys]
    (out / "publisher.js").write_text(
        "/* Written by bindings/extension/build.py: the publisher's Ed25519 public keys (base64 of the raw\n"
        " * 32 bytes) and the bundle shipped with the extension, verified against them at every start. */\n"
        f"export const PUBLISHER_KEYS = {json.dumps(b64)};\n"
        f"export const BUNDLE_FILE = {json.dumps(BUNDLE_NAME)};\n")
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line of ``make extension``.

    Parameters
    ----------
    argv : list of str, optional
        Arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        0 on success.
    """
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bundle", required=True, help="the .ldpb bundle to ship")
    ap.add_argument("--trust", action="append", default=[], help="a publisher's .pub file; repeatable")
    ap.add_argument("--developer", action="store_true",
                    help="trust this machine's developer key (bundles built here without --sign-key)")
    ap.add_argument("--out", default=str(ROOT / "build" / "extension"))
    ap.add_argument("--wasm-dir", default=str(ROOT / "native" / "build" / "wasm"))
    args = ap.parse_args(argv)
    keys = [_public_key(p) for p in args.trust]
    if args.developer:
        from ldptext import keys as K
        keys.append(K.public_bytes(K.developer_key().public_key()))
    out = build(Path(args.bundle), keys, Path(args.out), Path(args.wasm_dir))
    print(f"extension: {out} (load it unpacked: chrome://extensions, developer mode, 'Load unpacked')")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
