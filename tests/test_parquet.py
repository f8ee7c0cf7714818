"""``ldptext sanitize --input data.parquet --column text --output out.parquet`` on one process: the
output's columns, order, row groups and report columns; nulls; refused rows named by row index (never
their text) with no output, or skipped; an existing output refused; and the per-batch step shared
with the Spark engine (``ldptext.spark.sanitize_record_batch``)."""
from __future__ import annotations

import json

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from conftest import build_tiny_bundle  # noqa: E402
from ldptext.cli import main  # noqa: E402
from ldptext.errors import InputError  # noqa: E402
from ldptext.spark import REPORT_COLUMNS, ColumnLayout, JobSummary, _withheld, sanitize_record_batch  # noqa: E402

MARKER = "SECRETMARKER7f3a"
ROWS = 530


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return build_tiny_bundle(tmp_path_factory.mktemp("parquet") / "t.ldpb", n=40, mechanism="santext+",
                             epsilon=2.0)


def text_of(i: int) -> str | None:
    return None if i % 53 == 0 else f"w{i % 40} w{(i * 7) % 40} {MARKER}{i}"


@pytest.fixture()
def source(tmp_path):
    table = pa.table({"id": pa.array(range(ROWS), pa.int64()),
                      "text": pa.array([text_of(i) for i in range(ROWS)], pa.string()),
                      "score": pa.array([i / 2 for i in range(ROWS)], pa.float64())})
    path = tmp_path / "in.parquet"
    pq.write_table(table, path, row_group_size=100)
    return path


def sanitize(bundle, source, out, *extra):
    return main(["sanitize", "--bundle", str(bundle), "--input", str(source), "--column", "text",
                 "--output", str(out), *extra])


def test_output_keeps_columns_order_and_row_groups_and_adds_report_columns(bundle, source, tmp_path, capsys):
    out = tmp_path / "out.parquet"
    assert sanitize(bundle, source, out, "--progress") == 0
    err = capsys.readouterr().err
    table = pq.read_table(out)
    assert table.column_names == ["id", "text", "score"] + [name for name, _ in REPORT_COLUMNS]
    assert table.column("id").to_pylist() == list(range(ROWS))
    assert table.column("score").to_pylist() == [i / 2 for i in range(ROWS)]
    assert pq.ParquetFile(out).num_row_groups == pq.ParquetFile(source).num_row_groups  # one out per in
    rows = table.to_pylist()
    for i, row in enumerate(rows):
        if text_of(i) is None:  # a null stays null; nothing was released for it
            assert row["text"] is None and row["ldp_tokens"] is None and row["ldp_epsilon"] is None
            continue
        assert MARKER.lower() not in row["text"].lower()   # an out-of-vocabulary word never passes through
        assert row["ldp_tokens"] == 3 and len(row["text"].split()) == 3
        assert row["ldp_epsilon"] == 2.0 and row["ldp_document_epsilon"] == 6.0
        assert row["ldp_mechanism"] == "santext+" and row["ldp_attempt"] == 0
    summary = json.loads(pq.ParquetFile(out).metadata.metadata[b"ldptext.summary"])
    sanitized = sum(text_of(i) is not None for i in range(ROWS))
    assert summary["rows"] == sanitized and summary["tokens"] == 3 * sanitized
    assert summary["null_rows"] == ROWS - sanitized and summary["total_charge"] == 6.0 * sanitized
    assert summary["engine"] == "local" and summary["sampled_once"] is True
    assert "row group 6/6" in err and f"{sanitized} rows sanitized" in err
    assert MARKER not in err


def test_an_existing_output_is_refused_unless_overwrite(bundle, source, tmp_path, capsys):
    out = tmp_path / "out.parquet"
    out.write_bytes(b"earlier release")
    assert sanitize(bundle, source, out) == 2
    assert "releases every row" in capsys.readouterr().err
    assert out.read_bytes() == b"earlier release"
    assert sanitize(bundle, source, out, "--overwrite") == 0
    assert pq.read_table(out).num_rows == ROWS
    assert sanitize(bundle, source, source, "--overwrite") == 2  # never over its own input


@pytest.mark.parametrize("extra, status", [(["--json"], 2), (["--seed", "3"], 2), (["--column", "score"], 2),
                                           (["--column", "nope"], 2)])
def test_bad_parquet_options_are_usage_errors(bundle, source, tmp_path, extra, status, capsys):
    args = ["sanitize", "--bundle", str(bundle), "--input", str(source), "--output", str(tmp_path / "o.parquet")]
    args += extra if "--column" in extra else ["--column", "text", *extra]
    assert main(args) == status
    assert not (tmp_path / "o.parquet").exists()


def test_column_without_output_and_stdin_are_refused(bundle, source, capsys):
    assert main(["sanitize", "--bundle", str(bundle), "--input", str(source), "--column", "text"]) == 2
    assert main(["sanitize", "--bundle", str(bundle), "--engine", "spark"]) == 2


def test_a_file_that_is_not_parquet_is_an_input_error(bundle, tmp_path, capsys):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(MARKER.encode() * 10)
    assert sanitize(bundle, bad, tmp_path / "o.parquet") == 3
    assert MARKER not in capsys.readouterr().err
    assert not (tmp_path / "o.parquet").exists()


def test_a_refused_row_stops_the_run_by_row_index_with_no_output(bundle, tmp_path, refusing, capsys):
    texts = [f"w{i % 40} {MARKER}" for i in range(300)]
    texts[217] = f"REFUSE {MARKER}"
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": texts}), src, row_group_size=64)
    out = tmp_path / "out.parquet"
    assert sanitize(bundle, src, out) == 3
    err = capsys.readouterr().err
    assert "row index 217" in err and MARKER not in err and "REFUSE" not in err
    assert not out.exists() and list(tmp_path.glob(".out.parquet*")) == []  # no output, no temporary

    assert sanitize(bundle, src, out, "--skip-bad-lines") == 0
    err = capsys.readouterr().err
    assert "skipped 1 rows" in err and "row index 217" in err and MARKER not in err
    table = pq.read_table(out)
    assert table.num_rows == 299 and table.column("ldp_tokens").to_pylist() == [2] * 299


def test_record_batch_step_layouts_and_skips():
    # a fake runtime is enough for the layout; sampling itself is tested with real bundles elsewhere
    class Report:
        mechanism, per_token_epsilon = "santext", 1.5

        def __init__(self, n):
            self.n_tokens, self.document_epsilon = n, 1.5 * n

    class Result:
        def __init__(self, text):
            self.text, self.report = text.upper(), Report(len(text.split()))

    class Fake:
        def sanitize_batch(self, texts):
            texts = list(texts)
            for k, t in enumerate(texts):
                if t == "bad":
                    raise InputError(f"document {k} could not be tokenized", document=k)
            return [Result(t) for t in texts]

    batch = pa.record_batch({"id": [1, 2, 3, 4], "text": ["a b", None, "bad", "c"]})
    layout = ColumnLayout("text", "clean", keep_input=False)
    out, stats = sanitize_record_batch(Fake(), batch, layout, skip_bad_rows=True, chunk=2,
                                       row_name=lambda i: f"row index {10 + i}")
    assert out.schema.names == ["id", "clean"] + [n for n, _ in REPORT_COLUMNS]   # private input dropped
    assert out.column(0).to_pylist() == [1, 2, 4] and out.column(1).to_pylist() == ["A B", None, "C"]
    assert (stats.rows, stats.null_rows, stats.skipped_rows, stats.skipped, stats.tokens) == (2, 1, 1,
                                                                                             ["row index 12"], 3)
    kept = ColumnLayout("text", "clean", keep_input=True).names(["id", "text"])
    assert kept == ["id", "text", "clean"] + [n for n, _ in REPORT_COLUMNS]
    with pytest.raises(InputError, match="^row index 12 could not be tokenized$"):
        sanitize_record_batch(Fake(), batch, layout, row_name=lambda i: f"row index {10 + i}")
    with pytest.raises(Exception, match="already exist"):
        ColumnLayout("text", "id").names(["id", "text"])


def test_non_sdk_errors_inside_a_task_keep_no_row_text():
    try:
        raise ValueError(f"could not convert {MARKER}")
    except ValueError as e:
        withheld = _withheld(e)
    assert MARKER not in str(withheld) and "ValueError" in str(withheld) and "test_parquet.py" in str(withheld)


def test_summary_line_states_a_second_sample():
    base = dict(engine="spark", mechanism="santext", per_token_epsilon=2.0, ledger_unit="metric:x", bundle_id="0",
                rows=10, null_rows=0, skipped_rows=0, skipped=(), tokens=30, total_charge=60.0, partitions=2)
    assert JobSummary(**base).sampled_once and "every row sampled once" in JobSummary(**base).summary()
    retried = JobSummary(**base, retried_partitions=(1,))
    assert not retried.sampled_once and "RETRIED partitions [1]" in retried.summary()
    assert "RESAMPLED partitions [0, 1]" in JobSummary(**base, resampled_partitions=(0, 1)).summary()
    assert np.isclose(json.loads(json.dumps(retried.to_dict()))["total_charge"], 60.0)


def _invalid_utf8_source(tmp_path):
    texts = pa.array([b"w1 w2", b"w3 \xff\xfe " + MARKER.encode(), None, b"w4"], pa.binary()).view(pa.string())
    path = tmp_path / "bad_utf8.parquet"
    pq.write_table(pa.table({"id": pa.array(range(4), pa.int64()), "text": texts}), path)
    return path


def test_a_row_that_is_not_utf8_is_refused_by_row_index_or_skipped(bundle, tmp_path, capsys):
    source, out = _invalid_utf8_source(tmp_path), tmp_path / "out.parquet"
    assert sanitize(bundle, source, out) == 3  # input data, not a traceback (exit 1)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "row index 1" in err and "UTF-8" in err and MARKER not in err
    assert not out.exists() and list(tmp_path.glob("*.tmp")) == [] and list(tmp_path.glob(".out*")) == []
    assert sanitize(bundle, source, out, "--skip-bad-lines") == 0
    err = capsys.readouterr().err
    assert "skipped 1 rows" in err and "row index 1" in err and MARKER not in err
    table = pq.read_table(out)
    assert table.column("id").to_pylist() == [0, 2, 3]           # no output row for the bad one
    assert table.column("text").to_pylist()[1] is None            # a null stays null


def test_sigterm_while_writing_removes_the_temporary_output(bundle, source, tmp_path):
    import signal
    import subprocess
    import sys
    out = tmp_path / "out.parquet"
    code = ("import os, signal, sys\n"
            "from ldptext import spark\n"
            "step, calls = spark.sanitize_record_batch, []\n"
            "def slow(*a, **k):\n"
            "    calls.append(1)\n"
            "    if len(calls) == 3:\n"  # mid-file: two batches written to the temporary output
            "        os.kill(os.getpid(), signal.SIGTERM)\n"
            "    return step(*a, **k)\n"
            "spark.sanitize_record_batch = slow\n"
            "from ldptext.cli import main\n"
            f"sys.exit(main(['sanitize', '--bundle', {str(bundle)!r}, '--input', {str(source)!r}, "
            f"'--column', 'text', '--output', {str(out)!r}]))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 128 + signal.SIGTERM, r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]
