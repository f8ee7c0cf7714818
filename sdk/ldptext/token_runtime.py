"""What every token-level comparison runtime shares: load, tokenize, sample, detokenize, report, charge.

:class:`TokenRuntime` is the base of :class:`ldptext.tem.TEMSanitizer`,
:class:`ldptext.custext.CusTextSanitizer` and :class:`ldptext.cmp.CMPSanitizer`: the same small
method set as :class:`ldptext.Sanitizer` (``load``, ``sanitize``, ``sanitize_batch``, ``sample_ids``,
``tokenize``, ``detokenize``, ``privacy_report``, ``close``), the same verification
(:func:`ldptext.runtime.open_bundle`: signature, trusted signer, every array hash, then the
mechanism's own checks), the same randomness (:class:`ldptext.rng.Generator`: ChaCha20 keyed by the
OS; ``seed=`` for tests only, with a warning) and the same ledger call
(:func:`ldptext.runtime.charge`, before any output is returned). A subclass supplies ``_draw`` (ids
in, ids out), the ledger unit and the report's guarantee.

Tokens are released independently; the number of tokens is never hidden. Out-of-vocabulary words map
to the bundle's unknown row (``<unk>`` / ``[UNK]``) and are sanitized from it; special tokens are
never inputs typed by a user (a literal "[MASK]" is text) and never outputs.

**Parameters against arrays.** :func:`check_parameters` (what ``ldptext bundle sign`` runs for these
mechanisms, through :func:`ldptext.bundle_check.check_parameters`) loads the bundle with its runtime
class (every structural and semantic check of the mechanism) and then runs the runtime's own
``check_parameters``: the stated ε, γ, β, similarity, λ, D_max and worst case must be what the arrays
realise, so a signature never vouches for a relabelled parameter.
"""
from __future__ import annotations

import dataclasses
import json
import math
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from . import library as _library
from . import registry as _registry
from . import row_guard as _rowguard
from . import runtime as _runtime
from .bundle import Bundle, BundleSource
from .errors import BundleError, BundleFormatError, BundleIntegrityError, InputError, ParameterMismatchError
from .guarantee import Guarantee
from .report import PrivacyReport, Sanitized
from .rng import Generator, _seed_key
from .santext_tables import unique_rows
from .description import check_description, check_rendering
from .tokenization import TextTokenizer
from .verbatim import (VerbatimRate, check_stated_median, near_identity_at_load, random_sensitive_rows,
                       refuse_near_identity)

if TYPE_CHECKING:  # pragma: no cover
    from .ledger import Ledger

__all__ = ["TokenRuntime", "check_parameters", "sampled_rows", "check_stated_d_max",
           "check_stated_worst_case"]

#: rows a parameter check samples (as :mod:`ldptext.bundle_check` does for SanText)
CHECK_ROWS = 16

#: document lengths whose privacy reports a runtime keeps between calls (TokenRuntime._report)
_REPORTS_KEPT = 256


def check_parameters(bundle: Bundle, *, every_row: bool = False) -> None:
    """Refuse a comparison-mechanism bundle whose manifest parameters are not what its arrays realise.

    Parameters
    ----------
    bundle : Bundle
        Structure and hashes verified (trust need not be decided: ``ldptext bundle sign``).
    every_row : bool
        Also check every input row's whole law (:func:`ldptext.row_guard.check_all_rows`).

    Raises
    ------
    ParameterMismatchError
        The bundle does not load with its runtime class (the error is named), or a stated parameter
        disagrees with the arrays (the runtime's ``check_parameters`` names which).
    ModuleNotFoundError
        A CMP / Mahalanobis bundle without faiss (the ``faiss`` extra).
    """
    cls = _registry.get(bundle.mechanism).runtime_class()
    # construction runs check_parameters (the one door); every row: in libldptext where built. A
    # near-identity bundle is checked like any other, its label included (construct_for_check)
    weak = {"allow_weak_privacy": True} if issubclass(cls, TokenRuntime) else {}  # a plugin may not take it
    san = construct_for_check(cls, bundle, every_row=every_row, **weak)
    try:
        if every_row:
            _rowguard.check_all_rows(san)
    finally:
        san.close()


def construct_for_check(cls: type, bundle: Bundle, *, every_row: bool, **kwargs: Any) -> Any:
    """``cls`` around ``bundle`` for a signing-time check: every check of the one door, on libldptext
    when every row is to be checked and the library is built (numpy otherwise); any refusal is a
    :class:`ParameterMismatchError` naming the mechanism.

    Raises
    ------
    ParameterMismatchError
    """
    backend = "auto" if every_row and _library.available() else "fallback"
    try:
        runtime = _runtime.construct_checked(cls, bundle, backend=backend, **kwargs)
    except ParameterMismatchError:
        raise
    except BundleError as e:
        raise ParameterMismatchError(f"not a loadable {bundle.mechanism} bundle: {e}") from None
    except ValueError:  # the sampler's own parameter check
        raise ParameterMismatchError(f"not a loadable {bundle.mechanism} bundle: parameters out of "
                                     f"range") from None
    # a signature vouches for the weak-privacy label too: a bundle every runtime calls near identity
    # (its stated median, its rows drawn now where it states none, or its kept-in-clear majority)
    # must say so, as a build that allowed it does (privacy.weak_privacy)
    verbatim = getattr(runtime, "verbatim", None)
    privacy = bundle.manifest.get("privacy") if isinstance(bundle.manifest.get("privacy"), dict) else {}
    if verbatim is not None and verbatim.near_identity and not privacy.get("weak_privacy"):
        runtime.close()
        raise ParameterMismatchError(f"the {bundle.mechanism} bundle is near identity ({verbatim.describe()}) "
                                     f"but its manifest does not state privacy.weak_privacy")
    return runtime


def sampled_rows(candidates: np.ndarray, score: np.ndarray, n: int = CHECK_ROWS) -> np.ndarray:
    """Up to ``n`` rows of ``candidates``: the highest-scoring half and an even spread for the rest.

    Parameters
    ----------
    candidates : np.ndarray of int, shape (c,)
    score : np.ndarray of float, shape (V,)
        Indexed by row id (e.g. the embedding norms: the rows most likely to be farthest apart).
    n : int

    Returns
    -------
    np.ndarray of int64
    """
    candidates = np.asarray(candidates, dtype=np.int64)
    if candidates.size <= n:
        return candidates
    top = candidates[np.argsort(-np.asarray(score)[candidates], kind="stable")[:n // 2]]
    spread = candidates[np.linspace(0, candidates.size - 1, n // 2).astype(np.int64)]
    return unique_rows(np.concatenate([top, spread]))


def check_stated_d_max(vectors: np.ndarray, valid: np.ndarray, d_max: float) -> None:
    """Refuse a stated D_max below a realised distance between sampled valid inputs and all valid inputs.

    A sampled, one-sided check (as SanText's): it catches an understated D_max whenever a sampled
    pair exceeds it.

    Parameters
    ----------
    vectors : np.ndarray of float64, shape (V, m)
        The points whose Euclidean distance is the guarantee's metric.
    valid : np.ndarray of int, shape (n,)
        The valid input rows.
    d_max : float
        The stated bound.

    Raises
    ------
    ParameterMismatchError
    """
    v = np.asarray(vectors, dtype=np.float64)
    if valid.size == 0:
        return
    norms = np.zeros(v.shape[0])
    norms[valid] = np.linalg.norm(v[valid], axis=1)
    points = v[valid]
    far = max(float(np.linalg.norm(points - v[r], axis=1).max()) for r in sampled_rows(valid, norms))
    if far > d_max * (1 + 1e-9) + 1e-12:
        raise ParameterMismatchError(f"manifest D_max {d_max:.6g} is below a realised distance {far:.6g} "
                                     f"between two valid inputs")


def check_stated_worst_case(manifest: dict, computed: float | None) -> None:
    """Refuse a manifest whose ``privacy.worst_case_token_epsilon`` is not the one its parameters give.

    Parameters
    ----------
    manifest : dict
    computed : float or None
        The worst case the runtime derives from ε, γ and D_max (``None``: none exists).

    Raises
    ------
    ParameterMismatchError
    """
    privacy = manifest.get("privacy") if isinstance(manifest.get("privacy"), dict) else {}
    if "worst_case_token_epsilon" not in privacy:
        return
    stated = privacy["worst_case_token_epsilon"]
    if computed is None:
        if stated is not None:
            raise ParameterMismatchError("manifest states a worst-case LDP level, but this mechanism has none")
        return
    if isinstance(stated, bool) or not isinstance(stated, (int, float)) \
            or not math.isclose(float(stated), computed, rel_tol=1e-12, abs_tol=1e-12):
        raise ParameterMismatchError(f"manifest worst_case_token_epsilon {stated!r} is not what its parameters "
                                     f"give ({computed:.12g})")


class TokenRuntime(_runtime.Closable):
    """Base of the token-level runtimes — SanText(+) (:class:`ldptext.Sanitizer`) and the comparison
    mechanisms (see the module docstring); create with ``load``.

    Parameters
    ----------
    bundle : Bundle
        A verified bundle of one of :attr:`MECHANISMS`.
    seed : int or None
        ``None`` (default) for private randomness; an integer for reproducible, **not private**
        output (tests and experiments only; warns).
    backend : str
        ``"auto"``, ``"native"`` (the C extension) or ``"fallback"`` (numpy).
    ledger : Ledger or None
        Charged through :func:`ldptext.runtime.charge` before any output is returned.

    Attributes
    ----------
    mechanism : str
    key_id : str or None
    manifest : dict
    epsilon : float
        The bundle's ε.
    valid_input : np.ndarray of bool, shape (V,)
        Rows that may be inputs.
    n_rows : int
        V.
    seeded : bool
        True when created with a seed: reproducible and **not private**.
    """

    #: the bundle mechanisms this runtime loads (set by each subclass)
    MECHANISMS: tuple[str, ...] = ()
    #: construction takes ``allow_weak_privacy`` (the loaders pass the caller's opt-in on)
    WEAK_PRIVACY_OPT_IN = True
    _RELEASED = ("_bundle", "_rng", "_vocab", "_tokenizer", "valid_input", "_library", "_sanitizers")
    #: _report's privacy reports by (length, ledger unit, backend), made on first use
    _reports: dict[tuple, Any] | None = None

    def __init__(self, bundle: Bundle, *, seed: int | None = None, backend: str = "auto",
                 ledger: "Ledger | None" = None, allow_weak_privacy: bool = False) -> None:
        if bundle.mechanism not in self.MECHANISMS:
            raise BundleFormatError(f"a {type(self).__name__} cannot load a {bundle.mechanism!r} bundle")
        self._bundle = bundle
        self.ledger = ledger
        self.allow_weak_privacy = bool(allow_weak_privacy)
        self.key_id: str | None = bundle.key_id
        self.manifest: dict = bundle.manifest
        self.mechanism: str = bundle.mechanism
        privacy = self.manifest.get("privacy") if isinstance(self.manifest.get("privacy"), dict) else {}
        #: the stated verbatim rate (TEM, CusText(+)): consistency checked here, the median against
        #: random rows and the largest rate against every row before its first draw
        self.stated_verbatim: VerbatimRate | None = VerbatimRate.from_manifest(privacy.get("verbatim"))
        try:
            self.params: dict = dict(self.manifest["params"])
            self.epsilon: float = float(self.params["epsilon"])
        except (KeyError, TypeError, ValueError):
            raise BundleFormatError(f"{self.mechanism} manifest lacks or malforms its parameters") from None
        if not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise BundleIntegrityError("bundle epsilon is not a positive finite number")
        self.valid_input: np.ndarray = bundle.array("valid_input")
        if self.valid_input.dtype != np.bool_ or self.valid_input.ndim != 1:
            raise BundleIntegrityError("array 'valid_input' is not a bool vector")
        self.n_rows: int = int(self.valid_input.size)
        self._rng = Generator(seed=seed, backend=backend)
        self.seeded: bool = bool(self._rng.seeded)
        self._seed = seed
        # libldptext, once load() has checked the bundle (_adopt_library): None until then, and
        # for the numpy fallback or a mechanism the library does not run
        self._library: Any = None
        self._sanitizers: _library.LibrarySanitizers | None = None
        self._vocab: list[str] | None = None
        _runtime.check_ledger_unit(ledger, self.ledger_unit)  # at load, not at the first release
        self._tokenizer: TextTokenizer | None = None

    @classmethod
    def load(cls, path: BundleSource, *, trusted_keys: Iterable[Any] | None = None,
             allow_unsigned: bool = False, seed: int | None = None, backend: str = "auto",
             ledger: "Ledger | None" = None, expect: Any = None,
             allow_weak_privacy: bool = False) -> "TokenRuntime":
        """Verify (signature, key, hashes, then the mechanism's own checks) and open a bundle.

        Parameters
        ----------
        path : str, os.PathLike, bytes, bytearray or memoryview
            The bundle file, or its content (verified the same way).
        trusted_keys : iterable or None
            Public keys the signer must be among; ``None`` means the local trust store.
        allow_unsigned : bool
            Accept an unsigned development bundle (warns).
        seed : int or None
            Reproducible output for tests; **not private** (warns).
        backend : str
            ``"auto"``, ``"native"`` or ``"fallback"``.
        ledger : Ledger or None
            Charged before any output is returned, in unit :attr:`ledger_unit`.
        expect : BundleExpectation, mapping or None
            The application's pins (:class:`ldptext.runtime.BundleExpectation`).
        allow_weak_privacy : bool
            Accept a bundle whose stated median verbatim rate makes it near identity
            (:mod:`ldptext.verbatim`; refused with ``WeakPrivacyError`` otherwise).

        Returns
        -------
        TokenRuntime
            The subclass's runtime, ready to sanitize.

        Raises
        ------
        BundleError
            A ``BundleError`` subclass names the failed check (wrong mechanism included); a stated
            parameter the arrays do not realise is a ``ParameterMismatchError``.
        """
        bundle = _runtime.open_bundle(path, mechanisms=cls.MECHANISMS, trusted_keys=trusted_keys,
                                      allow_unsigned=allow_unsigned, expect=expect)
        # construction runs check_parameters and adopts libldptext (_open_checks)
        return cls(bundle, seed=seed, backend=backend, ledger=ledger, allow_weak_privacy=allow_weak_privacy)

    def _open_checks(self) -> None:
        """The stated parameters against what the arrays realise, at every construction: a trusted
        signer's wrong number must not pass a device (the check `bundle sign` runs); then
        libldptext adopts the bundle and checks it again itself. A runtime on the SanText engine's
        tables also checks the manifest's description of them (:func:`ldptext.description.check_description`)."""
        tables = getattr(self, "tables", None)
        if tables is not None:
            check_description(self.manifest, rows=tables.n_rows, outputs=tables.outputs, dim=tables.dim,
                              valid_input=tables.valid_input, sensitive=tables.sensitive,
                              keep_row=tables.keep_row, bot_count=getattr(self, "bot_count", None))
        self.check_parameters()
        self._adopt_library(self._bundle)
        self._check_rendering()
        stated = self.stated_verbatim
        if stated is not None and self._library is None and tables is not None:
            # libldptext checks it itself when adopted; the realised law: TEM's and CusText's are
            # not SanText's formula
            check_stated_median(tables, None, stated, random_sensitive_rows(tables),
                                own_probability=self._own_probability)
        if tables is not None:
            # near identity (ldptext.verbatim.near_identity_at_load, libldptext's rule): the stated
            # median, else rows drawn now; and the kept-in-clear share. The guarantee reports it.
            p = self.params.get("p")
            self.verbatim = near_identity_at_load(tables, stated, p=None if p is None else float(p),
                                                  rates_of=self._own_probability)
            self._guarantee_cache = None
        else:
            self.verbatim = stated
        if self.verbatim is not None:
            refuse_near_identity(self.verbatim, allow=self.allow_weak_privacy,
                                 flag="allow_weak_privacy=True (--allow-weak-privacy)")

    def _own_probability(self, rows: np.ndarray) -> np.ndarray:
        """Per row of ``rows``: the realised P(M(x) = x)."""
        return np.exp(self.log_probabilities(rows)[np.arange(rows.size), rows])

    def _verbatim_within_stated(self, rows: np.ndarray, own_log_probability: np.ndarray) -> np.ndarray:
        """Per row: a sensitive row's P(x → x) (``own_log_probability``, realised) is at most the stated
        largest verbatim rate; True where none is stated or the row is kept in the clear."""
        stated, t = self.stated_verbatim, self.tables
        rows = np.asarray(rows, dtype=np.int64)
        if stated is None:
            return np.ones(rows.size, dtype=bool)
        sensitive = t.valid_input[rows].astype(bool) & ~t.keep_row[rows].astype(bool)
        limit = stated.maximum + 1e-9 * max(1.0, stated.maximum) + 1e-12
        return ~sensitive | (np.exp(own_log_probability) <= limit)

    @classmethod
    def check_bundle(cls, bundle: Bundle, *, every_row: bool = False) -> None:
        """What ``bundle sign`` and ``bundle verify`` check: :func:`check_parameters`."""
        check_parameters(bundle, every_row=every_row)

    def _check_rendering(self) -> None:
        """The description the tokenizer decides (:func:`ldptext.description.check_rendering`),
        checked here where no library adopted the bundle (libldptext checks it at open itself)."""
        if self._library is not None:
            return
        tables, tok = getattr(self, "tables", None), self.tokenizer
        # the tokenizer's tokens are vocab.json's rows, and every output reads back as itself
        tok.check_vocab(self.vocab)
        outputs = getattr(self, "outputs", None) if tables is None else tables.outputs
        if outputs is not None:
            tok.check_outputs(outputs)
        check_rendering(self.manifest, wordpiece=tok.kind == "wordpiece", unk_id=tok.unk_id,
                        outputs=None if tables is None else tables.outputs,
                        sensitive=None if tables is None else tables.sensitive, tokens=self.vocab,
                        keep_row=None if tables is None else tables.keep_row, valid_input=self.valid_input)

    def _adopt_library(self, bundle: Bundle) -> None:
        """Sample (and tokenize and detokenize batches) in libldptext, as an app embedding it does,
        when the C extension is the backend and the library runs this mechanism; it checks the
        bundle again itself (:func:`ldptext.library.library_bundle`)."""
        if _registry.get(self.mechanism).c_code is None or self._rng.backend != "native":
            return
        self._library = _library.library_bundle(bundle)
        if self._library is not None:
            self._sanitizers = _library.LibrarySanitizers(
                self._library, _seed_key(self._seed) if self.seeded else None)

    @property
    def backend(self) -> str:
        """What samples: ``"libldptext"`` (the C library), ``"native"`` (the C extension's sampler)
        or ``"fallback"`` (numpy)."""
        return "libldptext" if self._library is not None else self._rng.backend

    def _release(self, flat: np.ndarray) -> np.ndarray:
        """One draw per id of ``flat`` (valid inputs), in libldptext when adopted (which checks each
        row before its first draw itself); elsewhere each row's whole law is checked here first
        (:class:`ldptext.row_guard.RowGuard`)."""
        if self._sanitizers is not None:
            return self._sanitizers.sample(flat)
        guard = self._row_guard
        if guard is not None:
            guard.require(flat)
        return self._draw(flat)

    @property
    def _row_guard(self) -> "_rowguard.RowGuard | None":
        """The rows whose whole law was checked (made on first use; ``None`` for a mechanism whose law
        is not a table per row, CMP)."""
        guard = self.__dict__.get("_guard")
        if guard is None and type(self)._row_laws_ok is not TokenRuntime._row_laws_ok:
            guard = self.__dict__["_guard"] = _rowguard.RowGuard(self.n_rows, self._row_laws_ok)
        return guard

    def _row_laws_ok(self, rows: np.ndarray) -> np.ndarray:
        """Per row of ``rows``: its whole output law is what the mechanism's formula gives at the
        stated parameters (a subclass whose law is a table per row overrides it)."""
        return np.ones(np.asarray(rows).size, dtype=bool)

    # -- what a subclass supplies -------------------------------------------------------------
    @property
    def ledger_unit(self) -> str:  # pragma: no cover - every subclass overrides
        """The unit ledger charges are made in."""
        raise NotImplementedError

    def _draw(self, flat: np.ndarray) -> np.ndarray:  # pragma: no cover - every subclass overrides
        """One independent draw per id of ``flat`` (int64, every id a valid input)."""
        raise NotImplementedError

    @property
    def guarantee(self) -> Guarantee:
        """What every release of this bundle guarantees, stated by the mechanism's unit
        (:mod:`ldptext.mechanisms`) from the verified manifest."""
        g = getattr(self, "_guarantee_cache", None)
        if g is None:
            g = self._guarantee_cache = self._stated_guarantee()
        return g

    def _stated_guarantee(self) -> Guarantee:
        """The unit's guarantee of this bundle (a runtime that learns more at load may refine it): with
        the verbatim rate and near-identity verdict of this load, where it made one."""
        g = _registry.get(self.mechanism).guarantee(self.manifest)
        verbatim = getattr(self, "verbatim", None)
        return g if verbatim is None else dataclasses.replace(g, verbatim=verbatim)

    def check_parameters(self) -> None:  # pragma: no cover - every subclass overrides
        """Refuse (:class:`ldptext.errors.ParameterMismatchError`) stated parameters that the arrays do
        not realise; see :func:`check_parameters`."""
        raise NotImplementedError

    # -- vocabulary and tokenization ---------------------------------------------------------
    @property
    def per_token_epsilon(self) -> float:
        """What one released token is charged, in :attr:`ledger_unit` (the bundle's ε)."""
        return self.epsilon

    @property
    def vocab(self) -> list[str]:
        """The bundle's vocabulary: row i is the token of id i."""
        self._check_open()
        if self._vocab is None:
            self._vocab = json.loads(self._bundle.blob("vocab.json").decode("utf-8"))
            if len(self._vocab) != self.n_rows:
                raise BundleIntegrityError("vocabulary length differs from the bundle's rows")
        return self._vocab

    @property
    def tokenizer(self) -> TextTokenizer:
        """The bundle's tokenizer (loaded on first use)."""
        self._check_open()
        if self._tokenizer is None:
            self._tokenizer = TextTokenizer(self._bundle.blob("tokenizer.json").decode("utf-8"))
        return self._tokenizer

    def tokenize(self, text: str) -> np.ndarray:
        """Token ids of ``text`` with the bundle's tokenizer (out-of-vocabulary words map to the
        unknown row); libldptext's own tokenizer when it is the backend (the same ids).

        Parameters
        ----------
        text : str
            One document.

        Returns
        -------
        np.ndarray of int32, shape (n_tokens,)

        Raises
        ------
        ClosedError
            After :meth:`close`.
        """
        self._check_open()
        if self._sanitizers is None:
            return self.tokenizer.encode(text)
        if not isinstance(text, str):
            raise InputError(f"document 0 is {type(text).__name__}, not str", document=0)
        try:
            with self._sanitizers.borrow() as s:
                ids = s.tokenize(text)
        except _library.LibraryError as e:
            raise _library.library_error(e, batch=False) from None
        return np.frombuffer(ids, dtype=np.int32)

    def detokenize(self, ids: np.ndarray) -> str:
        """Text of token ids with the bundle's tokenizer.

        Parameters
        ----------
        ids : np.ndarray of int, shape (n,)

        Returns
        -------
        str

        Raises
        ------
        ClosedError
            After :meth:`close`.
        """
        self._check_open()
        if self._sanitizers is None:
            return self.tokenizer.decode(ids)
        flat = np.asarray(ids).reshape(-1)
        if flat.size and not np.issubdtype(flat.dtype, np.integer):
            raise InputError("token ids must be integers")
        if flat.size and (flat.min() < 0 or flat.max() >= self.n_rows):
            raise IndexError("a token id is outside the vocabulary")
        try:  # reads only the bundle: no stream, no lock
            return self._sanitizers.stream.detokenize(np.ascontiguousarray(flat, dtype=np.int32))
        except _library.LibraryError as e:
            raise _library.library_error(e, batch=False) from None

    # -- sampling ----------------------------------------------------------------------------
    def _first_invalid(self, flat: np.ndarray) -> int | None:
        """Position of the first id in ``flat`` (int64) that is not a valid input, or None."""
        bad = (flat < 0) | (flat >= self.n_rows)
        if not bad.any():
            bad = ~self.valid_input[flat]
        return int(np.flatnonzero(bad)[0]) if bad.any() else None

    def sample_ids(self, ids: Any) -> np.ndarray:
        """Sanitize token ids (the primitive): one independent draw per id.

        Parameters
        ----------
        ids : array_like of int, any shape
            Valid input ids of this bundle.

        Returns
        -------
        np.ndarray of int32, same shape as ``ids``
            The ledger (if any) is charged n_ids · ε first (unit :attr:`ledger_unit`).

        Raises
        ------
        InputError
            An id is not an integer, out of range, or not a valid input (its position is named).
        BudgetExceededError
            The ledger refused the charge; nothing is returned.
        ClosedError
            After :meth:`close`.
        """
        self._check_open()
        ids = np.asarray(ids)
        if ids.size and not np.issubdtype(ids.dtype, np.integer):
            raise InputError("token ids must be integers")
        flat = ids.reshape(-1).astype(np.int64)
        position = self._first_invalid(flat)
        if position is not None:  # the position only: an id can reveal the word
            raise InputError(f"token id at position {position} is not a valid input of this bundle "
                             f"(out of range or a special token)")
        out = self._release(flat).astype(np.int32).reshape(ids.shape)
        _runtime.charge(self.ledger, out.size * self.per_token_epsilon, 0.0,
                        f"{self.mechanism} ids x{out.size}", unit=self.ledger_unit)
        return out

    def privacy_report(self, n_tokens: int) -> PrivacyReport:
        """What a release of ``n_tokens`` tokens guarantees (:meth:`ldptext.guarantee.Guarantee.report`).

        Parameters
        ----------
        n_tokens : int
            The document's number of tokens (not hidden).

        Returns
        -------
        PrivacyReport
        """
        return self.guarantee.report(n_tokens, seeded=self.seeded, backend=self.backend,
                                     ledger_unit=self.ledger_unit)

    def sanitize(self, text: str) -> Sanitized:
        """Sanitize one document; the result's text may leave the device.

        Parameters
        ----------
        text : str

        Returns
        -------
        Sanitized
            Text (same number of tokens) and its :class:`PrivacyReport`.
        """
        if self._sanitizers is not None and type(text) is str:  # sanitize_batch's C path, unchecked
            self._check_open()
            decoded, lengths = self._sanitizers.sanitize_batch((text,))
            return self._released_one(decoded[0], lengths[0])
        return self.sanitize_batch([text])[0]

    def sanitize_batch(self, texts: Iterable[str]) -> list[Sanitized]:
        """Sanitize many documents with one sampler call; the ledger is charged once, first.

        Parameters
        ----------
        texts : iterable of str
            The private documents (a list, not one string).

        Returns
        -------
        list of Sanitized, same length and order as ``texts``

        Raises
        ------
        InputError
            ``texts`` is one string, or a document cannot be sanitized (named by index, never by text).
        BudgetExceededError
            The ledger refused the charge; nothing is returned.
        """
        self._check_open()
        if isinstance(texts, str):
            raise InputError("sanitize_batch takes a list of documents, not one string")
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise InputError(f"document {i} is {type(t).__name__}, not str", document=i)
        if self._sanitizers is not None:  # tokenize, sample and detokenize in C, without the GIL
            decoded, lengths = self._sanitizers.sanitize_batch(texts)
            return self._released(decoded, lengths)
        encoded = self._encode_documents(texts)
        lengths = [e.size for e in encoded]
        flat = (np.concatenate(encoded) if encoded else np.empty(0, dtype=np.int32)).astype(np.int64)
        position = self._first_invalid(flat)
        if position is not None:  # e.g. a literal "[MASK]" that the tokenizer maps to its special token
            ends = np.cumsum(lengths)
            doc = int(np.searchsorted(ends, position, side="right"))
            raise InputError(f"document {doc}: token {position - int(ends[doc] - lengths[doc])} is not a "
                             f"valid input of this bundle (a special token of its tokenizer, e.g. "
                             f"written literally in the text)", document=int(doc))
        out = self._release(flat) if flat.size else np.empty(0, dtype=np.int64)
        pieces = np.split(out, np.cumsum(lengths)[:-1]) if encoded else []
        decoded = self.tokenizer.decode_batch(pieces) if pieces else []
        return self._released(decoded, lengths)

    def _encode_documents(self, texts: list) -> list[np.ndarray]:
        """Token ids of each document; an error names the document's index, never its text."""
        try:
            return self.tokenizer.encode_batch(texts)
        except InputError:
            pass
        for i, t in enumerate(texts):  # find the document the tokenizer fails on
            try:
                self.tokenizer.encode_batch([t])
            except InputError:
                raise InputError(f"document {i} could not be tokenized", document=i) from None
        raise InputError("the tokenizer could not process this batch of documents")

    def _report(self, n: int) -> Any:
        """``privacy_report(n)``, kept from call to call: reports are immutable, and building one (a
        frozen dataclass of twenty fields) cost about a tenth of a one-document ``sanitize()``. Keyed
        by what a report reads that can change (the ledger unit, the backend); at most
        ``_REPORTS_KEPT`` lengths at a time."""
        key = (n, self.ledger_unit, self.backend)
        reports = self._reports
        if reports is None:
            reports = self._reports = {}
        report = reports.get(key)
        if report is None:
            if len(reports) >= _REPORTS_KEPT:
                reports.clear()
            report = reports[key] = self.privacy_report(n)
        return report

    def _released_one(self, text: str, n: int) -> Sanitized:
        """``_released`` for one document, the same charge without the batch's lists (a tenth of
        a one-document ``sanitize()`` of a short text)."""
        report = self._report(n)
        if self.ledger is not None:
            _runtime.charge(self.ledger, report.document_epsilon, 0.0, f"{self.mechanism} batch of 1 documents",
                            unit=self.ledger_unit)
        return Sanitized(text=text, report=report)

    def _released(self, decoded: list[str], lengths: list[int]) -> list[Sanitized]:
        """The batch's results, once the ledger has accepted their charge."""
        results = [Sanitized(text=t, report=self._report(n)) for t, n in zip(decoded, lengths)]
        _runtime.charge(self.ledger, sum(r.report.document_epsilon for r in results), 0.0,
                        f"{self.mechanism} batch of {len(results)} documents", unit=self.ledger_unit)
        return results
