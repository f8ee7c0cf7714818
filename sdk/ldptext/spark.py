"""Corpus scale: sanitize a DataFrame column on Apache Spark with the same token-level runtime, and
the per-batch step that the single-process Parquet path (``ldptext sanitize --column``) shares.

Install with ``pip install 'ldptext[spark]'`` (pyspark ≥ 4, pandas, pyarrow; Java 17). pyspark is
imported only when a Spark function is called, so :func:`sanitize_record_batch` and
:class:`JobSummary` work with the ``parquet`` extra alone.

**Guarantee.** Each output row is exactly what the bundle's runtime (:meth:`ldptext.Sanitizer.sanitize_batch`
for SanText(+); TEM, CusText(+), CMP and Mahalanobis bundles run their own runtime, with the guarantee
docs/mechanisms.md states, through :func:`ldptext.runtime.load_token_runtime`) returns for that row's
text; for SanText(+): per token ε·d(x, x')-MLDP (SanText; worst case ε·D_max-LDP) or (V_S, V_P, ε, ε₀)-UMLDP
with ε₀ = ln(1/p) (SanText+: non-sensitive words in the clear with probability 1 − p); neighbouring
relation: two documents of the same length (the length is not hidden), ε·Σᵢ d(xᵢ, x'ᵢ) apart. Yue et
al. 2021, *Differential Privacy for Text Analytics via Natural Text Sanitization* (Findings of ACL), as
presented in Yue 2023, *Data Synthesis: Boosting Utility and Privacy in NLP* (PhD thesis, Ohio State),
§2.4, Theorems 1–2. This holds **per released sample**: a row whose text is sampled twice and whose two
outputs are both seen costs twice (see "Retries" below).

**What is shipped.** :class:`SparkSanitizer` reads the bundle once on the driver, verifies it there
(signature, trusted signer, every array hash, the tables) and broadcasts its bytes once, with the raw
public keys the driver trusts and a pin on the verified bundle id. Every task verifies the broadcast
bytes again with :func:`ldptext.runtime.load_token_runtime` (signature, the driver's trusted keys, hashes, tables,
the pinned id and the caller's ``expect=``) before it reads a row: a bundle damaged in transit or on
an executor fails the job with the SDK's own error (:class:`ldptext.errors.BundleIntegrityError`, ...).

**Randomness.** Each task loads its own runtime with no seed: its ChaCha20 stream
is keyed from the executor's ``os.urandom`` and lives only in that task; no seed is ever shipped or
shared between partitions, and there is deliberately no ``seed=`` here.

**Retries (the policy).** Spark keeps the output of one task attempt only, but a failed attempt may
already have sampled part of its partition, and that output may have been seen (a side effect in a
later step, a sink outside Spark's commit protocol). A retry that samples the same rows again
releases a second, independent sample of each: twice the privacy cost if both are visible.

* Speculative execution (``spark.speculation=true``) runs two attempts of a task at once, by design:
  :meth:`SparkSanitizer.sanitize` refuses such a session (:class:`ldptext.errors.ParameterError`).
* ``on_retry="fail"`` (the default): a task attempt after the first verifies the bundle (so that a
  damaged bundle fails every attempt with its own error) and then refuses before it reads any row,
  so the job fails instead of sampling a partition twice. A failed job leaves
  nothing committed through Spark's writers; running it again is a new release of every row.
* ``on_retry="resample"``: a retried attempt samples its partition afresh, and says so: every row it
  outputs carries its attempt number in ``ldp_attempt`` (> 0), and :meth:`SparkSanitizeJob.summary`
  lists the partition in ``retried_partitions``.
* A partition sampled by more than one *successful* task (the same DataFrame evaluated by two
  actions, a stage recomputed after a lost executor, where Spark restarts the attempt numbers) is
  listed in ``resampled_partitions``: write the result once (:meth:`SparkSanitizeJob.write_parquet`)
  and read the written copy, rather than running several actions on the returned DataFrame.

We chose fresh OS randomness per attempt over randomness derived from a per-job secret key (so that a
retry would reproduce the same sample): a derived stream needs a key that is shipped to every executor
(broadcast blocks, spill files, driver memory), and whoever obtains that key and the output can replay
every row's random choices and narrow each token to the inputs consistent with its output, for every
row of the job at once. It would also need the SDK's seeded mode, whose reports say "not private".
Refusing or flagging retries costs availability, never privacy.

**Per-row report columns** (:data:`REPORT_COLUMNS`): ``ldp_mechanism``, ``ldp_epsilon`` (the per-token
metric ε as the report gives it), ``ldp_tokens`` (n, not hidden), ``ldp_document_epsilon`` (n·ε, the
row's charge in the bundle's ledger unit), ``ldp_attempt``. A null text stays null, with null report
columns (nothing was released). No ledger is charged: a :class:`ldptext.Ledger` is one user's budget
on one device; ``ldp_document_epsilon`` is what a per-user account would be charged for the row.

**Logs.** No row text appears in a message: SDK errors name a row (partition and position, or its id
column), never its text; any other exception inside the sanitizing step is replaced by one that gives
only its type and code location, because Spark logs and prints task failures. Every other column is
copied as it is: sanitize or drop every column that holds private text.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import sys
import threading
import time
import warnings
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping

import pyarrow as pa

from . import errors as _errors
from . import registry as _registry
from .bundle import canonical_json
from .errors import InputError, LdptextError, ParameterError
from .runtime import BundleExpectation

if TYPE_CHECKING:  # pragma: no cover
    from .santext import Sanitizer

__all__ = ["SparkSanitizer", "SparkSanitizeJob", "JobSummary", "ColumnLayout", "BatchStats",
           "sanitize_record_batch", "local_session", "sdk_error", "RETRY_POLICIES", "REPORT_COLUMNS"]

#: what a retried task attempt does: refuse (the job fails) or sample again and mark its rows
RETRY_POLICIES = ("fail", "resample")
#: the per-row report columns appended to the output, in order, and their Arrow types (the
#: mechanism column takes the text column's string type)
REPORT_COLUMNS = (
    ("ldp_mechanism", None),
    ("ldp_epsilon", pa.float64()),
    ("ldp_tokens", pa.int32()),
    ("ldp_document_epsilon", pa.float64()),
    ("ldp_attempt", pa.int32()),
)
# skipped rows named per partition / in a summary (the count is always complete)
_LISTED = 20
# the runtime names the failing document of a batch by its index: "document 3 ..."
# SDK errors raised inside a task travel to the driver inside Spark's error text with this tag
_TAG = re.compile(r"\[ldptext:(\w+)\] ([^\n]*)")
_STRING_TYPES = (pa.string(), pa.large_string())


# ---- the per-batch step, shared by both engines ----------------------------------------------

@dataclass(frozen=True)
class ColumnLayout:
    """Where the sanitized text goes in the output.

    Parameters
    ----------
    column : str
        The text column to sanitize.
    output_column : str or None
        Where the sanitized text goes; ``None`` (default) or ``column`` replaces the text in place.
    keep_input : bool
        With another ``output_column``: keep the private input column too (default: drop it).
    """

    column: str
    output_column: str | None = None
    keep_input: bool = False

    @property
    def target(self) -> str:
        """The name of the sanitized column."""
        return self.output_column or self.column

    def names(self, input_names: list[str]) -> list[str]:
        """The output column names for input columns ``input_names``.

        Raises
        ------
        ParameterError
            ``column`` is missing, or an output name collides with an input column.
        """
        if self.column not in input_names:
            raise ParameterError(f"no column named {self.column!r}")
        out: list[str] = []
        for name in input_names:
            if name != self.column or self.target == self.column or self.keep_input:
                out.append(name)
        if self.target != self.column:
            out.append(self.target)
        for name, _ in REPORT_COLUMNS:
            out.append(name)
        clashes = sorted({n for n in out if out.count(n) > 1})
        if clashes:
            raise ParameterError(f"output column name(s) {clashes} already exist in the input")
        return out

    def arrow_schema(self, schema: pa.Schema) -> pa.Schema:
        """The output Arrow schema for an input ``schema`` (metadata kept).

        Raises
        ------
        ParameterError
            The column is missing or not a string column, or a name collides.
        """
        names = self.names(schema.names)
        text_type = schema.field(self.column).type
        if text_type not in _STRING_TYPES:
            raise ParameterError(f"column {self.column!r} holds {text_type}, not strings")
        types = {f.name: f.type for f in schema}
        types[self.target] = text_type
        types.update((name, kind or text_type) for name, kind in REPORT_COLUMNS)
        return pa.schema([pa.field(n, types[n]) for n in names], metadata=schema.metadata)


@dataclass
class BatchStats:
    """What one sanitized batch (or partition, or file) released.

    Attributes
    ----------
    rows : int
        Rows whose text was sanitized (each one release).
    null_rows : int
        Rows whose text is null (passed through as null; nothing released).
    skipped_rows : int
        Rows the runtime refused, left out of the output (``skip_bad_rows``).
    skipped : list of str
        The first skipped rows' names (a position or id, never text).
    tokens : int
        Tokens over the sanitized rows.
    charge : float
        Σ of the rows' ``document_epsilon`` (n·ε each), in the bundle's ledger unit.
    """

    rows: int = 0
    null_rows: int = 0
    skipped_rows: int = 0
    skipped: list[str] = field(default_factory=list)
    tokens: int = 0
    charge: float = 0.0

    def add(self, other: "BatchStats") -> None:
        """Accumulate ``other`` into this one."""
        self.rows += other.rows
        self.null_rows += other.null_rows
        self.skipped_rows += other.skipped_rows
        self.skipped.extend(other.skipped[:max(0, _LISTED - len(self.skipped))])
        self.tokens += other.tokens
        self.charge += other.charge


def _name_row(error: InputError, rows: list[int], row_name: Callable[[int], str]) -> InputError:
    """The runtime's "document i ..." error, restated with the row's name (never its text)."""
    message, i = str(error), error.document
    if i is not None and 0 <= i < len(rows):
        return InputError(row_name(rows[i]) + message.removeprefix(f"document {i}"))
    return InputError(f"{row_name(rows[0])} .. {row_name(rows[-1])}: {message}")


def _decode_texts(array: Any) -> tuple[list[str | None], list[int]]:
    """The column's values as text (``None`` for nulls) and the rows that are not valid UTF-8.

    A Parquet string column may hold bytes that are not UTF-8 (nothing checks them when the file is
    written); Arrow's ``to_pylist`` then raises a ``UnicodeDecodeError`` for the whole batch. Decoding
    row by row lets a bad row be refused by its index (or skipped) like any other refused row."""
    binary = pa.large_binary() if pa.types.is_large_string(array.type) else pa.binary()
    texts: list[str | None] = []
    bad: list[int] = []
    for i, raw in enumerate(array.view(binary).to_pylist()):
        if raw is None:
            texts.append(None)
            continue
        try:
            texts.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            texts.append(None)
            bad.append(i)
    return texts, bad


def sanitize_record_batch(san: "Sanitizer", batch: pa.RecordBatch, layout: ColumnLayout, *,
                          attempt: int = 0, chunk: int = 1024, skip_bad_rows: bool = False,
                          row_name: Callable[[int], str] = lambda i: f"row {i}",
                          ) -> tuple[pa.RecordBatch, BatchStats]:
    """Sanitize one column of an Arrow record batch: the step both engines run.

    Parameters
    ----------
    san : Sanitizer
        An open, private (unseeded) :class:`ldptext.Sanitizer`.
    batch : pyarrow.RecordBatch
        Input rows; ``layout.column`` must be a string column.
    layout : ColumnLayout
        Where the sanitized text goes.
    attempt : int
        The task attempt number written to ``ldp_attempt`` (0 outside Spark).
    chunk : int
        Documents per :meth:`~ldptext.Sanitizer.sanitize_batch` call.
    skip_bad_rows : bool
        Leave rows the runtime refuses out of the output (counted and named in the stats) instead
        of raising.
    row_name : callable
        Names a row from its index in ``batch`` (``"row index 17"``), for errors and skip lists.

    Returns
    -------
    (pyarrow.RecordBatch, BatchStats)
        The rows in input order with the layout's columns and :data:`REPORT_COLUMNS`; what was
        released.

    Raises
    ------
    InputError
        Without ``skip_bad_rows``, a row the runtime refuses or whose text is not valid UTF-8 (with
        it, such a row is skipped like a refused one); the message names the row, never its
        text. Nothing of that chunk was released (the runtime returns nothing for a refused batch).

    Notes
    -----
    Every non-null row is one release of :meth:`ldptext.Sanitizer.sanitize_batch`, with its guarantee
    (the module docstring).
    """
    text_array = batch.column(batch.schema.get_field_index(layout.column))
    texts, not_utf8 = _decode_texts(text_array)
    if not_utf8 and not skip_bad_rows:  # named by row, never echoed
        raise InputError(f"{row_name(not_utf8[0])}: the text is not valid UTF-8")
    present = [i for i, t in enumerate(texts) if t is not None]
    results: dict[int, Any] = {}
    refused: list[int] = list(not_utf8)  # skipped: no output row, counted with the refused rows
    for start in range(0, len(present), chunk):
        rows = present[start:start + chunk]
        try:
            results.update(zip(rows, san.sanitize_batch([texts[i] for i in rows])))
            continue
        except InputError as e:
            if not skip_bad_rows:
                raise _name_row(e, rows, row_name) from None
        for i in rows:  # nothing of the chunk was released: find the refused rows one at a time
            try:
                results[i] = san.sanitize_batch([texts[i]])[0]
            except InputError:
                refused.append(i)
    del texts
    refused.sort()
    stats = BatchStats(null_rows=batch.num_rows - len(present) - len(not_utf8), skipped_rows=len(refused),
                       skipped=[row_name(i) for i in refused[:_LISTED]])
    if refused:
        skip = set(refused)
        keep = [i not in skip for i in range(batch.num_rows)]
        batch = batch.filter(pa.array(keep, pa.bool_()))
        kept_rows = [i for i in range(len(keep)) if keep[i]]
    else:
        kept_rows = list(range(batch.num_rows))
    out_text, mechanism, epsilon, tokens, charge = [], [], [], [], []
    for i in kept_rows:
        r = results.get(i)
        if r is None:
            for column in (out_text, mechanism, epsilon, tokens, charge):
                column.append(None)
            continue
        report = r.report
        out_text.append(r.text)
        mechanism.append(report.mechanism)
        epsilon.append(report.per_token_epsilon)
        tokens.append(report.n_tokens)
        charge.append(report.document_epsilon)
        stats.rows += 1
        stats.tokens += report.n_tokens
        stats.charge += report.document_epsilon
    text_type = text_array.type
    computed = {
        layout.target: pa.array(out_text, text_type),
        "ldp_mechanism": pa.array(mechanism, text_type),
        "ldp_epsilon": pa.array(epsilon, pa.float64()),
        "ldp_tokens": pa.array(tokens, pa.int32()),
        "ldp_document_epsilon": pa.array(charge, pa.float64()),
        "ldp_attempt": pa.array([attempt] * len(kept_rows), pa.int32()),
    }
    names = layout.names(batch.schema.names)
    columns = [computed[n] if n in computed else batch.column(batch.schema.get_field_index(n)) for n in names]
    return pa.RecordBatch.from_arrays(columns, names=names), stats


# ---- the job-level summary ------------------------------------------------------------------

@dataclass(frozen=True)
class JobSummary:
    """What a whole sanitizing job released, for both engines.

    Attributes
    ----------
    engine : str
        ``"local"`` (one process, :mod:`ldptext.commands._parquet`) or ``"spark"``.
    mechanism : str
        ``"santext"`` or ``"santext+"``.
    per_token_epsilon : float
        The metric ε each token is charged.
    ledger_unit : str
        ``"metric:<id>"``, the unit of ``total_charge``.
    bundle_id : str
        The verified bundle's id.
    rows, null_rows, skipped_rows : int
        Rows sanitized by successful tasks (every evaluation counted), null rows, refused rows left
        out (``skip_bad_rows``).
    skipped : tuple of str
        The first skipped rows' names.
    tokens : int
        Tokens over the sanitized rows.
    total_charge : float
        Σ n·ε over the sanitized rows (what per-user ledgers would be charged in all).
    partitions : int
        Partitions (Spark) or row groups (local) processed.
    retried_partitions : tuple of int
        Partitions whose output comes from a task attempt after a failed one (``on_retry="resample"``):
        the failed attempt may have sampled some of their rows too.
    resampled_partitions : tuple of int
        Partitions sampled by more than one successful task: their rows were released more than once
        if more than one output was kept or seen.
    seconds : float
        Wall time of the job (0 when unknown).
    """

    engine: str
    mechanism: str
    per_token_epsilon: float
    ledger_unit: str
    bundle_id: str
    rows: int
    null_rows: int
    skipped_rows: int
    skipped: tuple[str, ...]
    tokens: int
    total_charge: float
    partitions: int
    retried_partitions: tuple[int, ...] = ()
    resampled_partitions: tuple[int, ...] = ()
    seconds: float = 0.0

    @property
    def sampled_once(self) -> bool:
        """True when every partition was sampled by exactly one attempt (no retry, no re-evaluation)."""
        return not self.retried_partitions and not self.resampled_partitions

    def to_dict(self) -> dict:
        """The summary as a JSON-ready dict (one entry per field, plus ``sampled_once``)."""
        d = asdict(self)
        d["sampled_once"] = self.sampled_once
        return d

    def summary(self) -> str:
        """One line: rows, tokens, the guarantee's ε, the total charge, and any second sample."""
        # a metric bound's eps is per unit of distance; CusText's is eps-LDP within an output set
        kind = "metric eps" if _registry.get(self.mechanism).statement().metric is not None else "eps"
        parts = [f"{self.rows} rows sanitized ({self.tokens} tokens; {self.null_rows} null, "
                 f"{self.skipped_rows} skipped) with {self.mechanism} at {kind}={self.per_token_epsilon:g} "
                 f"per token; total charge {self.total_charge:.6g} ({self.ledger_unit}, n*eps per row); "
                 f"{self.partitions} {'partitions' if self.engine == 'spark' else 'row groups'}"]
        if self.seconds > 0:
            parts.append(f"{self.seconds:.1f} s, {self.rows / self.seconds:.0f} rows/s, "
                         f"{self.tokens / self.seconds:.0f} tokens/s")
        if self.sampled_once:
            parts.append("every row sampled once")
        if self.retried_partitions:
            parts.append(f"RETRIED partitions {list(self.retried_partitions)}: a failed attempt may also "
                         f"have sampled their rows (ldp_attempt > 0); a row whose two samples were both "
                         f"seen was released twice (2x its charge)")
        if self.resampled_partitions:
            parts.append(f"RESAMPLED partitions {list(self.resampled_partitions)}: sampled by more than one "
                         f"successful task (the DataFrame evaluated more than once, or a stage recomputed); "
                         f"their rows were released once per sample kept or seen")
        return "; ".join(parts)


# ---- Spark ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Shipped:
    """What one broadcast carries to the executors, once per job."""

    bundle: bytes
    trusted_keys: tuple[bytes, ...]   # raw Ed25519 public keys the driver trusts
    allow_unsigned: bool
    expect: dict                       # the caller's pins plus the driver-verified bundle id


@dataclass(frozen=True)
class _Plan:
    """The task's instructions (small; pickled with the function)."""

    layout: ColumnLayout
    on_retry: str
    chunk: int
    skip_bad_rows: bool
    id_index: int | None
    id_name: str | None


def _partition_log_param():
    """The accumulator type: {partition: [record, ...]} over successful tasks."""
    from pyspark.accumulators import AccumulatorParam

    class PartitionLog(AccumulatorParam):
        def zero(self, value):
            return {}

        def addInPlace(self, a, b):
            for partition, records in b.items():
                a.setdefault(partition, []).extend(records)
            return a

    return PartitionLog()


def _tagged(error: LdptextError) -> LdptextError:
    """``error`` with its class name in a tag the driver finds in Spark's error text."""
    kind = type(error).__name__ if isinstance(getattr(_errors, type(error).__name__, None), type) else "LdptextError"
    return type(error)(f"[ldptext:{kind}] {error}")


def _withheld(error: BaseException) -> LdptextError:
    """A stand-in for a non-SDK exception whose message might quote row data: type and location only."""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f" at {Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}" if tb is not None else ""
    return LdptextError(f"[ldptext:LdptextError] sanitizing failed with {type(error).__name__}{where} "
                        f"(its message is withheld: it may quote row data)")


def _row_namer(partition: int, offset: int, ids: list | None, id_name: str | None) -> Callable[[int], str]:
    if ids is not None:
        if id_name == ROW_INDEX_COLUMN:
            return lambda i: f"row index {ids[i]}"
        return lambda i: f"the row with {id_name} = {ids[i]}"
    return lambda i: f"row {offset + i} of partition {partition}"


def _sanitize_partition(batches: Iterator[pa.RecordBatch], *, shipped: Any, plan: _Plan,
                        log: Any) -> Iterator[pa.RecordBatch]:
    """One Spark task: check the attempt, verify the broadcast bundle, sanitize every batch."""
    from pyspark import TaskContext

    from .runtime import load_token_runtime

    context = TaskContext.get()
    partition, attempt = context.partitionId(), context.attemptNumber()
    payload: _Shipped = shipped.value
    try:  # verifying samples nothing: a bundle that fails does so on every attempt, with its own error
        san = load_token_runtime(payload.bundle, trusted_keys=list(payload.trusted_keys),
                                 allow_unsigned=payload.allow_unsigned, expect=payload.expect)
    except LdptextError as e:
        raise _tagged(e) from None
    if attempt > 0 and plan.on_retry == "fail":
        san.close()
        raise _tagged(LdptextError(
            f"partition {partition}: task attempt {attempt} refused (on_retry='fail'): an earlier attempt "
            f"may have sampled some of its rows, and sampling them again would release a second sample; "
            f"this attempt sampled nothing. on_retry='resample' allows it and marks the rows"))
    stats = BatchStats()
    offset = 0
    try:
        with san:
            for batch in batches:
                ids = batch.column(plan.id_index).to_pylist() if plan.id_index is not None else None
                namer = _row_namer(partition, offset, ids, plan.id_name)
                try:
                    out, batch_stats = sanitize_record_batch(san, batch, plan.layout, attempt=attempt,
                                                             chunk=plan.chunk, skip_bad_rows=plan.skip_bad_rows,
                                                             row_name=namer)
                except LdptextError as e:
                    raise _tagged(e) from None
                except Exception as e:  # noqa: BLE001 - replaced by a message without row data
                    raise _withheld(e) from None
                offset += batch.num_rows
                stats.add(batch_stats)
                yield out
    finally:
        # Spark applies a task's accumulator updates only when the task succeeds
        log.add({partition: [(attempt, context.taskAttemptId(), stats.rows, stats.null_rows,
                              stats.skipped_rows, tuple(stats.skipped), stats.tokens, stats.charge)]})


#: the input row index column ``ldptext sanitize --engine spark`` adds (Parquet ``_metadata.row_index``)
ROW_INDEX_COLUMN = "_ldptext_row_index"


def sdk_error(error: BaseException) -> LdptextError | None:
    """The SDK error a failed Spark job carries, rebuilt on the driver (or ``None``).

    Parameters
    ----------
    error : BaseException
        What a Spark action raised (``PythonException``, ``Py4JJavaError``, ...).

    Returns
    -------
    LdptextError or None
        The task's :mod:`ldptext.errors` exception, same class and message (which never holds row
        text), or ``None`` when the failure was not the SDK's.
    """
    m = _TAG.search(str(error))
    if m is None:
        return None
    kind = getattr(_errors, m.group(1), None)
    if not (isinstance(kind, type) and issubclass(kind, LdptextError)):
        kind = LdptextError
    return kind(m.group(2))


@contextmanager
def _sdk_errors() -> Iterator[None]:
    try:
        yield
    except LdptextError:
        raise
    except Exception as e:
        found = sdk_error(e)
        if found is None:
            raise
        raise found from None


def _bundle_bytes(bundle: Any) -> bytes:
    if isinstance(bundle, (bytes, bytearray, memoryview)):
        return bytes(bundle)
    try:
        return Path(bundle).read_bytes()
    except OSError as e:
        raise _errors.BundleError(f"cannot read bundle {bundle}: {e.strerror}") from None


def _refuse_speculation(spark: Any) -> None:
    try:
        conf = spark.sparkContext.getConf()
    except Exception:  # noqa: BLE001 - Spark Connect sessions have no SparkContext
        raise ParameterError("ldptext.spark needs a classic SparkSession (broadcast variables and "
                             "accumulators); Spark Connect is not supported") from None
    if str(conf.get("spark.speculation", "false")).strip().lower() == "true":
        raise ParameterError("spark.speculation is on: speculative execution runs two attempts of a task at "
                             "once, so rows would be sampled twice; run the sanitizing job with "
                             "spark.speculation=false")


def _spark_output_schema(struct: Any, layout: ColumnLayout) -> Any:
    from pyspark.sql.types import DoubleType, IntegerType, StringType, StructField, StructType

    names = layout.names(struct.fieldNames())
    by_name = {f.name: f for f in struct.fields}
    if not isinstance(by_name[layout.column].dataType, StringType):
        raise ParameterError(f"column {layout.column!r} holds {by_name[layout.column].dataType.simpleString()}, "
                             f"not strings")
    report_types = {"ldp_mechanism": StringType(), "ldp_epsilon": DoubleType(), "ldp_tokens": IntegerType(),
                    "ldp_document_epsilon": DoubleType(), "ldp_attempt": IntegerType()}
    out = []
    for name in names:
        if name == layout.target:
            out.append(StructField(name, StringType(), True))
        elif name in report_types:
            out.append(StructField(name, report_types[name], True))
        else:
            out.append(by_name[name])
    return StructType(out)


class SparkSanitizer:
    """Sanitize DataFrame columns on Spark with one verified SanText(+) bundle.

    Parameters
    ----------
    spark : pyspark.sql.SparkSession
        A classic session (not Spark Connect) with ``spark.speculation`` off; :func:`local_session`
        makes one for one machine. Executors need ldptext with this extra installed.
    bundle : str, os.PathLike, bytes, bytearray or memoryview
        The signed bundle, read once on the driver.
    trusted_keys : iterable or None
        Public keys the signer must be among; ``None``: the driver's local trust store. The keys
        the driver trusts are shipped to the executors, which verify against those only.
    allow_unsigned : bool
        Accept an unsigned development bundle (warns, on the driver and in every task).
    expect : BundleExpectation, mapping or None
        The application's pins (:class:`ldptext.runtime.BundleExpectation`), checked on the driver
        and in every task, together with the driver-verified bundle id.
    on_retry : str
        ``"fail"`` (default: a retried task attempt refuses, the job fails) or ``"resample"`` (it
        samples again and its rows say so in ``ldp_attempt``); see the module docstring.
    batch_size : int
        Documents per ``sanitize_batch`` call inside a task.

    Raises
    ------
    BundleError
        The bundle does not verify on the driver (the same errors as :meth:`ldptext.Sanitizer.load`).
    ParameterError
        ``on_retry`` or ``batch_size`` outside their domains, a malformed ``expect``.

    Notes
    -----
    Guarantee per output row: the bundle's, as the module docstring states it, once per released
    sample (a retried or re-evaluated partition: see ``on_retry`` and :class:`JobSummary`).
    """

    def __init__(self, spark: Any, bundle: Any, *, trusted_keys: Iterable[Any] | None = None,
                 allow_unsigned: bool = False, expect: "BundleExpectation | Mapping[str, Any] | None" = None,
                 on_retry: str = "fail", batch_size: int = 1024) -> None:
        from . import keys as _keys
        from .runtime import load_token_runtime

        if on_retry not in RETRY_POLICIES:
            raise ParameterError(f"on_retry must be one of {RETRY_POLICIES}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ParameterError("batch_size must be a positive integer")
        self.spark = spark
        self.on_retry = on_retry
        self.batch_size = batch_size
        pins = BundleExpectation.coerce(expect)
        data = _bundle_bytes(bundle)
        with load_token_runtime(data, trusted_keys=trusted_keys, allow_unsigned=allow_unsigned, expect=pins) as san:
            self.mechanism: str = san.mechanism
            self.per_token_epsilon: float = float(san.per_token_epsilon)
            self.ledger_unit: str = san.ledger_unit
            self.key_id: str | None = san.key_id
            self.bundle_id: str = hashlib.sha256(canonical_json(san.manifest)).hexdigest()
        if trusted_keys is None:
            resolved = _keys.trusted_public_keys()
        else:
            listed = trusted_keys if isinstance(trusted_keys, (list, tuple, set, frozenset)) else [trusted_keys]
            resolved = [_keys.load_public_key(k) for k in listed]
        shipped_pins = {f.name: getattr(pins, f.name) for f in fields(BundleExpectation)} if pins else {}
        shipped_pins["bundle_id"] = self.bundle_id
        self._shipped = _Shipped(bundle=data, trusted_keys=tuple(_keys.public_bytes(k) for k in resolved),
                                 allow_unsigned=bool(allow_unsigned), expect=shipped_pins)
        self._broadcast: Any = None

    def _shipped_once(self) -> Any:
        if self._broadcast is None:
            self._broadcast = self.spark.sparkContext.broadcast(self._shipped)
        return self._broadcast

    def sanitize(self, df: Any, column: str, *, output_column: str | None = None, keep_input: bool = False,
                 id_column: str | None = None, skip_bad_rows: bool = False) -> "SparkSanitizeJob":
        """Sanitize ``df[column]`` (lazily: nothing runs until an action).

        Parameters
        ----------
        df : pyspark.sql.DataFrame
            The input; ``column`` must be a string column.
        column : str
            The private text column.
        output_column : str or None
            Where the sanitized text goes (default: in place of ``column``).
        keep_input : bool
            With another ``output_column``, keep the private input column (default: drop it).
        id_column : str or None
            A column that names rows in errors and skip lists (default: partition and position).
        skip_bad_rows : bool
            Leave rows the runtime refuses out of the output (counted in the summary) instead of
            failing the job.

        Returns
        -------
        SparkSanitizeJob
            Its ``dataframe`` has the input's columns (the text replaced or dropped), the sanitized
            column and :data:`REPORT_COLUMNS`, in the input's partitions and row order. Every action
            on it samples again: write it once (:meth:`SparkSanitizeJob.write_parquet`).

        Raises
        ------
        ParameterError
            Speculative execution is on, Spark Connect, a missing or non-string column, a name clash.

        Notes
        -----
        Guarantee per output row: see :class:`SparkSanitizer` (SanText ε·d(x, x')-MLDP, SanText+
        UMLDP with ε₀ = ln(1/p); Yue et al. 2021, §2.4 of Yue 2023, Theorems 1–2).
        """
        _refuse_speculation(self.spark)
        layout = ColumnLayout(column, output_column, keep_input)
        schema = _spark_output_schema(df.schema, layout)
        names = df.schema.fieldNames()
        if id_column is not None and id_column not in names:
            raise ParameterError(f"no column named {id_column!r} (id_column)")
        plan = _Plan(layout=layout, on_retry=self.on_retry, chunk=self.batch_size, skip_bad_rows=skip_bad_rows,
                     id_index=names.index(id_column) if id_column is not None else None, id_name=id_column)
        log = self.spark.sparkContext.accumulator({}, _partition_log_param())
        task = functools.partial(_sanitize_partition, shipped=self._shipped_once(), plan=plan, log=log)
        return SparkSanitizeJob(df.mapInArrow(task, schema), log, self)

    def close(self) -> None:
        """Remove the broadcast bundle from the executors (after the jobs that use it)."""
        if self._broadcast is not None:
            self._broadcast.destroy()
            self._broadcast = None

    def __enter__(self) -> "SparkSanitizer":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


class SparkSanitizeJob:
    """A sanitizing job: the lazy output ``dataframe`` and, after an action, its :meth:`summary`.

    Attributes
    ----------
    dataframe : pyspark.sql.DataFrame
        The sanitized rows (see :meth:`SparkSanitizer.sanitize`). Every action on it samples again.
    """

    def __init__(self, dataframe: Any, log: Any, owner: SparkSanitizer) -> None:
        self.dataframe = dataframe
        self._log = log
        self._owner = owner
        self._seconds = 0.0

    def write_parquet(self, path: str | os.PathLike, *, mode: str = "errorifexists",
                      progress: Callable[[int, int], None] | None = None) -> JobSummary:
        """Run the job once, writing Spark's Parquet output (a directory) to ``path``.

        Parameters
        ----------
        path : str or os.PathLike
            The output directory (Spark's layout: one ``part-*`` file per partition).
        mode : str
            Spark's save mode; the default refuses an existing output (a second sanitized copy of
            the same input would release every row again).
        progress : callable or None
            Called with (tasks done, tasks in all) while the job runs.

        Returns
        -------
        JobSummary
            What the job released.

        Raises
        ------
        LdptextError
            The SDK error of a failed task (bundle, input, refused retry), rebuilt on the driver.
        """
        started = time.perf_counter()
        with _sdk_errors(), _SparkProgress(self._owner.spark, progress):
            self.dataframe.write.mode(mode).parquet(str(path))
        self._seconds = time.perf_counter() - started
        return self.summary()

    def summary(self) -> JobSummary:
        """What every successful task of this job released so far (call after an action).

        Returns
        -------
        JobSummary
            Rows, tokens and charge over successful tasks; partitions retried or sampled more than
            once.
        """
        log: dict = self._log.value
        total = BatchStats()
        retried, resampled = [], []
        for partition in sorted(log):
            records = log[partition]
            if len(records) > 1:
                resampled.append(partition)
            if any(r[0] > 0 for r in records):
                retried.append(partition)
            for attempt, _task, rows, nulls, skipped, names, tokens, charge in records:
                total.add(BatchStats(rows=rows, null_rows=nulls, skipped_rows=skipped, skipped=list(names),
                                     tokens=tokens, charge=charge))
        o = self._owner
        return JobSummary(engine="spark", mechanism=o.mechanism, per_token_epsilon=o.per_token_epsilon,
                          ledger_unit=o.ledger_unit, bundle_id=o.bundle_id, rows=total.rows,
                          null_rows=total.null_rows, skipped_rows=total.skipped_rows,
                          skipped=tuple(total.skipped), tokens=total.tokens, total_charge=total.charge,
                          partitions=len(log), retried_partitions=tuple(retried),
                          resampled_partitions=tuple(resampled), seconds=self._seconds)


class _SparkProgress:
    """Poll Spark's status tracker for the jobs of one group and report (tasks done, tasks in all)."""

    def __init__(self, spark: Any, report: Callable[[int, int], None] | None, every: float = 0.5) -> None:
        self.sc = spark.sparkContext
        self.report = report
        self.every = every
        self.group = f"ldptext-{os.getpid()}-{time.monotonic_ns()}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _poll(self) -> None:
        tracker = self.sc.statusTracker()
        last = None
        while not self._stop.wait(self.every):
            done = total = 0
            for job in tracker.getJobIdsForGroup(self.group):
                info = tracker.getJobInfo(job)
                for stage in (info.stageIds if info else []):
                    s = tracker.getStageInfo(stage)
                    if s is not None:
                        done += s.numCompletedTasks
                        total += s.numTasks
            if total and (done, total) != last:
                last = (done, total)
                self.report(done, total)

    def __enter__(self) -> "_SparkProgress":
        self.sc.setJobGroup(self.group, "ldptext sanitize")
        if self.report is not None:
            self._thread = threading.Thread(target=self._poll, name="ldptext-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.sc.setLocalProperty("spark.jobGroup.id", None)


def local_session(master: str = "local[*]", *, app_name: str = "ldptext-sanitize",
                  conf: Mapping[str, str] | None = None, log_level: str = "ERROR") -> Any:
    """A SparkSession for one machine, set up for sanitizing.

    Parameters
    ----------
    master : str
        ``local[N]`` (N worker threads), ``local[N,F]`` (F attempts per task), or a cluster URL.
    app_name : str
        The application name.
    conf : mapping or None
        More Spark settings (``spark.speculation`` stays off: see the module docstring).
    log_level : str
        Spark's log level (``ERROR``: task failures are reported by the SDK's own errors).

    Returns
    -------
    pyspark.sql.SparkSession
        Python workers run this interpreter (``PYSPARK_PYTHON`` unless already set); no UI, no
        console progress bar, speculation off.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false"))
    for key, value in dict(conf or {}).items():
        builder = builder.config(key, value)
    builder = builder.config("spark.speculation", "false")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark
