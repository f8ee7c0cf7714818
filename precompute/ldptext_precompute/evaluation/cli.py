"""``ldptext evaluate``: the privacy–utility sweep.

Parses arguments and calls :func:`ldptext_precompute.evaluation.runner.evaluate`; see that module for
what is measured.
"""
from __future__ import annotations

import argparse
import math
import sys

from ldptext.errors import ParameterError
from ..santext.cli import add_verbatim_cap_option


def _floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("expected a comma-separated list of numbers") from None


def _epsilons(text: str) -> list[float]:
    """``--epsilon``: finite numbers > 0. ε = ∞ is refused: the unsanitized row is the ``none`` baseline."""
    values = _floats(text)
    if not values:
        raise argparse.ArgumentTypeError("expected at least one epsilon")
    for raw, v in zip([x.strip() for x in text.split(",") if x.strip()], values):
        if math.isnan(v):
            raise argparse.ArgumentTypeError(f"epsilon {raw!r} is not a number")
        if math.isinf(v):
            raise argparse.ArgumentTypeError(
                f"epsilon {raw!r} is infinite (or overflows to inf): epsilon = inf is no privacy and is not "
                "swept; the unsanitized text is the 'none' baseline (--baselines)")
        if v <= 0:
            raise argparse.ArgumentTypeError(f"epsilon {raw!r} must be > 0")
    return values


def _split_w(text: str) -> float | None:
    """``--non-sensitive``: ``frequency:W`` gives W; ``function-words`` (always evaluated) gives None."""
    from .rows import split_w

    try:
        return split_w(text)
    except ParameterError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _names(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _baselines(text: str) -> list[str]:
    return [] if text.strip().lower() in ("", "no", "off") else _names(text)


def _classifiers(text: str) -> list[str]:
    """``--classifier``: ``tfidf``, ``minilm``, ``finetune``, ``both`` (= ``tfidf,minilm``) or a comma list."""
    names = _names(text)
    return ["tfidf", "minilm"] if names == ["both"] else names


def register(sub) -> None:
    """Add the ``evaluate`` sub-command and its options.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        The ``ldptext`` parser's sub-command registry.
    """
    p = sub.add_parser(
        "evaluate", help="privacy–utility evaluation over a sweep of epsilon",
        description="Sanitize a labelled data set with SanText / SanText+, the comparison mechanisms, the "
                    "baselines and (with --dpbart-bundle) DP-BART at each epsilon; write results.json, "
                    "report.md and PNG plots to --out. Finished stages are kept in OUT/checkpoints; "
                    "re-running the same command resumes.")
    p.add_argument("--data", default="rotten-tomatoes",
                   help="FILE.csv | FILE.tsv | FILE.jsonl | rotten-tomatoes (built in; default)")
    p.add_argument("--text-col", default="text",
                   help="name of the text column / JSON key of --data and --test (default text)")
    p.add_argument("--label-col", default="label",
                   help="name of the label column / JSON key of --data and --test (default label)")
    p.add_argument("--test", default=None, help="separate test file (default: a deterministic "
                                                "stratified 80/20 split of --data)")
    p.add_argument("--mechanism", type=_names, default=["santext", "santext+"],
                   help="comma list of santext, santext+ and the comparison mechanisms tem, custext, "
                        "custext+, cmp (the faiss bundle; replaces the cmp baseline), mahalanobis (default: "
                        "santext,santext+); DP-BART is added by --dpbart-bundle")
    p.add_argument("--embeddings", default="glove-6b-50d",
                   help="glove-6b-50d | minilm-wordpiece | PATH")
    p.add_argument("--vocab-size", type=int, default=20_000,
                   help="word-level vocabulary size (most frequent GloVe words; default 20000; "
                        "0 = the embeddings' default)")
    p.add_argument("--epsilon", type=_epsilons, default=[1.0, 2.0, 3.0],
                   help="comma list of finite ε > 0 to sweep (default 1,2,3; numerically equal values once, in "
                        "ascending order); 'inf' is refused: the unsanitized text is the 'none' baseline")
    p.add_argument("--p", type=float, default=0.3, help="SanText+ p (default 0.3)")
    split = p.add_mutually_exclusive_group()
    split.add_argument("--w", type=float, default=None,
                       help="SanText+: also evaluate the paper's frequency split (the fraction w of least frequent "
                            "words sensitive; the paper uses 0.9), as the row 'SanText+ (frequency split w)'. "
                            "The row 'SanText+ (default split)', what ldptext precompute santext builds by default "
                            "(function words non-sensitive), is always evaluated")
    split.add_argument("--non-sensitive", type=_split_w, default=None, dest="non_sensitive", metavar="SPLIT",
                       help="SanText+: 'frequency:W' is the same as --w W; 'function-words' (the default split, "
                            "always evaluated) adds nothing")
    add_verbatim_cap_option(p, default=None,
                            help="build the SanText / SanText+ bundles with every sensitive word released unchanged "
                                 "with probability at most TAU (a word above it is not an output), as ldptext "
                                 "precompute santext does by default with 0.5; 'none' (default): no cap. The cap "
                                 "is part of the bundle's cache name; the comparison mechanisms are built as "
                                 "before")
    p.add_argument("--baselines", type=_baselines, default=["none", "random", "cmp"],
                   help="comma list of none, random, cmp; 'no' for none (default: all)")
    p.add_argument("--classifier", type=_classifiers, default=["tfidf"],
                   help="utility classifier: tfidf (TF-IDF + logistic regression; default), minilm (frozen "
                        "all-MiniLM-L6-v2 sentence embeddings, ONNX Runtime on CPU, + the same tuned logistic "
                        "regression; a few ms per document), finetune (all-MiniLM-L6-v2 fine-tuned end to end "
                        "with PyTorch, as the papers' BERT; minutes per run on a CPU, the GPU when torch sees "
                        "one), both (= tfidf,minilm) or a comma list")
    p.add_argument("--dpbart-bundle", default=None,
                   help="a DP-BART bundle (ldptext precompute dpbart): adds DP-BART (document-level LDP rewriting) "
                        "to the sweep as mechanism 'dpbart'; verified like ldptext rewrite does (--trusted-key, "
                        "--allow-unsigned)")
    p.add_argument("--dpbart-epsilon", type=_epsilons, default=None,
                   help="comma list of DP-BART's epsilon per chunk (default: the --epsilon list); its scale is "
                        "not the token mechanisms' (the README's example uses 500)")
    p.add_argument("--dpbart-delta", type=float, default=1e-5,
                   help="DP-BART delta per chunk for the Gaussian mechanism, in (0, 1) (default 1e-5: the Rewriter "
                        "has none of its own)")
    p.add_argument("--dpbart-mechanism", choices=["gaussian", "laplace"], default="gaussian",
                   help="DP-BART noise: gaussian ((epsilon, delta)-LDP; the Rewriter's default) or laplace (pure "
                        "epsilon)")
    p.add_argument("--trusted-key", action="append", default=None,
                   help="public key the DP-BART bundle's signer must be (repeatable); default: the local trust "
                        "store")
    p.add_argument("--allow-unsigned", action="store_true",
                   help="accept an unsigned (development) DP-BART bundle")
    p.add_argument("--seeds", type=int, default=3, help="repetitions per configuration (3)")
    p.add_argument("--seed-base", type=int, default=0,
                   help="base from which every repetition's seeds are derived (default 0); another base "
                        "gives other draws")
    p.add_argument("--private-rng", action="store_true",
                   help="draw from OS-keyed generators instead of reproducible seeded ones")
    p.add_argument("--threshold", type=float, default=0.95,
                   help="cumulative threshold of S_x and S_y* (0.95)")
    p.add_argument("--columns", type=int, default=500, help="outputs sampled for S_y* (500)")
    p.add_argument("--max-train", type=int, default=None,
                   help="use at most N training documents (default: all). This bounds the sampling and the "
                        "classifiers, not the run: bundles and exact privacy profiles cover the whole vocabulary")
    p.add_argument("--max-test", type=int, default=None,
                   help="use at most N test documents (default: all); see --max-train")
    p.add_argument("--cache-dir", default=None,
                   help="where evaluation bundles are cached (~/.cache/ldptext/evaluate)")
    p.add_argument("--fresh", action="store_true",
                   help="recompute every stage instead of resuming from the checkpoints in "
                        "OUT/checkpoints (which hold sanitized samples of your data)")
    p.add_argument("--no-plots", action="store_true", help="write no PNG plots (results.json and report.md only)")
    p.add_argument("--shard", default=None, metavar="K/N",
                   help="score only every N-th configuration, from the K-th (0-based), into OUT/checkpoints and "
                        "write no report: run N of these at once (one per core), then once without --shard to "
                        "write the report from their checkpoints (make evaluate-paper EVAL_PAPER_JOBS=N)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--out", required=True, help="output directory")
    p.set_defaults(func=run)


def run(args) -> int:
    """Run the sweep described by the parsed options and print where the outputs went.

    Parameters
    ----------
    args : argparse.Namespace
        Options of :func:`register`'s parser.

    Returns
    -------
    int
        Exit status 0.

    Raises
    ------
    ParameterError
        On an invalid option value.
    """
    from .console import interrupted_message, resume_command
    from .output import wall_time_text
    from .runner import EvaluationConfig, command_line, evaluate

    if args.vocab_size is not None and args.vocab_size < 0:
        raise ParameterError("--vocab-size must be >= 0")
    cfg = EvaluationConfig(
        out=args.out, data=args.data, text_col=args.text_col, label_col=args.label_col,
        test=args.test, mechanisms=args.mechanism, embeddings=args.embeddings,
        vocab_size=args.vocab_size or None, epsilons=args.epsilon, p=args.p,
        w=args.w if args.w is not None else args.non_sensitive,
        baselines=args.baselines, classifiers=args.classifier, seeds=args.seeds, seed_base=args.seed_base,
        reproducible=not args.private_rng, threshold=args.threshold, columns=args.columns,
        max_train=args.max_train, max_test=args.max_test, cache_dir=args.cache_dir,
        verbatim_cap=args.verbatim_cap,
        dpbart_bundle=args.dpbart_bundle, dpbart_epsilons=args.dpbart_epsilon, dpbart_delta=args.dpbart_delta,
        dpbart_mechanism=args.dpbart_mechanism, trusted_keys=args.trusted_key, allow_unsigned=args.allow_unsigned,
        resume=not args.fresh, progress=not args.quiet, plots=not args.no_plots, shard=args.shard,
        command=command_line())
    try:
        results = evaluate(cfg)
    except KeyboardInterrupt:   # Ctrl-C: say what is kept and how to resume, then exit 130 (ldptext.cli)
        print(interrupted_message(args.out, resume_command("evaluate"), args.cache_dir), file=sys.stderr)
        raise
    if args.shard is not None:
        print(f"shard {args.shard}: scored {results['configurations']} configurations into "
              f"{args.out}/checkpoints in {results['timings']['total_s']:.0f} s; run without --shard for the report")
        return 0
    print(f"wrote {args.out}/results.json, report.md and "
          f"{len(results.get('plots', []))} plots in {wall_time_text(results['timings'])}")
    return 0
