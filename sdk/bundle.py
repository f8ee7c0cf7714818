"""Bundles: the one artifact precompute writes and the runtime reads (SPEC §5).

A bundle is a safetensors file (written with the ``safetensors`` library; zero-copy, no pickle). Its
header metadata carries

* ``ldptext.manifest``: canonical JSON (sorted keys, no spaces) with ``format``, ``format_version``,
  ``mechanism``, the mechanism's parameters and sources, and for every array its dtype, shape and
  SHA-256;
* ``ldptext.signature``: Ed25519 signature of those exact manifest bytes (base64);
* ``ldptext.public_key``: the signer's raw public key (base64), checked against the trusted keys.

Loading memory-maps the file, checks the header against the file size, verifies the signature and the
key, then hashes every array and compares dtype, shape and hash with the signed manifest before any
array is handed out. Any mismatch raises a specific :class:`~ldptext.errors.BundleError`.
"""
from __future__ import annotations

import base64
import hashlib
import json
import mmap
import os
import struct
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from . import keys as _keys
from .errors import (BundleError, BundleFormatError, BundleIntegrityError, SignatureError,
                     UnknownKeyError, UnsignedBundleError)

FORMAT = "ldptext-bundle"
FORMAT_VERSION = 1
SUPPORTED_VERSIONS = (1,)
MECHANISMS = ("santext", "santext+", "dpbart")
BLOB_PREFIX = "blob/"

_META_MANIFEST = "ldptext.manifest"
_META_SIGNATURE = "ldptext.signature"
_META_PUBKEY = "ldptext.public_key"

# safetensors dtype codes <-> numpy dtypes (little-endian, as the format prescribes)
_DTYPES = {
    "BOOL": np.dtype(np.bool_), "U8": np.dtype("<u1"), "I8": np.dtype("<i1"),
    "U16": np.dtype("<u2"), "I16": np.dtype("<i2"), "U32": np.dtype("<u4"), "I32": np.dtype("<i4"),
    "U64": np.dtype("<u8"), "I64": np.dtype("<i8"), "F16": np.dtype("<f2"), "F32": np.dtype("<f4"),
    "F64": np.dtype("<f8"),
}
_CODES = {v: k for k, v in _DTYPES.items()}
_MAX_HEADER = 100 << 20


class UnsignedBundleWarning(UserWarning):
    """An unsigned bundle was loaded because ``allow_unsigned=True`` was passed."""


def canonical_json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False).encode()


def _sha256(a: np.ndarray) -> str:
    return hashlib.sha256(memoryview(np.ascontiguousarray(a)).cast("B")).hexdigest()


def _dtype_code(a: np.ndarray) -> str:
    dt = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
    try:
        return _CODES[np.dtype(dt)]
    except KeyError:
        raise BundleError(f"dtype {a.dtype} cannot be stored in a bundle") from None


@dataclass(frozen=True)
class Bundle:
    """A verified bundle. ``arrays`` are read-only views of the memory-mapped file."""

    path: Path
    manifest: dict
    arrays: Mapping[str, np.ndarray]
    key_id: str | None
    signed: bool = field(default=True)

    @property
    def mechanism(self) -> str:
        return self.manifest["mechanism"]

    def blob(self, name: str) -> bytes:
        try:
            return bytes(self.arrays[BLOB_PREFIX + name])
        except KeyError:
            raise BundleFormatError(f"bundle has no blob named {name!r}") from None

    def array(self, name: str) -> np.ndarray:
        try:
            return self.arrays[name]
        except KeyError:
            raise BundleFormatError(f"bundle has no array named {name!r}") from None


def _resolve_sign_key(sign_key, passphrase: bytes | None) -> Ed25519PrivateKey | None:
    if sign_key is None or isinstance(sign_key, Ed25519PrivateKey):
        return sign_key
    return _keys.load_private_key(sign_key, passphrase)


def write_bundle(path: str | os.PathLike, *, mechanism: str, arrays: Mapping[str, np.ndarray],
                 manifest: Mapping[str, Any], blobs: Mapping[str, bytes] | None = None,
                 sign_key=None, passphrase: bytes | None = None) -> Path:
    """Write a bundle atomically (temporary file in the same directory, fsync, rename).

    ``sign_key``: an Ed25519 private key or the path of a PEM key file; ``None`` writes an unsigned
    bundle (the runtime refuses it unless ``allow_unsigned=True``).
    """
    from safetensors.numpy import save_file

    if mechanism not in MECHANISMS:
        raise BundleFormatError(f"unknown mechanism {mechanism!r}")
    key = _resolve_sign_key(sign_key, passphrase)
    tensors: dict[str, np.ndarray] = {}
    for name, a in arrays.items():
        if name.startswith(BLOB_PREFIX):
            raise BundleError(f"array names may not start with {BLOB_PREFIX!r}")
        tensors[name] = np.ascontiguousarray(a)
    for name, data in (blobs or {}).items():
        tensors[BLOB_PREFIX + name] = np.frombuffer(bytes(data), dtype=np.uint8)
    full = dict(manifest)
    full.update(format=FORMAT, format_version=FORMAT_VERSION, mechanism=mechanism)
    full["arrays"] = {n: {"dtype": _dtype_code(a), "shape": list(a.shape), "sha256": _sha256(a)}
                      for n, a in sorted(tensors.items())}
    manifest_bytes = canonical_json(full)
    metadata = {_META_MANIFEST: manifest_bytes.decode()}
    if key is not None:
        metadata[_META_SIGNATURE] = base64.b64encode(key.sign(manifest_bytes)).decode()
        metadata[_META_PUBKEY] = base64.b64encode(_keys.public_bytes(key.public_key())).decode()

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata=metadata)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    try:  # make the rename durable too
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
    return path


def _parse_header(mm: mmap.mmap, size: int) -> tuple[dict, int]:
    if size < 8:
        raise BundleError("bundle is truncated (no header)")
    (hlen,) = struct.unpack("<Q", mm[:8])
    if hlen > _MAX_HEADER or 8 + hlen > size:
        raise BundleError("bundle is truncated or its header length is invalid")
    try:
        header = json.loads(bytes(mm[8:8 + hlen]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise BundleError("bundle header is not valid JSON") from None
    if not isinstance(header, dict):
        raise BundleError("bundle header is not a JSON object")
    return header, 8 + hlen


def _trusted(trusted_keys: Iterable | None):
    if trusted_keys is None:
        return _keys.trusted_public_keys()
    if not isinstance(trusted_keys, (list, tuple, set, frozenset)):
        trusted_keys = [trusted_keys]
    return [_keys.load_public_key(k) for k in trusted_keys]


def _verify_signature(meta: dict, manifest_bytes: bytes, trusted_keys, allow_unsigned: bool
                      ) -> tuple[str | None, bool]:
    sig_b64, pub_b64 = meta.get(_META_SIGNATURE), meta.get(_META_PUBKEY)
    if sig_b64 is None and pub_b64 is None:
        if not allow_unsigned:
            raise UnsignedBundleError("bundle is unsigned (pass allow_unsigned=True for development)")
        warnings.warn("loading an UNSIGNED bundle: its parameters and tables are not authenticated",
                      UnsignedBundleWarning, stacklevel=3)
        return None, False
    if not isinstance(sig_b64, str) or not isinstance(pub_b64, str):
        raise SignatureError("bundle signature fields are incomplete")
    try:
        signer = _keys.load_public_key(base64.b64decode(pub_b64, validate=True))
        signature = base64.b64decode(sig_b64, validate=True)
    except Exception:
        raise SignatureError("bundle signature fields are malformed") from None
    signer_bytes = _keys.public_bytes(signer)
    if not any(_keys.public_bytes(k) == signer_bytes for k in _trusted(trusted_keys)):
        raise UnknownKeyError(f"bundle is signed by untrusted key {_keys.key_id(signer)}")
    try:
        signer.verify(signature, manifest_bytes)
    except InvalidSignature:
        raise SignatureError("bundle signature does not verify: the manifest was altered") from None
    return _keys.key_id(signer), True


def read_bundle(path: str | os.PathLike, *, trusted_keys=None, allow_unsigned: bool = False,
                expect_mechanism: Iterable[str] | None = None) -> Bundle:
    """Open, verify and memory-map a bundle.

    ``trusted_keys``: public keys (objects, raw bytes, base64 text or ``.pub`` paths) the signer must
    be among; ``None`` means the local trust store (:func:`ldptext.keys.trusted_public_keys`).
    """
    path = Path(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                raise BundleError(f"bundle {path} is empty")
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except FileNotFoundError:
        raise BundleError(f"bundle {path} does not exist") from None
    except IsADirectoryError:
        raise BundleError(f"bundle {path} is a directory") from None
    except OSError as e:
        raise BundleError(f"cannot open bundle {path}: {e.strerror}") from None

    header, data_start = _parse_header(mm, size)
    meta = header.pop("__metadata__", None)
    if not isinstance(meta, dict) or not isinstance(meta.get(_META_MANIFEST), str):
        raise BundleFormatError("not an ldptext bundle (no manifest)")
    manifest_bytes = meta[_META_MANIFEST].encode()
    key_id, signed = _verify_signature(meta, manifest_bytes, trusted_keys, allow_unsigned)
    try:
        manifest = json.loads(manifest_bytes)
    except json.JSONDecodeError:
        raise BundleFormatError("bundle manifest is not valid JSON") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleFormatError("not an ldptext bundle (wrong format tag)")
    if manifest.get("format_version") not in SUPPORTED_VERSIONS:
        raise BundleFormatError(
            f"bundle format version {manifest.get('format_version')!r} is not supported "
            f"(this runtime reads {', '.join(map(str, SUPPORTED_VERSIONS))})")
    if manifest.get("mechanism") not in MECHANISMS:
        raise BundleFormatError(f"unknown mechanism {manifest.get('mechanism')!r}")
    if expect_mechanism is not None and manifest["mechanism"] not in tuple(expect_mechanism):
        raise BundleFormatError(f"bundle is for mechanism {manifest['mechanism']!r}, expected "
                                f"one of {tuple(expect_mechanism)}")
    declared = manifest.get("arrays")
    if not isinstance(declared, dict) or set(declared) != set(header):
        raise BundleIntegrityError("bundle arrays do not match the signed manifest")

    arrays: dict[str, np.ndarray] = {}
    view = memoryview(mm)  # hashing slices of a memoryview copies nothing
    data_len = size - data_start
    covered = 0
    for name in sorted(header, key=lambda n: header[n].get("data_offsets", [0])[0]
                       if isinstance(header[n], dict) else 0):
        entry, spec = header[name], declared[name]
        try:
            dtype = _DTYPES[entry["dtype"]]
            shape = tuple(int(s) for s in entry["shape"])
            start, end = (int(o) for o in entry["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise BundleIntegrityError(f"bundle header entry for {name!r} is malformed") from None
        if entry["dtype"] != spec.get("dtype") or list(shape) != spec.get("shape"):
            raise BundleIntegrityError(f"array {name!r}: dtype or shape differs from the manifest")
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if min(shape, default=0) < 0 or start != covered or end - start != count * dtype.itemsize:
            raise BundleIntegrityError(f"array {name!r}: data offsets are inconsistent")
        if end > data_len:
            raise BundleError("bundle is truncated (array data missing)")
        a = np.frombuffer(mm, dtype=dtype, count=count, offset=data_start + start).reshape(shape)
        if hashlib.sha256(view[data_start + start:data_start + end]).hexdigest() != spec.get("sha256"):
            raise BundleIntegrityError(f"array {name!r}: content hash differs from the manifest")
        arrays[name] = a
        covered = end
    if covered != data_len:
        raise BundleIntegrityError("bundle has trailing or missing data")
    return Bundle(path=path, manifest=manifest, arrays=arrays, key_id=key_id, signed=signed)
