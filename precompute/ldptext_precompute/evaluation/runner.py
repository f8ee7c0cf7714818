"""The privacy–utility sweep behind ``ldptext evaluate`` (SPEC §6; seed 000 §2.5, Table 2.1; seed 001
§6.4–6.5).

For each SanText mechanism and ε (one bundle each, built once and cached), and for the baselines
(unsanitized, uniform random replacement, CMP/FBDD at the same ε):

1. **privacy, exact** — one pass over the whole input domain (:func:`.metrics.profile_mechanism`):
   N_x, S_x, S_y*, H₀/H₁/H₂/H∞ and the Bayes-optimal inversion attack with the public ``wordfreq``
   prior; summarised over the vocabulary and over the data set's tokens (weighted by occurrences).
   CMP has no closed-form distribution: only its empirical quantities are reported;
2. **utility, per seed** — sanitize the training and test text, train the classifier
   (:mod:`.utility`) on sanitized training text, score it on sanitized and on original test text;
   BLEU of every sanitized document against its input; the empirical unchanged-token rate and the
   empirical success of the exact Bayes decoder on the sample drawn;
3. mean and sample standard deviation (ddof = 1) over seeds.

Seeds: by default each seed uses a seeded :class:`ldptext.rng.Generator` (reproducible experiment
mode, **not private**; the results say so); ``reproducible=False`` uses OS-keyed generators.

Outputs in ``out``: ``results.json`` (every number, the configuration, versions, timings),
``report.md`` and PNG plots (:mod:`.plots`). Raw text is never logged.
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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ldptext.errors import LdptextError, ParameterError
from . import metrics as M
from .attacks import empirical_attack_success, wordfreq_prior
from .baselines import CMPMechanism, random_replacement
from .datasets import Dataset, load_dataset
from .mechanisms import realised_agreement, santext_keep_rows, santext_log_prob_rows
from ..bleu import bleu_tokenize, corpus_bleu
from .utility import CLASSIFIER_DESCRIPTION, train_and_score

__all__ = ["EvaluationConfig", "evaluate", "MECHANISMS", "BASELINES"]

MECHANISMS = ("santext", "santext+")
BASELINES = ("none", "random", "cmp")
# seed 000 Table 2.1, SST-2, GloVe, BERT fine-tuned on sanitized train, tested on sanitized test
PAPER_SST2 = {"random": {1: 0.4986, 2: 0.4986, 3: 0.4986},
              "cmp": {1: 0.5099, 2: 0.5143, 3: 0.5345},
              "santext": {1: 0.5101, 2: 0.5838, 3: 0.8374},
              "santext+": {1: 0.7796, 2: 0.7943, 3: 0.8516},
              "none": {1: 0.9251, 2: 0.9251, 3: 0.9251}}
LABELS = {"none": "Unsanitized", "random": "Random", "cmp": "CMP (FBDD)", "santext": "SanText",
          "santext+": "SanText+"}


@dataclass
class EvaluationConfig:
    """Everything the sweep depends on (stored verbatim in ``results.json``)."""

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
    head_size: int = 64
    progress: bool = True
    plots: bool = True
    command: str | None = None      # the command line, for the report

    def validate(self) -> None:
        if self.embeddings == "minilm-wordpiece":
            self.vocab_size = None   # a fixed WordPiece vocabulary: no size to choose
        for m in self.mechanisms:
            if m not in MECHANISMS:
                raise ParameterError(f"unknown mechanism {m!r} (choose from {', '.join(MECHANISMS)})")
        for b in self.baselines:
            if b not in BASELINES:
                raise ParameterError(f"unknown baseline {b!r} (choose from {', '.join(BASELINES)})")
        if not self.epsilons or any(not (e > 0 and math.isfinite(e)) for e in self.epsilons):
            raise ParameterError("every epsilon must be a positive finite number")
        if not 0 < self.p <= 1 or not 0 < self.w <= 1:
            raise ParameterError("p and w must be in (0, 1]")
        if self.seeds < 1:
            raise ParameterError("seeds must be >= 1")
        if not 0 < self.threshold <= 1:
            raise ParameterError("threshold must be in (0, 1]")
        if not self.mechanisms and not self.baselines:
            raise ParameterError("nothing to evaluate")


# -- small helpers ------------------------------------------------------------------------------

def _mean_std(values: Sequence[float]) -> dict:
    v = np.asarray(values, dtype=np.float64)
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if v.size > 1 else 0.0,
            "values": [float(x) for x in v]}


def _rank(tag: str, ids: np.ndarray) -> np.ndarray:
    """Deterministic pseudo-random order of ids (sha256), independent of numpy versions."""
    keys = [hashlib.sha256(f"{tag}:{int(i)}".encode()).digest() for i in ids]
    return np.asarray(ids)[np.argsort(np.array(keys, dtype=object), kind="stable")] \
        if len(keys) else np.asarray(ids)


def _generator(cfg: EvaluationConfig, seed_index: int, stream: str):
    from ldptext.rng import Generator, SeededModeWarning
    if not cfg.reproducible:
        return Generator()
    seed = _seed_int(cfg, seed_index, stream)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        return Generator(seed=seed)


def _seed_int(cfg: EvaluationConfig, seed_index: int, stream: str) -> int:
    return int.from_bytes(hashlib.sha256(
        f"{cfg.seed_base}:{seed_index}:{stream}".encode()).digest()[:8], "little")


def _seeded_sanitizer(cfg: EvaluationConfig, path: Path, seed_index: int, stream: str):
    """A Sanitizer on the same bundle drawing from this seed's stream (or OS-keyed)."""
    from ldptext.santext import Sanitizer
    seed = _seed_int(cfg, seed_index, stream) if cfg.reproducible else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # unsigned / seeded-mode warnings: stated in the results
        return Sanitizer.load(path, allow_unsigned=True, seed=seed)


def _progress(iterable, cfg: EvaluationConfig, **kw):
    if not cfg.progress:
        return iterable
    from tqdm.auto import tqdm
    return tqdm(iterable, **kw)


def _log(cfg: EvaluationConfig, msg: str) -> None:
    if cfg.progress:
        from tqdm.auto import tqdm
        tqdm.write(f"[evaluate] {msg}", file=sys.stderr)


def _versions() -> dict:
    import importlib.metadata as md
    out = {"python": platform.python_version()}
    for pkg in ("ldptext", "numpy", "scikit-learn", "matplotlib", "tokenizers", "wordfreq"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    return out


# -- bundles -----------------------------------------------------------------------------------

def _bundle_path(cfg: EvaluationConfig, cache: Path, mechanism: str, epsilon: float) -> Path:
    emb = cfg.embeddings
    if Path(emb).exists():
        emb = "file-" + hashlib.sha256(str(Path(emb).resolve()).encode()).hexdigest()[:12]
    params = f"p{cfg.p:g}-w{cfg.w:g}-" if mechanism == "santext+" else ""
    name = (f"eval-{emb}-V{cfg.vocab_size or 'all'}-k{cfg.head_size}-{mechanism}-"
            f"eps{epsilon:g}-{params}v1.ldpb")
    return cache / name


def _load_sanitizers(cfg: EvaluationConfig, cache: Path) -> dict:
    """Build (or reuse from the cache) one unsigned evaluation bundle per (mechanism, ε) and load
    it. The bundles are built here and never leave this machine, hence unsigned."""
    from ldptext.santext import Sanitizer
    from ..santext import build as santext_build
    from ..santext.embeddings import load_embeddings

    loaded = None
    bundles = {}
    for mech in cfg.mechanisms:
        for eps in cfg.epsilons:
            path = _bundle_path(cfg, cache, mech, eps)
            if path.exists():
                try:   # a cached bundle from an older build of the runtime is rebuilt
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        Sanitizer.load(path, allow_unsigned=True)
                except LdptextError:
                    path.unlink()
            if not path.exists():
                if loaded is None:
                    loaded = load_embeddings(cfg.embeddings, cfg.vocab_size)
                _log(cfg, f"building {mech} bundle, epsilon={eps:g}")
                santext_build.build_santext_bundle(
                    path, embeddings=cfg.embeddings, epsilon=eps, mechanism=mech, p=cfg.p,
                    w=cfg.w, vocab_size=cfg.vocab_size, head_size=cfg.head_size, sign_key=False,
                    cache_dir=cache / "neighbours", progress=cfg.progress, loaded=loaded)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")   # unsigned / seeded-mode warnings: known here
                bundles[(mech, eps)] = (path, Sanitizer.load(path, allow_unsigned=True))
    return bundles


# -- the sweep ---------------------------------------------------------------------------------

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
        pieces = np.split(released_flat, np.cumsum(self.lengths)[:-1]) if self.lengths else []
        texts = self.tokenizer.decode_batch(pieces)
        return texts[:self.n_train], texts[self.n_train:]


def _privacy_summary(prof: M.MechanismProfile, corpus: _Corpus) -> dict:
    """Vocabulary and data-set summaries of a profile (see :func:`.metrics.summarize`)."""
    w = corpus.counts[prof.inputs]
    out: dict = {"threshold": prof.threshold, "prior": prof.prior_name,
                 "entropy_unit": "bits", "vocabulary": {}, "dataset": {}}
    for name in ("n_x", "s_x", "h0", "h1", "h2", "h_inf", "attack_success"):
        vals = getattr(prof, name)
        ok = vals >= 0 if name == "s_x" else np.ones(vals.size, bool)
        out["vocabulary"][name] = M.summarize(vals[ok])
        out["dataset"][name] = M.summarize(vals[ok], w[ok]) if w[ok].sum() > 0 else M.summarize([])
    if prof.columns.size:
        out["vocabulary"]["s_y_star"] = M.summarize(prof.s_y)
        cw = corpus.counts[prof.columns]
        out["dataset"]["s_y_star"] = M.summarize(prof.s_y, cw) if cw.sum() > 0 else M.summarize([])
        out["dataset"]["s_y_star"]["token_coverage"] = float(cw.sum() / max(corpus.counts.sum(), 1))
        out["s_y_star_columns"] = int(prof.columns.size)
    total = corpus.counts.sum()
    out["attack"] = {
        "exact_success_rate_dataset": float((w * prof.attack_success).sum() / total) if total else None,
        "exact_success_rate_vocabulary_mean": float(prof.attack_success.mean()),
        "description": "Bayes-optimal token inversion, argmax_x Pr[M(x)=y]·prior(x), prior = "
                       "wordfreq 'en' large (public); exact expected success on the data set's "
                       "tokens (train + test)"}
    return out


def _run_release(cfg: EvaluationConfig, corpus: _Corpus, released: np.ndarray,
                 decoder: np.ndarray | None, seed: int) -> dict:
    """Utility of one sanitized sample of the corpus (train + test)."""
    train_txt, test_txt = corpus.decode(released)
    ds = corpus.ds
    scores = train_and_score(train_txt, ds.train_labels,
                             {"sanitized_test": test_txt, "original_test": ds.test_texts},
                             ds.test_labels, seed=seed)
    hyps = [bleu_tokenize(t) for t in train_txt + test_txt]
    res = {"classifier": scores, "bleu": corpus_bleu(hyps, corpus.references),
           "unchanged_token_rate": float(np.mean(released == corpus.flat)) if released.size
           else float("nan")}
    if decoder is not None:
        res["empirical_attack_success"] = empirical_attack_success(decoder, corpus.flat, released)
    return res


def _aggregate(runs: list[dict]) -> dict:
    agg: dict = {"seeds": len(runs)}
    for test in ("sanitized_test", "original_test"):
        agg[test] = {m: _mean_std([r["classifier"][test][m] for r in runs])
                     for m in ("accuracy", "macro_f1")}
    for key in ("bleu", "unchanged_token_rate", "empirical_attack_success"):
        if key in runs[0]:
            agg[key] = _mean_std([r[key] for r in runs])
    return agg


def evaluate(config: EvaluationConfig | None = None, **overrides) -> dict:
    """Run the sweep, write ``results.json``, ``report.md`` and the plots; return the results.

    ``evaluate(out="eval", epsilons=[1, 2, 3])`` is the same as ``evaluate(EvaluationConfig(...))``.
    """
    cfg = config or EvaluationConfig()
    if overrides:
        cfg = EvaluationConfig(**{**asdict(cfg), **overrides})
    cfg.validate()
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    cache = Path(cfg.cache_dir) if cfg.cache_dir else Path.home() / ".cache" / "ldptext" / "evaluate"
    cache.mkdir(parents=True, exist_ok=True)

    t = time.perf_counter()
    ds = load_dataset(cfg.data, text_col=cfg.text_col, label_col=cfg.label_col, test=cfg.test,
                      test_fraction=cfg.test_fraction, split_seed=cfg.split_seed,
                      max_train=cfg.max_train, max_test=cfg.max_test)
    timings["load_data_s"] = time.perf_counter() - t
    _log(cfg, f"data: {ds.name}, {len(ds.train_texts)} train / {len(ds.test_texts)} test")

    # bundles: the SanText mechanisms, plus one SanText bundle at the first ε to give the baselines
    # their vocabulary, tokenizer and embeddings when only SanText+ is evaluated
    t = time.perf_counter()
    base_cfg = cfg if cfg.mechanisms else EvaluationConfig(
        **{**asdict(cfg), "mechanisms": ["santext"], "epsilons": cfg.epsilons[:1]})
    sanitizers = _load_sanitizers(base_cfg, cache) if base_cfg.mechanisms else {}
    timings["bundles_s"] = time.perf_counter() - t
    ref_path, ref = next(iter(sanitizers.values()))
    vocab_size = len(ref.valid_input)
    inputs = np.flatnonzero(ref.valid_input).astype(np.int64)
    # every token that may be released by anything: SanText+'s outputs plus its kept V_N
    all_outputs = np.union1d(ref.outputs, np.flatnonzero(santext_keep_rows(ref))).astype(np.int64)

    t = time.perf_counter()
    corpus = _Corpus(ds, ref)
    prior = wordfreq_prior(ref.vocab, ref.valid_input)
    timings["tokenize_and_prior_s"] = time.perf_counter() - t
    top_data = np.argsort(-corpus.counts, kind="stable")[:cfg.columns]
    top_data = top_data[corpus.counts[top_data] > 0]
    sampled = _rank(f"columns:{cfg.seed_base}", all_outputs)[:cfg.columns]
    column_pool = np.union1d(sampled, top_data)

    entries: list[dict] = []
    # -- privacy profiles (exact), once per configuration --------------------------------------
    profiles: dict = {}
    t = time.perf_counter()
    for (mech, eps), (path, san) in sanitizers.items():
        if mech not in cfg.mechanisms:
            continue
        rows = santext_log_prob_rows(san)
        cols = np.intersect1d(column_pool, san.outputs)
        t1 = time.perf_counter()
        prof = M.profile_mechanism(rows, inputs, vocab_size, threshold=cfg.threshold, prior=prior,
                                   prior_name="wordfreq-en-large", columns=cols,
                                   progress=cfg.progress, desc=f"privacy {mech} eps={eps:g}")
        check_rows = _rank(f"agree:{mech}:{eps}", inputs)[:cfg.agreement_rows]
        agreement = realised_agreement(san, rows, check_rows) if cfg.agreement_rows else None
        profiles[(mech, eps)] = prof
        priv = _privacy_summary(prof, corpus)
        priv["formula_vs_realised"] = agreement
        priv["seconds"] = time.perf_counter() - t1
        entries.append({"mechanism": mech, "epsilon": eps, "privacy": priv,
                        "bundle": {"path": str(path), "d_max": san.d_max,
                                   "numeric_tolerance": san.tolerance, "vocab_size": vocab_size,
                                   "outputs": int(san.outputs.size),
                                   "per_token_epsilon": san.epsilon * san.d_max + san.epsilon0,
                                   "epsilon0": san.epsilon0}})
        _log(cfg, f"privacy {mech} eps={eps:g}: median N_x "
                  f"{priv['vocabulary']['n_x']['median']:.4f}, attack "
                  f"{priv['attack']['exact_success_rate_dataset']:.4f}")
    timings["privacy_profiles_s"] = time.perf_counter() - t

    if "none" in cfg.baselines:
        prof = M.profile_identity(inputs, vocab_size, columns=np.intersect1d(column_pool, inputs),
                                  threshold=cfg.threshold)
        entries.append({"mechanism": "none", "epsilon": None,
                        "privacy": _privacy_summary(prof, corpus)})
        profiles[("none", None)] = prof
    if "random" in cfg.baselines:
        prof = M.profile_uniform(inputs, all_outputs, vocab_size, prior=prior,
                                 prior_name="wordfreq-en-large",
                                 columns=np.intersect1d(column_pool, all_outputs),
                                 threshold=cfg.threshold)
        entries.append({"mechanism": "random", "epsilon": None,
                        "privacy": _privacy_summary(prof, corpus)})
        profiles[("random", None)] = prof
    if "cmp" in cfg.baselines:
        for eps in cfg.epsilons:
            entries.append({"mechanism": "cmp", "epsilon": eps, "privacy": {
                "note": "CMP/FBDD has no closed-form output distribution here; see the empirical "
                        "unchanged-token rate under utility"}})

    # -- utility, per seed ----------------------------------------------------------------------
    t = time.perf_counter()
    jobs = [e for e in entries]
    for entry in _progress(jobs, cfg, desc="utility", unit="config"):
        mech, eps = entry["mechanism"], entry["epsilon"]
        runs = []
        t1 = time.perf_counter()
        if mech == "none":
            # the raw text itself: seeds change nothing, one run
            scores = train_and_score(ds.train_texts, ds.train_labels,
                                     {"sanitized_test": ds.test_texts,
                                      "original_test": ds.test_texts}, ds.test_labels)
            runs.append({"classifier": scores, "bleu": 1.0, "unchanged_token_rate": 1.0,
                         "empirical_attack_success": 1.0})
        else:
            for s in range(cfg.seeds):
                gen = _generator(cfg, s, f"{mech}:{eps}")
                if mech in MECHANISMS:
                    san = _seeded_sanitizer(cfg, sanitizers[(mech, eps)][0], s, f"{mech}:{eps}")
                    released = san.sample_ids(corpus.flat).astype(np.int64)
                    decoder = profiles[(mech, eps)].decoder
                elif mech == "random":
                    released = random_replacement(corpus.flat, all_outputs, gen).astype(np.int64)
                    decoder = profiles[("random", None)].decoder
                else:  # cmp
                    cmp = CMPMechanism(ref.embeddings, all_outputs, eps)
                    released = cmp.sample_ids(corpus.flat, gen).astype(np.int64)
                    decoder = None
                runs.append(_run_release(cfg, corpus, released, decoder, seed=s))
        entry["utility"] = _aggregate(runs)
        entry["utility"]["seconds"] = time.perf_counter() - t1
        acc = entry["utility"]["sanitized_test"]["accuracy"]["mean"]
        _log(cfg, f"utility {mech} eps={eps}: accuracy (sanitized test) {acc:.4f}")
    timings["utility_s"] = time.perf_counter() - t

    results = {
        "format": "ldptext-evaluation", "format_version": 1,
        "config": asdict(cfg),
        "versions": _versions(),
        "dataset": {**ds.info, "name": ds.name, "majority_rate_test": ds.majority_rate()},
        "classifier": CLASSIFIER_DESCRIPTION,
        "bleu": "corpus BLEU-4 of sanitized output vs its input, 0-1 scale, no smoothing",
        "randomness": ("seeded ldptext Generator per seed (reproducible experiment mode, NOT "
                       "private)" if cfg.reproducible else "OS-keyed ldptext Generator"),
        "privacy_metric_definitions": {
            "n_x": "Pr[M(x)=x]", "s_x": f"smallest output set with cumulative probability >= "
            f"{cfg.threshold}", "s_y_star": f"smallest input set with cumulative posterior (uniform "
            f"prior over inputs) >= {cfg.threshold}", "h0,h1,h2,h_inf": "Renyi entropies, bits",
            "vocabulary": "over every valid input token (S_y*: over sampled outputs)",
            "dataset": "weighted by the token's occurrences in the data set (train + test)"},
        "paper_reference_sst2": {k: {str(e): v for e, v in d.items()} for k, d in PAPER_SST2.items()},
        "entries": entries,
    }
    timings["total_s"] = time.perf_counter() - t_start
    results["timings"] = timings
    from .report import write_report
    (out / "results.json").write_text(json.dumps(_jsonable(results), indent=2) + "\n")
    write_report(results, out / "report.md")
    if cfg.plots:
        from .plots import write_plots
        results["plots"] = write_plots(results, out)
        (out / "results.json").write_text(json.dumps(_jsonable(results), indent=2) + "\n")
    _log(cfg, f"done in {timings['total_s']:.0f} s: {out / 'report.md'}")
    return results


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        f = float(obj)
        return f if math.isfinite(f) else None
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, Path):
        return str(obj)
    return obj


def command_line() -> str:
    """The current process's command line, for the report."""
    return " ".join(shlex.quote(a) for a in sys.argv)
