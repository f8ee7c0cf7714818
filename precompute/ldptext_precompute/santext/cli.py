"""``ldptext precompute santext``: build a signed SanText(+) bundle from public embeddings."""
from __future__ import annotations

import argparse
from typing import Any

from ldptext import registry
from ldptext.commands.keys import add_signing_options, signing_from_args

from .clusters import DEFAULT_CLUSTERS, OUTPUTS_PER_DEFAULT
from .knn import DEFAULT_HEAD_SIZE


def _positive_float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def _cap_or_none(text: str) -> float | None:
    """``TAU|none``: a probability in (0, 1], or ``none`` (no cap)."""
    if text.strip().lower() == "none":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a probability or 'none': {text!r}") from None
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError("the verbatim cap must be in (0, 1] (or 'none')")
    return value


def verbatim_cap_arg(text: str) -> "float | str | None":
    """``--verbatim-cap``: a probability in (0, 1], ``none`` for no cap, or ``default``."""
    from .build import DEFAULT

    if text == DEFAULT:  # (argparse passes a string default through this too)
        return DEFAULT
    return _cap_or_none(text)


def add_verbatim_cap_option(p: argparse.ArgumentParser, *, help: str, default: Any = None) -> None:
    """``--verbatim-cap TAU|none``, one option for every command that takes it (``precompute santext``,
    ``demo``, ``evaluate``).

    Parameters
    ----------
    p : argparse.ArgumentParser
    help : str
        What the cap does for this command.
    default : float, None or ``build.DEFAULT``
        The value without the option; ``build.DEFAULT`` (the builders' own default, resolved later) also
        lets the word ``default`` through; otherwise only ``TAU`` or ``none`` parse.
    """
    from .build import DEFAULT

    p.add_argument("--verbatim-cap", type=verbatim_cap_arg if default == DEFAULT else _cap_or_none,
                   default=default, metavar="TAU", help=help)


def add_verbatim_options(p: argparse.ArgumentParser) -> None:
    """``--verbatim-cap`` and ``--identifier-outputs`` (SanText(+) builds)."""
    from .build import DEFAULT, DEFAULT_VERBATIM_CAP

    add_verbatim_cap_option(
        p, default=DEFAULT,
        help=f"every sensitive word is released unchanged with probability at most TAU (default "
             f"{DEFAULT_VERBATIM_CAP:g}; 'none': no cap; with --allow-weak-privacy the default is "
             f"none): a word that would exceed it is not an output (never released; it is still "
             f"sanitized from its own row); stated in the manifest and checked at load")
    p.add_argument("--identifier-outputs", action="store_true",
                   help="keep identifier-shaped tokens (phone numbers, postal codes, 5+ digit strings, e-mail "
                        "addresses, URLs) as outputs; by default they are never released")


def register(targets: Any) -> None:
    """Add the ``santext`` target to ``ldptext precompute``.

    Parameters
    ----------
    targets : argparse._SubParsersAction
        The sub-parser collection of ``ldptext precompute``.
    """
    p = targets.add_parser("santext", help="SanText / SanText+ bundle from embeddings",
                           description="Build a signed SanText(+) bundle (exact sampler tables).")
    p.add_argument("--embeddings", required=True,
                   help="glove-6b-50d, minilm-wordpiece, or a GloVe text / .npy file")
    p.add_argument("--epsilon", type=_positive_float, required=True,
                   help="metric ε (finite, > 0; 'inf' and values that overflow to inf, e.g. 1e309, are refused)")
    p.add_argument("--mechanism", choices=registry.names(family="santext"), default="santext+",
                   help="santext (every token sampled) or santext+ (default: non-sensitive words kept in "
                        "the clear with probability 1 - p)")
    p.add_argument("--p", type=_positive_float, default=0.3,
                   help="SanText+: probability of sanitizing a non-sensitive token (0, 1]")
    p.add_argument("--non-sensitive", default=None, metavar="SPLIT",
                   help="SanText+: the non-sensitive words, released in the clear with probability 1 - p: "
                        "'function-words' (default: closed-class function words and punctuation), "
                        "'frequency:W' (the paper's split: the fraction W of least frequent tokens is "
                        "sensitive, by a public frequency list), or a FILE with one word per line; "
                        "special and out-of-vocabulary rows are always sensitive")
    p.add_argument("--w", type=_positive_float, default=None,
                   help="SanText+: same as --non-sensitive frequency:W")
    p.add_argument("--vocab-size", type=int, default=None,
                   help="word-level embeddings: keep the N most frequent words (GloVe default 50000)")
    p.add_argument("--head-size", type=int, default=DEFAULT_HEAD_SIZE,
                   help=f"alias-table head size K (default {DEFAULT_HEAD_SIZE}); the same exact distribution at "
                        "any K. The bundle grows about linearly with K. Measured with 16 tail clusters: MiniLM "
                        "WordPiece 23.5 MiB at K=32 vs 33.7 at 64 and no slower; GloVe-50k 22.6-28.9 MiB at 32 "
                        "vs 39.4-51.8 at 64, the same speed at epsilon 1, 1.15x the time at 3, about 2x at "
                        "10-15 (benchmarks/bench_bundle_size.py)")
    p.add_argument("--tail-clusters", type=int, default=None,
                   help=f"tail clusters C, 1-256 (default {DEFAULT_CLUSTERS} per {OUTPUTS_PER_DEFAULT:,} outputs, at "
                        "most 256): per row and cluster, a bound that lets the sampler refuse far tail "
                        "candidates without their distance (same distribution; V*C bytes; 1 = none)")
    p.add_argument("--allow-weak-privacy", action="store_true",
                   help="accept an epsilon at which the median sensitive word is released unchanged with "
                        "probability >= 0.9 (refused otherwise); the bundle and every report then say so")
    add_verbatim_options(p)
    add_signing_options(p)
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, or numpy")
    p.add_argument("--cache-dir", default=None, help="reuse ε-independent neighbour tables here")
    p.add_argument("--out", required=True, help="bundle file to write")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the bundle the options describe (:func:`ldptext_precompute.santext.build.build_santext_bundle`).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of :func:`register`.

    Returns
    -------
    int
        Exit status 0 (errors raise ``ParameterError`` / ``BundleError``, reported by the CLI).
    """
    from .build import build_santext_bundle

    path = build_santext_bundle(
        args.out, embeddings=args.embeddings, epsilon=args.epsilon, mechanism=args.mechanism,
        p=args.p, w=args.w, non_sensitive=args.non_sensitive, vocab_size=args.vocab_size,
        head_size=args.head_size, tail_clusters=args.tail_clusters,
        **signing_from_args(args), device=args.device, cache_dir=args.cache_dir,
        progress=True, allow_weak_privacy=args.allow_weak_privacy, verbatim_cap=args.verbatim_cap,
        identifier_outputs=args.identifier_outputs)
    print(f"wrote {path} ({path.stat().st_size / 2**20:.1f} MiB)")
    return 0
