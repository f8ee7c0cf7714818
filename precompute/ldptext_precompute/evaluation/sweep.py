"""What the steps of the sweep share: the tokenised corpus, the token domain, the checkpoint store,
the sentence encoders behind it, and the seeds of every random stream."""
from __future__ import annotations

import hashlib
import importlib.metadata as md
import platform
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np

from ldptext.rng import Generator, SeededModeWarning
from ..bleu import bleu_tokenize
from ..checkpoints import CheckpointStore
from .attacks import nearest_neighbour_table
from .bundles import Bundle, DPBartBundle
from .config import CHECKPOINT_DIR, EvaluationConfig
from .datasets import Dataset
from .mechanisms import santext_keep_rows
from .utility import MINILM_DIM, ClassifierSettings, SentenceEmbeddingSettings, SentenceEncoder


#: List lengths k of the nearest-neighbour inversion attack.
NN_KS = (1, 10)


#: Version of the neighbour table's definition (part of the attack's checkpoint keys).
NN_TABLE_VERSION = 2


@dataclass(frozen=True)
class TokenDomain:
    """The token domain every mechanism shares, from a reference Sanitizer (all bundles share it).

    ``inputs``: int64 ids of the valid inputs; ``outputs``: int64 ids that anything may release
    (SanText+'s outputs plus its kept V_N); ``vocab_size``: V.
    """

    reference: object
    vocab_size: int
    inputs: np.ndarray
    outputs: np.ndarray

    @classmethod
    def of(cls, san) -> TokenDomain:
        """The domain of a loaded Sanitizer."""
        return cls(reference=san, vocab_size=len(san.valid_input),
                   inputs=np.flatnonzero(san.valid_input).astype(np.int64),
                   outputs=np.union1d(san.outputs, np.flatnonzero(santext_keep_rows(san))).astype(np.int64))


class Corpus:
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
class Sweep:
    """What the privacy and utility steps read: the configuration, the tokenised corpus, the token
    domain, the attacker's prior (float64 ``[V]``), the S_y* column pool (int64), the bundles, the
    checkpoint store, the classifiers' settings, the bundle cache (where the MiniLM graph is kept) and the
    DP-BART bundle (None without one).
    """

    cfg: EvaluationConfig
    corpus: Corpus
    domain: TokenDomain
    prior: np.ndarray
    column_pool: np.ndarray
    bundles: dict[tuple[str, float], Bundle]
    store: CheckpointStore
    classifiers: list[ClassifierSettings] = field(default_factory=lambda: [ClassifierSettings()])
    cache_dir: Path | None = None
    dpbart: DPBartBundle | None = None
    _memo: dict = field(default_factory=dict, repr=False)   # loaded encoders, the neighbour table

    def encoder_fingerprint(self, settings: SentenceEmbeddingSettings) -> str:
        """What determines the sentence embeddings (:meth:`.utility.SentenceEncoder.fingerprint_of`)."""
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

    def encoder(self, settings: ClassifierSettings) -> CheckpointedEncoder | None:
        """The sentence encoder of a MiniLM classifier, behind the checkpoint store (None for TF-IDF)."""
        if not isinstance(settings, SentenceEmbeddingSettings):
            return None
        if settings not in self._memo:
            self._memo[settings] = CheckpointedEncoder(self, settings)
        return self._memo[settings]


class CheckpointedEncoder:
    """``encode(texts)`` of :class:`.utility.SentenceEncoder`, each text list's embeddings read from (and
    written to) the checkpoint store, keyed by the SHA-256 of the list; the encoder itself (graph export,
    ONNX session) is loaded only when something has to be embedded.
    """

    def __init__(self, sweep: Sweep, settings: SentenceEmbeddingSettings) -> None:
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
            self._encoder = SentenceEncoder(self.sweep.cache_dir, self.settings)
        x = self._encoder.encode(texts, progress=self.sweep.cfg.progress, desc=f"MiniLM ({len(texts)} texts)")
        self.sweep.store.save_arrays("embedding", key, {"x": x.astype(np.float16)})
        return x


#: Version of the checkpoint layout (part of every key: a new layout never reads an old file).
CHECKPOINT_FORMAT = 1


def checkpoint_store(out: Path, cfg: EvaluationConfig, ds: Dataset) -> CheckpointStore:
    """The sweep's checkpoints under ``out/checkpoints``: every key also carries the layout version, the
    data set's fingerprint and the ldptext, scikit-learn and wordfreq (the attacker's prior) versions."""
    found = package_versions()
    base = {"format": CHECKPOINT_FORMAT, "data": ds.fingerprint(),
            **{k: found.get(k) for k in ("ldptext", "scikit-learn", "wordfreq")}}
    return CheckpointStore(out / CHECKPOINT_DIR, resume=cfg.resume, base=base)


@contextmanager
def timed(timings: dict[str, float], key: str) -> Iterator[None]:
    """Record the wall time of the ``with`` block as ``timings[key]`` (seconds)."""
    started = time.perf_counter()
    yield
    timings[key] = time.perf_counter() - started


def rank(tag: str, ids: np.ndarray) -> np.ndarray:
    """Deterministic pseudo-random order of ids (sha256), independent of numpy versions."""
    keys = [hashlib.sha256(f"{tag}:{int(i)}".encode()).digest() for i in ids]
    return np.asarray(ids)[np.argsort(np.array(keys, dtype=object), kind="stable")] \
        if len(keys) else np.asarray(ids)


def seed_int(seed_base: int, seed_index: int, stream: str) -> int:
    """The 64-bit seed of one (seed, stream) pair (also the DP-BART table's, :mod:`.dpbart_table`)."""
    return int.from_bytes(hashlib.sha256(f"{seed_base}:{seed_index}:{stream}".encode()).digest()[:8], "little")


def stream_seed(cfg: EvaluationConfig, seed_index: int, stream: str) -> int:
    """:func:`seed_int` of one seed's stream under the configuration's ``seed_base``."""
    return seed_int(cfg.seed_base, seed_index, stream)


def generator(cfg: EvaluationConfig, seed_index: int, stream: str):
    """The baselines' generator for this seed's stream: seeded, or OS-keyed when not reproducible."""
    if not cfg.reproducible:
        return Generator()
    seed = stream_seed(cfg, seed_index, stream)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        return Generator(seed=seed)


def package_versions() -> dict:
    """Python and package versions, for the results."""
    out = {"python": platform.python_version()}
    for pkg in ("ldptext", "numpy", "scikit-learn", "matplotlib", "tokenizers", "wordfreq"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    return out
