"""``ldptext bundle``: sign, verify and inspect bundle files.

``verify`` performs exactly the runtime's checks (:func:`ldptext.bundle.read_bundle`) and exits with
a one-line reason on any failure (status 4 for a damaged or unknown bundle, 5 for a signature or trust
failure: see :mod:`ldptext.cli`); ``verify --json`` prints one JSON object (bundle id, key id,
trusted, mechanism, format version, ``verified``) on success and on failure. ``inspect`` shows what a
bundle is and what it guarantees (mechanism, parameters, sources, the privacy report a user gets, the
array table, the signer) even when the signer is not trusted here; it still refuses files that fail
the structural and hash checks. Text taken from the file is printed with control characters escaped,
so a hostile manifest cannot drive the terminal.
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np

from .. import bundle as _bundle
from ..bundle_check import sign_bundle
from .. import errors as _errors
from .. import keys as _keys
from .. import registry as _registry
from ..guarantee import number
from ..verbatim import format_probability
from ._trust import add_trusted_key_option
from .keys import add_passphrase_options, read_passphrase

_HIDDEN = ("format", "format_version", "mechanism", "arrays")
_SHOW_WORDS = 30


def register(sub) -> None:
    """Add ``bundle sign|verify|inspect`` to the sub-command parser ``sub``."""
    parser = sub.add_parser("bundle", help="sign, verify or inspect a bundle")
    actions = parser.add_subparsers(dest="bundle_command", metavar="ACTION", required=True)

    sign = actions.add_parser("sign", help="(re-)sign a bundle with a private key")
    sign.add_argument("file", metavar="FILE", help="the bundle to sign (replaced atomically unless --out)")
    sign.add_argument("--key", required=True, help="PEM private key file")
    sign.add_argument("--out", default=None, help="write here instead of replacing FILE")
    sign.add_argument("--force", action="store_true",
                      help="re-sign even if the existing signature does not verify (the parameters are "
                           "still checked against the arrays)")
    add_passphrase_options(sign)
    sign.set_defaults(func=run_sign)

    verify = actions.add_parser("verify", help="check signature, key trust, hashes and layout")
    verify.add_argument("file", metavar="FILE", help="the bundle to verify")
    add_trusted_key_option(verify)
    verify.add_argument("--allow-unsigned", action="store_true", help="development bundles only")
    verify.add_argument("--full", action="store_true",
                        help="also check every row's whole output law (as `bundle sign` does; seconds "
                             "to a minute on a 50,000-word bundle) instead of leaving each row to its "
                             "first use")
    verify.add_argument("--json", action="store_true",
                        help="print one JSON object: path, bundle_id, key_id, signed, trusted, mechanism, "
                             "format_version, verified (true/false) and error (the reason, when not verified)")
    verify.set_defaults(func=run_verify)

    inspect = actions.add_parser("inspect", help="show mechanism, parameters and privacy report")
    inspect.add_argument("file", metavar="FILE", help="the bundle to describe (need not be trusted here)")
    inspect.add_argument("--json", action="store_true", help="machine-readable output")
    inspect.add_argument("--exposed", type=int, default=0, metavar="N",
                         help="also list the N sensitive words most often released unchanged, with their "
                              "exact probability (the vocabulary is public; seconds to a minute on a "
                              "50,000-word bundle)")
    add_trusted_key_option(inspect)
    inspect.set_defaults(func=run_inspect)


def run_sign(args) -> int:
    """``ldptext bundle sign``: (re-)sign a bundle; returns the exit status.

    Refuses (exit 4, ``ParameterMismatchError``) a bundle whose manifest parameters do not match its
    arrays, ``--force`` or not (:func:`ldptext.bundle_check.check_parameters`).
    """
    key = _keys.load_private_key(args.key, read_passphrase(args))
    path = sign_bundle(args.file, key, out=args.out, force=args.force)
    b, _ = _bundle.open_unverified(path)
    print(f"signed {path} with key {_keys.key_id(key.public_key())} (parameters checked against the arrays)")
    print(f"bundle id {b.bundle_id}")
    return 0


def run_verify(args) -> int:
    """``ldptext bundle verify``: full verification as a runtime does it; returns the exit status.

    Parameters
    ----------
    args : argparse.Namespace
        ``file``, ``trusted_key``, ``allow_unsigned`` and ``json``.

    Returns
    -------
    int
        0 when the bundle verifies; otherwise the ``BundleError`` is raised (after, with ``--json``,
        the JSON object with ``"verified": false`` and the reason) and the CLI maps it to its exit
        status.
    """
    from ..bundle_check import check_parameters

    try:
        b = _bundle.read_bundle(args.file, trusted_keys=args.trusted_key,
                                allow_unsigned=args.allow_unsigned)
        # a trusted signature vouches for the manifest, not that the tables realise its numbers
        check_parameters(b, every_row=bool(getattr(args, "full", False)))
    except _errors.BundleError as e:
        if args.json:
            print(json.dumps(verify_data(args.file, None, args.trusted_key, str(e)), indent=2, ensure_ascii=True))
        raise
    if args.json:
        print(json.dumps(verify_data(args.file, b, args.trusted_key), indent=2, ensure_ascii=True))
        return 0
    who = f"signed by trusted key {b.key_id}" if b.signed else "UNSIGNED (allowed explicitly)"
    print(f"OK: {b.mechanism} bundle, {who}, {len(b.arrays)} arrays, the header and the parameters "
          f"verified")
    print(f"bundle id {b.bundle_id}")
    return 0


def verify_data(path, verified: "_bundle.Bundle | None", trusted_keys=None, error: str | None = None) -> dict:
    """What ``bundle verify --json`` prints.

    Parameters
    ----------
    path : str or os.PathLike
        The bundle file.
    verified : Bundle or None
        The result of :func:`ldptext.bundle.read_bundle`, or ``None`` when it raised.
    trusted_keys : iterable or None
        The keys that verification trusted (``None``: the local trust store).
    error : str or None
        The verification error's message, when ``verified`` is ``None``.

    Returns
    -------
    dict
        ``path``, ``verified`` (bool), ``error`` (str or None), and what is known of the bundle:
        ``bundle_id``, ``key_id``, ``signed``, ``trusted``, ``mechanism``, ``format_version`` and, for a
        verified bundle, ``backend`` (:func:`runtime_backend`). For a
        bundle that failed verification they come from the structural and hash checks alone
        (:func:`ldptext.bundle.open_unverified`), or are ``None`` when even those fail.
    """
    data = {"path": str(path), "verified": verified is not None, "error": error, "bundle_id": None,
            "key_id": None, "signed": None, "trusted": False, "mechanism": None, "format_version": None}
    if verified is not None:
        data.update(bundle_id=verified.bundle_id, key_id=verified.key_id, signed=verified.signed,
                     trusted=verified.signed, mechanism=verified.mechanism,
                     format_version=verified.manifest["format_version"], backend=runtime_backend(verified.mechanism))
        return data
    signatures: list = []  # the signature is read before the hashes: known even when they fail
    try:
        b, info = _bundle.open_unverified(path, on_signature=signatures.append)
    except _errors.BundleError:
        if signatures:
            info = signatures[0]
            data.update(key_id=info.key_id, signed=info.signed, trusted=_is_trusted(info, trusted_keys))
        return data
    data.update(bundle_id=b.bundle_id, key_id=info.key_id, signed=info.signed,
                trusted=_is_trusted(info, trusted_keys), mechanism=b.mechanism,
                format_version=b.manifest["format_version"])
    return data


def runtime_backend(mechanism: str) -> str:
    """What would sample this bundle's mechanism in this installation: ``"libldptext"`` (SanText(+) on
    the C library), ``"native"`` (the C extension) or ``"fallback"`` (numpy, about 900x slower).

    A SanText bundle whose tokenizer the library lacks runs ``"native"``; ``Sanitizer.backend`` of the
    loaded runtime is the exact answer."""
    from ..rng import available_backend

    backend = available_backend()
    if backend == "libldptext" and (not _registry.is_known(mechanism) or _registry.get(mechanism).c_code is None):
        return "native"  # a mechanism the library does not run: the C extension's generator
    return backend


def _is_trusted(info: "_bundle.SignatureInfo", trusted_keys) -> bool:
    try:
        return bool(info.signed and any(_keys.public_bytes(k) == info.public_key
                                        for k in _bundle._trusted(trusted_keys)))
    except Exception:  # a broken trust store: not trusted
        return False


# ---- inspect ---------------------------------------------------------------------------------

def _safe(value: Any, limit: int = 200) -> str:
    """Printable form of a manifest value: control characters escaped, text beyond ``limit`` cut."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii")
                   for ch in text)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _flatten(obj: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(obj, dict) and obj:
        out: list[tuple[str, Any]] = []
        for k in sorted(obj):
            out += _flatten(obj[k], f"{prefix}.{k}" if prefix else str(k))
        return out
    return [(prefix, obj)]


def privacy_summary(manifest: dict) -> list[tuple[str, str]]:
    """The guarantee a user gets from this bundle, from the signed manifest's own numbers.

    Rendered from the mechanism's unit (:meth:`ldptext.registry.Mechanism.guarantee`,
    :meth:`ldptext.guarantee.Guarantee.rows`): its notion and neighbouring relation, ε and the ledger
    unit, the worst case recomputed from the parameters or why there is none, what is kept in the
    clear, the stated verbatim rate, how the floating point relates to the bound and the paper;
    then the numeric tolerance the checks confirm.

    Parameters
    ----------
    manifest : dict
        The bundle's manifest (verified or not: only its own numbers are shown).

    Returns
    -------
    list of (str, str)
        Labelled lines, in display order; text taken from the file is escaped.
    """
    mech = manifest.get("mechanism")
    if not _registry.is_known(mech):
        return [("mechanism", f"{_safe(mech)} is not a mechanism this installation knows")]
    try:
        guarantee = _registry.get(mech).guarantee(manifest)
        rows = guarantee.rows()
    except Exception as e:  # a malformed manifest: say so, the runtime refuses it
        return [("guarantee", f"not stated: the manifest is malformed ({type(e).__name__})")]
    numeric = manifest.get("numeric") if isinstance(manifest.get("numeric"), dict) else {}
    tol, stated = guarantee.numeric_tolerance, number(numeric.get("max_relative_error"))
    if tol is not None and stated is not None:
        # the reports' tolerance: what every runtime's checks confirm, never a signer's finer claim
        rows.append(("numeric tolerance", f"{tol:.2e} = bound on |log P_realised - log P_formula| that every "
                     f"runtime's checks confirm (the stated {stated:.2e} plus their float64 resolution)"
                     f"; ratio bounds hold with slack exp({2 * tol:.2e})"))
    # the statements' prose is long; a manifest's own text within it is still cut
    return [(label, _safe(value, limit=600)) for label, value in rows]


def inspect_data(path, trusted_keys=None, exposed: int = 0) -> dict:
    """Everything ``bundle inspect`` shows of the bundle at ``path``, as a JSON-ready dict.

    Parameters
    ----------
    path : str or os.PathLike
        The bundle file (structure and hashes checked, no trust decision).
    trusted_keys : iterable or None
        Keys to consider trusted; ``None``: the local trust store.
    exposed : int
        Also list this many most exposed words (:func:`exposed_words`).

    Returns
    -------
    dict
        Path, mechanism, signature, manifest, the privacy report (:func:`privacy_summary`, plus for
        SanText+ the size and first words of the non-sensitive set V_N), the backend a runtime of it
        would use here (:func:`runtime_backend`) and the array table.
    """
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
        "privacy_report": dict(privacy_summary(b.manifest) + _non_sensitive_rows(b)),
        "backend": runtime_backend(b.mechanism),
        "arrays": arrays,
        **({"exposed": exposed_words(b, exposed)} if exposed else {}),
    }


def exposed_words(b: "_bundle.Bundle", n: int) -> list[dict]:
    """The ``n`` sensitive words with the largest P(M(x) = x), largest first, each as ``{"word",
    "probability"}``; computed exactly from the tables by the mechanism's runtime
    (``verbatim_rates``), empty where it states no such rate.

    Raises
    ------
    ValueError
        ``n`` is not positive.
    """
    if n < 1:
        raise ValueError("--exposed needs a positive number of words")
    rates = getattr(_registry.get(b.mechanism).runtime_class(), "verbatim_rates", None)
    if rates is None:
        return []
    rows, p = rates(b)
    vocab = json.loads(b.blob("vocab.json").decode("utf-8"))
    top = np.argsort(-p, kind="stable")[:n]
    return [{"word": _safe(vocab[int(rows[i])]), "probability": float(p[i])} for i in top]


def _non_sensitive_rows(b) -> list[tuple[str, str]]:
    """|V_N| and its first words where the mechanism keeps words in the clear (SanText+'s, w.p. 1 − p;
    CusText+'s stop words)."""
    if _registry.get(b.mechanism).statement().kept_in_clear is None or "keep_row" not in b.arrays:
        return []
    try:
        keep = np.flatnonzero(np.asarray(b.arrays["keep_row"]).astype(bool))
        vocab = json.loads(b.blob("vocab.json").decode("utf-8"))
        first = [_safe(vocab[i]) for i in keep[:_SHOW_WORDS]]
    except Exception:  # inspect shows what it can
        return []
    more = f", ... ({keep.size - len(first)} more)" if keep.size > len(first) else ""
    return [("kept in the clear: words", f"{keep.size} words: "
             + " ".join(first) + more)]


def _fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def run_inspect(args) -> int:
    """``ldptext bundle inspect``: print the privacy report, the manifest, the arrays; returns the exit status.

    Parameters
    ----------
    args : argparse.Namespace
        ``file``, ``json`` and ``trusted_key``.

    Returns
    -------
    int
        0.
    """
    if args.exposed < 0:
        raise _errors.InputError("--exposed needs a non-negative number of words")
    data = inspect_data(args.file, args.trusted_key, exposed=args.exposed)
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
    print(f"backend    {data['backend']} (what would sample it in this installation)")
    if data["privacy_report"]:
        print("\nprivacy report (what a user of this bundle gets)")
        for key, value in data["privacy_report"].items():
            print(f"  {key:<28} {value}")
    for section, content in data["manifest"].items():
        print(f"\n{_safe(section)}")
        for key, value in _flatten(content):
            print(f"  {_safe(key) or '(value)':<28} {_safe(value)}")
    if "exposed" in data:
        print("\nmost exposed sensitive words (P(released unchanged), exact; the vocabulary is public)")
        if not data["exposed"]:
            print("  not computed for this mechanism")
        for item in data["exposed"]:
            print(f"  {format_probability(item['probability']):<12} {item['word']}")
    print(f"\narrays ({len(data['arrays'])}, "
          f"{_fmt_bytes(sum(a['bytes'] for a in data['arrays']))})")
    width = max([len(_safe(a["name"])) for a in data["arrays"]] + [4])
    print(f"  {'name':<{width}}  {'dtype':<5}  {'shape':<16} {'size':>10}  sha256")
    for a in data["arrays"]:
        shape = "x".join(map(str, a["shape"])) or "scalar"
        print(f"  {_safe(a['name']):<{width}}  {a['dtype']:<5}  {shape:<16} "
              f"{_fmt_bytes(a['bytes']):>10}  {a['sha256'][:16]}")
    return 0
