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
    assert r.returncode == 3  # input data
    assert b"line 3" in r.stderr and b"UTF-8" in r.stderr
    assert MARKER.encode() not in r.stderr and r.stdout == b""


def test_non_utf8_on_stdin_stops_at_the_line(bundle):
    r = run_cli(["sanitize", "--bundle", str(bundle)], b"w1\n" + MARKER.encode() + b"\xc3(\n")
    assert r.returncode == 3 and b"line 2" in r.stderr and MARKER.encode() not in r.stderr
    assert r.stdout.decode().count("\n") == 1  # the line before the bad one, complete


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
    assert r.returncode == 4 and b"error" in r.stderr and r.stdout == b""  # 4: bundle


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


def test_sanitize_json_reports_say_seeded_and_state_the_guarantee_that_holds(bundle):
    seeded = run_cli(["sanitize", "--bundle", str(bundle), "--json", "--seed", "3"], b"w1 w2\n")
    private = run_cli(["sanitize", "--bundle", str(bundle), "--json"], b"w1 w2\n")
    assert seeded.returncode == 0 and private.returncode == 0, private.stderr
    a = json.loads(seeded.stdout.decode().splitlines()[0])["report"]
    b = json.loads(private.stdout.decode().splitlines()[0])["report"]
    assert a["seeded"] is True and b["seeded"] is False
    for r in (a, b):  # SanText+: UMLDP, no finite worst case; the ledger charge is n·ε in a metric unit
        assert r["worst_case_token_epsilon"] is None and r["worst_case_document_epsilon"] is None
        assert r["per_token_epsilon"] == 2.0 and r["document_epsilon"] == 4.0
        assert r["ledger_unit"].startswith("metric:") and r["ratio_slack"] == 2 * r["numeric_tolerance"]


def test_precompute_non_sensitive_option(tmp_path, capsys):
    from conftest import random_word_embeddings
    emb = random_word_embeddings(40, 6, seed=5)
    words = ["the", "of", "john", "london", "7", "hospital", ","] + emb.vocab[7:-1]
    src = tmp_path / "vectors.txt"
    src.write_text("".join(w + " " + " ".join(f"{v:.6f}" for v in emb.vectors[i]) + "\n"
                           for i, w in enumerate(words)), encoding="utf-8")
    listed = tmp_path / "ns.txt"
    listed.write_text("john\n", encoding="utf-8")
    expect = {None: ["the", "of", ","], "function-words": ["the", "of", ","], str(listed): ["john"]}
    for i, (split, kept) in enumerate(expect.items()):
        out = tmp_path / f"b{i}.ldpb"
        extra = [] if split is None else ["--non-sensitive", split]
        assert main(["precompute", "santext", "--embeddings", str(src), "--epsilon", "2", "--head-size", "4",
                     *extra, "--out", str(out)]) == 0
        san = load_seeded(out)
        assert [san.vocab[j] for j in np.flatnonzero(san.tables.keep_row)] == kept
    out = tmp_path / "f.ldpb"
    assert main(["precompute", "santext", "--embeddings", str(src), "--epsilon", "2", "--head-size", "4",
                 "--verbatim-cap", "none", "--non-sensitive", "frequency:0.5", "--out", str(out)]) == 0
    assert load_seeded(out).manifest["params"]["non_sensitive"] == "frequency:0.5"
    assert main(["precompute", "santext", "--embeddings", str(src), "--epsilon", "2",
                 "--non-sensitive", "frequency:0.5", "--w", "0.5", "--out", str(tmp_path / "x.ldpb")]) == 2
    capsys.readouterr()


def test_sanitize_pinning_refuses_an_unexpected_bundle(bundle, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("w1 w2\n", encoding="utf-8")
    ok = run_cli(["sanitize", "--bundle", str(bundle), "--expect-mechanism", "santext+",
                  "--expect-epsilon-max", "2", str(src)])
    assert ok.returncode == 0, ok.stderr
    bad = run_cli(["sanitize", "--bundle", str(bundle), "--expect-epsilon-max", "1.5", str(src)])
    assert bad.returncode != 0 and b"exceeds" in bad.stderr and bad.stdout == b""


# ---- streaming and --skip-bad-lines (docs/cli.md) ---------------------------------------------------
class _Result:
    def __init__(self, text):
        self.text = text


class _Sink:
    """Standard output that counts what is written and keeps only the lines."""

    def __init__(self):
        self.lines = 0

    def write(self, s):
        self.lines += s.count("\n")

    def flush(self):
        pass


def test_file_input_is_streamed_a_batch_at_a_time_in_bounded_memory(tmp_path, monkeypatch):
    import tracemalloc

    from ldptext.commands import _io

    src = tmp_path / "big.txt"
    line = ("w1 w2 w3 " * 11).strip() + "\n"               # 98 bytes
    with open(src, "w", encoding="utf-8") as f:
        for _ in range(100):
            f.write(line * 1000)                          # 100,000 lines, 9.8 MB
    sink = _Sink()
    monkeypatch.setattr(sys, "stdout", sink)
    batches = []

    def run_batch(docs):
        batches.append(len(docs))
        return [_Result(d[:2]) for d in docs]
    tracemalloc.start()
    try:
        _io.process(str(src), run_batch, False, 256)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sink.lines == 100_000 and sum(batches) == 100_000 and max(batches) == 256
    assert peak < 2_000_000, f"peak {peak} bytes for a {src.stat().st_size}-byte file"


def test_skip_bad_lines_gives_no_output_line_for_them_and_lists_their_numbers(bundle, tmp_path):
    src = tmp_path / "mixed.txt"
    src.write_bytes(b"w1 w2\n" + MARKER.encode() + b" \xff\xfe\nw3\n\xc3(" + MARKER.encode() + b"\nw4 w5 w6\n")
    for args, stdin in (([str(src)], None), (["-"], src.read_bytes())):
        r = run_cli(["sanitize", "--bundle", str(bundle), "--skip-bad-lines", "--json", *args], stdin)
        assert r.returncode == 0, r.stderr
        out = [json.loads(x) for x in r.stdout.decode().splitlines()]
        assert [o["report"]["n_tokens"] for o in out] == [2, 1, 3]   # one line per good input line
        err = r.stderr.decode()
        assert "skipped 2 of 5 input lines" in err and "lines 2, 4" in err and err.count("\n") == 1
        assert MARKER not in err and MARKER.lower() not in r.stdout.decode()


def test_a_refused_document_is_named_by_its_line_or_skipped(tmp_path, monkeypatch):
    from ldptext.commands import _io

    src = tmp_path / "in.txt"
    src.write_text("a\nb\nREFUSE " + MARKER + "\nc\n", encoding="utf-8")
    sink = _Sink()
    monkeypatch.setattr(sys, "stdout", sink)
    released = []

    def run_batch(docs):
        for i, d in enumerate(docs):
            if d.startswith("REFUSE"):
                raise InputError(f"document {i} could not be tokenized", document=i)
        released.extend(docs)
        return [_Result("x") for _ in docs]
    with pytest.raises(InputError) as e:
        _io.process(str(src), run_batch, False, 256)
    assert str(e.value) == "the document on input line 3 could not be tokenized"
    assert sink.lines == 0 and released == []
    _io.process(str(src), run_batch, False, 256, skip_bad_lines=True)
    assert sink.lines == 3 and released == ["a", "b", "c"]  # each good line released exactly once


def test_stdin_stops_at_a_bad_line_after_writing_every_earlier_line(bundle):
    data = b"".join(b"w%d w%d\n" % (i % 30, (i + 1) % 30) for i in range(300)) + b"\xff" + MARKER.encode() + b"\n"
    r = run_cli(["sanitize", "--bundle", str(bundle), "-"], data + b"w1\n")
    assert r.returncode == 3 and b"line 301" in r.stderr and MARKER.encode() not in r.stderr
    assert r.stdout.decode().endswith("\n") and len(r.stdout.decode().splitlines()) == 300


def test_sanitize_ledger_charges_each_batch_and_exits_6_and_7(bundle, tmp_path, monkeypatch, capsys):
    from ldptext.ledger import Ledger

    monkeypatch.setenv("LEDGER_PASS", "correct horse")
    one, two = tmp_path / "one.txt", tmp_path / "two.txt"
    one.write_text("w1\n", encoding="utf-8")           # 1 token at epsilon 2: charge 2
    two.write_text("w1 w2\n", encoding="utf-8")        # charge 4
    ledger = tmp_path / "budget.ledger"
    base = ["sanitize", "--bundle", str(bundle), "--ledger", str(ledger), "--ledger-passphrase-env", "LEDGER_PASS"]
    assert main(base + [str(one)]) == 2                 # a new ledger needs --budget: usage, nothing opened
    assert "--budget" in capsys.readouterr().err and not ledger.exists()
    assert main(base + ["--budget", "6", str(one)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1
    assert main(base + [str(two)]) == 0                 # the recorded budget: --budget not needed again
    assert main(base + [str(one)]) == 6                 # 2 + 4 + 2 > 6: refused, nothing written
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 1 and err.startswith("ldptext: error: release of epsilon=2")
    assert Ledger(ledger, passphrase="correct horse").spent() == (6.0, 0.0)
    monkeypatch.setenv("LEDGER_PASS", "wrong")
    assert main(base + [str(one)]) == 7                 # unusable ledger: fails authentication
    assert main(["sanitize", "--bundle", str(bundle), "--budget", "5", str(one)]) == 2  # --budget needs --ledger
    assert capsys.readouterr().out == ""


def test_sanitize_ledger_of_another_unit_exits_7_before_any_output(bundle, tmp_path, capsys):
    from ldptext.ledger import Ledger

    Ledger(tmp_path / "ldp.ledger", budget=100.0, passphrase="pw")  # unit "ldp" (DP-BART)
    (tmp_path / "pw").write_text("pw\n")
    (tmp_path / "in.txt").write_text("w1\n")
    assert main(["sanitize", "--bundle", str(bundle), "--ledger", str(tmp_path / "ldp.ledger"),
                 "--ledger-passphrase-file", str(tmp_path / "pw"), str(tmp_path / "in.txt")]) == 7
    out, err = capsys.readouterr()
    assert out == "" and "unit 'ldp'" in err
