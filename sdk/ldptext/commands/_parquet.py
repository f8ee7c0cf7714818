"""Parquet in and out for ``ldptext sanitize --input data.parquet --column text --output out.parquet``:
one process streaming by row group (``--engine local``, the default), or the same on a Spark session
(``--engine spark``, :mod:`ldptext.spark`).

**Output.** One Parquet file: the input's columns in order with the text column's values replaced
by their sanitized text, then the per-row report columns of :data:`ldptext.spark.REPORT_COLUMNS`; the
rows in input order (the Spark engine restores it from each row's input row index). The file's
key-value metadata holds ``ldptext.summary`` (the :class:`ldptext.spark.JobSummary` as JSON). The
output is written to a temporary file and renamed when complete: a failed run leaves no output. An
existing output is refused unless ``--overwrite``: a second sanitized copy of the same input is a
second release of every row.

**Local engine.** Reads one row group at a time (memory: one row group), sanitizes it in batches with
:func:`ldptext.spark.sanitize_record_batch` (the step every Spark task runs) and writes it as one
row group of the output.

**Spark engine.** Reads the input with ``spark.read.parquet`` and its ``_metadata.row_index``, runs a
:class:`ldptext.spark.SparkSanitizer` job that writes Spark's Parquet output to a temporary directory
beside ``--output``, then concatenates its part files, checking that row indices strictly increase,
into the one output file and removes the directory. The retry policy is ``--on-retry``.

**Bad rows.** A row the runtime refuses stops the run with its row index (0-based), never its text,
and nothing is written; with ``--skip-bad-lines`` it is left out of the output (no output row) and
counted on standard error. A null text stays null (nothing released).

**Progress** goes to standard error (``--progress``; default: when standard error is a terminal),
and one summary line at the end always does.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from ..errors import InputError, LdptextError, ParameterError
from ._io import check_output_path, progress_from_args

#: rows per Arrow batch and per ``sanitize_batch`` call
BATCH = 1024


def _pyarrow():
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pa, pq


def check_options(args: argparse.Namespace) -> tuple[Path, Path]:
    """Validate the Parquet options of ``ldptext sanitize``.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed options.

    Returns
    -------
    (Path, Path)
        The input and output paths.

    Raises
    ------
    ParameterError
        A missing or conflicting option, an output that exists (without ``--overwrite``) or is the
        input.
    """
    if args.column is None or args.output is None:
        raise ParameterError("Parquet mode needs both --column and --output")
    if args.input == "-":
        raise ParameterError("Parquet input must be a file (--input FILE), not standard input")
    if args.json:
        raise ParameterError("--json is for line output; Parquet output always carries the report columns")
    if args.seed is not None:
        raise ParameterError("--seed is not available for Parquet output (no seeded corpus releases)")
    if getattr(args, "ledger", None) is not None and args.engine == "spark":
        raise ParameterError("--ledger is one device's budget record and cannot be shared by Spark tasks; "
                             "use --engine local")
    source = Path(args.input)
    if not source.is_file():
        raise InputError(f"cannot open input file {source}: not a file")
    return source, check_output_path(args.output, args.input, overwrite=args.overwrite, what="Parquet file")


def run_parquet(args: argparse.Namespace) -> int:
    """``ldptext sanitize --column``: sanitize one column of a Parquet file into another.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``ldptext sanitize``.

    Returns
    -------
    int
        Exit status 0; errors are raised (no row text in any message).

    Notes
    -----
    The local engine runs the runtime of the verified bundle's mechanism (any token-level one:
    ``ldptext.runtime.load_token_runtime``); each non-null row is one release of its
    ``sanitize_batch``, with the guarantee its report states (docs/mechanisms.md). The Spark engine
    runs SanText(+) bundles. For SanText(+), every non-null row is one release of
    :meth:`ldptext.Sanitizer.sanitize_batch`: per token
    ε·d(x, x')-MLDP (SanText) or (V_S, V_P, ε, ε₀)-UMLDP with ε₀ = ln(1/p) (SanText+), for any two
    documents of the same length. Yue et al. 2021, *Differential Privacy for Text Analytics via
    Natural Text Sanitization* (Findings of ACL), as presented in Yue 2023, *Data Synthesis* (PhD
    thesis, Ohio State), §2.4, Theorems 1–2.
    """
    from ._pinning import expectation_from_args

    source, target = check_options(args)
    progress = progress_from_args(args)
    expect = expectation_from_args(args)
    if args.engine == "spark":
        summary = _run_spark(args, source, target, expect, progress)
    else:
        summary = _run_local(args, source, target, expect, progress)
    if summary.skipped_rows:
        shown = ", ".join(summary.skipped)
        more = f" (and {summary.skipped_rows - len(summary.skipped)} more)" if summary.skipped_rows > len(
            summary.skipped) else ""
        print(f"ldptext: warning: skipped {summary.skipped_rows} rows refused by the runtime (no output row for "
              f"them): {shown}{more}", file=sys.stderr)
    print(f"ldptext: {summary.summary()}", file=sys.stderr)
    return 0


def _open_input(source: Path) -> Any:
    pa, pq = _pyarrow()
    try:
        return pq.ParquetFile(source)
    except (OSError, pa.ArrowException) as e:
        raise InputError(f"cannot read {source} as Parquet: {type(e).__name__}: {e}") from None


def _run_local(args: argparse.Namespace, source: Path, target: Path, expect: Any,
               progress: Callable[..., None]) -> Any:
    import hashlib

    from ..bundle import canonical_json
    from ..fileio import atomic_path
    from ..spark import BatchStats, ColumnLayout, JobSummary, sanitize_record_batch
    from ._ledger import attach_ledger
    from ..runtime import load_token_runtime

    pa, pq = _pyarrow()
    reader = _open_input(source)
    layout = ColumnLayout(args.column)
    schema = layout.arrow_schema(reader.schema_arrow)
    n_rows, n_groups = reader.metadata.num_rows, reader.num_row_groups
    total = BatchStats()
    started = time.perf_counter()
    # any token-level mechanism: the runtime of the verified bundle's mechanism
    with load_token_runtime(args.bundle, trusted_keys=args.trusted_key, allow_unsigned=args.allow_unsigned,
                      expect=expect, allow_weak_privacy=getattr(args, "allow_weak_privacy", False)) as san:
        attach_ledger(san, args, san.ledger_unit)
        bundle_id = hashlib.sha256(canonical_json(san.manifest)).hexdigest()
        with atomic_path(target, mode=0o644) as tmp:
            writer = pq.ParquetWriter(tmp, schema)
            try:
                first = 0
                for group in range(n_groups):
                    try:
                        table = reader.read_row_group(group)
                    except (OSError, pa.ArrowException) as e:
                        raise InputError(f"cannot read row group {group} of {source}: {type(e).__name__}") from None
                    pieces = []
                    for batch in table.to_batches(max_chunksize=BATCH):
                        offset = first
                        out, stats = sanitize_record_batch(
                            san, batch, layout, chunk=BATCH, skip_bad_rows=args.skip_bad_lines,
                            row_name=lambda i, offset=offset: f"row index {offset + i}")
                        pieces.append(out)
                        total.add(stats)
                        first += batch.num_rows
                    del table
                    if pieces and sum(p.num_rows for p in pieces):
                        writer.write_table(pa.Table.from_batches(pieces, schema=schema),
                                           row_group_size=sum(p.num_rows for p in pieces))
                    elapsed = time.perf_counter() - started
                    progress(f"row group {group + 1}/{n_groups}, {first}/{n_rows} rows, "
                             f"{first / max(elapsed, 1e-9):.0f} rows/s", final=group + 1 == n_groups)
                summary = JobSummary(
                    engine="local", mechanism=san.mechanism, per_token_epsilon=float(san.per_token_epsilon),
                    ledger_unit=san.ledger_unit, bundle_id=bundle_id, rows=total.rows, null_rows=total.null_rows,
                    skipped_rows=total.skipped_rows, skipped=tuple(total.skipped), tokens=total.tokens,
                    total_charge=total.charge, partitions=n_groups, seconds=time.perf_counter() - started)
                writer.add_key_value_metadata({"ldptext.summary": json.dumps(summary.to_dict())})
            finally:
                writer.close()
    return summary


def _run_spark(args: argparse.Namespace, source: Path, target: Path, expect: Any,
               progress: Callable[..., None]) -> Any:
    from .. import spark as ldspark

    _open_input(source)  # a file that is not Parquet: the same error as the local engine, before Spark starts
    try:
        from pyspark.sql import SparkSession
        from pyspark.sql import functions as F
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError("--engine spark needs the 'spark' extra: pip install 'ldptext[spark]'",
                                  name=e.name) from None
    spark = SparkSession.getActiveSession()
    owned = spark is None
    if owned:
        progress(f"starting Spark ({args.spark_master}) ...")
        spark = ldspark.local_session(args.spark_master)
        # about three tasks per worker thread (Spark's default for a small file is one or two uneven ones)
        split = max(1 << 20, source.stat().st_size // (3 * max(1, spark.sparkContext.defaultParallelism)))
        spark.conf.set("spark.sql.files.maxPartitionBytes", str(split))
    workdir = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".spark", dir=target.parent))
    try:
        sanitizer = ldspark.SparkSanitizer(spark, args.bundle, trusted_keys=args.trusted_key,
                                           allow_unsigned=args.allow_unsigned, expect=expect,
                                           on_retry=args.on_retry, batch_size=BATCH)
        with sanitizer:
            df = spark.read.parquet(str(source.resolve()))
            df = df.select("*", F.col("_metadata.row_index").alias(ldspark.ROW_INDEX_COLUMN))
            job = sanitizer.sanitize(df, args.column, id_column=ldspark.ROW_INDEX_COLUMN,
                                     skip_bad_rows=args.skip_bad_lines)
            summary = job.write_parquet(workdir / "out", mode="overwrite",
                                        progress=lambda done, total: progress(f"spark: {done}/{total} tasks"))
        progress(f"spark: done in {summary.seconds:.1f} s; writing {target.name}", final=True)
        _concatenate(workdir / "out", target, summary)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if owned:
            spark.stop()
    return summary


def _concatenate(parts_dir: Path, target: Path, summary: Any) -> None:
    """Spark's part files, in input row order, as one Parquet file without the row index column."""
    from ..fileio import atomic_path
    from ..spark import ROW_INDEX_COLUMN

    pa, pq = _pyarrow()
    parts = sorted(p for p in parts_dir.glob("part-*.parquet"))
    opened = [pq.ParquetFile(p) for p in parts]
    firsts = []
    for f in opened:
        firsts.append(None if f.metadata.num_rows == 0 else
                      f.read_row_group(0, columns=[ROW_INDEX_COLUMN]).column(0)[0].as_py())
    order = sorted((i for i in range(len(opened)) if firsts[i] is not None), key=lambda i: firsts[i])
    if not opened:
        raise InputError("the Spark job wrote no output file")
    full = opened[0].schema_arrow
    keep = [n for n in full.names if n != ROW_INDEX_COLUMN]
    schema = pa.schema([full.field(n) for n in keep],
                       metadata={"ldptext.summary": json.dumps(summary.to_dict())})
    last = -1
    with atomic_path(target, mode=0o644) as tmp:
        with pq.ParquetWriter(tmp, schema) as writer:
            for i in order:
                for group in range(opened[i].num_row_groups):
                    table = opened[i].read_row_group(group)
                    rows = table.column(ROW_INDEX_COLUMN).to_numpy()
                    if rows.size and (rows[0] <= last or (rows.size > 1 and (rows[1:] <= rows[:-1]).any())):
                        raise LdptextError("Spark returned the rows out of input order; nothing was written")
                    if rows.size:
                        last = int(rows[-1])
                    writer.write_table(table.select(keep))
