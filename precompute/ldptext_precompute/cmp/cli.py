"""``ldptext precompute cmp`` and ``ldptext precompute mahalanobis``: signed noise-then-nearest-neighbour
bundles (Feyisetan et al. 2020; Xu et al. 2020) with a faiss index."""
from __future__ import annotations

import argparse
from typing import Any

from ..metricdp.cli_options import add_common_options, number, report_written


def register(targets: Any) -> None:
    """Add the ``cmp`` and ``mahalanobis`` targets to ``ldptext precompute``.

    Parameters
    ----------
    targets : argparse._SubParsersAction
        The sub-parsers of ``ldptext precompute``.
    """
    for name, title in (("cmp", "CMP (calibrated multivariate perturbation)"),
                        ("mahalanobis", "regularized Mahalanobis mechanism")):
        p = targets.add_parser(name, help=f"{title} bundle with a faiss index",
                               description=f"Build a signed {title} bundle: eps*d metric LDP per token, "
                                           "CSPRNG noise then the nearest output token (faiss).")
        add_common_options(p)
        p.add_argument("--index", choices=["flat", "hnsw"], default="flat",
                       help="flat: exact nearest neighbour; hnsw: approximate (same guarantee, faster)")
        if name == "mahalanobis":
            p.add_argument("--lam", type=number, default=0.5,
                           help="lambda in [0, 1]: Sigma_lambda = lambda Sigma + (1 - lambda) I")
        p.set_defaults(func=run, mechanism=name)


def run(args: argparse.Namespace) -> int:
    """Build the bundle (:func:`ldptext_precompute.cmp.build.build_cmp_bundle`).

    Parameters
    ----------
    args : argparse.Namespace

    Returns
    -------
    int
        Exit status 0.
    """
    from ldptext.commands.keys import signing_from_args

    from .build import build_cmp_bundle

    return report_written(build_cmp_bundle(
        args.out, embeddings=args.embeddings, epsilon=args.epsilon, mechanism=args.mechanism,
        lam=getattr(args, "lam", 0.5), index=args.index, vocab_size=args.vocab_size, progress=True,
        **signing_from_args(args)))
