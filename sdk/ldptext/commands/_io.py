"""Line-oriented document I/O shared by ``ldptext sanitize`` and ``ldptext rewrite``: one UTF-8
document per line in, one result line out, same order, ``batch_size`` documents at a time.

**Streaming.** Input is read, processed and written one batch at a time, whether it comes from a
file or from standard input, so memory does not grow with the input (only with the longest line).

**A line that is not UTF-8** (what has been written when the run stops):

* a regular **file**: a first pass decodes every line, keeping nothing, before any document is
  processed; a bad file is refused with the bad line's number and **no output at all**. The second
  pass streams. (Should the file change between the passes, the second pass still checks each line
  and stops at a bad one as for a stream.)
* **standard input** (``-``) or any other stream (a pipe, a FIFO) cannot be read twice, so it
  streams: at a bad line, the result of every earlier line has been written (complete lines only),
  then the run stops with that line's number.

A document that the runtime refuses (an :class:`ldptext.errors.InputError` for that document, e.g.
a DP-BART document longer than L under ``--long refuse``) stops the run the same way: everything before its
batch has been written; the error names the input line.

**``skip_bad_lines``** (``--skip-bad-lines``): a line that is not UTF-8, or that the runtime refuses,
produces **no output line**; every other line gives exactly one, in order. At the end one line on
standard error counts the skipped lines and lists their numbers. Skipping never re-releases a
document: a refused batch released nothing, and its documents are then processed one by one.

**Output** goes to standard output, streamed batch by batch, or with ``output`` (``--output FILE``)
to a temporary file beside it that is renamed over it only when every line has been written
(:func:`ldptext.fileio.atomic_path`): a run that stops leaves no output file (and an existing one
as it was).

**Progress** (``progress``, ``--progress``): one line on standard error per batch on a terminal
(rewritten in place), else at most every 5 s: the input line reached, the share of a regular file
read, and the rate; never any text.

Only line numbers are ever reported: the offending text is never echoed.
"""
from __future__ import annotations

import argparse
import json
import os
import stat
import sys
import time
from contextlib import closing, contextmanager
from pathlib import Path
from typing import IO, Callable, Iterator

from ..errors import InputError, ParameterError

# line numbers listed per kind of skipped line (the count is always complete)
_LISTED = 20


class Progress:
    """Progress lines on standard error: rewritten in place on a terminal, else at most every 5 s.
    Callers pass counts and labels only, never text."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self.last = 0.0

    def __call__(self, line: str, *, final: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if self.tty:
            sys.stderr.write(f"\r\x1b[Kldptext: {line}" + ("\n" if final else ""))
        elif final or now - self.last >= 5.0:
            sys.stderr.write(f"ldptext: {line}\n")
            self.last = now
        sys.stderr.flush()


def progress_from_args(args: argparse.Namespace) -> Progress:
    """``--progress`` / ``--no-progress``; by default on when standard error is a terminal."""
    enabled = getattr(args, "progress", None)
    return Progress(sys.stderr.isatty() if enabled is None else bool(enabled))


class InputMeter:
    """How far a run has read its input, for progress lines: lines, bytes, and the share of a
    regular file (its size is known; a stream's is not)."""

    def __init__(self, source: str, unit: str = "line") -> None:
        self.unit = unit
        self.size = os.stat(source).st_size if _is_regular_file(source) else None
        self.bytes = 0
        self.started = time.perf_counter()

    def line(self, lineno: int, done: bool = False, count: int | None = None) -> str:
        """``input line 5120 (41% of the file), 2210 lines/s``; ``done``: ``count`` units (default
        ``lineno``) and the time."""
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        if done:
            n = lineno if count is None else count
            return f"done: {n} {self.unit}{'' if n == 1 else 's'} in {elapsed:.1f} s ({n / elapsed:.0f}/s)"
        share = f" ({100.0 * self.bytes / self.size:.0f}% of the file)" if self.size else ""
        return f"input line {lineno}{share}, {lineno / elapsed:.0f} lines/s"


def check_output_path(output: str, source: str, *, overwrite: bool, what: str = "file") -> Path:
    """Refuse an ``--output`` that would lose or repeat data (usage errors, before anything is read).

    Parameters
    ----------
    output : str
        The output path.
    source : str
        The input path, or ``-``.
    overwrite : bool
        ``--overwrite``: an existing output may be replaced.
    what : str
        What the output is, for the messages (``"Parquet file"``).

    Returns
    -------
    Path

    Raises
    ------
    ParameterError
        The output is the input, exists (without ``overwrite``: a second sanitized copy of the same
        input releases every document again), is a directory, or its directory does not exist.
    """
    target = Path(output)
    if target.is_dir():
        raise ParameterError(f"{target} is a directory; --output names one {what}")
    if source != "-" and target.exists() and target.resolve() == Path(source).resolve():
        raise ParameterError("--output is the input file")
    if target.exists() and not overwrite:
        raise ParameterError(f"{target} exists: a second sanitized copy of the same input releases every row "
                             f"again; remove it or pass --overwrite")
    if not target.parent.is_dir():
        raise ParameterError(f"the directory of --output does not exist: {target.parent}")
    return target


@contextmanager
def output_stream(output: str | None) -> Iterator[IO[str]]:
    """Standard output (``None`` or ``-``), or a text stream on a temporary file beside ``output``
    that becomes ``output`` (mode 0644) only when the body returns: never a half-written file."""
    if output is None or output == "-":
        yield sys.stdout
        return
    from ..fileio import atomic_path

    with atomic_path(output, mode=0o644) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="") as stream:
            yield stream


def _is_json_object(line: str) -> bool:
    if not line.lstrip().startswith("{"):
        return False
    try:
        return isinstance(json.loads(line), dict)
    except (ValueError, RecursionError):
        return False


def _decode(raw: bytes, lineno: int) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"input line {lineno} is not valid UTF-8") from None
    text = text[:-1] if text.endswith("\n") else text
    return text[:-1] if text.endswith("\r") else text


@contextmanager
def _open(source: str) -> Iterator[IO[bytes]]:
    """The byte stream of a file path, or standard input for ``-``."""
    if source == "-":
        yield sys.stdin.buffer
        return
    try:
        stream = open(source, "rb")
    except OSError as e:
        raise InputError(f"cannot open input file: {e.strerror}") from None
    with stream:
        yield stream


def _is_regular_file(source: str) -> bool:
    if source == "-":
        return False
    try:
        return stat.S_ISREG(os.stat(source).st_mode)
    except OSError:
        return False  # opening it reports the error


def validate(source: str) -> None:
    """First pass over a regular file: every line must decode as UTF-8 (nothing is kept).

    Parameters
    ----------
    source : str
        A file path.

    Raises
    ------
    InputError
        The number of the first line that is not valid UTF-8, or that the file cannot be opened.
    """
    with _open(source) as stream:
        for lineno, raw in enumerate(stream, 1):
            _decode(raw, lineno)


def lines(source: str, meter: InputMeter | None = None) -> Iterator[tuple[int, str | None]]:
    """The lines of ``source`` (a file path, or ``-``), read one at a time.

    Parameters
    ----------
    source : str
        A file path, or ``-`` for standard input.
    meter : InputMeter or None
        Counts the bytes read (progress).

    Yields
    ------
    (int, str or None)
        The 1-based line number and the decoded line without its line ending, or ``None`` for a line
        that is not valid UTF-8.
    """
    with _open(source) as stream:
        for lineno, raw in enumerate(stream, 1):
            if meter is not None:
                meter.bytes += len(raw)
            try:
                yield lineno, _decode(raw, lineno)
            except InputError:
                yield lineno, None


class _Skipped:
    """Line numbers skipped under ``skip_bad_lines``, by reason."""

    def __init__(self) -> None:
        self.not_utf8: list[int] = []
        self.refused: list[int] = []
        self.total_lines = 0

    def summary(self) -> str | None:
        count = len(self.not_utf8) + len(self.refused)
        if not count:
            return None
        parts = [f"{reason}: {_numbers(found)}" for reason, found in
                 (("not valid UTF-8", self.not_utf8), ("refused by the runtime", self.refused)) if found]
        return (f"ldptext: warning: skipped {count} of {self.total_lines} input lines (no output line for "
                f"them); " + "; ".join(parts))


def _numbers(found: list[int]) -> str:
    shown = ", ".join(map(str, found[:_LISTED]))
    more = f" (and {len(found) - _LISTED} more)" if len(found) > _LISTED else ""
    return ("line " if len(found) == 1 else "lines ") + shown + more


def _name_line(error: InputError, batch: list[tuple[int, str]]) -> InputError:
    """The runtime's "document i ..." error, restated with the input line number."""
    message, i = str(error), error.document
    if i is not None and 0 <= i < len(batch):
        message = f"the document on input line {batch[i][0]}" + message.removeprefix(f"document {i}")
    elif batch:
        message = f"input lines {batch[0][0]}-{batch[-1][0]}: {message}"
    return InputError(message)


def process(source: str, run_batch: Callable[[list[str]], list], as_json: bool,
            batch_size: int, *, skip_bad_lines: bool = False, output: str | None = None,
            progress: Callable[..., None] | None = None, hint_jsonl: bool = False) -> None:
    """Feed documents to ``run_batch`` in batches and print each result's text (or, with
    ``as_json``, ``{"text", "report"}``) as one line, streaming.

    Parameters
    ----------
    source : str
        A file path, or ``-`` for standard input.
    run_batch : callable
        Sanitizes or rewrites a list of documents (``Sanitizer.sanitize_batch``, ...); each call is
        one release.
    as_json : bool
        Print ``{"text", "report"}`` per line.
    batch_size : int
        Documents per ``run_batch`` call.
    skip_bad_lines : bool
        Skip lines that are not UTF-8 or that the runtime refuses (no output line for them; a count
        and their line numbers on standard error) instead of stopping.
    output : str or None
        Write to this file, atomically (:func:`output_stream`); default: standard output.
    progress : callable or None
        :class:`Progress`: a line per batch (line number, share of the file, rate).
    hint_jsonl : bool
        Warn once when the first line is a JSON object (probably JSONL meant for ``--format jsonl``);
        it is still processed as text.

    Raises
    ------
    InputError
        Without ``skip_bad_lines``: a line that is not UTF-8 (a regular file: before any output), or
        a document the runtime refuses; the message names the line number, never the text.
    """
    skipped = _Skipped()
    meter = InputMeter(source)

    def run(batch: list[tuple[int, str]]) -> list:
        try:
            return run_batch([doc for _, doc in batch])
        except InputError as e:
            if not skip_bad_lines:
                raise _name_line(e, batch) from None
        results = []  # nothing was released: find the refused documents one at a time
        for lineno, doc in batch:
            try:
                results += run_batch([doc])
            except InputError:
                skipped.refused.append(lineno)
        return results

    def emit(batch: list[tuple[int, str]], out: IO[str]) -> None:
        results = run(batch)
        if as_json:
            out.write("".join(json.dumps({"text": r.text, "report": r.report.to_dict()},
                                         ensure_ascii=False) + "\n" for r in results))
        else:
            out.write("".join(r.text.replace("\n", " ") + "\n" for r in results))
        out.flush()
        if progress is not None:
            progress(meter.line(batch[-1][0]))

    if not skip_bad_lines and _is_regular_file(source):
        validate(source)  # a bad file: refused before any output
    to_file = output is not None and output != "-"
    batch: list[tuple[int, str]] = []
    with output_stream(output) as out, closing(lines(source, meter)) as reader:  # closed however it ends
        for lineno, doc in reader:
            skipped.total_lines = lineno
            if doc is None:
                if skip_bad_lines:
                    skipped.not_utf8.append(lineno)
                    continue
                if batch and not to_file:
                    emit(batch, out)  # a stream: every earlier line's result, then stop at this line
                raise InputError(f"input line {lineno} is not valid UTF-8")
            if lineno == 1 and hint_jsonl and _is_json_object(doc):
                print("ldptext: warning: input line 1 is a JSON object and is sanitized as text, braces and "
                      "all; for JSONL give --format jsonl --column FIELD", file=sys.stderr)
            batch.append((lineno, doc))
            if len(batch) >= batch_size:
                emit(batch, out)
                batch = []
        if batch:
            emit(batch, out)
    if progress is not None:
        progress(meter.line(skipped.total_lines, done=True), final=True)
    summary = skipped.summary()
    if summary:
        print(summary, file=sys.stderr)
