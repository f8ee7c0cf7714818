"""``ldptext keys`` and ``ldptext bundle``: generate, trust, sign, verify, inspect, and one-line
errors (exit status 2) for every refusal."""
from __future__ import annotations

import json
import os
import stat

import numpy as np
import pytest

from ldptext import bundle as B
from ldptext import cli

ARRAYS = {"embeddings": np.arange(12, dtype=np.float32).reshape(4, 3),
          "outputs": np.arange(4, dtype=np.int32)}
MANIFEST = {"params": {"epsilon": 2.0, "p": 0.3, "epsilon0": 1.2039728043259361, "head_size": 2},
            "privacy": {"d_max": 5.0, "notion": "UMLDP"},
            "sources": {"embeddings": {"name": "test\x1b[31m"}},
            "numeric": {"max_relative_error": 1e-12}}


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("LDPTEXT_HOME", str(tmp_path / "home"))


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_generate_trust_sign_verify_inspect(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LDP_PASS", "hunter2")
    rc, out, _ = run(capsys, "keys", "generate", "--out", str(tmp_path / "k"),
                     "--passphrase-env", "LDP_PASS")
    assert rc == 0 and "encrypted" in out
    key, pub = tmp_path / "k" / "signing.key", tmp_path / "k" / "signing.pub"
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    assert b"ENCRYPTED" in key.read_bytes()

    path = B.write_bundle(tmp_path / "b.ldpb", mechanism="santext+", arrays=ARRAYS,
                          manifest=MANIFEST)
    rc, _, err = run(capsys, "bundle", "verify", str(path))
    assert rc == 2 and "unsigned" in err and err.count("\n") == 1

    rc, _, err = run(capsys, "bundle", "sign", str(path), "--key", str(key))
    assert rc == 2 and "passphrase" in err.lower() or "Password" in err
    rc, out, _ = run(capsys, "bundle", "sign", str(path), "--key", str(key),
                     "--passphrase-env", "LDP_PASS")
    assert rc == 0
    rc, _, err = run(capsys, "bundle", "verify", str(path))
    assert rc == 2 and "untrusted key" in err
    rc, out, _ = run(capsys, "bundle", "verify", str(path), "--trusted-key", str(pub))
    assert rc == 0 and out.startswith("OK")
    rc, out, _ = run(capsys, "keys", "trust", str(pub))
    assert rc == 0
    rc, out, _ = run(capsys, "bundle", "verify", str(path))
    assert rc == 0

    rc, out, _ = run(capsys, "bundle", "inspect", str(path))
    assert rc == 0
    assert "trusted here" in out and "santext+" in out
    assert "eps*D_max + eps0 = 11.204" in out  # 2 * 5 + ln(1/0.3)
    assert "\x1b" not in out and "\\x1b" in out  # terminal escapes from the manifest are defused
    assert "embeddings" in out and "F32" in out and "4x3" in out
    rc, out, _ = run(capsys, "bundle", "inspect", "--json", str(path))
    data = json.loads(out)
    assert data["signature"]["valid"] and data["signature"]["trusted"]
    assert {a["name"] for a in data["arrays"]} == set(ARRAYS)


def test_inspect_shows_untrusted_and_unsigned(tmp_path, capsys):
    path = B.write_bundle(tmp_path / "b.ldpb", mechanism="santext", arrays=ARRAYS,
                          manifest=MANIFEST)
    rc, out, _ = run(capsys, "bundle", "inspect", str(path))
    assert rc == 0 and "UNSIGNED" in out


def test_sign_refuses_a_tampered_bundle(tmp_path, capsys):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    rc, _, _ = run(capsys, "keys", "generate", "--out", str(tmp_path / "k"))
    path = B.write_bundle(tmp_path / "b.ldpb", mechanism="santext", arrays=ARRAYS,
                          manifest=MANIFEST, sign_key=Ed25519PrivateKey.generate())
    data = bytearray(path.read_bytes())
    i = data.index(b'\\"epsilon\\":2.0')
    data[i + 12] = ord("7")  # epsilon 2.0 -> 2.7, signature now invalid
    path.write_bytes(bytes(data))
    rc, out, err = run(capsys, "bundle", "inspect", str(path))
    assert rc == 0 and "INVALID" in out
    rc, _, err = run(capsys, "bundle", "sign", str(path), "--key", str(tmp_path / "k/signing.key"))
    assert rc == 2 and "refusing to re-sign" in err


def test_corrupt_bundle_gives_one_line_error(tmp_path, capsys):
    p = tmp_path / "x.ldpb"
    p.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ")
    for action in ("verify", "inspect"):
        rc, out, err = run(capsys, "bundle", action, str(p))
        assert rc == 2 and err.startswith("ldptext: error:") and err.count("\n") == 1


def test_passphrase_sources(tmp_path, capsys):
    f = tmp_path / "pp"
    f.write_text("")
    rc, _, err = run(capsys, "keys", "generate", "--out", str(tmp_path / "k"),
                     "--passphrase-file", str(f))
    assert rc == 2 and "empty" in err
    rc, _, err = run(capsys, "keys", "generate", "--out", str(tmp_path / "k"),
                     "--passphrase-env", "SURELY_UNSET_VARIABLE_X")
    assert rc == 2
    f.write_text("pass phrase\n")
    rc, out, _ = run(capsys, "keys", "generate", "--out", str(tmp_path / "k"),
                     "--passphrase-file", str(f), "--trust")
    assert rc == 0 and "trusted" in out
    rc, out, _ = run(capsys, "keys", "list")
    assert rc == 0 and len(out.split()) == 1
