"""Build a SanText / SanText+ bundle.

Mechanisms of Yue et al. 2021, *Differential Privacy for Text Analytics via Natural Text Sanitization*
(Findings of ACL), as presented in Yue 2023, *Data Synthesis: Boosting Utility and Privacy in NLP*
(PhD thesis, Ohio State), §2.4 (SanText and SanText+). Target, for every input row x over the output
domain O (O = V minus special tokens for SanText, O = V_S for SanText+):
Pr[M(x) = y] ∝ exp(−ε·d(x, y)/2).

Sampling tables (the schema: :class:`ldptext.santext_tables.SanTextTables`; consumed by
``native/santext_sampler.c``): slots 0..K-1 are the K nearest outputs ("head"), slot K stands for the
T = |O| − K others ("tail"). With log-weights ``W_j = −ε d_j / 2`` for the head and
``W_T = log T − ε·floor/2`` for the tail (floor ≤ every tail distance), an integer alias table gives
the exact proposal q̂ and the acceptance is exp(−γ_j) with
``γ_j = (log q̂_j − W_j) − min_i (log q̂_i − W_i) ≥ 0``. After rejection-and-restart the output law is
exactly ∝ exp(−ε d/2) — no truncation, and everything stays in log space, so no probability
underflows whatever ε is. The only rounding is float64 rounding of the γ's (and, when every γ's
float32 rounding moves it by at most :data:`GAMMA32_MAX_ROUNDING`, that rounding: the bundle then
stores float32 γ's, and the sampler uses exactly those), stated in the manifest as
``numeric.max_relative_error``. Head ids (uint16 when V ≤ 65,536) and alias slots (uint8 when
K + 1 ≤ 256) are stored narrow too: a GloVe-50k bundle is 64 % of its size with int32 / uint16 /
float64 tables at ε = 1 and 85 % at ε ≥ 3, where its exponents stay float64
(``benchmarks/bench_bundle_size.py``).

:func:`build_santext_bundle` is a short sequence of the steps below: load embeddings → public
frequencies and the sensitive split (:func:`split_domain`) → metric embedding (:func:`quantize_int8`)
→ neighbours (:func:`ldptext_precompute.santext.knn.cached_neighbours`) → tables
(:func:`santext_tables`) → manifest (:func:`santext_manifest`) → write (:func:`write_santext_bundle`).
"""
from __future__ import annotations

import datetime as _dt
import math
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

import ldptext
from ldptext import registry
from ldptext import alias as _alias
from ldptext import bundle as _bundle
from ldptext import keys as _keys
from ldptext import verbatim as _verbatim
from ldptext.errors import ParameterError, ParameterMismatchError
from ldptext.santext_tables import CLUSTER_GAMMA_UNIT, MAX_CLUSTERS, SanTextTables, gamma_float32
from ldptext.tokenization import TextTokenizer

from ldptext.santext import STATED_MAX_TOLERANCE
from ldptext.santext import notion as santext_notion

from . import embeddings as _emb
from . import frequency as _freq
from . import function_words as _fw
from . import identifiers as _ids
from .clusters import default_clusters
from .knn import DEFAULT_HEAD_SIZE, Neighbours, cached_neighbours
from ..progress import Progress

U = 2.0 ** -53
#: Store the acceptance exponents as float32 when rounding moves none by more than this (each
#: realised log-probability then moves by at most twice this, which the stated tolerance adds).
GAMMA32_MAX_ROUNDING = 1e-12
MECHANISMS = registry.names(family="santext")
#: The default non-sensitive set of SanText+ (:mod:`ldptext_precompute.santext.function_words`).
FUNCTION_WORDS = "function-words"
#: The default cap τ on P(M(x) = x) of every sensitive input (``--verbatim-cap``).
DEFAULT_VERBATIM_CAP = 0.5
#: A build's default cap: :data:`DEFAULT_VERBATIM_CAP`, or none with ``allow_weak_privacy``.
DEFAULT = "default"
#: Outputs whose rate is above τ·(1 − this) leave the output domain: the margin covers the float64
#: difference between this computation and the final one over the tables (a few units of 2^-53).
CAP_MARGIN = 1e-9


def quantize_int8(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The bundle's metric embedding: per-row scale (float32) times int8 codes.

    The mechanism's distance is the Euclidean distance of these exact values (the public
    embeddings rounded to 8 bits per coordinate, ~0.4 % of each vector's largest coordinate). Any
    public embedding defines a valid metric, so the guarantee is unchanged; the sampler reads 4×
    fewer bytes per candidate (it is memory-bound) and the bundle shrinks accordingly.

    Parameters
    ----------
    vectors : np.ndarray of float, shape (V, m)
        The public embedding.

    Returns
    -------
    codes : np.ndarray of int8, shape (V, m)
        ``rint(vectors / scale)`` clipped to [-127, 127].
    scale : np.ndarray of float32, shape (V,)
        Largest absolute coordinate / 127 per row (1 for a zero row).
    """
    v = np.asarray(vectors, dtype=np.float64)
    top = np.abs(v).max(axis=1)
    scale = np.where(top > 0, top / 127.0, 1.0).astype(np.float32)
    q = np.clip(np.rint(v / scale.astype(np.float64)[:, None]), -127, 127).astype(np.int8)
    return q, scale


def dequantize(q: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Exact float64 values of the metric embedding (float32 × int8 fits a double exactly).

    Parameters
    ----------
    q : np.ndarray of int8, shape (V, m)
        The codes of :func:`quantize_int8`.
    scale : np.ndarray of float32, shape (V,)
        The per-row scales.

    Returns
    -------
    np.ndarray of float64, shape (V, m)
        ``scale[:, None] * q``, the values the runtime computes distances from.
    """
    return scale.astype(np.float64)[:, None] * q.astype(np.float64)


#: the largest metric ε accepted. Far beyond any private setting (at ε = 1e6 a distance gap of 1e-4
#: already makes the nearest output e^50 times likelier). Below it, a too large ε is refused by the
#: tolerance check (ε·D_max enters the stated tolerance); above it ε·d/2 can overflow float64 to inf
#: (every weight 0) before that check is reached, which ended in a traceback.
MAX_EPSILON = 1e6


def check_parameters(epsilon: float, mechanism: str, p: float | None, w: float | None) -> None:
    """Refuse mechanism parameters outside their domain.

    Parameters
    ----------
    epsilon : float
        The metric ε: finite and > 0 (ε = ∞ — also what a literal such as 1e309 parses to — is
        refused: it releases every token as its nearest output, i.e. no privacy at all).
    mechanism : str
        ``"santext"`` or ``"santext+"``.
    p : float or None
        SanText+: probability of sanitizing a non-sensitive token, in (0, 1].
    w : float or None
        SanText+ with the frequency split: fraction of least frequent valid tokens that are
        sensitive, in [0, 1]; ``None`` when the non-sensitive set is not by frequency.

    Raises
    ------
    ParameterError
        A parameter is out of range (p and w are checked for SanText+ only).
    """
    if mechanism not in MECHANISMS:
        raise ParameterError(f"mechanism must be one of {MECHANISMS}")
    if isinstance(epsilon, (int, float)) and not isinstance(epsilon, bool) and math.isinf(epsilon) \
            and epsilon > 0:
        raise ParameterError("epsilon = inf (or a value too large for a float, e.g. 1e309) is not "
                             "private: every token would be released as its nearest output; SanText "
                             "bundles need a finite epsilon > 0")
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise ParameterError("epsilon must be a finite number > 0")
    if epsilon > MAX_EPSILON:
        raise ParameterError(f"epsilon must be at most {MAX_EPSILON:g}, got {epsilon:g}: beyond it every token "
                             f"is released as its nearest output (no privacy) and the tables' exponents "
                             f"leave the tested float range")
    if mechanism == "santext+":
        if p is None or not (0.0 < p <= 1.0):
            raise ParameterError("p must be in (0, 1]")
        if w is not None and not (0.0 <= w <= 1.0):
            raise ParameterError("w must be in [0, 1]")


def parse_non_sensitive(spec: "str | Path | None", w: float | None = None) -> tuple[str, Any]:
    """The SanText+ non-sensitive set a build asks for.

    Parameters
    ----------
    spec : str, Path or None
        ``"function-words"`` (the default: closed-class function words and punctuation,
        :mod:`ldptext_precompute.santext.function_words`), ``"frequency:W"`` (the paper's split: the
        fraction W of least frequent valid tokens is sensitive, by a public frequency list), or a
        file with one non-sensitive word per line (exact vocabulary entries; blank lines ignored).
    w : float or None
        The older way to ask for ``frequency:w`` (used when ``spec`` is ``None``).

    Returns
    -------
    (kind, value) : tuple
        ``("function-words", None)``, ``("frequency", W)`` or ``("file", Path)``.

    Raises
    ------
    ParameterError
        Both ``spec`` and ``w`` given, a malformed ``frequency:W``, or a missing file.
    """
    if spec is None:
        return (FUNCTION_WORDS, None) if w is None else ("frequency", float(w))
    if w is not None:
        raise ParameterError("give either non_sensitive or w (= 'frequency:w'), not both")
    text = str(spec)
    if text == FUNCTION_WORDS:
        return FUNCTION_WORDS, None
    if text.startswith("frequency:"):
        try:
            value = float(text.split(":", 1)[1])
        except ValueError:
            raise ParameterError("--non-sensitive frequency:W needs a number W in [0, 1]") from None
        if not 0.0 <= value <= 1.0:
            raise ParameterError("--non-sensitive frequency:W needs W in [0, 1]")
        return "frequency", value
    path = Path(text)
    if not path.is_file():
        raise ParameterError(f"--non-sensitive: expected 'function-words', 'frequency:W' or a word "
                             f"file; {path} is not a file")
    return "file", path


def check_head_size(head_size: int) -> None:
    """Refuse an alias-table head size outside [1, 65534] (slots are uint16, K + 1 of them).

    Parameters
    ----------
    head_size : int
        The requested K.

    Raises
    ------
    ParameterError
        Not an integer in [1, 65534].
    """
    if not (isinstance(head_size, int) and 1 <= head_size < 65535):
        raise ParameterError("head size must be an integer in [1, 65534]")


@dataclass(frozen=True, kw_only=True)
class DomainSplit:
    """Inputs, outputs and SanText+'s sensitive split of a vocabulary.

    Attributes
    ----------
    sensitive : np.ndarray of bool, shape (V,)
        V_S (SanText: every valid input).
    keep_row : np.ndarray of uint8, shape (V,)
        1 for a non-sensitive valid input of SanText+ (released unchanged with probability 1 − p).
    outputs : np.ndarray of int32, shape (O,)
        The output domain, ascending: V minus special tokens (SanText) or V_S minus specials, less
        the tokens that would not be read back (:func:`read_back_outputs`).
    frequency_source : str or None
        Where the non-sensitive set came from (``None`` for SanText, which has none).
    non_sensitive : str or None
        SanText+: the split asked for (``"function-words"``, ``"frequency:W"``, ``"file:NAME"``).
    not_read_back : int
        Tokens left out of the outputs because their released text would not be read back as
        themselves (:func:`read_back_outputs`).
    """

    sensitive: np.ndarray
    keep_row: np.ndarray
    outputs: np.ndarray
    frequency_source: str | None
    non_sensitive: str | None = None
    not_read_back: int = 0


def split_domain(emb: _emb.Embeddings, *, mechanism: str, w: float | None = None,
                 frequencies: np.ndarray | None = None,
                 non_sensitive: "str | Path | None" = None, read_back: bool = True) -> DomainSplit:
    """The output domain and (SanText+) the sensitive split, from public data, never from private text.

    Special and out-of-vocabulary rows (``[UNK]``, ``<unk>``) are never non-sensitive: where they
    are inputs they are sensitive and never kept (``keep_row = 0``), and they are never outputs.
    Nor (``read_back``) is a token whose released text the bundle's tokenizer would not read back
    as that token (:func:`read_back_outputs`): it stays an input, sanitized from its own row.

    Parameters
    ----------
    emb : Embeddings
        The vocabulary with its special-token and valid-input masks.
    mechanism : str
        ``"santext"`` or ``"santext+"``.
    w : float or None
        SanText+: ``frequency:w`` (kept for older callers; see ``non_sensitive``).
    frequencies : np.ndarray of float, shape (V,), optional
        For the frequency split: a public frequency per row; default: the wordfreq list
        (:func:`ldptext_precompute.santext.frequency.token_frequencies`).
    non_sensitive : str, Path or None
        SanText+'s non-sensitive set V_N (:func:`parse_non_sensitive`); default (with ``w=None``)
        the closed-class function words and punctuation marks.
    read_back : bool
        Leave out the outputs that are not read back (every builder does; SanText's does it in
        :func:`restricted_domain`, after the identifier rule, so that identifiers count as such).

    Returns
    -------
    DomainSplit

    Raises
    ------
    ParameterError
        ``frequencies`` has the wrong length, the split is malformed, or the output domain is empty.
    """
    n_rows = len(emb.vocab)
    plain = emb.valid_input & ~emb.special  # rows that may be non-sensitive
    spec = None
    if mechanism == "santext+":
        kind, value = parse_non_sensitive(non_sensitive, w)
        if kind == "frequency":
            freqs = (_freq.token_frequencies(emb.vocab, emb.kind, emb.tokenizer_json)
                     if frequencies is None else np.asarray(frequencies, dtype=np.float64))
            if freqs.shape != (n_rows,):
                raise ParameterError("frequencies must have one entry per vocabulary row")
            sensitive = _freq.sensitive_mask(freqs, plain, value)
            source = _freq.SOURCE if frequencies is None else "caller-supplied frequencies"
            spec = f"frequency:{value:g}"
        else:
            if kind == FUNCTION_WORDS:
                words, lower = _fw.function_words(), True
                source, spec = _fw.SOURCE, FUNCTION_WORDS
            else:
                words = frozenset(line.strip() for line in value.read_text(encoding="utf-8").splitlines()
                                  if line.strip())
                lower, source, spec = False, f"word file {value.name}", f"file:{value.name}"
            listed = np.array([(t.lower() if lower else t) in words for t in emb.vocab], dtype=bool)
            sensitive = plain & ~listed
        sensitive |= emb.valid_input & emb.special  # [UNK] / <unk>: always sensitive
        keep_row = (plain & ~sensitive).astype(np.uint8)
        output_mask = sensitive & ~emb.special
    else:
        sensitive = emb.valid_input.copy()
        keep_row = np.zeros(n_rows, dtype=np.uint8)
        output_mask = ~emb.special
        source = None
    outputs, not_read_back = np.flatnonzero(output_mask).astype(np.int32), 0
    if read_back:
        outputs, not_read_back = read_back_outputs(emb, outputs)
    if outputs.size == 0:
        raise ParameterError("the output domain is empty (w too small?)")
    return DomainSplit(sensitive=sensitive, keep_row=keep_row, outputs=outputs, frequency_source=source,
                       non_sensitive=spec, not_read_back=not_read_back)


def read_back_outputs(emb: _emb.Embeddings, outputs: np.ndarray) -> tuple[np.ndarray, int]:
    """The outputs whose released text the embeddings' tokenizer reads back as themselves, and how
    many were left out.

    Every runtime refuses a bundle with any other output (:meth:`ldptext.tokenization.TextTokenizer.read_back`,
    libldptext's ``ldp_tokenizer_check_outputs``): such a token's text would be read as other
    tokens (GloVe's ``u.s.`` or ``1,000``, split at punctuation; a look-alike of an input word, in
    upper case or with an invisible character), or it is a WordPiece piece no text is read as
    (``##.``, accented or CJK continuations). No input is ever such a token either.

    Parameters
    ----------
    emb : Embeddings
    outputs : np.ndarray of int32, shape (O,)
        Candidate outputs, ascending.

    Returns
    -------
    (np.ndarray of int32, int)
        The outputs that read back (ascending) and the number left out.
    """
    ok = TextTokenizer(emb.tokenizer_json).read_back(outputs)
    return outputs[ok], int((~ok).sum())


def read_back_statement(domain: DomainSplit) -> dict[str, Any]:
    """The ``privacy.not_outputs`` section of a builder whose only removal is the read-back rule
    (TEM, CusText, CMP; SanText's own is :meth:`RemovedOutputs.as_manifest`)."""
    return {"not_read_back": int(domain.not_read_back),
            "meaning": "valid inputs that are not outputs: never released, sanitized from their own row"}


class RemovedOutputs(NamedTuple):
    """Valid inputs a build left out of the output domain (never released; still sanitized)."""

    identifiers: int  # identifier-shaped tokens (:mod:`ldptext_precompute.santext.identifiers`)
    above_cap: int    # outputs whose verbatim rate was above the cap (:func:`capped_outputs`)
    rule: str | None  # the identifier rule applied (None: identifiers kept as outputs)
    not_read_back: int = 0  # tokens whose text is not read back as themselves (:func:`read_back_outputs`)

    def as_manifest(self) -> dict[str, Any]:
        """The manifest's ``privacy.not_outputs`` section."""
        return {"identifiers": self.identifiers, "above_verbatim_cap": self.above_cap,
                "identifier_rule": self.rule, "not_read_back": self.not_read_back,
                "meaning": "valid inputs that are not outputs: never released, sanitized from their own row"}


def restricted_domain(emb: _emb.Embeddings, domain: DomainSplit, emb_q: np.ndarray, emb_scale: np.ndarray,
                      *, epsilon: float, cap: float | None, identifiers: bool = True,
                      allow_weak_privacy: bool = True, progress: bool = False
                      ) -> tuple[DomainSplit, RemovedOutputs]:
    """The output domain after the identifier rule, the read-back rule (:func:`read_back_outputs`)
    and the verbatim cap (in that order).

    Parameters
    ----------
    emb : Embeddings
    domain : DomainSplit
        :func:`split_domain`'s, with ``read_back=False``.
    emb_q, emb_scale : np.ndarray
        The metric embedding.
    epsilon : float
    cap : float or None
        τ (:func:`capped_outputs`); ``None``: no cap.
    identifiers : bool
        Leave identifier-shaped tokens out of the outputs (:mod:`~ldptext_precompute.santext.identifiers`).
    allow_weak_privacy : bool
        With a cap: accept an ε whose rates before the cap are near identity (otherwise refused
        here, as an uncapped build would be: the cap would leave almost no output).
    progress : bool
        Show the cap's progress on stderr (:func:`capped_outputs`).

    Returns
    -------
    (DomainSplit, RemovedOutputs)

    Raises
    ------
    ParameterError
        No output would remain.
    WeakPrivacyError
        A cap is given, the rates before it are near identity and ``allow_weak_privacy`` is False.
    """
    n_ids = 0
    if identifiers:
        ids = _ids.identifier_mask(emb.vocab)
        n_ids = int(ids[domain.outputs].sum())
        if n_ids:
            domain = without_outputs(domain, ids)
    kept, n_unread = read_back_outputs(emb, domain.outputs)
    if n_unread:
        domain = without_outputs(domain, ~np.isin(np.arange(len(emb.vocab)), kept))
    n_cap = 0
    if cap is not None:
        drop, before = capped_outputs(emb_q, emb_scale, domain, emb.valid_input, epsilon, cap,
                                      progress=progress)
        _verbatim.refuse_near_identity(before, allow=allow_weak_privacy, flag="--allow-weak-privacy")
        n_cap = int(drop.sum())
        if n_cap:
            domain = without_outputs(domain, drop)
    return domain, RemovedOutputs(n_ids, n_cap, _ids.DESCRIPTION if identifiers else None, n_unread)


def check_verbatim_cap(cap: float | None) -> None:
    """Refuse a verbatim cap outside (0, 1] (``None``: no cap).

    Raises
    ------
    ParameterError
    """
    if cap is None:
        return
    if isinstance(cap, bool) or not isinstance(cap, (int, float)) or not (0.0 < cap <= 1.0):
        raise ParameterError("the verbatim cap must be a probability in (0, 1] (or none)")


def resolve_verbatim_cap(cap: "float | str | None", allow_weak_privacy: bool) -> float | None:
    """The cap a build enforces: ``"default"`` is :data:`DEFAULT_VERBATIM_CAP`, except that a build
    allowing weak privacy (an ε at which most sensitive words may be released unchanged, which a
    cap of 0.5 would contradict) has none unless one is given.

    Parameters
    ----------
    cap : float, "default" or None
    allow_weak_privacy : bool

    Returns
    -------
    float or None

    Raises
    ------
    ParameterError
        A cap outside (0, 1].
    """
    if cap == DEFAULT:
        cap = None if allow_weak_privacy else DEFAULT_VERBATIM_CAP
    check_verbatim_cap(cap)
    return None if cap is None else float(cap)


def without_outputs(domain: DomainSplit, drop: np.ndarray) -> DomainSplit:
    """``domain`` with the rows of ``drop`` (bool, shape (V,)) left out of the output domain.

    The inputs, V_S and the kept rows are unchanged: a dropped row stays a valid input, sanitized
    from its own row over the remaining outputs, and is never released, by any input. For every
    input x the law is still Pr[M(x) = y] ∝ exp(−ε·d(x, y)/2) over the (smaller) output domain, so
    the metric bound holds unchanged (its proof needs no property of the output set).

    Raises
    ------
    ParameterError
        No output would remain.
    """
    keep = ~np.asarray(drop, dtype=bool)[domain.outputs]
    if not keep.any():
        raise ParameterError("no output would remain: every output is identifier-shaped or released "
                             "unchanged above the verbatim cap at this epsilon (lower epsilon, raise "
                             "--verbatim-cap, or --verbatim-cap none)")
    return DomainSplit(sensitive=domain.sensitive, keep_row=domain.keep_row,
                       outputs=domain.outputs[keep], frequency_source=domain.frequency_source,
                       non_sensitive=domain.non_sensitive, not_read_back=domain.not_read_back)


class _Metric(NamedTuple):
    """The metric embedding and an output domain, as :mod:`ldptext.verbatim` reads them from tables
    (the same arithmetic as over the built tables, before there are any)."""

    emb_q: np.ndarray
    emb_scale: np.ndarray
    emb_sqnorm: np.ndarray
    outputs: np.ndarray

    @property
    def n_rows(self) -> int:
        return int(self.emb_q.shape[0])

    @property
    def dim(self) -> int:
        return int(self.emb_q.shape[1])


#: Rows per block of :func:`capped_outputs`' update (a block holds rows × removed float64 values).
_CAP_BLOCK = 1024
#: Rows per progress update of :func:`verbatim_probabilities`: a multiple of the block of
#: :func:`ldptext.verbatim.verbatim_probabilities`, so the rows are computed in the same blocks as
#: by one call over all of them (the same values, bit for bit).
_RATE_CHUNK = 16 * _verbatim._BLOCK


def verbatim_probabilities(t: Any, epsilon: float, rows: np.ndarray, *, desc: str,
                           progress: bool) -> np.ndarray:
    """:func:`ldptext.verbatim.verbatim_probabilities` of ``rows``, a chunk of rows at a time with
    progress on stderr (the |rows| × |O| stage of a build: minutes at 30,000+ rows, which showed
    nothing). ``desc`` labels the progress line; the values are those of one call."""
    rows = np.asarray(rows, dtype=np.int64)
    parts = []
    with Progress(int(rows.size), desc, unit="row", enabled=progress, leave=False) as bar:
        for s in range(0, rows.size, _RATE_CHUNK):
            part = _verbatim.verbatim_probabilities(t, float(epsilon), rows[s:s + _RATE_CHUNK])
            parts.append(part)
            bar.update(int(part.size))
    return np.concatenate(parts) if parts else np.empty(0)


def tables_verbatim_rate(t: SanTextTables, epsilon: float, *, cap: float | None,
                         progress: bool = False) -> "_verbatim.VerbatimRate":
    """:func:`ldptext.verbatim.verbatim_rate` of the built tables, with progress on stderr.

    Raises
    ------
    ParameterMismatchError
        ``cap`` is given and a sensitive input's rate exceeds it (the build's removal was wrong).
    """
    rows = _verbatim.sensitive_inputs(t)
    rates = verbatim_probabilities(t, epsilon, rows, desc="santext verbatim rates", progress=progress)
    rate = _verbatim.VerbatimRate.of(rates, cap)
    if cap is not None and rate.maximum > cap:
        raise ParameterMismatchError(f"a sensitive input is released unchanged with probability "
                                     f"{rate.maximum!r}, above the cap {cap!r}")
    return rate


def capped_outputs(emb_q: np.ndarray, emb_scale: np.ndarray, domain: DomainSplit,
                   valid_input: np.ndarray, epsilon: float, cap: float, *, progress: bool = False
                   ) -> tuple[np.ndarray, "_verbatim.VerbatimRate"]:
    """The outputs to leave out so that every sensitive input's verbatim rate is at most ``cap``.

    P(M(x) = x) = 1 / Σ_{y ∈ O} exp(−ε·(d(x, y) − d(x, x))/2) for a sensitive x ∈ O, and 0 for a
    sensitive x ∉ O. Leaving x out of O makes its rate 0 and only raises the others' (their sums
    lose a term), so the outputs above the cap are left out in rounds, each updating the other rows'
    sums by the removed terms, until none is above: the smallest such set (a row is removed only
    when its rate over the outputs that remain exceeds the cap). The decision uses
    ``cap·(1 − CAP_MARGIN)``; the build recomputes every rate over its tables and refuses a rate above
    the cap (:func:`ldptext.verbatim.verbatim_rate`).

    Parameters
    ----------
    emb_q, emb_scale : np.ndarray
        The metric embedding (:func:`quantize_int8`).
    domain : DomainSplit
        Inputs, V_S and the outputs before the cap.
    valid_input : np.ndarray of bool, shape (V,)
    epsilon : float
    cap : float
        τ in (0, 1].
    progress : bool
        Show progress on stderr: the rates before the cap, then the rounds' updates.

    Returns
    -------
    drop : np.ndarray of bool, shape (V,)
        True for the outputs to leave out.
    before : VerbatimRate
        The rates over every sensitive input before the cap (the near-identity rule reads it).
    """
    from ldptext.santext_tables import row_sqnorms

    v = emb_q.shape[0]
    drop = np.zeros(v, dtype=bool)
    metric = _Metric(emb_q, emb_scale, row_sqnorms(emb_q), domain.outputs)
    sensitive = np.asarray(valid_input, dtype=bool) & ~domain.keep_row.astype(bool)
    rows = domain.outputs[sensitive[domain.outputs]].astype(np.int64)  # sensitive rows that are outputs
    rates = verbatim_probabilities(metric, epsilon, rows, desc="santext verbatim cap: rates", progress=progress)
    # every other sensitive input is not an output: rate 0
    before = _verbatim.VerbatimRate.of(np.concatenate([rates, np.zeros(int(sensitive.sum()) - rows.size)]))
    inv = 1.0 / rates  # Σ_y of the relative weights
    level = 1.0 / (cap * (1.0 - CAP_MARGIN))
    # the rounds' number is not known in advance: the bar counts rows updated over all rounds
    with Progress(None, "santext verbatim cap: removing outputs", unit="row", enabled=progress,
                  leave=False) as bar:
        while True:
            over = inv < level  # rate above the (margined) cap
            if not over.any():
                return drop, before
            removed = rows[over]
            drop[removed] = True
            rows, inv = rows[~over], inv[~over]
            if rows.size == 0:
                return drop, before
            for s in range(0, rows.size, _CAP_BLOCK):
                xs = rows[s:s + _CAP_BLOCK]
                inv[s:s + _CAP_BLOCK] -= _verbatim.relative_weights(metric, float(epsilon), xs,
                                                                    removed).sum(axis=1)
                bar.update(int(xs.size))


class Proposal(NamedTuple):
    """The ε-dependent part of the tables (see the module docstring for the construction)."""

    alias_threshold: np.ndarray  # uint32 (V, K+1)
    alias_index: np.ndarray      # uint16 (V, K+1)
    accept_gamma: np.ndarray     # float64 (V, K+1)


def sampling_tables(nb: Neighbours, n_outputs: int, epsilon: float) -> Proposal:
    """ε-dependent tables from the ε-independent neighbour structure.

    Parameters
    ----------
    nb : Neighbours
        Head ids (V, K), head distances (V, K) and tail floors (V,).
    n_outputs : int
        |O|; the tail holds ``|O| - K`` outputs.
    epsilon : float
        The metric ε.

    Returns
    -------
    Proposal
        ``alias_threshold`` (uint32, (V, K+1)), ``alias_index`` (uint16, (V, K+1)) and
        ``accept_gamma`` (float64, (V, K+1), minimum 0 per row).
    """
    rows, k = nb.head_ids.shape
    half = epsilon / 2.0
    tail_count = n_outputs - k
    log_w = np.empty((rows, k + 1), dtype=np.float64)
    log_w[:, :k] = -half * nb.head_dist
    log_w[:, k] = (math.log(tail_count) - half * nb.tail_floor) if tail_count > 0 else -np.inf
    mass = _alias.integer_masses(log_w)
    threshold, alias_index = _alias.build_tables(mass)
    with np.errstate(divide="ignore", invalid="ignore"):  # zero-mass slots: -inf, masked below
        log_q = np.log(mass.astype(np.float64)) - math.log((k + 1) * _alias.COLUMN)
        ratio = np.where(mass > 0, log_q - log_w, np.inf)
    gamma = ratio - ratio.min(axis=1, keepdims=True)
    gamma[mass == 0] = 0.0  # never proposed
    return Proposal(alias_threshold=threshold, alias_index=alias_index, accept_gamma=gamma)


class Tables(NamedTuple):
    """The validated tables of a build and the rounding their exponents carry."""

    tables: SanTextTables
    gamma_rounding: float  # max |stored γ − float64 γ| (0 when float64 γ's are stored)


def santext_tables(*, emb_q: np.ndarray, emb_scale: np.ndarray, valid_input: np.ndarray,
                   domain: DomainSplit, nb: Neighbours, epsilon: float) -> Tables:
    """The bundle's arrays, as the validated schema record.

    Parameters
    ----------
    emb_q : np.ndarray of int8, shape (V, m)
        Metric embedding codes (:func:`quantize_int8`).
    emb_scale : np.ndarray of float32, shape (V,)
        Their per-row scales.
    valid_input : np.ndarray of bool, shape (V,)
        Rows that may be inputs.
    domain : DomainSplit
        Outputs, V_S and the kept rows.
    nb : Neighbours
        The neighbour structure over ``domain.outputs``.
    epsilon : float
        The metric ε.

    Returns
    -------
    Tables
        The tables, validated on construction (the same checks the runtime applies when loading)
        and holding exactly the exponents the bundle stores (float32 when their rounding is within
        :data:`GAMMA32_MAX_ROUNDING`), and the exponents' rounding (pass it to
        :func:`numeric_tolerance` as ``gamma_rounding``).
    """
    proposal = sampling_tables(nb, int(domain.outputs.size), float(epsilon))
    tail_cluster, cluster_gamma = cluster_exponents(nb, float(epsilon))
    gamma, rounding = proposal.accept_gamma, 0.0
    gamma32, change = gamma_float32(gamma)
    if change <= GAMMA32_MAX_ROUNDING:
        gamma, rounding = gamma32, change
    tables = SanTextTables(
        emb_q=emb_q, emb_scale=emb_scale, outputs=domain.outputs, head_ids=nb.head_ids,
        alias_threshold=proposal.alias_threshold, alias_index=proposal.alias_index,
        accept_gamma=gamma, tail_floor=nb.tail_floor.astype(np.float64),
        keep_row=domain.keep_row, sensitive=domain.sensitive, valid_input=valid_input,
        tail_cluster=tail_cluster, cluster_gamma=cluster_gamma)
    return Tables(tables, rounding)


#: Relative slack of the cluster exponents below their bound: covers the sampler's roundings of
#: ε/2·(d − tail_floor) (a few units of 2^-53) with a wide margin.
CLUSTER_GAMMA_SLACK = 1e-12


def cluster_exponents(nb: Neighbours, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """The tables' tail clusters and, per row and cluster, the exponent known before the distance.

    ``cluster_gamma[x, c] = floor(ε/2 · (cluster_floor[x, c] − tail_floor[x]) · (1 − slack) · 32)``,
    capped at 255 (0 where the bound is below the tail floor, 255 where the cluster has no tail
    member). Since ``cluster_floor`` is a rigorous lower bound of the sampler's own distance, the
    sampler's second exponent ε/2·(d − tail_floor) − cluster_gamma/32 is never negative
    (``native/santext_sampler.h``; :class:`ldptext.santext_tables.SanTextTables`).

    Parameters
    ----------
    nb : Neighbours
        The neighbour structure with its clusters.
    epsilon : float
        The metric ε.

    Returns
    -------
    tail_cluster : np.ndarray of uint8, shape (V,)
    cluster_gamma : np.ndarray of uint8, shape (V, C)
    """
    half = float(epsilon) / 2.0
    gap = nb.cluster_floor - nb.tail_floor[:, None]
    with np.errstate(invalid="ignore", over="ignore"):
        units = np.floor(half * np.maximum(gap, 0.0) * (1.0 - CLUSTER_GAMMA_SLACK) / CLUSTER_GAMMA_UNIT)
    units = np.where(np.isfinite(units), np.minimum(units, 255.0), 255.0)
    return nb.tail_cluster.astype(np.uint8), units.astype(np.uint8)


def numeric_tolerance(epsilon: float, nb: Neighbours, metric_vectors: np.ndarray,
                      n_outputs: int, gamma_rounding: float = 0.0) -> float:
    """Bound on |log P̂(y | x) − log P(y | x)| for every realised probability P̂ against the formula P.

    Each realised log-weight is within E of the exact −ε·d/2 (float64 rounding of γ, a few
    operations on numbers of magnitude ≤ ε·D_max/2 + log(S·2^32·T); of the head distances,
    (m+2)u relative; and of the runtime's tail distance, whose d² is within 8u(|a|²+|b|²) of the
    truth, so d is within min(√·, ·/(2·floor)) with floor ≤ d). Normalising moves every log-probability
    by at most E more, so the bound returned is 2E. It is also a bound on the relative error
    (|P̂/P − 1| ≤ expm1(tolerance)), and for realised probabilities the (U)MLDP ratio bound holds
    with slack exp(2·tolerance).

    Parameters
    ----------
    epsilon : float
        The metric ε.
    nb : Neighbours
        The neighbour structure (head size K, tail floors, D_max).
    metric_vectors : np.ndarray of float64, shape (V, m)
        The exact metric embedding (:func:`dequantize`).
    n_outputs : int
        |O|.
    gamma_rounding : float
        Largest change of an exponent by float32 storage (:class:`Tables`); every realised
        log-weight moves by exactly its exponent's change.

    Returns
    -------
    float
        The tolerance the manifest states as ``numeric.max_relative_error``.
    """
    rows, k = nb.head_ids.shape
    dim = metric_vectors.shape[1]
    sq = np.einsum("ij,ij->i", metric_vectors, metric_vectors)
    e = 8 * U * (sq + sq.max())
    with np.errstate(divide="ignore"):
        dd = np.minimum(np.sqrt(e), np.where(nb.tail_floor > 0, e / (2 * nb.tail_floor), np.inf))
    magnitude = epsilon * nb.d_max / 2 + math.log((k + 1) * _alias.COLUMN) + \
        math.log(max(n_outputs, 2))
    # the tail's trials (santext_sampler.c accept_tail): one more rounding than the single exponent
    # (2u·magnitude, counted twice) and two roundings of a table logarithm L (< 2^-49 each,
    # cluster_bounds.h: the cluster bound's, and bernoulli_exp_by_table's)
    per_weight = (18 * U * magnitude + 2.0 ** -48 + epsilon / 2 * nb.d_max * (dim + 2) * U
                  + (epsilon / 2 * float(dd.max()) if n_outputs > k else 0.0) + gamma_rounding)
    return float(2 * per_weight)


def check_tolerance(tolerance: float) -> None:
    """Refuse a bundle whose realised tolerance is above the one the documentation states.

    Parameters
    ----------
    tolerance : float
        :func:`numeric_tolerance` of the bundle being built.

    Raises
    ------
    ParameterError
        ``tolerance`` exceeds :data:`ldptext.santext.STATED_MAX_TOLERANCE` (1e-9): the bundle would
        claim less error than it realises (happens only at very large ε·D_max; lower ε).
    """
    if not (math.isfinite(tolerance) and 0 <= tolerance <= STATED_MAX_TOLERANCE):
        raise ParameterError(f"numeric tolerance {tolerance:.2e} of this build exceeds the stated maximum "
                             f"{STATED_MAX_TOLERANCE:g} (epsilon·D_max too large); use a smaller epsilon")


def santext_manifest(*, mechanism: str, epsilon: float, p: float | None, w: float | None,
                     emb: _emb.Embeddings, domain: DomainSplit, nb: Neighbours,
                     metric_vectors: np.ndarray, started: float, gamma_rounding: float = 0.0,
                     verbatim: "_verbatim.VerbatimRate | None" = None,
                     removed: "RemovedOutputs | None" = None) -> dict[str, Any]:
    """The manifest sections of a SanText(+) bundle (the bundle adds format, mechanism, arrays).

    Parameters
    ----------
    mechanism : str
        ``"santext"`` or ``"santext+"``.
    epsilon : float
        The metric ε.
    p, w : float or None
        SanText+'s parameters (``None`` for SanText; ``w`` is ``None`` unless the split is by
        frequency).
    emb : Embeddings
        The source embeddings (vocabulary, kind, provenance).
    domain : DomainSplit
        Outputs, V_S and the frequency source.
    nb : Neighbours
        Head size, D_max and the search backend.
    metric_vectors : np.ndarray of float64, shape (V, m)
        The exact metric embedding.
    started : float
        ``time.perf_counter()`` at the start of the build.
    gamma_rounding : float
        :attr:`Tables.gamma_rounding`.
    verbatim : VerbatimRate or None
        The tables' verbatim rate (:func:`ldptext.verbatim.verbatim_rate`), stated in
        ``privacy.verbatim``; a near-identity rate is also stated in ``privacy.weak_privacy``.
    removed : RemovedOutputs or None
        What the build left out of the output domain, stated in ``privacy.not_outputs``.

    Returns
    -------
    dict
        Sections ``params``, ``privacy``, ``vocab``, ``sources``, ``numeric`` and ``build``.

    Raises
    ------
    ParameterError
        The realised numeric tolerance is above the stated maximum (:func:`check_tolerance`).
    """
    n_outputs = int(domain.outputs.size)
    tolerance = numeric_tolerance(float(epsilon), nb, metric_vectors, n_outputs, gamma_rounding)
    check_tolerance(tolerance)
    params = dict(epsilon=float(epsilon), p=p, w=w, head_size=int(nb.head_ids.shape[1]),
                  epsilon0=(math.log(1.0 / p) if mechanism == "santext+" else 0.0))
    if mechanism == "santext+":
        params["non_sensitive"] = domain.non_sensitive
    n_kept = int(domain.keep_row.sum())
    privacy = dict(d_max=nb.d_max, metric="euclidean over the bundle's int8-quantized embeddings",
                   quantization_max_abs_error=float(np.abs(metric_vectors - emb.vectors).max()),
                   notion=santext_notion(mechanism))
    if verbatim is not None:
        privacy.update(verbatim=verbatim.as_manifest(), **verbatim.weak_privacy_statement())
    if removed is not None:
        privacy["not_outputs"] = removed.as_manifest()
    return dict(
        params=params,
        privacy=privacy,
        vocab=dict(size=len(emb.vocab), dim=int(emb.vectors.shape[1]), outputs=n_outputs,
                   sensitive=int(domain.sensitive.sum()), non_sensitive=n_kept, kind=emb.kind),
        sources=dict(embeddings=emb.source, frequencies=domain.frequency_source),
        numeric=dict(max_relative_error=tolerance, stated_maximum=STATED_MAX_TOLERANCE,
                     meaning="bound on |log P_realised - log P_formula| for every (x, y); the ratio "
                             "bound holds with slack exp(2 x this)",
                     above_stated_maximum="refused at build"),
        build=dict(tool=f"ldptext {ldptext.__version__}", backend=nb.backend,
                   neighbour_seconds=round(nb.seconds, 3),
                   seconds=round(time.perf_counter() - started, 3),
                   created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                   python=platform.python_version()),
    )


def write_santext_bundle(out: str | Path, *, mechanism: str, tables: SanTextTables,
                         manifest: dict[str, Any], emb: _emb.Embeddings, sign_key: Any = None,
                         passphrase: bytes | None = None) -> Path:
    """Write (atomically) and sign the bundle: the tables, the manifest, tokenizer and vocabulary.

    Parameters
    ----------
    out : str or Path
        The bundle file.
    mechanism : str
        ``"santext"`` or ``"santext+"``.
    tables : SanTextTables
        The arrays (:meth:`SanTextTables.stored_arrays` are written).
    manifest : dict
        :func:`santext_manifest`.
    emb : Embeddings
        Supplies the ``tokenizer.json`` and ``vocab.json`` blobs.
    sign_key : key, path, None or False
        ``None``: the local developer key; ``False``: unsigned (development only).
    passphrase : bytes or None
        For an encrypted PEM key.

    Returns
    -------
    Path
        The written bundle.
    """
    blobs = {"tokenizer.json": emb.tokenizer_json.encode("utf-8"), "vocab.json": _emb.vocab_json(emb.vocab)}
    return _bundle.write_bundle(out, mechanism=mechanism, arrays=tables.stored_arrays(), manifest=manifest,
                                blobs=blobs, sign_key=_keys.build_signing_key(sign_key), passphrase=passphrase)


def build_santext_bundle(out: str | Path, *, embeddings: str = _emb.GLOVE, epsilon: float,
                         mechanism: str = "santext+", p: float | None = 0.3, w: float | None = None,
                         vocab_size: int | None = None, head_size: int = DEFAULT_HEAD_SIZE,
                         tail_clusters: int | None = None, sign_key: Any = None,
                         passphrase: bytes | None = None, device: str = "auto",
                         cache_dir: str | Path | None = None, progress: bool = True,
                         loaded: "_emb.Embeddings | None" = None,
                         frequencies: np.ndarray | None = None,
                         non_sensitive: str | Path | None = None, allow_weak_privacy: bool = False,
                         verbatim_cap: "float | str | None" = None, identifier_outputs: bool = False) -> Path:
    """Build and sign a SanText(+) bundle.

    Parameters
    ----------
    out : str or Path
        The bundle file to write.
    embeddings : str
        ``"glove-6b-50d"``, ``"minilm-wordpiece"``, or a GloVe text / ``.npy`` file
        (:func:`ldptext_precompute.santext.embeddings.load_embeddings`).
    epsilon : float
        The metric ε (> 0).
    mechanism : str
        ``"santext"`` or ``"santext+"`` (default).
    p : float or None
        SanText+: probability of sanitizing a non-sensitive token, (0, 1]; ignored for SanText.
    w : float or None
        SanText+: shorthand for ``non_sensitive="frequency:w"`` (the paper's split: the fraction w
        of least frequent valid tokens is sensitive); ``None`` (default): the function-word split.
    vocab_size : int or None
        Word-level embeddings: keep the first (most frequent) N words.
    head_size : int
        Alias-table head size K (capped at |O|).
    tail_clusters : int or None
        Tail clusters C in [1, 256] (:mod:`ldptext_precompute.santext.clusters`; capped at |O|);
        ``None`` (default): :func:`~ldptext_precompute.santext.clusters.default_clusters` of |O|.
    sign_key : key, path, None or False
        ``None`` signs with the local developer key (``ldptext.keys.developer_key``); ``False``
        writes an unsigned development bundle.
    passphrase : bytes or None
        For an encrypted PEM key.
    device : str
        Neighbour search: ``"auto"``, ``"cpu"``, ``"cuda"`` or ``"numpy"``.
    cache_dir : str or Path or None
        Reuse the ε-independent neighbour structure here.
    progress : bool
        Show progress on stderr for every long stage: the verbatim cap, the neighbour search and the
        verbatim rates of the tables (:mod:`ldptext_precompute.progress`).
    loaded : Embeddings or None
        Embeddings already in memory (then ``embeddings`` and ``vocab_size`` are unused).
    frequencies : np.ndarray of float, shape (V,), optional
        For the frequency split: a public frequency per vocabulary row (default: wordfreq).
    non_sensitive : str, Path or None
        SanText+'s non-sensitive set V_N, released in the clear with probability 1 − p:
        ``"function-words"`` (default: closed-class function words and punctuation marks),
        ``"frequency:W"``, or a file with one word per line (:func:`parse_non_sensitive`).
        Special and out-of-vocabulary rows are always sensitive.
    allow_weak_privacy : bool
        Accept an ε at which the median sensitive word is released unchanged with probability at
        least :data:`ldptext.verbatim.NEAR_IDENTITY_MEDIAN` (the bundle and every report say so).
        With ``verbatim_cap="default"`` it also turns the default cap off.
    verbatim_cap : float, "default" or None
        τ in (0, 1]: every sensitive input is released unchanged with probability at most τ; an
        output whose rate would exceed it leaves the output domain (it stays a valid input, is
        sanitized from its own row and is never released: :func:`capped_outputs`). ``"default"``:
        :data:`DEFAULT_VERBATIM_CAP` (none with ``allow_weak_privacy``), what ``ldptext precompute
        santext`` and ``ldptext demo`` build with; ``None`` (this function's default, for callers
        that compare mechanisms over one output domain): no cap. Stated in
        ``privacy.verbatim.cap``.
    identifier_outputs : bool
        Keep identifier-shaped tokens (phone numbers, postal codes, long digit strings, e-mail
        addresses, URLs: :mod:`ldptext_precompute.santext.identifiers`) as outputs. Default False:
        they are never released (they stay valid inputs, sanitized from their own rows).

    Returns
    -------
    Path
        The written bundle.

    Raises
    ------
    ParameterError
        A parameter is out of range (ε must be finite, the cap in (0, 1]), the embeddings are
        unusable, the output domain is empty, or the realised numeric tolerance would exceed the
        stated 1e-9.
    WeakPrivacyError
        The output would be close to the input (:mod:`ldptext.verbatim`) and
        ``allow_weak_privacy`` is False.

    Notes
    -----
    The bundle's runtime (:class:`ldptext.santext.Sanitizer`) releases each token ε·d(x, x')-MLDP
    (SanText) or (V_S, V_P, ε, ε₀)-UMLDP with ε₀ = ln(1/p) (SanText+: V_N words are released in the
    clear with probability 1 − p), for any two tokens x, x' of the input domain: Yue et al. 2021,
    *Differential Privacy for Text Analytics via Natural Text Sanitization* (Findings of ACL), as
    presented in Yue 2023, *Data Synthesis: Boosting Utility and Privacy in NLP* (PhD thesis, Ohio
    State), §2.4, Theorems 1–2. Nothing here reads private text.
    """
    started = time.perf_counter()
    if mechanism == "santext":
        p = w = non_sensitive = None
    check_parameters(epsilon, mechanism, p, w)
    check_head_size(head_size)
    cap = resolve_verbatim_cap(verbatim_cap, allow_weak_privacy)
    if tail_clusters is not None and not 1 <= int(tail_clusters) <= MAX_CLUSTERS:
        raise ParameterError(f"--tail-clusters must be between 1 and {MAX_CLUSTERS}")
    if mechanism == "santext+":
        kind, value = parse_non_sensitive(non_sensitive, w)
        w = value if kind == "frequency" else None
        non_sensitive, w_arg = (None, w) if kind == "frequency" else (non_sensitive, None)
    else:
        w_arg = None
    emb = loaded or _emb.load_embeddings(embeddings, vocab_size)
    domain = split_domain(emb, mechanism=mechanism, w=w_arg, frequencies=frequencies,
                          non_sensitive=non_sensitive, read_back=False)
    emb_q, emb_scale = quantize_int8(emb.vectors)
    metric_vectors = dequantize(emb_q, emb_scale)
    domain, removed = restricted_domain(emb, domain, emb_q, emb_scale, epsilon=float(epsilon), cap=cap,
                                        identifiers=not identifier_outputs,
                                        allow_weak_privacy=allow_weak_privacy, progress=progress)
    if tail_clusters is None:
        tail_clusters = default_clusters(int(domain.outputs.size))
    nb = cached_neighbours(cache_dir, metric_vectors, domain.outputs, emb.valid_input,
                           min(head_size, int(domain.outputs.size)), n_clusters=int(tail_clusters),
                           device=device, progress=progress)
    tables, rounding = santext_tables(emb_q=emb_q, emb_scale=emb_scale, valid_input=emb.valid_input,
                                      domain=domain, nb=nb, epsilon=epsilon)
    # refuses a rate above the cap
    verbatim = tables_verbatim_rate(tables, float(epsilon), cap=cap, progress=progress)
    # near identity by a kept-in-clear majority too: the build states what every load decides
    verbatim = _verbatim.with_kept_in_clear(tables, verbatim, p=p if mechanism == "santext+" else None)
    manifest = santext_manifest(mechanism=mechanism, epsilon=epsilon, p=p, w=w, emb=emb, domain=domain,
                                nb=nb, metric_vectors=metric_vectors, started=started, gamma_rounding=rounding,
                                verbatim=verbatim, removed=removed)
    # after the tolerance check: a build that cannot be exact is refused for that first
    _verbatim.refuse_near_identity(verbatim, allow=allow_weak_privacy, flag="--allow-weak-privacy")
    return write_santext_bundle(out, mechanism=mechanism, tables=tables, manifest=manifest, emb=emb,
                                sign_key=sign_key, passphrase=passphrase)
