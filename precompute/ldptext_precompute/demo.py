"""``ldptext demo``: build (once, cached) a default SanText+ bundle from the packaged GloVe 6B-50d
embeddings and sanitize ``examples/sample.txt``, printing each line, its sanitized version and the
privacy report."""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

DEFAULT_SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample.txt"


def register(sub: Any) -> None:
    """Add the ``demo`` command to an argparse sub-parser collection.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        The ``add_subparsers()`` result of the ``ldptext`` command line.
    """
    p = sub.add_parser("demo", help="build a default bundle (cached) and sanitize a sample")
    p.add_argument("--cache", default=str(Path.home() / ".cache" / "ldptext"))
    p.add_argument("--embeddings", default="glove-6b-50d")
    p.add_argument("--vocab-size", type=int, default=50_000)
    p.add_argument("--epsilon", type=float, default=3.0)
    p.add_argument("--mechanism", choices=["santext", "santext+"], default="santext+")
    # w = 0.98 of 50,000 words leaves the ~1,000 most frequent (function words, "the", "was")
    # non-sensitive; the paper's w = 0.9 was for a ~15,000-word task vocabulary
    p.add_argument("--w", type=float, default=0.98)
    p.add_argument("--p", type=float, default=0.3)
    p.add_argument("--input", default=str(DEFAULT_SAMPLE))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build (first run only) the demo bundle, then sanitize each line of ``args.input``.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of :func:`register`.

    Returns
    -------
    int
        Exit status 0.

    Notes
    -----
    Prints each line, its sanitization and the privacy report: per token ε·d(x, x')-MLDP (SanText)
    or (V_S, V_P, ε, ε₀)-UMLDP with ε₀ = ln(1/p) (SanText+), for any two tokens x, x' of the input
    domain; Yue et al. 2021, *Differential Privacy for Text Analytics via Natural Text Sanitization*
    (Findings of ACL), as presented in Yue 2023, *Data Synthesis: Boosting Utility and Privacy in
    NLP* (PhD thesis, Ohio State), §2.4, Theorems 1–2.
    """
    from ldptext.santext import Sanitizer

    cache = Path(args.cache)
    tag = f"{args.embeddings}-{args.vocab_size}-{args.mechanism}-eps{args.epsilon:g}"
    if args.mechanism == "santext+":
        tag += f"-w{args.w:g}-p{args.p:g}"
    bundle = cache / f"demo-{tag}.ldpb"
    if not bundle.exists():
        from ldptext_precompute.santext.build import build_santext_bundle

        print(f"building {bundle.name} (first run only) ...", flush=True)
        t0 = time.perf_counter()
        vocab_size = None if args.embeddings == "minilm-wordpiece" else args.vocab_size
        build_santext_bundle(bundle, embeddings=args.embeddings, epsilon=args.epsilon,
                             mechanism=args.mechanism, vocab_size=vocab_size, p=args.p, w=args.w,
                             cache_dir=cache / "neighbours", progress=True)
        print(f"built in {time.perf_counter() - t0:.1f} s", flush=True)
    t0 = time.perf_counter()
    san = Sanitizer.load(bundle)
    print(f"loaded {bundle} in {1000 * (time.perf_counter() - t0):.0f} ms "
          f"(signed by key {san.key_id})\n")
    if san.mechanism == "santext+":
        print(f"SanText+: the {100 * (1 - san.w):.0f}% most frequent words (public wordfreq list) are "
              f"non-sensitive and kept unchanged with probability {1 - san.p:.1f}; every other "
              f"word is replaced by a sample. See README, 'What is and is not protected'.\n")
    lines = [line for line in Path(args.input).read_text(encoding="utf-8").splitlines() if line.strip()]
    for original, result in zip(lines, san.sanitize_batch(lines)):
        print(f"original : {original}")
        print(f"sanitized: {result.text}")
        print(f"report   : {result.report.summary()}\n")
    return 0
