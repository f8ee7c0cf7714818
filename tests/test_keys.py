"""Signing keys and the local trust store: file modes, passphrases, refusal to overwrite, robust
parsing of public keys, and a trust store that refuses to be world-writable."""
from __future__ import annotations

import os
import stat

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ldptext import keys
from ldptext.errors import KeyFileError


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("LDPTEXT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_private_key_is_0600_and_public_key_parses(tmp_path):
    priv, pub = keys.generate_keypair(tmp_path / "k")
    assert stat.S_IMODE(os.stat(priv).st_mode) == 0o600
    key = keys.load_private_key(priv)
    assert keys.public_bytes(keys.load_public_key(pub)) == keys.public_bytes(key.public_key())
    assert len(keys.key_id(key.public_key())) == 16


def test_private_key_mode_ignores_a_permissive_umask(tmp_path):
    old = os.umask(0)
    try:
        priv, _ = keys.generate_keypair(tmp_path / "k")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(priv).st_mode) == 0o600


def test_passphrase_protects_the_key(tmp_path):
    priv, _ = keys.generate_keypair(tmp_path / "k", passphrase=b"correct horse")
    assert b"ENCRYPTED" in priv.read_bytes()
    keys.load_private_key(priv, b"correct horse")
    with pytest.raises(KeyFileError):
        keys.load_private_key(priv, b"wrong")
    with pytest.raises(KeyFileError):
        keys.load_private_key(priv)  # no passphrase given
    with pytest.raises(KeyFileError):
        keys.generate_keypair(tmp_path / "k2", passphrase=b"")


def test_generate_refuses_to_overwrite_or_follow_symlinks(tmp_path):
    keys.generate_keypair(tmp_path / "k")
    with pytest.raises(KeyFileError):
        keys.generate_keypair(tmp_path / "k")
    d = tmp_path / "s"
    d.mkdir()
    target = tmp_path / "victim"
    target.write_text("do not touch")
    (d / "signing.key").symlink_to(target)
    with pytest.raises(KeyFileError):
        keys.generate_keypair(d)
    assert target.read_text() == "do not touch"


def test_insecure_private_key_file_warns(tmp_path):
    priv, _ = keys.generate_keypair(tmp_path / "k")
    os.chmod(priv, 0o644)
    with pytest.warns(keys.InsecureKeyFileWarning):
        keys.load_private_key(priv)


@pytest.mark.parametrize("bad", [None, 5, b"short", "not base64 !!", b"\x00" * 31,
                                 "-----BEGIN PUBLIC KEY-----\nxx\n-----END PUBLIC KEY-----\n",
                                 "/nonexistent/key.pub"])
def test_malformed_public_keys_raise_keyfileerror(bad):
    with pytest.raises(KeyFileError):
        keys.load_public_key(bad)


def test_missing_public_key_path_raises_keyfileerror(tmp_path):
    with pytest.raises(KeyFileError):
        keys.load_public_key(tmp_path / "missing.pub")


def test_garbage_private_key_raises_keyfileerror(tmp_path):
    p = tmp_path / "x.key"
    p.write_bytes(b"-----BEGIN PRIVATE KEY-----\ngarbage\n-----END PRIVATE KEY-----\n")
    os.chmod(p, 0o600)
    with pytest.raises(KeyFileError):
        keys.load_private_key(p)
    with pytest.raises(KeyFileError):
        keys.load_private_key(tmp_path / "missing.key")


def test_trust_store_roundtrip_and_untrust(tmp_path):
    k = Ed25519PrivateKey.generate()
    path = keys.trust(k.public_key())
    assert path.name == keys.key_id(k.public_key()) + ".pub"
    assert keys.trust(k.public_key()) == path  # idempotent
    assert [keys.public_bytes(p) for p in keys.trusted_public_keys()] == \
        [keys.public_bytes(k.public_key())]
    assert stat.S_IMODE(os.stat(keys.trust_dir()).st_mode) == 0o700
    assert keys.untrust(keys.key_id(k.public_key()))
    assert keys.trusted_public_keys() == []


def test_world_writable_trust_store_is_refused():
    keys.trust(Ed25519PrivateKey.generate().public_key())
    os.chmod(keys.trust_dir(), 0o777)
    with pytest.raises(KeyFileError):
        keys.trusted_public_keys()


def test_corrupt_trust_store_file_is_reported():
    keys.trust(Ed25519PrivateKey.generate().public_key())
    (keys.trust_dir() / "bogus.pub").write_text("not a key")
    with pytest.raises(KeyFileError, match="bogus.pub"):
        keys.trusted_public_keys()


# ---- the developer key is trusted only by an explicit opt-in ---------------------------------

def _dev_bundle(tmp_path):
    import numpy as np

    from ldptext import bundle as B
    return B.write_bundle(tmp_path / "dev.ldpb", mechanism="santext",
                          arrays={"a": np.arange(4, dtype=np.int32)}, manifest={},
                          sign_key=keys.build_signing_key(None))


def test_developer_key_is_not_trusted_by_creating_it(tmp_path, monkeypatch):
    from ldptext import bundle as B
    from ldptext.errors import UnknownKeyError
    monkeypatch.delenv(keys.DEV_ENV, raising=False)
    path = _dev_bundle(tmp_path)                       # fresh LDPTEXT_HOME: creates the key
    assert keys.developer_public_key() is not None
    assert keys.trusted_public_keys() == [] and not keys.trust_dir().exists()
    with pytest.raises(UnknownKeyError) as e:
        B.read_bundle(path)
    msg = str(e.value)
    assert "developer key" in msg and "ldptext keys trust --developer" in msg and "LDPTEXT_DEV=1" in msg


def test_ldptext_dev_trusts_the_developer_key_without_writing(tmp_path, monkeypatch):
    from ldptext import bundle as B
    path = _dev_bundle(tmp_path)
    monkeypatch.setenv(keys.DEV_ENV, "1")
    assert B.read_bundle(path).signed
    assert not keys.trust_dir().exists()               # nothing persisted
    monkeypatch.setenv(keys.DEV_ENV, "0")
    with pytest.raises(Exception, match="trust --developer"):
        B.read_bundle(path)


def test_keys_trust_developer_is_the_persistent_opt_in(tmp_path, monkeypatch, capsys):
    from ldptext import bundle as B
    from ldptext import cli
    monkeypatch.delenv(keys.DEV_ENV, raising=False)
    path = _dev_bundle(tmp_path)
    assert cli.main(["keys", "trust", "--developer"]) == 0
    out = capsys.readouterr().out
    assert "DEVELOPER key" in out
    assert B.read_bundle(path).signed
    assert cli.main(["keys", "list"]) == 0
    assert "(developer key)" in capsys.readouterr().out
    assert cli.main(["keys", "trust"]) == 2            # neither PUBFILE nor --developer


# ---- key errors say what is wrong ----------------------------------------------------------------

def test_public_key_errors_say_what_is_wrong(tmp_path, monkeypatch):
    """A missing .pub used to say "Only base64 data is allowed" (the name was read as base64)."""
    monkeypatch.chdir(tmp_path)
    priv, pub = keys.generate_keypair(tmp_path / "k")
    (tmp_path / "junk.pub").write_text("this is not a key\n")
    (tmp_path / "short.pub").write_text("AAAA\n")
    cases = {
        "missing.pub": "public key file missing.pub does not exist",
        str(tmp_path / "gone" / "signing.pub"): "does not exist",
        str(tmp_path / "k"): "is a directory, not a key file",
        str(priv): "holds a PRIVATE key; give its public half",
        str(tmp_path / "junk.pub"): "junk.pub is not a public key: expected one base64 line",
        str(tmp_path / "short.pub"): "decodes to 3 bytes, not 32",
        "AAAA": "the public key given is not an Ed25519 public key: it decodes to 3 bytes",
        "nokey": "neither an existing .pub file nor the base64 of an Ed25519 public key",
    }
    for given, says in cases.items():
        with pytest.raises(KeyFileError) as e:
            keys.load_public_key(given)
        assert says in str(e.value), (given, str(e.value))
        assert "Only base64" not in str(e.value)
    assert keys.load_public_key(str(pub)) is not None  # a good one still loads (path and base64 text)
    assert keys.load_public_key(pub.read_text().strip()) is not None


def test_private_key_errors_say_what_is_wrong(tmp_path):
    enc, enc_pub = keys.generate_keypair(tmp_path / "e", passphrase=b"right")
    plain, _ = keys.generate_keypair(tmp_path / "p")
    cases = [
        ((enc, None), "is encrypted and no passphrase was given"),
        ((enc, b"wrong"), "wrong passphrase for private key"),
        ((plain, b"extra"), "is not encrypted, but a passphrase was given"),
        ((enc_pub, None), "is a public key; signing needs the private key file"),
        ((tmp_path / "missing.key", None), "No such file"),
    ]
    for args, says in cases:
        with pytest.raises(KeyFileError) as e:
            keys.load_private_key(*args)
        assert says in str(e.value), (args, str(e.value))
    assert keys.load_private_key(enc, b"right") is not None


def test_cli_key_errors_are_one_line_exit_5(tmp_path, capsys):
    from conftest import build_tiny_bundle
    from ldptext import cli

    bundle = build_tiny_bundle(tmp_path / "t.ldpb", n=20)
    missing = str(tmp_path / "missing.pub")
    assert cli.main(["keys", "trust", missing]) == 5
    assert capsys.readouterr().err == f"ldptext: error: public key file {missing} does not exist\n"
    assert cli.main(["sanitize", "--bundle", str(bundle), "--trusted-key", missing]) == 5
    assert capsys.readouterr().err == f"ldptext: error: public key file {missing} does not exist\n"


# ---- --trusted-key replaces the trust store, and says so -----------------------------------------

def test_trusted_key_replaces_the_store_and_the_refusal_says_so(tmp_path, monkeypatch, capsys):
    from conftest import build_tiny_bundle
    from ldptext import cli

    monkeypatch.delenv(keys.DEV_ENV, raising=False)
    bundle = build_tiny_bundle(tmp_path / "t.ldpb", n=20)  # signed by the developer key
    keys.trust_developer_key()                              # which the store now trusts
    src = tmp_path / "in.txt"
    src.write_text("w1 w2\n")
    assert cli.main(["sanitize", "--bundle", str(bundle), str(src)]) == 0
    capsys.readouterr()
    _, other = keys.generate_keypair(tmp_path / "other")
    assert cli.main(["sanitize", "--bundle", str(bundle), "--trusted-key", str(other), str(src)]) == 5
    out, err = capsys.readouterr()
    dev = keys.key_id(keys.developer_public_key())
    assert out == "" and err.count("\n") == 1
    assert f"signed by key {dev}, which is not among the 1 key given with --trusted-key" in err
    assert "replaces the local trust store for this run" in err and "the store trusts this signer" in err
    dev_pub = tmp_path / "dev.pub"
    dev_pub.write_text(keys.trust_dir().joinpath(f"{dev}.pub").read_text())
    assert cli.main(["sanitize", "--bundle", str(bundle), "--trusted-key", str(other), "--trusted-key",
                     str(dev_pub), str(src)]) == 0


def test_trusted_key_help_states_that_it_replaces_the_store(capsys):
    from ldptext import cli

    for command in (["sanitize"], ["rewrite"]):
        with pytest.raises(SystemExit):
            cli.main([*command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert "REPLACES the local trust store" in text, command
