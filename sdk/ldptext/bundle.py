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
A bundle may also be read from its bytes (``read_bundle(data)``, for apps that ship it as an asset):
the same checks, in the same order, with the same errors; only the file-system checks (regular file,
mapping) do not apply.

**The whole file is authenticated, byte for byte.** The signature covers the manifest, and the manifest
determines every other byte: the outer safetensors header must be exactly the canonical header
(:func:`canonical_header`) that the writer produces from the manifest's array table and the
metadata (compact JSON, ``__metadata__`` first, arrays laid out by decreasing dtype alignment then
name, offsets contiguous from 0, padded with spaces to a multiple of 8 bytes; the bytes
``safetensors`` 0.4+ writes), the metadata may hold only the manifest, the signature and the public
key (each in its one canonical spelling), and every array's bytes are hashed. So a file that loads
is the file the signer wrote, apart from the signature itself, which only the signer's key can
produce (Ed25519 signatures are deterministic: re-signing an unchanged manifest with the same key
reproduces the same file), with **one documented freedom**: the order of the (at most three,
fixed-name) ``__metadata__`` entries. This writer sorts them; bundles written earlier through
``safetensors.save_file`` have them in hash-map order, and refusing those would refuse valid bundles.
Reordering them changes no content, no signed byte and not the bundle id.

**Bundle id.** :attr:`Bundle.bundle_id` is the SHA-256 of the canonical signed manifest bytes (hex).
Since the manifest holds every array's SHA-256, the id names the content exactly (parameters and
tables); it does not depend on who signed. Apps pin it with
``Sanitizer.load(..., expect={"bundle_id": ...})`` (see :class:`ldptext.runtime.BundleExpectation`).

Hardening (the file is hostile until verified; with ``allow_unsigned=True`` it stays hostile):
only regular files are opened (no FIFOs or devices); the header is at most 16 MiB of strict JSON
(no duplicate keys, no NaN/Infinity, no overflowing numbers, bounded nesting); the signed manifest
must be byte-identical to its canonical form; the signer's trust and signature are checked before
anything else in the manifest is interpreted; array entries are type-checked, their sizes computed
with unbounded integers (no wrap-around), and the arrays must tile the data region exactly, aligned,
with no overlap, gap or trailing bytes; boolean arrays may hold only 0 and 1.

Residual risk, by design: arrays are memory-mapped, so a process that can write the bundle file *in
place* after it was verified can change what the runtime reads (or truncate it, which raises SIGBUS).
Bundles are written by atomic rename, which never does that; keep bundle files writable only by
their owner.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
import mmap
import os
import stat
import struct
import threading
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from . import keys as _keys
from . import registry as _registry
from .fileio import atomic_path
from .errors import (BundleError, BundleFormatError, BundleIntegrityError, SignatureError,
                     UnknownKeyError, UnsignedBundleError)

FORMAT = "ldptext-bundle"
FORMAT_VERSION = 1
SUPPORTED_VERSIONS = (1,)
BLOB_PREFIX = "blob/"

#: What a bundle is read from: a file path, or the bundle's bytes (an app that ships the bundle as an
#: asset); both go through exactly the same verification.
BundleSource = str | os.PathLike | bytes | bytearray | memoryview

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
# Limits on what a bundle may declare: generous for real bundles (a 30k x 768 float32 table is
# 90 MiB, a vocabulary manifest well under 1 MiB), small enough that a hostile header cannot make
# the loader allocate or parse without bound.
_MAX_HEADER = 16 << 20      # bytes of header JSON
_MAX_FILE = 64 << 30        # bytes of file
_MAX_NDIM = 8
_MAX_DIM = 1 << 40
# Layout order of the data region: decreasing dtype rank, then name (every array then starts aligned
# to its item size without padding). This is the order safetensors (0.4+) writes, so bundles written
# with its save_file before this module wrote files itself have the same canonical header.
_LAYOUT_RANK = {code: i for i, code in enumerate(
    ("U64", "I64", "F64", "F32", "U32", "I32", "F16", "U16", "I16", "I8", "U8", "BOOL"))}


class UnsignedBundleWarning(UserWarning):
    """An unsigned bundle was loaded because ``allow_unsigned=True`` was passed."""


def canonical_json(obj: Any) -> bytes:
    """The bytes that are signed: sorted keys, no whitespace, ASCII, no NaN or infinity."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False).encode()


def canonical_header(metadata: Mapping[str, str], arrays: Mapping[str, tuple[str, list[int]]]) -> bytes:
    """The one safetensors header a bundle with this metadata and these arrays may carry.

    Parameters
    ----------
    metadata : mapping of str to str
        The ``__metadata__`` entries (manifest, and signature and public key when signed), in the
        order they are to appear (the writer sorts them; the reader passes the file's order, the
        one freedom documented in the module docstring).
    arrays : mapping of str to (str, list of int)
        Array name to (safetensors dtype code, shape).

    Returns
    -------
    bytes
        Compact JSON, ``__metadata__`` first, then the arrays in layout order
        (decreasing dtype rank, then name) with contiguous ``data_offsets`` from 0, padded with spaces
        to a multiple of 8 bytes. Raises ``BundleFormatError`` for a name that is not valid Unicode.
    """
    entries: dict[str, Any] = {"__metadata__": dict(metadata.items())}
    offset = 0
    for name, (code, shape) in sorted(arrays.items(), key=lambda kv: (_LAYOUT_RANK[kv[1][0]], kv[0])):
        nbytes = math.prod(shape) * _DTYPES[code].itemsize
        entries[name] = {"dtype": code, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    try:
        raw = json.dumps(entries, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise BundleFormatError("bundle header contains invalid Unicode") from None
    return raw + b" " * (-len(raw) % 8)


def _sha256(a: np.ndarray) -> str:
    # flat uint8 view: memoryview.cast refuses arrays with a zero in their shape
    return hashlib.sha256(np.ascontiguousarray(a).reshape(-1).view(np.uint8)).hexdigest()


def _dtype_code(a: np.ndarray) -> str:
    dt = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
    try:
        return _CODES[np.dtype(dt)]
    except KeyError:
        raise BundleError(f"dtype {a.dtype} cannot be stored in a bundle") from None


@dataclass(frozen=True)
class Bundle:
    """A verified bundle. ``arrays`` are read-only views of the memory-mapped file (or of the bytes
    it was read from); ``path`` is ``None`` for a bundle read from bytes."""

    path: Path | None
    manifest: dict
    arrays: Mapping[str, np.ndarray]
    key_id: str | None
    signed: bool = field(default=True)

    @property
    def mechanism(self) -> str:
        """The mechanism the bundle is for (``santext``, ``santext+`` or ``dpbart``)."""
        return self.manifest["mechanism"]

    @cached_property
    def bundle_id(self) -> str:
        """SHA-256 (hex) of the canonical signed manifest: names parameters and every array's content.

        The manifest of a loaded bundle is verified to be in canonical form, so this is the hash of
        the exact bytes the signature covers; the signer's key is not part of it.
        """
        return hashlib.sha256(canonical_json(self.manifest)).hexdigest()

    def blob(self, name: str) -> bytes:
        """The bytes of blob ``name`` (tokenizer JSON, an ONNX graph); ``BundleFormatError`` if absent."""
        try:
            return bytes(self.arrays[BLOB_PREFIX + name])
        except KeyError:
            raise BundleFormatError(f"bundle has no blob named {name!r}") from None

    def array(self, name: str) -> np.ndarray:
        """The read-only array ``name``; ``BundleFormatError`` if absent."""
        try:
            return self.arrays[name]
        except KeyError:
            raise BundleFormatError(f"bundle has no array named {name!r}") from None

    def release_resident(self, name: str) -> bool:
        """Drop the resident pages of array ``name`` where it is a view of the file's read-only
        mapping (Linux ``MADV_DONTNEED``): a page read again afterwards comes back from the file, so
        the values never change; only the memory is returned. For an array another component keeps
        its own copy of (libldptext's cache-line rows of ``emb_q``). Returns whether pages were
        released (``False`` for a bundle read from bytes, an absent array, or no ``madvise``)."""
        arr = self.arrays.get(name)
        base = arr
        while isinstance(base, np.ndarray):
            base = base.base
        if isinstance(base, memoryview):  # np.frombuffer's view of the mapping
            base = base.obj
        if arr is None or not isinstance(base, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED"):
            return False
        start = arr.ctypes.data - np.frombuffer(base, dtype=np.uint8, count=1).ctypes.data
        lo = -(-start // mmap.PAGESIZE) * mmap.PAGESIZE  # whole pages inside the array only
        hi = (start + arr.nbytes) // mmap.PAGESIZE * mmap.PAGESIZE
        if hi <= lo:
            return False
        try:
            base.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
        except (OSError, ValueError):  # advice only: a system that refuses it keeps the pages
            return False
        return True


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
    if not _registry.is_known(mechanism):
        raise BundleFormatError(f"unknown mechanism {mechanism!r}")
    key = _resolve_sign_key(sign_key, passphrase)
    tensors: dict[str, np.ndarray] = {}
    for name, a in arrays.items():
        if name.startswith(BLOB_PREFIX):
            raise BundleError(f"array names may not start with {BLOB_PREFIX!r}")
        a = np.asarray(a)
        if a.dtype.byteorder == ">":  # the format is little-endian: convert values, not labels
            a = a.astype(a.dtype.newbyteorder("<"))
        tensors[name] = np.ascontiguousarray(a)
    for name, data in (blobs or {}).items():
        tensors[BLOB_PREFIX + name] = np.frombuffer(bytes(data), dtype=np.uint8)
    full = dict(manifest)
    full.update(format=FORMAT, format_version=FORMAT_VERSION, mechanism=mechanism)
    full["arrays"] = {n: {"dtype": _dtype_code(a), "shape": list(a.shape), "sha256": _sha256(a)}
                      for n, a in sorted(tensors.items())}
    try:
        manifest_bytes = canonical_json(full)
    except (TypeError, ValueError) as e:  # NaN, inf or a non-JSON value in the manifest
        raise BundleFormatError(f"manifest is not canonical JSON: {e}") from None
    metadata = {_META_MANIFEST: manifest_bytes.decode()}
    if key is not None:
        metadata[_META_SIGNATURE] = base64.b64encode(key.sign(manifest_bytes)).decode()
        metadata[_META_PUBKEY] = base64.b64encode(_keys.public_bytes(key.public_key())).decode()

    header = canonical_header(dict(sorted(metadata.items())), {n: (spec["dtype"], spec["shape"])
                                         for n, spec in full["arrays"].items()})
    order = sorted(tensors, key=lambda n: (_LAYOUT_RANK[full["arrays"][n]["dtype"]], n))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        # the safetensors layout, written here so that the header is exactly canonical_header()
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(header)) + header)
            for name in order:
                f.write(memoryview(tensors[name].reshape(-1).view(np.uint8)))
    return path


# ---- reading -------------------------------------------------------------------------------
# Everything below treats the file as hostile until the signature and hashes check out (and, for an
# unsigned bundle loaded with allow_unsigned=True, for good): every field is type-checked before use
# and every failure becomes a BundleError subclass, never a KeyError, TypeError or a crash.

class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    # Two parsers reading one JSON object with a repeated key may disagree on which value counts
    # (safetensors keeps the first, Python the last): refuse such headers outright.
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(k)
        out[k] = v
    return out


def _reject_constant(name: str):
    raise ValueError(f"non-finite number {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):  # "1e999" parses to inf
        raise ValueError("non-finite number")
    return value


def _strict_json(data: bytes | str) -> Any:
    """Parse JSON refusing duplicate keys, NaN/Infinity, overflowing floats and huge integers.
    Raises ValueError (any parse failure) or RecursionError (absurd nesting)."""
    return json.loads(data, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant,
                      parse_float=_finite_float)


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _open_regular(path: Path) -> tuple[mmap.mmap, int]:
    """Map ``path`` read-only. Refuses anything but a regular file (a FIFO would block forever, a
    device has no meaningful size); symlinks to regular files are followed as usual."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer before we can refuse it
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise BundleError(f"bundle file not found: {path}") from None
    except IsADirectoryError:
        raise BundleError(f"bundle {path} is a directory") from None
    except OSError as e:
        raise BundleError(f"cannot open bundle {path}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise BundleError(f"bundle {path} is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise BundleError(f"bundle {path} is not a regular file")
        if st.st_size == 0:
            raise BundleError(f"bundle {path} is empty")
        if st.st_size > _MAX_FILE:
            raise BundleError(f"bundle {path} is larger than {_MAX_FILE >> 30} GiB")
        try:
            mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as e:
            raise BundleError(f"cannot map bundle {path}: {e}") from None
    finally:
        os.close(fd)
    # the mapping's own length, not the earlier fstat: the file may have changed in between
    return mm, len(mm)


def _parse_header(mm: mmap.mmap, size: int) -> tuple[dict, int, bytes]:
    if size < 8:
        raise BundleError("bundle is truncated (no header)")
    (hlen,) = struct.unpack("<Q", mm[:8])
    if hlen < 2 or hlen > _MAX_HEADER:
        raise BundleFormatError("bundle header length is invalid")
    if 8 + hlen > size:
        raise BundleError("bundle is truncated (header incomplete)")
    raw = bytes(mm[8:8 + hlen])
    if raw[:1] != b"{":
        raise BundleFormatError("bundle header is not a JSON object")
    try:
        header = _strict_json(raw.decode("utf-8"))
    except _DuplicateKey:
        raise BundleFormatError("bundle header repeats a key") from None
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise BundleFormatError("bundle header is not valid JSON") from None
    if not isinstance(header, dict):
        raise BundleFormatError("bundle header is not a JSON object")
    return header, 8 + hlen, raw


def _trusted(trusted_keys: Iterable | None):
    if trusted_keys is None:
        return _keys.trusted_public_keys()
    if not isinstance(trusted_keys, (list, tuple, set, frozenset)):
        trusted_keys = [trusted_keys]
    return [_keys.load_public_key(k) for k in trusted_keys]


@dataclass(frozen=True)
class SignatureInfo:
    """What the signature fields of a bundle say, before any trust decision."""

    signed: bool                 # signature fields present
    key_id: str | None           # signer's key id (None when unsigned or malformed)
    valid: bool                  # the signature verifies over the manifest bytes
    public_key: bytes | None = None  # signer's raw public key


def _check_signature(meta: dict, manifest_bytes: bytes) -> SignatureInfo:
    """Verify the signature against the public key the bundle names (trust is decided later)."""
    sig_b64, pub_b64 = meta.get(_META_SIGNATURE), meta.get(_META_PUBKEY)
    if sig_b64 is None and pub_b64 is None:
        return SignatureInfo(signed=False, key_id=None, valid=False)
    if not isinstance(sig_b64, str) or not isinstance(pub_b64, str):
        raise SignatureError("bundle signature fields are incomplete")
    try:
        raw_pub = base64.b64decode(pub_b64, validate=True)
        signature = base64.b64decode(sig_b64, validate=True)
        if len(raw_pub) != 32 or len(signature) != 64:
            raise ValueError("bad length")
        # b64decode ignores the unused low bits of the last character: require the one canonical
        # spelling so that no byte of the file can change without the load failing
        if (base64.b64encode(raw_pub).decode() != pub_b64
                or base64.b64encode(signature).decode() != sig_b64):
            raise ValueError("non-canonical base64")
        signer = _keys.load_public_key(raw_pub)
    except Exception:
        raise SignatureError("bundle signature fields are malformed") from None
    try:
        signer.verify(signature, manifest_bytes)
        valid = True
    except InvalidSignature:
        valid = False
    return SignatureInfo(signed=True, key_id=_keys.key_id(signer), valid=valid, public_key=raw_pub)


def _enforce_trust(info: SignatureInfo, trusted_keys, allow_unsigned: bool) -> None:
    if not info.signed:
        if not allow_unsigned:
            raise UnsignedBundleError("bundle is unsigned (pass allow_unsigned=True for development)")
        warnings.warn("loading an UNSIGNED bundle: its parameters and tables are not authenticated",
                      UnsignedBundleWarning, stacklevel=5)
        return
    # trust first: an untrusted signer's bundle is refused whether or not its signature is valid
    if not any(_keys.public_bytes(k) == info.public_key for k in _trusted(trusted_keys)):
        dev = _keys.developer_public_key()
        if dev is not None and _keys.public_bytes(dev) == info.public_key:
            raise UnknownKeyError(
                f"bundle is signed by this machine's developer key {info.key_id}, which is not trusted: "
                f"run `ldptext keys trust --developer` (or set {_keys.DEV_ENV}=1 while developing), "
                f"or sign it with a release key and trust that key")
        raise UnknownKeyError(f"bundle is signed by untrusted key {info.key_id}")
    if not info.valid:
        raise SignatureError("bundle signature does not verify: the manifest was altered")


def _parse_manifest(meta: Any) -> tuple[bytes, dict]:
    if not isinstance(meta, dict) or not isinstance(meta.get(_META_MANIFEST), str):
        raise BundleFormatError("not an ldptext bundle (no manifest)")
    if not set(meta) <= {_META_MANIFEST, _META_SIGNATURE, _META_PUBKEY}:
        # unsigned extra fields would be unauthenticated content riding along with the bundle
        raise BundleFormatError("bundle metadata has unknown fields")
    for v in meta.values():
        if not isinstance(v, str):  # safetensors metadata is str -> str
            raise BundleFormatError("bundle metadata values must be strings")
    try:
        manifest_bytes = meta[_META_MANIFEST].encode("utf-8")  # lone surrogates fail here
    except UnicodeEncodeError:
        raise BundleFormatError("bundle manifest is not valid UTF-8") from None
    try:
        manifest = _strict_json(manifest_bytes)
    except _DuplicateKey:
        raise BundleFormatError("bundle manifest repeats a key") from None
    except (ValueError, RecursionError):
        raise BundleFormatError("bundle manifest is not valid JSON") from None
    return manifest_bytes, manifest


def _check_manifest(manifest: Any, manifest_bytes: bytes, expect_mechanism) -> dict:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleFormatError("not an ldptext bundle (wrong format tag)")
    version = manifest.get("format_version")
    if not _is_int(version) or version not in SUPPORTED_VERSIONS:  # True == 1 in Python
        shown = version if _is_int(version) else type(version).__name__
        raise BundleFormatError(
            f"bundle format version {shown!r} is not supported "
            f"(this runtime reads {', '.join(map(str, SUPPORTED_VERSIONS))})")
    # the signed bytes must be exactly the canonical form: one manifest, one byte string
    try:
        canonical = canonical_json(manifest)
    except (TypeError, ValueError):
        canonical = None
    if canonical != manifest_bytes:
        raise BundleFormatError("bundle manifest is not in canonical form")
    try:  # "\ud800" escapes decode to lone surrogates, which no UTF-8 consumer can print
        json.dumps(manifest, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise BundleFormatError("bundle manifest contains invalid Unicode") from None
    if not _registry.is_known(manifest.get("mechanism")):
        shown = manifest.get("mechanism")
        raise BundleFormatError(
            f"unknown mechanism {shown if isinstance(shown, str) and len(shown) < 40 else '?'!r}")
    if expect_mechanism is not None and manifest["mechanism"] not in tuple(expect_mechanism):
        raise BundleFormatError(f"bundle is for mechanism {manifest['mechanism']!r}, expected "
                                f"one of {tuple(expect_mechanism)}")
    declared = manifest.get("arrays")
    if not isinstance(declared, dict):
        raise BundleFormatError("bundle manifest has no array table")
    return declared


def _array_layout(header: dict, declared: dict, data_start: int, size: int
                  ) -> list[tuple[str, np.dtype, tuple[int, ...], int, int, str]]:
    """Validate every header entry against the manifest and the file; returns
    (name, dtype, shape, start, end, sha256) sorted by offset, covering the data exactly."""
    if set(declared) != set(header):
        raise BundleIntegrityError("bundle arrays do not match the signed manifest")
    data_len = size - data_start
    layout = []
    for name, entry in header.items():
        spec = declared[name]
        if (not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}
                or not isinstance(spec, dict)):
            raise BundleIntegrityError("bundle header entry for an array is malformed")
        dtype_code, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if (not isinstance(dtype_code, str) or dtype_code not in _DTYPES
                or not isinstance(shape, list) or len(shape) > _MAX_NDIM
                or not all(_is_int(s) and 0 <= s <= _MAX_DIM for s in shape)
                or not isinstance(offsets, list) or len(offsets) != 2
                or not all(_is_int(o) and 0 <= o for o in offsets)):
            raise BundleIntegrityError(f"array {name!r}: header entry is malformed")
        if dtype_code != spec.get("dtype") or shape != spec.get("shape"):
            raise BundleIntegrityError(f"array {name!r}: dtype or shape differs from the manifest")
        digest = spec.get("sha256")
        if not isinstance(digest, str) or len(digest) != 64:
            raise BundleIntegrityError(f"array {name!r}: manifest hash is malformed")
        dtype = _DTYPES[dtype_code]
        start, end = offsets
        # Python integers: a product of huge dimensions cannot wrap around as it would in int64
        nbytes = math.prod(shape) * dtype.itemsize
        if end < start or end - start != nbytes:
            raise BundleIntegrityError(f"array {name!r}: data offsets disagree with its shape")
        if end > data_len:
            raise BundleError("bundle is truncated (array data missing)")
        if (data_start + start) % dtype.itemsize:
            raise BundleIntegrityError(f"array {name!r}: data is not aligned")
        layout.append((name, dtype, tuple(shape), start, end, digest))
    layout.sort(key=lambda item: (item[3], item[4], item[0]))
    covered = 0
    for name, _, _, start, end, _ in layout:  # contiguous, no overlap, no gap
        if start != covered:
            raise BundleIntegrityError(f"array {name!r}: data offsets overlap or leave a gap")
        covered = end
    if covered != data_len:
        if covered > data_len:
            raise BundleError("bundle is truncated (array data missing)")
        raise BundleIntegrityError("bundle has trailing data after its arrays")
    return layout


def _open_source(source: BundleSource) -> tuple[Path | None, Any, int]:
    """The bundle's bytes as a read-only buffer: a memory map of a file, or the caller's bytes.

    ``bytes`` are used as they are (immutable); a ``bytearray`` or ``memoryview`` is copied once, so
    that nothing can change the content between verification and use."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        try:
            data = source if isinstance(source, bytes) else memoryview(source).tobytes()
        except (TypeError, ValueError, BufferError):
            raise BundleError("bundle bytes are not a readable buffer") from None
        if not data:
            raise BundleError("bundle bytes are empty")
        if len(data) > _MAX_FILE:
            raise BundleError(f"bundle bytes are larger than {_MAX_FILE >> 30} GiB")
        return None, data, len(data)
    if not isinstance(source, (str, os.PathLike)):
        raise BundleError(f"a bundle is a file path or bytes, not {type(source).__name__}")
    path = Path(source)
    mm, size = _open_regular(path)
    return path, mm, size


#: Total array bytes from which :func:`_sha256_all` hashes on two threads.
_PARALLEL_HASH_MIN = 8 << 20


def _sha256_all(chunks: list[memoryview]) -> list[str]:
    """Hex SHA-256 of every chunk. Large bundles are hashed on two threads (hashlib releases the GIL
    while it hashes), largest chunks first, each to the less loaded thread; every chunk is hashed
    in full either way, and the caller compares the digests in layout order, so the first mismatch
    reported is the same as with one thread."""
    total = sum(c.nbytes for c in chunks)
    if total < _PARALLEL_HASH_MIN or len(chunks) < 2:
        return [hashlib.sha256(c).hexdigest() for c in chunks]
    order = sorted(range(len(chunks)), key=lambda i: -chunks[i].nbytes)
    shares: tuple[list[int], list[int]] = ([], [])
    load = [0, 0]
    for i in order:
        w = 0 if load[0] <= load[1] else 1
        shares[w].append(i)
        load[w] += chunks[i].nbytes
    out: list[str] = [""] * len(chunks)

    def work(share: list[int]) -> None:
        for i in share:
            out[i] = hashlib.sha256(chunks[i]).hexdigest()

    helper = threading.Thread(target=work, args=(shares[1],), name="ldptext-hash", daemon=True)
    helper.start()
    try:
        work(shares[0])
    finally:
        helper.join()
    if any(not d for d in out):  # the helper thread died (e.g. out of memory): hash what it left
        out = [d or hashlib.sha256(c).hexdigest() for d, c in zip(out, chunks)]
    return out


def _load(source: BundleSource, expect_mechanism=None, trust_check=None
          ) -> tuple[Path | None, dict, dict[str, np.ndarray], SignatureInfo]:
    """Structure, manifest, signature and array hashes. ``trust_check(info)`` runs right after the
    signature is checked, before anything the signature covers is interpreted. The same checks, in
    the same order, whether ``source`` is a file or bytes."""
    path, mm, size = _open_source(source)
    header, data_start, raw_header = _parse_header(mm, size)
    meta = header.pop("__metadata__", None)
    manifest_bytes, manifest = _parse_manifest(meta)
    info = _check_signature(meta, manifest_bytes)
    if trust_check is not None:
        trust_check(info)
    declared = _check_manifest(manifest, manifest_bytes, expect_mechanism)
    layout = _array_layout(header, declared, data_start, size)
    arrays: dict[str, np.ndarray] = {}
    view = memoryview(mm)  # hashing slices of a memoryview copies nothing
    chunks = [view[data_start + start:data_start + end] for _, _, _, start, end, _ in layout]
    digests = _sha256_all(chunks)
    for (name, dtype, shape, start, end, digest), chunk, got in zip(layout, chunks, digests):
        if not hmac.compare_digest(got, digest):
            raise BundleIntegrityError(f"array {name!r}: content hash differs from the manifest")
        if dtype == np.bool_ and bytes(chunk).translate(None, b"\x00\x01"):
            # numpy bools must be 0 or 1; other bytes are undefined behaviour downstream
            raise BundleIntegrityError(f"array {name!r}: boolean array holds values other than 0/1")
        count = (end - start) // dtype.itemsize
        arrays[name] = np.frombuffer(mm, dtype=dtype, count=count,
                                     offset=data_start + start).reshape(shape)
    # last (so that the specific checks above report first): every remaining byte of the header —
    # JSON spelling, key order, layout order, padding — must be the one the writer produces
    expected = canonical_header(meta, {n: (s["dtype"], s["shape"]) for n, s in declared.items()})
    if not hmac.compare_digest(raw_header, expected):
        raise BundleIntegrityError("bundle header is not the canonical header of its signed manifest "
                                   "(re-ordered layout, extra fields or non-canonical JSON)")
    return path, manifest, arrays, info


def read_bundle(path: BundleSource, *, trusted_keys=None, allow_unsigned: bool = False,
                expect_mechanism: Iterable[str] | None = None) -> Bundle:
    """Open, verify and memory-map a bundle.

    ``path``: the bundle file, or its content as ``bytes`` / ``bytearray`` / ``memoryview`` (an app
    that ships the bundle as an asset). Bytes get exactly the checks a file gets, in the same order,
    with the same errors; ``bytes`` are used without copying, other buffers are copied once (so the
    content cannot change after verification), and the result's ``path`` is ``None``.
    ``trusted_keys``: public keys (objects, raw bytes, base64 text or ``.pub`` paths) the signer must
    be among; ``None`` means the local trust store (:func:`ldptext.keys.trusted_public_keys`).
    Raises a :class:`~ldptext.errors.BundleError` subclass for every defect: UnsignedBundleError,
    UnknownKeyError, SignatureError, BundleFormatError (format, version, mechanism, malformed
    header), BundleIntegrityError (hash, shape, dtype, offsets, values) or BundleError (missing,
    truncated, not a regular file).
    """
    def trust_check(info: SignatureInfo) -> None:
        _enforce_trust(info, trusted_keys, allow_unsigned)

    path, manifest, arrays, info = _load(path, expect_mechanism, trust_check)
    return Bundle(path=path, manifest=manifest, arrays=arrays, key_id=info.key_id,
                  signed=info.signed)


def open_unverified(path: BundleSource, *, on_signature: Callable[[SignatureInfo], None] | None = None
                    ) -> tuple[Bundle, SignatureInfo]:
    """Open a bundle (file or bytes) with every structural and hash check but **no trust decision**:
    for ``ldptext bundle inspect`` and ``sign``. Never use the result to sanitize text.

    ``on_signature(info)`` is called as soon as the signature is read, before the array hashes: a
    caller that reports on a damaged bundle still learns who signed it."""
    path, manifest, arrays, info = _load(path, trust_check=on_signature)
    return Bundle(path=path, manifest=manifest, arrays=arrays, key_id=info.key_id,
                  signed=info.signed), info
