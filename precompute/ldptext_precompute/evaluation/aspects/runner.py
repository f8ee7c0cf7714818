"""The sweep behind ``ldptext evaluate-aspects``: every mechanism at every ε on an authored corpus, and what
each release keeps (meaning, style) and gives away (divergence, re-identification, profiling).

Steps:

1. **corpus** — :func:`.corpus.load_authored_corpus` (documents, authors, party);
2. **bundles and releases** as ``ldptext evaluate`` makes them: the same bundles (cached, unsigned,
   :func:`..bundles.load_bundles`, the registry's evaluation defaults for the comparison mechanisms), the same
   verified DP-BART bundle (:func:`..bundles.load_dpbart`), the same seeded streams and sample checkpoints
   (:func:`..sampling.sanitized_sample`, :func:`..sampling.rewritten_sample`), so a release here is the release
   ``ldptext evaluate`` scores for the same configuration;
3. **the original side, once** — MiniLM token states and sentence embeddings, POS tags, and the adversaries
   trained on original text (:mod:`.reidentification`);
4. **per release** — the metrics of :mod:`.meaning`, :mod:`.style`, :mod:`.divergence` and
   :mod:`.reidentification`, each release's numbers kept as a checkpoint;
5. **write** ``aspects.json``, ``aspects.md`` and one PNG per aspect (:mod:`.plots`).

The unsanitized corpus is the reference row (``none``): it gives the adversaries' baseline. Raw text is
never logged; the releases are kept only as checkpoints in ``OUT/checkpoints`` (the user's data).
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import NamedTuple

import numpy as np

from ldptext.fileio import atomic_path
from ...checkpoints import CheckpointStore
from ..bundles import load_bundles, load_dpbart
from ..config import DPBART, EvaluationConfig
from ..console import log, progress_iter
from ..datasets import Dataset
from ..rows import ROW_ORDER, Row
from ..sampling import rewritten_sample, sample_key, sanitized_sample
from ..sweep import Corpus, TokenDomain, package_versions
from . import divergence as D
from . import meaning as MN
from . import reidentification as R
from . import style as S
from ..report import shareable_mode
from .corpus import AuthoredCorpus, load_authored_corpus
from .plots import write_aspect_plots
from .report import aspects_markdown

__all__ = ["AspectsConfig", "Release", "evaluate_aspects", "METRICS", "ASPECTS"]

#: Version of the metric definitions (part of every metric checkpoint's key).
METRICS_VERSION = 1

#: Each metric's key and what it is.
METRICS = {
    "bertscore_f1": "BERTScore F1 (per pair, mean)",
    "frechet": "Fréchet distance of sentence embeddings (corpus)",
    "pos_score": "POS-trigram Jaccard similarity (per pair, mean)",
    "pos_jsd": "POS-trigram JSD (corpus)",
    "divergence": "1 − BLEU (per pair, mean)",
    "char_jsd": "character-trigram JSD (corpus)",
    "reid_top1": "re-identification top-1",
    "reid_topk": "re-identification top-k",
    "linkage": "linkage to the original (top-1)",
    "profiling": "attribute profiling accuracy",
}

#: The aspects and their metrics (one plot each).
ASPECTS = {
    "meaning": ("bertscore_f1", "frechet"),
    "style": ("pos_score", "pos_jsd"),
    "divergence": ("divergence", "char_jsd"),
    "reidentification": ("reid_top1", "reid_topk", "linkage", "profiling"),
}


@dataclass
class AspectsConfig:
    """Everything the aspects sweep depends on (stored in ``aspects.json``).

    Attributes
    ----------
    out : str
        Output directory.
    corpus : str
        Authored corpus (:data:`.corpus.CORPORA`).
    doc_words, docs_per_author, max_authors : int, int, int or None
        Chunking of the corpus (:func:`.corpus.load_authored_corpus`).
    mechanisms : list of str
        Token mechanisms (as ``ldptext evaluate --mechanism``); SanText+ with its default split.
    baselines : list of str
        ``random`` (uniform replacement) and/or ``none`` (the unsanitized reference row, always added).
    embeddings, vocab_size, epsilons, p : as :class:`..config.EvaluationConfig`
    seeds, seed_base : int
        Releases per configuration (metrics averaged over them) and the base of their seeds.
    k : int
        The k of top-k re-identification.
    folds : int
        Author-grouped folds of the profiling classifier.
    dpbart_bundle, dpbart_epsilons, dpbart_delta, dpbart_mechanism, allow_unsigned, trusted_keys
        DP-BART, as :class:`..config.EvaluationConfig` (ε per chunk).
    cache_dir : str or None
        Bundle cache (default ``~/.cache/ldptext/evaluate``, shared with ``ldptext evaluate``).
    resume, progress, plots : bool
    command : str or None
    """

    out: str = "aspects"
    corpus: str = "conventions-2012"
    doc_words: int = 50
    docs_per_author: int = 12
    max_authors: int | None = None
    mechanisms: list[str] = field(default_factory=lambda: ["santext", "santext+", "tem", "custext", "custext+",
                                                           "cmp"])
    baselines: list[str] = field(default_factory=lambda: ["none", "random"])
    embeddings: str = "glove-6b-50d"
    vocab_size: int | None = 20_000
    epsilons: list[float] = field(default_factory=lambda: [1.0, 2.0, 3.0])
    p: float = 0.3
    seeds: int = 1
    seed_base: int = 0
    k: int = 5
    folds: int = 5
    dpbart_bundle: str | None = None
    dpbart_epsilons: list[float] | None = None
    dpbart_delta: float = 1e-5
    dpbart_mechanism: str = "gaussian"
    allow_unsigned: bool = False
    trusted_keys: list[str] | None = None
    cache_dir: str | None = None
    resume: bool = True
    progress: bool = True
    plots: bool = True
    command: str | None = None

    def evaluation_config(self) -> EvaluationConfig:
        """The :class:`..config.EvaluationConfig` whose bundles, seeds and samples this sweep shares."""
        cfg = EvaluationConfig(
            out=self.out, mechanisms=list(self.mechanisms), embeddings=self.embeddings, vocab_size=self.vocab_size,
            epsilons=list(self.epsilons), p=self.p, baselines=[b for b in self.baselines if b in ("none", "random")],
            seeds=self.seeds, seed_base=self.seed_base, dpbart_bundle=self.dpbart_bundle,
            dpbart_epsilons=self.dpbart_epsilons, dpbart_delta=self.dpbart_delta,
            dpbart_mechanism=self.dpbart_mechanism, allow_unsigned=self.allow_unsigned,
            trusted_keys=self.trusted_keys, cache_dir=self.cache_dir, progress=self.progress, plots=self.plots)
        cfg.validate()
        return cfg


class Release(NamedTuple):
    """One configuration: a row (mechanism) at one ε (None for the ε-free baselines)."""

    row: Row
    epsilon: float | None

    @property
    def mechanism(self) -> str:
        """The row's mechanism (what the sampling functions read)."""
        return self.row.mechanism


class Original(NamedTuple):
    """What the original corpus gives every release: token states, sentence embeddings, POS tags,
    the released mask and the adversaries."""

    states: list
    sentences: np.ndarray
    tags: list
    released: np.ndarray
    attacks: AttackSet


class AttackSet(NamedTuple):
    """The adversaries trained on original text (:mod:`.reidentification`)."""

    author: R.AuthorAttack
    linkage: R.Linkage
    attribute: R.AttributeAttack


def evaluate_aspects(config: AspectsConfig | None = None, **overrides) -> dict:
    """Run the sweep; write ``aspects.json``, ``aspects.md`` and the plots to ``out``; return the results."""
    cfg = config or AspectsConfig()
    if overrides:
        cfg = AspectsConfig(**{**asdict(cfg), **overrides})
    started = time.perf_counter()
    ecfg = cfg.evaluation_config()
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    cache = Path(cfg.cache_dir) if cfg.cache_dir else Path.home() / ".cache" / "ldptext" / "evaluate"
    cache.mkdir(parents=True, exist_ok=True)

    corpus = load_authored_corpus(cfg.corpus, doc_words=cfg.doc_words, docs_per_author=cfg.docs_per_author,
                                  max_authors=cfg.max_authors)
    log(ecfg, f"corpus: {corpus.name}, {len(corpus.texts)} documents by {corpus.n_authors} authors")
    dpbart = load_dpbart(ecfg)
    bundles = load_bundles(ecfg, cache)
    domain = TokenDomain.of(next(iter(bundles.values())).sanitizer)
    ds = Dataset(corpus.name, list(corpus.texts), list(corpus.attributes), [], [])
    versions = package_versions()
    store = CheckpointStore(out / "checkpoints", resume=cfg.resume,
                            base={"format": 1, "data": corpus.fingerprint(), "ldptext": versions.get("ldptext")})
    sweep = SimpleNamespace(cfg=ecfg, corpus=Corpus(ds, domain.reference), domain=domain, bundles=bundles,
                            dpbart=dpbart, store=store)

    encoder = MN.TokenEncoder(cache)
    tagger = S.PosTagger()
    log(ecfg, "original corpus: MiniLM, POS tags, adversaries")
    original = _original(corpus, encoder, tagger, cfg)

    rows = []
    releases = _releases(cfg, ecfg, bundles)
    for release in progress_iter(releases, ecfg, desc="aspects", unit="config"):
        per_seed = []
        seeds = [0] if release.mechanism == "none" else range(cfg.seeds)
        for seed in seeds:
            key = _release_key(sweep, release, seed)
            per_seed.append(store.cached_json(
                "aspects", {**key, "metrics": METRICS_VERSION, "k": cfg.k, "folds": cfg.folds,
                            "tagger": tagger.version, "encoder": encoder.fingerprint},
                lambda: _measure(cfg, corpus, original, _texts(sweep, corpus, release, seed), encoder, tagger),
                dict, dict))
        rows.append(_summarise(release, per_seed, sweep))
        log(ecfg, f"{release.row.label} eps={_eps(release.epsilon)}: " + ", ".join(
            f"{k}={rows[-1]['metrics'][k]:.3f}" for k in ("bertscore_f1", "divergence", "reid_top1", "profiling")))
    results = {
        "corpus": {"name": corpus.name, **corpus.info, "attribute": corpus.attribute_name},
        "config": asdict(cfg),
        "chance": {"reid_top1": original.attacks.author.chance((1,))[1],
                   "reid_topk": original.attacks.author.chance((cfg.k,))[cfg.k],
                   "linkage": 1.0 / corpus.n_authors, "profiling": original.attacks.attribute.chance()},
        "metrics": METRICS, "aspects": {k: list(v) for k, v in ASPECTS.items()},
        "tagger": tagger.version, "encoder": "all-MiniLM-L6-v2 (int8 ONNX), last layer",
        "rows": rows, "versions": versions,
        "seeded": "reproducible seeded streams (not private)",
        "wall_time_s": time.perf_counter() - started,
    }
    _write(cfg, ecfg, results, out)
    return results


def _eps(eps: float | None) -> str:
    """ε in progress lines, as every offline tool prints it (:func:`ldptext_precompute.epsilon.format_epsilon`)."""
    from ...epsilon import format_epsilon
    return "-" if eps is None else format_epsilon(eps)


def _releases(cfg: AspectsConfig, ecfg: EvaluationConfig, bundles: dict) -> list[Release]:
    """The configurations in table order: the reference, random, the token mechanisms, DP-BART."""
    out = [Release(Row("none"), None)]
    if "random" in cfg.baselines:
        out.append(Release(Row("random"), None))
    token = []
    for row, eps in bundles:
        if row.mechanism in ecfg.mechanisms and (row, eps) not in token:
            token.append((row, eps))
    order = {m: i for i, m in enumerate(ROW_ORDER)}
    token.sort(key=lambda re: (order.get(re[0].mechanism, len(order)), re[0].split or "", re[1]))
    out += [Release(r, e) for r, e in token]
    if ecfg.dpbart_bundle:
        out += [Release(Row(DPBART), float(e)) for e in ecfg.dpbart_epsilons]
    return out


def _release_key(sweep, release: Release, seed: int) -> dict:
    if release.mechanism == "none":
        return {"stage": "sample", "mechanism": "none"}
    return sample_key(sweep, release, seed)


def _texts(sweep, corpus: AuthoredCorpus, release: Release, seed: int) -> list[str]:
    """The released documents of one configuration and seed (from the sample checkpoints when there are)."""
    if release.mechanism == "none":
        return list(corpus.texts)
    key = sample_key(sweep, release, seed)
    if release.mechanism == DPBART:
        return list(rewritten_sample(sweep, release, seed, key)["texts"])
    released = sanitized_sample(sweep, release, seed, key)
    return sweep.corpus.decode(released)[0]


def _original(corpus: AuthoredCorpus, encoder, tagger, cfg: AspectsConfig) -> Original:
    states, sentences = encoder.token_states(corpus.texts)
    tags = tagger.tag(corpus.texts)
    mask = corpus.released_mask()
    texts = np.array(corpus.texts, dtype=object)
    authors = np.array(corpus.authors, dtype=object)
    attacks = AttackSet(R.AuthorAttack(list(texts[~mask]), list(authors[~mask])),
                        R.Linkage(corpus.texts, corpus.authors),
                        R.AttributeAttack(corpus.texts, corpus.authors, corpus.attributes, folds=cfg.folds))
    return Original(states, sentences, tags, mask, attacks)


def _measure(cfg: AspectsConfig, corpus: AuthoredCorpus, original: Original, texts: list[str], encoder,
             tagger) -> dict:
    """Every metric of one release (aligned with the corpus)."""
    states, sentences = encoder.token_states(texts)
    tags = tagger.tag(texts)
    mask = original.released
    released = [t for t, m in zip(texts, mask) if m]
    released_authors = [a for a, m in zip(corpus.authors, mask) if m]
    reid = original.attacks.author.accuracy(released, released_authors, ks=(1, cfg.k))
    return {
        "bertscore_f1": float(np.mean([MN.bertscore(o, s)[2] for o, s in zip(original.states, states)])),
        "frechet": MN.frechet_distance(original.sentences, sentences),
        "pos_score": float(np.mean([S.pos_score(o, s) for o, s in zip(original.tags, tags)])),
        "pos_jsd": S.pos_trigram_jsd(original.tags, tags),
        "divergence": float(np.mean(D.self_bleu_divergence(corpus.texts, texts))),
        "char_jsd": D.char_trigram_jsd(corpus.texts, texts),
        "reid_top1": reid[1],
        "reid_topk": reid[cfg.k],
        "linkage": original.attacks.linkage.accuracy(released, released_authors),
        "profiling": original.attacks.attribute.accuracy(texts),
    }


def _summarise(release: Release, per_seed: list[dict], sweep) -> dict:
    """Mean (and sample std over seeds, ddof = 1) of every metric."""
    metrics = {k: float(np.mean([m[k] for m in per_seed])) for k in METRICS}
    std = {k: (float(np.std([m[k] for m in per_seed], ddof=1)) if len(per_seed) > 1 else None) for k in METRICS}
    row = {"mechanism": release.row.key, "label": release.row.label, "epsilon": release.epsilon,
           "seeds": len(per_seed), "metrics": metrics, "std": std}
    if release.mechanism == DPBART:
        row["epsilon_per"] = "chunk of at most L tokens (a document of k chunks composes to k·ε)"
    return row


def _write(cfg: AspectsConfig, ecfg: EvaluationConfig, results: dict, out: Path) -> None:
    with atomic_path(out / "aspects.json", mode=shareable_mode()) as tmp:
        Path(tmp).write_text(json.dumps(results, indent=1, sort_keys=True, default=_jsonable) + "\n")
    written = write_aspect_plots(results, out) if cfg.plots else []
    results["plots"] = written
    with atomic_path(out / "aspects.md", mode=shareable_mode()) as tmp:
        Path(tmp).write_text(aspects_markdown(results))
    log(ecfg, f"wrote {out / 'aspects.md'}, {out / 'aspects.json'}"
        + (f", {len(written)} plots" if written else "") + f" in {results['wall_time_s']:.0f} s")


def _jsonable(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    raise TypeError(type(value).__name__)

