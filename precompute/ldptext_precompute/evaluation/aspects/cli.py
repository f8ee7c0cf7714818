"""``ldptext evaluate-aspects``: meaning, style, divergence, re-identification and profiling per mechanism and ε.

Parses arguments and calls :func:`.runner.evaluate_aspects`; see that module for what is measured.
"""
from __future__ import annotations

from ldptext.errors import ParameterError


def register(sub) -> None:
    """Add the ``evaluate-aspects`` sub-command and its options to the ``ldptext`` parser's registry."""
    from ..cli import _baselines, _epsilons, _names
    from .corpus import CORPORA

    p = sub.add_parser(
        "evaluate-aspects", help="what sanitized text keeps and gives away: meaning, style, divergence, "
                                 "author re-identification and profiling over a sweep of epsilon",
        description="Sanitize an authored corpus with every mechanism at each epsilon (the bundles and seeded "
                    "releases of ldptext evaluate) and measure meaning preservation (BERTScore, Frechet distance), "
                    "style preservation (POS-trigram scores and JSD), divergence (1 - BLEU, character-trigram JSD), "
                    "author re-identification and party profiling against chance and the unsanitized text; write "
                    "aspects.json, aspects.md and one PNG per aspect to --out. Finished releases are kept in "
                    "OUT/checkpoints; re-running the same command resumes.")
    p.add_argument("--corpus", default="conventions-2012", choices=CORPORA,
                   help="authored corpus (default conventions-2012: 2012 US convention speeches, speaker and party)")
    p.add_argument("--doc-words", type=int, default=50, help="words per document (default 50)")
    p.add_argument("--docs-per-author", type=int, default=12, help="documents per author (default 12)")
    p.add_argument("--max-authors", type=int, default=None, help="at most this many authors, half per party")
    p.add_argument("--mechanism", type=_names, default=["santext", "santext+", "tem", "custext", "custext+", "cmp"],
                   help="comma list of token mechanisms (default santext,santext+,tem,custext,custext+,cmp); "
                        "DP-BART is added by --dpbart-bundle")
    p.add_argument("--baselines", type=_baselines, default=["none", "random"],
                   help="random and/or none (the unsanitized reference, always reported)")
    p.add_argument("--embeddings", default="glove-6b-50d", help="glove-6b-50d | minilm-wordpiece | PATH")
    p.add_argument("--vocab-size", type=int, default=20_000, help="word-level vocabulary size (default 20000)")
    p.add_argument("--epsilon", type=_epsilons, default=[1.0, 2.0, 3.0], help="comma list of ε (default 1,2,3)")
    p.add_argument("--p", type=float, default=0.3, help="SanText+ p (default 0.3)")
    p.add_argument("--seeds", type=int, default=1, help="releases per configuration (default 1)")
    p.add_argument("--seed-base", type=int, default=0,
                   help="first seed of the releases' seeded streams, as ldptext evaluate's (default 0)")
    p.add_argument("--k", type=int, default=5, help="k of top-k re-identification (default 5)")
    p.add_argument("--dpbart-bundle", default=None, help="a DP-BART bundle: adds DP-BART rewriting")
    p.add_argument("--dpbart-epsilon", type=_epsilons, default=None, help="DP-BART ε per chunk (default --epsilon)")
    p.add_argument("--dpbart-delta", type=float, default=1e-5, help="δ per chunk, Gaussian noise (default 1e-5)")
    p.add_argument("--trusted-key", action="append", default=None, help="public key the DP-BART signer must be")
    p.add_argument("--allow-unsigned", action="store_true", help="accept an unsigned DP-BART bundle")
    p.add_argument("--cache-dir", default=None, help="bundle cache (default ~/.cache/ldptext/evaluate)")
    p.add_argument("--out", default="aspects", help="output directory (default ./aspects)")
    p.add_argument("--fresh", action="store_true", help="ignore the checkpoints of an earlier run")
    p.add_argument("--no-plots", action="store_true", help="no PNG plots")
    p.add_argument("--quiet", action="store_true", help="no progress")
    p.set_defaults(func=run)


def run(args) -> int:
    """Run the sweep described by the parsed options and print where the outputs went (exit status 0)."""
    import sys

    from .runner import AspectsConfig, evaluate_aspects

    if args.vocab_size < 0 or args.seeds < 1 or args.k < 1:
        raise ParameterError("--vocab-size must be >= 0, --seeds and --k >= 1")
    cfg = AspectsConfig(
        out=args.out, corpus=args.corpus, doc_words=args.doc_words, docs_per_author=args.docs_per_author,
        max_authors=args.max_authors, mechanisms=args.mechanism, baselines=args.baselines, embeddings=args.embeddings,
        vocab_size=args.vocab_size or None, epsilons=args.epsilon, p=args.p, seeds=args.seeds,
        seed_base=args.seed_base, k=args.k, dpbart_bundle=args.dpbart_bundle, dpbart_epsilons=args.dpbart_epsilon,
        dpbart_delta=args.dpbart_delta, trusted_keys=args.trusted_key, allow_unsigned=args.allow_unsigned,
        cache_dir=args.cache_dir, resume=not args.fresh, progress=not args.quiet, plots=not args.no_plots,
        command=" ".join(["ldptext", *sys.argv[1:]]))
    results = evaluate_aspects(cfg)
    print(f"wrote {args.out}/aspects.json, aspects.md and {len(results.get('plots', []))} plots "
          f"in {results['wall_time_s']:.0f} s")
    return 0
