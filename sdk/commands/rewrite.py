"""``ldptext rewrite``: DP-BART rewriting, one document per line in, one rewritten line out, same order,
streaming. Input must be UTF-8; a bad line stops the run with its line number, never its text."""
from __future__ import annotations

import json
import math
import sys

from ..errors import InputError, ParameterError

BATCH = 16


def _epsilon(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ParameterError(f"--epsilon must be a number, got {text!r}") from None
    return value


def register(sub) -> None:
    p = sub.add_parser("rewrite", help="rewrite documents with DP-BART (document-level LDP)")
    p.add_argument("input", nargs="?", default="-", help="file with one document per line, or - (stdin)")
    p.add_argument("--bundle", required=True, help="a dpbart bundle")
    p.add_argument("--epsilon", required=True, type=str, help="ε per release (chunk), > 0")
    p.add_argument("--delta", type=float, default=None, help="δ per release for the Gaussian mechanism, in (0, 1)")
    p.add_argument("--mechanism", choices=["gaussian", "laplace"], default="gaussian")
    p.add_argument("--beam", type=int, default=1, help="beam size (1 = greedy)")
    p.add_argument("--long", choices=["split", "truncate", "refuse"], default="split",
                   help="documents longer than L: split into chunks (k releases), truncate, or refuse")
    p.add_argument("--seed", type=int, default=None, help="reproducible output for tests (NOT private)")
    p.add_argument("--json", action="store_true", help="emit {text, report} per line")
    p.add_argument("--threads", type=int, default=None, help="ONNX Runtime threads")
    p.add_argument("--trusted-key", action="append", default=None,
                   help="public key to trust (repeatable); default: the local trust store")
    p.add_argument("--allow-unsigned", action="store_true", help="development bundles only")
    p.set_defaults(func=run)


def _decode(raw: bytes, lineno: int) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"input line {lineno} is not valid UTF-8") from None
    text = text[:-1] if text.endswith("\n") else text
    return text[:-1] if text.endswith("\r") else text


def run(args) -> int:
    from ..dpbart import Rewriter

    eps = _epsilon(args.epsilon)
    if math.isnan(eps) or eps <= 0:
        raise ParameterError("--epsilon must be > 0")
    rw = Rewriter.load(args.bundle, trusted_keys=args.trusted_key, allow_unsigned=args.allow_unsigned,
                       seed=args.seed, threads=args.threads)
    opts = dict(epsilon=eps, delta=args.delta, mechanism=args.mechanism, beam=args.beam, long=args.long)
    rw.rewrite_batch([], **opts)  # validate the parameters before reading any input
    if args.input == "-":
        stream = sys.stdin.buffer
    else:
        try:
            stream = open(args.input, "rb")
        except OSError as e:
            raise InputError(f"cannot open input file: {e.strerror}") from None
    out = sys.stdout
    with stream:
        batch: list[str] = []
        for lineno, raw in enumerate(stream, 1):
            batch.append(_decode(raw, lineno))
            if len(batch) >= BATCH:
                _emit(rw, batch, out, args.json, opts)
                batch = []
        if batch:
            _emit(rw, batch, out, args.json, opts)
    return 0


def _emit(rw, batch, out, as_json: bool, opts) -> None:
    results = rw.rewrite_batch(batch, **opts)
    if as_json:
        out.write("".join(json.dumps({"text": r.text, "report": r.report.to_dict()}, ensure_ascii=False) + "\n"
                          for r in results))
    else:
        out.write("".join(r.text.replace("\n", " ") + "\n" for r in results))
    out.flush()
