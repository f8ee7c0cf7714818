"""Exception types of the SDK.

Messages never contain raw input text: they name what is wrong (a parameter, a line number, a bundle
field), never the text being sanitized.
"""


class LdptextError(Exception):
    """Base class of every error raised by ldptext."""


class ParameterError(LdptextError, ValueError):
    """A privacy or configuration parameter is out of its domain (ε ≤ 0, NaN, p ∉ (0, 1], ...)."""


class InputError(LdptextError, ValueError):
    """The input to sanitize is unusable (not text, not UTF-8, a token id outside the domain).

    ``document``: the index, within the batch, of the document that failed (``None`` when the error
    is not about one document), so that a caller can name its own line or row without reading the
    message.
    """

    def __init__(self, message: str = "", *, document: int | None = None) -> None:
        super().__init__(message)
        self.document = document


class BundleError(LdptextError):
    """A bundle is missing, truncated, corrupted or inconsistent with its manifest."""


class BundleFormatError(BundleError):
    """The bundle's format or format version is not one this runtime knows."""


class BundleIntegrityError(BundleError):
    """An array's bytes, shape, dtype or values disagree with the signed manifest."""


class SignatureError(BundleError):
    """The bundle's signature does not verify."""


class UnsignedBundleError(SignatureError):
    """The bundle carries no signature and unsigned bundles were not explicitly allowed."""


class UnknownKeyError(SignatureError):
    """The bundle is signed by a key that is not among the trusted keys."""


class KeyFileError(LdptextError):
    """A key file is missing, malformed, or its passphrase is wrong."""


class BudgetExceededError(LdptextError):
    """A release would exceed the privacy budget recorded in a ledger; nothing was output."""


class LedgerError(LdptextError):
    """A ledger file is unreadable, tampered with, or cannot be written."""


class BundleExpectationError(BundleError):
    """A verified bundle is not the one the application pinned (mechanism, ε range, bundle id or
    format version differ from ``expect=``)."""


class ParameterMismatchError(BundleIntegrityError):
    """A manifest's privacy parameters disagree with what the bundle's arrays realise (checked before
    a bundle is (re-)signed)."""


class WeakPrivacyError(ParameterError):
    """The output would be close to the input (a huge finite ε): refused unless explicitly allowed
    (``allow_weak_privacy=True`` / ``--allow-weak-privacy``), and then every report says so."""


class ClosedError(LdptextError):
    """A :class:`ldptext.Sanitizer` or :class:`ldptext.Rewriter` was used after ``close()`` (or after
    its ``with`` block ended)."""
