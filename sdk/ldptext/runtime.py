"""The one interface both runtimes implement, and the steps they share.

:class:`ldptext.Sanitizer` (SanText / SanText+) and :class:`ldptext.Rewriter` (DP-BART) are both
:class:`Runtime` s: each is created by ``load`` from a signed bundle with the same verification
(:func:`open_bundle`), exposes the signer's key id and the verified manifest, and charges an optional
:class:`ldptext.ledger.Ledger` through :func:`charge` *before* any output is returned, so that a
refused charge releases nothing.

**Closing.** Both runtimes are context managers (:class:`Closable`): ``close()``, or the end of a
``with Sanitizer.load(...) as san:`` block, drops every reference the runtime holds to the bundle's
memory map, tables, tokenizer and ONNX sessions, so the mapping is released as soon as no array the
caller took from it is alive; any later use raises :class:`ldptext.errors.ClosedError`.

**Bytes.** ``load`` takes a file path or the bundle's bytes (an app that ships the bundle as an asset);
:func:`open_bundle` verifies both the same way.

**Pinning.** ``load(..., expect=...)`` (:class:`BundleExpectation`, or a mapping with the same keys)
lets an app require what it ships for: the mechanism, a range of the bundle's ε, the exact bundle
(:attr:`ldptext.bundle.Bundle.bundle_id`) or a minimum format version. A verified bundle that does not
match is refused with :class:`ldptext.errors.BundleExpectationError` before any runtime is built.
"""
from __future__ import annotations

import inspect
import math
import re

import numpy as np
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Protocol, runtime_checkable

from . import registry as _registry
from .bundle import Bundle, BundleSource, read_bundle
from .errors import BundleExpectationError, ClosedError, InputError, LedgerError, ParameterError

if TYPE_CHECKING:  # pragma: no cover
    from .ledger import Ledger


@runtime_checkable
class Runtime(Protocol):
    """A loaded, verified mechanism that turns private text into releasable text.

    Attributes
    ----------
    mechanism : str
        The bundle's mechanism (``"santext"``, ``"santext+"`` or ``"dpbart"``).
    key_id : str or None
        Id of the key that signed the bundle (``None`` only for an unsigned development bundle
        loaded with ``allow_unsigned=True``).
    manifest : dict
        The verified (signed) manifest of the bundle.
    ledger : Ledger or None
        Charged before every release that returns output.
    """

    mechanism: str
    key_id: str | None
    manifest: dict
    ledger: "Ledger | None"

    @classmethod
    def load(cls, path: BundleSource, *, trusted_keys: Iterable[Any] | None = None,
             allow_unsigned: bool = False, seed: int | None = None,
             ledger: "Ledger | None" = None, expect: "BundleExpectation | Mapping[str, Any] | None" = None,
             ) -> "Runtime":
        """Verify the bundle at ``path`` (a file, or the bundle's bytes) and build the runtime from it."""
        ...

    def close(self) -> None:
        """Release the bundle's memory map, tables and sessions; idempotent."""
        ...

    def __enter__(self) -> "Runtime":
        ...

    def __exit__(self, *exc_info: Any) -> None:
        ...


class _CheckedOnOpen(type):
    """The one door of every runtime: constructing one runs its mechanism's checks.

    ``cls(bundle, ...)`` runs ``__init__`` and then ``_open_checks()`` (the stated parameters against
    what the arrays realise, the graphs against the stated shapes, the adoption of libldptext), so
    that no code path — ``load``, ``load_token_runtime``, the CLI, Spark executors, evaluation —
    can hold a runtime around a bundle whose statements were not checked. A check that fails closes
    the half-built runtime and raises.
    """

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        obj = super().__call__(*args, **kwargs)
        try:
            obj._open_checks()
        except BaseException:
            obj.close()
            raise
        return obj


class Closable(metaclass=_CheckedOnOpen):
    """``close()`` and the context-manager protocol, shared by :class:`ldptext.Sanitizer` and
    :class:`ldptext.Rewriter`.

    A subclass lists in :attr:`_RELEASED` the instance attributes that hold the bundle's memory map,
    its arrays, tokenizer, sampler tables or ONNX sessions. ``close()`` removes them, so the process
    keeps no reference of its own: the memory map is unmapped (and the ONNX sessions freed) as soon as no
    array the caller took from the runtime is still alive. Nothing is unmapped under a live array, so
    closing never invalidates memory another thread or the caller is still reading.

    Guarantees after ``close()``: every method that samples, tokenizes or reads the tables, and every
    released attribute, raises :class:`ldptext.errors.ClosedError` (never ``AttributeError``, never a
    result); the verified metadata (``mechanism``, ``manifest``, ``key_id`` and the scalar privacy
    parameters) stays readable; ``close()`` again does nothing. A call running in another thread
    when ``close()`` is called either completes or raises ``ClosedError``; it never reads unmapped
    memory.
    """

    #: instance attributes that ``close()`` drops (set by each subclass)
    _RELEASED: tuple[str, ...] = ()
    _closed: bool = False

    def _open_checks(self) -> None:
        """Every check of the mechanism that ``__init__`` did not run itself (see
        :class:`_CheckedOnOpen`); raises a ``BundleError`` subclass."""

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._closed

    def close(self) -> None:
        """Release the bundle's memory map, tables, tokenizer and sessions; idempotent.

        After this, any use of the runtime other than its metadata raises
        :class:`ldptext.errors.ClosedError`.
        """
        self._closed = True
        for name in self._RELEASED:
            self.__dict__.pop(name, None)

    def _check_open(self) -> None:
        """Raise :class:`ldptext.errors.ClosedError` if :meth:`close` was called."""
        if self._closed:
            raise ClosedError(f"this {type(self).__name__} is closed")

    def __enter__(self):
        self._check_open()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        # only reached when normal lookup fails: a released attribute of a closed runtime
        if name in type(self)._RELEASED and self.__dict__.get("_closed", False):
            raise ClosedError(f"this {type(self).__name__} is closed")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class BundleExpectation:
    """What an application requires of the bundle it loads (every field optional; ``None``: any).

    Parameters
    ----------
    mechanism : str or tuple of str or None
        The accepted mechanism(s): ``"santext"``, ``"santext+"``, ``"dpbart"``.
    epsilon_min, epsilon_max : float or None
        Bounds (inclusive) on the bundle's ε, the signed ``params.epsilon`` of a SanText(+) bundle (the
        metric ε per unit of distance). A DP-BART bundle fixes no ε (it is chosen per call), so
        giving either bound for one is refused.
    bundle_id : str or None
        The exact :attr:`ldptext.bundle.Bundle.bundle_id` (64 lowercase hex digits).
    min_format_version : int or None
        Refuse bundles of an older format version.

    Raises
    ------
    ParameterError
        On construction, for a value outside its domain (unknown mechanism, ε not a positive finite
        number, ``epsilon_min > epsilon_max``, malformed id, version < 1).
    """

    mechanism: str | tuple[str, ...] | None = None
    epsilon_min: float | None = None
    epsilon_max: float | None = None
    bundle_id: str | None = None
    min_format_version: int | None = None

    def __post_init__(self) -> None:
        mech = self.mechanism
        if mech is not None:
            mech = (mech,) if isinstance(mech, str) else mech
            if not isinstance(mech, (tuple, list, frozenset, set)) or not mech \
                    or not all(_registry.is_known(m) for m in mech):
                raise ParameterError(f"expected mechanism must be among {_registry.names()}")
            object.__setattr__(self, "mechanism", tuple(sorted(mech)))
        for name in ("epsilon_min", "epsilon_max"):
            v = getattr(self, name)
            if v is not None:
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
                    raise ParameterError(f"{name} must be a positive finite number")
                object.__setattr__(self, name, float(v))
        if self.epsilon_min is not None and self.epsilon_max is not None and self.epsilon_min > self.epsilon_max:
            raise ParameterError("epsilon_min is larger than epsilon_max")
        if self.bundle_id is not None and (not isinstance(self.bundle_id, str)
                                           or not _HEX64.fullmatch(self.bundle_id)):
            raise ParameterError("bundle_id must be 64 lowercase hex digits (see `ldptext bundle verify`)")
        v = self.min_format_version
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ParameterError("min_format_version must be an integer >= 1")

    @classmethod
    def coerce(cls, expect: "BundleExpectation | Mapping[str, Any] | None") -> "BundleExpectation | None":
        """A :class:`BundleExpectation` from itself, a mapping of its field names (any other key is
        refused with ``ParameterError``), or ``None``."""
        if expect is None or isinstance(expect, cls):
            return expect
        if not isinstance(expect, Mapping):
            raise ParameterError("expect= must be a BundleExpectation, a mapping or None")
        known = {f.name for f in fields(cls)}
        unknown = sorted(str(k) for k in expect if k not in known)
        if unknown:
            raise ParameterError(f"unknown expect= key(s) {unknown[:5]}; known: {sorted(known)}")
        return cls(**dict(expect))

    def check(self, bundle: Bundle) -> None:
        """Refuse ``bundle`` (``BundleExpectationError``) unless it meets every given requirement.

        Parameters
        ----------
        bundle : Bundle
            A verified bundle.
        """
        m = bundle.manifest
        if self.mechanism is not None and bundle.mechanism not in self.mechanism:
            raise BundleExpectationError(f"bundle is for mechanism {bundle.mechanism!r}; the application "
                                         f"requires {' or '.join(self.mechanism)}")
        if self.min_format_version is not None and m["format_version"] < self.min_format_version:
            raise BundleExpectationError(f"bundle has format version {m['format_version']}; the "
                                         f"application requires >= {self.min_format_version}")
        if self.bundle_id is not None and bundle.bundle_id != self.bundle_id:
            raise BundleExpectationError(f"bundle id {bundle.bundle_id[:16]}... is not the pinned "
                                         f"{self.bundle_id[:16]}...")
        if self.epsilon_min is not None or self.epsilon_max is not None:
            if _registry.get(bundle.mechanism).statement().unit != "token":
                raise BundleExpectationError(f"a {bundle.mechanism} bundle fixes no epsilon (it is chosen per call): "
                                             "bound epsilon where rewrite is called, not with expect=")
            params = m.get("params")
            eps = params.get("epsilon") if isinstance(params, dict) else None
            if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps):
                raise BundleExpectationError("bundle states no numeric epsilon")
            if self.epsilon_min is not None and eps < self.epsilon_min:
                raise BundleExpectationError(f"bundle epsilon {eps:g} is below the required minimum "
                                             f"{self.epsilon_min:g}")
            if self.epsilon_max is not None and eps > self.epsilon_max:
                raise BundleExpectationError(f"bundle epsilon {eps:g} exceeds the required maximum "
                                             f"{self.epsilon_max:g}")


def open_bundle(path: BundleSource, *, mechanisms: Iterable[str],
                trusted_keys: Iterable[Any] | None = None, allow_unsigned: bool = False,
                expect: "BundleExpectation | Mapping[str, Any] | None" = None) -> Bundle:
    """Open and verify a bundle for a runtime: the same checks for every mechanism.

    Parameters
    ----------
    path : str, os.PathLike, bytes, bytearray or memoryview
        The bundle file, or its content (verified exactly as a file is; a ``bytearray`` or
        ``memoryview`` is copied once, ``bytes`` are used as they are).
    mechanisms : iterable of str
        The mechanisms this runtime accepts; any other is refused (``BundleFormatError``).
    trusted_keys : iterable or None
        Public keys the signer must be among; ``None`` means the local trust store.
    allow_unsigned : bool
        Accept an unsigned development bundle (warns).
    expect : BundleExpectation, mapping or None
        The application's pins (:class:`BundleExpectation`); checked after verification.

    Returns
    -------
    Bundle
        Signature, key trust, every array hash, shapes and dtypes verified
        (:func:`ldptext.bundle.read_bundle`) and ``expect`` met; semantic checks are the runtime's own.

    Raises
    ------
    BundleError
        A subclass says which check failed; ``BundleExpectationError`` for an unmet ``expect``.
    ParameterError
        ``expect`` itself is malformed (unknown key, value outside its domain).
    """
    expectation = BundleExpectation.coerce(expect)  # a malformed pin fails before the file is read
    bundle = read_bundle(path, trusted_keys=trusted_keys, allow_unsigned=allow_unsigned,
                         expect_mechanism=tuple(mechanisms))
    if expectation is not None:
        expectation.check(bundle)
    return bundle


#: The one-line refusal of a DP-BART bundle where a token sanitizer is expected.
DPBART_REFUSAL = ("this is a dpbart bundle (document rewriting, not token sanitization): "
                  "use `ldptext rewrite --bundle FILE --epsilon EPS`")


def load_token_runtime(path: BundleSource, *, trusted_keys: Iterable[Any] | None = None,
                       allow_unsigned: bool = False, seed: int | None = None,
                       expect: "BundleExpectation | Mapping[str, Any] | None" = None,
                       allow_weak_privacy: bool = False) -> Any:
    """Verify a bundle, then open the runtime of its mechanism (any token-level one).

    The mechanism is read from the manifest only after :func:`open_bundle` has checked the
    signature, the signer's trust, every array hash and the pins, exactly as each runtime's own
    ``load`` does; the runtime class then runs its mechanism's checks. Each runtime states its
    guarantee (SanText(+): :class:`ldptext.Sanitizer`; the others: docs/mechanisms.md).

    Parameters
    ----------
    path : str, os.PathLike, bytes, bytearray or memoryview
        The bundle.
    trusted_keys : iterable or None
        Public keys the signer must be among; ``None``: the local trust store.
    allow_unsigned : bool
        Accept an unsigned development bundle (warns).
    seed : int or None
        Reproducible, **not private** output (warns).
    expect : BundleExpectation, mapping or None
        The application's pins.
    allow_weak_privacy : bool
        SanText(+): accept a bundle whose output is close to its input (:mod:`ldptext.verbatim`).

    Returns
    -------
    Sanitizer or TokenRuntime
        The open runtime of the bundle's token mechanism (:mod:`ldptext.registry`; a context manager).

    Raises
    ------
    BundleError
        Verification failed, an unmet pin, or a DP-BART bundle (:data:`DPBART_REFUSAL`).
    ModuleNotFoundError
        A CMP or Mahalanobis bundle without faiss.
    """
    from .errors import BundleFormatError

    bundle = open_bundle(path, mechanisms=_registry.names(), trusted_keys=trusted_keys,
                         allow_unsigned=allow_unsigned, expect=expect)
    mechanism = _registry.get(bundle.mechanism)
    if mechanism.kind != "token":
        raise BundleFormatError(DPBART_REFUSAL if mechanism.kind == "document" else
                                f"no sanitize runtime for mechanism {bundle.mechanism!r}")
    # the weak-privacy opt-in, for the runtimes whose bundles state a verbatim rate
    cls = mechanism.runtime_class()
    takes_opt_in = bool(getattr(cls, "WEAK_PRIVACY_OPT_IN", False)) or \
        "allow_weak_privacy" in inspect.signature(cls.__init__).parameters
    extra = {"allow_weak_privacy": allow_weak_privacy} if takes_opt_in else {}
    return construct_checked(cls, bundle, seed=seed, **extra)


def construct_checked(cls: type, bundle: Bundle, **kwargs: Any) -> Any:
    """``cls(bundle, **kwargs)`` with every check of its mechanism run: the one door.

    A runtime of the :class:`Closable` family runs its checks by being constructed
    (:class:`_CheckedOnOpen`); a plugin's runtime outside it has its ``check_parameters()`` run here,
    so that no caller holds either kind around an unchecked bundle.

    Raises
    ------
    BundleError
        A check failed (the half-built runtime is closed).
    """
    runtime = cls(bundle, **kwargs)
    if not isinstance(type(runtime), _CheckedOnOpen) and hasattr(runtime, "check_parameters"):
        try:
            runtime.check_parameters()
        except BaseException:
            runtime.close()
            raise
    return runtime


def row_ids(xs: Any, n_rows: int) -> np.ndarray:
    """``xs`` as a 1-d int64 array of row ids of a bundle with ``n_rows`` rows, for the exact
    ``probabilities`` / ``log_probabilities`` of the runtimes.

    Raises
    ------
    InputError
        An id that is not an integer or lies outside [0, n_rows) (a negative one would silently index
        from the end); the message names its position, never the id (an id can reveal the word).
    """
    arr = np.atleast_1d(np.asarray(xs))
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise InputError("row ids must be integers")
    flat = arr.reshape(-1)
    bad = np.flatnonzero((flat < 0) | (flat >= n_rows))
    if bad.size:
        raise InputError(f"row id at position {int(bad[0])} is outside this bundle's {n_rows} rows")
    return flat.astype(np.int64)


def check_ledger_unit(ledger: "Ledger | None", unit: str) -> None:
    """Refuse, when a runtime is loaded, a ledger that counts in another unit than the runtime charges.

    The ledger would refuse every charge anyway (:meth:`ldptext.ledger.Ledger.charge`); checking at
    load says so before any text is processed, with the same error type.

    Raises
    ------
    LedgerError
        ``ledger.unit`` is not ``unit``.
    """
    held = getattr(ledger, "unit", None)
    if ledger is not None and held != unit:
        raise LedgerError(f"ledger counts in unit {held!r}; this runtime releases in unit {unit!r}, which "
                          f"cannot be added to it (use a ledger created with unit={unit!r})")


def charge(ledger: "Ledger | None", epsilon: float, delta: float, label: str, *, unit: str = "ldp") -> None:
    """Charge ``ledger`` (if any) for one release, before its output is returned.

    ``unit`` names what ε counts (see :mod:`ldptext.ledger`, "Units"); a ledger in another unit
    refuses the charge. A release that costs nothing (ε = δ = 0, e.g. an empty batch) is not
    recorded. A refused charge raises :class:`ldptext.errors.BudgetExceededError` or
    :class:`ldptext.errors.LedgerError`; the caller then returns nothing. An ε = ∞ release (only
    with an explicit evaluation-only flag: no privacy at all) is never recorded as if it were a
    finite cost: with a ledger it is refused (:class:`ldptext.errors.ParameterError`).
    """
    if ledger is not None and math.isinf(epsilon):
        raise ParameterError("an epsilon = inf release (evaluation only, no privacy) cannot be charged to a "
                             "privacy ledger; run evaluation-only releases without a ledger")
    if ledger is not None and (epsilon > 0 or delta > 0):
        ledger.charge(epsilon, delta, label=label, unit=unit)
