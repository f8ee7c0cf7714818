"""``--trusted-key`` for ``ldptext sanitize`` and ``ldptext rewrite``: which signers a run accepts.

**Semantics: the keys given replace the local trust store for that run; they are not added to it.**
Without the option a bundle must be signed by a key of the store (``ldptext keys list``); with it,
only by one of the keys it names (repeatable), whatever the store holds. Replacing is the safe
direction: a pipeline that pins its publisher's key cannot be widened by a key someone added to the
store, and adding a key for good is what ``ldptext keys trust`` is for. What used to surprise is a
refusal of a bundle the store trusts; that refusal now says the store was not consulted
(:func:`explained_trust`).
"""
from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from ..errors import UnknownKeyError

TRUSTED_KEY_HELP = ("trust only this public key (.pub file or base64; repeatable) for this run: it REPLACES "
                    "the local trust store, which is then not consulted (`ldptext keys trust` adds a key "
                    "to the store for good); default: the local trust store (`ldptext keys list`)")


def add_trusted_key_option(p: argparse.ArgumentParser) -> None:
    """Add ``--trusted-key PUB`` (repeatable) with the semantics of the module docstring."""
    p.add_argument("--trusted-key", action="append", default=None, metavar="PUB", help=TRUSTED_KEY_HELP)


class _Signer(Exception):
    """Carries the signature fields out of :func:`ldptext.bundle.open_unverified` early."""

    def __init__(self, info: object) -> None:
        super().__init__()
        self.info = info


def _signer_key_id(bundle: str) -> str | None:
    """The key id a bundle says it is signed by (read before its hashes: this only words an error)."""
    from .. import bundle as _bundle

    def stop(info: object) -> None:
        raise _Signer(info)

    try:
        _bundle.open_unverified(bundle, on_signature=stop)
    except _Signer as found:
        return getattr(found.info, "key_id", None)
    except Exception:  # an unreadable bundle: the refusal stands as it was
        return None
    return None


def _store_trusts(key_id: str) -> bool:
    from .. import keys as _keys

    try:
        return any(_keys.key_id(k) == key_id for k in _keys.trusted_public_keys())
    except Exception:  # a broken store: say nothing about it here
        return False


@contextmanager
def explained_trust(bundle: str, trusted_keys: Sequence[str] | None) -> Iterator[None]:
    """Restate an untrusted-signer refusal under ``--trusted-key``: the store was not consulted.

    Raises
    ------
    UnknownKeyError
        The bundle's signer is not among ``trusted_keys``; the message names the signer, says that
        ``--trusted-key`` replaced the store, and whether the store would have trusted it.
    """
    try:
        yield
    except UnknownKeyError as e:
        if not trusted_keys:
            raise
        kid = _signer_key_id(bundle)
        who = f"key {kid}" if kid else "a key"
        given = len(trusted_keys)
        message = (f"bundle is signed by {who}, which is not among the {given} key{'s' if given > 1 else ''} "
                   f"given with --trusted-key; --trusted-key replaces the local trust store for this run")
        if kid and _store_trusts(kid):
            message += " (the store trusts this signer: leave --trusted-key out, or also pass its .pub)"
        raise UnknownKeyError(message) from e
