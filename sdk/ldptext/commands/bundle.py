"""``ldptext bundle``: sign, verify and inspect bundle files.

``verify`` performs exactly the runtime's checks (:func:`ldptext.bundle.read_bundle`) and exits 2
with a one-line reason on any failure. ``inspect`` shows what a bundle is and what it guarantees
(mechanism, parameters, sources, the privacy report a user gets, the array table, the signer) even
when the signer is not trusted here; it still refuses files that fail the structural and hash
checks. Text taken from the file is printed with control characters escaped, so a hostile manifest
cannot drive the terminal.
"""
from __future__ import annotations

import json
import math
from typing import Any

from .. import bundle as _bundle
from .. import keys as _keys
from .keys import add_passphrase_options, read_passphrase

_HIDDEN = ("format", "format_version", "mechanism", "arrays")


def register(sub) -> None:
    """Add ``bundle sign|verify|inspect`` to the sub-command parser ``sub``."""
    parser = sub.add_parser("bundle", help="sign, verify or inspect a bundle")
    actions = parser.add_subparsers(dest="bundle_command", metavar="ACTION", required=True)

    sign = actions.add_parser("sign", help="(re-)sign a bundle with a private key")
    sign.add_argument("file", metavar="FILE")
    sign.add_argument("--key", required=True, help="PEM private key file")
    sign.add_argument("--out", default=None, help="write here instead of replacing FILE")
    sign.add_argument("--force", action="store_true",
                      help="re-sign even if the existing signature does not verify")
    add_passphrase_options(sign)
    sign.set_defaults(func=run_sign)

    verify = actions.add_parser("verify", help="check signature, key trust, hashes and layout")
    verify.add_argument("file", metavar="FILE")
    verify.add_argument("--trusted-key", action="append", default=None, metavar="PUB",
                        help="public key to trust (repeatable); default: the local trust store")
    verify.add_argument("--allow-unsigned", action="store_true", help="development bundles only")
    verify.set_defaults(func=run_verify)

    inspect = actions.add_parser("inspect", help="show mechanism, parameters and privacy report")
    inspect.add_argument("file", metavar="FILE")
    inspect.add_argument("--json", action="store_true", help="machine-readable output")
    inspect.add_argument("--trusted-key", action="append", default=None, metavar="PUB",
                         help="public key to consider trusted; default: the local trust store")
    inspect.set_defaults(func=run_inspect)


def run_sign(args) -> int:
    """``ldptext bundle sign``: (re-)sign a bundle; returns the exit status."""
    key = _keys.load_private_key(args.key, read_passphrase(args))
    path = _bundle.sign_bundle(args.file, key, out=args.out, force=args.force)
    print(f"signed {path} with key {_keys.key_id(key.public_key())}")
    return 0


def run_verify(args) -> int:
    """``ldptext bundle verify``: full verification as a runtime does it; returns the exit status."""
    b = _bundle.read_bundle(args.file, trusted_keys=args.trusted_key,
                            allow_unsigned=args.allow_unsigned)
    who = f"signed by trusted key {b.key_id}" if b.signed else "UNSIGNED (allowed explicitly)"
    print(f"OK: {b.mechanism} bundle, {who}, {len(b.arrays)} arrays verified")
    return 0


# ---- inspect ---------------------------------------------------------------------------------

def _safe(value: Any) -> str:
    """Printable form of a manifest value: control characters escaped, long text cut."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii")
                   for ch in text)
    return text if len(text) <= 200 else text[:197] + "..."


def _flatten(obj: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(obj, dict) and obj:
        out: list[tuple[str, Any]] = []
        for k in sorted(obj):
            out += _flatten(obj[k], f"{prefix}.{k}" if prefix else str(k))
        return out
    return [(prefix, obj)]


def _num(x: Any) -> float | None:
    if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x):
        return float(x)
    return None


def privacy_summary(manifest: dict) -> list[tuple[str, str]]:
    """The guarantee a user gets from this bundle, from the signed manifest's own numbers."""
    mech = manifest.get("mechanism")
    params = manifest.get("params") if isinstance(manifest.get("params"), dict) else {}
    privacy = manifest.get("privacy") if isinstance(manifest.get("privacy"), dict) else {}
    numeric = manifest.get("numeric") if isinstance(manifest.get("numeric"), dict) else {}
    eps, d_max = _num(params.get("epsilon")), _num(privacy.get("d_max"))
    rows: list[tuple[str, str]] = []
    if mech in ("santext", "santext+") and eps is not None:
        eps0 = _num(params.get("epsilon0")) or 0.0
        p = _num(params.get("p"))
        notion = privacy.get("notion", "UMLDP" if mech == "santext+" else "MLDP")
        rows.append(("notion", f"{_safe(notion)}: Pr[M(x)=y] <= exp(eps*d(x,x'))*Pr[M(x')=y]"
                     + (" (+eps0 across the sensitive split)" if mech == "santext+" else "")))
        rows.append(("metric epsilon", f"{eps:g}"))
        if mech == "santext+":
            rows.append(("epsilon0 = ln(1/p)", f"{eps0:.6g}" + (f" (p = {p:g})" if p else "")))
            if p is not None:
                rows.append(("kept in the clear", f"non-sensitive tokens, with probability "
                             f"1 - p = {1 - p:.6g}"))
        if d_max is not None:
            per_token = eps * d_max + eps0
            rows.append(("D_max", f"{d_max:.6g}"))
            rows.append(("per token, worst case", f"eps*D_max{' + eps0' if eps0 else ''} = "
                         f"{per_token:.6g}"))
            rows.append(("document of n tokens", f"n x {per_token:.6g} (e.g. 100 tokens: "
                         f"{100 * per_token:.6g}); the number of tokens is not hidden"))
    elif eps is not None:  # DP-BART and future mechanisms: report what the manifest states
        delta = _num(params.get("delta"))
        rows.append(("per release", f"({eps:g}, {delta:g})-LDP" if delta else f"{eps:g}-LDP"))
        for k in ("noise", "clip", "sequence_length", "pruned"):
            if k in params:
                rows.append((k, _safe(params[k])))
        rows.append(("composition", "k chunks of one document cost k*eps (and k*delta)"))
    tol = _num(numeric.get("max_relative_error"))
    if tol is not None:
        rows.append(("numeric tolerance", f"{tol:.2e} relative error of every probability"))
    return rows


def inspect_data(path, trusted_keys=None) -> dict:
    """Everything ``bundle inspect`` shows of the bundle at ``path``, as a JSON-ready dict."""
    b, info = _bundle.open_unverified(path)
    try:
        trusted = info.signed and any(_keys.public_bytes(k) == info.public_key
                                      for k in _bundle._trusted(trusted_keys))
        trust_error = None
    except Exception as e:  # a broken trust store must not hide what the bundle is
        trusted, trust_error = False, str(e)
    arrays = []
    for name, spec in sorted(b.manifest["arrays"].items()):
        a = b.arrays[name]
        arrays.append({"name": name, "dtype": spec["dtype"], "shape": spec["shape"],
                       "bytes": int(a.nbytes), "sha256": spec["sha256"]})
    return {
        "path": str(path), "mechanism": b.mechanism, "format_version": b.manifest["format_version"],
        "signature": {"signed": info.signed, "valid": info.valid, "key_id": info.key_id,
                      "trusted": bool(trusted), "trust_error": trust_error},
        "manifest": {k: v for k, v in b.manifest.items() if k not in _HIDDEN},
        "privacy_report": dict(privacy_summary(b.manifest)),
        "arrays": arrays,
    }


def _fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def run_inspect(args) -> int:
    """``ldptext bundle inspect``: print the manifest, arrays and privacy parameters."""
    data = inspect_data(args.file, args.trusted_key)
    if args.json:
        print(json.dumps(data, indent=2, ensure_ascii=True))
        return 0
    sig = data["signature"]
    if not sig["signed"]:
        sig_line = "UNSIGNED: the runtime refuses it unless allow_unsigned=True"
    elif not sig["valid"]:
        sig_line = f"INVALID signature (claims key {sig['key_id']}): the runtime refuses it"
    else:
        sig_line = (f"valid, key {sig['key_id']} "
                    + ("(trusted here)" if sig["trusted"] else
                       "(NOT trusted here: `ldptext keys trust` the vendor's .pub)"))
        if sig["trust_error"]:
            sig_line += f"; trust store problem: {_safe(sig['trust_error'])}"
    print(f"bundle     {_safe(data['path'])}")
    print(f"mechanism  {_safe(data['mechanism'])} (format version {data['format_version']})")
    print(f"signature  {sig_line}")
    if data["privacy_report"]:
        print("\nprivacy report (what a user of this bundle gets)")
        for key, value in data["privacy_report"].items():
            print(f"  {key:<28} {value}")
    for section, content in data["manifest"].items():
        print(f"\n{_safe(section)}")
        for key, value in _flatten(content):
            print(f"  {_safe(key) or '(value)':<28} {_safe(value)}")
    print(f"\narrays ({len(data['arrays'])}, "
          f"{_fmt_bytes(sum(a['bytes'] for a in data['arrays']))})")
    width = max([len(_safe(a["name"])) for a in data["arrays"]] + [4])
    print(f"  {'name':<{width}}  {'dtype':<5}  {'shape':<16} {'size':>10}  sha256")
    for a in data["arrays"]:
        shape = "x".join(map(str, a["shape"])) or "scalar"
        print(f"  {_safe(a['name']):<{width}}  {a['dtype']:<5}  {shape:<16} "
              f"{_fmt_bytes(a['bytes']):>10}  {a['sha256'][:16]}")
    return 0
