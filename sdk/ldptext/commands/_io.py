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

Only line numbers are ever reported: the offending text is never echoed.
"""
from __future__ import annotations

import json
import os
import stat
import sys
from contextlib import closing, contextmanager
from typing import IO, Callable, Iterator

from ..errors import InputError

# line numbers listed per kind of skipped line (the count is always complete)
_LISTED = 20


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


def lines(source: str) -> Iterator[tuple[int, str | None]]:
    """The lines of ``source`` (a file path, or ``-``), read one at a time.

    Parameters
    ----------
    source : str
        A file path, or ``-`` for standard input.

    Yields
    ------
    (int, str or None)
        The 1-based line number and the decoded line without its line ending, or ``None`` for a line
        that is not valid UTF-8.
    """
    with _open(source) as stream:
        for lineno, raw in enumerate(stream, 1):
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
            batch_size: int, *, skip_bad_lines: bool = False) -> None:
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

    Raises
    ------
    InputError
        Without ``skip_bad_lines``: a line that is not UTF-8 (a regular file: before any output), or
        a document the runtime refuses; the message names the line number, never the text.
    """
    out = sys.stdout
    skipped = _Skipped()

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

    def emit(batch: list[tuple[int, str]]) -> None:
        results = run(batch)
        if as_json:
            out.write("".join(json.dumps({"text": r.text, "report": r.report.to_dict()},
                                         ensure_ascii=False) + "\n" for r in results))
        else:
            out.write("".join(r.text.replace("\n", " ") + "\n" for r in results))
        out.flush()

    if not skip_bad_lines and _is_regular_file(source):
        validate(source)  # a bad file: refused before any output
    batch: list[tuple[int, str]] = []
    with closing(lines(source)) as reader:  # closes the file however the loop ends
        for lineno, doc in reader:
            skipped.total_lines = lineno
            if doc is None:
                if skip_bad_lines:
                    skipped.not_utf8.append(lineno)
                    continue
                if batch:
                    emit(batch)  # a stream: every earlier line's result, then stop at this line
                raise InputError(f"input line {lineno} is not valid UTF-8")
            batch.append((lineno, doc))
            if len(batch) >= batch_size:
                emit(batch)
                batch = []
    if batch:
        emit(batch)
    summary = skipped.summary()
    if summary:
        print(summary, file=sys.stderr)
