"""``ldptext precompute tem``: build a signed TEM bundle (Carvalho et al. 2021)."""
from __future__ import annotations

import argparse
from typing import Any

from ..metricdp.cli_options import add_common_options, add_weak_privacy_option, number, report_written


def register(targets: Any) -> None:
    """Add the ``tem`` target to ``ldptext precompute``.

    Parameters
    ----------
    targets : argparse._SubParsersAction
        The sub-parsers of ``ldptext precompute``.
    """
    p = targets.add_parser("tem", help="TEM bundle (truncated exponential mechanism) from embeddings",
                           description="Build a signed TEM bundle: eps*min(d, gamma) metric LDP per token, "
                                       "sampled exactly on the SanText engine.")
    add_common_options(p)
    p.add_argument("--beta", type=number, default=0.001,
                   help="beta in (0, 1): gamma = (2/eps) ln((1-beta)|O|/beta), so P(bot) <= beta (default 0.001)")
    p.add_argument("--gamma", type=number, default=None, help="the threshold gamma > 0 directly (overrides --beta)")
    p.add_argument("--head-size", type=int, default=64, help="alias-table head size K of the SanText engine")
    p.add_argument("--device", default="auto", help="neighbour search: auto, cpu, cuda, or numpy")
    p.add_argument("--cache-dir", default=None, help="reuse SanText's epsilon-independent neighbour tables here")
    add_weak_privacy_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the bundle (:func:`ldptext_precompute.tem.build.build_tem_bundle`).

    Parameters
    ----------
    args : argparse.Namespace

    Returns
    -------
    int
        Exit status 0.
    """
    from ldptext.commands.keys import signing_from_args

    from .build import build_tem_bundle

    return report_written(build_tem_bundle(
        args.out, embeddings=args.embeddings, epsilon=args.epsilon, beta=args.beta, gamma=args.gamma,
        vocab_size=args.vocab_size, head_size=args.head_size, device=args.device, cache_dir=args.cache_dir,
        progress=True, allow_weak_privacy=args.allow_weak_privacy, **signing_from_args(args)))
