"""ldp_public_key_parse (native/lib/keys.c) against the Python SDK's keys.load_public_key.

On the files ``keys generate`` writes, their PEM form, private keys, keys of other algorithms and
hundreds of damaged texts (every truncation, single-character substitutions, other lengths, other
whitespace) the C parser accepts exactly the files Python accepts, with the same 32 bytes, and
refuses the others with the code of the same failure Python names. The example program
(examples/c/sanitize.c) reads key files with it."""
from __future__ import annotations

import base64
import ctypes
import subprocess

import pytest
from cryptography.hazmat.primitives import serialization as S
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa, x25519

from ldptext import keys
from ldptext.errors import KeyFileError
from ldptext.ldp_codes import LDP_E_KEY_FORMAT, LDP_E_KEY_LENGTH, LDP_E_KEY_PRIVATE, LDP_E_KEY_TYPE, LDP_OK
from test_libldptext import EXAMPLE, LIB_PATH, build_library

from conftest import build_tiny_bundle


@pytest.fixture(scope="module")
def parse():
    build_library()
    lib = ctypes.CDLL(str(LIB_PATH))
    lib.ldp_public_key_parse.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p]
    lib.ldp_public_key_parse.restype = ctypes.c_int

    def run(text: bytes) -> tuple[int, bytes | None]:
        out = ctypes.create_string_buffer(b"\xab" * 32, 32)
        rc = lib.ldp_public_key_parse(text, len(text), out)
        if rc != LDP_OK:
            assert out.raw == b"\xab" * 32, "a refused text wrote the key"
        return rc, out.raw if rc == LDP_OK else None
    return run


def python_verdict(path) -> tuple[int, bytes | None]:
    """keys.load_public_key on a file, as the C code it corresponds to."""
    try:
        return LDP_OK, keys.public_bytes(keys.load_public_key(path))
    except KeyFileError as e:
        msg = str(e)
        if "PRIVATE key" in msg:
            return LDP_E_KEY_PRIVATE, None
        if "decodes to 0 bytes" in msg:  # an empty file: C says it is not a key at all
            return LDP_E_KEY_FORMAT, None
        if "decodes to" in msg:
            return LDP_E_KEY_LENGTH, None
        if "is not an Ed25519 public key (" in msg:
            return LDP_E_KEY_TYPE, None
        return LDP_E_KEY_FORMAT, None


def pem(public_key) -> bytes:
    return public_key.public_bytes(S.Encoding.PEM, S.PublicFormat.SubjectPublicKeyInfo)


def corpus(tmp_path) -> list[bytes]:
    texts = []
    for i in range(4):
        _, pub = keys.generate_keypair(tmp_path / f"k{i}", name="signing")
        line = pub.read_bytes()
        assert line.endswith(b"\n") and len(line) == 45
        key = keys.load_public_key(pub)
        b64 = line.strip()
        texts += [line, b64, b"  " + b64 + b"\r\n", b"\t" + b64 + b"\n\n\n", b64 + b" ", pem(key),
                  pem(key).replace(b"\n", b"\r\n"), b"\n" + pem(key) + b"\n"]
        texts += [b64[:n] for n in range(45)]                      # every truncation
        for pos in (0, 7, 20, 41, 42, 43):                          # one character replaced
            for c in b"-_=. \n\x00A/+\xc3":
                texts.append(b64[:pos] + bytes([c]) + b64[pos + 1:])
        texts += [b64 + b"AAAA", b64 + b"=", b64 + b64, line + line, b64[:20] + b"\n" + b64[20:]]
    key = ed25519.Ed25519PrivateKey.generate()
    texts += [key.private_bytes(S.Encoding.PEM, S.PrivateFormat.PKCS8, S.NoEncryption()),
              key.private_bytes(S.Encoding.PEM, S.PrivateFormat.PKCS8, S.BestAvailableEncryption(b"pw")),
              key.private_bytes(S.Encoding.PEM, S.PrivateFormat.OpenSSH, S.NoEncryption())]
    texts += [pem(x25519.X25519PrivateKey.generate().public_key()),
              pem(ec.generate_private_key(ec.SECP256R1()).public_key()),
              pem(rsa.generate_private_key(65537, 2048).public_key())]
    texts += [base64.b64encode(bytes(range(n))) for n in (0, 1, 16, 31, 33, 48, 64)]
    texts += [b"", b"\n", b"not a key\n", b"-----BEGIN PUBLIC KEY-----\n-----END PUBLIC KEY-----\n"]
    return texts


def test_accepts_exactly_what_keys_py_accepts(parse, tmp_path):
    texts = corpus(tmp_path)
    accepted = refused = 0
    differ = []
    for i, text in enumerate(texts):
        path = tmp_path / f"t{i}.pub"
        path.write_bytes(text)
        want = python_verdict(path)
        got = parse(text)
        if got != want:
            differ.append((text, got, want))
        accepted += got[0] == LDP_OK
        refused += got[0] != LDP_OK
    assert differ == []
    assert accepted >= 4 * 9 and refused > 300  # both sides of the line are exercised
    codes = {parse(t)[0] for t in texts}
    assert codes == {LDP_OK, LDP_E_KEY_FORMAT, LDP_E_KEY_LENGTH, LDP_E_KEY_PRIVATE, LDP_E_KEY_TYPE}


def test_example_reads_pub_and_pem_files_and_names_a_private_key(parse, ldptext_home, tmp_path):
    bundle = build_tiny_bundle(tmp_path / "s.ldpb", mechanism="santext")
    dev = keys.developer_key()
    pub = tmp_path / "dev.pub"
    pub.write_text(base64.b64encode(keys.public_bytes(dev.public_key())).decode() + "\n")
    pem_file = tmp_path / "dev.pem"
    pem_file.write_bytes(pem(dev.public_key()))
    for key_file in (pub, pem_file):
        res = subprocess.run([str(EXAMPLE), str(bundle), str(key_file)], input=b"w1 w2\n",
                             capture_output=True, timeout=60)
        assert res.returncode == 0, res.stderr
        assert len(res.stdout.split()) == 2
    private = tmp_path / "dev.key"
    private.write_bytes(dev.private_bytes(S.Encoding.PEM, S.PrivateFormat.PKCS8, S.NoEncryption()))
    res = subprocess.run([str(EXAMPLE), str(bundle), str(private)], input=b"w1\n", capture_output=True,
                         timeout=60)
    assert res.returncode == 1 and b"PRIVATE key" in res.stderr and res.stdout == b""
    res = subprocess.run([str(EXAMPLE), str(bundle), str(tmp_path / "missing.pub")], input=b"w1\n",
                         capture_output=True, timeout=60)
    assert res.returncode == 1 and b"cannot read the public key file" in res.stderr
