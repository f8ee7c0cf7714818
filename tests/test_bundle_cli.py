"""``ldptext keys`` and ``ldptext bundle``: generate, trust, sign, verify, inspect, and one-line
errors for every refusal (exit status 4 for a damaged bundle, 5 for signature and key problems)."""
from __future__ import annotations

import json
import os
import stat

import numpy as np
import pytest

from conftest import build_tiny_bundle
from ldptext import bundle as B
from ldptext import cli
from ldptext.rng import available_backend

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
    assert rc == 5 and "unsigned" in err and err.count("\n") == 1

    rc, _, err = run(capsys, "bundle", "sign", str(path), "--key", str(key))
    assert rc == 5 and ("passphrase" in err.lower() or "Password" in err)
    rc, out, err = run(capsys, "bundle", "sign", str(path), "--key", str(key),
                     "--passphrase-env", "LDP_PASS")
    # these arrays are no SanText+ tables: signing is refused (tests/test_bundle_params.py signs real ones)
    assert rc == 4 and "not a loadable santext+ bundle" in err and err.count("\n") == 1
    from ldptext.keys import load_private_key
    path = B.write_bundle(path, mechanism="santext+", arrays=ARRAYS, manifest=MANIFEST,
                          sign_key=load_private_key(key, b"hunter2"))
    rc, _, err = run(capsys, "bundle", "verify", str(path))
    assert rc == 5 and "untrusted key" in err
    # trusted signer, but these arrays are no SanText+ tables: verify checks the parameters too
    rc, out, err = run(capsys, "bundle", "verify", str(path), "--trusted-key", str(pub))
    assert rc == 4 and "not a loadable santext+ bundle" in err and out == ""
    real = build_tiny_bundle(tmp_path / "real.ldpb", mechanism="santext+", n=30,
                             sign_key=load_private_key(key, b"hunter2"))
    rc, out, _ = run(capsys, "bundle", "verify", str(real), "--trusted-key", str(pub))
    assert rc == 0 and out.startswith("OK") and "parameters verified" in out
    assert f"bundle id {B.read_bundle(real, trusted_keys=[str(pub)]).bundle_id}" in out
    rc, out, _ = run(capsys, "keys", "trust", str(pub))
    assert rc == 0
    rc, out, _ = run(capsys, "bundle", "verify", str(real))
    assert rc == 0

    rc, out, _ = run(capsys, "bundle", "inspect", str(path))
    assert rc == 0
    assert "trusted here" in out and "santext+" in out
    # SanText+ states UMLDP, ε₀ = ln(1/0.3) and no finite worst case (V_N words in the clear)
    assert "1.20397 (p = 0.3)" in out and "none (not finite)" in out and "11.204" not in out
    assert "\x1b" not in out and "\\x1b" in out  # terminal escapes from the manifest are defused
    assert "embeddings" in out and "F32" in out and "4x3" in out
    rc, out, _ = run(capsys, "bundle", "inspect", "--json", str(path))
    data = json.loads(out)
    assert data["signature"]["valid"] and data["signature"]["trusted"]
    assert data["backend"] == available_backend()
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
    assert rc == 5 and "refusing to re-sign" in err


def test_corrupt_bundle_gives_one_line_error(tmp_path, capsys):
    p = tmp_path / "x.ldpb"
    p.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ")
    for action in ("verify", "inspect"):
        rc, out, err = run(capsys, "bundle", action, str(p))
        assert rc == 4 and err.startswith("ldptext: error:") and err.count("\n") == 1


def test_passphrase_sources(tmp_path, capsys):
    f = tmp_path / "pp"
    f.write_text("")
    rc, _, err = run(capsys, "keys", "generate", "--out", str(tmp_path / "k"),
                     "--passphrase-file", str(f))
    assert rc == 5 and "empty" in err
    rc, _, err = run(capsys, "keys", "generate", "--out", str(tmp_path / "k"),
                     "--passphrase-env", "SURELY_UNSET_VARIABLE_X")
    assert rc == 5
    f.write_text("pass phrase\n")
    rc, out, _ = run(capsys, "keys", "generate", "--out", str(tmp_path / "k"),
                     "--passphrase-file", str(f), "--trust")
    assert rc == 0 and "trusted" in out
    rc, out, _ = run(capsys, "keys", "list")
    assert rc == 0 and len(out.split()) == 1


def test_inspect_santext_plus_shows_the_non_sensitive_set_and_no_finite_worst_case(tmp_path, capsys):
    from conftest import build_tiny_bundle
    path = build_tiny_bundle(tmp_path / "sp.ldpb", mechanism="santext+", epsilon=3.0, p=0.3, w=0.7,
                             sign_key=False)
    rc, out, _ = run(capsys, "bundle", "inspect", str(path))
    assert rc == 0
    from ldptext.bundle import open_unverified
    b, _ = open_unverified(path)
    keep = np.flatnonzero(np.asarray(b.arrays["keep_row"]))
    vocab = json.loads(b.blob("vocab.json"))
    line = next(x for x in out.splitlines() if "kept in the clear: words" in x)
    assert f"{keep.size} words" in line and " ".join(vocab[i] for i in keep[:5]) in line
    assert "none (not finite)" in out and "in the clear" in out
    assert "per token, worst case" not in out and "worst case per token" not in out
    assert "ledger unit" in out and "metric:" in out and "slack exp(" in out
    rc, out, _ = run(capsys, "bundle", "inspect", "--json", str(path))
    report = json.loads(out)["privacy_report"]
    assert report["non-sensitive split"] == "frequency:0.7"


def test_inspect_santext_states_the_true_worst_case(tmp_path, capsys):
    from conftest import build_tiny_bundle
    path = build_tiny_bundle(tmp_path / "s.ldpb", mechanism="santext", epsilon=2.0, sign_key=False)
    rc, out, _ = run(capsys, "bundle", "inspect", "--json", str(path))
    report = json.loads(out)["privacy_report"]
    d_max = json.loads(out)["manifest"]["privacy"]["d_max"]
    assert report["worst case per token"].startswith(f"eps*D_max = {2.0 * d_max:.6g}-LDP")
    assert "kept in the clear: words" not in report


def test_inspect_states_what_a_dpbart_bundle_fixes():
    from ldptext.commands.bundle import privacy_summary
    rows = dict(privacy_summary({"mechanism": "dpbart",
                                 "dpbart": {"seq_len": 32, "hidden": 768, "n_pruned": 68, "clip": 0.1}}))
    n = 32 * (768 - 68)
    assert rows["n = L x (d - |P|)"] == str(n)
    l1, l2 = 2 * 0.1 * n, 2 * 0.1 * np.sqrt(n)
    assert rows["sensitivity"] == f"L1 = {l1:.6g}, L2 = {l2:.6g}"
    assert "L = 32 tokens is one release" in rows["release unit"]
    assert "discrete Laplace" in rows["noise families"] and "discrete Gaussian" in rows["noise families"]
    assert rows["clip C"].startswith("0.1 ") and rows["pruned |P|"].startswith("68 ")


def test_verify_json_states_id_key_trust_and_verified(tmp_path, capsys):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from ldptext import keys
    key = Ed25519PrivateKey.generate()
    pub = tmp_path / "k.pub"
    pub.write_text(base64_pub(key))
    path = build_tiny_bundle(tmp_path / "b.ldpb", mechanism="santext+", n=30, sign_key=key)
    expected_id = B.read_bundle(path, trusted_keys=[str(pub)]).bundle_id

    rc, out, err = run(capsys, "bundle", "verify", "--json", str(path), "--trusted-key", str(pub))
    data = json.loads(out)
    assert rc == 0 and err == ""
    assert data == {"path": str(path), "verified": True, "error": None, "bundle_id": expected_id,
                    "key_id": keys.key_id(key.public_key()), "signed": True, "trusted": True,
                    "mechanism": "santext+", "format_version": 1, "backend": available_backend()}

    rc, out, err = run(capsys, "bundle", "verify", "--json", str(path))  # signer not trusted here
    data = json.loads(out)
    assert rc == 5 and err.count("\n") == 1 and "untrusted key" in err
    assert data["verified"] is False and data["trusted"] is False and "untrusted key" in data["error"]
    assert data["bundle_id"] == expected_id and data["key_id"] == keys.key_id(key.public_key())

    unsigned = build_tiny_bundle(tmp_path / "u.ldpb", n=30, sign_key=False)
    with pytest.warns(B.UnsignedBundleWarning):
        rc, out, _ = run(capsys, "bundle", "verify", "--json", "--allow-unsigned", str(unsigned))
    data = json.loads(out)
    assert rc == 0 and data["verified"] is True and data["signed"] is False and data["trusted"] is False

    broken = tmp_path / "x.ldpb"
    broken.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ")
    rc, out, err = run(capsys, "bundle", "verify", "--json", str(broken))
    data = json.loads(out)
    assert rc == 4 and err.startswith("ldptext: error:")
    assert data["verified"] is False and data["bundle_id"] is None and data["mechanism"] is None


def test_verify_json_names_the_signer_of_a_damaged_untrusted_bundle(tmp_path, capsys):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from ldptext import keys
    key = Ed25519PrivateKey.generate()
    path = B.write_bundle(tmp_path / "b.ldpb", mechanism="santext+", arrays=ARRAYS, manifest=MANIFEST, sign_key=key)
    blob = bytearray(path.read_bytes())
    blob[-1] ^= 0xFF  # an array byte: its hash no longer matches
    path.write_bytes(bytes(blob))
    rc, out, err = run(capsys, "bundle", "verify", "--json", str(path))
    data = json.loads(out)
    assert rc == 5 and keys.key_id(key.public_key()) in err  # the message names the key ...
    assert data["key_id"] == keys.key_id(key.public_key())    # ... and so does the JSON
    assert data["signed"] is True and data["trusted"] is False and data["verified"] is False


def test_verify_json_reports_a_parameter_mismatch(tmp_path, capsys):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    key = Ed25519PrivateKey.generate()
    pub = tmp_path / "k.pub"
    pub.write_text(base64_pub(key))
    path = B.write_bundle(tmp_path / "b.ldpb", mechanism="santext+", arrays=ARRAYS, manifest=MANIFEST, sign_key=key)
    rc, out, err = run(capsys, "bundle", "verify", "--json", str(path), "--trusted-key", str(pub))
    data = json.loads(out)
    assert rc == 4 and err.count("\n") == 1
    assert data["verified"] is False and data["trusted"] is True and "santext+" in data["error"]


def base64_pub(key) -> str:
    import base64
    from ldptext import keys
    return base64.b64encode(keys.public_bytes(key.public_key())).decode()
