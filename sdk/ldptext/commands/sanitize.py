"""``ldptext sanitize``: one document per line in, one sanitized line out, same order, streaming
(input handling in ``_io.py``: UTF-8 only, no partial output for a bad file, never echoes text)."""
from __future__ import annotations

from ._io import process

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


def run(args) -> int:
    from ..santext import Sanitizer

    san = Sanitizer.load(args.bundle, trusted_keys=args.trusted_key,
                         allow_unsigned=args.allow_unsigned, seed=args.seed)
    process(args.input, san.sanitize_batch, args.json, BATCH)
    return 0
