"""``ldptext sanitize``: one document per line in, one sanitized line out, same order, streaming
(input handling in ``_io.py``: UTF-8 only; a bad file is refused before any output, standard input
stops at a bad line; ``--skip-bad-lines`` skips such lines instead, with no output line for them;
never echoes text)."""
from __future__ import annotations

import argparse
from typing import Any

from ._io import process
from ._pinning import add_pinning_options, expectation_from_args

BATCH = 256


def register(sub: Any) -> None:
    """Add the ``sanitize`` command.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        The ``add_subparsers()`` result of the ``ldptext`` command line.
    """
    p = sub.add_parser("sanitize", help="sanitize text with a SanText(+) bundle")
    p.add_argument("input", nargs="?", default="-",
                   help="UTF-8 file with one document per line, or - for standard input (default)")
    p.add_argument("--bundle", required=True, metavar="FILE",
                   help="the signed SanText(+) bundle (.ldpb) to sanitize with")
    p.add_argument("--seed", type=int, default=None,
                   help="reproducible output for tests (NOT private)")
    p.add_argument("--json", action="store_true",
                   help="emit {text, report} per line (the report states the guarantee, the ledger "
                        "charge and whether the output is seeded)")
    p.add_argument("--trusted-key", action="append", default=None,
                   help="public key to trust (repeatable); default: the local trust store")
    p.add_argument("--allow-unsigned", action="store_true", help="development bundles only")
    p.add_argument("--skip-bad-lines", action="store_true",
                   help="skip lines that are not UTF-8 or cannot be sanitized: no output line for them, "
                        "their count and line numbers (never their text) on stderr; default: stop with an "
                        "error naming the line (a file: before any output)")
    add_pinning_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Sanitize ``args.input`` line by line with the bundle ``args.bundle``.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of :func:`register`.

    Returns
    -------
    int
        Exit status 0 (errors are raised and reported by the CLI without echoing input text).

    Notes
    -----
    Each output line is ε·d(x, x')-MLDP (SanText, worst case ε·D_max-LDP per token) or
    (V_S, V_P, ε, ε₀)-UMLDP with ε₀ = ln(1/p) (SanText+: non-sensitive words in the clear with
    probability 1 − p, no finite worst-case LDP level) per token, for any two lines of the same
    length; every JSON report says ``seeded: true`` when ``--seed`` made it reproducible and not
    private. Yue et al. 2021, *Differential
    Privacy for Text Analytics via Natural Text Sanitization* (Findings of ACL), as presented in
    Yue 2023, *Data Synthesis: Boosting Utility and Privacy in NLP* (PhD thesis, Ohio State), §2.4,
    Theorems 1–2.
    """
    from ..santext import Sanitizer

    san = Sanitizer.load(args.bundle, trusted_keys=args.trusted_key,
                         allow_unsigned=args.allow_unsigned, seed=args.seed,
                         expect=expectation_from_args(args))
    with san:
        process(args.input, san.sanitize_batch, args.json, BATCH, skip_bad_lines=args.skip_bad_lines)
    return 0
