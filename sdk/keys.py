"""Ed25519 signing keys for bundles and the local trust store.

A bundle is trusted when it is signed by a key whose public half is in the trust store: the
directory ``$LDPTEXT_HOME/trusted_keys`` (default ``~/.config/ldptext/trusted_keys``), one
``<key id>.pub`` file per key (raw 32-byte Ed25519 public key, base64). Private keys are PKCS#8 PEM
files, mode 0600, optionally encrypted with a passphrase.
"""
from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .errors import KeyFileError

PublicKeyLike = "Ed25519PublicKey | bytes | str | os.PathLike"


def ldptext_home() -> Path:
    """The directory of local state: trust store and the developer key (``$LDPTEXT_HOME``)."""
    return Path(os.environ.get("LDPTEXT_HOME", Path.home() / ".config" / "ldptext"))


def trust_dir() -> Path:
    return ldptext_home() / "trusted_keys"


def public_bytes(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(key: Ed25519PublicKey) -> str:
    """Short stable identifier of a public key: the first 16 hex digits of SHA-256 of its bytes."""
    return hashlib.sha256(public_bytes(key)).hexdigest()[:16]


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def generate_keypair(out_dir: str | os.PathLike, passphrase: bytes | None = None,
                     name: str = "signing") -> tuple[Path, Path]:
    """Create ``<name>.key`` (PKCS#8 PEM, 0600, encrypted if a passphrase is given) and
    ``<name>.pub`` (base64 raw public key) in ``out_dir``; refuses to overwrite."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    priv_path, pub_path = out / f"{name}.key", out / f"{name}.pub"
    if priv_path.exists() or pub_path.exists():
        raise KeyFileError(f"refusing to overwrite existing key files in {out}")
    key = Ed25519PrivateKey.generate()
    enc = (serialization.BestAvailableEncryption(passphrase) if passphrase
           else serialization.NoEncryption())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)
    _write_private(priv_path, pem)
    pub_path.write_text(base64.b64encode(public_bytes(key.public_key())).decode() + "\n")
    return priv_path, pub_path


def load_private_key(path: str | os.PathLike, passphrase: bytes | None = None) -> Ed25519PrivateKey:
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise KeyFileError(f"cannot read private key {path}: {e.strerror}") from None
    try:
        key = serialization.load_pem_private_key(data, password=passphrase)
    except (ValueError, TypeError) as e:
        raise KeyFileError(f"cannot load private key {path}: {e}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"{path} is not an Ed25519 private key")
    return key


def load_public_key(key) -> Ed25519PublicKey:
    """Accept an Ed25519PublicKey, 32 raw bytes, base64 text, or a path to a ``.pub`` / PEM file."""
    if isinstance(key, Ed25519PublicKey):
        return key
    if isinstance(key, Ed25519PrivateKey):
        return key.public_key()
    if isinstance(key, (bytes, bytearray)) and len(key) == 32:
        return Ed25519PublicKey.from_public_bytes(bytes(key))
    text = key
    if isinstance(key, (str, os.PathLike)) and Path(key).is_file():
        text = Path(key).read_bytes()
    if isinstance(text, str):
        text = text.encode()
    try:
        if text.lstrip().startswith(b"-----BEGIN"):
            pub = serialization.load_pem_public_key(text)
            if not isinstance(pub, Ed25519PublicKey):
                raise KeyFileError("not an Ed25519 public key")
            return pub
        return Ed25519PublicKey.from_public_bytes(base64.b64decode(text.strip(), validate=True))
    except (ValueError, TypeError) as e:
        raise KeyFileError(f"cannot parse public key: {e}") from None


def trust(key) -> Path:
    """Add a public key to the local trust store; returns the file written."""
    pub = load_public_key(key)
    d = trust_dir()
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{key_id(pub)}.pub"
    path.write_text(base64.b64encode(public_bytes(pub)).decode() + "\n")
    return path


def trusted_public_keys() -> list[Ed25519PublicKey]:
    d = trust_dir()
    if not d.is_dir():
        return []
    return [load_public_key(p) for p in sorted(d.glob("*.pub"))]


def developer_key() -> Ed25519PrivateKey:
    """The local developer signing key (created, and trusted locally, on first use).

    Used when precompute is given no ``--sign-key``: bundles built on this machine then load here
    without flags, and anywhere else only after the receiver trusts this key explicitly.
    """
    d = ldptext_home() / "keys"
    priv = d / "developer.key"
    if not priv.exists():
        d.mkdir(parents=True, exist_ok=True)
        try:
            generate_keypair(d, name="developer")
        except KeyFileError:  # created concurrently by another process
            pass
    key = load_private_key(priv)
    trust(key.public_key())
    return key
