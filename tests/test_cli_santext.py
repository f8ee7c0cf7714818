"""The ``ldptext sanitize`` / ``ldptext precompute santext`` commands: streaming order, JSON
reports, bad input with clear errors and no partial output, and no raw text in errors or logs."""
import json
import logging
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import build_tiny_bundle, load_seeded
from ldptext.cli import main
from ldptext.errors import BundleError, InputError, ParameterError

MARKER = "SECRETMARKER7f3a"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return build_tiny_bundle(tmp_path_factory.mktemp("cli") / "t.ldpb", n=40,
                             mechanism="santext+", epsilon=2.0)


def run_cli(args, stdin: bytes | None = None):
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "ldptext.cli", *args], input=stdin,
                          capture_output=True, env=env, timeout=120)


def test_sanitize_streams_lines_in_order_with_json_reports(bundle, tmp_path):
    lines = [f"w{i} w{i + 1} {MARKER}" for i in range(0, 30)] + ["", "w3"]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    r = run_cli(["sanitize", "--bundle", str(bundle), "--json", str(src)])
    assert r.returncode == 0, r.stderr
    out = [json.loads(line) for line in r.stdout.decode().splitlines()]
    assert len(out) == len(lines)
    assert [o["report"]["n_tokens"] for o in out] == [3] * 30 + [0, 1]
    assert all(MARKER.lower() not in o["text"] for o in out)  # OOV never passes through
    assert out[0]["report"]["mechanism"] == "santext+"


def test_sanitize_seed_reproduces(bundle):
    data = "w1 w2 w3 w4\nw5 w6\n".encode()
    a = run_cli(["sanitize", "--bundle", str(bundle), "--seed", "3"], data)
    b = run_cli(["sanitize", "--bundle", str(bundle), "--seed", "3"], data)
    assert a.returncode == 0 and a.stdout == b.stdout
    assert b"NOT private" in a.stderr


def test_non_utf8_file_is_refused_with_line_number_and_no_output(bundle, tmp_path):
    src = tmp_path / "bad.txt"
    src.write_bytes(b"w1 w2\nw3\n" + MARKER.encode() + b" \xff\xfe w4\nw5\n")
    r = run_cli(["sanitize", "--bundle", str(bundle), str(src)])
    assert r.returncode == 2
    assert b"line 3" in r.stderr and b"UTF-8" in r.stderr
    assert MARKER.encode() not in r.stderr and r.stdout == b""


def test_non_utf8_on_stdin_stops_at_the_line(bundle):
    r = run_cli(["sanitize", "--bundle", str(bundle)], b"w1\n" + MARKER.encode() + b"\xc3(\n")
    assert r.returncode == 2 and b"line 2" in r.stderr and MARKER.encode() not in r.stderr


@pytest.mark.parametrize("bad", [["--epsilon", "0"], ["--epsilon", "-1"], ["--epsilon", "nan"],
                                 ["--epsilon", "inf"], ["--epsilon", "2", "--p", "0"],
                                 ["--epsilon", "2", "--p", "1.5"], ["--epsilon", "2", "--w", "1.2"],
                                 ["--epsilon", "2", "--w", "-0.1"]])
def test_precompute_rejects_bad_parameters_without_writing(tmp_path, bad):
    out = tmp_path / "x.ldpb"
    code = main(["precompute", "santext", "--embeddings", "glove-6b-50d", "--vocab-size", "50",
                 *bad, "--out", str(out)])
    assert code == 2 and not out.exists()
    assert not list(tmp_path.iterdir())  # no temporary file left behind either


def test_python_api_parameter_errors():
    from ldptext_precompute.santext.build import check_parameters
    for eps in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ParameterError):
            check_parameters(eps, "santext", None, None)
    with pytest.raises(ParameterError):
        check_parameters(1.0, "santext+", 0.0, 0.9)
    with pytest.raises(ParameterError):
        check_parameters(1.0, "santext+", 0.3, 1.01)
    with pytest.raises(ParameterError):
        check_parameters(1.0, "dpbart", 0.3, 0.9)


def test_missing_or_corrupted_bundle_is_refused(bundle, tmp_path):
    from ldptext.santext import Sanitizer
    with pytest.raises(BundleError, match="not found"):
        Sanitizer.load(tmp_path / "nope.ldpb")
    data = bytearray(bundle.read_bytes())
    data[-100] ^= 0x01
    bad = tmp_path / "flipped.ldpb"
    bad.write_bytes(bytes(data))
    with pytest.raises(BundleError):
        Sanitizer.load(bad)
    r = run_cli(["sanitize", "--bundle", str(bad)], b"w1\n")
    assert r.returncode == 2 and b"error" in r.stderr and r.stdout == b""


def test_raw_text_never_reaches_logs_or_exception_messages(bundle, caplog):
    san = load_seeded(bundle)
    with caplog.at_level(logging.DEBUG):
        res = san.sanitize(f"w1 {MARKER} w2")
        assert MARKER.lower() not in res.text
        with pytest.raises(InputError) as e1:
            san.sanitize_batch(["w1", MARKER.encode()])
        with pytest.raises(InputError) as e2:
            san.sample_ids(np.array([10**6]))
    for e in (e1, e2):
        assert MARKER not in str(e.value) and MARKER not in repr(e.value)
    assert all(MARKER not in rec.getMessage() for rec in caplog.records)
