"""``ldptext sanitize``: one document per line in, one sanitized line out, same order, streaming
(input handling in ``_io.py``: UTF-8 only; a bad file is refused before any output, standard input
stops at a bad line; ``--skip-bad-lines`` skips such lines instead, with no output line for them;
never echoes text). With ``--column`` it sanitizes one column of a Parquet file into another Parquet
file instead, on this process or with ``--engine spark`` (``_parquet.py``, docs/spark.md)."""
from __future__ import annotations

import argparse
from typing import Any

from ..errors import ParameterError
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
    _add_parquet_options(p)
    p.set_defaults(func=run)


def _add_parquet_options(p: Any) -> None:
    """Parquet in and out, one process or Spark (``_parquet.py``, ``ldptext.spark``)."""
    group = p.add_argument_group("Parquet (one column of a Parquet file into another; pyarrow, or Spark)")
    group.add_argument("--input", dest="input_file", default=None, metavar="FILE",
                       help="the input file (the same as the positional INPUT)")
    group.add_argument("--column", default=None, metavar="NAME",
                       help="sanitize this string column of the Parquet input (Parquet mode; needs --output)")
    group.add_argument("--output", default=None, metavar="FILE",
                       help="the Parquet output: the input's columns with COLUMN sanitized, plus per-row "
                            "report columns (ldp_epsilon, ldp_tokens, ...); written whole or not at all")
    group.add_argument("--overwrite", action="store_true",
                       help="replace an existing --output (a second sanitized copy releases every row again)")
    group.add_argument("--engine", choices=("local", "spark"), default="local",
                       help="local: this process, one row group at a time (default); spark: a Spark job")
    group.add_argument("--spark-master", default="local[*]", metavar="URL",
                       help="with --engine spark and no active session: the master (default local[*])")
    group.add_argument("--on-retry", choices=("fail", "resample"), default="fail",
                       help="with --engine spark: a retried task refuses (fail, default) or samples its "
                            "rows again and marks them (resample; see docs/spark.md)")
    group.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                       help="progress on stderr (default: when stderr is a terminal)")


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
    if args.input_file is not None:
        if args.input != "-":
            raise ParameterError("give the input once: as INPUT or as --input")
        args.input = args.input_file
    if args.column is not None or args.output is not None or args.engine != "local":
        from ._parquet import run_parquet

        return run_parquet(args)
    from ..santext import Sanitizer

    san = Sanitizer.load(args.bundle, trusted_keys=args.trusted_key,
                         allow_unsigned=args.allow_unsigned, seed=args.seed,
                         expect=expectation_from_args(args))
    with san:
        process(args.input, san.sanitize_batch, args.json, BATCH, skip_bad_lines=args.skip_bad_lines)
    return 0
