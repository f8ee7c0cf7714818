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
    :func:`ldptext.dpbart_check.open_checked`, the one check every DP-BART door runs (the manifest
    section, |P| against ``pruned``, the graphs run at their stated shapes, the decoding limit).

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
from .errors import SignatureError

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
    cls = _registry.get(bundle.mechanism).runtime_class()  # read_bundle refuses unknown mechanisms
    check = getattr(cls, "check_bundle", None)
    if check is not None:  # each runtime owns its check (ldptext.santext, ldptext.dpbart, TokenRuntime)
        check(bundle, every_row=every_row)
    else:  # a plugin's runtime: the one door, and its own check_parameters
        from .token_runtime import check_parameters as check_by_construction

        check_by_construction(bundle, every_row=every_row)


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
