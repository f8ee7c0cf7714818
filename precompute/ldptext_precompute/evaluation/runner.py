"""The privacy–utility sweep behind ``ldptext evaluate``.

It compares SanText and SanText+ (Yue et al. 2021, *Differential Privacy for Text Analytics via
Natural Text Sanitization* (Findings of ACL), as presented in Yue 2023, *Data Synthesis: Boosting
Utility and Privacy in NLP* (PhD thesis, Ohio State), §2.4–2.5, whose Table 2.1 lays out the
comparison) with the baselines of that table: the unsanitized text, uniform random replacement and
CMP/FBDD (Feyisetan et al. 2020, *Privacy- and Utility-Preserving Textual Analysis via Calibrated
Multivariate Perturbations* (WSDM)) at the same ε. BLEU against the input is reported as a leakage
measure as in Igamberdiev & Habernal 2023, *DP-BART for Privatized Text Rewriting under Local
Differential Privacy* (Findings of ACL), as presented in Igamberdiev 2023, *Differentially Private
Methods in NLP* (PhD thesis), §6.4–6.5.

:func:`evaluate` is a short sequence of steps, each a function of its own module: the configuration
(:mod:`.config`), the bundles (:mod:`.bundles`), the shared state and checkpoint store (:mod:`.sweep`),
the privacy profiles (:mod:`.profiles`), the releases of the corpus (:mod:`.sampling`), the utility
runs (:mod:`.scoring`) and the outputs (:mod:`.output`):

1. **load the data** (:func:`.datasets.load_dataset`);
2. **bundles** — verify the DP-BART bundle when one is given (``dpbart_bundle``: signed by a trusted key,
   or unsigned with ``allow_unsigned``; a bundle of another mechanism fails here, before anything is
   sampled); build (or reuse from the cache) one unsigned bundle per SanText mechanism and ε;
3. **tokenise** the data set once with the bundles' shared tokenizer, and build the attacker's public
   ``wordfreq`` prior (:func:`.attacks.wordfreq_prior`);
4. **privacy, exact** — one pass over the whole input domain per SanText configuration
   (:func:`.metrics.profile_mechanism`): N_x, S_x, S_y*, H₀/H₁/H₂/H∞ and the Bayes-optimal inversion
   attack, summarised over the vocabulary and over the data set's tokens (weighted by occurrences);
   the formula rows are checked against the sampler on a sample of rows;
5. **privacy of the baselines** — closed forms for the unsanitized and the random release; CMP has no
   closed-form distribution, so only its empirical quantities are reported;
6. **utility, per seed** — sanitize the training and test text, train each classifier (:mod:`.utility`:
   TF-IDF and/or frozen MiniLM sentence embeddings, ``classifiers``) on sanitized training text, score
   it on sanitized and on original test text; BLEU of every sanitized document against its input; the
   empirical unchanged-token rate and the empirical success of the exact Bayes decoder on the sample
   drawn, and the embedding nearest-neighbour inversion attack (:func:`.attacks.nearest_neighbour_inversion`,
   success@1 and @10, every mechanism including CMP); then mean and sample standard deviation (ddof = 1)
   over seeds. **DP-BART** (Igamberdiev & Habernal 2023, as above, §6.3.3–6.3.5; :class:`ldptext.dpbart.Rewriter`)
   at each of its ε (``dpbart_epsilons``, per chunk) rewrites every training and test document
   (``long="split"``, greedy decoding, ``dpbart_mechanism`` noise with ``dpbart_delta``), then the same
   classifiers and BLEU; its guarantee is document-level (ε, δ)-LDP (:class:`.records.DocumentLevelPrivacy`,
   from the Rewriter's reports), and the token-level metrics, the Bayes and nearest-neighbour attacks and
   the unchanged-token rate do not apply (the output is not aligned with the input);
7. **write** ``results.json`` (:class:`.records.Results`: every number, the configuration, versions,
   timings, warnings), ``report.md`` (:mod:`.report`) and PNG plots (:mod:`.plots`), each atomically.

The data are checked in step 1, before anything is sampled (:func:`.datasets.load_dataset`), and the
unsanitized configuration is scored first in step 6, so a classifier problem shows before any
sampling. **Warnings** (a class with fewer than :data:`.datasets.MIN_TRAIN_PER_CLASS` training
documents, test labels never seen in training, an unsanitized classifier that does not beat the
majority-class rate) go to stderr as they are found, to ``results.json`` (``warnings``) and to
``report.md``.

**Checkpoints.** Every finished stage is kept under ``OUT/checkpoints/``
(:class:`ldptext_precompute.checkpoints.CheckpointStore`), each file written atomically and named by a hash of
everything that determines it: the exact privacy profile of each SanText bundle, the sanitized sample of the
corpus for each (mechanism, ε, seed) — token ids, i.e. the sanitized text, which is the user's data and stays
in the user's output directory; DP-BART's rewritten texts with their chunk counts and a report — and each
utility run (classifier scores, chosen hyper-parameters, BLEU, attack), and the MiniLM embeddings of every
text list embedded (float16, keyed by the SHA-256 of the texts; embeddings of the original text too, so they
stay with the data). A re-run with the same arguments recomputes only what is missing, so a late failure loses
nothing; ``resume=False`` recomputes (and overwrites) everything. **Shards** (``shard="K/N"``) split step 6
between N runs at once over the same ``OUT``: each scores every N-th configuration into the checkpoints and
writes no report; the bundles and profiles are computed by the first of them under a lock and read by the
others; a run without ``shard`` afterwards reads every utility run from the checkpoints and writes the report.

Seeds: by default each seed uses a seeded :class:`ldptext.rng.Generator` (reproducible experiment
mode, **not private**; the results say so), DP-BART a Rewriter seeded the same way;
``reproducible=False`` uses OS-keyed generators (and the Rewriter's private randomness).
Raw text is never logged, and is written nowhere except the sanitized-sample checkpoints in ``OUT``.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Iterator

import numpy as np
from filelock import FileLock

from . import runlog
from .attacks import wordfreq_prior
from .bundles import load_bundles, load_dpbart
from .config import (BASELINES, DEFAULT_DPBART_DELTA, DPBART, DPBART_NOISE, MECHANISMS, SANTEXT_MECHANISMS,
                     EvaluationConfig)
from .console import Warnings, log
from .datasets import Dataset, dataset_warnings, load_dataset
from ..epsilon import normalize_epsilons
from .output import assemble_results, command_line, write_outputs
from .profiles import dpbart_entries, profile_baselines, profile_mechanisms
from .scoring import measure_utility
from .sweep import CHECKPOINT_DIR, Corpus, Sweep, TokenDomain, checkpoint_store, rank, seed_int, timed
from .utility import classifier_settings
from ..santext.embeddings import describe_vocabulary

__all__ = ["EvaluationConfig", "evaluate", "command_line", "seed_int", "MECHANISMS", "SANTEXT_MECHANISMS",
           "BASELINES", "DPBART", "DPBART_NOISE", "DEFAULT_DPBART_DELTA", "CHECKPOINT_DIR"]


def evaluate(config: EvaluationConfig | None = None, **overrides) -> dict:
    """Run the sweep, write ``results.json``, ``report.md`` and the plots; return the results.

    ``evaluate(out="eval", epsilons=[1, 2, 3])`` is the same as ``evaluate(EvaluationConfig(...))``.

    Parameters
    ----------
    config : EvaluationConfig, optional
        The sweep (default: ``EvaluationConfig()``).
    **overrides
        Fields of :class:`EvaluationConfig` replacing those of ``config``.

    Returns
    -------
    dict
        The ``results.json`` document (:meth:`.records.Results.to_dict`), before JSON conversion
        (numbers may be numpy scalars or NaN); for a shard (``shard``) only ``shard``,
        ``configurations`` (how many it scored), ``timings`` and ``reused``.

    Raises
    ------
    ParameterError
        On an invalid configuration (:meth:`EvaluationConfig.validate`).
    """
    cfg = _resolve_config(config, overrides)
    created = not Path(cfg.out).exists()
    began, started = runlog.now(), time.perf_counter()
    try:
        return _sweep(cfg, began, started)
    except BaseException as e:
        _record_stopped_run(cfg, began, time.perf_counter() - started, e)
        if created:
            _remove_empty_tree(Path(cfg.out))   # a failed run leaves no empty output folder behind
        raise


def _record_stopped_run(cfg: EvaluationConfig, began: float, seconds: float, error: BaseException) -> None:
    """Record a run that stopped (Ctrl-C, SIGTERM, an error) after keeping checkpoints, so that the report of
    the run that resumes it counts its time (:mod:`.runlog`); nothing when it kept none."""
    root = Path(cfg.out) / CHECKPOINT_DIR
    try:
        if not root.is_dir() or not any(p.is_file() and not p.name.startswith(".") and p.name != runlog.RUNS_FILE
                                         for p in root.iterdir()):
            return
        stopped = isinstance(error, (KeyboardInterrupt, SystemExit))
        runlog.record_run(root, cfg, began, seconds, "interrupted" if stopped else "failed")
    except Exception:   # never hide why the run stopped
        pass


def _sweep(cfg: EvaluationConfig, began: float, started: float) -> dict:
    """The steps of :func:`evaluate` on a validated configuration (``began``: its start, seconds since the
    epoch; ``started``: the same instant on ``time.perf_counter``)."""
    timings: dict[str, float] = {}
    out, cache = _prepare_directories(cfg)
    notes = Warnings()
    with timed(timings, "load_data_s"):
        ds = _load_data(cfg)
    notes.extend(dataset_warnings(ds))
    with _one_shard_at_a_time(cfg, out):  # what every shard needs: computed once, read by the others
        with timed(timings, "bundles_s"):
            dpbart = load_dpbart(cfg)   # first: a wrong or untrusted bundle fails before anything is built
            bundles = load_bundles(cfg, cache)
        domain = TokenDomain.of(next(iter(bundles.values())).sanitizer)
        with timed(timings, "tokenize_and_prior_s"):
            corpus = Corpus(ds, domain.reference)
            prior = wordfreq_prior(domain.reference.vocab, domain.reference.valid_input)
        store = checkpoint_store(out, cfg, ds)
        sweep = Sweep(cfg, corpus, domain, prior, _column_pool(cfg, corpus, domain), bundles, store,
                      classifiers=[classifier_settings(c) for c in cfg.classifiers], cache_dir=cache,
                      dpbart=dpbart)
        with timed(timings, "privacy_profiles_s"):
            entries = profile_mechanisms(sweep)
        entries += dpbart_entries(sweep) + profile_baselines(sweep)
    with timed(timings, "utility_s"):
        measure_utility(sweep, entries, notes)
    if store.reused:
        log(cfg, "resumed from " + ", ".join(f"{n} {k}" for k, n in sorted(store.reused.items()))
            + f" checkpoints in {store.root}")
    timings["total_s"] = time.perf_counter() - started
    runs = runlog.record_run(store.root, cfg, began, timings["total_s"], "finished")
    timings["all_runs_s"] = runlog.total_seconds(runs)
    timings["runs"] = len(runs)
    if cfg.shard is not None:  # its share is in the checkpoints; the whole run writes the report
        scored = sum(e.utility is not None for e in entries)
        log(cfg, f"shard {cfg.shard}: {scored} of {len(entries)} configurations scored into {store.root}")
        return {"shard": cfg.shard, "configurations": scored, "timings": timings, "reused": dict(store.reused)}
    return write_outputs(cfg, assemble_results(cfg, ds, entries, timings, notes, reused=store.reused,
                                               vocabulary=describe_vocabulary(list(domain.reference.vocab)),
                                               runs=runs), out)


@contextmanager
def _one_shard_at_a_time(cfg: EvaluationConfig, out: Path) -> Iterator[None]:
    """For a sharded run (``cfg.shard``), an exclusive lock on ``out/checkpoints`` (``filelock``, as the
    ledger's) around the steps every shard shares (bundles, privacy profiles), so that only the first
    computes them and the others read its checkpoints; nothing for a whole run."""
    if cfg.shard is None:
        yield
        return
    root = out / CHECKPOINT_DIR
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / ".shared-steps.lock")):
        yield


def _remove_empty_tree(root: Path) -> None:
    """Remove ``root`` and its sub-directories when no file is anywhere under it (else leave it all)."""
    if not root.is_dir() or any(p.is_file() or p.is_symlink() for p in root.rglob("*")):
        return
    for d in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        d.rmdir()
    root.rmdir()


def _resolve_config(config: EvaluationConfig | None, overrides: dict) -> EvaluationConfig:
    """The configuration to run: ``config`` (or the default) with ``overrides`` applied, validated."""
    cfg = config or EvaluationConfig()
    if overrides:
        cfg = EvaluationConfig(**{**asdict(cfg), **overrides})
    given = {"": list(cfg.epsilons or []), "DP-BART ": list(cfg.dpbart_epsilons or [])}
    cfg.validate()   # equal ε once, ascending: say so
    for what, values in given.items():
        note = normalize_epsilons(values)[1] if values else None
        if note:
            log(cfg, f"{what}{note}")
    return cfg


def _prepare_directories(cfg: EvaluationConfig) -> tuple[Path, Path]:
    """Create (if needed) and return the output directory and the bundle cache."""
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    cache = Path(cfg.cache_dir) if cfg.cache_dir else Path.home() / ".cache" / "ldptext" / "evaluate"
    cache.mkdir(parents=True, exist_ok=True)
    return out, cache


def _load_data(cfg: EvaluationConfig) -> Dataset:
    """Step 1: the labelled train and test text (counts are logged, never text)."""
    ds = load_dataset(cfg.data, text_col=cfg.text_col, label_col=cfg.label_col, test=cfg.test,
                      test_fraction=cfg.test_fraction, split_seed=cfg.split_seed,
                      max_train=cfg.max_train, max_test=cfg.max_test)
    log(cfg, f"data: {ds.name}, {len(ds.train_texts)} train / {len(ds.test_texts)} test")
    return ds


def _column_pool(cfg: EvaluationConfig, corpus: Corpus, domain: TokenDomain) -> np.ndarray:
    """The outputs S_y* may be computed for: ``cfg.columns`` outputs in a seeded hash order, plus the
    data set's ``cfg.columns`` most frequent tokens; int64, sorted.
    """
    top_data = np.argsort(-corpus.counts, kind="stable")[:cfg.columns]
    top_data = top_data[corpus.counts[top_data] > 0]
    sampled = rank(f"columns:{cfg.seed_base}", domain.outputs)[:cfg.columns]
    return np.union1d(sampled, top_data)
