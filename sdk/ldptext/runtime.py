"""The one interface both runtimes implement, and the steps they share.

:class:`ldptext.Sanitizer` (SanText / SanText+) and :class:`ldptext.Rewriter` (DP-BART) are both
:class:`Runtime` s: each is created by ``load`` from a signed bundle with the same verification
(:func:`open_bundle`), exposes the signer's key id and the verified manifest, and charges an optional
:class:`ldptext.ledger.Ledger` through :func:`charge` *before* any output is returned, so that a
refused charge releases nothing.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Iterable, Protocol, runtime_checkable

from .bundle import Bundle, read_bundle

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
    def load(cls, path: str | os.PathLike, *, trusted_keys: Iterable[Any] | None = None,
             allow_unsigned: bool = False, seed: int | None = None,
             ledger: "Ledger | None" = None) -> "Runtime":
        """Verify the bundle at ``path`` and build the runtime from it."""
        ...


def open_bundle(path: str | os.PathLike, *, mechanisms: Iterable[str],
                trusted_keys: Iterable[Any] | None = None, allow_unsigned: bool = False) -> Bundle:
    """Open and verify a bundle for a runtime: the same checks for every mechanism.

    Parameters
    ----------
    path : str or os.PathLike
        The bundle file.
    mechanisms : iterable of str
        The mechanisms this runtime accepts; any other is refused (``BundleFormatError``).
    trusted_keys : iterable or None
        Public keys the signer must be among; ``None`` means the local trust store.
    allow_unsigned : bool
        Accept an unsigned development bundle (warns).

    Returns
    -------
    Bundle
        Signature, key trust, every array hash, shapes and dtypes verified
        (:func:`ldptext.bundle.read_bundle`); semantic checks are the runtime's own.
    """
    return read_bundle(path, trusted_keys=trusted_keys, allow_unsigned=allow_unsigned,
                       expect_mechanism=tuple(mechanisms))


def charge(ledger: "Ledger | None", epsilon: float, delta: float, label: str, *, unit: str = "ldp") -> None:
    """Charge ``ledger`` (if any) for one release, before its output is returned.

    ``unit`` names what ε counts (see :mod:`ldptext.ledger`, "Units"); a ledger in another unit
    refuses the charge. A release that costs nothing (ε = δ = 0, e.g. an empty batch) is not
    recorded. A refused charge raises :class:`ldptext.errors.BudgetExceededError` or
    :class:`ldptext.errors.LedgerError`; the caller then returns nothing.
    """
    if ledger is not None and (epsilon > 0 or delta > 0):
        ledger.charge(epsilon, delta, label=label, unit=unit)
