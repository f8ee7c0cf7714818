"""The outer safetensors header is authenticated byte for byte: it must be exactly the canonical
header the writer produces from the signed manifest, so that every byte of a loadable file is
determined by what the signer signed."""
from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ldptext import bundle as B
from ldptext.errors import BundleError, BundleIntegrityError

KEY = Ed25519PrivateKey.generate()
ARRAYS = {"f64": np.arange(3, dtype=np.float64), "i32": np.arange(5, dtype=np.int32),
          "f32": np.ones((2, 3), np.float32), "flag": np.array([True, False]),
          "u16": np.arange(3, dtype=np.uint16), "empty": np.zeros((0, 4), np.float32)}


@pytest.fixture()
def good(tmp_path):
    return B.write_bundle(tmp_path / "g.ldpb", mechanism="santext", arrays=ARRAYS, manifest={"x": 1},
                          blobs={"tok.json": b"abc"}, sign_key=KEY)


def parts(path):
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    return data[8:8 + n], data[8 + n:]


def load(path):
    return B.read_bundle(path, trusted_keys=[KEY.public_key()])


def test_written_file_is_what_safetensors_writes_and_reads(good, tmp_path):
    from safetensors.numpy import load_file, save_file
    header, data = parts(good)
    meta = json.loads(header)["__metadata__"]
    tensors = {n: np.asarray(a) for n, a in load(good).arrays.items()}
    save_file(tensors, tmp_path / "st.safetensors", metadata=meta)
    st_header, st_data = parts(tmp_path / "st.safetensors")
    assert st_data == data                       # same layout of the data region
    # same header up to the order of the metadata entries (safetensors keeps them in hash order)
    sort_meta = lambda raw: json.dumps({**json.loads(raw), "__metadata__": dict(sorted(meta.items()))})  # noqa: E731
    assert sort_meta(st_header) == sort_meta(header) and len(st_header) == len(header)
    assert load(tmp_path / "st.safetensors").bundle_id == load(good).bundle_id
    for n, a in load_file(good).items():
        np.testing.assert_array_equal(a, tensors[n])


def test_rewriting_an_unchanged_bundle_reproduces_the_file(good, tmp_path):
    again = B.write_bundle(tmp_path / "again.ldpb", mechanism="santext", arrays=ARRAYS, manifest={"x": 1},
                           blobs={"tok.json": b"abc"}, sign_key=KEY)
    assert again.read_bytes() == good.read_bytes()


def _rewrite(path, header_obj, data, spaces=False):
    raw = json.dumps(header_obj, separators=(", ", ": ") if spaces else (",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


def test_reordered_layout_is_refused(good):
    """Same arrays, same hashes, valid offsets: only the order in the data region differs."""
    header, data = parts(good)
    h = json.loads(header)
    names = [n for n in h if n != "__metadata__"]
    # two 4-byte-aligned arrays swap places in the data region
    a, b = "f32", "i32"
    (a0, a1), (b0, b1) = h[a]["data_offsets"], h[b]["data_offsets"]
    assert a1 == b0
    new = data[:a0] + data[b0:b1] + data[a0:a1] + data[b1:]
    h[b]["data_offsets"] = [a0, a0 + (b1 - b0)]
    h[a]["data_offsets"] = [a0 + (b1 - b0), b1]
    by_offset = sorted(names, key=lambda n: h[n]["data_offsets"])
    reordered = {"__metadata__": h["__metadata__"], **{n: h[n] for n in by_offset}}
    _rewrite(good, reordered, new)
    with pytest.raises(BundleIntegrityError, match="canonical header"):
        load(good)


@pytest.mark.parametrize("edit", [
    lambda h: (h, True),                                                    # JSON with spaces
    lambda h: ({k: h[k] for k in reversed(list(h))}, False),                # key order
    lambda h: ({**h, "f64": {"shape": h["f64"]["shape"], "dtype": "F64",
                             "data_offsets": h["f64"]["data_offsets"]}}, False),  # entry key order
])
def test_noncanonical_header_spelling_is_refused(good, edit):
    header, data = parts(good)
    h, spaces = edit(json.loads(header))
    _rewrite(good, h, data, spaces)
    with pytest.raises(BundleError):
        load(good)


def test_extra_padding_is_refused(good):
    header, data = parts(good)
    raw = header + b" " * 8
    good.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    with pytest.raises(BundleIntegrityError, match="canonical header"):
        load(good)


def test_extra_metadata_key_is_refused(good):
    header, data = parts(good)
    h = json.loads(header)
    h["__metadata__"]["comment"] = "hello"
    _rewrite(good, h, data)
    with pytest.raises(BundleError):
        load(good)


def test_bundles_written_by_safetensors_still_load(tmp_path):
    """Bundles written before the writer serialised itself (safetensors' save_file) are canonical."""
    from safetensors.numpy import save_file
    ref = B.write_bundle(tmp_path / "r.ldpb", mechanism="santext", arrays=ARRAYS, manifest={}, sign_key=KEY)
    header, _ = parts(ref)
    meta = json.loads(header)["__metadata__"]
    save_file({n: np.asarray(a) for n, a in load(ref).arrays.items()}, tmp_path / "old.ldpb", metadata=meta)
    assert load(tmp_path / "old.ldpb").bundle_id == load(ref).bundle_id


def test_metadata_entry_order_is_the_one_documented_freedom(good):
    """safetensors wrote the metadata in hash-map order: any order of the three entries loads, and
    changes neither the arrays nor the bundle id."""
    import itertools
    header, data = parts(good)
    h = json.loads(header)
    ref = load(good).bundle_id
    for order in itertools.permutations(h["__metadata__"]):
        _rewrite(good, {"__metadata__": {k: h["__metadata__"][k] for k in order},
                        **{k: v for k, v in h.items() if k != "__metadata__"}}, data)
        b = load(good)
        assert b.bundle_id == ref
        np.testing.assert_array_equal(b.arrays["f32"], ARRAYS["f32"])
