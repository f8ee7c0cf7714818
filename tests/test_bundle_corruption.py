"""The bundle loader refuses every damaged, forged or inconsistent file with a BundleError subclass
(SPEC §5): bit flips at every header byte and across the data, truncation at many lengths, swapped
arrays, edited manifests, and hand-crafted hostile headers signed by a *trusted* key (so that the
checks after the signature are exercised too). Never another exception type, never silent success."""
from __future__ import annotations

import base64
import json
import os
import struct
import warnings

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ldptext import bundle as B
from ldptext import keys
from ldptext.errors import (BundleError, BundleFormatError, BundleIntegrityError, SignatureError,
                            UnknownKeyError, UnsignedBundleError)

# counters reported by the last test (for docs/reliability.md)
CORRUPTED: dict[str, int] = {}


def sample_arrays() -> dict[str, np.ndarray]:
    """Arrays shaped like a small SanText+ bundle, one of every dtype family the runtime uses."""
    rng = np.random.default_rng(7)
    v, k = 40, 4
    return {
        "embeddings": rng.standard_normal((v, 8)).astype(np.float32),
        "head_ids": rng.integers(0, v, (v, k)).astype(np.int32),
        "alias_threshold": rng.integers(0, 2**32, (v, k + 1), dtype=np.uint64).astype(np.uint32),
        "alias_index": rng.integers(0, k + 1, (v, k + 1)).astype(np.uint16),
        "accept_gamma": rng.random((v, k + 1)),
        "tail_floor": rng.random(v),
        "outputs": np.arange(v, dtype=np.int32),
        "sensitive": rng.random(v) < 0.5,
        "empty": np.zeros((0, 3), np.float32),
    }


MANIFEST = {"epsilon": 3.0, "p": 0.3, "epsilon0": 1.2039728043259361, "d_max": 7.25,
            "sources": {"embeddings": {"name": "test", "sha256": "00" * 32}}}


@pytest.fixture()
def home(tmp_path, monkeypatch):
    """An isolated $LDPTEXT_HOME with one trusted signing key."""
    monkeypatch.setenv("LDPTEXT_HOME", str(tmp_path / "home"))
    priv, pub = keys.generate_keypair(tmp_path / "keys")
    keys.trust(pub)
    return keys.load_private_key(priv)


@pytest.fixture()
def good(home, tmp_path):
    path = B.write_bundle(tmp_path / "good.ldpb", mechanism="santext+", arrays=sample_arrays(),
                          manifest=MANIFEST, blobs={"tokenizer.json": b'{"model": "x"}'},
                          sign_key=home)
    return path


def load(path, **kw):
    return B.read_bundle(path, **kw)


def expect_refused(path, exc=BundleError, **kw):
    """The load must raise ``exc`` (a BundleError subclass) and nothing else."""
    try:
        load(path, **kw)
    except exc:
        return
    except BundleError as e:
        pytest.fail(f"raised {type(e).__name__} ({e}), expected {exc.__name__}")
    except Exception as e:  # noqa: BLE001 - the point of the test
        pytest.fail(f"raised non-bundle exception {type(e).__name__}: {e}")
    pytest.fail("corrupted bundle loaded silently")


def put(path, data: bytes) -> None:
    """Replace the file by rename: truncating a file in place that an earlier load still maps is
    slow (and is exactly what bundles never do)."""
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def flip_in_place(f, offset: int, mask: int) -> None:
    """XOR one byte of an open file in place (no truncation, no rename: fast)."""
    f.seek(offset)
    byte = f.read(1)[0]
    f.seek(offset)
    f.write(bytes([byte ^ mask]))
    f.flush()


def split(path) -> tuple[int, dict, bytes]:
    data = open(path, "rb").read()
    (hlen,) = struct.unpack("<Q", data[:8])
    return hlen, json.loads(data[8:8 + hlen]), data[8 + hlen:]


def craft(path, header: dict | bytes, data: bytes, pad: bool = True) -> None:
    """Write a safetensors-layout file from a header (dict or raw JSON bytes) and data bytes."""
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    if pad:
        raw += b" " * (-len(raw) % 8)
    put(path, struct.pack("<Q", len(raw)) + raw + data)


def resign(header: dict, manifest: dict | None = None, key: Ed25519PrivateKey | None = None,
           manifest_bytes: bytes | None = None) -> dict:
    """Replace the header's manifest (canonical unless bytes are given) and sign it."""
    header = dict(header)
    meta = dict(header["__metadata__"])
    mb = manifest_bytes if manifest_bytes is not None else B.canonical_json(manifest)
    meta["ldptext.manifest"] = mb.decode("utf-8", "surrogatepass")
    if key is not None:
        meta["ldptext.signature"] = base64.b64encode(key.sign(mb)).decode()
        meta["ldptext.public_key"] = base64.b64encode(keys.public_bytes(key.public_key())).decode()
    header["__metadata__"] = meta
    return header


# ---- the good case and the trust decisions --------------------------------------------------

def test_good_bundle_loads_and_matches(good, home):
    b = load(good)
    assert b.signed and b.key_id == keys.key_id(home.public_key())
    for name, a in sample_arrays().items():
        np.testing.assert_array_equal(b.arrays[name], a)
        assert not b.arrays[name].flags.writeable
    assert b.blob("tokenizer.json") == b'{"model": "x"}'
    assert b.manifest["epsilon"] == 3.0 and b.mechanism == "santext+"


def test_unsigned_bundle_is_refused_unless_allowed(tmp_path, home):
    path = B.write_bundle(tmp_path / "u.ldpb", mechanism="santext", arrays=sample_arrays(),
                          manifest=MANIFEST)
    expect_refused(path, UnsignedBundleError)
    with pytest.warns(B.UnsignedBundleWarning):
        b = load(path, allow_unsigned=True)
    assert not b.signed and b.key_id is None


def test_unknown_key_is_refused(tmp_path, home):
    other = Ed25519PrivateKey.generate()
    path = B.write_bundle(tmp_path / "o.ldpb", mechanism="santext", arrays=sample_arrays(),
                          manifest=MANIFEST, sign_key=other)
    expect_refused(path, UnknownKeyError)
    assert load(path, trusted_keys=[other.public_key()]).signed
    # allow_unsigned never relaxes the trust check of a signed bundle
    expect_refused(path, UnknownKeyError, allow_unsigned=True)


def test_bad_signature_is_refused(good):
    hlen, header, data = split(good)
    sig = bytearray(base64.b64decode(header["__metadata__"]["ldptext.signature"]))
    sig[10] ^= 1
    header["__metadata__"]["ldptext.signature"] = base64.b64encode(bytes(sig)).decode()
    craft(good, header, data)
    expect_refused(good, SignatureError)


def test_noncanonical_base64_signature_is_refused(good):
    # the last base64 character carries unused bits that b64decode ignores
    hlen, header, data = split(good)
    meta = header["__metadata__"]
    s = meta["ldptext.signature"]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    last = s.rstrip("=")[-1]
    meta["ldptext.signature"] = s.rstrip("=")[:-1] + alphabet[alphabet.index(last) ^ 1] + "=="
    assert base64.b64decode(meta["ldptext.signature"]) == base64.b64decode(s)
    craft(good, header, data)
    expect_refused(good, SignatureError)


# ---- blind corruption: bit flips and truncation ---------------------------------------------

def test_bit_flip_at_every_header_byte_and_across_the_data_is_refused(good):
    original = open(good, "rb").read()
    hlen = struct.unpack("<Q", original[:8])[0]
    end_header = 8 + hlen
    rng = np.random.default_rng(1)
    offsets = list(range(end_header))  # every byte of the length prefix and the header
    offsets += sorted(rng.choice(np.arange(end_header, len(original)), size=400, replace=False))
    offsets += [len(original) - 1]
    with open(good, "r+b") as f:
        for i, off in enumerate(offsets):
            flip_in_place(f, off, 1 << (i % 8))
            try:
                load(good)
            except BundleError:
                continue
            except Exception as e:  # noqa: BLE001
                pytest.fail(f"flip at offset {off}: {type(e).__name__}: {e}")
            finally:
                flip_in_place(f, off, 1 << (i % 8))  # restore
            pytest.fail(f"flip of bit {i % 8} at offset {off} loaded silently")
    CORRUPTED["bit_flips"] = len(offsets)


def test_every_bit_of_sampled_offsets_is_refused(good):
    original = open(good, "rb").read()
    rng = np.random.default_rng(2)
    offsets = rng.choice(len(original), size=40, replace=False)
    n = 0
    with open(good, "r+b") as f:
        for off in offsets:
            for bit in range(8):
                flip_in_place(f, int(off), 1 << bit)
                expect_refused(good)
                flip_in_place(f, int(off), 1 << bit)
                n += 1
    assert open(good, "rb").read() == original
    CORRUPTED["all_bits"] = n


def test_truncation_at_many_lengths_is_refused(good):
    original = open(good, "rb").read()
    lengths = sorted(set(range(0, 64)) | set(range(0, len(original), 13))
                     | {len(original) - 1, len(original) - 2})
    for n in lengths:
        put(good, original[:n])
        expect_refused(good)
    CORRUPTED["truncations"] = len(lengths)


def test_appended_bytes_are_refused(good):
    original = open(good, "rb").read()
    for extra in (b"\0", b"x" * 8, original):
        put(good, original + extra)
        expect_refused(good, BundleIntegrityError)


def test_unsigned_corruption_never_crashes(tmp_path, home):
    """With allow_unsigned the manifest is unauthenticated, so a flip may go unnoticed; the loader
    must still only ever succeed or raise a BundleError."""
    path = B.write_bundle(tmp_path / "u.ldpb", mechanism="santext", arrays=sample_arrays(),
                          manifest=MANIFEST)
    original = open(path, "rb").read()
    rng = np.random.default_rng(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", B.UnsignedBundleWarning)
        with open(path, "r+b") as f:
            for i in range(600):
                flips = [(int(o), 1 << int(rng.integers(8)))
                         for o in rng.choice(len(original), size=1 + i % 4, replace=False)]
                for off, mask in flips:
                    flip_in_place(f, off, mask)
                try:
                    load(path, allow_unsigned=True)
                except BundleError:
                    pass
                for off, mask in flips:
                    flip_in_place(f, off, mask)
    CORRUPTED["unsigned_multi_flips"] = 600


# ---- structured corruption: swapped arrays, edited manifests ---------------------------------

def test_swapped_array_data_is_refused(good):
    hlen, header, data = split(good)
    # swap the leading bytes of two arrays' data (each hash then sees the other's content)
    x, y = header["tail_floor"]["data_offsets"], header["outputs"]["data_offsets"]
    d = bytearray(data)
    blk_x, blk_y = bytes(d[x[0]:x[1]]), bytes(d[y[0]:y[1]])
    n = min(len(blk_x), len(blk_y))
    d[x[0]:x[0] + n], d[y[0]:y[0] + n] = blk_y[:n], blk_x[:n]
    craft(good, header, bytes(d))
    expect_refused(good, BundleIntegrityError)


def test_swapped_array_names_are_refused(good):
    hlen, header, data = split(good)
    header["head_ids"], header["outputs"] = header["outputs"], header["head_ids"]
    craft(good, header, data)
    expect_refused(good, BundleIntegrityError)


def test_swapped_offsets_of_same_shape_arrays_are_refused(tmp_path, home):
    arrays = {"a": np.arange(16, dtype=np.int32), "b": np.arange(16, 32, dtype=np.int32)}
    path = B.write_bundle(tmp_path / "s.ldpb", mechanism="santext", arrays=arrays, manifest={},
                          sign_key=home)
    hlen, header, data = split(path)
    header["a"]["data_offsets"], header["b"]["data_offsets"] = (header["b"]["data_offsets"],
                                                                header["a"]["data_offsets"])
    craft(path, header, data)
    expect_refused(path, BundleIntegrityError)


def test_edited_manifest_without_resigning_is_refused(good):
    hlen, header, data = split(good)
    manifest = json.loads(header["__metadata__"]["ldptext.manifest"])
    manifest["epsilon"] = 30.0
    header = resign(header, manifest)  # no key: old signature kept
    craft(good, header, data)
    expect_refused(good, SignatureError)


def test_edited_manifest_resigned_by_stranger_is_refused(good):
    hlen, header, data = split(good)
    manifest = json.loads(header["__metadata__"]["ldptext.manifest"])
    manifest["epsilon"] = 30.0
    craft(good, resign(header, manifest, Ed25519PrivateKey.generate()), data)
    expect_refused(good, UnknownKeyError)


def test_signature_removed_is_refused(good):
    hlen, header, data = split(good)
    del header["__metadata__"]["ldptext.signature"]
    craft(good, header, data)
    expect_refused(good, SignatureError)
    del header["__metadata__"]["ldptext.public_key"]
    craft(good, header, data)
    expect_refused(good, UnsignedBundleError)


def _trusted_variant(good, home, edit_manifest=None, edit_header=None, manifest_bytes=None,
                     data_edit=None):
    """Apply edits and re-sign with the TRUSTED key, so only the post-signature checks remain."""
    hlen, header, data = split(good)
    manifest = json.loads(header["__metadata__"]["ldptext.manifest"])
    if edit_manifest:
        edit_manifest(manifest)
    if data_edit:
        data = data_edit(data)
    header = resign(header, manifest, home, manifest_bytes)
    if edit_header:
        edit_header(header)
    craft(good, header, data)


@pytest.mark.parametrize("edit, exc", [
    (lambda m: m.update(format_version=2), BundleFormatError),
    (lambda m: m.update(format_version=True), BundleFormatError),
    (lambda m: m.update(format_version=1.0), BundleFormatError),
    (lambda m: m.update(format_version="1"), BundleFormatError),
    (lambda m: m.update(format="something-else"), BundleFormatError),
    (lambda m: m.update(mechanism="rot13"), BundleFormatError),
    (lambda m: m.update(arrays=[]), BundleFormatError),
    (lambda m: m["arrays"]["embeddings"].update(shape=[8, 40]), BundleIntegrityError),
    (lambda m: m["arrays"]["embeddings"].update(dtype="F64"), BundleIntegrityError),
    (lambda m: m["arrays"]["embeddings"].update(sha256="0" * 64), BundleIntegrityError),
    (lambda m: m["arrays"]["embeddings"].update(sha256=None), BundleIntegrityError),
    (lambda m: m["arrays"].pop("embeddings"), BundleIntegrityError),
    (lambda m: m["arrays"].update(extra=m["arrays"]["outputs"]), BundleIntegrityError),
    (lambda m: m["arrays"].update(embeddings=[1, 2]), BundleIntegrityError),
])
def test_signed_but_inconsistent_manifest_is_refused(good, home, edit, exc):
    _trusted_variant(good, home, edit_manifest=edit)
    expect_refused(good, exc)


def _set_entry(name, **fields):
    def edit(header):
        header[name] = dict(header[name], **fields)
    return edit


@pytest.mark.parametrize("edit", [
    _set_entry("embeddings", shape=[8, 40]),
    _set_entry("embeddings", shape=[40, "8"]),
    _set_entry("embeddings", shape=[40, 8.0]),
    _set_entry("embeddings", shape=[40, True, 8]),
    _set_entry("embeddings", shape=[2**32, 2**32]),   # product wraps to 0 in int64
    _set_entry("embeddings", shape=[-40, -8]),
    _set_entry("embeddings", shape=[10**30]),
    _set_entry("embeddings", shape=[1] * 64),
    _set_entry("embeddings", dtype="F16"),
    _set_entry("embeddings", dtype="BF16"),
    _set_entry("embeddings", dtype=["F32"]),
    _set_entry("embeddings", data_offsets=5),
    _set_entry("embeddings", data_offsets=[]),
    _set_entry("embeddings", data_offsets=[0]),
    _set_entry("embeddings", data_offsets=[0, 1, 2]),
    _set_entry("embeddings", data_offsets=["0", "1280"]),
    _set_entry("embeddings", data_offsets=[-8, 1272]),
    _set_entry("embeddings", data_offsets=[2**70, 2**70 + 1280]),
    _set_entry("embeddings", extra=1),
    lambda h: h.update(embeddings=[1, 2, 3]),
    lambda h: h.update(embeddings=None),
    lambda h: h["__metadata__"].update({"ldptext.note": "hi"}),
    lambda h: h["__metadata__"].update({"ldptext.manifest": 5}),
])
def test_hostile_header_entries_are_refused(good, home, edit):
    _trusted_variant(good, home, edit_header=edit)
    expect_refused(good)


def test_overlapping_and_misaligned_offsets_are_refused(tmp_path, home):
    arrays = {"a": np.arange(4, dtype=np.float64), "b": np.arange(4, dtype=np.float64)}
    path = B.write_bundle(tmp_path / "o.ldpb", mechanism="santext", arrays=arrays, manifest={},
                          sign_key=home)
    hlen, header, data = split(path)
    # overlap: both arrays point at the same bytes (same content, so hashes would match)
    h2 = json.loads(json.dumps(header))
    h2["b"]["data_offsets"] = h2["a"]["data_offsets"]
    craft(path, h2, data)
    expect_refused(path, BundleIntegrityError)
    # misaligned: shift the data by 4 bytes (header 4 bytes longer, no padding)
    raw = json.dumps(header).encode()
    raw += b" " * ((-len(raw) % 8) + 4)
    craft(path, raw, data, pad=False)
    expect_refused(path, BundleIntegrityError)


def test_boolean_array_with_other_bytes_is_refused(good, home):
    hlen, header, data = split(good)
    start = header["sensitive"]["data_offsets"][0]

    def poke(d):
        d = bytearray(d)
        d[start] = 2
        return bytes(d)
    manifest = json.loads(header["__metadata__"]["ldptext.manifest"])
    import hashlib
    new = poke(data)
    s, e = header["sensitive"]["data_offsets"]
    manifest["arrays"]["sensitive"]["sha256"] = hashlib.sha256(new[s:e]).hexdigest()
    craft(good, resign(header, manifest, home), new)
    expect_refused(good, BundleIntegrityError)


@pytest.mark.parametrize("raw", [
    b'{"a": 1, "a": 2}',                                  # duplicate keys
    b'{"__metadata__": {}, "__metadata__": {}}',
    b'{"x": NaN}', b'{"x": Infinity}', b'{"x": -Infinity}', b'{"x": 1e999}',
    b'{"x": ' + b"1" * 5000 + b"}",                       # beyond Python's int-digits limit
    b'{"x": ' + b"[" * 100000 + b"]" * 100000 + b"}",     # nesting beyond the recursion limit
    b'[1, 2, 3]', b'"text"', b'{', b'\xff\xfe{}', b'',
])
def test_hostile_header_json_is_refused(good, raw):
    craft(good, raw, b"")
    expect_refused(good)


def test_manifest_duplicate_keys_and_noncanonical_bytes_are_refused(good, home):
    hlen, header, data = split(good)
    mb = header["__metadata__"]["ldptext.manifest"].encode()
    for variant in (mb.replace(b'"epsilon":3.0', b'"epsilon":3.0,"epsilon":30.0'),
                    mb.replace(b'"epsilon":3.0', b'"epsilon": 3.0'),
                    mb.replace(b'"epsilon":3.0', b'"epsilon":3.00'),
                    mb.replace(b'"epsilon":3.0', b'"epsilon":NaN'),
                    mb.replace(b'"p":0.3', b'"p":"\\ud800"')):
        assert variant != mb
        craft(good, resign(header, key=home, manifest_bytes=variant), data)
        expect_refused(good, BundleFormatError)


def test_lone_surrogate_in_metadata_is_refused(good, home):
    hlen, header, data = split(good)
    raw = json.dumps(header).encode().replace(b'"ldptext.manifest": "{',
                                              b'"ldptext.manifest": "\\ud800{')
    craft(good, raw, data)
    expect_refused(good, BundleFormatError)


def test_header_length_limits(good):
    hlen, header, data = split(good)
    with open(good, "wb") as f:  # declares 2^63 bytes of header
        f.write(struct.pack("<Q", 1 << 63) + b"{}")
    expect_refused(good, BundleFormatError)
    with open(good, "wb") as f:
        f.write(struct.pack("<Q", 17 << 20) + b"{" + b" " * 100)
    expect_refused(good, BundleFormatError)


# ---- the file itself -------------------------------------------------------------------------

def test_not_a_regular_file_is_refused_without_blocking(tmp_path, good):
    expect_refused(tmp_path / "missing.ldpb")
    expect_refused(tmp_path)  # a directory
    fifo = tmp_path / "fifo.ldpb"
    os.mkfifo(fifo)
    expect_refused(fifo)  # must not block waiting for a writer
    if os.path.exists("/dev/zero"):
        expect_refused("/dev/zero")
    link = tmp_path / "link.ldpb"
    link.symlink_to(good)
    assert load(link).signed  # a symlink to a real bundle is an ordinary path
    dangling = tmp_path / "dangling.ldpb"
    dangling.symlink_to(tmp_path / "nowhere")
    expect_refused(dangling)
    empty = tmp_path / "empty.ldpb"
    empty.write_bytes(b"")
    expect_refused(empty)


def test_expect_mechanism(good):
    assert load(good, expect_mechanism=["santext+"]).mechanism == "santext+"
    expect_refused(good, BundleFormatError, expect_mechanism=["dpbart"])


# ---- bundles read from bytes: the same checks, the same errors ---------------------------------------

def _outcome(source, **kw):
    """What reading ``source`` gives: ("loaded", bundle id) or (error type, message)."""
    try:
        b = load(source, **kw)
    except BundleError as e:
        return type(e), str(e)
    except Exception as e:  # noqa: BLE001 - the point of the test
        pytest.fail(f"raised non-bundle exception {type(e).__name__}: {e}")
    return "loaded", b.bundle_id


def test_tampered_bytes_are_refused_exactly_like_a_tampered_file(good, tmp_path):
    original = good.read_bytes()
    hlen = struct.unpack("<Q", original[:8])[0]
    rng = np.random.default_rng(3)
    variants = []
    for off in sorted(rng.choice(len(original), size=60, replace=False)) + [3, 8 + hlen // 2, len(original) - 1]:
        flipped = bytearray(original)
        flipped[int(off)] ^= 1 << int(off % 8)
        variants.append(bytes(flipped))
    variants += [original[:n] for n in (1, 7, 8, 20, 8 + hlen, len(original) - 1)]  # truncated
    variants += [original + b"\0" * 8]                                                 # appended
    variants += [original.replace(b'\\"epsilon\\":3.0', b'\\"epsilon\\":9.0', 1)]     # edited manifest
    refused = 0
    for data in variants:
        put(good, data)
        from_file = _outcome(good)
        assert from_file[0] != "loaded"
        for source in (data, bytearray(data), memoryview(data)):
            assert _outcome(source) == from_file
        refused += 1
    assert refused == len(variants)
    put(good, original)
    assert _outcome(original) == _outcome(good) == ("loaded", load(good).bundle_id)
    # trust decisions too: an unsigned or foreign bundle as bytes is refused as the file is
    unsigned = B.write_bundle(tmp_path / "u.ldpb", mechanism="santext", arrays=sample_arrays(), manifest=MANIFEST)
    foreign = B.write_bundle(tmp_path / "f.ldpb", mechanism="santext", arrays=sample_arrays(), manifest=MANIFEST,
                             sign_key=Ed25519PrivateKey.generate())
    for path, exc in ((unsigned, UnsignedBundleError), (foreign, UnknownKeyError)):
        assert _outcome(path.read_bytes()) == _outcome(path) and _outcome(path)[0] is exc


def test_bundle_bytes_cannot_change_after_verification(good):
    data = bytearray(good.read_bytes())
    b = load(data)                     # a bytearray is copied once, before verification
    data[-1] ^= 0xFF
    assert b.path is None and b.bundle_id == load(good).bundle_id
    for name, a in sample_arrays().items():
        np.testing.assert_array_equal(b.arrays[name], a)
        assert not b.arrays[name].flags.writeable
    assert _outcome(b"")[0] is BundleError and _outcome(bytearray())[0] is BundleError
