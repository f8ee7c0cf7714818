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

:func:`evaluate` is a short sequence of steps, each a function below:

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

**Checkpoints.** Every finished stage is kept under ``OUT/checkpoints/`` (:class:`..checkpoints.CheckpointStore`), each
file written atomically and named by a hash of everything that determines it: the exact privacy profile
of each SanText bundle, the sanitized sample of the corpus for each (mechanism, ε, seed) — token ids,
i.e. the sanitized text, which is the user's data and stays in the user's output directory; DP-BART's
rewritten texts with their chunk counts and a report — and each
utility run (classifier scores, chosen hyper-parameters, BLEU, attack), and the MiniLM embeddings of
every text list embedded (float16, keyed by the SHA-256 of the texts; embeddings of the original text
too, so they stay with the data). A re-run with the same
arguments recomputes only what is missing, so a late failure loses nothing; ``resume=False`` recomputes
(and overwrites) everything.

Seeds: by default each seed uses a seeded :class:`ldptext.rng.Generator` (reproducible experiment
mode, **not private**; the results say so), DP-BART a Rewriter seeded the same way;
``reproducible=False`` uses OS-keyed generators (and the Rewriter's private randomness).
Raw text is never logged, and is written nowhere except the sanitized-sample checkpoints in ``OUT``.
"""
from __future__ import annotations

import hashlib
import json
import math
import platform
import shlex
import sys
import time
import warnings
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Iterator, NamedTuple

import numpy as np

from ldptext.errors import LdptextError, ParameterError
from ldptext.fileio import file_sha256, write_bytes_atomic
from . import metrics as M
from .attacks import empirical_attack_success, nearest_neighbour_inversion, nearest_neighbour_table, wordfreq_prior
from ..santext.knn import DEFAULT_HEAD_SIZE
from .baselines import CMPMechanism, random_replacement
from .datasets import Dataset, dataset_warnings, load_dataset
from .mechanisms import realised_agreement, santext_keep_rows, santext_log_prob_rows
from .records import (PRIOR_NAME, BundleInfo, DocumentLevelPrivacy, DPBartBundleInfo, EmpiricalOnlyPrivacy, Entry,
                      MechanismPrivacy, PrivacySummary, Results, SeedRun, UtilitySummary,
                      privacy_metric_definitions, randomness_description)
from ..bleu import bleu_tokenize, corpus_bleu
from ..checkpoints import CheckpointStore, jsonable
from .utility import (CLASSIFIERS, MINILM_DIM, ClassifierSettings, SentenceEmbeddingSettings, classifier_settings,
                      fit_and_score)
from ..metricdp import evaluation as _comparison
from ..progress import track

__all__ = ["EvaluationConfig", "evaluate", "command_line", "MECHANISMS", "BASELINES", "DPBART",
           "DPBART_NOISE", "DEFAULT_DPBART_DELTA"]

SANTEXT_MECHANISMS = ("santext", "santext+")
# the comparison mechanisms (TEM, CusText(+), CMP and Mahalanobis bundles): ldptext_precompute.metricdp.evaluation
MECHANISMS = SANTEXT_MECHANISMS + _comparison.COMPARISON_MECHANISMS
BASELINES = ("none", "random", "cmp")
#: The mechanism name of the DP-BART entries (enabled by ``dpbart_bundle``, not by ``mechanisms``).
DPBART = "dpbart"
#: The Rewriter's noise mechanisms.
DPBART_NOISE = ("gaussian", "laplace")
#: δ per chunk of the Gaussian mechanism. The Rewriter has no default (it requires δ with Gaussian noise,
#: its default); this is the value of the README's ``ldptext rewrite`` examples.
DEFAULT_DPBART_DELTA = 1e-5
#: Documents per ``Rewriter.rewrite_batch`` call (each document's chunks are rewritten alone either way).
DPBART_BATCH = 64


@dataclass
class EvaluationConfig:
    """Everything the sweep depends on (stored verbatim in ``results.json``).

    Attributes
    ----------
    out : str
        Output directory.
    data, text_col, label_col, test : str, str, str, str or None
        Data set (a file or ``rotten-tomatoes``), its columns and an optional separate test file.
    mechanisms : list of str
        SanText mechanisms to evaluate (from :data:`MECHANISMS`).
    embeddings : str
        ``glove-6b-50d``, ``minilm-wordpiece`` or a path to a text embedding file.
    vocab_size : int or None
        Word-level vocabulary size; None for the embeddings' default (always None for WordPiece).
    epsilons : list of float
        The ε of every mechanism and of CMP.
    p, w : float
        SanText+ parameters: probability of sanitizing a non-sensitive token, sensitive fraction.
    baselines : list of str
        Baselines to evaluate (from :data:`BASELINES`).
    classifiers : list of str
        Utility classifiers, by name (:data:`.utility.CLASSIFIERS`: ``tfidf``, ``minilm``); the first is
        the one of the top-level scores.
    seeds, seed_base : int
        Repetitions per configuration and the base of their seeds.
    reproducible : bool
        Seeded (reproducible, not private) generators; False for OS-keyed ones.
    threshold : float
        τ of S_x and S_y*.
    columns : int
        Outputs sampled for S_y* (the data set's most frequent tokens are added).
    agreement_rows : int
        Rows of each SanText formula compared with ``Sanitizer.log_probabilities``.
    test_fraction, split_seed : float, int
        Deterministic stratified train/test split when there is no separate test file.
    max_train, max_test : int or None
        Deterministic stratified subsets, for quick runs.
    cache_dir : str or None
        Where bundles are cached (default ``~/.cache/ldptext/evaluate``).
    resume : bool
        Reuse the checkpoints of finished stages under ``out/checkpoints`` (they are written either way).
    head_size : int
        Bundle head size.
    dpbart_bundle : str or None
        A ``dpbart`` bundle (``ldptext precompute dpbart``): adds the ``dpbart`` entries (the name
        ``dpbart`` in ``mechanisms`` requires it and is otherwise ignored).
    dpbart_epsilons : list of float or None
        DP-BART's ε per chunk (its scale is not the token mechanisms'); None: ``epsilons``.
    dpbart_delta : float
        δ per chunk of the Gaussian mechanism (:data:`DEFAULT_DPBART_DELTA`; 0 is recorded for Laplace).
    dpbart_mechanism : str
        ``gaussian`` (the Rewriter's default) or ``laplace``.
    trusted_keys : list of str or None
        Public keys the DP-BART bundle's signer must be among; None: the local trust store.
    allow_unsigned : bool
        Accept an unsigned (development) DP-BART bundle.
    progress, plots : bool
        Progress bars and log lines; PNG plots.
    command : str or None
        The command line, for the report.
    """

    out: str = "evaluation"
    data: str = "rotten-tomatoes"
    text_col: str = "text"
    label_col: str = "label"
    test: str | None = None
    mechanisms: list[str] = field(default_factory=lambda: ["santext", "santext+"])
    embeddings: str = "glove-6b-50d"
    vocab_size: int | None = 20_000
    epsilons: list[float] = field(default_factory=lambda: [1.0, 2.0, 3.0])
    p: float = 0.3
    w: float = 0.9
    baselines: list[str] = field(default_factory=lambda: ["none", "random", "cmp"])
    classifiers: list[str] = field(default_factory=lambda: ["tfidf"])
    seeds: int = 3
    seed_base: int = 0
    reproducible: bool = True
    threshold: float = M.DEFAULT_THRESHOLD
    columns: int = 500              # outputs sampled for S_y* (plus the data set's most frequent)
    agreement_rows: int = 16        # rows compared with Sanitizer.log_probabilities
    test_fraction: float = 0.2
    split_seed: int = 0
    max_train: int | None = None
    max_test: int | None = None
    cache_dir: str | None = None
    resume: bool = True
    head_size: int = DEFAULT_HEAD_SIZE
    dpbart_bundle: str | None = None
    dpbart_epsilons: list[float] | None = None
    dpbart_delta: float = DEFAULT_DPBART_DELTA
    dpbart_mechanism: str = "gaussian"
    trusted_keys: list[str] | None = None
    allow_unsigned: bool = False
    progress: bool = True
    plots: bool = True
    command: str | None = None      # the command line, for the report

    def validate(self) -> None:
        """Check every parameter (and clear ``vocab_size`` for the fixed WordPiece vocabulary).

        Raises
        ------
        ParameterError
            On an unknown mechanism or baseline, a non-positive or non-finite ε, p or w outside
            (0, 1], fewer than one seed, a threshold outside (0, 1], ``dpbart`` without a DP-BART
            bundle, a DP-BART δ outside (0, 1) or an unknown noise, or nothing to evaluate.
        """
        if self.embeddings == "minilm-wordpiece":
            self.vocab_size = None   # a fixed WordPiece vocabulary: no size to choose
        self._validate_dpbart()
        for m in self.mechanisms:
            if m not in MECHANISMS:
                raise ParameterError(f"unknown mechanism {m!r} (choose from {', '.join(MECHANISMS)})")
        for b in self.baselines:
            if b not in BASELINES:
                raise ParameterError(f"unknown baseline {b!r} (choose from {', '.join(BASELINES)})")
        if "cmp" in self.mechanisms:  # the CMP bundle supersedes the evaluation-only CMP baseline
            self.baselines = [b for b in self.baselines if b != "cmp"]
        if not self.epsilons or any(not (e > 0 and math.isfinite(e)) for e in self.epsilons):
            raise ParameterError("every epsilon must be a positive finite number")
        if not 0 < self.p <= 1 or not 0 < self.w <= 1:
            raise ParameterError("p and w must be in (0, 1]")
        if not self.classifiers or len(set(self.classifiers)) != len(self.classifiers) or any(
                c not in CLASSIFIERS for c in self.classifiers):
            raise ParameterError(f"classifiers must be distinct names from {', '.join(CLASSIFIERS)}")
        if self.seeds < 1:
            raise ParameterError("seeds must be >= 1")
        if not 0 < self.threshold <= 1:
            raise ParameterError("threshold must be in (0, 1]")
        if not self.mechanisms and not self.baselines and not self.dpbart_bundle:
            raise ParameterError("nothing to evaluate")

    def _validate_dpbart(self) -> None:
        """Check the DP-BART options; take ``dpbart`` out of ``mechanisms``; fill in ``dpbart_epsilons``."""
        if DPBART in self.mechanisms:
            if not self.dpbart_bundle:
                raise ParameterError("mechanism 'dpbart' needs a DP-BART bundle (--dpbart-bundle)")
            self.mechanisms = [m for m in self.mechanisms if m != DPBART]
        if not self.dpbart_bundle:
            return
        if self.dpbart_epsilons is None:
            self.dpbart_epsilons = list(self.epsilons)
        if not self.dpbart_epsilons or any(not (e > 0 and math.isfinite(e)) for e in self.dpbart_epsilons):
            raise ParameterError("every DP-BART epsilon must be a positive finite number")
        if self.dpbart_mechanism not in DPBART_NOISE:
            raise ParameterError(f"unknown DP-BART mechanism {self.dpbart_mechanism!r} (choose from "
                                 f"{', '.join(DPBART_NOISE)})")
        if self.dpbart_mechanism == "gaussian" and not 0 < self.dpbart_delta < 1:
            raise ParameterError("the DP-BART delta must be in (0, 1)")


# -- the sweep, step by step --------------------------------------------------------------------

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
        (numbers may be numpy scalars or NaN).

    Raises
    ------
    ParameterError
        On an invalid configuration (:meth:`EvaluationConfig.validate`).
    """
    cfg = _resolve_config(config, overrides)
    started = time.perf_counter()
    timings: dict[str, float] = {}
    out, cache = _prepare_directories(cfg)
    notes = _Warnings()
    with _timed(timings, "load_data_s"):
        ds = _load_data(cfg)
    notes.extend(dataset_warnings(ds))
    with _timed(timings, "bundles_s"):
        dpbart = _load_dpbart(cfg)       # first: a wrong or untrusted bundle fails before anything is built
        bundles = _load_bundles(cfg, cache)
    domain = _TokenDomain.of(next(iter(bundles.values())).sanitizer)
    with _timed(timings, "tokenize_and_prior_s"):
        corpus = _Corpus(ds, domain.reference)
        prior = wordfreq_prior(domain.reference.vocab, domain.reference.valid_input)
    store = _checkpoint_store(out, cfg, ds)
    sweep = _Sweep(cfg, corpus, domain, prior, _column_pool(cfg, corpus, domain), bundles, store,
                   classifiers=[classifier_settings(c) for c in cfg.classifiers], cache_dir=cache, dpbart=dpbart)
    with _timed(timings, "privacy_profiles_s"):
        entries = _profile_mechanisms(sweep)
    entries += _dpbart_entries(sweep) + _profile_baselines(sweep)
    with _timed(timings, "utility_s"):
        _measure_utility(sweep, entries, notes)
    if store.reused:
        _log(cfg, "resumed from " + ", ".join(f"{n} {k}" for k, n in sorted(store.reused.items()))
             + f" checkpoints in {store.root}")
    timings["total_s"] = time.perf_counter() - started
    return _write_outputs(cfg, _assemble_results(cfg, ds, entries, timings, notes), out)


def _resolve_config(config: EvaluationConfig | None, overrides: dict) -> EvaluationConfig:
    """The configuration to run: ``config`` (or the default) with ``overrides`` applied, validated."""
    cfg = config or EvaluationConfig()
    if overrides:
        cfg = EvaluationConfig(**{**asdict(cfg), **overrides})
    cfg.validate()
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
    _log(cfg, f"data: {ds.name}, {len(ds.train_texts)} train / {len(ds.test_texts)} test")
    return ds


def _load_bundles(cfg: EvaluationConfig, cache: Path) -> dict[tuple[str, float], _Bundle]:
    """Step 2: one loaded bundle per (SanText mechanism, ε), in the order of the configuration.

    When no SanText mechanism is evaluated, one SanText bundle at the first ε is still loaded: it gives
    the baselines their vocabulary, tokenizer and embeddings (and gets no entry of its own).
    """
    santext = [m for m in cfg.mechanisms if m in SANTEXT_MECHANISMS]
    wanted = replace(cfg, mechanisms=santext) if santext else replace(cfg, mechanisms=["santext"],
                                                                      epsilons=cfg.epsilons[:1])
    bundles = _load_sanitizers(wanted, cache)
    comparison = _comparison.load_comparison_bundles(
        cfg.mechanisms, cfg.epsilons, embeddings=cfg.embeddings, vocab_size=cfg.vocab_size, cache=cache,
        progress=cfg.progress, log=lambda msg: _log(cfg, msg))
    for key, (path, runtime) in comparison.items():
        bundles[key] = _Bundle(path, runtime, file_sha256(path))
    return bundles


def _column_pool(cfg: EvaluationConfig, corpus: _Corpus, domain: _TokenDomain) -> np.ndarray:
    """The outputs S_y* may be computed for: ``cfg.columns`` outputs in a seeded hash order, plus the
    data set's ``cfg.columns`` most frequent tokens; int64, sorted.
    """
    top_data = np.argsort(-corpus.counts, kind="stable")[:cfg.columns]
    top_data = top_data[corpus.counts[top_data] > 0]
    sampled = _rank(f"columns:{cfg.seed_base}", domain.outputs)[:cfg.columns]
    return np.union1d(sampled, top_data)


def _load_dpbart(cfg: EvaluationConfig) -> _DPBart | None:
    """Step 2a: the verified DP-BART bundle (None without one): signature and trusted signer (or an
    explicitly allowed unsigned bundle), mechanism ``dpbart``, hashes, then the Rewriter's own checks
    (DP-BART section, graphs, tokenizer).

    Raises
    ------
    BundleError
        A missing, corrupted, untrusted or unsigned bundle, or one of another mechanism; the message
        names the DP-BART bundle.
    """
    if not cfg.dpbart_bundle:
        return None
    from ldptext.dpbart import Rewriter
    from ldptext.dpbart_schema import MECHANISM
    from ldptext.runtime import open_bundle

    path = Path(cfg.dpbart_bundle)
    try:
        bundle = open_bundle(path, mechanisms=(MECHANISM,), trusted_keys=cfg.trusted_keys,
                             allow_unsigned=cfg.allow_unsigned)
        with Rewriter(bundle) as rw:
            info = DPBartBundleInfo.of(path, rw)
    except LdptextError as e:
        try:
            err = type(e)(f"DP-BART bundle (--dpbart-bundle) {path}: {e}")
        except TypeError:   # an error class with another signature: as it is
            raise e from None
        raise err from None
    signer = f"signed by {info.key_id}" if info.key_id else "UNSIGNED (allowed)"
    _log(cfg, f"DP-BART bundle: {info.variant}, L={info.seq_len}, {signer}")
    return _DPBart(path, bundle, file_sha256(path), info)


def _dpbart_entries(sweep: _Sweep) -> list[Entry]:
    """Step 5a: one DP-BART entry per ε (none without a DP-BART bundle). The guarantee's chunk counts and
    report come from the rewritten sample (:func:`_measure_utility`).
    """
    cfg = sweep.cfg
    if sweep.dpbart is None:
        return []
    return [Entry(mechanism=DPBART, epsilon=eps, bundle=sweep.dpbart.info,
                  privacy=DocumentLevelPrivacy(mechanism=cfg.dpbart_mechanism, epsilon=eps, delta=_dpbart_delta(cfg)))
            for eps in cfg.dpbart_epsilons]


def _dpbart_delta(cfg: EvaluationConfig) -> float:
    """δ per chunk: ``dpbart_delta`` for Gaussian noise, 0 for Laplace (pure ε)."""
    return cfg.dpbart_delta if cfg.dpbart_mechanism == "gaussian" else 0.0


def _profile_mechanisms(sweep: _Sweep) -> list[Entry]:
    """Step 4: the exact privacy profile of every evaluated SanText configuration, one entry each."""
    return [(_profile_santext if mech in SANTEXT_MECHANISMS else _profile_comparison)(sweep, mech, eps, bundle)
            for (mech, eps), bundle in sweep.bundles.items() if mech in sweep.cfg.mechanisms]


def _profile_comparison(sweep: _Sweep, mech: str, eps: float, bundle: _Bundle) -> Entry:
    """A comparison mechanism's entry: TEM / CusText(+) profiled exactly from their runtimes' realised
    law (as SanText), CMP / Mahalanobis with the estimated inversion attack
    (:mod:`ldptext_precompute.metricdp.evaluation`); each from its checkpoint when there is one.
    """
    cfg, domain, runtime = sweep.cfg, sweep.domain, bundle.sanitizer
    info = _comparison.bundle_info(bundle.path, runtime, domain.vocab_size)
    started = time.perf_counter()
    if mech in _comparison.ESTIMATED_MECHANISMS:
        key = {"stage": "attack-estimate", "bundle": bundle.digest, "mechanism": mech, "epsilon": eps,
               "seed_base": cfg.seed_base, "reproducible": cfg.reproducible, "prior": PRIOR_NAME,
               "estimator": _comparison.ESTIMATOR}
        seed = _seed_int(cfg, 0, f"attack:{mech}:{eps}") if cfg.reproducible else None
        estimate = sweep.store.cached_json(
            "profile", key, lambda: _comparison.estimate_inversion_attack(
                _comparison.load_runtime(mech, bundle.path, seed), sweep.corpus.counts, sweep.prior),
            lambda d: d, lambda d: d)
        _log(cfg, f"privacy {mech} eps={eps:g}: estimated attack {estimate['success_rate_dataset']:.4f}")
        return Entry(mechanism=mech, epsilon=eps, bundle=info, privacy=_comparison.EstimatedAttackPrivacy(
            estimate=estimate, guarantee=_comparison.guarantee_of(runtime)))
    key = {"stage": "profile", "bundle": bundle.digest, "mechanism": mech, "epsilon": eps,
           "threshold": cfg.threshold, "columns": cfg.columns, "seed_base": cfg.seed_base, "prior": PRIOR_NAME}
    saved = sweep.store.load_arrays("profile", key)
    if saved is not None:
        prof, meta = _profile_from_arrays(saved)
        seconds = meta["seconds"]
    else:
        outputs = np.union1d(runtime.tables.outputs, np.flatnonzero(runtime.tables.keep_row))
        prof = M.profile_mechanism(runtime.log_probabilities, domain.inputs, domain.vocab_size,
                                   threshold=cfg.threshold, prior=sweep.prior, prior_name=PRIOR_NAME,
                                   columns=np.intersect1d(sweep.column_pool, outputs),
                                   progress=cfg.progress, desc=f"privacy {mech} eps={eps:g}")
        seconds = time.perf_counter() - started
        sweep.store.save_arrays("profile", key, _profile_to_arrays(prof, {"seconds": seconds}))
    summary = PrivacySummary.of(prof, sweep.corpus.counts)
    _log(cfg, f"privacy {mech} eps={eps:g}: attack {summary.attack.exact_success_rate_dataset:.4f}")
    # the rows are the sampler's realised law itself (tests/test_tem.py, test_custext.py check the formula)
    return Entry(mechanism=mech, epsilon=eps, profile=prof, bundle=info,
                 privacy=MechanismPrivacy(summary=summary, formula_vs_realised=None, seconds=seconds))


def _profile_santext(sweep: _Sweep, mech: str, eps: float, bundle: _Bundle) -> Entry:
    """The exact profile of one SanText bundle from its formula, checked against the sampler (or its
    checkpoint).
    """
    cfg, domain, san = sweep.cfg, sweep.domain, bundle.sanitizer
    key = {"stage": "profile", "bundle": bundle.digest, "mechanism": mech, "epsilon": eps,
           "threshold": cfg.threshold, "columns": cfg.columns, "seed_base": cfg.seed_base,
           "agreement_rows": cfg.agreement_rows, "prior": PRIOR_NAME}
    saved = sweep.store.load_arrays("profile", key)
    if saved is not None:
        prof, meta = _profile_from_arrays(saved)
        agreement, seconds = meta["formula_vs_realised"], meta["seconds"]
    else:
        rows = santext_log_prob_rows(san)
        started = time.perf_counter()
        prof = M.profile_mechanism(rows, domain.inputs, domain.vocab_size, threshold=cfg.threshold,
                                   prior=sweep.prior, prior_name=PRIOR_NAME,
                                   columns=np.intersect1d(sweep.column_pool, san.outputs),
                                   progress=cfg.progress, desc=f"privacy {mech} eps={eps:g}")
        check_rows = _rank(f"agree:{mech}:{eps}", domain.inputs)[:cfg.agreement_rows]
        agreement = realised_agreement(san, rows, check_rows) if cfg.agreement_rows else None
        seconds = time.perf_counter() - started
        sweep.store.save_arrays("profile", key, _profile_to_arrays(
            prof, {"formula_vs_realised": agreement, "seconds": seconds}))
    summary = PrivacySummary.of(prof, sweep.corpus.counts)
    privacy = MechanismPrivacy(summary=summary, formula_vs_realised=agreement, seconds=seconds)
    _log(cfg, f"privacy {mech} eps={eps:g}: median N_x {summary.vocabulary['n_x']['median']:.4f}, "
              f"attack {summary.attack.exact_success_rate_dataset:.4f}")
    return Entry(mechanism=mech, epsilon=eps, privacy=privacy, profile=prof,
                 bundle=BundleInfo.of(bundle.path, san, domain.vocab_size))


def _profile_baselines(sweep: _Sweep) -> list[Entry]:
    """Step 5: the baselines' entries — closed-form profiles of the unsanitized and the uniformly random
    release; a note for CMP (one entry per ε), whose privacy is only measured empirically.
    """
    cfg, domain, pool = sweep.cfg, sweep.domain, sweep.column_pool
    entries = []
    if "none" in cfg.baselines:
        prof = M.profile_identity(domain.inputs, domain.vocab_size, threshold=cfg.threshold,
                                  columns=np.intersect1d(pool, domain.inputs))
        entries.append(Entry(mechanism="none", epsilon=None, profile=prof,
                             privacy=PrivacySummary.of(prof, sweep.corpus.counts)))
    if "random" in cfg.baselines:
        prof = M.profile_uniform(domain.inputs, domain.outputs, domain.vocab_size, prior=sweep.prior,
                                 prior_name=PRIOR_NAME, columns=np.intersect1d(pool, domain.outputs),
                                 threshold=cfg.threshold)
        entries.append(Entry(mechanism="random", epsilon=None, profile=prof,
                             privacy=PrivacySummary.of(prof, sweep.corpus.counts)))
    if "cmp" in cfg.baselines:
        entries += [Entry(mechanism="cmp", epsilon=eps, privacy=EmpiricalOnlyPrivacy()) for eps in cfg.epsilons]
    return entries


def _measure_utility(sweep: _Sweep, entries: list[Entry], notes: _Warnings) -> None:
    """Step 6: fill in every entry's :class:`.records.UtilitySummary` (one run per seed).

    The unsanitized configuration goes first: a classifier that cannot handle the data fails before
    anything is sampled, and one that does not beat the majority-class rate is warned about at once.
    """
    majority = sweep.corpus.ds.majority_rate()
    ordered = sorted(entries, key=lambda e: e.mechanism != "none")
    for entry in _progress(ordered, sweep.cfg, desc="utility", unit="config"):
        started = time.perf_counter()
        entry.utility = UtilitySummary.of(_utility_runs(sweep, entry), seconds=time.perf_counter() - started)
        if entry.mechanism == DPBART:  # the guarantee as the Rewriter reported it (chunks are seed-free)
            sample = _rewritten_sample(sweep, entry, 0, _sample_key(sweep, entry, 0))
            entry.privacy = entry.privacy.with_sample(sample["chunks"], sample["report"])
        accuracies = ", ".join(f"{name} {c['sanitized_test']['accuracy'].mean:.4f}"
                               for name, c in entry.utility.classifiers.items())
        _log(sweep.cfg, f"utility {entry.mechanism} eps={entry.epsilon}: accuracy (sanitized test) "
                        f"{accuracies} (majority class {majority:.4f})")
        if entry.mechanism == "none":
            notes.extend(_ceiling_warnings(entry.utility, majority))


def _ceiling_warnings(utility: UtilitySummary, majority: float) -> list[str]:
    """A warning when the classifier on unsanitized text does not beat the majority-class rate."""
    acc = utility.sanitized_test["accuracy"].mean
    if not (acc > majority + 1e-9):
        return [f"the classifier on unsanitized text does not beat the majority-class rate (accuracy "
                f"{acc:.4f}, macro-F1 {utility.sanitized_test['macro_f1'].mean:.4f}, majority class "
                f"{majority:.4f}): the data set is too small or its labels are not predictable from "
                f"the text, so the sanitized rows say nothing about utility"]
    return []


def _utility_runs(sweep: _Sweep, entry: Entry) -> list[SeedRun]:
    """The runs of one configuration: one per seed (a single one for the unsanitized text, where seeds
    change nothing), each combining the runs of every classifier (:meth:`.records.SeedRun.combine`).
    """
    per_classifier = {settings.name: _classifier_runs(sweep, entry, settings) for settings in sweep.classifiers}
    n_runs = len(next(iter(per_classifier.values())))
    runs = [SeedRun.combine({name: runs[i] for name, runs in per_classifier.items()}) for i in range(n_runs)]
    if entry.mechanism != DPBART:  # DP-BART's output is not aligned with its input: no token attack
        for s, run in enumerate(runs):
            run.nn_inversion = _nn_inversion(sweep, entry, s)
    return runs


#: List lengths k of the nearest-neighbour inversion attack.
NN_KS = (1, 10)
#: Version of the neighbour table's definition (part of the attack's checkpoint keys).
NN_TABLE_VERSION = 2


def _nn_inversion(sweep: _Sweep, entry: Entry, seed_index: int) -> dict:
    """success@k of the embedding nearest-neighbour inversion on one seed's sample (from its checkpoint)."""
    if entry.mechanism == "none":
        key = {"stage": "nn_attack", "mechanism": "none", "ks": list(NN_KS), "table": NN_TABLE_VERSION}
        return sweep.store.cached_json("nn_attack", key, lambda: nearest_neighbour_inversion(
            sweep.nn_table(), sweep.corpus.flat, sweep.corpus.flat, NN_KS), dict, dict)
    sample_key = _sample_key(sweep, entry, seed_index)
    key = {"stage": "nn_attack", "sample": sample_key, "ks": list(NN_KS), "table": NN_TABLE_VERSION}
    return sweep.store.cached_json("nn_attack", key, lambda: nearest_neighbour_inversion(
        sweep.nn_table(), sweep.corpus.flat, _sanitized_sample(sweep, entry, seed_index, sample_key), NN_KS),
        dict, dict)


def _classifier_runs(sweep: _Sweep, entry: Entry, classifier: ClassifierSettings) -> list[SeedRun]:
    """The runs of one configuration with one classifier, each from its checkpoint when there is one."""
    settings = classifier.to_dict()
    if isinstance(classifier, SentenceEmbeddingSettings):
        settings["encoder"] = sweep.encoder_fingerprint(classifier)
    if entry.mechanism == "none":
        key = {"stage": "utility", "mechanism": "none", "classifier": settings}
        return [sweep.store.cached_json("utility", key, lambda: _unsanitized_run(sweep, classifier),
                                        SeedRun.to_dict, SeedRun.from_dict)]
    runs = []
    for s in range(sweep.cfg.seeds):
        sample_key = _sample_key(sweep, entry, s)
        key = {"stage": "utility", "sample": sample_key, "classifier": settings}

        def compute(s=s, sample_key=sample_key) -> SeedRun:
            if entry.mechanism == DPBART:
                return _rewritten_run(sweep, _rewritten_sample(sweep, entry, s, sample_key), seed=s,
                                      settings=classifier)
            released = _sanitized_sample(sweep, entry, s, sample_key)
            return _release_run(sweep, released, _decoder(entry), seed=s, settings=classifier)

        runs.append(sweep.store.cached_json("utility", key, compute, SeedRun.to_dict, SeedRun.from_dict))
    return runs


def _sample_key(sweep: _Sweep, entry: Entry, seed_index: int) -> dict:
    """Everything that determines one sanitized sample of the corpus (besides the data)."""
    cfg, mech, eps = sweep.cfg, entry.mechanism, entry.epsilon
    stream = f"{mech}:{eps}"
    seed = _seed_int(cfg, seed_index, stream) if cfg.reproducible else f"os-keyed:{seed_index}"
    if mech == DPBART:
        return {"stage": "sample", "mechanism": mech, "epsilon": eps, "bundle": sweep.dpbart.digest,
                "noise": cfg.dpbart_mechanism, "delta": _dpbart_delta(cfg), "long": "split", "beam": 1,
                "seed": seed}
    # a mechanism's own bundle; the baselines (the evaluation-only cmp included) key on the reference one
    bundle = sweep.bundles.get((mech, eps)) or next(iter(sweep.bundles.values()))
    return {"stage": "sample", "mechanism": mech, "epsilon": eps, "bundle": bundle.digest, "seed": seed}


def _sanitized_sample(sweep: _Sweep, entry: Entry, seed_index: int, key: dict) -> np.ndarray:
    """The released ids of one seed (:func:`_sanitize`), from the checkpoint when there is one."""
    saved = sweep.store.load_arrays("sample", key)
    if saved is not None and saved["released"].shape == sweep.corpus.flat.shape:
        return saved["released"].astype(np.int64)
    released = _sanitize(sweep, entry, seed_index)
    sweep.store.save_arrays("sample", key, {"released": released.astype(np.int32)})
    return released


def _decoder(entry: Entry) -> np.ndarray | None:
    """The exact Bayes decoder of the entry's mechanism (None for CMP, which has none)."""
    return None if entry.mechanism == "cmp" or entry.profile is None else entry.profile.decoder


def _sanitize(sweep: _Sweep, entry: Entry, seed_index: int) -> np.ndarray:
    """One sanitized sample of the whole corpus under ``entry``'s mechanism and ε for one seed.

    Returns the released ids (int64, aligned with ``corpus.flat``).
    """
    cfg, corpus, domain = sweep.cfg, sweep.corpus, sweep.domain
    mech, eps = entry.mechanism, entry.epsilon
    stream = f"{mech}:{eps}"
    if mech in _comparison.COMPARISON_MECHANISMS and (mech, eps) in sweep.bundles:
        seed = _seed_int(cfg, seed_index, stream) if cfg.reproducible else None
        runtime = _comparison.load_runtime(mech, sweep.bundles[(mech, eps)].path, seed)
        return runtime.sample_ids(corpus.flat).astype(np.int64)
    if mech in SANTEXT_MECHANISMS:
        san = _seeded_sanitizer(cfg, sweep.bundles[(mech, eps)].path, seed_index, stream)
        return san.sample_ids(corpus.flat).astype(np.int64)
    gen = _generator(cfg, seed_index, stream)
    if mech == "random":
        return random_replacement(corpus.flat, domain.outputs, gen).astype(np.int64)
    cmp = CMPMechanism(domain.reference.embeddings, domain.outputs, eps)
    return cmp.sample_ids(corpus.flat, gen).astype(np.int64)


def _rewritten_sample(sweep: _Sweep, entry: Entry, seed_index: int, key: dict) -> dict:
    """One DP-BART rewrite of the whole corpus (:func:`_rewrite`), from the checkpoint when there is one.

    Returns ``{"texts": train + test rewritten, "chunks": per document, "report": a report or None}``.
    """
    n = len(sweep.corpus.ds.train_texts) + len(sweep.corpus.ds.test_texts)

    def decode(d: dict) -> dict:
        if len(d["texts"]) != n or len(d["chunks"]) != n:
            raise ValueError("checkpoint of another corpus")
        return d

    return sweep.store.cached_json("sample", key, lambda: _rewrite(sweep, entry, seed_index), dict, decode)


def _rewrite(sweep: _Sweep, entry: Entry, seed_index: int) -> dict:
    """Rewrite every training and test document with DP-BART at the entry's ε for one seed: a Rewriter
    seeded from this seed's stream (reproducible, not private) or with private OS randomness.
    """
    from ldptext.dpbart import Rewriter
    from ldptext.rng import SeededModeWarning

    cfg, ds = sweep.cfg, sweep.corpus.ds
    seed = _seed_int(cfg, seed_index, f"{DPBART}:{entry.epsilon}") if cfg.reproducible else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)   # the results state the seeded mode
        rewriter = Rewriter(sweep.dpbart.bundle, seed=seed)
    texts = ds.train_texts + ds.test_texts
    options = dict(epsilon=entry.epsilon, delta=cfg.dpbart_delta if cfg.dpbart_mechanism == "gaussian" else None,
                   mechanism=cfg.dpbart_mechanism, beam=1, long="split")
    done = []
    with rewriter:
        starts = range(0, len(texts), DPBART_BATCH)
        for start in _progress(starts, cfg, desc=f"dpbart eps={entry.epsilon:g} seed {seed_index}", unit="batch"):
            done += rewriter.rewrite_batch(texts[start:start + DPBART_BATCH], **options)
    chunks = [r.report.chunks for r in done]
    longest = max(range(len(done)), key=chunks.__getitem__) if done else None
    return {"texts": [r.text for r in done], "chunks": chunks,
            "report": None if longest is None else done[longest].report.to_dict()}


def _rewritten_run(sweep: _Sweep, sample: dict, seed: int, settings: ClassifierSettings) -> SeedRun:
    """Utility of one DP-BART rewrite of the corpus with one classifier: no unchanged-token rate (NaN) and
    no token attack (the output is not aligned with the input).
    """
    n_train = sweep.corpus.n_train
    run, bleu = _fit_and_bleu(sweep, sample["texts"][:n_train], sample["texts"][n_train:], seed, settings)
    return SeedRun(classifier=run.scores, bleu=bleu, unchanged_token_rate=float("nan"),
                   empirical_attack_success=None, hyperparameters=run.hyperparameters)


def _fit_and_bleu(sweep: _Sweep, train_txt: list[str], test_txt: list[str], seed: int, settings: ClassifierSettings):
    """The classifier trained on released training text, scored on released and original test text, and
    the corpus BLEU of the released documents against their inputs.
    """
    corpus, ds = sweep.corpus, sweep.corpus.ds
    run = fit_and_score(train_txt, ds.train_labels, {"sanitized_test": test_txt, "original_test": ds.test_texts},
                        ds.test_labels, seed=seed, settings=settings, encoder=sweep.encoder(settings))
    hyps = [bleu_tokenize(t) for t in train_txt + test_txt]
    return run, corpus_bleu(hyps, corpus.references)


def _unsanitized_run(sweep: _Sweep, settings: ClassifierSettings) -> SeedRun:
    """The utility ceiling: the classifier on the raw text; BLEU, unchanged rate and attack all 1."""
    ds = sweep.corpus.ds
    run = fit_and_score(ds.train_texts, ds.train_labels,
                        {"sanitized_test": ds.test_texts, "original_test": ds.test_texts}, ds.test_labels,
                        settings=settings, encoder=sweep.encoder(settings))
    return SeedRun(classifier=run.scores, bleu=1.0, unchanged_token_rate=1.0, empirical_attack_success=1.0,
                   hyperparameters=run.hyperparameters)


def _release_run(sweep: _Sweep, released: np.ndarray, decoder: np.ndarray | None, seed: int,
                 settings: ClassifierSettings) -> SeedRun:
    """Utility of one sanitized sample of the corpus (train + test) with one classifier."""
    corpus = sweep.corpus
    train_txt, test_txt = corpus.decode(released)
    run, bleu = _fit_and_bleu(sweep, train_txt, test_txt, seed, settings)
    return SeedRun(
        classifier=run.scores, bleu=bleu,
        unchanged_token_rate=float(np.mean(released == corpus.flat)) if released.size else float("nan"),
        empirical_attack_success=(None if decoder is None
                                  else empirical_attack_success(decoder, corpus.flat, released)),
        hyperparameters=run.hyperparameters)


def _assemble_results(cfg: EvaluationConfig, ds: Dataset, entries: list[Entry],
                      timings: dict[str, float], notes: _Warnings) -> Results:
    """Step 7a: the ``results.json`` record."""
    chosen = [classifier_settings(c) for c in cfg.classifiers]
    settings = chosen[0]
    counts = {lab: ds.train_labels.count(lab) for lab in sorted(set(ds.train_labels))}
    return Results(config=asdict(cfg), versions=_versions(),
                   dataset={**ds.info, "name": ds.name, "majority_rate_test": ds.majority_rate(),
                            "train_class_counts": counts},
                   randomness=randomness_description(cfg.reproducible),
                   privacy_metric_definitions=privacy_metric_definitions(cfg.threshold),
                   entries=entries, timings=timings, classifier=settings.describe(),
                   classifier_settings=settings.to_dict(), warnings=list(notes),
                   classifiers={c.name: {"description": c.describe(), "settings": c.to_dict()} for c in chosen})


def _write_outputs(cfg: EvaluationConfig, results: Results, out: Path) -> dict:
    """Step 7b: write ``results.json`` and ``report.md``, then the plots (recorded in ``results.json``);
    return the final document.
    """
    from .report import write_report
    document = results.to_dict()
    _write_json(out / "results.json", document)
    write_report(document, out / "report.md")
    if cfg.plots:
        from .plots import write_plots
        results.plots = write_plots(document, out)
        document = results.to_dict()
        _write_json(out / "results.json", document)
    _log(cfg, f"done in {results.timings['total_s']:.0f} s: {out / 'report.md'}")
    return document


# -- bundles -----------------------------------------------------------------------------------

class _Bundle(NamedTuple):
    """A bundle file, the Sanitizer loaded from it (no seed) and the SHA-256 of the file (what
    checkpoints are keyed by).
    """

    path: Path
    sanitizer: object
    digest: str


class _DPBart(NamedTuple):
    """The DP-BART bundle: its file, the verified bundle (every Rewriter of the sweep is made from it), the
    SHA-256 of the file (what its samples are keyed by) and its description.
    """

    path: Path
    bundle: object
    digest: str
    info: DPBartBundleInfo


def _bundle_path(cfg: EvaluationConfig, cache: Path, mechanism: str, epsilon: float) -> Path:
    """Cache file of the bundle of one (mechanism, ε) under this configuration."""
    emb = cfg.embeddings
    if Path(emb).exists():
        emb = "file-" + hashlib.sha256(str(Path(emb).resolve()).encode()).hexdigest()[:12]
    params = f"p{cfg.p:g}-w{cfg.w:g}-" if mechanism == "santext+" else ""
    name = (f"eval-{emb}-V{cfg.vocab_size or 'all'}-k{cfg.head_size}-{mechanism}-"
            f"eps{epsilon:g}-{params}v1.ldpb")
    return cache / name


def _load_unsigned(path: Path, seed: int | None = None):
    """A Sanitizer on an evaluation bundle (unsigned / seeded-mode warnings are stated in the results)."""
    from ldptext.santext import Sanitizer
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Sanitizer.load(path, allow_unsigned=True, seed=seed)


def _discard_if_stale(path: Path) -> None:
    """Delete a cached bundle that the current runtime no longer loads (built by an older version)."""
    if path.exists():
        try:
            _load_unsigned(path)
        except LdptextError:
            path.unlink()


def _load_sanitizers(cfg: EvaluationConfig, cache: Path) -> dict[tuple[str, float], _Bundle]:
    """Build (or reuse from the cache) one unsigned evaluation bundle per (mechanism, ε) and load it.

    The bundles are built here and never leave this machine, hence unsigned; the embeddings are loaded
    at most once, and only when a bundle has to be built.
    """
    from ..santext import build as santext_build
    from ..santext.embeddings import load_embeddings

    loaded = None
    bundles = {}
    for mech in cfg.mechanisms:
        for eps in cfg.epsilons:
            path = _bundle_path(cfg, cache, mech, eps)
            _discard_if_stale(path)
            if not path.exists():
                if loaded is None:
                    loaded = load_embeddings(cfg.embeddings, cfg.vocab_size)
                _log(cfg, f"building {mech} bundle, epsilon={eps:g}")
                santext_build.build_santext_bundle(
                    path, embeddings=cfg.embeddings, epsilon=eps, mechanism=mech, p=cfg.p,
                    w=cfg.w, vocab_size=cfg.vocab_size, head_size=cfg.head_size, sign_key=False,
                    cache_dir=cache / "neighbours", progress=cfg.progress, loaded=loaded)
            bundles[(mech, eps)] = _Bundle(path, _load_unsigned(path), file_sha256(path))
    return bundles


# -- what the steps share -----------------------------------------------------------------------

@dataclass(frozen=True)
class _TokenDomain:
    """The token domain every mechanism shares, from a reference Sanitizer (all bundles share it).

    ``inputs``: int64 ids of the valid inputs; ``outputs``: int64 ids that anything may release
    (SanText+'s outputs plus its kept V_N); ``vocab_size``: V.
    """

    reference: object
    vocab_size: int
    inputs: np.ndarray
    outputs: np.ndarray

    @classmethod
    def of(cls, san) -> _TokenDomain:
        """The domain of a loaded Sanitizer."""
        return cls(reference=san, vocab_size=len(san.valid_input),
                   inputs=np.flatnonzero(san.valid_input).astype(np.int64),
                   outputs=np.union1d(san.outputs, np.flatnonzero(santext_keep_rows(san))).astype(np.int64))


class _Corpus:
    """The data set tokenised once with the bundles' tokenizer (all bundles share it)."""

    def __init__(self, ds: Dataset, san) -> None:
        self.ds = ds
        self.tokenizer = san.tokenizer
        self.train_ids = self.tokenizer.encode_batch(ds.train_texts)
        self.test_ids = self.tokenizer.encode_batch(ds.test_texts)
        self.all_ids = self.train_ids + self.test_ids
        self.lengths = [a.size for a in self.all_ids]
        self.flat = (np.concatenate(self.all_ids).astype(np.int64) if self.all_ids
                     else np.zeros(0, np.int64))
        self.n_train = len(self.train_ids)
        self.references = [bleu_tokenize(t) for t in ds.train_texts + ds.test_texts]
        v = len(san.valid_input)
        self.counts = np.bincount(self.flat, minlength=v).astype(np.float64)

    def decode(self, released_flat: np.ndarray) -> tuple[list[str], list[str]]:
        """Split released ids (aligned with ``flat``) back into documents; (train texts, test texts)."""
        pieces = np.split(released_flat, np.cumsum(self.lengths)[:-1]) if self.lengths else []
        texts = self.tokenizer.decode_batch(pieces)
        return texts[:self.n_train], texts[self.n_train:]


@dataclass
class _Sweep:
    """What the privacy and utility steps read: the configuration, the tokenised corpus, the token
    domain, the attacker's prior (float64 ``[V]``), the S_y* column pool (int64), the bundles, the
    checkpoint store, the classifiers' settings, the bundle cache (where the MiniLM graph is kept) and the
    DP-BART bundle (None without one).
    """

    cfg: EvaluationConfig
    corpus: _Corpus
    domain: _TokenDomain
    prior: np.ndarray
    column_pool: np.ndarray
    bundles: dict[tuple[str, float], _Bundle]
    store: CheckpointStore
    classifiers: list[ClassifierSettings] = field(default_factory=lambda: [ClassifierSettings()])
    cache_dir: Path | None = None
    dpbart: _DPBart | None = None
    _memo: dict = field(default_factory=dict, repr=False)   # loaded encoders, the neighbour table

    def encoder_fingerprint(self, settings: SentenceEmbeddingSettings) -> str:
        """What determines the sentence embeddings (:meth:`.utility.SentenceEncoder.fingerprint_of`)."""
        from .utility import SentenceEncoder
        return SentenceEncoder.fingerprint_of(settings)

    def nn_table(self) -> np.ndarray:
        """The nearest inputs of every id a mechanism may release, in the bundles' metric embedding
        (:func:`.attacks.nearest_neighbour_table`), computed once (and kept as a checkpoint).
        """
        if "nn_table" not in self._memo:
            bundle = next(iter(self.bundles.values()))
            key = {"stage": "nn_table", "bundle": bundle.digest, "k": max(NN_KS), "version": NN_TABLE_VERSION}
            saved = self.store.load_arrays("nn_table", key)
            if saved is None:
                queries = np.union1d(self.domain.outputs, self.domain.inputs)
                saved = {"table": nearest_neighbour_table(self.domain.reference.embeddings, self.domain.inputs,
                                                          queries, k=max(NN_KS))}
                self.store.save_arrays("nn_table", key, saved)
            self._memo["nn_table"] = saved["table"]
        return self._memo["nn_table"]

    def encoder(self, settings: ClassifierSettings) -> _CheckpointedEncoder | None:
        """The sentence encoder of a MiniLM classifier, behind the checkpoint store (None for TF-IDF)."""
        if not isinstance(settings, SentenceEmbeddingSettings):
            return None
        if settings not in self._memo:
            self._memo[settings] = _CheckpointedEncoder(self, settings)
        return self._memo[settings]


class _CheckpointedEncoder:
    """``encode(texts)`` of :class:`.utility.SentenceEncoder`, each text list's embeddings read from (and
    written to) the checkpoint store, keyed by the SHA-256 of the list; the encoder itself (graph export,
    ONNX session) is loaded only when something has to be embedded.
    """

    def __init__(self, sweep: _Sweep, settings: SentenceEmbeddingSettings) -> None:
        self.sweep, self.settings = sweep, settings
        self.fingerprint = sweep.encoder_fingerprint(settings)
        self._encoder = None

    def encode(self, texts: list[str]) -> np.ndarray:
        """Float32 embeddings (n, 384) of ``texts`` (float16-exact, the precision of the checkpoint)."""
        digest = hashlib.sha256()
        for t in texts:
            digest.update(hashlib.sha256(t.encode("utf-8")).digest())
        key = {"stage": "embedding", "encoder": self.fingerprint, "texts": digest.hexdigest(), "n": len(texts)}
        saved = self.sweep.store.load_arrays("embedding", key)
        if saved is not None and saved["x"].shape == (len(texts), MINILM_DIM):
            return saved["x"].astype(np.float32)
        if self._encoder is None:
            from .utility import SentenceEncoder
            self._encoder = SentenceEncoder(self.sweep.cache_dir, self.settings)
        x = self._encoder.encode(texts, progress=self.sweep.cfg.progress, desc=f"MiniLM ({len(texts)} texts)")
        self.sweep.store.save_arrays("embedding", key, {"x": x.astype(np.float16)})
        return x


# -- checkpoints and warnings --------------------------------------------------------------------

#: Sub-directory of the output directory that holds the checkpoints.
CHECKPOINT_DIR = "checkpoints"
#: Version of the checkpoint layout (part of every key: a new layout never reads an old file).
CHECKPOINT_FORMAT = 1


def _checkpoint_store(out: Path, cfg: EvaluationConfig, ds: Dataset) -> CheckpointStore:
    """The sweep's checkpoints under ``out/checkpoints``: every key also carries the layout version, the
    data set's fingerprint and the ldptext, scikit-learn and wordfreq (the attacker's prior) versions."""
    versions = _versions()
    base = {"format": CHECKPOINT_FORMAT, "data": ds.fingerprint(),
            **{k: versions.get(k) for k in ("ldptext", "scikit-learn", "wordfreq")}}
    return CheckpointStore(out / CHECKPOINT_DIR, resume=cfg.resume, base=base)


def _profile_to_arrays(prof: M.MechanismProfile, meta: dict) -> dict[str, np.ndarray]:
    """A profile and JSON-able extras as the arrays of one ``.npz`` checkpoint."""
    arrays = {name: np.asarray(getattr(prof, name)) for name in _PROFILE_ARRAYS}
    extra = {"threshold": prof.threshold, "prior_name": prof.prior_name, "extra": prof.extra, **meta}
    arrays["meta"] = np.array(json.dumps(jsonable(extra)))
    return arrays


def _profile_from_arrays(arrays: dict[str, np.ndarray]) -> tuple[M.MechanismProfile, dict]:
    """The inverse of :func:`_profile_to_arrays`: the profile and the extras."""
    meta = json.loads(str(arrays["meta"]))
    prof = M.MechanismProfile(threshold=meta.pop("threshold"), prior_name=meta.pop("prior_name"),
                              extra=meta.pop("extra"), **{name: arrays[name] for name in _PROFILE_ARRAYS})
    return prof, meta


_PROFILE_ARRAYS = ("inputs", "n_x", "s_x", "h0", "h1", "h2", "h_inf", "attack_success", "columns", "s_y",
                   "decoder")


class _Warnings(list):
    """The sweep's warnings: each printed on stderr when added (labels and numbers only, never text)."""

    def extend(self, items) -> None:
        """Add warnings, printing each as one ``[evaluate] warning:`` line on stderr."""
        for msg in items:
            print(f"[evaluate] warning: {msg}", file=sys.stderr)
            self.append(msg)


# -- small helpers ------------------------------------------------------------------------------

@contextmanager
def _timed(timings: dict[str, float], key: str) -> Iterator[None]:
    """Record the wall time of the ``with`` block as ``timings[key]`` (seconds)."""
    started = time.perf_counter()
    yield
    timings[key] = time.perf_counter() - started


def _rank(tag: str, ids: np.ndarray) -> np.ndarray:
    """Deterministic pseudo-random order of ids (sha256), independent of numpy versions."""
    keys = [hashlib.sha256(f"{tag}:{int(i)}".encode()).digest() for i in ids]
    return np.asarray(ids)[np.argsort(np.array(keys, dtype=object), kind="stable")] \
        if len(keys) else np.asarray(ids)


def seed_int(seed_base: int, seed_index: int, stream: str) -> int:
    """The 64-bit seed of one (seed, stream) pair (also benchmarks/table_dpbart.py's)."""
    return int.from_bytes(hashlib.sha256(f"{seed_base}:{seed_index}:{stream}".encode()).digest()[:8], "little")


def _seed_int(cfg: EvaluationConfig, seed_index: int, stream: str) -> int:
    return seed_int(cfg.seed_base, seed_index, stream)


def _generator(cfg: EvaluationConfig, seed_index: int, stream: str):
    """The baselines' generator for this seed's stream: seeded, or OS-keyed when not reproducible."""
    from ldptext.rng import Generator, SeededModeWarning
    if not cfg.reproducible:
        return Generator()
    seed = _seed_int(cfg, seed_index, stream)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        return Generator(seed=seed)


def _seeded_sanitizer(cfg: EvaluationConfig, path: Path, seed_index: int, stream: str):
    """A Sanitizer on the same bundle drawing from this seed's stream (or OS-keyed)."""
    return _load_unsigned(path, seed=_seed_int(cfg, seed_index, stream) if cfg.reproducible else None)


def _progress(iterable, cfg: EvaluationConfig, *, desc: str, unit: str = "it"):
    """``iterable`` with progress on stderr when ``cfg.progress`` (a bar on a terminal, else status lines)."""
    return track(iterable, f"evaluate {desc}", unit=unit, enabled=cfg.progress)


def _log(cfg: EvaluationConfig, msg: str) -> None:
    """One progress line on stderr when ``cfg.progress`` (never raw text)."""
    if cfg.progress:
        from tqdm.auto import tqdm
        tqdm.write(f"[evaluate] {msg}", file=sys.stderr)


def _versions() -> dict:
    """Python and package versions, for the results."""
    import importlib.metadata as md
    out = {"python": platform.python_version()}
    for pkg in ("ldptext", "numpy", "scikit-learn", "matplotlib", "tokenizers", "wordfreq"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    return out


def _write_json(path: Path, document: dict) -> None:
    """Write a document as indented JSON (non-finite floats as null), atomically."""
    from .report import shareable_mode
    write_bytes_atomic(path, (json.dumps(jsonable(document), indent=2) + "\n").encode(), mode=shareable_mode())


def command_line() -> str:
    """The current process's command line, for the report.

    Returns
    -------
    str
        ``sys.argv``, shell-quoted and joined by spaces.
    """
    return " ".join(shlex.quote(a) for a in sys.argv)
