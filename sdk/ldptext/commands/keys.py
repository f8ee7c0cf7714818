"""``ldptext keys``: Ed25519 signing keys and the local trust store.

``generate --out DIR`` writes ``signing.key`` (PKCS#8 PEM, mode 0600, encrypted when a passphrase is
given) and ``signing.pub``; ``trust PUBFILE`` adds a public key to ``$LDPTEXT_HOME/trusted_keys``
(``trust --developer``: this machine's developer key, which is never trusted implicitly); ``untrust``
removes one; ``list`` shows the trusted key ids. Passphrases are read from a file or an
environment variable, never from the command line (where ``ps`` and shell history would see them).
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from .. import keys as _keys
from ..errors import KeyFileError, ParameterError


def add_passphrase_options(parser: argparse.ArgumentParser) -> None:
    """``--passphrase-file`` / ``--passphrase-env`` (never the passphrase itself on the command line)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--passphrase-file", metavar="F",
                       help="read the key's passphrase from this file (first line)")
    group.add_argument("--passphrase-env", metavar="VAR",
                       help="read the key's passphrase from this environment variable")


def add_signing_options(parser: argparse.ArgumentParser) -> None:
    """``--sign-key``, the passphrase options and ``--unsigned``: how every builder signs its bundle."""
    parser.add_argument("--sign-key", default=None,
                        help="Ed25519 private key (PEM); default: the local developer key")
    add_passphrase_options(parser)
    parser.add_argument("--unsigned", action="store_true", help="write an unsigned development bundle")


def signing_from_args(args) -> dict:
    """``sign_key`` and ``passphrase`` keyword arguments for a bundle builder, from
    :func:`add_signing_options` (``sign_key=False`` asks for an unsigned bundle)."""
    return {"sign_key": False if args.unsigned else args.sign_key, "passphrase": read_passphrase(args)}


def read_passphrase(args) -> bytes | None:
    """The passphrase named by --passphrase-file / --passphrase-env, or None."""
    if getattr(args, "passphrase_file", None):
        try:
            data = Path(args.passphrase_file).read_bytes()
        except OSError as e:
            raise KeyFileError(f"cannot read passphrase file: {e.strerror}") from None
        data = data.split(b"\n", 1)[0].rstrip(b"\r")
        if not data:
            raise KeyFileError("passphrase file is empty")
        return data
    if getattr(args, "passphrase_env", None):
        value = os.environ.get(args.passphrase_env)
        if not value:
            raise KeyFileError(f"environment variable {args.passphrase_env} is unset or empty")
        return value.encode("utf-8")
    return None


def register(sub) -> None:
    """Add ``keys generate|trust|untrust|list`` to the sub-command parser ``sub``."""
    parser = sub.add_parser("keys", help="signing keys and the local trust store")
    actions = parser.add_subparsers(dest="keys_command", metavar="ACTION", required=True)

    gen = actions.add_parser("generate", help="create an Ed25519 signing key pair")
    gen.add_argument("--out", required=True, metavar="DIR", help="directory for the key files")
    gen.add_argument("--name", default="signing", help="file name stem (default: signing)")
    gen.add_argument("--trust", action="store_true", help="also trust the new public key here")
    add_passphrase_options(gen)
    gen.set_defaults(func=run_generate)

    tr = actions.add_parser("trust", help="trust a public key for loading bundles")
    tr.add_argument("pubfile", metavar="PUBFILE", nargs="?", default=None,
                    help=".pub file (or base64 / PEM public key)")
    tr.add_argument("--developer", action="store_true",
                    help="trust this machine's developer key (bundles built here without --sign-key)")
    tr.set_defaults(func=run_trust)

    un = actions.add_parser("untrust", help="remove a key from the trust store")
    un.add_argument("key", metavar="KEY", help="key id, .pub file or base64 public key")
    un.set_defaults(func=run_untrust)

    ls = actions.add_parser("list", help="list the trusted keys")  # no options
    ls.set_defaults(func=run_list)


def run_generate(args) -> int:
    """``ldptext keys generate``: write a new key pair; returns the exit status."""
    passphrase = read_passphrase(args)
    priv, pub = _keys.generate_keypair(args.out, passphrase=passphrase, name=args.name)
    kid = _keys.key_id(_keys.load_public_key(pub))
    print(f"private key {priv} (mode 0600{', encrypted' if passphrase else ', NOT encrypted'})")
    print(f"public key  {pub}")
    print(f"key id      {kid}")
    if args.trust:
        print(f"trusted     {_keys.trust(pub)}")
    return 0


def run_trust(args) -> int:
    """``ldptext keys trust``: add a public key (or, with ``--developer``, the local developer key) to
    the local trust store; returns the exit status."""
    if args.developer == (args.pubfile is not None):
        raise ParameterError("give either PUBFILE or --developer")
    if args.developer:
        path = _keys.trust_developer_key()
        print(f"trusted this machine's DEVELOPER key {path.stem} ({path}): bundles built here without "
              f"--sign-key now load here; `ldptext keys untrust {path.stem}` undoes it")
        return 0
    path = _keys.trust(args.pubfile)
    print(f"trusted key {path.stem} ({path})")
    return 0


def run_untrust(args) -> int:
    """``ldptext keys untrust``: remove a public key from the local trust store."""
    if not _keys.untrust(args.key):
        raise KeyFileError("that key is not in the trust store")
    print("removed")
    return 0


def run_list(args) -> int:
    """``ldptext keys list``: print the ids of the trusted keys."""
    found = _keys.trusted_public_keys()
    dev = _keys.developer_public_key()
    stored = {_keys.public_bytes(k) for k in _keys._stored_public_keys()}
    for key in found:
        note = ""
        if dev is not None and _keys.public_bytes(key) == _keys.public_bytes(dev):
            note = (" (developer key)" if _keys.public_bytes(key) in stored
                    else f" (developer key, trusted while {_keys.DEV_ENV}=1)")
        print(_keys.key_id(key) + note)
    if not found:
        print(f"(no trusted keys in {_keys.trust_dir()})")
    return 0
