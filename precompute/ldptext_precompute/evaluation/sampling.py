"""One release of the whole corpus per (row, ε, seed): sanitized token ids or DP-BART rewrites,
each kept as a checkpoint (the user's data: it stays in the output directory)."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from ldptext.dpbart import Rewriter
from ldptext.rng import SeededModeWarning
from . import comparison as _comparison
from .baselines import CMPMechanism, random_replacement
from .bundles import load_unsigned
from .config import DPBART, DPBART_BATCH, SANTEXT_MECHANISMS, EvaluationConfig, epsilon_text
from .console import progress_iter
from ..epsilon import format_epsilon
from .records import Entry
from .sweep import Sweep, generator, stream_seed


def dpbart_delta(cfg: EvaluationConfig) -> float:
    """δ per chunk: ``dpbart_delta`` for Gaussian noise, 0 for Laplace (pure ε)."""
    return cfg.dpbart_delta if cfg.dpbart_mechanism == "gaussian" else 0.0


def sample_key(sweep: Sweep, entry: Entry, seed_index: int) -> dict:
    """Everything that determines one sanitized sample of the corpus (besides the data)."""
    cfg, mech, eps = sweep.cfg, entry.mechanism, entry.epsilon
    stream = sample_stream(entry)
    seed = stream_seed(cfg, seed_index, stream) if cfg.reproducible else f"os-keyed:{seed_index}"
    if mech == DPBART:
        return {"stage": "sample", "mechanism": mech, "epsilon": eps, "bundle": sweep.dpbart.digest,
                "noise": cfg.dpbart_mechanism, "delta": dpbart_delta(cfg), "long": "split", "beam": 1,
                "seed": seed}
    # a mechanism's own bundle; the baselines (the evaluation-only cmp included) key on the reference one
    bundle = sweep.bundles.get((entry.row, eps)) or next(iter(sweep.bundles.values()))
    return {"stage": "sample", "mechanism": entry.row.key, "epsilon": eps, "bundle": bundle.digest, "seed": seed}


def sample_stream(entry: Entry) -> str:
    """The random stream of an entry's samples: its row and its exact ε (:func:`.config.epsilon_text`)."""
    return f"{entry.row.key}:{'None' if entry.epsilon is None else epsilon_text(entry.epsilon)}"


def sanitized_sample(sweep: Sweep, entry: Entry, seed_index: int, key: dict) -> np.ndarray:
    """The released ids of one seed (:func:`sanitize`), from the checkpoint when there is one."""
    saved = sweep.store.load_arrays("sample", key)
    if saved is not None and saved["released"].shape == sweep.corpus.flat.shape:
        return saved["released"].astype(np.int64)
    released = sanitize(sweep, entry, seed_index)
    sweep.store.save_arrays("sample", key, {"released": released.astype(np.int32)})
    return released


def sanitize(sweep: Sweep, entry: Entry, seed_index: int) -> np.ndarray:
    """One sanitized sample of the whole corpus under ``entry``'s mechanism and ε for one seed.

    Returns the released ids (int64, aligned with ``corpus.flat``).
    """
    cfg, corpus, domain = sweep.cfg, sweep.corpus, sweep.domain
    mech, eps = entry.mechanism, entry.epsilon
    stream = sample_stream(entry)
    if mech in _comparison.COMPARISON_MECHANISMS and (entry.row, eps) in sweep.bundles:
        seed = stream_seed(cfg, seed_index, stream) if cfg.reproducible else None
        runtime = _comparison.load_runtime(mech, sweep.bundles[(entry.row, eps)].path, seed)
        return runtime.sample_ids(corpus.flat).astype(np.int64)
    if mech in SANTEXT_MECHANISMS:
        san = seeded_sanitizer(cfg, sweep.bundles[(entry.row, eps)].path, seed_index, stream)
        return san.sample_ids(corpus.flat).astype(np.int64)
    gen = generator(cfg, seed_index, stream)
    if mech == "random":
        return random_replacement(corpus.flat, domain.outputs, gen).astype(np.int64)
    cmp = CMPMechanism(domain.reference.embeddings, domain.outputs, eps)
    return cmp.sample_ids(corpus.flat, gen, track=lambda chunks: progress_iter(
        chunks, cfg, desc=f"cmp eps={format_epsilon(eps)} seed {seed_index}", unit="chunk")).astype(np.int64)


def rewritten_sample(sweep: Sweep, entry: Entry, seed_index: int, key: dict) -> dict:
    """One DP-BART rewrite of the whole corpus (:func:`_rewrite`), from the checkpoint when there is one.

    Returns ``{"texts": train + test rewritten, "chunks": per document, "report": a report or None}``.
    """
    n = len(sweep.corpus.ds.train_texts) + len(sweep.corpus.ds.test_texts)

    def decode(d: dict) -> dict:
        if len(d["texts"]) != n or len(d["chunks"]) != n:
            raise ValueError("checkpoint of another corpus")
        return d

    return sweep.store.cached_json("sample", key, lambda: _rewrite(sweep, entry, seed_index), dict, decode)


def _rewrite(sweep: Sweep, entry: Entry, seed_index: int) -> dict:
    """Rewrite every training and test document with DP-BART at the entry's ε for one seed: a Rewriter
    seeded from this seed's stream (reproducible, not private) or with private OS randomness.
    """
    cfg, ds = sweep.cfg, sweep.corpus.ds
    seed = stream_seed(cfg, seed_index, f"{DPBART}:{epsilon_text(entry.epsilon)}") if cfg.reproducible else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)   # the results state the seeded mode
        rewriter = Rewriter(sweep.dpbart.bundle, seed=seed)
    texts = ds.train_texts + ds.test_texts
    options = dict(epsilon=entry.epsilon, delta=cfg.dpbart_delta if cfg.dpbart_mechanism == "gaussian" else None,
                   mechanism=cfg.dpbart_mechanism, beam=1, long="split")
    done = []
    with rewriter:
        starts = range(0, len(texts), DPBART_BATCH)
        desc = f"dpbart eps={format_epsilon(entry.epsilon)} seed {seed_index}"
        for start in progress_iter(starts, cfg, desc=desc, unit="batch"):
            done += rewriter.rewrite_batch(texts[start:start + DPBART_BATCH], **options)
    chunks = [r.report.chunks for r in done]
    longest = max(range(len(done)), key=chunks.__getitem__) if done else None
    return {"texts": [r.text for r in done], "chunks": chunks,
            "report": None if longest is None else done[longest].report.to_dict()}


def seeded_sanitizer(cfg: EvaluationConfig, path: Path, seed_index: int, stream: str):
    """A Sanitizer on the same bundle drawing from this seed's stream (or OS-keyed)."""
    return load_unsigned(path, seed=stream_seed(cfg, seed_index, stream) if cfg.reproducible else None)
