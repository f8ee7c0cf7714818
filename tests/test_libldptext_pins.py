"""Pins in C (ldp_expect, examples/c/sanitize.c --epsilon-max / --bundle-id): a C program that pins
ε ≤ 3 is refused an ε = 10 bundle from the same trusted signer, with the Python runtime's semantics
(ldptext.runtime.BundleExpectation) for every pin."""
from __future__ import annotations

import base64
import ctypes
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from conftest import build_tiny_bundle
from ldptext import bundle as B
from ldptext.errors import BundleExpectationError
from ldptext.santext import Sanitizer

ROOT = Path(__file__).resolve().parents[1]
LIB_PATH = ROOT / "native" / "build" / "libldptext.so"
EXAMPLE = ROOT / "native" / "build" / "sanitize"
KEY = Ed25519PrivateKey.generate()
RAW = KEY.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
# native/include/ldptext.h
OK, E_ARG = 0, -1
E_MECHANISM, E_FORMAT, E_BUNDLE_ID, E_EPSILON = -101, -102, -103, -104
SANTEXT, SANTEXT_PLUS = 1 << 1, 1 << 2


class Expect(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("mechanisms", ctypes.c_uint),
                ("epsilon_min", ctypes.c_double), ("epsilon_max", ctypes.c_double),
                ("bundle_id", ctypes.c_char_p), ("min_format_version", ctypes.c_int64),
                ("allow_weak_privacy", ctypes.c_int)]


@pytest.fixture(scope="module")
def lib():
    if not LIB_PATH.exists():
        pytest.skip("libldptext not built (make -C native)")
    lib = ctypes.CDLL(str(LIB_PATH))
    lib.ldp_bundle_open_expect.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t,
                                           ctypes.POINTER(Expect), ctypes.POINTER(ctypes.c_void_p)]
    lib.ldp_bundle_close.argtypes = [ctypes.c_void_p]
    return lib


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    d = tmp_path_factory.mktemp("pins")
    (d / "publisher.pub").write_text(base64.b64encode(RAW).decode() + "\n")
    return {eps: build_tiny_bundle(d / f"eps{eps:g}.ldpb", mechanism="santext+", epsilon=eps, sign_key=KEY)
            for eps in (2.0, 10.0)}


def c_open(lib, path, **pins) -> int:
    fields = {"size": ctypes.sizeof(Expect), "allow_weak_privacy": 1}  # as python_refuses' load
    fields.update({k: (v.encode() if isinstance(v, str) else v) for k, v in pins.items()})
    e = Expect(**fields)
    keys = (ctypes.c_uint8 * 32).from_buffer_copy(RAW)
    out = ctypes.c_void_p()
    rc = lib.ldp_bundle_open_expect(str(path).encode(), ctypes.byref(keys), 1, ctypes.byref(e),
                                    ctypes.byref(out))
    assert (out.value is not None) == (rc == OK)      # nothing is returned on a refusal
    lib.ldp_bundle_close(out)
    return rc


def python_refuses(path, **pins) -> bool:
    try:
        Sanitizer.load(path, trusted_keys=[KEY.public_key()], expect=pins, allow_weak_privacy=True).close()
    except BundleExpectationError:
        return True
    return False


def test_the_example_pins_epsilon(bundles):
    if not EXAMPLE.exists():
        pytest.skip("examples/c/sanitize.c not built (make -C native)")
    pub = str(bundles[2.0].parent / "publisher.pub")
    ok = subprocess.run([str(EXAMPLE), "--epsilon-max", "3", str(bundles[2.0]), pub],
                        input="alpha beta gamma\n", capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.count("\n") == 1
    refused = subprocess.run([str(EXAMPLE), "--epsilon-max", "3", str(bundles[10.0]), pub],
                             input="alpha beta gamma\n", capture_output=True, text=True)
    assert refused.returncode == 1 and refused.stdout == ""
    assert "epsilon is outside the range the application requires" in refused.stderr
    # unpinned, the same program accepts the same bundle (near identity at eps = 10: with the
    # opt-in, without which it says so): the pin made the difference
    assert subprocess.run([str(EXAMPLE), "--allow-weak-privacy", str(bundles[10.0]), pub], input="alpha\n",
                          text=True, capture_output=True).returncode == 0
    weak = subprocess.run([str(EXAMPLE), str(bundles[10.0]), pub], input="alpha\n", text=True,
                          capture_output=True)
    assert weak.returncode == 1 and weak.stdout == "" and "close to the input" in weak.stderr


@pytest.mark.parametrize("pins, code", [
    ({}, OK),
    ({"epsilon_max": 3.0}, E_EPSILON),
    ({"epsilon_max": 10.0}, OK),
    ({"epsilon_min": 10.5}, E_EPSILON),
    ({"epsilon_min": 1.0, "epsilon_max": 20.0}, OK),
    ({"mechanisms": SANTEXT}, E_MECHANISM),
    ({"mechanisms": SANTEXT | SANTEXT_PLUS}, OK),
    ({"min_format_version": 2}, E_FORMAT),
    ({"min_format_version": 1}, OK),
    ({"bundle_id": "0" * 64}, E_BUNDLE_ID),
])
def test_each_pin_agrees_with_python(lib, bundles, pins, code):
    path = bundles[10.0]
    assert c_open(lib, path, **pins) == code
    py = {"mechanisms": "mechanism", "min_format_version": "min_format_version"}
    py_pins = {py.get(k, k): v for k, v in pins.items()}
    if "mechanism" in py_pins:
        py_pins["mechanism"] = [m for bit, m in ((SANTEXT, "santext"), (SANTEXT_PLUS, "santext+"))
                                if pins["mechanisms"] & bit]
    assert python_refuses(path, **py_pins) == (code != OK)


def test_the_pinned_bundle_id_is_pythons(lib, bundles):
    for eps, path in bundles.items():
        bid = B.read_bundle(path, trusted_keys=[KEY.public_key()]).bundle_id
        assert c_open(lib, path, bundle_id=bid) == OK
        other = bundles[2.0 if eps == 10.0 else 10.0]
        assert c_open(lib, other, bundle_id=bid) == E_BUNDLE_ID


@pytest.mark.parametrize("pins", [{"epsilon_min": 3.0, "epsilon_max": 2.0}, {"epsilon_max": -1.0},
                                  {"epsilon_min": float("nan")}, {"mechanisms": 1 << 9},
                                  {"bundle_id": "A" * 64}, {"bundle_id": "0" * 63},
                                  {"min_format_version": -1}, {"size": 8}])
def test_malformed_pins_are_argument_errors(lib, bundles, pins):
    assert c_open(lib, bundles[2.0], **pins) == E_ARG
