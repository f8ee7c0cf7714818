"""``ldptext sanitize`` with JSONL and CSV input and output (``--format`` or the file extension,
``--column``): the text field sanitized, every other field passed through, report fields appended;
streamed; a bad record named by its line number (never its text) with no output file and no
temporary left; the ledger charged before output; ``--progress`` for line, JSONL and CSV input."""
from __future__ import annotations

import csv
import io
import json
import os
import select
import subprocess
import sys

import pytest

from conftest import build_tiny_bundle
from ldptext.cli import main

MARKER = "SECRETMARKER7f3a"
REPORT = ["ldp_mechanism", "ldp_epsilon", "ldp_tokens", "ldp_document_epsilon", "ldp_attempt"]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return build_tiny_bundle(tmp_path_factory.mktemp("formats") / "t.ldpb", n=40, mechanism="santext+",
                             epsilon=2.0)


def sanitize(bundle, *args):
    return main(["sanitize", "--bundle", str(bundle), *args])


def records(n: int) -> list[dict]:
    """JSON objects with a text field (null every 50th), nested and numeric fields to pass through."""
    return [{"id": i, "text": None if i % 50 == 7 else f"w{i % 40} w{(i * 3) % 40} {MARKER}{i}",
             "meta": {"tags": ["a", i], "score": i / 4, "ok": i % 2 == 0}, "note": f"é{i}"} for i in range(n)]


def write_jsonl(path, objs) -> None:
    path.write_text("".join(json.dumps(o) + "\n" for o in objs), encoding="utf-8")


def no_temporaries(directory) -> bool:
    return [p.name for p in directory.iterdir() if p.name.startswith(".")] == []


def test_jsonl_by_extension_sanitizes_the_field_and_passes_the_rest_through(bundle, tmp_path, capsys):
    objs = records(600)  # more than one batch
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_jsonl(src, objs)
    assert sanitize(bundle, "--input", str(src), "--column", "text", "--output", str(out)) == 0
    err = capsys.readouterr().err
    got = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(got) == len(objs)
    for o, g in zip(objs, got):
        assert list(g) == list(o) + REPORT  # key order kept, report fields appended
        assert {k: g[k] for k in o if k != "text"} == {k: v for k, v in o.items() if k != "text"}
        if o["text"] is None:  # nothing released
            assert g["text"] is None and g["ldp_tokens"] is None and g["ldp_epsilon"] is None
            continue
        assert MARKER.lower() not in g["text"].lower() and len(g["text"].split()) == 3
        assert g["ldp_tokens"] == 3 and g["ldp_epsilon"] == 2.0 and g["ldp_document_epsilon"] == 6.0
        assert g["ldp_mechanism"] == "santext+" and g["ldp_attempt"] == 0
    assert "588 JSONL records sanitized" in err and "12 null" in err and MARKER not in err
    assert no_temporaries(tmp_path)


def test_jsonl_from_standard_input_to_standard_output_with_format(bundle, tmp_path):
    data = "".join(json.dumps(o) + "\n" for o in records(5)).encode() + b"\n"  # and a blank line
    r = subprocess.run([sys.executable, "-m", "ldptext.cli", "sanitize", "--bundle", str(bundle), "--format",
                        "jsonl", "--column", "text"], input=data, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.decode().split("\n")
    assert lines[-2:] == ["", ""] and len(lines) == 7  # 5 records, the blank line kept
    assert [json.loads(x)["id"] for x in lines[:5]] == list(range(5))
    assert MARKER.encode() not in r.stdout + r.stderr


def test_jsonl_is_streamed_batch_by_batch(bundle):
    """The first batch's output arrives while standard input is still open: nothing waits for the end."""
    proc = subprocess.Popen([sys.executable, "-m", "ldptext.cli", "sanitize", "--bundle", str(bundle),
                             "--format", "jsonl", "--column", "text"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdin.write("".join(json.dumps(o) + "\n" for o in records(300)).encode())
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "no output before the input ended"
        first = json.loads(proc.stdout.readline())
        assert first["id"] == 0 and proc.poll() is None  # still running: its input is not finished
    finally:
        proc.stdin.close()
    rest = proc.stdout.read()  # (before waiting: the rest may not fit in the pipe)
    assert proc.wait(timeout=60) == 0
    assert len(rest.splitlines()) == 299


def test_csv_passes_other_columns_through_with_quotes_and_newlines(bundle, tmp_path, capsys):
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    rows = [["id", "text", "comment"], ["1", f"w1 w2 {MARKER}", 'says "hi", twice'],
            ["2", "w3\nw4", "multi\nline"], ["3", "", ""]]
    with open(src, "w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows(rows)
    assert sanitize(bundle, "--input", str(src), "--column", "text", "--output", str(out)) == 0
    with open(out, encoding="utf-8", newline="") as f:
        got = list(csv.reader(f))
    assert got[0] == rows[0] + REPORT
    assert [r[0] for r in got[1:]] == ["1", "2", "3"] and [r[2] for r in got[1:]] == [r[2] for r in rows[1:]]
    assert [r[REPORT.index("ldp_tokens") + 3] for r in got[1:]] == ["3", "2", "0"]
    assert MARKER.lower() not in out.read_text(encoding="utf-8").lower()
    assert "3 CSV records sanitized" in capsys.readouterr().err


@pytest.mark.parametrize("fmt, content, line, reason", [
    ("jsonl", '{"text": "w1"}\n{"text": "w2"}\n{"text": "SECRET \xff"\n', 3, "not valid JSON"),
    ("jsonl", '{"text": "w1"}\n["SECRET"]\n', 2, "not an object"),
    ("jsonl", '{"text": "w1"}\n{"id": "SECRET"}\n', 2, "has no field 'text'"),
    ("jsonl", '{"text": "w1"}\n{"text": 5, "x": "SECRET"}\n', 2, "not a string"),
    ("jsonl", '{"text": "w1"}\n{"text": "SECRET", "text": "w2"}\n', 2, "duplicate key"),
    ("csv", 'id,text\n1,w1\n2,"SECRET\n"x\n', 3, "not valid CSV"),
    ("csv", 'id,text\n1,w1\n2,SECRET,extra\n', 3, "has 3 fields, the header 2"),
])
def test_a_bad_record_is_named_by_line_with_no_output_and_no_temporary(bundle, tmp_path, capsys, fmt,
                                                                        content, line, reason):
    src, out = tmp_path / f"in.{fmt}", tmp_path / f"out.{fmt}"
    src.write_text(content.replace("SECRET", MARKER), encoding="utf-8")
    assert sanitize(bundle, "--input", str(src), "--column", "text", "--output", str(out)) == 3
    err = capsys.readouterr().err
    assert f"input line {line} " in err and reason in err, err
    assert MARKER not in err and err.count("\n") == 1
    assert not out.exists() and no_temporaries(tmp_path)


def test_a_bad_jsonl_line_that_is_not_utf8_and_skip_bad_lines(bundle, tmp_path, capsys):
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_bytes(b'{"text": "w1"}\n{"text": "' + MARKER.encode() + b' \xff"}\n{"text": "w2"}\n')
    assert sanitize(bundle, "--input", str(src), "--column", "text", "--output", str(out)) == 3
    assert "input line 2 is not valid UTF-8" in capsys.readouterr().err and not out.exists()
    assert sanitize(bundle, "--input", str(src), "--column", "text", "--output", str(out),
                    "--skip-bad-lines") == 0
    err = capsys.readouterr().err
    assert "skipped 1 input records" in err and "line 2" in err and MARKER not in err
    assert len(out.read_text().splitlines()) == 2


def test_a_refused_document_after_the_first_batch_leaves_no_output(bundle, tmp_path, refusing, capsys):
    objs = [{"text": f"w{i % 40} {MARKER}"} for i in range(400)]
    objs[300]["text"] = f"REFUSE {MARKER}"
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_jsonl(src, objs)
    out.write_text("an earlier release\n")
    assert sanitize(bundle, "--input", str(src), "--column", "text", "--output", str(out), "--overwrite") == 3
    err = capsys.readouterr().err
    assert "input line 301" in err and MARKER not in err and "REFUSE" not in err
    assert out.read_text() == "an earlier release\n" and no_temporaries(tmp_path)  # left as it was


def test_the_ledger_is_charged_before_the_output_is_written(bundle, tmp_path, monkeypatch, capsys):
    from ldptext.ledger import Ledger

    monkeypatch.setenv("LEDGER_PASS", "correct horse")
    src, out, ledger = tmp_path / "in.csv", tmp_path / "out.csv", tmp_path / "b.ledger"
    src.write_text("text\n" + "w1 w2\n" * 300, encoding="utf-8")  # 4 per record: 1024 + 176
    args = ["--input", str(src), "--column", "text", "--output", str(out), "--ledger", str(ledger),
            "--ledger-passphrase-env", "LEDGER_PASS", "--budget", "1100"]
    assert sanitize(bundle, *args) == 6  # the second batch does not fit: nothing is output
    assert "release of epsilon" in capsys.readouterr().err
    assert not out.exists() and no_temporaries(tmp_path)
    assert Ledger(ledger, passphrase="correct horse").spent() == (1024.0, 0.0)


def test_existing_output_and_format_mismatches_are_usage_errors(bundle, tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    write_jsonl(src, records(3))
    (tmp_path / "out.jsonl").write_text("kept\n")
    cases = [
        (["--input", str(src), "--column", "text", "--output", str(tmp_path / "out.jsonl")], "exists"),
        (["--input", str(src), "--column", "text", "--output", str(tmp_path / "o.csv")], "input's format"),
        (["--input", str(src)], "needs --column"),
        (["--input", str(src), "--column", "text", "--json"], "--json"),
        (["--input", str(src), "--column", "text", "--seed", "1"], "--seed"),
        (["--column", "text", str(tmp_path / "in.txt")], "--column names a field"),
    ]
    for args, says in cases:
        assert sanitize(bundle, *args) == 2, args
        assert says in capsys.readouterr().err
    assert (tmp_path / "out.jsonl").read_text() == "kept\n"
    src_csv = tmp_path / "in.csv"
    src_csv.write_text("id,body\n1,w1\n")
    assert sanitize(bundle, "--input", str(src_csv), "--column", "text") == 2
    assert "no column named 'text'" in capsys.readouterr().err


def test_json_piped_as_lines_is_flagged(bundle):
    data = json.dumps({"text": f"w1 {MARKER}"}).encode() + b"\n"
    r = subprocess.run([sys.executable, "-m", "ldptext.cli", "sanitize", "--bundle", str(bundle)], input=data,
                       capture_output=True, timeout=120)
    assert r.returncode == 0
    assert b"--format jsonl --column FIELD" in r.stderr and MARKER.encode() not in r.stderr


def test_line_output_file_is_atomic(bundle, tmp_path, capsys):
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("w1 w2\nw3\n", encoding="utf-8")
    assert sanitize(bundle, str(src), "--output", str(out)) == 0
    assert len(out.read_text().splitlines()) == 2
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("fmt", ["lines", "jsonl", "csv"])
def test_progress_reports_for_line_jsonl_and_csv_input(bundle, tmp_path, fmt):
    texts = [f"w{i % 40} {MARKER}" for i in range(600)]
    if fmt == "lines":
        data = "".join(t + "\n" for t in texts)
        extra = []
    elif fmt == "jsonl":
        data = "".join(json.dumps({"text": t}) + "\n" for t in texts)
        extra = ["--column", "text"]
    else:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows([["text"], *([t] for t in texts)])
        data = buf.getvalue()
        extra = ["--column", "text"]
    src = tmp_path / f"in.{'txt' if fmt == 'lines' else fmt}"
    src.write_text(data, encoding="utf-8")
    env = dict(os.environ)
    for source, stdin in ((str(src), None), ("-", data.encode())):
        args = ["sanitize", "--bundle", str(bundle), "--progress", "--format", fmt, *extra, source]
        r = subprocess.run([sys.executable, "-m", "ldptext.cli", *args], input=stdin, capture_output=True,
                           env=env, timeout=120)
        assert r.returncode == 0, r.stderr
        err = r.stderr.decode()
        assert "ldptext: done: 600 " in err and "ldptext: input line " in err, err
        if source != "-":
            assert "% of the file)" in err
        assert MARKER not in err
