"""Ed25519 signing keys for bundles and the local trust store.

A bundle is trusted when it is signed by a key whose public half is in the trust store: the
directory ``$LDPTEXT_HOME/trusted_keys`` (default ``~/.config/ldptext/trusted_keys``), one
``<key id>.pub`` file per key (raw 32-byte Ed25519 public key, base64). Private keys are PKCS#8 PEM
files, mode 0600, optionally encrypted with a passphrase.

**The developer key is never trusted implicitly.** Precompute signs with a local developer key
(``$LDPTEXT_HOME/keys/developer.key``) when given no ``--sign-key``; creating that key does *not* add
it to the trust store, so a bundle built on this machine does not load here either until one of two
explicit opt-ins:

* ``ldptext keys trust --developer`` (:func:`trust_developer_key`): adds it to the trust store, for
  good (``ldptext keys untrust <id>`` removes it);
* the environment variable ``LDPTEXT_DEV=1`` (:data:`DEV_ENV`): while it is set, the trust store
  also contains the developer key (nothing is written); for tests and ``make demo``.

A load refused for lack of this trust names both fixes. (Trust stores written by earlier versions,
whose ``developer_key()`` trusted itself, still hold the key: ``ldptext keys list`` marks it.)
"""
from __future__ import annotations

import base64
import hashlib
import os
import warnings
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .errors import KeyFileError
from .fileio import write_bytes_atomic

PublicKeyLike = "Ed25519PublicKey | bytes | str | os.PathLike"
DEV_ENV = "LDPTEXT_DEV"


def ldptext_home() -> Path:
    """The directory of local state: trust store and the developer key (``$LDPTEXT_HOME``)."""
    return Path(os.environ.get("LDPTEXT_HOME", Path.home() / ".config" / "ldptext"))


def trust_dir() -> Path:
    """The local trust store: one ``<key id>.pub`` file per trusted key."""
    return ldptext_home() / "trusted_keys"


def public_bytes(key: Ed25519PublicKey) -> bytes:
    """The 32 raw bytes of an Ed25519 public key."""
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(key: Ed25519PublicKey) -> str:
    """Short stable identifier of a public key: the first 16 hex digits of SHA-256 of its bytes."""
    return hashlib.sha256(public_bytes(key)).hexdigest()[:16]


def _write_new(path: Path, data: bytes, mode: int) -> None:
    # O_EXCL: never overwrite, and never follow a symlink planted at the target path
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _write_private(path: Path, data: bytes) -> None:
    _write_new(path, data, 0o600)


def generate_keypair(out_dir: str | os.PathLike, passphrase: bytes | None = None,
                     name: str = "signing") -> tuple[Path, Path]:
    """Create ``<name>.key`` (PKCS#8 PEM, 0600, encrypted if a passphrase is given) and
    ``<name>.pub`` (base64 raw public key) in ``out_dir``; refuses to overwrite."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    priv_path, pub_path = out / f"{name}.key", out / f"{name}.pub"
    if passphrase is not None and not isinstance(passphrase, bytes):
        raise KeyFileError("passphrase must be bytes")
    if passphrase is not None and len(passphrase) == 0:
        raise KeyFileError("passphrase is empty (pass None for an unencrypted key)")
    if priv_path.exists() or pub_path.exists() or priv_path.is_symlink() or pub_path.is_symlink():
        raise KeyFileError(f"refusing to overwrite existing key files in {out}")
    key = Ed25519PrivateKey.generate()
    enc = (serialization.BestAvailableEncryption(passphrase) if passphrase
           else serialization.NoEncryption())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)
    try:
        _write_private(priv_path, pem)
        _write_new(pub_path, (base64.b64encode(public_bytes(key.public_key())).decode()
                              + "\n").encode(), 0o644)
    except FileExistsError:
        raise KeyFileError(f"refusing to overwrite existing key files in {out}") from None
    except OSError as e:
        raise KeyFileError(f"cannot write key files in {out}: {e.strerror}") from None
    return priv_path, pub_path


class InsecureKeyFileWarning(UserWarning):
    """A private key file is readable or writable by other users."""


def load_private_key(path: str | os.PathLike, passphrase: bytes | None = None) -> Ed25519PrivateKey:
    """Load a PEM Ed25519 private key; refuses files other users can read or write.

    Raises
    ------
    KeyFileError
        Saying what is wrong: the file cannot be read (missing, a directory), it is a public key or
        not a PEM private key, it is encrypted and no passphrase was given, the passphrase is wrong,
        or a passphrase was given for a key that is not encrypted.
    """
    try:
        data = Path(path).read_bytes()
        mode = os.stat(path).st_mode
    except OSError as e:
        raise KeyFileError(f"cannot read private key {path}: {e.strerror}") from None
    if os.name == "posix" and mode & 0o077:
        warnings.warn(f"private key {path} is accessible by other users (chmod 600 it)",
                      InsecureKeyFileWarning, stacklevel=2)
    encrypted = b"-----BEGIN ENCRYPTED PRIVATE KEY-----" in data
    try:
        key = serialization.load_pem_private_key(data, password=passphrase)
    except (ValueError, TypeError, UnsupportedAlgorithm) as e:
        # cryptography's own messages name PEM framing or "password": say which mistake it is
        if encrypted and passphrase is None:
            raise KeyFileError(f"private key {path} is encrypted and no passphrase was given") from None
        if encrypted:
            raise KeyFileError(f"wrong passphrase for private key {path} (or the file is damaged)") from None
        if passphrase is not None and b"-----BEGIN PRIVATE KEY-----" in data and isinstance(e, TypeError):
            raise KeyFileError(f"private key {path} is not encrypted, but a passphrase was given") from None
        if _is_public_key_text(data):
            raise KeyFileError(f"{path} is a public key; signing needs the private key file "
                               f"(.key, PEM)") from None
        raise KeyFileError(f"{path} is not a PEM private key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"{path} is not an Ed25519 private key")
    return key


def _is_public_key_text(data: bytes) -> bool:
    """Whether ``data`` looks like a public key: PEM ``PUBLIC KEY`` or one base64 line of 32 bytes."""
    if b"-----BEGIN PUBLIC KEY-----" in data:
        return True
    try:
        return len(base64.b64decode(data.strip(), validate=True)) == 32
    except (ValueError, TypeError):
        return False


#: Suffixes that make a string that is neither a file nor base64 read as a mistyped file name.
_KEY_SUFFIXES = (".pub", ".pem", ".key", ".txt")


def _looks_like_a_path(text: str) -> bool:
    return (os.sep in text or text.startswith(("~", ".")) or text.lower().endswith(_KEY_SUFFIXES)
            or os.path.lexists(text))


def load_public_key(key) -> Ed25519PublicKey:
    """Accept an Ed25519PublicKey, 32 raw bytes, base64 text, or a path to a ``.pub`` / PEM file.

    Raises
    ------
    KeyFileError
        Saying what is wrong: no such file (for a string that is neither an existing file nor a
        base64 key but reads as a path), a file that cannot be read, a private key where the public
        one is expected, or text that is not an Ed25519 public key (wrong length, not base64, other
        key type). Key material that is not a file name is never echoed.
    """
    if isinstance(key, Ed25519PublicKey):
        return key
    if isinstance(key, Ed25519PrivateKey):
        return key.public_key()
    if isinstance(key, (bytes, bytearray)) and len(key) == 32:
        return Ed25519PublicKey.from_public_bytes(bytes(key))
    if not isinstance(key, (bytes, bytearray, str, os.PathLike)):
        raise KeyFileError(f"cannot use a {type(key).__name__} as a public key")
    text = key
    source: str | None = None  # the file the key is read from: the messages name it
    if isinstance(key, os.PathLike) or (isinstance(key, str) and len(key) < 4096
                                         and Path(key).is_file()):
        source = os.fspath(key)
        try:
            text = Path(key).read_bytes()[:65536]  # a public key file is tiny
        except OSError as e:
            raise KeyFileError(f"cannot read public key {key}: {e.strerror}") from None
    if isinstance(text, str):
        text = text.encode("utf-8", "replace")
    what = f"public key file {source}" if source is not None else "the public key given"
    if b"PRIVATE KEY-----" in text:
        raise KeyFileError(f"{what} holds a PRIVATE key; give its public half (the .pub file "
                           f"`ldptext keys generate` wrote beside it)")
    if text.lstrip().startswith(b"-----BEGIN"):
        try:
            pub = serialization.load_pem_public_key(text)
        except (ValueError, TypeError, UnsupportedAlgorithm):
            raise KeyFileError(f"{what} is not a valid PEM public key") from None
        if not isinstance(pub, Ed25519PublicKey):
            raise KeyFileError(f"{what} is not an Ed25519 public key ({type(pub).__name__})")
        return pub
    try:
        raw = base64.b64decode(bytes(text).strip(), validate=True)
    except (ValueError, TypeError):
        raw = None
    if raw is not None and len(raw) == 32:
        return Ed25519PublicKey.from_public_bytes(raw)
    if source is None and isinstance(key, str) and len(key) < 4096 and _looks_like_a_path(key):
        if os.path.isdir(key):
            raise KeyFileError(f"public key {key} is a directory, not a key file") from None
        if os.path.lexists(key):
            raise KeyFileError(f"public key {key} is not a regular file") from None
        raise KeyFileError(f"public key file {key} does not exist") from None
    if raw is None and source is None:
        raise KeyFileError("the public key given is neither an existing .pub file nor the base64 of an "
                           "Ed25519 public key")
    if raw is None:
        raise KeyFileError(f"{what} is not a public key: expected one base64 line (32-byte Ed25519 key, "
                           f"as `ldptext keys generate` writes) or a PEM public key")
    raise KeyFileError(f"{what} is not an Ed25519 public key: it decodes to {len(raw)} bytes, not 32")


def trust(key) -> Path:
    """Add a public key to the local trust store; returns the file written."""
    pub = load_public_key(key)
    d = trust_dir()
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = d / f"{key_id(pub)}.pub"
    data = (base64.b64encode(public_bytes(pub)).decode() + "\n").encode()
    if path.is_file() and path.read_bytes() == data:
        return path
    write_bytes_atomic(path, data, mode=0o644)  # a reader never sees a half-written key file
    return path


def untrust(key) -> bool:
    """Remove a public key (object, bytes, text, path or key id) from the trust store."""
    d = trust_dir()
    if isinstance(key, str) and len(key) == 16 and all(c in "0123456789abcdef" for c in key):
        kid = key
    else:
        kid = key_id(load_public_key(key))
    path = d / f"{kid}.pub"
    if path.exists():
        path.unlink()
        return True
    return False


def trusted_public_keys() -> list[Ed25519PublicKey]:
    """The keys of the local trust store, plus the developer key while ``LDPTEXT_DEV=1``.

    Returns
    -------
    list of Ed25519PublicKey
        Refuses (``KeyFileError``) a world-writable store: anyone who can add a file there could make
        the runtime accept their bundles.
    """
    keys = _stored_public_keys()
    dev = developer_public_key() if developer_mode() else None
    if dev is not None and all(public_bytes(k) != public_bytes(dev) for k in keys):
        keys.append(dev)
    return keys


def _stored_public_keys() -> list[Ed25519PublicKey]:
    d = trust_dir()
    if not d.is_dir():
        return []
    if os.name == "posix" and d.stat().st_mode & 0o002:
        raise KeyFileError(f"trust store {d} is writable by every user; chmod 700 it")
    keys = []
    for p in sorted(d.glob("*.pub")):
        try:
            keys.append(load_public_key(p))
        except KeyFileError:
            raise KeyFileError(f"trust store file {p.name} is not a valid public key") from None
    return keys


def developer_mode() -> bool:
    """Whether ``LDPTEXT_DEV=1`` is set: the developer key is then trusted (in this process only)."""
    return os.environ.get(DEV_ENV) == "1"


def _developer_paths() -> tuple[Path, Path]:
    d = ldptext_home() / "keys"
    return d / "developer.key", d / "developer.pub"


def developer_key() -> Ed25519PrivateKey:
    """The local developer signing key, created on first use; **not** trusted by creating it.

    Used when precompute is given no ``--sign-key``. Its bundles load on this machine only after an
    explicit opt-in (``ldptext keys trust --developer`` or ``LDPTEXT_DEV=1``, see the module
    docstring), and anywhere else only after the receiver trusts its ``.pub`` file.

    Returns
    -------
    Ed25519PrivateKey
        The key of ``$LDPTEXT_HOME/keys/developer.key`` (mode 0600).
    """
    priv, _ = _developer_paths()
    if not priv.exists():
        priv.parent.mkdir(parents=True, exist_ok=True)
        try:
            generate_keypair(priv.parent, name="developer")
        except KeyFileError:  # created concurrently by another process
            pass
    return load_private_key(priv)


def developer_public_key() -> Ed25519PublicKey | None:
    """The local developer key's public half, or ``None`` when it has not been created."""
    _, pub = _developer_paths()
    if not pub.is_file():
        return None
    try:
        return load_public_key(pub)
    except KeyFileError:
        return None


def trust_developer_key() -> Path:
    """Trust the local developer key for good (creating it if needed): the explicit opt-in of
    ``ldptext keys trust --developer``; returns the trust store file written."""
    return trust(developer_key().public_key())


def build_signing_key(sign_key) -> "Ed25519PrivateKey | str | os.PathLike | None":
    """What precompute signs a new bundle with: ``None`` means the local developer key
    (:func:`developer_key`), ``False`` an unsigned development bundle, anything else (a key object or
    a PEM path) is passed on to :func:`ldptext.bundle.write_bundle`."""
    if sign_key is None:
        return developer_key()
    return None if sign_key is False else sign_key
