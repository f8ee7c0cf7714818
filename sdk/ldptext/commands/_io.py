"""Line-oriented document I/O shared by ``ldptext sanitize`` and ``ldptext rewrite``: one UTF-8
document per line in, one result line out, same order, in batches.

A file is decoded whole before anything is written (bad input → no partial output); standard input
streams, and a bad line stops the run with its line number. The offending text is never echoed."""
from __future__ import annotations

import json
import sys
from typing import Callable, Iterator

from ..errors import InputError


def _decode(raw: bytes, lineno: int) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"input line {lineno} is not valid UTF-8") from None
    text = text[:-1] if text.endswith("\n") else text
    return text[:-1] if text.endswith("\r") else text


def documents(source: str) -> Iterator[str]:
    """The documents of a file path, or of standard input for ``-``."""
    if source == "-":
        for i, raw in enumerate(sys.stdin.buffer, 1):
            yield _decode(raw, i)
        return
    try:
        stream = open(source, "rb")
    except OSError as e:
        raise InputError(f"cannot open input file: {e.strerror}") from None
    with stream:
        decoded = [_decode(raw, i) for i, raw in enumerate(stream, 1)]
    yield from decoded


def process(source: str, run_batch: Callable[[list[str]], list], as_json: bool,
            batch_size: int) -> None:
    """Feed documents to ``run_batch`` in batches and print each result's text (or, with
    ``as_json``, ``{"text", "report"}``) as one line."""
    out = sys.stdout
    batch: list[str] = []

    def emit() -> None:
        results = run_batch(batch)
        if as_json:
            out.write("".join(json.dumps({"text": r.text, "report": r.report.to_dict()},
                                         ensure_ascii=False) + "\n" for r in results))
        else:
            out.write("".join(r.text.replace("\n", " ") + "\n" for r in results))
        out.flush()

    for doc in documents(source):
        batch.append(doc)
        if len(batch) >= batch_size:
            emit()
            batch = []
    if batch:
        emit()
