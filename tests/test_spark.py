"""``ldptext.spark`` on local Spark (``local[2,2]``: two worker threads, two attempts per task, Java
from the machine): the same distribution as the single-process path (chi-square on a fixed input),
rows keep their order, ids and partitions, partitions draw independent OS-keyed streams, a corrupted
bundle fails the job with the SDK's error, the retry policy (a task that fails once after sampling:
refused under ``on_retry="fail"``, marked under ``"resample"``), a DataFrame evaluated twice is
reported, speculation is refused, ``ldptext sanitize --engine spark`` keeps Parquet row order, and no
row text reaches Spark's logs or error messages.

One SparkSession for the module; its JVM's standard error (every Spark log line, the executors' too
in local mode) goes to a file that the last test reads."""
from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import sys
import types
from collections import Counter

import numpy as np
import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
    pytest.skip("Spark needs Java (17): none on PATH or JAVA_HOME", allow_module_level=True)

pytestmark = pytest.mark.slow  # a local Spark session (a JVM) per module

from pyspark.sql import functions as F  # noqa: E402

from conftest import build_tiny_bundle, random_word_embeddings  # noqa: E402
from ldptext.cli import main  # noqa: E402
from ldptext.errors import BundleError, BundleIntegrityError, LdptextError, ParameterError  # noqa: E402
from ldptext.santext import Sanitizer  # noqa: E402
from ldptext.spark import ColumnLayout, SparkSanitizer, local_session, sanitize_record_batch, sdk_error  # noqa: E402

MARKER = "SECRETMARKER7f3a"
P_MIN = 1e-4  # chi-square tests: OS randomness, so each fails by chance with probability 1e-4


@pytest.fixture(scope="module")
def spark_log(tmp_path_factory):
    return tmp_path_factory.mktemp("spark") / "jvm-stderr.log"


@pytest.fixture(scope="module")
def spark(spark_log):
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the test's own task functions
    mp = pytest.MonkeyPatch()
    mp.setenv("PYSPARK_PYTHON", sys.executable)
    saved = os.dup(2)
    log_fd = os.open(spark_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log_fd, 2)  # the JVM (and its Python workers) inherit this as their standard error
    try:
        session = local_session("local[2,2]", log_level="WARN", conf={
            "spark.sql.execution.arrow.maxRecordsPerBatch": "100",  # several batches per partition
            "spark.sql.shuffle.partitions": "2",
            "spark.sql.files.maxPartitionBytes": "8192",           # a small Parquet file: several tasks
            "spark.sql.files.openCostInBytes": "1024",
        })
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(log_fd)
    yield session
    session.stop()
    mp.undo()


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return build_tiny_bundle(tmp_path_factory.mktemp("spark-bundle") / "t.ldpb", n=40, mechanism="santext+",
                             epsilon=2.0)


@pytest.fixture(scope="module")
def vocab(bundle):
    with Sanitizer.load(bundle) as san:
        return {w: i for i, w in enumerate(san.vocab)}


def texts(spark, n, partitions, text):
    return spark.range(n, numPartitions=partitions).select("id", F.lit(text).alias("text"))


def test_rows_keep_order_ids_and_partitions_with_report_columns(spark, bundle):
    df = spark.range(600, numPartitions=3).select(
        "id", F.when(F.col("id") % 50 == 7, F.lit(None)).otherwise(
            F.concat(F.lit("w"), (F.col("id") % 40).cast("string"), F.lit(f" w3 {MARKER}"))).alias("text"),
        (F.col("id") * 2).alias("other"))
    before = [(r.id, r.other, r.pid) for r in df.withColumn("pid", F.spark_partition_id()).collect()]
    with SparkSanitizer(spark, bundle) as sp:
        job = sp.sanitize(df, "text")
        rows = job.dataframe.withColumn("pid", F.spark_partition_id()).collect()
        summary = job.summary()
    assert [(r.id, r.other, r.pid) for r in rows] == before  # same rows, same order, same partitions
    assert job.dataframe.columns == ["id", "text", "other", "ldp_mechanism", "ldp_epsilon", "ldp_tokens",
                                     "ldp_document_epsilon", "ldp_attempt"]
    for r in rows:
        if r.id % 50 == 7:
            assert r.text is None and r.ldp_tokens is None
            continue
        assert MARKER.lower() not in r.text.lower() and len(r.text.split()) == 3
        assert (r.ldp_mechanism, r.ldp_epsilon, r.ldp_tokens, r.ldp_document_epsilon, r.ldp_attempt) == (
            "santext+", 2.0, 3, 6.0, 0)
    assert (summary.rows, summary.null_rows, summary.tokens, summary.partitions) == (588, 12, 3 * 588, 3)
    assert summary.total_charge == pytest.approx(6.0 * 588) and summary.sampled_once


def chisquare_pvalue(observed: Counter, probs: np.ndarray) -> float:
    from scipy.stats import chisquare

    support = np.flatnonzero(probs > 0)
    assert set(observed) <= set(support.tolist())  # nothing outside the mechanism's support
    n = sum(observed.values())
    expected = probs[support] * n
    counts = np.array([observed.get(int(i), 0) for i in support], dtype=float)
    small = expected < 5  # pool sparse cells
    if small.any():
        expected = np.append(expected[~small], expected[small].sum())
        counts = np.append(counts[~small], counts[small].sum())
    return float(chisquare(counts, expected * counts.sum() / expected.sum()).pvalue)


def two_sample_pvalue(a: Counter, b: Counter) -> float:
    from scipy.stats import chi2_contingency

    keys = sorted(set(a) | set(b))
    table = np.array([[a.get(k, 0) for k in keys], [b.get(k, 0) for k in keys]], dtype=float)
    big = table.sum(axis=0) >= 10
    table = np.column_stack([table[:, big], table[:, ~big].sum(axis=1)]) if (~big).any() else table
    return float(chi2_contingency(table).pvalue)


def test_distribution_is_the_single_process_one(spark, bundle, vocab):
    n, text = 4000, "w5 w17"  # w5 non-sensitive (kept w.p. 1 - p), w17 sensitive
    with SparkSanitizer(spark, bundle) as sp:
        spark_rows = sp.sanitize(texts(spark, n, 4, text), "text").dataframe.select("text").collect()
    with Sanitizer.load(bundle) as san:
        probs = san.probabilities(san.tokenize(text))
        local, _ = sanitize_record_batch(san, pa.record_batch({"text": [text] * n}), ColumnLayout("text"))
    by_engine = {"spark": [r.text.split() for r in spark_rows],
                 "local": [t.split() for t in local.column(0).to_pylist()]}
    for position in range(2):
        counts = {engine: Counter(vocab[words[position]] for words in outs) for engine, outs in by_engine.items()}
        assert chisquare_pvalue(counts["spark"], probs[position]) > P_MIN
        assert chisquare_pvalue(counts["local"], probs[position]) > P_MIN
        assert two_sample_pvalue(counts["spark"], counts["local"]) > P_MIN


def test_partitions_and_runs_draw_independent_streams(spark, bundle):
    text = " ".join(f"w{i}" for i in range(20, 32))  # 12 sensitive tokens per row
    df = texts(spark, 400, 2, text)
    with SparkSanitizer(spark, bundle) as sp:
        first = sp.sanitize(df, "text").dataframe.withColumn("pid", F.spark_partition_id()).collect()
        second = sp.sanitize(df, "text").dataframe.collect()
    by_partition = [[r.text for r in first if r.pid == p] for p in (0, 1)]
    assert len(by_partition[0]) == len(by_partition[1]) == 200
    assert by_partition[0] != by_partition[1]  # a seed shared across partitions would repeat the stream
    assert [r.text for r in first] != [r.text for r in second]


def flipped_to_integrity_error(data: bytes) -> bytes:
    """``data`` with one bit flipped where the loader reports a hash mismatch (an array's bytes)."""
    for position in range(len(data) - 1, len(data) // 2, -13):
        damaged = bytearray(data)
        damaged[position] ^= 0x10
        try:
            Sanitizer.load(bytes(damaged)).close()
        except BundleIntegrityError:
            return bytes(damaged)
        except BundleError:
            continue
    raise AssertionError("no position gives an integrity error")


def test_a_corrupted_bundle_fails_the_job_with_the_sdk_error(spark, bundle, tmp_path):
    sp = SparkSanitizer(spark, bundle)
    # damaged after the driver verified it: in transit or on an executor's disk
    sp._shipped = dataclasses.replace(sp._shipped, bundle=flipped_to_integrity_error(bundle.read_bytes()))
    job = sp.sanitize(texts(spark, 100, 2, f"w1 {MARKER}"), "text")
    with pytest.raises(BundleIntegrityError) as info:
        job.write_parquet(tmp_path / "out")
    assert "sha256" in str(info.value) or "hash" in str(info.value)
    assert not list((tmp_path / "out").glob("part-*"))  # nothing committed
    assert MARKER not in str(info.value)
    sp.close()


def fail_once_after_first_batch(batches, leak_dir):
    """Downstream of the sanitizer: attempt 0 of partition 1 shows its first sanitized batch to a side
    effect (the file), then fails, so its task is retried."""
    from pyspark import TaskContext

    context = TaskContext.get()
    first_attempt_of_1 = context.partitionId() == 1 and context.attemptNumber() == 0
    for k, batch in enumerate(batches):
        if first_attempt_of_1:
            if k == 1:
                raise RuntimeError("injected executor failure")
            pq.write_table(pa.Table.from_batches([batch]), os.path.join(leak_dir, "leak.parquet"))
        yield batch


def flaky_job(spark, bundle, policy, leak_dir):
    df = spark.range(600, numPartitions=2).select(
        "id", F.concat(F.lit("w"), (F.col("id") % 40).cast("string"), F.lit(f" w7 w9 {MARKER}")).alias("text"))
    sp = SparkSanitizer(spark, bundle, on_retry=policy)
    job = sp.sanitize(df, "text")
    task = functools.partial(fail_once_after_first_batch, leak_dir=str(leak_dir))
    return sp, job, job.dataframe.mapInArrow(task, job.dataframe.schema)


def test_retry_policy_fail_refuses_a_second_sample(spark, bundle, tmp_path):
    sp, job, flaky = flaky_job(spark, bundle, "fail", tmp_path)
    with pytest.raises(Exception) as info:
        flaky.collect()
    error = sdk_error(info.value)
    assert isinstance(error, LdptextError)
    assert "partition 1: task attempt 1 refused" in str(error) and "sampled nothing" in str(error)
    assert (tmp_path / "leak.parquet").exists()  # the failed attempt had sampled (and shown) rows
    assert MARKER not in str(info.value)
    sp.close()


def test_retry_policy_resample_marks_the_rows_and_the_summary(spark, bundle, tmp_path):
    sp, job, flaky = flaky_job(spark, bundle, "resample", tmp_path)
    rows = flaky.collect()
    summary = job.summary()
    assert [r.id for r in rows] == list(range(600))
    assert {r.ldp_attempt for r in rows if r.id < 300} == {0} and {r.ldp_attempt for r in rows if r.id >= 300} == {1}
    assert summary.retried_partitions == (1,) and not summary.sampled_once
    assert summary.rows == 600  # a failed attempt's rows are not counted as output ...
    assert "RETRIED partitions [1]" in summary.summary()  # ... but the summary says they may be out
    leaked = pq.read_table(tmp_path / "leak.parquet").to_pylist()
    final = {r.id: r.text for r in rows}
    assert len(leaked) == 100 and all(r["ldp_attempt"] == 0 for r in leaked)
    assert sum(r["text"] != final[r["id"]] for r in leaked) > 10  # two independent samples of those rows
    sp.close()


def test_a_dataframe_evaluated_twice_is_reported(spark, bundle):
    with SparkSanitizer(spark, bundle) as sp:
        job = sp.sanitize(texts(spark, 200, 2, "w1 w2"), "text")
        assert job.dataframe.count() == 200
        assert job.summary().sampled_once
        job.dataframe.count()
        summary = job.summary()
    assert summary.resampled_partitions == (0, 1) and summary.rows == 400
    assert "RESAMPLED partitions [0, 1]" in summary.summary()


def test_speculation_and_bad_arguments_are_refused(spark, bundle):
    speculative = types.SimpleNamespace(sparkContext=types.SimpleNamespace(
        getConf=lambda: {"spark.speculation": "true"}))
    with pytest.raises(ParameterError, match="speculation"):
        SparkSanitizer(speculative, bundle).sanitize(None, "text")
    with pytest.raises(ParameterError, match="on_retry"):
        SparkSanitizer(spark, bundle, on_retry="sometimes")
    df = spark.range(3).select("id")
    with pytest.raises(ParameterError, match="no column"):
        SparkSanitizer(spark, bundle).sanitize(df, "text")
    with pytest.raises(ParameterError, match="not strings"):
        SparkSanitizer(spark, bundle).sanitize(df, "id")


def test_an_untrusted_bundle_is_refused_on_the_driver(spark, bundle):
    from ldptext.errors import UnknownKeyError

    with pytest.raises(UnknownKeyError):
        SparkSanitizer(spark, bundle, trusted_keys=[b"\x01" * 32])


def test_cli_spark_engine_keeps_parquet_row_order(spark, bundle, tmp_path, capsys):
    n = 3000
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": pa.array(range(n), pa.int64()),
                             "text": [f"w{i % 40} w{(3 * i) % 40} {MARKER}" for i in range(n)]}),
                   source, row_group_size=250)
    out = tmp_path / "out.parquet"
    assert main(["sanitize", "--bundle", str(bundle), "--input", str(source), "--column", "text",
                 "--output", str(out), "--engine", "spark", "--progress"]) == 0
    err = capsys.readouterr().err
    table = pq.read_table(out)
    assert table.column("id").to_pylist() == list(range(n))
    assert table.column_names == ["id", "text", "ldp_mechanism", "ldp_epsilon", "ldp_tokens",
                                  "ldp_document_epsilon", "ldp_attempt"]
    assert table.column("ldp_tokens").to_pylist() == [3] * n
    assert "every row sampled once" in err and "partitions" in err and MARKER not in err
    assert list(tmp_path.glob(".out.parquet*")) == []  # the temporary Spark output is gone
    assert not spark.sparkContext._jsc.sc().isStopped()  # an active session is used, not stopped


def test_the_comparison_mechanisms_run_on_spark_too(spark, tmp_path):
    """A CusText bundle (and so any token-level one) runs through the same verified loader as the CLI."""
    from ldptext.custext import CusTextSanitizer
    from ldptext_precompute.custext.build import build_custext_bundle
    path = build_custext_bundle(tmp_path / "c.ldpb", embeddings="unused", loaded=random_word_embeddings(53, 6, 3),
                                epsilon=2.5, k=5, device="cpu")
    with CusTextSanitizer.load(path) as ct:
        vocab = {w: i for i, w in enumerate(ct.vocab)}
        allowed = ct.probabilities(np.array([vocab["w1"], vocab["w2"]])) > 0
    df = spark.range(80, numPartitions=2).select("id", F.lit(f"w1 w2 {MARKER}").alias("text"))
    with SparkSanitizer(spark, path) as sp:
        job = sp.sanitize(df, "text")
        rows = job.dataframe.collect()
        summary = job.summary()
    assert [r.id for r in rows] == list(range(80))
    for r in rows:
        assert (r.ldp_mechanism, r.ldp_epsilon, r.ldp_tokens, r.ldp_document_epsilon) == ("custext", 2.5, 3, 7.5)
        first, second, _ = r.text.split()
        assert allowed[0, vocab[first]] and allowed[1, vocab[second]]  # each inside its input's output set
    assert summary.sampled_once and summary.rows == 80 and "custext at eps=2.5" in summary.summary()


def test_no_row_text_reaches_spark_logs(spark_log):
    log = spark_log.read_text(encoding="utf-8", errors="replace")
    assert "[ldptext:" in log  # the failures above were logged, with the SDK's messages
    assert MARKER not in log


def test_cli_spark_engine_refuses_or_skips_a_row_that_is_not_utf8(spark, bundle, tmp_path, capsys):
    texts = pa.array([b"w1 w2", b"w3 \xff\xfe " + MARKER.encode(), b"w4"], pa.binary()).view(pa.string())
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": pa.array(range(3), pa.int64()), "text": texts}), source)
    out = tmp_path / "out.parquet"
    args = ["sanitize", "--bundle", str(bundle), "--input", str(source), "--column", "text",
            "--output", str(out), "--engine", "spark"]
    # one ldptext line, no JVM stack (Spark retries the failed task, and the retry guard's refusal is
    # what reaches the driver, as for any refused row)
    assert main(args) != 0
    err = capsys.readouterr().err
    assert err.startswith("ldptext: error:") and err.count("\n") == 1 and "at org.apache" not in err
    assert "Traceback" not in err and MARKER not in err
    assert not out.exists()
    assert main(args + ["--skip-bad-lines"]) == 0
    assert pq.read_table(out).column("id").to_pylist() == [0, 2]
    assert MARKER not in capsys.readouterr().err
