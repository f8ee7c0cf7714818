"""``ldptext precompute custext``: build a signed CusText / CusText+ bundle (Chen et al. 2023)."""
from __future__ import annotations

import argparse
from typing import Any

from ldptext import registry

from ..metricdp.cli_options import add_common_options, add_weak_privacy_option, report_written


def register(targets: Any) -> None:
    """Add the ``custext`` target to ``ldptext precompute``.

    Parameters
    ----------
    targets : argparse._SubParsersAction
        The sub-parsers of ``ldptext precompute``.
    """
    p = targets.add_parser("custext", help="CusText / CusText+ bundle from embeddings",
                           description="Build a signed CusText(+) bundle: public output sets of >= K tokens, "
                                       "exact exponential-mechanism tables (eps-LDP within an output set).")
    add_common_options(p)
    p.add_argument("--mechanism", choices=registry.names(family="custext"), default="custext",
                   help="custext, or custext+ (stop words released unchanged, never output)")
    p.add_argument("--k", type=int, default=20, help="K, the minimum output-set size (paper: 20)")
    p.add_argument("--similarity", choices=["euclidean", "cosine"], default="euclidean",
                   help="similarity of the mapping and sampling functions")
    p.add_argument("--non-sensitive", default=None, metavar="SPLIT",
                   help="custext+: the stop words: 'function-words' (default), 'frequency:W' or a FILE "
                        "with one word per line")
    p.add_argument("--device", default="auto", help="faiss k-NN device: auto (GPU when present), cpu, cuda")
    add_weak_privacy_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the bundle (:func:`ldptext_precompute.custext.build.build_custext_bundle`).

    Parameters
    ----------
    args : argparse.Namespace

    Returns
    -------
    int
        Exit status 0 (errors are raised and mapped to exit statuses by the CLI).
    """
    from ldptext.commands.keys import signing_from_args

    from .build import build_custext_bundle

    return report_written(build_custext_bundle(
        args.out, embeddings=args.embeddings, epsilon=args.epsilon, mechanism=args.mechanism, k=args.k,
        similarity=args.similarity, non_sensitive=args.non_sensitive, vocab_size=args.vocab_size,
        device=args.device, progress=True, allow_weak_privacy=args.allow_weak_privacy,
        **signing_from_args(args)))
