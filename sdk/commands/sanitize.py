"""``ldptext sanitize``: one document per line in, one sanitized line out, same order, streaming.

Input must be UTF-8. A file is checked whole before anything is written (no partial output); from
standard input, lines are processed as they come and a bad line stops the run with its line number.
The offending text is never echoed."""
from __future__ import annotations

import json
import sys

from ..errors import InputError

BATCH = 256


def register(sub) -> None:
    p = sub.add_parser("sanitize", help="sanitize text with a SanText(+) bundle")
    p.add_argument("input", nargs="?", default="-", help="file with one document per line, or -")
    p.add_argument("--bundle", required=True)
    p.add_argument("--seed", type=int, default=None,
                   help="reproducible output for tests (NOT private)")
    p.add_argument("--json", action="store_true", help="emit {text, report} per line")
    p.add_argument("--trusted-key", action="append", default=None,
                   help="public key to trust (repeatable); default: the local trust store")
    p.add_argument("--allow-unsigned", action="store_true", help="development bundles only")
    p.set_defaults(func=run)


def _decode(raw: bytes, lineno: int) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"input line {lineno} is not valid UTF-8") from None
    return text[:-1] if text.endswith("\n") else text


def _lines(stream, prevalidate: bool):
    if prevalidate:
        raw_lines = stream.readlines()
        decoded = [_decode(r, i) for i, r in enumerate(raw_lines, 1)]
        yield from decoded
        return
    for i, raw in enumerate(stream, 1):
        yield _decode(raw, i)


def run(args) -> int:
    from ..santext import Sanitizer

    san = Sanitizer.load(args.bundle, trusted_keys=args.trusted_key,
                         allow_unsigned=args.allow_unsigned, seed=args.seed)
    if args.input == "-":
        stream, prevalidate = sys.stdin.buffer, False
    else:
        try:
            stream = open(args.input, "rb")
        except OSError as e:
            raise InputError(f"cannot open input file: {e.strerror}") from None
        prevalidate = True
    out = sys.stdout
    with stream:
        batch: list[str] = []
        for line in _lines(stream, prevalidate):
            batch.append(line.rstrip("\r"))
            if len(batch) >= BATCH:
                _emit(san, batch, out, args.json)
                batch = []
        if batch:
            _emit(san, batch, out, args.json)
    return 0


def _emit(san, batch, out, as_json: bool) -> None:
    results = san.sanitize_batch(batch)
    if as_json:
        out.write("".join(json.dumps({"text": r.text, "report": r.report.to_dict()},
                                     ensure_ascii=False) + "\n" for r in results))
    else:
        out.write("".join(r.text + "\n" for r in results))
    out.flush()
