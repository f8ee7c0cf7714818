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
import math
from typing import Any

import numpy as np

from .. import bundle as _bundle
from ..bundle_check import sign_bundle
from .. import errors as _errors
from .. import keys as _keys
from .. import registry as _registry
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
    verify.add_argument("--trusted-key", action="append", default=None, metavar="PUB",
                        help="public key to trust (repeatable); default: the local trust store")
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
    inspect.add_argument("--trusted-key", action="append", default=None, metavar="PUB",
                         help="public key to consider trusted; default: the local trust store")
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
    if backend == "libldptext" and mechanism not in _registry.names(family="santext"):
        return "native"  # the other runtimes use the C extension's generator, not the library
    return backend


def _is_trusted(info: "_bundle.SignatureInfo", trusted_keys) -> bool:
    try:
        return bool(info.signed and any(_keys.public_bytes(k) == info.public_key
                                        for k in _bundle._trusted(trusted_keys)))
    except Exception:  # a broken trust store: not trusted
        return False


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


def _verbatim_summary(privacy: dict) -> list[tuple[str, str]]:
    """The stated verbatim rate (:mod:`ldptext.verbatim`) and the weak-privacy label."""
    from ..verbatim import VerbatimRate

    try:
        rate = VerbatimRate.from_manifest(privacy.get("verbatim"))
    except Exception:  # shown, not verified, here: bundle verify refuses a malformed one
        return [("verbatim rate", "malformed")]
    if rate is None:
        return [("verbatim rate", "not stated (older bundle: estimated at each load)")]
    rows = [("verbatim rate", rate.describe())]
    if rate.near_identity:
        rows.append(("WEAK PRIVACY", "the output is close to the input: median sensitive word released "
                                     "unchanged w.p. >= 0.9 (built with --allow-weak-privacy)"))
    return rows


def privacy_summary(manifest: dict) -> list[tuple[str, str]]:
    """The guarantee a user gets from this bundle, from the signed manifest's own numbers.

    TEM, CusText(+), CMP, Mahalanobis: the notion, its neighbouring relation, the worst case
    recomputed from the parameters (ε·min(γ, D_max), ε·D_max, or none for CusText, whose output set
    is revealed), the ledger unit and the paper (docs/mechanisms.md).
    SanText: ε·d(x, x')-MLDP per token, worst case ε·D_max-LDP. SanText+: (V_S, V_P, ε, ε₀)-UMLDP
    with non-sensitive words in the clear w.p. 1 − p, so no finite worst-case LDP level (Yue et al.
    2021, *Differential Privacy for Text Analytics via Natural Text Sanitization*, as presented in
    Yue 2023, *Data Synthesis: Boosting Utility and Privacy in NLP*, PhD thesis, §2.4). DP-BART: what
    the bundle fixes (L, d, |P|, n, C, Δ₁, Δ₂, the noise families); each chunk of L tokens is one
    (ε, δ)-LDP release with (ε, δ) chosen at run time (Igamberdiev 2023, chapter 6).

    Parameters
    ----------
    manifest : dict
        The bundle's manifest (verified or not: only its own numbers are shown).

    Returns
    -------
    list of (str, str)
        Labelled lines, in display order.
    """
    mech = manifest.get("mechanism")
    params = manifest.get("params") if isinstance(manifest.get("params"), dict) else {}
    privacy = manifest.get("privacy") if isinstance(manifest.get("privacy"), dict) else {}
    numeric = manifest.get("numeric") if isinstance(manifest.get("numeric"), dict) else {}
    eps, d_max = _num(params.get("epsilon")), _num(privacy.get("d_max"))
    rows: list[tuple[str, str]] = []
    if mech in _registry.names(family="santext") and eps is not None:
        from ..santext import NO_WORST_CASE, metric_id, worst_case_epsilon
        from ..santext import notion as santext_notion

        eps0 = _num(params.get("epsilon0")) or 0.0
        p = _num(params.get("p"))
        notion = privacy.get("notion", santext_notion(mech))
        rows.append(("notion", f"{_safe(notion)}: Pr[M(x)=y] <= exp(eps*d(x,x'))*Pr[M(x')=y] per token"
                     + (" for protected outputs y in V_S (+eps0 across the sensitive split)"
                        if mech == "santext+" else "")))
        rows.append(("metric epsilon", f"{eps:g} per token (ledger charge: n x {eps:g} per document)"))
        try:
            rows.append(("ledger unit", f"metric:{metric_id(manifest)}"))
        except Exception:  # a manifest without the array table: nothing to name
            pass
        if d_max is not None:
            rows.append(("D_max", f"{d_max:.6g}"))
        if mech == "santext+":
            rows.append(("epsilon0 = ln(1/p)", f"{eps0:.6g}" + (f" (p = {p:g})" if p else "")))
            if p is not None:
                rows.append(("kept in the clear", f"non-sensitive (V_N) words, with probability "
                             f"1 - p = {1 - p:.6g}"))
            if "non_sensitive" in params:
                rows.append(("non-sensitive split", _safe(params["non_sensitive"])))
            rows.append(("worst-case LDP level", "none (not finite): " + NO_WORST_CASE))
        elif d_max is not None:
            per_token = worst_case_epsilon(mech, eps, d_max)
            rows.append(("worst case per token", f"eps*D_max = {per_token:.6g}-LDP (a true bound for SanText)"))
            rows.append(("document of n tokens", f"n x {per_token:.6g}-LDP (e.g. 100 tokens: "
                         f"{100 * per_token:.6g}); the number of tokens is not hidden"))
        rows += _verbatim_summary(privacy)
    elif mech == "dpbart" and isinstance(manifest.get("dpbart"), dict):
        rows += _dpbart_summary(manifest["dpbart"])
    elif _registry.is_known(mech) and _registry.get(mech).family in ("tem", "custext", "cmp") \
            and eps is not None:
        rows += _comparison_summary(mech, manifest, params, eps, d_max)
    elif eps is not None:  # other registered mechanisms: what the manifest states, and the paper
        delta = _num(params.get("delta"))
        rows.append(("per release", f"({eps:g}, {delta:g})-LDP" if delta else f"{eps:g}-LDP"))
        if _registry.is_known(mech):
            rows.append(("reference", _registry.get(mech).reference))
    tol = _num(numeric.get("max_relative_error"))
    if tol is not None:
        stated = _num(numeric.get("stated_maximum"))
        rows.append(("numeric tolerance", f"{tol:.2e} = bound on |log P_realised - log P_formula|"
                     + (f" (stated maximum {stated:g})" if stated is not None else "")
                     + f"; ratio bounds hold with slack exp({2 * tol:.2e})"))
    return rows


def _comparison_summary(mech: str, manifest: dict, params: dict, eps: float,
                        d_max: float | None) -> list[tuple[str, str]]:
    """TEM, CusText(+), CMP, Mahalanobis: the guarantee, its neighbouring relation and worst case, from
    the manifest's parameters (ε, γ, K, λ, D_max; the worst case is recomputed, not read)."""
    rows: list[tuple[str, str]] = []
    worst: float | None = None
    if mech == "tem":
        gamma = _num(params.get("gamma"))
        rows.append(("notion", "metric LDP truncated at gamma: Pr[M(x)=y] <= exp(eps*min(d(x,x'), gamma))"
                     "*Pr[M(x')=y] per token"))
        rows.append(("neighbouring", "any two tokens x, x' of the input domain, at the price "
                     "eps*min(d(x,x'), gamma); d Euclidean over the bundle's int8-quantized embeddings"))
        if gamma is not None:
            beta = _num(params.get("beta"))
            rows.append(("threshold gamma", f"{gamma:.6g}" + (f" (from beta = {beta:g}: far set drawn w.p. "
                                                                f"<= beta)" if beta is not None else "")))
            if d_max is not None:
                from ..tem import worst_case_epsilon

                worst = worst_case_epsilon(eps, gamma, d_max)
    elif mech in _registry.names(family="custext"):
        k = params.get("k")
        rows.append(("notion", "LDP within output sets: Pr[M(x)=y] <= exp(eps)*Pr[M(x')=y] per token"))
        rows.append(("neighbouring", f"any two inputs with the same output set (groups of >= {_safe(k)} "
                     f"tokens, {_safe(params.get('similarity'))} similarity)"))
        rows.append(("revealed", "the output set (group) of every input token: no bound between inputs of "
                     "different groups"))
        if mech == "custext+":
            rows.append(("kept in the clear", "stop words ("
                         + _safe(params.get("non_sensitive", "the bundle's list"))
                         + "), unchanged with probability 1"))
    else:
        metric = ("Euclidean over the bundle's int8-quantized embeddings" if mech == "cmp" else
                  f"regularized Mahalanobis ||S^-1 (phi(x) - phi(x'))||, S = Sigma_lambda^(1/2), "
                  f"lambda = {_safe(params.get('lambda'))}")
        rows.append(("notion", "metric LDP: Pr[M(x)=y] <= exp(eps*d(x,x'))*Pr[M(x')=y] per token "
                     "(noise, then the nearest output token)"))
        rows.append(("neighbouring", f"any two tokens x, x' of the input domain, at the price eps*d(x,x'); "
                     f"d {metric}"))
        rows.append(("floating point", "continuous noise in float64, never released; the released token can "
                     "differ from the ideal mechanism's only near a nearest-neighbour boundary or with "
                     "probability ceil(m/2)*2^-24 (ldptext.multivariate_laplace)"))
        rows.append(("nearest neighbour", f"faiss index {_safe(params.get('index'))} (the 'faiss' extra); "
                     "exact or approximate, the guarantee holds for either"))
        if d_max is not None:
            from ..cmp import worst_case_epsilon

            worst = worst_case_epsilon(eps, d_max)
    rows.append(("metric epsilon" if mech not in _registry.names(family="custext") else "epsilon",
                 f"{eps:g} per token (ledger charge: n x {eps:g} per document)"))
    try:
        if mech in _registry.names(family="custext"):
            from ..custext import partition_id
            rows.append(("ledger unit", f"partition:{partition_id(manifest)}"))
        elif mech == "mahalanobis":
            from ..cmp import mahalanobis_metric_id
            rows.append(("ledger unit", f"metric:{mahalanobis_metric_id(manifest)}"))
        else:
            from ..santext import metric_id
            rows.append(("ledger unit", f"metric:{metric_id(manifest)} (shared with SanText over the same "
                         f"embedding and vocabulary)"))
    except Exception:  # a manifest without the array table: nothing to name
        pass
    if d_max is not None and mech not in _registry.names(family="custext"):
        rows.append(("D_max", f"{d_max:.6g}"))
    if worst is not None:
        how = "eps*min(gamma, D_max)" if mech == "tem" else "eps*D_max"
        rows.append(("worst case per token", f"{how} = {worst:.6g}-LDP"))
        rows.append(("document of n tokens", f"n x {worst:.6g}-LDP; the number of tokens is not hidden"))
    elif mech in _registry.names(family="custext"):
        rows.append(("worst-case LDP level", "none (not finite): the output set is revealed"
                     + ("; stop words are released unchanged" if mech == "custext+" else "")))
    rows.append(("reference", _registry.get(mech).reference))
    return rows


def _dpbart_summary(dp: dict) -> list[tuple[str, str]]:
    """What a DP-BART bundle fixes; (ε, δ) per chunk are chosen at run time."""
    from .. import noise as _noise

    rows: list[tuple[str, str]] = []
    seq_len, hidden = _num(dp.get("seq_len")), _num(dp.get("hidden"))
    n_pruned, clip = _num(dp.get("n_pruned")), _num(dp.get("clip"))
    rows.append(("notion", "(eps, 0)-LDP (discrete Laplace) or (eps, delta)-LDP (discrete Gaussian) per "
                 "chunk, against any other input; eps and delta are chosen at run time"))
    if seq_len is not None:
        rows.append(("release unit", f"each chunk of L = {seq_len:g} tokens is one release; a document of "
                     "k chunks costs k*eps (and k*delta); the number of chunks is not hidden"))
    if hidden is not None:
        rows.append(("hidden size d", f"{hidden:g}"))
    if n_pruned is not None:
        rows.append(("pruned |P|", f"{n_pruned:g} hidden indices set to 0 (public, fixed by the bundle)"))
    if clip is not None:
        rows.append(("clip C", f"{clip:.6g} (every encoder value clipped to [-C, C])"))
    try:
        n = _noise.effective_dim(int(seq_len), int(hidden), int(n_pruned))
        rows.append(("n = L x (d - |P|)", f"{n}"))
        rows.append(("sensitivity", f"L1 = {_noise.l1_sensitivity(clip, n):.6g}, "
                     f"L2 = {_noise.l2_sensitivity(clip, n):.6g}"))
    except Exception:  # missing or malformed numbers: show only what the manifest states
        pass
    rows.append(("noise families", "discrete Laplace (pure eps) or discrete Gaussian (eps, delta), "
                 "calibrated at run time to (C, n)"))
    rows.append(("noise sampling", "exact: integer arithmetic on the grid C/2^k, Laplace scale a rational and "
                 "Gaussian sigma^2 an integer, both rounded up (more noise), so no slack is added to eps "
                 "(report: noise_exact, epsilon_slack = 0)"))
    rows.append(("eps = inf", "refused unless explicitly allowed for evaluation: no noise, no privacy"))
    return rows


def inspect_data(path, trusted_keys=None) -> dict:
    """Everything ``bundle inspect`` shows of the bundle at ``path``, as a JSON-ready dict.

    Parameters
    ----------
    path : str or os.PathLike
        The bundle file (structure and hashes checked, no trust decision).
    trusted_keys : iterable or None
        Keys to consider trusted; ``None``: the local trust store.

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
    }


def _non_sensitive_rows(b) -> list[tuple[str, str]]:
    """SanText+: |V_N| and its first words (the words released in the clear w.p. 1 − p)."""
    if b.mechanism != "santext+":
        return []
    try:
        keep = np.flatnonzero(np.asarray(b.arrays["keep_row"]).astype(bool))
        vocab = json.loads(b.blob("vocab.json").decode("utf-8"))
        first = [_safe(vocab[i]) for i in keep[:_SHOW_WORDS]]
    except Exception:  # inspect shows what it can
        return []
    more = f", ... ({keep.size - len(first)} more)" if keep.size > len(first) else ""
    return [("non-sensitive |V_N|", f"{keep.size} words, in the clear w.p. 1 - p: "
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
    print(f"backend    {data['backend']} (what would sample it in this installation)")
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
