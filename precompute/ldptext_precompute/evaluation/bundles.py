"""The bundles the sweep evaluates: SanText bundles built (or reused) in the cache, the comparison
mechanisms' bundles, and the verified DP-BART bundle."""
from __future__ import annotations

import hashlib
import warnings
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

from ldptext.dpbart import Rewriter
from ldptext.dpbart_schema import MECHANISM
from ldptext.errors import LdptextError
from ldptext.fileio import file_sha256
from ldptext.runtime import open_bundle
from ldptext.santext import Sanitizer
from . import comparison as _comparison
from .config import SANTEXT_MECHANISMS, EvaluationConfig, epsilon_text
from .console import log
from ..epsilon import format_epsilon
from .records import DPBartBundleInfo
from .rows import Row


def load_bundles(cfg: EvaluationConfig, cache: Path) -> dict[tuple[Row, float], Bundle]:
    """Step 2: one loaded bundle per (row, ε) — SanText rows (:meth:`.config.EvaluationConfig.santext_rows`),
    then the comparison mechanisms —, in the order of the configuration.

    When no SanText mechanism is evaluated, one SanText bundle at the first ε is still loaded: it gives
    the baselines their vocabulary, tokenizer and embeddings (and gets no entry of its own).
    """
    santext = [m for m in cfg.mechanisms if m in SANTEXT_MECHANISMS]
    wanted = replace(cfg, mechanisms=santext) if santext else replace(cfg, mechanisms=["santext"],
                                                                      epsilons=cfg.epsilons[:1])
    bundles = load_sanitizers(wanted, cache)
    comparison = _comparison.load_comparison_bundles(
        cfg.mechanisms, cfg.epsilons, embeddings=cfg.embeddings, vocab_size=cfg.vocab_size, cache=cache,
        progress=cfg.progress, log=lambda msg: log(cfg, msg))
    for key, (path, runtime) in comparison.items():
        bundles[(Row(key[0]), key[1])] = Bundle(path, runtime, file_sha256(path))
    return bundles


def load_dpbart(cfg: EvaluationConfig) -> DPBartBundle | None:
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
    log(cfg, f"DP-BART bundle: {info.variant}, L={info.seq_len}, {signer}")
    return DPBartBundle(path, bundle, file_sha256(path), info)


class Bundle(NamedTuple):
    """A bundle file, the Sanitizer loaded from it (no seed) and the SHA-256 of the file (what
    checkpoints are keyed by).
    """

    path: Path
    sanitizer: object
    digest: str


class DPBartBundle(NamedTuple):
    """The DP-BART bundle: its file, the verified bundle (every Rewriter of the sweep is made from it), the
    SHA-256 of the file (what its samples are keyed by) and its description.
    """

    path: Path
    bundle: object
    digest: str
    info: DPBartBundleInfo


def bundle_path(cfg: EvaluationConfig, cache: Path, row: Row, epsilon: float) -> Path:
    """Cache file of the bundle of one (row, ε) under this configuration; ε, p and the verbatim cap exactly
    as given (an uncapped bundle's name has no cap part, as before the cap existed)."""
    emb = cfg.embeddings
    if Path(emb).exists():
        emb = "file-" + hashlib.sha256(str(Path(emb).resolve()).encode()).hexdigest()[:12]
    params = f"p{float(cfg.p)!r}-" if row.mechanism == "santext+" else ""
    if cfg.verbatim_cap is not None:
        params += f"cap{float(cfg.verbatim_cap)!r}-"
    # v3: outputs are only tokens the tokenizer reads back as themselves (every runtime refuses a
    # bundle built before that rule), so an older cached bundle is not reused
    name = (f"eval-{emb}-V{cfg.vocab_size or 'all'}-k{cfg.head_size}-{row.file_tag}-"
            f"eps{epsilon_text(epsilon)}-{params}v3.ldpb")
    return cache / name


def load_unsigned(path: Path, seed: int | None = None):
    """A Sanitizer on an evaluation bundle (unsigned / seeded-mode warnings are stated in the results;
    a sweep may reach a near-identity ε on purpose, and its verbatim rate is in the bundle's report)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Sanitizer.load(path, allow_unsigned=True, seed=seed, allow_weak_privacy=True)


def _discard_if_stale(path: Path) -> None:
    """Delete a cached bundle that the current runtime no longer loads (built by an older version)."""
    if path.exists():
        try:
            load_unsigned(path)
        except LdptextError:
            path.unlink()


def load_sanitizers(cfg: EvaluationConfig, cache: Path) -> dict[tuple[Row, float], Bundle]:
    """Build (or reuse from the cache) one unsigned evaluation bundle per (SanText row, ε) and load it.

    Each is what ``ldptext precompute santext`` builds with the same embeddings, vocabulary, ε, p, split
    and head size, and the configuration's verbatim cap (``verbatim_cap``; None: no cap) (its other options
    at their defaults). The bundles are built here and never leave this
    machine, hence unsigned; the embeddings are loaded at most once, and only when a bundle has to be built.
    """
    from ..santext import build as santext_build
    from ..santext.embeddings import load_embeddings

    loaded = None
    bundles = {}
    for row in cfg.santext_rows():
        for eps in cfg.epsilons:
            path = bundle_path(cfg, cache, row, eps)
            _discard_if_stale(path)
            if not path.exists():
                if loaded is None:
                    loaded = load_embeddings(cfg.embeddings, cfg.vocab_size)
                log(cfg, f"building {row.label} bundle, eps={format_epsilon(eps)}")
                santext_build.build_santext_bundle(
                    path, embeddings=cfg.embeddings, epsilon=eps, mechanism=row.mechanism, p=cfg.p,
                    non_sensitive=row.split, vocab_size=cfg.vocab_size, head_size=cfg.head_size,
                    sign_key=False, cache_dir=cache / "neighbours", progress=cfg.progress, loaded=loaded,
                    allow_weak_privacy=True, verbatim_cap=cfg.verbatim_cap)
            bundles[(row, eps)] = Bundle(path, load_unsigned(path), file_sha256(path))
    return bundles
