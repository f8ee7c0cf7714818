"""libldptext inside the Python SDK: the C library's view of a verified bundle, and its sanitizers.

The runtimes on the SanText engine (:class:`ldptext.Sanitizer`, :class:`ldptext.tem.TEMSanitizer`,
:class:`ldptext.custext.CusTextSanitizer`) run on **libldptext** (``native/lib/``, compiled into
``ldptext._native``) when the C extension is built: the library tokenizes, samples and detokenizes
exactly as an app that embeds it does, so a seeded Python runtime and a seeded C, wasm or binding
sanitizer give the same output. The Python loader has verified the bundle (signature, trusted
key, every array hash) before the library adopts the arrays (no second hashing; see
``native/lib/host.h``); the library then runs every other check of ``ldp_bundle_open`` itself.
"""
from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Iterator

import numpy as np

from .bundle import Bundle, canonical_json
from .errors import BundleError, BundleFormatError, BundleIntegrityError, InputError, ParameterMismatchError
from .ldp_codes import (GROUPS, LDP_E_INPUT_ID, LDP_E_INVALID_UTF8, LDP_E_MISSING_ARRAY, LDP_E_NOMEM,
                        LDP_E_PARAMETER_MISMATCH, LDP_E_PARAMS, LDP_E_SAMPLER, LDP_E_TOO_LONG)

try:
    from . import _native
except ImportError:  # pragma: no cover - exercised when the extension could not be built
    _native = None

__all__ = ["available", "library_bundle", "Adoption", "LibrarySanitizers", "library_error", "LibraryError"]

#: what the library's calls raise (translated by :func:`library_error`); never raised without it
LibraryError: type = _native.LibraryError if _native is not None else type("LibraryError", (Exception,), {})

# what kind of bundle error each code is: the header's sections (ldp_codes.GROUPS), bundle.py's classes
TOKENIZER_CODES = frozenset(c for c, g in GROUPS.items() if g == "tokenizer")  # the library lacks a part
FORMAT_CODES = frozenset(c for c, g in GROUPS.items()
                         if g in ("container: safetensors header", "signature and trust", "manifest")
                         ) | {LDP_E_MISSING_ARRAY, LDP_E_PARAMS}
INTEGRITY_CODES = frozenset(c for c, g in GROUPS.items()
                            if g in ("arrays", "SanText schema and semantics",
                                     "the arrays of the mechanisms on the SanText engine")
                            ) - FORMAT_CODES - {LDP_E_PARAMETER_MISMATCH}


def available() -> bool:
    """Whether the C extension was built with libldptext."""
    return _native is not None and hasattr(_native, "Bundle")


def library_bundle(bundle: Bundle, *, release_rows: bool = True) -> Any:
    """The C library's view of a verified bundle (``ldptext._native.Bundle``), or ``None`` where the
    extension lacks the library or the library lacks the bundle's tokenizer (then the runtime uses
    the Hugging Face tokenizer with the C sampler).

    Parameters
    ----------
    bundle : Bundle
        Verified by :func:`ldptext.runtime.open_bundle`.
    release_rows : bool
        Release the mapped pages of ``emb_q`` afterwards: the library samples from its own copy of
        the codes, rows on cache lines (``native/lib/bundle.c`` align_rows), so the resident size
        does not grow by it (:meth:`Bundle.release_resident`; values read later come from the file).

    Returns
    -------
    ldptext._native.Bundle or None

    Raises
    ------
    BundleFormatError, BundleIntegrityError, ParameterMismatchError
        The library refuses the bundle (its message says which check failed).
    """
    if not available():
        return None
    try:
        library = _native.Bundle(dict(bundle.arrays), canonical_json(bundle.manifest))
        if release_rows:
            bundle.release_resident("emb_q")
        return library
    except _native.LibraryError as e:
        code, message = int(e.args[0]), str(e.args[1])
        if code in TOKENIZER_CODES:
            return None
        if code in FORMAT_CODES:
            raise BundleFormatError(f"libldptext refuses the bundle: {message}") from None
        if code == LDP_E_NOMEM:
            raise MemoryError("libldptext: out of memory while opening the bundle") from None
        if code == LDP_E_PARAMETER_MISMATCH:
            raise ParameterMismatchError(f"libldptext refuses the bundle: {message}") from None
        if code in INTEGRITY_CODES:
            raise BundleIntegrityError(f"libldptext refuses the bundle: {message}") from None
        raise BundleError(f"libldptext refuses the bundle: {message}") from None


class Adoption:
    """:func:`library_bundle` on a helper thread: the C library checks the tables and parses the
    tokenizer without the GIL while the Python checks of the same tables run (the result is the
    same as calling it afterwards)."""

    def __init__(self, bundle: Bundle) -> None:
        self._bundle = bundle
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(bundle,), name="ldptext-adopt",
                                        daemon=True)
        self._thread.start()

    def _run(self, bundle: Bundle) -> None:
        try:
            # the rows' pages are released in result(): the Python checks read them meanwhile
            self._value = library_bundle(bundle, release_rows=False)
        except BaseException as e:  # re-raised by result(), in the caller's thread
            self._error = e

    def join(self) -> None:
        """Wait for the library's checks (their result is dropped)."""
        self._thread.join()

    def result(self) -> Any:
        """The library's bundle (or ``None``); raises what :func:`library_bundle` raised."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        if self._value is not None:
            self._bundle.release_resident("emb_q")
        return self._value


class LibrarySanitizers:
    """The C sanitizers of one runtime: one seeded stream (every call, in call order), or private
    OS-keyed ones, one lent to each concurrent call.

    Parameters
    ----------
    library : ldptext._native.Bundle
    seed_key : bytes or None
        The seeded-mode key (:func:`ldptext.rng._seed_key`), or ``None`` for private randomness.
    """

    def __init__(self, library: Any, seed_key: bytes | None) -> None:
        self.library = library
        self.seeded = seed_key is not None
        self.stream = _native.TextSanitizer(library, seed_key if self.seeded else os.urandom(32), self.seeded)
        self._idle: list = [] if self.seeded else [self.stream]

    def take(self) -> Any:
        """A C sanitizer for one call, to :meth:`give` back: the seeded stream, or an idle private
        one (a new OS-keyed one when every other is busy in another thread)."""
        if self.seeded:
            return self.stream  # its own lock serialises callers
        try:
            return self._idle.pop()
        except IndexError:
            return _native.TextSanitizer(self.library, os.urandom(32), False)

    def give(self, s: Any) -> None:
        """Return what :meth:`take` lent."""
        if not self.seeded:
            self._idle.append(s)

    @contextlib.contextmanager
    def borrow(self) -> Iterator[Any]:
        """:meth:`take` and :meth:`give` around a block."""
        s = self.take()
        try:
            yield s
        finally:
            self.give(s)

    def sample(self, flat: np.ndarray) -> np.ndarray:
        """One draw per id of ``flat`` (every id a valid input: checked by the caller)."""
        xs = np.ascontiguousarray(flat, dtype=np.int32)
        ys = np.empty_like(xs)
        try:
            with self.borrow() as s:
                s.sample(xs, ys)
        except _native.LibraryError as e:
            raise library_error(e, batch=False) from None
        return ys

    def sanitize_batch(self, texts: list) -> tuple[list, list]:
        """Tokenize, sample (one sampler call for the batch) and detokenize every document in C
        without the GIL: (texts, token counts)."""
        s = self.take()  # not borrow(): a context manager costs a one-document call measurably
        try:
            return s.sanitize_batch(texts)
        except _native.LibraryError as e:
            raise library_error(e, batch=True) from None
        finally:
            self.give(s)


def library_error(e: Exception, *, batch: bool) -> Exception:
    """The SDK's exception for a libldptext failure: the document (and token) named, never its text
    (the library's messages hold none).

    Parameters
    ----------
    e : ldptext._native.LibraryError
        Its args: (code, message, document, token).
    batch : bool
        Whether the call was a batch (the document index is then named).

    Returns
    -------
    Exception
    """
    code, message, doc, token = (int(e.args[0]), str(e.args[1]), int(e.args[2]), int(e.args[3]))
    if code == LDP_E_PARAMETER_MISMATCH:  # a row checked before its first draw is wrong
        from .row_guard import ROW_REFUSAL

        return ParameterMismatchError(ROW_REFUSAL)
    if code == LDP_E_INPUT_ID and batch:
        return InputError(f"document {doc}: token {token} is not a valid input of this bundle (a "
                          f"special token of its tokenizer, e.g. written literally in the text)", document=doc)
    if code == LDP_E_INPUT_ID:
        return InputError("a token id is not a valid input of this bundle (out of range or a "
                          "special token)")
    if code == LDP_E_NOMEM:
        return MemoryError("libldptext: out of memory")
    if code == LDP_E_SAMPLER:
        return RuntimeError(f"libldptext: {message}")
    if code == LDP_E_TOO_LONG:
        return InputError(f"document {doc} has more tokens than the library handles (2^31)"
                          if batch else "the input has more tokens than the library handles (2^31)",
                          document=doc if batch else None)
    if batch:  # not UTF-8 text (a lone surrogate) or another tokenizer failure
        return InputError(f"document {doc} could not be tokenized", document=doc)
    if code == LDP_E_INVALID_UTF8:
        return InputError("the tokenizer could not process the input")
    return InputError(f"libldptext: {message}")
