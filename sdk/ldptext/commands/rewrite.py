"""``ldptext rewrite``: DP-BART rewriting, one document per line in, one rewritten line out.

Same order, streaming (input handling in ``_io.py``: UTF-8 only, a bad line is reported by number,
never echoed). Lines are rewritten :data:`BATCH` at a time; each line's output is the same whatever
the other lines of its batch are (every chunk is encoded, noised and decoded on its own).
"""
from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from ..errors import ParameterError
from ._io import process, progress_from_args
from ._ledger import add_ledger_options, attach_ledger, check_ledger_options
from ._pinning import add_pinning_options, expectation_from_args
from ._trust import add_trusted_key_option, explained_trust

BATCH = 16


def _epsilon(text: str, allow_infinite: bool) -> float:
    """The value of ``--epsilon``: a finite number > 0, or ∞ only with ``--allow-infinite-epsilon``."""
    try:
        value = float(text)
    except ValueError:
        raise ParameterError(f"--epsilon must be a number, got {text!r}") from None
    if math.isnan(value):
        raise ParameterError(f"--epsilon must be a number > 0, got {text!r} (not a number)")
    if value <= 0:
        raise ParameterError(f"--epsilon must be > 0, got {text!r}")
    if math.isinf(value) and not allow_infinite:
        what = "is infinite" if text.strip().lower().lstrip("+") in ("inf", "infinity") else \
            "is too large for a float and overflows to inf"
        raise ParameterError(f"--epsilon {text!r} {what}: epsilon = inf adds no noise and the output would "
                             "not be private; it is refused unless --allow-infinite-epsilon is given "
                             "(evaluation only)")
    return value


def register(sub: Any) -> None:
    """Add ``ldptext rewrite`` to the CLI.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        The CLI's sub-parsers.
    """
    p = sub.add_parser("rewrite", help="rewrite documents with DP-BART (document-level LDP)")
    p.add_argument("input", nargs="?", default="-", help="file with one document per line, or - (stdin)")
    p.add_argument("--bundle", required=True, help="a dpbart bundle")
    p.add_argument("--epsilon", required=True, type=str,
                   help="ε per release (chunk): a finite number > 0; 'inf' (or a value that overflows to "
                        "inf, e.g. 1e400) only with --allow-infinite-epsilon")
    p.add_argument("--delta", type=float, default=None, help="δ per release for the Gaussian mechanism, in (0, 1)")
    p.add_argument("--mechanism", choices=["gaussian", "laplace"], default="gaussian",
                   help="gaussian: discrete Gaussian, (ε, δ)-LDP, needs --delta (default); laplace: discrete "
                        "Laplace, pure (ε, 0)-LDP")
    p.add_argument("--beam", type=int, default=1, help="beam size (1 = greedy)")
    p.add_argument("--long", choices=["split", "truncate", "refuse"], default="split",
                   help="documents longer than L: split into chunks (k releases), truncate, or refuse")
    p.add_argument("--seed", type=int, default=None,
                   help="reproducible output for tests (NOT private; every report says seeded: true)")
    p.add_argument("--json", action="store_true",
                   help="emit {text, report} per line (the report: per-chunk and composed (ε, δ), n, C, Δ, "
                        "the exact noise parameter, seeded, evaluation_only)")
    p.add_argument("--threads", type=int, default=None, help="ONNX Runtime threads")
    add_trusted_key_option(p)
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress on stderr: input line, share of the file, rate; never text (default: when "
                        "stderr is a terminal)")
    p.add_argument("--allow-unsigned", action="store_true", help="development bundles only")
    p.add_argument("--allow-infinite-epsilon", action="store_true",
                   help="evaluation only: accept --epsilon inf, which adds NO noise (no privacy); every "
                        "report says private: false, evaluation_only: true")
    p.add_argument("--allow-weak-privacy", action="store_true",
                   help="accept a finite epsilon whose noise is below 0.1 C per coordinate (the output is close "
                        "to the non-private rewrite; refused otherwise); every report then says private: false, "
                        "weak_privacy: true")
    p.add_argument("--skip-bad-lines", action="store_true",
                   help="skip lines that are not UTF-8 or cannot be rewritten (e.g. too long under --long "
                        "refuse): no output line for them, their numbers on stderr; each line is still "
                        "rewritten (released) at most once")
    add_pinning_options(p, epsilon=False)  # a DP-BART bundle fixes no ε: it is chosen per call
    add_ledger_options(p, delta=True)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Rewrite the input lines to stdout.

    Parameters
    ----------
    args : argparse.Namespace

    Returns
    -------
    int
        0 on success (errors raise ``LdptextError`` subclasses; the CLI maps them to exit codes).

    Notes
    -----
    Each line is a document; each chunk of it is one (ε, δ)-LDP release, neighbouring relation
    "replace the whole chunk" (Igamberdiev & Habernal 2023, *DP-BART for Privatized Text Rewriting
    under Local Differential Privacy* (Findings of ACL), as presented in Igamberdiev 2023,
    *Differentially Private Methods in NLP* (PhD thesis, TU Darmstadt), §6.3.3–6.3.5).
    """
    from .. import noise as _noise
    from ..dpbart import LONG_POLICIES, Rewriter

    # every option value is checked before the bundle is opened: a usage error is reported as one
    eps = _epsilon(args.epsilon, args.allow_infinite_epsilon)
    _noise.validate_privacy_parameters(eps, args.delta, args.mechanism)
    if not 1 <= args.beam <= 64:
        raise ParameterError(f"--beam must be between 1 and 64, got {args.beam}")
    if args.long not in LONG_POLICIES:  # pragma: no cover - argparse's choices
        raise ParameterError(f"--long must be one of {LONG_POLICIES}")
    check_ledger_options(args)
    if math.isinf(eps) and args.ledger is not None:
        raise ParameterError("--allow-infinite-epsilon releases are not private and cannot be charged to "
                             "--ledger")
    if math.isinf(eps):
        print("ldptext: warning: epsilon = inf adds no noise; the output is NOT private "
              "(evaluation only)", file=sys.stderr)
    with explained_trust(args.bundle, args.trusted_key):
        rw = Rewriter.load(args.bundle, trusted_keys=args.trusted_key, allow_unsigned=args.allow_unsigned,
                           seed=args.seed, threads=args.threads, expect=expectation_from_args(args))
    opts = dict(epsilon=eps, delta=args.delta, mechanism=args.mechanism, beam=args.beam, long=args.long,
                allow_infinite_epsilon=args.allow_infinite_epsilon, allow_weak_privacy=args.allow_weak_privacy)
    rw.rewrite_batch([], **opts)  # the checks that need the bundle, before reading any input
    attach_ledger(rw, args, "ldp")
    process(args.input, lambda batch: rw.rewrite_batch(batch, **opts), args.json, BATCH,
            skip_bad_lines=args.skip_bad_lines, progress=progress_from_args(args))
    return 0
