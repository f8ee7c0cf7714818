"""JSONL and CSV in and out for ``ldptext sanitize --format jsonl|csv --column NAME``: one field of
every JSON object (one per line), or one column of a CSV file with a header row, is sanitized; every
other field or column is passed through unchanged, and the per-row report fields of the Parquet mode
are appended (``ldp_mechanism``, ``ldp_epsilon``, ``ldp_tokens``, ``ldp_document_epsilon``,
``ldp_attempt``; null for a row that released nothing).

**Streaming.** Records are read, sanitized (``BATCH`` at a time, each batch one ledger charge before
its output is written) and written one batch at a time, from a file or standard input; memory does not
grow with the input.

**Bad records** stop the run with the line number (a CSV record spanning lines: its first line),
never any text: a line that is not UTF-8 or not JSON, a JSON line that is not an object, lacks the
field, has a duplicate key or a field that is not a string or null; a CSV record with a different
number of fields than the header; a document the runtime refuses. A regular input file is checked
whole before anything is sanitized (nothing released, nothing written for a bad file). With
``--skip-bad-lines`` such a record gives no output record and is counted on standard error.

**Output.** ``--output FILE`` is written to a temporary file beside it and renamed only when complete:
a run that stops leaves no output (an existing file, with ``--overwrite``, is left as it was). Without
``--output`` records go to standard output as they are sanitized (a stream that stops has every
earlier record's output, complete lines only, as in line mode).

**Values.** JSON values other than the text field are re-serialized as parsed (key order kept, UTF-8
unescaped); a null text stays null. CSV cells are strings: an empty text cell is an empty document.
CSV output is comma-separated, one record per line (LF line endings), minimal quoting.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field
from typing import IO, Any

from ..errors import InputError, ParameterError
from ._io import InputMeter, _is_regular_file, _open, _numbers, output_stream, progress_from_args

#: records per ``sanitize_batch`` call (one ledger charge each)
BATCH = 256
#: the per-row report fields appended to every output record, as in the Parquet mode
REPORT_FIELDS = ("ldp_mechanism", "ldp_epsilon", "ldp_tokens", "ldp_document_epsilon", "ldp_attempt")
FORMATS = ("jsonl", "csv")
# the report of a null text: nothing released (ldp_attempt is 0 as for every row, as in Parquet)
_NOTHING_RELEASED = (None, None, None, None, 0)
# a long document is one CSV field: the csv module's default limit (128 KiB) would refuse it
_CSV_FIELD_LIMIT = 1 << 30


class _BadRecord(Exception):
    """A record that cannot be processed; the message names no text."""


@dataclass
class _Record:
    """One input record: its first line number, the text to sanitize (None: nothing to release), and
    what the writer needs to write it back (the JSON object, the CSV row)."""

    lineno: int
    text: str | None
    body: Any


@dataclass
class _Totals:
    rows: int = 0
    null_rows: int = 0
    tokens: int = 0
    charge: float = 0.0
    lines: int = 0
    records: int = 0
    skipped: list[int] = field(default_factory=list)


# ---- JSONL -----------------------------------------------------------------------------------------

def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        # a duplicate key would be dropped by the parser: not passed through unchanged
        raise _BadRecord("has a duplicate key in a JSON object")
    return dict(pairs)


class _JsonlFormat:
    """One JSON object per line; blank lines pass through (nothing released)."""

    def __init__(self, column: str) -> None:
        self.column = column

    def records(self, stream: IO[bytes], meter: InputMeter | None) -> Iterator[_Record | tuple[int, str]]:
        """Yield a record per line, or ``(lineno, reason)`` for a bad one."""
        for lineno, raw in enumerate(stream, 1):
            if meter is not None:
                meter.bytes += len(raw)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                yield lineno, "is not valid UTF-8"
                continue
            if lineno == 1:
                line = line.removeprefix("\ufeff")  # a byte order mark, as some editors write
            if not line.strip():
                yield _Record(lineno, None, None)
                continue
            try:
                obj = json.loads(line.rstrip("\r\n"), object_pairs_hook=_no_duplicates)
            except _BadRecord as e:
                yield lineno, str(e)
                continue
            except json.JSONDecodeError as e:  # its message gives a position, never the text
                yield lineno, f"is not valid JSON (column {e.colno}: {e.msg})"
                continue
            except RecursionError:
                yield lineno, "is nested too deeply"
                continue
            if not isinstance(obj, dict):
                yield lineno, f"is a JSON {type(obj).__name__.replace('dict', 'object')}, not an object"
                continue
            if self.column not in obj:
                yield lineno, f"has no field {self.column!r}"
                continue
            text = obj[self.column]
            if text is not None and not isinstance(text, str):
                yield lineno, f"has a field {self.column!r} that is not a string or null"
                continue
            clash = [name for name in REPORT_FIELDS if name in obj]
            if clash:
                yield lineno, f"already has the report field {clash[0]!r}"
                continue
            yield _Record(lineno, text, obj)

    def header(self, out: IO[str]) -> None:
        """JSONL has no header."""

    def write(self, out: IO[str], record: _Record, text: str | None, report: tuple) -> None:
        if record.body is None:
            out.write("\n")
            return
        obj = dict(record.body)
        obj[self.column] = text
        obj.update(zip(REPORT_FIELDS, report))
        out.write(json.dumps(obj, ensure_ascii=False) + "\n")


# ---- CSV -------------------------------------------------------------------------------------------

class _LineSource:
    """Decoded lines (with their endings, as the csv module needs for quoted newlines) and the
    number of the line being read."""

    def __init__(self, stream: IO[bytes], meter: InputMeter | None) -> None:
        self.stream, self.meter, self.lineno = stream, meter, 0

    def __iter__(self) -> Iterator[str]:
        for raw in self.stream:
            self.lineno += 1
            if self.meter is not None:
                self.meter.bytes += len(raw)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise _BadRecord("is not valid UTF-8") from None
            yield line.removeprefix("\ufeff") if self.lineno == 1 else line


class _CsvFormat:
    """A header row, then one record per row; ``--column`` names a header cell."""

    def __init__(self, column: str) -> None:
        self.column = column
        self.fields: list[str] = []
        self.index = -1

    def records(self, stream: IO[bytes], meter: InputMeter | None) -> Iterator[_Record | tuple[int, str]]:
        csv.field_size_limit(max(csv.field_size_limit(), _CSV_FIELD_LIMIT))
        lines = _LineSource(stream, meter)
        reader = csv.reader(lines, strict=True)
        first = 1
        while True:
            first = lines.lineno + 1
            try:
                row = next(reader)
            except StopIteration:
                break
            except _BadRecord as e:
                if not self.fields:  # no header: nothing can be read
                    raise InputError(f"the CSV header (input line {lines.lineno}) {e}") from None
                yield lines.lineno, str(e)
                # the csv reader cannot resume after its source raised: start a new one
                reader = csv.reader(lines, strict=True)
                continue
            except csv.Error as e:  # its messages name a character class, never the text
                if not self.fields:
                    raise InputError(f"the CSV header (input line {first}) is not valid CSV: {e}") from None
                yield first, f"is not valid CSV ({e})"
                reader = csv.reader(lines, strict=True)
                continue
            if not self.fields:
                self._set_header(row)
                continue
            if not row:  # a blank line: no record (written back as a blank line)
                yield _Record(first, None, None)
                continue
            if len(row) != len(self.fields):
                yield first, f"has {len(row)} fields, the header {len(self.fields)}"
                continue
            yield _Record(first, row[self.index], row)
        if not self.fields:
            raise InputError("the CSV input is empty: it needs a header row naming the columns")

    def _set_header(self, row: list[str]) -> None:
        if row.count(self.column) != 1:
            problem = "no column" if self.column not in row else "more than one column"
            raise ParameterError(f"the CSV header has {problem} named {self.column!r}")
        clash = [name for name in REPORT_FIELDS if name in row]
        if clash:
            raise ParameterError(f"the CSV input already has the report column {clash[0]!r}")
        self.fields, self.index = row, row.index(self.column)

    def header(self, out: IO[str]) -> None:
        self.writer = csv.writer(out, lineterminator="\n")
        self.writer.writerow([*self.fields, *REPORT_FIELDS])

    def write(self, out: IO[str], record: _Record, text: str | None, report: tuple) -> None:
        if record.body is None:
            out.write("\n")
            return
        row = list(record.body)
        row[self.index] = text
        self.writer.writerow([*row, *("" if v is None else v for v in report)])


# ---- the run ---------------------------------------------------------------------------------------

def check_options(args: argparse.Namespace, fmt: str) -> None:
    """Refuse options that make no sense for JSONL / CSV (usage errors, before anything is opened)."""
    name = fmt.upper()
    if args.column is None:
        raise ParameterError(f"{name} input needs --column NAME: the field that holds the text")
    if args.json:
        raise ParameterError(f"--json is for line output; {name} output always carries the report fields")
    if args.seed is not None:
        raise ParameterError(f"--seed is not available for {name} output (no seeded corpus releases)")


def _validate(source: str, fmt: Any) -> None:
    """First pass over a regular file: every record must parse (nothing is kept or released)."""
    with _open(source) as stream:
        for item in fmt.records(stream, None):
            if isinstance(item, tuple):
                raise InputError(f"input line {item[0]} {item[1]}")


def run_table(args: argparse.Namespace, fmt_name: str, san: Any) -> None:
    """Sanitize ``args.column`` of the JSONL or CSV input ``args.input`` with the open runtime ``san``
    into ``args.output`` (or standard output). See the module docstring for the guarantees.

    Raises
    ------
    InputError
        A bad record (its line number, never its text), unless ``--skip-bad-lines``.
    """
    fmt = (_JsonlFormat if fmt_name == "jsonl" else _CsvFormat)(args.column)
    source, skip = args.input, args.skip_bad_lines
    progress = progress_from_args(args)
    meter = InputMeter(source, unit="record")
    if not skip and _is_regular_file(source):
        _validate(source, (_JsonlFormat if fmt_name == "jsonl" else _CsvFormat)(args.column))
    to_file = args.output is not None and args.output != "-"
    totals = _Totals()
    mechanism = getattr(san, "mechanism", None)

    def sanitize(batch: list[_Record]) -> dict[int, Any]:
        """Results by position in ``batch``; a refused document: InputError naming its line, or (skip)
        left out and its line counted."""
        present = [i for i, r in enumerate(batch) if r.text is not None]
        try:
            return dict(zip(present, san.sanitize_batch([batch[i].text for i in present])))
        except InputError as e:
            if not skip:
                raise _name_record(e, [batch[i] for i in present]) from None
        results = {}  # nothing of the batch was released: find the refused documents one at a time
        for i in present:
            try:
                results[i] = san.sanitize_batch([batch[i].text])[0]
            except InputError:
                totals.skipped.append(batch[i].lineno)
        return results

    def emit(batch: list[_Record], out: IO[str]) -> None:
        results = sanitize(batch)
        for i, record in enumerate(batch):
            if record.text is None:
                if record.body is not None:
                    totals.null_rows += 1
                fmt.write(out, record, None, _NOTHING_RELEASED)
                continue
            r = results.get(i)
            if r is None:
                continue  # refused and skipped: no output record
            rep = r.report
            totals.rows += 1
            totals.tokens += rep.n_tokens
            totals.charge += rep.document_epsilon
            fmt.write(out, record, r.text, (rep.mechanism, rep.per_token_epsilon, rep.n_tokens,
                                            rep.document_epsilon, 0))
        out.flush()
        progress(meter.line(batch[-1].lineno))

    batch: list[_Record] = []
    with output_stream(args.output) as out, _open(source) as stream:
        reader = fmt.records(stream, meter)
        with closing(reader):
            started = False
            for item in reader:
                if not started:
                    fmt.header(out)  # the CSV header is known once the first row is read
                    started = True
                totals.records += 1
                if isinstance(item, tuple):
                    lineno, reason = item
                    totals.lines = lineno
                    if skip:
                        totals.skipped.append(lineno)
                        continue
                    if batch and not to_file:
                        emit(batch, out)  # a stream: every earlier record's output, then stop here
                    raise InputError(f"input line {lineno} {reason}")
                totals.lines = item.lineno
                batch.append(item)
                if len(batch) >= BATCH:
                    emit(batch, out)
                    batch = []
            if not started:
                fmt.header(out)
            if batch:
                emit(batch, out)
    progress(meter.line(totals.lines, done=True, count=totals.records), final=True)
    if totals.skipped:
        print(f"ldptext: warning: skipped {len(totals.skipped)} input records (no output record for them): "
              f"{_numbers(sorted(totals.skipped))}", file=sys.stderr)
    print(f"ldptext: {totals.rows} {fmt_name.upper()} records sanitized ({totals.tokens} tokens; "
          f"{totals.null_rows} null, {len(totals.skipped)} skipped) with {mechanism}; total charge "
          f"{totals.charge:.6g} ({getattr(san, 'ledger_unit', '?')}, n*eps per record)", file=sys.stderr)


def _name_record(error: InputError, batch: list[_Record]) -> InputError:
    """The runtime's "document i ..." error, restated with the record's input line."""
    message, i = str(error), error.document
    if i is not None and 0 <= i < len(batch):
        return InputError(f"the document on input line {batch[i].lineno}"
                          + message.removeprefix(f"document {i}"))
    if batch:
        return InputError(f"input lines {batch[0].lineno}-{batch[-1].lineno}: {message}")
    return InputError(message)

