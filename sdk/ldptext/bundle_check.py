"""Do a bundle's stated privacy parameters match what its arrays realise? Checked before (re-)signing.

A signature vouches for the manifest; ``ldptext bundle sign`` (with or without ``--force``) must
therefore never sign a manifest whose numbers the tables do not implement. :func:`check_parameters`
recomputes what it can from the arrays and refuses a mismatch with
:class:`~ldptext.errors.ParameterMismatchError`:

SanText / SanText+
    The full runtime schema and semantic checks (:class:`ldptext.santext.Sanitizer`, whose
    construction also runs the load-time check of :mod:`ldptext.santext_check`); then that check's ε,
    ε₀ and D_max tests on the fixed row sample, with D_max measured from every sampled row (the
    largest-norm rows and an even spread) to every valid input, and the stated largest verbatim rate
    (:mod:`ldptext.verbatim`) against every sampled row's own.
DP-BART
    The structural fields the noise calibration uses: |P| (``n_pruned``) = length of ``pruned``, its
    indices distinct and in [0, d); the encoder graph, run on one input of length L (``seq_len``),
    returns shape (1, L, d) with d = ``hidden``.

TEM, CusText / CusText+, CMP, Mahalanobis
    :func:`ldptext.token_runtime.check_parameters`: the bundle must load with its runtime class, then
    the runtime's ``check_parameters`` (TEM: ε and γ from the realised log-probabilities against
    −ε·min(d, γ)/2, γ against β, ``bot_count``, D_max; CusText: ε and the similarity from the realised
    log-probabilities over sampled output sets, p, group statistics; CMP / Mahalanobis: D_max in the
    guarantee's metric, S against λ — ε is in no array, the noise reads it from the manifest); every
    mechanism's stated worst case must be the one its parameters give.

p itself is not encoded in any array (the sampler reads it from the manifest), so the manifest's p
is by construction the realised one; it is range-checked.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from . import bundle as _bundle
from . import registry as _registry
from .bundle import Bundle
from .errors import BundleError, ParameterMismatchError, SignatureError

__all__ = ["check_parameters", "sign_bundle"]


def check_parameters(bundle: Bundle, *, every_row: bool = False) -> None:
    """Refuse a bundle whose manifest parameters disagree with its arrays.

    Parameters
    ----------
    bundle : Bundle
        A bundle whose structure and hashes were verified (trust need not be decided).
    every_row : bool
        Also check every input row's whole output law (:func:`ldptext.row_guard.check_all_rows`; in
        libldptext on every core when the extension is built): what ``bundle sign`` and ``bundle
        verify --full`` run, so that a table wrong on one row only is never signed.

    Raises
    ------
    ParameterMismatchError
        A stated parameter (ε, ε₀, p, head size, D_max, L, d, |P|) is not what the arrays realise, or the
        bundle is not a loadable bundle of its mechanism.
    """
    mechanism = _registry.get(bundle.mechanism)  # read_bundle refuses unknown mechanisms
    if mechanism.family == "santext":
        _check_santext(bundle, every_row)
    elif mechanism.family == "dpbart":
        _check_dpbart(bundle)
    else:  # every other token mechanism: its runtime's own check (TEM, CusText(+), CMP, Mahalanobis)
        from .token_runtime import check_parameters as check_comparison

        check_comparison(bundle, every_row=every_row)


def _check_santext(bundle: Bundle, every_row: bool = False) -> None:
    from .library import available
    from .row_guard import check_all_rows
    from .santext import Sanitizer
    from .santext_check import check_realised, fixed_rows
    from .verbatim import VerbatimRate, check_stated_maximum

    try:
        # construction runs the load-time check (ldptext.santext_check) on its own sample
        # a weak bundle is consistent or not like any other: its label is checked, not refused;
        # every row: in libldptext, on every core, where it is built
        san = Sanitizer(bundle, backend="auto" if every_row and available() else "fallback",
                        allow_weak_privacy=True)
    except ParameterMismatchError:
        raise
    except BundleError as e:
        raise ParameterMismatchError(f"not a loadable {bundle.mechanism} bundle: {e}") from None
    except ValueError:  # the sampler's own parameter check
        raise ParameterMismatchError(f"not a loadable {bundle.mechanism} bundle: parameters out of range") from None
    # before signing, D_max from every row of the fixed sample (load reads two)
    rows = fixed_rows(san.tables)
    check_realised(san.tables, mechanism=san.mechanism, epsilon=san.epsilon, epsilon0=san.epsilon0,
                   p=san.p, d_max=san.d_max, tolerance=san.tolerance, rows=rows, dmax_rows=rows)
    stated = VerbatimRate.from_manifest(san.manifest["privacy"].get("verbatim"))
    if stated is not None:
        check_stated_maximum(san.tables, san.epsilon, stated, rows)
    if every_row:
        check_all_rows(san)


def _check_dpbart(bundle: Bundle) -> None:
    cfg = bundle.manifest.get("dpbart")
    if not isinstance(cfg, dict):
        raise ParameterMismatchError("dpbart manifest section is missing")
    try:
        seq_len, hidden = int(cfg["seq_len"]), int(cfg["hidden"])
        n_pruned = cfg.get("n_pruned")
    except (KeyError, TypeError, ValueError):
        raise ParameterMismatchError("dpbart manifest lacks seq_len or hidden") from None
    if seq_len < 1 or hidden < 1:
        raise ParameterMismatchError("dpbart seq_len and hidden must be positive")
    pruned = np.asarray(bundle.arrays["pruned"], dtype=np.int64) if "pruned" in bundle.arrays \
        else np.zeros(0, np.int64)
    if pruned.ndim != 1:
        raise ParameterMismatchError("array 'pruned' is not one-dimensional")
    if n_pruned is not None and n_pruned != pruned.size:
        raise ParameterMismatchError(f"manifest n_pruned {n_pruned} is not |P| = {pruned.size} (array 'pruned')")
    if pruned.size and (pruned.min() < 0 or pruned.max() >= hidden or np.unique(pruned).size != pruned.size):
        raise ParameterMismatchError(f"pruned indices are not distinct indices in [0, {hidden})")
    try:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        enc = ort.InferenceSession(bundle.blob("encoder.onnx"), sess_options=opts,
                                   providers=["CPUExecutionProvider"])
        pad = int(cfg.get("special", {}).get("pad", 0))
        ids = np.full((1, seq_len), pad, dtype=np.int64)
        ids[0, 0] = int(cfg.get("special", {}).get("bos") or pad)
        out = enc.run(None, {"input_ids": ids, "attention_mask": np.ones((1, seq_len), np.int64)})[0]
    except BundleError as e:
        raise ParameterMismatchError(f"not a loadable dpbart bundle: {e}") from None
    except Exception as e:  # ONNX Runtime raises its own types
        raise ParameterMismatchError(f"the encoder graph does not run on an input of length L={seq_len}: "
                                     f"{type(e).__name__}") from None
    if tuple(out.shape) != (1, seq_len, hidden):
        raise ParameterMismatchError(f"the encoder graph returns shape {tuple(out.shape)}, but the manifest "
                                     f"states L={seq_len}, d={hidden}")


def sign_bundle(path: str | os.PathLike, sign_key, *, passphrase: bytes | None = None,
                out: str | os.PathLike | None = None, force: bool = False) -> Path:
    """(Re-)sign a bundle with ``sign_key``, writing ``out`` (default: in place, atomically).

    Content is verified against the manifest first. A bundle whose existing signature does not
    verify is refused unless ``force``: re-signing would otherwise launder a tampered file. Then, with
    or without ``force``, the manifest's privacy parameters must be what the arrays realise
    (:func:`check_parameters`, every row's whole law included; ``ParameterMismatchError``
    otherwise): a signature never vouches for an ε the tables do not implement.
    """
    bundle, info = _bundle.open_unverified(path)
    if info.signed and not info.valid and not force:
        raise SignatureError("bundle's existing signature does not verify; refusing to re-sign "
                             "(pass force=True if you rebuilt it yourself)")
    check_parameters(bundle, every_row=True)
    manifest = {k: v for k, v in bundle.manifest.items()
                if k not in ("format", "format_version", "mechanism", "arrays")}
    arrays = {n: np.array(a) for n, a in bundle.arrays.items() if not n.startswith(_bundle.BLOB_PREFIX)}
    blobs = {n[len(_bundle.BLOB_PREFIX):]: bytes(a) for n, a in bundle.arrays.items()
             if n.startswith(_bundle.BLOB_PREFIX)}
    mechanism = bundle.mechanism
    del bundle  # release the mapping before the file is replaced
    return _bundle.write_bundle(out if out is not None else path, mechanism=mechanism, arrays=arrays,
                        manifest=manifest, blobs=blobs, sign_key=sign_key, passphrase=passphrase)
