"""SanText and SanText+ at runtime: token-level metric local differential privacy.

Mechanisms of Yue et al. 2021, *Differential Privacy for Text Analytics via Natural Text Sanitization*
(Findings of ACL), as presented in Yue 2023, *Data Synthesis: Boosting Utility and Privacy in NLP*
(PhD thesis, Ohio State), §2.4. Guarantee per token, neighbouring relation = any two tokens x, x' of
the bundle's input domain:

* **SanText** — ε·d(x, x')-MLDP (Theorem 1): Pr[M(x)=y] ≤ exp(ε·d(x,x'))·Pr[M(x')=y] for every
  output y, with d the Euclidean distance of the bundle's metric embedding: the public embedding
  rounded to int8 codes with a per-row scale, exposed exactly as ``Sanitizer.embeddings``.
  Its worst case over the domain, ε·D_max, is a true ε·D_max-LDP bound per token.
* **SanText+** — (V_S, V_P, ε, ε₀)-UMLDP with ε₀ = ln(1/p) (Theorem 2): for every protected output
  y ∈ V_P = V_S the bound above holds with an extra ε₀ when x and x' lie on different sides of the
  split; a non-sensitive token (V_N: by default closed-class function words and punctuation) is
  released **in the clear with probability 1 − p**. Pr[M(x)=x] = 1 − p for x ∈ V_N but 0 for every
  other input, so SanText+ has **no finite worst-case LDP level**; the report says so (``None``).

Documents: tokens are sanitized independently, so two documents of the same length n are
ε·Σᵢ d(xᵢ, x'ᵢ)-indistinguishable (+ε₀ per token pair across the split, for protected outputs). The
number of tokens is not hidden. Out-of-vocabulary words map to the bundle's ``<unk>`` / ``[UNK]``
input row, which is always sensitive, and are sanitized from it; special tokens are never output.

Budgeting: the ledger is charged the per-token metric ε summed over tokens (n·ε per document) in
the unit ``metric:<id>`` of this bundle's metric (:attr:`Sanitizer.ledger_unit`): a budget B buys
B/ε tokens, each release of a token being ε·d-MLDP (docs/privacy-budgets.md).

Numbers: every realised log-probability is within the bundle's stated tolerance τ ≤ 1e-9
(:data:`STATED_MAX_TOLERANCE`) of the formula, so for realised probabilities the ratio bounds above
hold with slack exp(2τ).

Sampling is exact (tables: :mod:`ldptext.santext_tables`; sampler: ``native/santext_sampler.c`` and
its numpy mirror): the realised probabilities equal the formula up to the float64 tolerance stated in
the report, with every output keeping a positive probability at any ε.

Backends. With the C extension (``backend="native"``, the default where it is built) a ``Sanitizer``
runs on **libldptext**, the C library apps embed (``native/lib/``, compiled into ``ldptext._native``):
tokenization, sampling and detokenization are the library's, so every host produces the same output
from the same bundle; Hugging Face ``tokenizers`` stays for precompute, :attr:`Sanitizer.tokenizer`
and as the conformance oracle (``tests/test_libldptext_conformance.py``). The library adopts the
arrays :func:`ldptext.runtime.open_bundle` has verified (signature, trust, hashes) and checks the
tables and the tokenizer again itself. A bundle whose tokenizer the library does not implement keeps
the Hugging Face tokenizer with the C sampler. ``backend="fallback"`` is the same mechanism in numpy
over OS randomness (no compiler needed).

Randomness: ChaCha20 keyed from ``os.urandom`` (:class:`ldptext.rng.Generator`, or on the library
path the C library's stream, keyed the same way); ``seed=`` derives the key from the seed exactly as
:class:`ldptext.rng.Generator` does, so a seeded output is the same on every backend that shares the
sampler (native, and the C library's ``ldp_sanitizer_new_seeded``).

Thread safety: a ``Sanitizer`` may be shared by threads. On the library path its calls run without
the GIL: a private (unseeded) ``Sanitizer`` gives each concurrent call its own C sanitizer with its
own OS-keyed stream, so threads sanitize in parallel; a seeded one has a single stream, and calls on
it are serialised (in call order the output is reproducible). On the other paths draws are serialised
on the generator.
"""
from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from . import alias as _alias
from . import library as _library
from . import registry as _registry
from . import runtime as _runtime
from ._fallback import distance_from_dot
from .bundle import Bundle, BundleSource
from .engine_rows import engine_distance_rows, engine_log_probabilities
from .guarantee import checked_tolerance
from .errors import BundleFormatError, BundleIntegrityError
from .guarantee import Guarantee
from .mechanisms.santext import NO_WORST_CASE, STATEMENTS, metric_id, worst_case_epsilon  # noqa: F401 (re-exported)
from .row_guard import engine_tail_ok, law_matches
from .rng import Generator, _seed_key
from .santext_tables import SanTextTables, stored_arrays_of
from .santext_check import DMAX_ROWS, check_realised, load_rows
from .token_runtime import TokenRuntime, construct_for_check
from .verbatim import (VerbatimRate, check_stated_maximum, check_stated_median, near_identity_at_load,
                       random_sensitive_rows, refuse_near_identity, verbatim_probabilities)
from .description import check_description
from .tokenization import TextTokenizer

try:
    from . import _native
except ImportError:  # pragma: no cover - exercised when the extension could not be built
    _native = None

if TYPE_CHECKING:  # pragma: no cover
    from .ledger import Ledger

MECHANISMS = _registry.names(family="santext")
#: The largest numeric tolerance a SanText bundle may state (the documentation's "≤ 1e-9"); builds
#: above it are refused, and so are bundles that state more.
STATED_MAX_TOLERANCE = 1e-9


def notion(mechanism: str) -> str:
    """The notion its unit states (``"metric-LDP"`` for SanText, ``"UMLDP"`` for SanText+)."""
    return STATEMENTS[mechanism].notion


def keeps_in_clear(mechanism: str) -> bool:
    """SanText+ (its statement keeps V_N words in the clear), not SanText."""
    return STATEMENTS[mechanism].kept_in_clear is not None


class Sanitizer(TokenRuntime):
    """Sanitize text with SanText / SanText+ from a verified bundle; create one with :meth:`load`.

    Implements :class:`ldptext.runtime.Runtime`, including ``close()`` and ``with``
    (:class:`ldptext.runtime.Closable`): after ``close()`` the bundle's memory map, tables and
    tokenizer are released and any use other than the metadata raises ``ClosedError``.

    Parameters
    ----------
    bundle : Bundle
        A verified SanText(+) bundle (:func:`ldptext.runtime.open_bundle`).
    seed : int or None
        ``None`` (default) for private randomness; an integer for reproducible, **not private**
        output (tests and experiments only; warns).
    backend : str
        ``"auto"``, ``"native"`` (the C extension: libldptext tokenizes, samples and detokenizes,
        see :attr:`backend`) or ``"fallback"`` (numpy).
    ledger : Ledger or None
        Charged through :func:`ldptext.runtime.charge` before any output is returned.

    Attributes
    ----------
    mechanism : str
        ``"santext"`` or ``"santext+"``.
    key_id : str or None
        Id of the key that signed the bundle (``None`` only for an allowed unsigned bundle).
    manifest : dict
        The verified manifest.
    epsilon, p, w, epsilon0 : float (p, w None for SanText)
        The metric ε, SanText+'s sanitizing probability p and (frequency split only) sensitive
        fraction w, ε₀ = ln(1/p).
    d_max : float
        Upper bound of the largest distance between two valid inputs.
    tolerance : float
        τ, bound on |log P̂ − log P| of every realised probability against the formula (≤ 1e-9).
    seeded : bool
        True when created with a seed: reproducible and **not private**.
    ledger_unit : str
        ``"metric:<id>"`` (:func:`metric_id`): the unit ledger charges are made in.
    tables : SanTextTables
        The bundle's validated arrays.
    outputs : np.ndarray of int32, shape (O,)
        The output domain (V minus special tokens for SanText, V_S for SanText+).
    sensitive, valid_input : np.ndarray of bool, shape (V,)
        V_S, and the rows that may be inputs.
    n_rows : int
        V, the number of rows.

    Notes
    -----
    Guarantee per token: SanText is ε·d(x, x')-MLDP (worst case ε·D_max-LDP), SanText+ is
    (V_S, V_P, ε, ε₀)-UMLDP with ε₀ = ln(1/p) and releases V_N words in the clear with probability
    1 − p (no finite worst-case LDP level); neighbouring relation: any two tokens x, x' of the input
    domain (documents of equal length: ε·Σᵢ d(xᵢ, x'ᵢ), tokens independent, length not hidden). For
    realised probabilities the ratio bounds hold with slack exp(2·tolerance). Yue et al. 2021, *Differential
    Privacy for Text Analytics via Natural Text Sanitization* (Findings of ACL), as presented in
    Yue 2023, *Data Synthesis: Boosting Utility and Privacy in NLP* (PhD thesis, Ohio State), §2.4,
    Theorems 1–2.
    """

    MECHANISMS = MECHANISMS
    # what close() drops: everything that references the bundle's memory map or derives from it
    _RELEASED = ("_bundle", "tables", "outputs", "sensitive", "valid_input", "_embeddings", "_rng",
                 "_table", "_vocab", "_tokenizer", "_library", "_sanitizers")

    def __init__(self, bundle: Bundle, *, seed: int | None = None, backend: str = "auto",
                 ledger: "Ledger | None" = None, allow_weak_privacy: bool = False) -> None:
        self._bundle = bundle
        self.ledger = ledger
        self.allow_weak_privacy = bool(allow_weak_privacy)
        self.key_id: str | None = bundle.key_id
        self.manifest: dict = bundle.manifest
        self.mechanism: str = bundle.mechanism
        # a missing array is a format error, except the optional ones of older bundles
        arrays = stored_arrays_of(bundle)
        try:
            params = self.params = dict(self.manifest["params"])
            self.epsilon: float = float(params["epsilon"])
            self.p: float | None = None if params.get("p") is None else float(params["p"])
            self.w: float | None = None if params.get("w") is None else float(params["w"])
            self.epsilon0: float = float(params.get("epsilon0", 0.0))
            self.head_size: int = int(params["head_size"])
            self.d_max: float = float(self.manifest["privacy"]["d_max"])
            self.tolerance: float = float(self.manifest["numeric"]["max_relative_error"])
        except (KeyError, TypeError, ValueError):
            raise BundleFormatError("SanText manifest lacks or malforms a required field") from None
        self._check_parameters()
        self.ledger_unit: str = "metric:" + metric_id(self.manifest)
        # the native backend's libldptext view of the bundle is built while Python checks the tables
        adoption = _library.Adoption(bundle) if backend in ("auto", "native") and _native is not None else None
        # libldptext checks the stated median itself when it adopts the bundle (native/lib/check.c)
        self._median_checked_in_library = adoption is not None
        try:
            self.tables: SanTextTables = SanTextTables(**arrays)  # schema and semantic checks
            self._check_tables_match_parameters()
            check_description(self.manifest, rows=self.tables.n_rows, outputs=self.tables.outputs,
                              dim=self.tables.dim, valid_input=self.tables.valid_input,
                              sensitive=self.tables.sensitive, keep_row=self.tables.keep_row)
            self._check_realised_parameters()
        except BaseException:
            if adoption is not None:
                adoption.join()  # the Python check's error comes first
            raise
        self.outputs: np.ndarray = self.tables.outputs
        self.sensitive: np.ndarray = self.tables.sensitive
        self.valid_input: np.ndarray = self.tables.valid_input
        self.n_rows: int = self.tables.n_rows
        self._embeddings: np.ndarray | None = None
        self._rng = Generator(seed=seed, backend=backend)
        self.seeded: bool = bool(self._rng.seeded)
        self._seed = seed
        # libldptext (native backend): tokenize, sample and detokenize in C, on the seeded stream
        # (every call, in call order) or on private OS-keyed sanitizers lent to concurrent calls
        self._library = adoption.result() if adoption is not None and self._rng.backend == "native" else None
        if self._library is not None:
            self._sanitizers = _library.LibrarySanitizers(self._library,
                                                          _seed_key(seed) if self.seeded else None)
            self._table = self._library  # the sampler's table (distance(a, b))
        else:
            self._sanitizers = None
            self._table = self._rng.make_santext_table(
                self.tables, epsilon=self.epsilon, p=float(self.p) if self.p is not None else 1.0)
        self._backend = "libldptext" if self._library is not None else self._rng.backend
        self._vocab: list[str] | None = None
        self._tokenizer: TextTokenizer | None = None

    @classmethod
    def load(cls, path: BundleSource, *, trusted_keys: Iterable[Any] | None = None,
             allow_unsigned: bool = False, seed: int | None = None, backend: str = "auto",
             ledger: "Ledger | None" = None, expect: Any = None,
             allow_weak_privacy: bool = False) -> "Sanitizer":
        """Verify (signature, key, hashes, schema) and memory-map a SanText(+) bundle.

        Use it as a context manager (``with Sanitizer.load(...) as san:``) or call :meth:`close` to
        release the memory map when done.

        Parameters
        ----------
        path : str, os.PathLike, bytes, bytearray or memoryview
            The bundle file, or its content (an app that ships the bundle as an asset): bytes are
            verified exactly as a file is (signature, key, hashes, shapes, table invariants) and give
            the same sampler, so the same seed gives the same output.
        trusted_keys : iterable or None
            Public keys the signer must be among; ``None`` means the local trust store.
        allow_unsigned : bool
            Accept an unsigned development bundle (warns).
        seed : int or None
            Reproducible output for tests; **not private** (warns).
        backend : str
            ``"auto"``, ``"native"`` (the C extension, on libldptext) or ``"fallback"`` (numpy).
        ledger : Ledger or None
            Charged before any output is returned, in unit :attr:`ledger_unit` (``"metric:<id>"``;
            a ledger in another unit refuses): each ``sanitize_batch`` call is one release of the
            per-token metric ε summed over its tokens (n·ε per document, ``report.document_epsilon``),
            each ``sample_ids`` call n_ids · ε; a refused charge raises ``BudgetExceededError`` and
            nothing is returned.
        expect : BundleExpectation, mapping or None
            The application's pins (mechanism, ε range, bundle id, minimum format version), see
            :class:`ldptext.runtime.BundleExpectation`; a verified bundle that does not match raises
            ``BundleExpectationError``.
        allow_weak_privacy : bool
            Accept a bundle whose ε releases the median sensitive word unchanged with probability at
            least :data:`ldptext.verbatim.NEAR_IDENTITY_MEDIAN` (every report then says so).

        Returns
        -------
        Sanitizer
            Ready to sanitize.

        Raises
        ------
        BundleError
            Missing file, bad signature, untrusted key, wrong mechanism, or a corrupted or
            inconsistent bundle (a ``BundleError`` subclass says which); the same for bytes.
        WeakPrivacyError
            The output would be close to the input (:mod:`ldptext.verbatim`) and
            ``allow_weak_privacy`` is False.

        Notes
        -----
        Guarantee of every release: per token ε·d(x, x')-MLDP (SanText) or (V_S, V_P, ε, ε₀)-UMLDP
        with ε₀ = ln(1/p), V_N words in the clear w.p. 1 − p (SanText+), neighbouring relation any
        two tokens x, x' of the input domain;
        Yue et al. 2021, *Differential Privacy for Text Analytics via Natural Text Sanitization*
        (Findings of ACL), as presented in Yue 2023, *Data Synthesis: Boosting Utility and Privacy
        in NLP* (PhD thesis, Ohio State), §2.4, Theorems 1–2.
        """
        bundle = _runtime.open_bundle(path, mechanisms=MECHANISMS, trusted_keys=trusted_keys,
                                      allow_unsigned=allow_unsigned, expect=expect)
        return cls(bundle, seed=seed, backend=backend, ledger=ledger, allow_weak_privacy=allow_weak_privacy)

    @classmethod
    def check_bundle(cls, bundle: Bundle, *, every_row: bool = False) -> None:
        """What ``bundle sign`` and ``bundle verify`` check (:func:`ldptext.bundle_check.check_parameters`):
        the load-time checks, D_max and the stated verbatim maximum on every row of the fixed sample,
        and with ``every_row`` every row's whole law (in libldptext, on every core, where built).

        Raises
        ------
        ParameterMismatchError
        """
        from .row_guard import check_all_rows
        from .santext_check import fixed_rows

        # construction runs the load-time check (ldptext.santext_check) on its own sample; a weak
        # bundle is consistent or not like any other: its label is checked, not refused
        san = construct_for_check(cls, bundle, every_row=every_row, allow_weak_privacy=True)
        with san:
            # before signing, D_max from every row of the fixed sample (load reads two)
            rows = fixed_rows(san.tables)
            check_realised(san.tables, mechanism=san.mechanism, epsilon=san.epsilon, epsilon0=san.epsilon0,
                           p=san.p, d_max=san.d_max, tolerance=san.tolerance, rows=rows, dmax_rows=rows)
            stated = VerbatimRate.from_manifest(san.manifest["privacy"].get("verbatim"))
            if stated is not None:
                check_stated_maximum(san.tables, san.epsilon, stated, rows)
            if every_row:
                check_all_rows(san)

    @staticmethod
    def verbatim_rates(bundle: Bundle) -> tuple[np.ndarray, np.ndarray]:
        """Every sensitive input's P(M(x) = x), exactly, from a bundle's tables and stated ε (the
        vocabulary is public: ``bundle inspect --exposed``). Releases nothing.

        Returns
        -------
        (np.ndarray of int64, np.ndarray of float64)
            The sensitive rows and their rates.
        """
        from .verbatim import sensitive_inputs

        t = SanTextTables(**stored_arrays_of(bundle))
        xs = sensitive_inputs(t)
        return xs, verbatim_probabilities(t, float(bundle.manifest["params"]["epsilon"]), xs)

    def _open_checks(self) -> None:
        """``__init__`` checks the tables, the stated parameters and the verbatim rate itself, and
        libldptext adopts the bundle there (it checks it again); here, without the library, the
        description the tokenizer decides; then, every check passed, the weak-privacy rule (last, as
        in every runtime: a misstated bundle is refused as such, opt-in or not)."""
        self._check_rendering()
        refuse_near_identity(self.verbatim, allow=self.allow_weak_privacy,
                             flag="allow_weak_privacy=True (--allow-weak-privacy)")

    def _check_parameters(self) -> None:
        """The manifest's parameters, before the arrays (a signed bundle may still be inconsistent)."""
        if not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise BundleIntegrityError("bundle epsilon is not a positive number")
        if keeps_in_clear(self.mechanism) and not (self.p is not None and 0 < self.p <= 1):
            raise BundleIntegrityError("bundle p is not in (0, 1]")
        if not (math.isfinite(self.tolerance) and 0 <= self.tolerance <= STATED_MAX_TOLERANCE):
            raise BundleIntegrityError(f"bundle states a numeric tolerance above {STATED_MAX_TOLERANCE:g}")

    def _check_tables_match_parameters(self) -> None:
        """What the tables must agree on with the manifest and the mechanism."""
        t = self.tables
        if t.head_size != self.head_size:
            raise BundleIntegrityError(f"array 'head_ids' has shape {t.stored('head_ids').shape}, expected "
                                       f"{(t.n_rows, self.head_size)}")
        if not keeps_in_clear(self.mechanism) and t.keep_row.any():
            raise BundleIntegrityError("a SanText bundle cannot keep tokens in the clear")
        if (t.keep_row.astype(bool) & (t.sensitive | ~t.valid_input)).any():
            raise BundleIntegrityError("a sensitive or invalid row is marked as kept in the clear")

    def _check_realised_parameters(self) -> None:
        """The stated ε, ε₀, p and D_max against what the tables realise (:mod:`ldptext.santext_check`):
        a trusted signer's wrong number must not pass a device."""
        t = self.tables
        rows = load_rows(t)
        check_realised(t, mechanism=self.mechanism, epsilon=self.epsilon, epsilon0=self.epsilon0,
                       p=self.p, d_max=self.d_max, tolerance=self.tolerance, rows=rows,
                       dmax_rows=rows[:DMAX_ROWS])
        self.verbatim: VerbatimRate = self._verbatim(rows)

    def _verbatim(self, rows: np.ndarray) -> VerbatimRate:
        """The stated verbatim rate, its largest value checked on the first checked rows; a bundle
        older than the statement gets an estimate from sensitive rows drawn at random, and the
        near-identity verdict (:func:`ldptext.verbatim.near_identity_at_load`: libldptext's rule)."""
        t = self.tables
        stated = VerbatimRate.from_manifest(self.manifest["privacy"].get("verbatim"))
        if stated is not None:
            check_stated_maximum(t, self.epsilon, stated, rows[:DMAX_ROWS])
            if not self._median_checked_in_library:  # the numpy fallback: the same test here
                check_stated_median(t, self.epsilon, stated, random_sensitive_rows(t))
        return near_identity_at_load(
            t, stated, p=self.p if keeps_in_clear(self.mechanism) else None,
            rates_of=lambda xs: verbatim_probabilities(t, self.epsilon, xs, threads=1))

    @property
    def per_token_epsilon(self) -> float:
        """The per-token metric ε: what one released token is charged, in unit :attr:`ledger_unit`.

        Each token's release is ε·d(x, x')-MLDP, so charges add up per metric (the ledger's sum
        bounds the metric ε about any one token over all releases); a budget B buys B/ε tokens.
        This is **not** an LDP level over arbitrary inputs: see :attr:`worst_case_token_epsilon`.

        Returns
        -------
        float
            ε (the bundle's metric ε).
        """
        return self.epsilon

    @property
    def worst_case_token_epsilon(self) -> float | None:
        """The worst-case LDP level of one token over any two inputs, where one exists.

        Returns
        -------
        float or None
            SanText: ε·D_max (a true LDP bound, ε·d ≤ ε·D_max). SanText+: ``None`` — V_N words are
            released in the clear with probability 1 − p, so no finite level holds
            (:data:`NO_WORST_CASE`).
        """
        return worst_case_epsilon(self.mechanism, self.epsilon, self.d_max)

    @property
    def embeddings(self) -> np.ndarray:
        """The metric embedding: exactly the values distances are computed from.

        Returns
        -------
        np.ndarray of float64, shape (V, m), read-only
            Per-row float32 scale × int8 code (:meth:`SanTextTables.metric_embedding`).
        """
        if self._embeddings is None:
            e = self.tables.metric_embedding()
            e.flags.writeable = False
            self._embeddings = e
        return self._embeddings

    @property
    def ledger_unit(self) -> str:
        """``"metric:<id>"`` (:func:`metric_id`): the unit ledger charges are made in."""
        return self._ledger_unit

    @ledger_unit.setter
    def ledger_unit(self, unit: str) -> None:
        # __init__ sets the unit once, as soon as the metric is known: the first point at which the
        # ledger given to load() can be checked, so a ledger of another unit is refused at load
        # instead of at the first release
        self._ledger_unit = unit
        _runtime.check_ledger_unit(self.ledger, unit)

    @property
    def backend(self) -> str:
        """What samples: ``"libldptext"`` (the C library tokenizes, samples and detokenizes),
        ``"native"`` (the C sampler with the Hugging Face tokenizer: a bundle whose tokenizer the
        library lacks) or ``"fallback"`` (numpy)."""
        return self._backend

    def _draw(self, flat: np.ndarray) -> np.ndarray:
        """One draw per id of ``flat`` (int64, every id a valid input: checked by the caller) on the
        C extension's or numpy's sampler (libldptext's draws: ``TokenRuntime._release``)."""
        return self._rng.santext_sample(self._table, flat.astype(np.int32))

    def _row_laws_ok(self, rows: np.ndarray) -> np.ndarray:
        """Per row: its whole law is SanText's at the stated ε (:mod:`ldptext.row_guard`).

        Every output's realised probability (the engine's, before SanText+'s 1 − p keep) against
        exp(−ε·d(x, y)/2) / Z(x) within twice the stated tolerance; every tail output's second trial
        possible (the floor and cluster bounds hold); for a sensitive row that is an output, P(x → x)
        at most the stated largest verbatim rate.
        """
        t = self.tables
        rows = np.asarray(rows, dtype=np.int64)
        outs = t.outputs.astype(np.int64)
        d = engine_distance_rows(t, rows, outs)
        w = -self.epsilon / 2.0 * d
        realised = engine_log_probabilities(t, rows, engine_epsilon=self.epsilon, p=1.0)[:, outs]
        ok = law_matches(realised, w, 2.0 * checked_tolerance(self.tolerance, self.epsilon, self.d_max))
        ok &= engine_tail_ok(t, rows, engine_epsilon=self.epsilon, d=d)
        stated = VerbatimRate.from_manifest(self.manifest["privacy"].get("verbatim"))
        if stated is not None and rows.size:
            pos = np.minimum(np.searchsorted(outs, rows), outs.size - 1)
            own = (outs[pos] == rows) & t.valid_input[rows].astype(bool) & ~t.keep_row[rows].astype(bool)
            mx = w.max(axis=1)
            rate = np.exp(w[np.arange(rows.size), pos] - mx) / np.exp(w - mx[:, None]).sum(axis=1)
            limit = stated.maximum + 1e-9 * max(1.0, stated.maximum) + 1e-12
            ok &= ~own | (rate <= limit)
        return ok

    def check_parameters(self) -> None:
        """The load-time check again (:mod:`ldptext.santext_check`, on a fresh random sample of rows)."""
        self._check_open()
        self._check_realised_parameters()

    def _stated_guarantee(self) -> Guarantee:
        """The unit's guarantee (:mod:`ldptext.mechanisms.santext`) with the verbatim rate this load
        checked (estimated here for a bundle that states none).

        Per token ε·d(x, x')-metric LDP (SanText) or (V_S, V_P, ε, ε₀)-UMLDP (SanText+, V_N words in
        the clear w.p. 1 − p), for any two tokens x, x' of the input domain; a document of n tokens
        against any other of n tokens: ε·Σᵢ d(xᵢ, x'ᵢ) (+ε₀ per pair across the split, for protected
        outputs). Yue et al. 2021, *Differential Privacy for Text Analytics via Natural Text
        Sanitization* (Findings of ACL), as presented in Yue 2023, *Data Synthesis: Boosting Utility
        and Privacy in NLP* (PhD thesis, Ohio State), §2.4, Theorems 1–2.
        """
        return dataclasses.replace(super()._stated_guarantee(), verbatim=self.verbatim)

    # -- exact realised distribution ---------------------------------------------------------
    def log_probabilities(self, xs: Any, *, chunk: int = 256) -> np.ndarray:
        """The log-probabilities log Pr[M(x) = y] for every y of the vocabulary, as the sampler realises them.

        Computed from the bundle's integer alias tables, acceptance exponents and metric embedding
        (float64), with the tail distances evaluated by the sampler's own formula. Releases nothing
        (no randomness, no ledger charge).

        Parameters
        ----------
        xs : array_like of int, shape (n,) or scalar
            Input row ids.
        chunk : int
            Rows computed at a time (memory: chunk × V doubles).

        Returns
        -------
        np.ndarray of float64, shape (n, V)
            ``-inf`` where the probability is exactly 0 (special tokens, and for SanText+ V_N
            outputs other than the input itself).

        Notes
        -----
        These rows satisfy Pr[M(x)=y] ≤ exp(ε·d(x, x') (+ε₀ across the split))·Pr[M(x')=y] for any
        two inputs x, x' and protected y, up to the stated tolerance: SanText's MLDP and SanText+'s
        UMLDP, Yue et al. 2021, *Differential Privacy for Text Analytics via Natural Text
        Sanitization* (Findings of ACL), as presented in Yue 2023, *Data Synthesis: Boosting Utility
        and Privacy in NLP* (PhD thesis, Ohio State), §2.4, Theorems 1–2.
        """
        self._check_open()
        xs = _runtime.row_ids(xs, self.n_rows)  # an id out of range: InputError, not IndexError
        out = np.empty((xs.size, self.n_rows))
        for start in range(0, xs.size, chunk):
            out[start:start + chunk] = self._log_probabilities(xs[start:start + chunk])
        return out

    def _log_probabilities(self, xs: np.ndarray) -> np.ndarray:
        t, k, outs = self.tables, self.head_size, self.outputs
        gamma = t.stored("accept_gamma")[xs].astype(np.float64)  # the rows only, widened exactly
        mass = _alias.realised_masses(t.alias_threshold[xs], t.stored("alias_index")[xs])
        with np.errstate(divide="ignore"):
            log_q = np.log(mass.astype(np.float64))
        rows = np.arange(xs.size)
        lp = np.full((xs.size, self.n_rows), -np.inf)
        tail_count = outs.size - k
        if tail_count > 0:
            # <q_x, q_y> is an integer below 2^24 for dim < 1040, so a float32 product is exact
            # in any summation order (float64 beyond that); then the sampler's float64 formula
            dt = np.float32 if t.dim < 1040 else np.float64
            dot = (t.emb_q[xs].astype(dt) @ t.emb_q[outs].astype(dt).T).astype(np.float64)
            d = distance_from_dot(t.emb_scale[xs][:, None], t.emb_sqnorm[xs][:, None],
                                  t.emb_scale[outs][None, :], t.emb_sqnorm[outs][None, :], dot)
            with np.errstate(invalid="ignore"):  # rows whose tail slot has mass 0: -inf
                lp[:, outs] = (log_q[:, k] - math.log(tail_count) - gamma[:, k]
                               + self.epsilon / 2 * t.tail_floor[xs])[:, None] \
                    - self.epsilon / 2 * d
        lp[rows[:, None], t.stored("head_ids")[xs]] = log_q[:, :k] - gamma[:, :k]
        m = lp.max(axis=1, keepdims=True)
        lp -= m + np.log(np.exp(lp - m).sum(axis=1, keepdims=True))
        keep = t.keep_row[xs].astype(bool)
        if keep.any():  # SanText+ non-sensitive input: sanitized w.p. p, kept w.p. 1 - p
            kr = rows[keep]
            lp[kr] += math.log(self.p)
            if self.p < 1:
                lp[kr, xs[kr]] = np.logaddexp(lp[kr, xs[kr]], math.log1p(-self.p))
        return lp

    def probabilities(self, xs: Any) -> np.ndarray:
        """Pr[M(x) = y] for every y, as the sampler realises it: ``exp(log_probabilities(xs))``.

        Parameters
        ----------
        xs : array_like of int, shape (n,) or scalar
            Input row ids.

        Returns
        -------
        np.ndarray of float64, shape (n, V)
            Rows sum to 1; zeros exactly where :meth:`log_probabilities` is ``-inf``.

        Notes
        -----
        The rows of SanText's ε·d-MLDP / SanText+'s UMLDP (any two inputs x, x'), Yue et al. 2021,
        *Differential Privacy for Text Analytics via Natural Text Sanitization* (Findings of ACL),
        as presented in Yue 2023, *Data Synthesis: Boosting Utility and Privacy in NLP* (PhD thesis,
        Ohio State), §2.4, Theorems 1–2.
        """
        return np.exp(self.log_probabilities(xs))
