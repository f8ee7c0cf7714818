"""Bundle steps the comparison mechanisms share: parameter checks, build information, writing.

Every comparison bundle carries the SanText bundle's vocabulary (``blob/vocab.json``), tokenizer
(``blob/tokenizer.json``), ``valid_input`` and metric embedding (``emb_q``, ``emb_scale``: the public
embedding rounded to int8 codes with a per-row scale, :func:`ldptext_precompute.santext.build.quantize_int8`),
so that a metric bound over the same vocabulary is stated in the same metric as SanText's (and
charged in the same ledger unit).
"""
from __future__ import annotations

import datetime as _dt
import math
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

import ldptext
from ldptext import bundle as _bundle
from ldptext import keys as _keys
from ldptext.errors import ParameterError

from ..santext import embeddings as _emb

__all__ = ["check_epsilon", "build_info", "write_mechanism_bundle"]


def check_epsilon(epsilon: Any, name: str = "epsilon") -> float:
    """A finite ε > 0, or ParameterError (ε = ∞ — also 1e309 — releases without privacy).

    Parameters
    ----------
    epsilon : object
    name : str
        The parameter's name in the message.

    Returns
    -------
    float
    """
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, np.floating, np.integer)):
        raise ParameterError(f"{name} must be a finite number > 0")
    value = float(epsilon)
    if math.isinf(value) and value > 0:
        raise ParameterError(f"{name} = inf (or a value too large for a float, e.g. 1e309) is not private")
    if not (math.isfinite(value) and value > 0):
        raise ParameterError(f"{name} must be a finite number > 0")
    return value


def build_info(started: float, **extra: Any) -> dict:
    """The manifest's ``build`` section.

    Parameters
    ----------
    started : float
        ``time.perf_counter()`` at the start of the build.
    **extra
        More entries (backend, search seconds, ...).

    Returns
    -------
    dict
    """
    return dict(tool=f"ldptext {ldptext.__version__}", seconds=round(time.perf_counter() - started, 3),
                created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                python=platform.python_version(), **extra)


def write_mechanism_bundle(out: str | Path, *, mechanism: str, arrays: dict[str, np.ndarray],
                           manifest: dict, emb: _emb.Embeddings, sign_key: Any = None,
                           passphrase: bytes | None = None, blobs: dict[str, bytes] | None = None) -> Path:
    """Write (atomically) and sign a comparison bundle with the vocabulary and tokenizer blobs.

    Parameters
    ----------
    out : str or Path
    mechanism : str
        A registered mechanism (:mod:`ldptext.registry`).
    arrays : dict of str to np.ndarray
    manifest : dict
    emb : Embeddings
        Supplies ``tokenizer.json`` and ``vocab.json``.
    sign_key : key, path, None or False
        ``None``: the local developer key; ``False``: unsigned (development only).
    passphrase : bytes or None
    blobs : dict of str to bytes, optional
        More blobs (a faiss index).

    Returns
    -------
    Path
    """
    all_blobs = {"tokenizer.json": emb.tokenizer_json.encode("utf-8"), "vocab.json": _emb.vocab_json(emb.vocab)}
    all_blobs.update(blobs or {})
    return _bundle.write_bundle(out, mechanism=mechanism, arrays=arrays, manifest=manifest, blobs=all_blobs,
                                sign_key=_keys.build_signing_key(sign_key), passphrase=passphrase)
