"""``ldptext sanitize``: one document per line in, one sanitized line out, same order, streaming
(input handling in ``_io.py``: UTF-8 only; a bad file is refused before any output, standard input
stops at a bad line; ``--skip-bad-lines`` skips such lines instead, with no output line for them;
never echoes text). The input format is ``--format``, else the extension of ``--input`` or
``--output`` (:data:`EXTENSIONS`), else lines: ``jsonl`` and ``csv`` sanitize the field / column
``--column`` and pass the others through (``_table.py``); ``parquet`` one column of a Parquet file
into another, on this process or with ``--engine spark`` (``_parquet.py``, docs/spark.md). Every
``--output`` file is written whole or not at all.

Any token-level bundle: the runtime is chosen by the mechanism of the **verified** manifest
(:func:`ldptext.runtime.load_token_runtime`: signature, trusted signer, hashes and pins first, through
:func:`ldptext.runtime.open_bundle`), one of the token mechanisms of :mod:`ldptext.registry` — SanText(+)
(:class:`ldptext.Sanitizer`), TEM (:class:`ldptext.TEMSanitizer`), CusText(+)
(:class:`ldptext.CusTextSanitizer`), CMP and Mahalanobis (:class:`ldptext.CMPSanitizer`; the ``faiss``
extra). A DP-BART bundle is refused with a pointer to ``ldptext rewrite``. See docs/mechanisms.md."""
from __future__ import annotations

import argparse
import os
from typing import Any

from ..errors import ParameterError
from ..runtime import load_token_runtime
from ._io import check_output_path, process, progress_from_args
from ._ledger import add_ledger_options, attach_ledger, check_ledger_options
from ._pinning import add_pinning_options, expectation_from_args
from ._trust import add_trusted_key_option, explained_trust

BATCH = 256
FORMATS = ("lines", "jsonl", "csv", "parquet")
#: the format a file name's extension stands for (case-insensitive); others say nothing
EXTENSIONS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


def register(sub: Any) -> None:
    """Add the ``sanitize`` command.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        The ``add_subparsers()`` result of the ``ldptext`` command line.
    """
    p = sub.add_parser("sanitize", help="sanitize text token by token with a SanText(+), TEM, CusText(+), "
                                        "CMP or Mahalanobis bundle")
    p.add_argument("input", nargs="?", default="-",
                   help="the input file (UTF-8; by --format: one document per line, JSONL, CSV or Parquet), "
                        "or - for standard input (default)")
    p.add_argument("--bundle", required=True, metavar="FILE",
                   help="the signed bundle (.ldpb) to sanitize with: santext, santext+, tem, custext, custext+, "
                        "cmp or mahalanobis (the runtime follows the verified manifest; dpbart: use "
                        "`ldptext rewrite`)")
    p.add_argument("--seed", type=int, default=None,
                   help="reproducible output for tests (NOT private)")
    p.add_argument("--json", action="store_true",
                   help="emit {text, report} per line (the report states the guarantee, the ledger "
                        "charge and whether the output is seeded)")
    add_trusted_key_option(p)
    p.add_argument("--allow-unsigned", action="store_true", help="development bundles only")
    p.add_argument("--allow-weak-privacy", action="store_true",
                   help="accept a SanText(+) bundle whose median sensitive word is released unchanged with "
                        "probability >= 0.9 (refused otherwise); every report then says so")
    p.add_argument("--skip-bad-lines", action="store_true",
                   help="skip lines that are not UTF-8 or cannot be sanitized: no output line for them, "
                        "their count and line numbers (never their text) on stderr; default: stop with an "
                        "error naming the line (a file: before any output)")
    add_pinning_options(p)
    add_ledger_options(p, delta=False)
    _add_file_options(p)
    _add_parquet_options(p)
    p.set_defaults(func=run)


def _add_file_options(p: Any) -> None:
    """Input and output files and their format: lines, JSONL, CSV (``_table.py``) or Parquet."""
    group = p.add_argument_group("files and formats (lines, JSONL, CSV, Parquet)")
    group.add_argument("--input", dest="input_file", default=None, metavar="FILE",
                       help="the input file (the same as the positional INPUT)")
    group.add_argument("--format", choices=FORMATS, default=None,
                       help="lines: one document per line (default); jsonl: one JSON object per line; csv: "
                            "a header row, then records; parquet. Default: by the extension of --input or "
                            "--output (.jsonl/.ndjson, .csv, .parquet/.pq), else lines")
    group.add_argument("--column", default=None, metavar="NAME",
                       help="jsonl, csv, parquet: the field / column that holds the text (a string; null "
                            "stays null); every other one is passed through unchanged and per-row report "
                            "fields (ldp_epsilon, ldp_tokens, ...) are appended")
    group.add_argument("--output", default=None, metavar="FILE",
                       help="write here instead of standard output, in the input's format (Parquet: "
                            "required); written to a temporary file beside it and renamed when complete: "
                            "a run that stops leaves no output")
    group.add_argument("--overwrite", action="store_true",
                       help="replace an existing --output (a second sanitized copy releases every row again)")
    group.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                       help="progress on stderr: input line (or row group), share of the file, rate; never "
                            "text (default: when stderr is a terminal)")


def _add_parquet_options(p: Any) -> None:
    """Parquet's engines: one process or Spark (``_parquet.py``, ``ldptext.spark``)."""
    group = p.add_argument_group("Parquet engine (one process with pyarrow, or Spark)")
    group.add_argument("--engine", choices=("local", "spark"), default="local",
                       help="local: this process, one row group at a time (default); spark: a Spark job")
    group.add_argument("--spark-master", default="local[*]", metavar="URL",
                       help="with --engine spark and no active session: the master (default local[*])")
    group.add_argument("--on-retry", choices=("fail", "resample"), default="fail",
                       help="with --engine spark: a retried task refuses (fail, default) or samples its "
                            "rows again and marks them (resample; see docs/spark.md)")


def _by_extension(path: str | None) -> str | None:
    if path is None or path == "-":
        return None
    return EXTENSIONS.get(os.path.splitext(path)[1].lower())


def resolve_format(args: argparse.Namespace) -> str:
    """The input and output format: ``--format``, else ``--engine spark`` (Parquet), else the
    extension of the input, else of the output, else lines.

    Raises
    ------
    ParameterError
        The output's extension names another format (a ``.csv`` file would hold JSONL), or
        ``--column`` is given for line input, or a table format lacks ``--column``.
    """
    by_input, by_output = _by_extension(args.input), _by_extension(args.output)
    fmt = args.format or ("parquet" if args.engine == "spark" else None) or by_input or by_output or "lines"
    if by_output is not None and by_output != fmt:
        raise ParameterError(f"--output {args.output} names a {by_output} file, but the input is {fmt}: the "
                             f"output has the input's format")
    if fmt == "lines" and args.column is not None:
        raise ParameterError("--column names a field of JSONL, CSV or Parquet input: give --format, or an "
                             "--input/--output file ending .jsonl, .csv or .parquet")
    if args.engine == "spark" and fmt != "parquet":
        raise ParameterError("--engine spark reads and writes Parquet only")
    return fmt



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
    The runtime follows the verified bundle's mechanism (:func:`ldptext.runtime.load_token_runtime`); each
    output line is,
    per token, for any two lines of the same length (the number of tokens is not hidden):

    * SanText: ε·d(x, x')-MLDP (worst case ε·D_max-LDP per token); SanText+: (V_S, V_P, ε, ε₀)-UMLDP
      with ε₀ = ln(1/p), non-sensitive words in the clear w.p. 1 − p, no finite worst-case LDP
      level. Yue et al. 2021 (Findings of ACL), as presented in Yue 2023, *Data Synthesis* (PhD
      thesis, Ohio State), §2.4, Theorems 1–2.
    * TEM: ε·min(d(x, x'), γ)-metric LDP, worst case ε·min(γ, D_max)-LDP. Carvalho et al. 2021,
      *TEM: High Utility Metric Differential Privacy on Text* (arXiv:2107.07928).
    * CusText(+): ε-LDP between inputs with the same output set; the output set is revealed;
      CusText+ releases its stop words unchanged. Chen et al. 2023 (Findings of ACL), §3.
    * CMP / Mahalanobis: ε·d(x, x')-metric LDP (Euclidean / regularized Mahalanobis), worst case
      ε·D_max-LDP. Feyisetan et al. 2020 (WSDM); Xu et al. 2020 (PrivateNLP@EMNLP).

    Every JSON report states its guarantee and neighbouring relation, the ledger charge and unit, and
    ``seeded: true`` when ``--seed`` made it reproducible and not private.
    """
    if args.input_file is not None:
        if args.input != "-":
            raise ParameterError("give the input once: as INPUT or as --input")
        args.input = args.input_file
    check_ledger_options(args)
    fmt = resolve_format(args)
    with explained_trust(args.bundle, args.trusted_key):
        if fmt == "parquet":
            from ._parquet import run_parquet

            return run_parquet(args)
        if fmt in ("jsonl", "csv"):
            from ._table import check_options, run_table

            check_options(args, fmt)
        if args.output is not None and args.output != "-":
            check_output_path(args.output, args.input, overwrite=args.overwrite)
        san = load_token_runtime(args.bundle, trusted_keys=args.trusted_key, allow_unsigned=args.allow_unsigned,
                                 seed=args.seed, expect=expectation_from_args(args),
                                 allow_weak_privacy=args.allow_weak_privacy)
        with san:
            attach_ledger(san, args, san.ledger_unit)
            if fmt == "lines":
                process(args.input, san.sanitize_batch, args.json, BATCH, skip_bad_lines=args.skip_bad_lines,
                        output=args.output, progress=progress_from_args(args), hint_jsonl=True)
            else:
                run_table(args, fmt, san)
    return 0
