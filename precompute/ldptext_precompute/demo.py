"""``ldptext demo``: build (once, cached) a default SanText+ bundle from the packaged GloVe 6B-50d
embeddings and sanitize the sample text shipped with the package
(``ldptext_precompute/data/sample.txt``), printing each line, its sanitized version and the
privacy report."""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from ldptext import registry

# package data, so `pip install .[precompute]` then `ldptext demo` works outside a checkout
DEFAULT_SAMPLE = Path(__file__).resolve().parent / "data" / "sample.txt"


def register(sub: Any) -> None:
    """Add the ``demo`` command to an argparse sub-parser collection.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        The ``add_subparsers()`` result of the ``ldptext`` command line.
    """
    p = sub.add_parser("demo", help="build a default bundle (cached) and sanitize a sample")
    p.add_argument("--cache", default=str(Path.home() / ".cache" / "ldptext"),
                   help="folder for the demo bundle and neighbour cache (default: ~/.cache/ldptext)")
    p.add_argument("--embeddings", default="glove-6b-50d", help="packaged embeddings (default: glove-6b-50d)")
    p.add_argument("--vocab-size", type=int, default=50_000, help="most frequent words kept (default: 50000)")
    p.add_argument("--epsilon", type=float, default=3.0, help="per-token metric epsilon (default: 3)")
    p.add_argument("--mechanism", choices=registry.names(family="santext"), default="santext+",
                   help="mechanism of the demo bundle (default: santext+)")
    # default: only closed-class function words and punctuation are non-sensitive (released in the
    # clear w.p. 1 - p); --non-sensitive frequency:W is the paper's split by public frequency, which
    # also releases names, places, digits and words like "hospital" or "police"
    p.add_argument("--non-sensitive", default="function-words", metavar="SPLIT",
                   help="function-words (default), frequency:W, or a FILE with one word per line")
    p.add_argument("--p", type=float, default=0.3,
                   help="SanText+: probability a non-sensitive word is also sampled (default: 0.3)")
    from ldptext_precompute.santext.cli import add_verbatim_options

    add_verbatim_options(p)
    p.add_argument("--input", default=str(DEFAULT_SAMPLE),
                   help="text file, one document per line (default: the packaged sample)")
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
    or (V_S, V_P, ε, ε₀)-UMLDP with ε₀ = ln(1/p) (SanText+; its non-sensitive function words are
    released in the clear with probability 1 − p), for any two tokens x, x' of the input domain;
    Yue et al. 2021, *Differential Privacy for Text Analytics via Natural Text Sanitization*
    (Findings of ACL), as presented in Yue 2023, *Data Synthesis: Boosting Utility and Privacy in
    NLP* (PhD thesis, Ohio State), §2.4, Theorems 1–2.
    """
    from ldptext.santext import Sanitizer

    cache = Path(args.cache)
    tag = f"{args.embeddings}-{args.vocab_size}-{args.mechanism}-eps{args.epsilon:g}"
    if args.mechanism == "santext+":
        split = args.non_sensitive.replace(":", "").replace("/", "_")
        tag += f"-{split}-p{args.p:g}"
    from ldptext_precompute.santext.build import resolve_verbatim_cap

    cap = resolve_verbatim_cap(args.verbatim_cap, False)
    # the cap and the identifier rule change the tables: a bundle cached without them is not reused
    tag += f"-cap{'none' if cap is None else f'{cap:g}'}" + ("-idout" if args.identifier_outputs else "-noid")
    # outputs are only tokens the tokenizer reads back as themselves (every runtime refuses others):
    # a bundle cached before that rule is not reused
    tag += "-readback"
    bundle = cache / f"demo-{tag}.ldpb"
    if not bundle.exists():
        from ldptext_precompute.santext.build import build_santext_bundle

        print(f"building {bundle.name} (first run only) ...", flush=True)
        t0 = time.perf_counter()
        vocab_size = None if args.embeddings == "minilm-wordpiece" else args.vocab_size
        build_santext_bundle(bundle, embeddings=args.embeddings, epsilon=args.epsilon,
                             mechanism=args.mechanism, vocab_size=vocab_size, p=args.p,
                             non_sensitive=args.non_sensitive, verbatim_cap=cap,
                             identifier_outputs=args.identifier_outputs,
                             cache_dir=cache / "neighbours", progress=True)
        print(f"built in {time.perf_counter() - t0:.1f} s", flush=True)
    # The demo signed its bundle with this machine's developer key, so it trusts that key for this one
    # load only; an app trusts its publisher's key (``ldptext keys trust``), never a self-made one.
    from ldptext.keys import developer_public_key

    dev = developer_public_key()
    t0 = time.perf_counter()
    san = Sanitizer.load(bundle, trusted_keys=[dev] if dev is not None else None)
    print(f"loaded {bundle} in {1000 * (time.perf_counter() - t0):.0f} ms "
          f"(signed by this machine's developer key {san.key_id}, trusted for the demo only)\n")
    rate = san.verbatim
    capped = (f"at most {rate.cap:g} (the bundle's cap)" if rate is not None and rate.cap is not None
              else "no stated cap")
    if san.mechanism == "santext+":
        n_kept = int(san.tables.keep_row.sum())
        print(f"SanText+: {n_kept} non-sensitive words ({san.manifest['params'].get('non_sensitive')}) are "
              f"kept unchanged with probability {1 - san.p:.1f}; every other word is replaced by a "
              f"sample, which is the word itself with probability {capped}. See README, 'What is and "
              f"is not protected'.\n")
    lines = [line for line in Path(args.input).read_text(encoding="utf-8").splitlines() if line.strip()]
    for original, result in zip(lines, san.sanitize_batch(lines)):
        print(f"original : {original}")
        print(f"sanitized: {result.text}")
        print(f"report   : {result.report.summary()}\n")
    return 0
