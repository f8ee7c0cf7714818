"""Command-line options the comparison mechanisms' ``ldptext precompute`` targets share."""
from __future__ import annotations

import argparse
from typing import Any


def number(text: str) -> float:
    """A float argument (range checks are the builders': a ParameterError gives exit status 2)."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def add_common_options(p: argparse.ArgumentParser) -> None:
    """``--embeddings``, ``--epsilon``, ``--vocab-size``, ``--out`` and the signing options.

    Parameters
    ----------
    p : argparse.ArgumentParser
        A target's parser.
    """
    from ldptext.commands.keys import add_signing_options

    p.add_argument("--embeddings", required=True,
                   help="glove-6b-50d, minilm-wordpiece, or a GloVe text / .npy file (public embeddings)")
    p.add_argument("--epsilon", type=number, required=True,
                   help="ε (finite, > 0; 'inf' and values that overflow to inf are refused)")
    p.add_argument("--vocab-size", type=int, default=None,
                   help="word-level embeddings: keep the N most frequent words (GloVe default 50000)")
    add_signing_options(p)
    p.add_argument("--out", required=True, help="bundle file to write")


def add_weak_privacy_option(p: argparse.ArgumentParser) -> None:
    """``--allow-weak-privacy``: build a bundle whose median sensitive word is released unchanged
    with probability >= 0.9 (:data:`ldptext.verbatim.NEAR_IDENTITY_MEDIAN`), refused otherwise."""
    p.add_argument("--allow-weak-privacy", action="store_true",
                   help="accept an epsilon at which the median sensitive word is released unchanged with "
                        "probability >= 0.9 (refused otherwise); the bundle and every report then say so")


def report_written(path: Any) -> int:
    """Print the written bundle's path and size; exit status 0."""
    print(f"wrote {path} ({path.stat().st_size / 2**20:.1f} MiB)")
    return 0
