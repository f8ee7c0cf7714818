"""DP-BART Table 6.5 on packaged data: BLEU of the rewritten training partition and downstream macro-F1.

The layout of Igamberdiev 2023, *Differentially Private Methods in NLP* (PhD thesis, TU Darmstadt),
Table 6.5 (§6.5.2; Igamberdiev & Habernal 2023, *DP-BART for Privatized Text Rewriting under Local
Differential Privacy*, Findings of ACL): for ε ∈ {∞, 2500, 1000, 750, 500, 250, 100, 50, 10} and the
four models ADePT, DP-BART-CLV, DP-BART-PR and DP-BART-PR+, the corpus BLEU of the rewritten training
partition against the original, and the macro-F1 on the original test set of a classifier trained on
the rewritten training partition; the original (unrewritten) F1 beside it; PR+ is N/A at ε = ∞ (no
noisy training without noise).

Here: the Rotten Tomatoes snippets that ship with the project (fresh vs rotten, balanced;
``evaluation/datasets.py``), the MiniLM bert2bert stand-in trained by ``make dpbart-train``, the
SDK's discrete Gaussian with δ = 1e-5 per release, the TF-IDF + logistic-regression classifier of
``evaluation/utility.py`` and the corpus BLEU-4 of ``ldptext_precompute/bleu.py`` (× 100, as in the
table). Usage::

    python -m ldptext_precompute.evaluation.dpbart_table --source-bundle ~/.cache/ldptext/minilm-dpbart.ldpb \
        --out-dir ~/.cache/ldptext/dpbart-table [--max-train 2000] [--max-test 0] [--seeds 1] \
        [--epsilons inf,2500,1000,750,500,250,100,50,10] [--prplus-steps 100] [--threads 1]

What it does (every step resumable: a rerun skips finished work):

1. **Bundles from one trained base stage.** The build configuration comes from the source bundle's
   manifest (``build.config``) or ``--config``; the finished stage checkpoints of the source work dir
   (``--source-work-dir``, default ``SOURCE.work``: ``base``, ``clip``, ``prune-1..R``) must carry its
   fingerprint. They are *linked* (hard links, copies across file systems; the small JSON records are
   always written anew) into ``OUT/stages/``, and every bundle is built there with
   ``build_dpbart_bundle``, which resumes after the latest finished stage: CLV after ``clip``, PR after
   ``prune-R`` — export only, nothing trained — and PR+ trains only its noisy stage. The source work
   dir is only read: the build code writes new checkpoints through a temporary file and a rename
   (new inodes), so a linked ``.pt`` is never written through, and no JSON is shared. A source stage
   with another fingerprint, or no finished ``base`` stage, is refused before anything is built (the
   base stage is never retrained here).
2. **PR+ per finite ε.** The noisy stage trains ``--prplus-steps`` steps (default 100, small) at the
   target (ε, δ). Its step count is ``DPBartBuildConfig.steps``, which is part of the stage
   fingerprint; when it differs from the source's ``steps``, the finished stages are linked into
   ``OUT/stages-prplus-N/`` with JSON records carrying the fingerprint of the configuration with
   ``steps=N`` (same weight files; the warm-up is shortened to a tenth of N when the source's own
   warm-up would not fit in N steps). Those PR+ bundles then record ``steps=N`` in their manifest's
   ``build.config``; the pruning rounds ran the source's steps (both numbers are in the table JSON).
   With ``--prplus-steps`` equal to the source's steps (``make dpbart-table`` does this) the PR+
   configuration is exactly the ``ldptext precompute dpbart --variant pr+`` one. A PR+ noisy-stage
   checkpoint is deleted once its bundle is written (the bundle is the done marker; about 200 MB each).
   The table's bundles are unsigned evaluation artefacts (loaded with ``allow_unsigned``), never shipped.
3. **Rewriting** of the (capped) training partition with ADePT (corrected sensitivity, over the
   **CLV** bundle's encoder and decoder by default: no pruning, like ADePT's own autoencoder;
   ``--adept-over pr`` for the PR bundle), CLV, PR and PR+ at each ε: ``long="split"`` (as ``ldptext
   evaluate``), greedy decoding (the thesis: beam 10; ``--beam``). Each (model, ε, seed) rewrite is
   checkpointed in ``OUT/rewrites/``; at ε = ∞ the rewrite has no noise and is shared by the seeds.
4. **Metrics** per cell, checkpointed in ``OUT/cells/``: corpus BLEU-4 × 100 of the rewritten training
   documents against the originals, and macro-F1 (and accuracy) on the original test set of the
   TF-IDF classifier trained on the rewritten training documents (seed = the seed index); the
   original F1: the same classifier on the original training documents.
5. **Table**: ``OUT/table.md`` and ``OUT/table.json`` (and stdout), mean (std over seeds, ddof = 0).

Seeds: each seed draws its own noise from a **seeded** generator (reproducible, **not private**:
evaluation only; the header says so); ``--os-randomness`` uses the OS CSPRNG instead (a rerun still
reuses the checkpoints). ε is per release — one chunk of at most L tokens — with the document-level
neighbouring relation (replace the whole chunk; any two inputs); a document of k chunks is k releases.

CPU cost, measured on two cores shared with a training job and another helper (load ≈ 4), MiniLM
stand-in, int8 ONNX, greedy, one thread: rewriting ≈ 11 documents/s (≈ 22 chunks/s, 1.9 chunks per
document; two threads were 3–5× slower on the shared cores); each bundle export ≈ 2 min; a PR+ noisy
stage 0.4–1 s per step. At the default 2,000 training documents a cell takes ≈ 3 min, so 35 cells ≈
1 h 45 min per seed, plus ≈ 20 min for the 10 bundles and ≈ 8 × 300 PR+ steps (``make dpbart-table``):
about 2.5 h for one seed on this machine, less when it is quiet. The classifier takes seconds per cell.
The full training partition (``--max-train 0``: 8,648) multiplies the rewriting time by 4.3.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ldptext.bundle import UnsignedBundleWarning, open_unverified
from ldptext.dpbart import Rewriter
from ldptext.fileio import file_sha256
from ldptext.rng import SeededModeWarning
from ..bleu import bleu_tokenize, corpus_bleu
from ..checkpoints import jsonable
from ..dpbart.adept import AdeptRewriter
from . import utility
from .datasets import load_dataset
from .sweep import seed_int

EPSILONS = (math.inf, 2500.0, 1000.0, 750.0, 500.0, 250.0, 100.0, 50.0, 10.0)
MODELS = ("adept", "clv", "pr", "pr+")
LABELS = {"adept": "ADePT", "clv": "DP-BART-CLV", "pr": "DP-BART-PR", "pr+": "DP-BART-PR+"}
DEFAULT_DELTA = 1e-5          # ldptext evaluate's DP-BART default (runner.DEFAULT_DPBART_DELTA)
DEFAULT_PRPLUS_STEPS = 100
DEFAULT_MAX_TRAIN = 2000
REWRITE_BATCH = 64
DATASET_NAMES = {"rotten-tomatoes": "Rotten Tomatoes"}


# ---------------------------------------------------------------------------------------- config
@dataclass
class TableConfig:
    """What the table is computed from (everything but the trained model).

    Attributes
    ----------
    out_dir : Path
        Stages, bundles, rewrites, cells, ``table.md`` and ``table.json``.
    source_work_dir : Path
        The trained work dir (``make dpbart-train``'s ``minilm-dpbart.ldpb.work``); read only.
    epsilons : tuple of float
        ε per release (``math.inf``: no noise, evaluation only).
    models : tuple of str
        Subset of :data:`MODELS`.
    delta, mechanism : float, str
        δ per release and the noise (``gaussian``; ``laplace`` is pure ε, δ = 0).
    prplus_steps : int
        Steps of each PR+ noisy stage.
    seeds, seed_base : int
        Repetitions and the base of their seeds.
    reproducible : bool
        Seeded generators (not private) or the OS CSPRNG.
    data : str
        ``rotten-tomatoes`` or a CSV / JSONL file (``text_col``, ``label_col``).
    max_train, max_test : int or None
        Stratified caps (``None``: all).
    beam : int
        Beam width of the decoding (1 = greedy).
    long : str
        ``split`` (k chunks = k releases) or ``truncate`` (one release per document).
    adept_over : str
        ``clv`` or ``pr``: whose encoder and decoder ADePT runs on.
    threads : int or None
        torch and ONNX Runtime threads (default 1; ``None``: their own choice).
    progress : bool
        Progress bars.
    keep_prplus_stages : bool
        Keep each PR+ noisy-stage checkpoint after its bundle is written.
    """

    out_dir: Path
    source_work_dir: Path
    epsilons: tuple = EPSILONS
    models: tuple = MODELS
    delta: float = DEFAULT_DELTA
    mechanism: str = "gaussian"
    prplus_steps: int = DEFAULT_PRPLUS_STEPS
    seeds: int = 1
    seed_base: int = 0
    reproducible: bool = True
    data: str = "rotten-tomatoes"
    text_col: str = "text"
    label_col: str = "label"
    max_train: int | None = DEFAULT_MAX_TRAIN
    max_test: int | None = None
    beam: int = 1
    long: str = "split"
    adept_over: str = "clv"
    threads: int | None = 1
    progress: bool = True
    keep_prplus_stages: bool = False

    def validate(self) -> None:
        """Refuse settings the table cannot be computed with (ValueError)."""
        self.out_dir, self.source_work_dir = Path(self.out_dir), Path(self.source_work_dir)
        self.epsilons = tuple(float(e) for e in self.epsilons)
        if not self.epsilons or any(not e > 0 for e in self.epsilons) or len(set(self.epsilons)) != len(self.epsilons):
            raise ValueError("epsilons must be distinct numbers > 0 (inf allowed)")
        bad = [m for m in self.models if m not in MODELS]
        if bad or not self.models:
            raise ValueError(f"models must be among {', '.join(MODELS)}")
        self.models = tuple(m for m in MODELS if m in self.models)
        if self.mechanism not in ("gaussian", "laplace"):
            raise ValueError("mechanism must be gaussian or laplace")
        if self.mechanism == "gaussian" and not 0 < self.delta < 1:
            raise ValueError("delta must be in (0, 1) for the Gaussian mechanism")
        if self.prplus_steps < 1 or self.seeds < 1 or not 1 <= self.beam <= 64:
            raise ValueError("prplus_steps and seeds must be >= 1, beam in 1..64")
        if self.long not in ("split", "truncate"):
            raise ValueError("long must be split or truncate")
        if self.adept_over not in ("clv", "pr"):
            raise ValueError("adept_over must be clv or pr")

    @property
    def release_delta(self) -> float | None:
        """δ passed to the rewriters (None for Laplace)."""
        return self.delta if self.mechanism == "gaussian" else None


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _key_hash(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _eps_str(eps: float) -> str:
    return "inf" if math.isinf(eps) else f"{eps:g}"


def _write_json(path: Path, obj: Any) -> None:
    """Atomic write (temporary file + rename): an interrupted run never leaves a half-written checkpoint."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=str), encoding="utf-8")
    tmp.replace(path)


# --------------------------------------------------------------------------- the trained source
def source_build_config(source_bundle: str | Path | None = None, config: str | Path | dict | None = None, *,
                        init_weights: str | Path | None = None, search: Sequence[Path] = ()):
    """The :class:`DPBartBuildConfig` the source work dir was trained with.

    Parameters
    ----------
    source_bundle : path or None
        A bundle written by that build: its manifest's ``build.config`` (read without a trust decision;
        only the configuration is used, never the bundle's graphs).
    config : path, dict or None
        Or the configuration itself (a JSON file of ``DPBartBuildConfig`` fields, a manifest, or a dict).
    init_weights : path or None
        The starting weights of a build with ``--init-weights``: the manifest records them by file name
        and SHA-256 only, and the fingerprint needs the file. Default: searched as ``FILE`` and
        ``*.work/FILE`` beside the source bundle (or config file) and in ``search``.
    search : sequence of Path
        More directories to search.

    Returns
    -------
    DPBartBuildConfig

    Raises
    ------
    ValueError
        Neither source given, or the starting weights are needed and not found (or ``init_weights``
        has another SHA-256 than the recorded one).
    """
    from ldptext_precompute.dpbart.build import DPBartBuildConfig

    if config is not None:
        values = config if isinstance(config, dict) else json.loads(Path(config).read_text())
        values = values.get("build", {}).get("config", values) if "build" in values else values
        where = [] if isinstance(config, dict) else [Path(config).parent]
    elif source_bundle is not None:
        bundle, _ = open_unverified(source_bundle)
        values = bundle.manifest["build"]["config"]
        where = [Path(source_bundle).parent]
    else:
        raise ValueError("give the trained bundle (--source-bundle) or its build configuration (--config)")
    values = dict(values)
    recorded = values.get("init_weights")
    if isinstance(recorded, dict):        # {"file": name, "sha256": hex}: find the file with that content
        values["init_weights"] = str(_find_init_weights(recorded, init_weights, [*where, *search]))
    elif init_weights is not None and recorded is None:
        _log("note: --init-weights ignored: the source build did not start from other weights")
    known = {f.name for f in fields(DPBartBuildConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        _log(f"note: build config fields unknown to this version ignored: {', '.join(unknown)}")
    return DPBartBuildConfig(**{k: v for k, v in values.items() if k in known})


def _find_init_weights(recorded: dict, given: str | Path | None, dirs: Sequence[Path]) -> Path:
    """The file of the recorded starting weights (by SHA-256): ``given``, or ``FILE`` / ``*.work/FILE`` in ``dirs``."""
    name, sha = str(recorded.get("file", "")), str(recorded.get("sha256", ""))
    if given is not None:
        p = Path(given).expanduser()
        if not p.is_file() or file_sha256(p) != sha:
            raise ValueError(f"--init-weights {p} is not the recorded starting weights ({name}, sha256 {sha[:12]}…)")
        return p
    candidates = []
    for d in dirs:
        d = Path(d).expanduser()
        candidates += [d / name, *sorted(d.glob(f"*.work/{name}"))]
    for p in candidates:
        if p.is_file() and file_sha256(p) == sha:
            return p
    raise ValueError(f"the source was trained from starting weights {name} (sha256 {sha[:12]}…), needed for its "
                     f"fingerprint and not found beside it: give --init-weights PATH (make dpbart-table passes "
                     f"$(DPBART_WIKI_OUT).work/base.pt)")


def stage_names(cfg) -> list[str]:
    """Finished stages a PR build of ``cfg`` goes through: base, clip, prune-1..R."""
    return ["base", "clip"] + [f"prune-{r}" for r in range(1, max(1, int(cfg.prune_rounds)) + 1)]


def finished_stages(work: Path, fingerprint: str, names: Sequence[str]) -> list[str]:
    """The stages of ``names`` with a ``NAME.pt`` and a ``NAME.json`` of this fingerprint in ``work``."""
    done = []
    for name in names:
        js, pt = work / f"{name}.json", work / f"{name}.pt"
        if js.is_file() and pt.is_file():
            try:
                if json.loads(js.read_text()).get("fingerprint") == fingerprint:
                    done.append(name)
            except (OSError, ValueError):
                pass
    return done


def _link_or_copy(src: Path, dst: Path) -> None:
    """``dst`` becomes a hard link to ``src`` (a copy across file systems), via a temporary name + rename."""
    tmp = dst.with_name(f".{dst.name}.link")
    tmp.unlink(missing_ok=True)
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copy2(src, tmp)
    tmp.replace(dst)


def link_stages(src: Path, dst: Path, names: Sequence[str], src_fp: str, dst_fp: str) -> list[str]:
    """Make the finished stages of ``src`` (fingerprint ``src_fp``) finished stages of ``dst`` (``dst_fp``).

    The weights are hard-linked (the build code replaces, never rewrites, a ``.pt``); the JSON record is
    written anew in ``dst`` with ``dst_fp`` (never shared with ``src``). Stages already linked are left
    alone; ``src`` is only read.

    Returns
    -------
    list of str
        The stages present in ``dst`` afterwards (of ``names``, with ``dst_fp``).
    """
    dst.mkdir(parents=True, exist_ok=True)
    have = set(finished_stages(dst, dst_fp, names))
    for name in finished_stages(src, src_fp, names):
        if name in have:
            continue
        meta = json.loads((src / f"{name}.json").read_text())
        _link_or_copy(src / f"{name}.pt", dst / f"{name}.pt")
        meta["fingerprint"] = dst_fp
        _write_json(dst / f"{name}.json", meta)
    return finished_stages(dst, dst_fp, names)


def prplus_build_config(cfg, steps: int, epsilon: float, delta: float | None, mechanism: str):
    """The PR+ configuration of one ε: ``cfg`` with ``variant="pr+"`` and ``steps`` noisy-stage steps.

    The warm-up stays the source's unless it does not fit in ``steps`` (then a tenth of ``steps``).
    """
    warm = cfg.warmup_steps
    if steps != cfg.steps and warm is not None and warm >= steps:
        warm = max(1, steps // 10)
    return replace(cfg, variant="pr+", steps=int(steps), warmup_steps=warm, epsilon=float(epsilon),
                   delta=delta if mechanism == "gaussian" else None, mechanism=mechanism)


def _bundle_config_matches(path: Path, cfg) -> bool:
    """The bundle at ``path`` exists, opens, and was built from exactly ``cfg``."""
    if not path.is_file():
        return False
    try:
        from ldptext_precompute.dpbart import build as _build

        bundle, _ = open_unverified(path)
        recorded = getattr(_build, "_manifest_build_config", asdict)(cfg)   # starting weights by content
        want = json.loads(json.dumps(jsonable(recorded)))
        return bundle.manifest.get("build", {}).get("config") == want
    except Exception:   # a half-written or foreign file: rebuilt
        return False


@dataclass
class BundleSet:
    """The bundles of the table and how they were built.

    Attributes
    ----------
    paths : dict
        ``"clv"``, ``"pr"`` and ``"pr+:<ε>"`` → bundle path.
    built : list of str
        Keys built by this call (empty on a complete rerun).
    info : dict
        Fingerprints, stage directories, step counts (for the table JSON).
    """

    paths: dict = field(default_factory=dict)
    built: list = field(default_factory=list)
    info: dict = field(default_factory=dict)


def _check_source_unchanged(tc: TableConfig, names: Sequence[str]) -> None:
    """Refuse an output directory made from other weights under the same fingerprint (a retrained source).

    ``OUT/source.json`` records size and modification time of each source stage's ``.pt`` when first
    linked; the build code replaces a checkpoint by a new file, so a retrained stage differs.
    """
    record = tc.out_dir / "source.json"
    now = {n: [(tc.source_work_dir / f"{n}.pt").stat().st_size, (tc.source_work_dir / f"{n}.pt").stat().st_mtime_ns]
           for n in names}
    old = json.loads(record.read_text()).get("stages", {}) if record.is_file() else {}
    changed = sorted(n for n in now if n in old and old[n] != now[n])
    if changed:
        raise ValueError(f"the source stage(s) {', '.join(changed)} in {tc.source_work_dir} changed since "
                         f"{tc.out_dir} was made from them (retrained?): use a new --out-dir")
    _write_json(record, {"source_work_dir": str(tc.source_work_dir), "stages": {**old, **now}})


def ensure_bundles(tc: TableConfig, cfg, *, adapter_factory: Callable | None = None,
                   sentences: list[str] | None = None, log: Callable[[str], Any] = _log) -> BundleSet:
    """Build every missing bundle of the table from the one trained base stage (see the module docstring).

    Parameters
    ----------
    tc : TableConfig
    cfg : DPBartBuildConfig
        The source's build configuration (its variant is irrelevant).
    adapter_factory : callable or None
        Returns the model adapter (tests: a tiny random one); default ``load_model(cfg.model)``, loaded
        only when something has to be built.
    sentences : list of str or None
        Public sentences in memory (tests); default the configuration's public corpus.
    log : callable

    Returns
    -------
    BundleSet

    Raises
    ------
    ValueError
        No finished ``base`` stage of the configuration's fingerprint in the source work dir.
    """
    from ldptext_precompute.dpbart.build import build_dpbart_bundle

    out = tc.out_dir
    fp = cfg.fingerprint()
    names = stage_names(cfg)
    src_done = finished_stages(tc.source_work_dir, fp, names)
    stages = out / "stages"
    linked = link_stages(tc.source_work_dir, stages, names, fp, fp)
    if "base" not in linked:
        src = tc.source_work_dir
        partial = sorted(p.name for p in src.glob("*.partial.ckpt")) if src.is_dir() else []
        raise ValueError(
            f"no finished base stage with fingerprint {fp} in {tc.source_work_dir} "
            f"(found: {', '.join(src_done) or 'none'}; partial: {', '.join(partial) or 'none'}): finish "
            f"`make dpbart-train` first, or give the configuration it was trained with; the table never "
            f"retrains the base stage")
    _check_source_unchanged(tc, src_done)
    bs = BundleSet(info={"fingerprint": fp, "source_work_dir": str(tc.source_work_dir),
                         "source_stages": src_done, "stage_dir": str(stages), "stage_steps": cfg.steps,
                         "base_steps": cfg.base_steps if cfg.base_steps is not None else cfg.steps,
                         "prune_rounds": cfg.prune_rounds, "prplus_steps": tc.prplus_steps,
                         "signed": False})
    missing_after = [n for n in names if n not in linked]
    if missing_after:
        log(f"stages to train from the linked ones: {', '.join(missing_after)} ({cfg.steps} steps each, "
            f"never the base)")
    adapter_box: dict = {}

    def adapter():
        if "a" not in adapter_box:
            if adapter_factory is not None:
                adapter_box["a"] = adapter_factory()
            else:
                from ldptext_precompute.dpbart.model import load_model
                adapter_box["a"] = load_model(cfg.model)
        return adapter_box["a"]

    def build(key: str, path: Path, bcfg, work: Path) -> None:
        record = path.with_name(path.name + ".build.json")
        if _bundle_config_matches(path, bcfg):
            bs.paths[key] = path
            if record.is_file():
                done = json.loads(record.read_text())
                bs.info.setdefault("build_seconds", {})[key] = done.get("seconds")
                bs.info.setdefault("build_log", {})[key] = done.get("log")
            return
        log(f"building {key} bundle → {path}")
        t0 = time.time()
        path.parent.mkdir(parents=True, exist_ok=True)
        lines: list[str] = []

        def blog(m: str) -> None:
            lines.append(m)
            log(f"  [{key}] {m}")

        build_dpbart_bundle(path, bcfg, sign_key=False, work_dir=work, adapter=adapter(), sentences=sentences,
                            progress=tc.progress, log=blog)
        bs.paths[key] = path
        bs.built.append(key)
        bs.info.setdefault("build_seconds", {})[key] = round(time.time() - t0, 1)
        bs.info.setdefault("build_log", {})[key] = [m for m in lines if m.startswith("resuming")]
        _write_json(record, {"seconds": bs.info["build_seconds"][key], "log": bs.info["build_log"][key],
                             "work_dir": str(work), "fingerprint": bcfg.fingerprint()})

    needed = set(tc.models) | {tc.adept_over if "adept" in tc.models else None}
    if "pr+" in tc.models:
        needed.add("pr")          # its pruning stages (and the PR column) come first
    for variant in ("clv", "pr"):
        if variant in needed:
            build(variant, out / "bundles" / f"{variant}.ldpb", replace(cfg, variant=variant, epsilon=None,
                                                                       delta=None), stages)
    if "pr+" in tc.models:
        finite = [e for e in tc.epsilons if math.isfinite(e)]
        if finite:
            p0 = prplus_build_config(cfg, tc.prplus_steps, finite[0], tc.delta, tc.mechanism)
            pfp = p0.fingerprint()
            pstages = out / f"stages-prplus-{tc.prplus_steps}"
            link_stages(stages, pstages, names, fp, pfp)
            bs.info["prplus_stage_dir"] = str(pstages)
            bs.info["prplus_fingerprint"] = pfp
            bs.info["prplus_warmup_steps"] = p0.warmup_steps
            for eps in finite:
                pcfg = prplus_build_config(cfg, tc.prplus_steps, eps, tc.delta, tc.mechanism)
                key = f"pr+:{_eps_str(eps)}"
                build(key, out / "bundles" / f"pr+-n{tc.prplus_steps}-eps{_eps_str(eps)}.ldpb", pcfg, pstages)
                if not tc.keep_prplus_stages:
                    from ldptext_precompute.dpbart.build import _stage_names
                    noisy = _stage_names(pcfg)[-1]
                    for suffix in (".pt", ".json", ".partial.ckpt"):
                        (pstages / f"{noisy}{suffix}").unlink(missing_ok=True)
    return bs


# --------------------------------------------------------------------------------------- data
def load_data(tc: TableConfig):
    """The labelled data set with the stratified caps (``evaluation.datasets.load_dataset``)."""
    return load_dataset(tc.data, text_col=tc.text_col, label_col=tc.label_col,
                        max_train=tc.max_train, max_test=tc.max_test)


# ------------------------------------------------------------------------------------ metrics
def bleu100(rewritten: Sequence[str], originals: Sequence[str]) -> float:
    """Corpus BLEU-4 of ``rewritten`` against ``originals`` (one reference each), on the 0–100 scale.

    ``ldptext_precompute.bleu`` (lower-cased word / punctuation tokens, no smoothing) × 100.
    """
    return 100.0 * corpus_bleu([bleu_tokenize(t) for t in rewritten], [bleu_tokenize(t) for t in originals])


def downstream(train_texts: Sequence[str], train_labels: Sequence, test_texts: Sequence[str],
               test_labels: Sequence, seed: int) -> dict:
    """Macro-F1 and accuracy on the original test set of the TF-IDF classifier trained on ``train_texts``.

    ``evaluation.utility.fit_and_score`` (the tuned TF-IDF + logistic regression of ``ldptext evaluate``).

    Returns
    -------
    dict
        ``macro_f1``, ``accuracy``, ``hyperparameters``.
    """
    run = utility.fit_and_score(list(train_texts), list(train_labels), {"original_test": list(test_texts)},
                        list(test_labels), seed=seed)
    s = run.scores["original_test"]
    return {"macro_f1": s["macro_f1"], "accuracy": s["accuracy"], "hyperparameters": run.hyperparameters}


def summarize(values: Sequence[float]) -> dict:
    """Mean and standard deviation (ddof = 0) over seeds; ``None`` for no values."""
    v = [float(x) for x in values]
    if not v:
        return {"mean": None, "std": None, "values": []}
    return {"mean": float(np.mean(v)), "std": float(np.std(v)), "values": v}


# ------------------------------------------------------------------------------------ rewriting
def _load_rewriter(path: Path, seed: int | None, threads: int | None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsignedBundleWarning)   # the table's own evaluation bundles
        warnings.simplefilter("ignore", SeededModeWarning)       # the header states the seeded mode
        return Rewriter.load(path, allow_unsigned=True, seed=seed, threads=threads)


def rewrite_texts(tc: TableConfig, model: str, bundle: Path, epsilon: float, seed: int | None,
                  texts: Sequence[str], desc: str = "") -> dict:
    """Rewrite ``texts`` with one model at one ε; each chunk is one release.

    Returns
    -------
    dict
        ``texts`` (rewritten, same order), ``chunks`` (per document), ``report`` (of a document with the
        most chunks: the per-chunk and composed guarantee as the rewriter states it).
    """
    rw = _load_rewriter(bundle, None if model == "adept" else seed, tc.threads)
    options = dict(epsilon=epsilon, delta=tc.release_delta, mechanism=tc.mechanism, beam=tc.beam, long=tc.long,
                   allow_infinite_epsilon=math.isinf(epsilon))
    if model == "adept":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SeededModeWarning)
            runner = AdeptRewriter(rw, seed=seed)
    else:
        runner = rw
    done = []
    starts = range(0, len(texts), REWRITE_BATCH)
    if tc.progress:
        from tqdm.auto import tqdm
        starts = tqdm(starts, desc=desc, unit="batch", dynamic_ncols=True, leave=False)
    with rw:
        for start in starts:
            done += runner.rewrite_batch(list(texts[start:start + REWRITE_BATCH]), **options)
    chunks = [r.report.chunks for r in done]
    longest = max(range(len(done)), key=chunks.__getitem__) if done else None
    return {"texts": [r.text for r in done], "chunks": chunks,
            "report": None if longest is None else done[longest].report.to_dict()}


# --------------------------------------------------------------------------------------- cells
@dataclass
class Counters:
    """What a run computed (a complete rerun computes nothing)."""

    rewrites: int = 0
    fits: int = 0


def _cell_seed(tc: TableConfig, model: str, eps: float, s: int) -> int | None:
    if math.isinf(eps):
        return 0           # no noise is drawn: the rewrite is the same for every seed
    return seed_int(tc.seed_base, s, f"{model}:{_eps_str(eps)}") if tc.reproducible else None


def compute_cells(tc: TableConfig, ds, bundles: BundleSet, *, log: Callable[[str], Any] = _log,
                  rewrite: Callable | None = None) -> tuple[list[dict], Counters]:
    """Every (model, ε, seed) cell and the original F1 per seed, each from its checkpoint when there is one.

    Parameters
    ----------
    tc : TableConfig
    ds : Dataset
    bundles : BundleSet
    log : callable
    rewrite : callable or None
        ``rewrite(tc, model, bundle, epsilon, seed, texts, desc) -> dict`` (default
        :func:`rewrite_texts`; tests substitute an identity rewrite).

    Returns
    -------
    cells : list of dict
        ``model`` (``original`` or a model), ``epsilon``, ``seed``, ``bleu``, ``macro_f1``, ``accuracy``,
        ``chunks_mean``, ``chunks_max``, ``report`` …
    counters : Counters
    """
    rewrite = rewrite or rewrite_texts
    counters = Counters()
    data_fp = ds.fingerprint()
    digests: dict[Path, str] = {}

    def digest(p: Path) -> str:
        if p not in digests:
            digests[p] = file_sha256(p)
        return digests[p]

    classifier = utility.ClassifierSettings().to_dict()
    cells = []
    for s in range(tc.seeds):
        key = {"stage": "cell", "model": "original", "data": data_fp, "classifier": classifier, "seed": s}
        path = tc.out_dir / "cells" / f"original_seed{s}_{_key_hash(key)}.json"
        if path.is_file():
            cell = json.loads(path.read_text())
        else:
            t0 = time.time()
            d = downstream(ds.train_texts, ds.train_labels, ds.test_texts, ds.test_labels, seed=s)
            counters.fits += 1
            cell = {"key": key, "model": "original", "epsilon": None, "seed": s, "bleu": 100.0, **d,
                    "seconds": round(time.time() - t0, 2)}
            _write_json(path, cell)
        cells.append(cell)

    for model in tc.models:
        for eps in tc.epsilons:
            if model == "pr+" and math.isinf(eps):
                continue           # N/A: no noisy training at ε = ∞
            bkey = {"adept": tc.adept_over, "clv": "clv", "pr": "pr"}.get(model, f"pr+:{_eps_str(eps)}")
            bundle = bundles.paths[bkey]
            for s in range(tc.seeds):
                seed = _cell_seed(tc, model, eps, s)
                rkey = {"stage": "rewrite", "model": model, "epsilon": _eps_str(eps), "bundle": digest(bundle),
                        "seed": seed if seed is not None else f"os:{s}", "mechanism": tc.mechanism,
                        "delta": tc.release_delta, "beam": tc.beam, "long": tc.long, "data": data_fp,
                        "part": "train"}
                ckey = {"stage": "cell", "rewrite": _key_hash(rkey), "classifier": classifier, "seed": s}
                name = f"{model}_eps{_eps_str(eps)}_seed{s}"
                cpath = tc.out_dir / "cells" / f"{name}_{_key_hash(ckey)}.json"
                if cpath.is_file():
                    cells.append(json.loads(cpath.read_text()))
                    continue
                rname = f"{model}_eps{_eps_str(eps)}" + ("" if math.isinf(eps) else f"_seed{s}")
                rpath = tc.out_dir / "rewrites" / f"{rname}_{_key_hash(rkey)}.json"
                if rpath.is_file():
                    rew = json.loads(rpath.read_text())
                else:
                    t0 = time.time()
                    rew = rewrite(tc, model, bundle, eps, seed, ds.train_texts,
                                  f"{LABELS[model]} ε={_eps_str(eps)} seed {s}")
                    counters.rewrites += 1
                    rew = {"key": rkey, **rew, "seconds": round(time.time() - t0, 2)}
                    if len(rew["texts"]) != len(ds.train_texts):
                        raise RuntimeError(f"{name}: {len(rew['texts'])} rewrites for {len(ds.train_texts)} documents")
                    _write_json(rpath, rew)
                t0 = time.time()
                d = downstream(rew["texts"], ds.train_labels, ds.test_texts, ds.test_labels, seed=s)
                counters.fits += 1
                chunks = rew.get("chunks") or [1]
                cell = {"key": ckey, "model": model, "epsilon": _eps_str(eps), "seed": s,
                        "bleu": bleu100(rew["texts"], ds.train_texts), **d,
                        "chunks_mean": float(np.mean(chunks)), "chunks_max": int(max(chunks)),
                        "rewrite_seconds": rew.get("seconds"), "fit_seconds": round(time.time() - t0, 2),
                        "report": rew.get("report"), "bundle": str(bundle)}
                _write_json(cpath, cell)
                log(f"{LABELS[model]} ε={_eps_str(eps)} seed {s}: BLEU {cell['bleu']:.2f}, "
                    f"macro-F1 {cell['macro_f1']:.3f} ({cell['rewrite_seconds']} s rewriting)")
                cells.append(cell)
    return cells, counters


# --------------------------------------------------------------------------------------- table
def _fmt_eps(eps: float) -> str:
    return "∞" if math.isinf(eps) else f"{eps:,.0f}" if float(eps).is_integer() else f"{eps:g}"


def _fmt_f1(summary: dict) -> str:
    return "–" if summary["mean"] is None else f"{summary['mean']:.2f} ({summary['std']:.2f})"


def _fmt_bleu(summary: dict) -> str:
    return "–" if summary["mean"] is None else f"{summary['mean']:.2f}"


def table_rows(tc: TableConfig, cells: list[dict]) -> list[dict]:
    """One row per ε: the original F1 (first row only, as Table 6.5) and BLEU / F1 summaries per model."""
    def pick(model, eps):
        return [c for c in cells if c["model"] == model and c["epsilon"] == eps]

    original = summarize([c["macro_f1"] for c in cells if c["model"] == "original"])
    rows = []
    for i, eps in enumerate(tc.epsilons):
        row = {"epsilon": _eps_str(eps), "original_f1": original if i == 0 else None, "models": {}}
        for model in MODELS:
            if model == "pr+" and math.isinf(eps):
                row["models"][model] = "N/A"
            elif model not in tc.models:
                row["models"][model] = None
            else:
                cs = pick(model, _eps_str(eps))
                row["models"][model] = {"bleu": summarize([c["bleu"] for c in cs]),
                                        "macro_f1": summarize([c["macro_f1"] for c in cs]),
                                        "accuracy": summarize([c["accuracy"] for c in cs])}
        rows.append(row)
    return rows


def header_lines(tc: TableConfig, ds, bundles: BundleSet, cfg, cells: list[dict]) -> list[str]:
    """The statement above the table: data, sizes, model, mechanism, δ, the unit of ε, seeds."""
    name = DATASET_NAMES.get(str(tc.data), Path(str(tc.data)).name)
    n_train, n_test = len(ds.train_texts), len(ds.test_texts)
    full = "" if "max_train" not in ds.info else " (a stratified subset, --max-train)"
    full_test = "" if "max_test" not in ds.info else " (a stratified subset, --max-test)"
    labels = ", ".join(ds.labels)
    clip, n_pr, n = _bundle_numbers(bundles)
    chunk_cells = [c for c in cells if c.get("chunks_mean") is not None]
    mean_k = float(np.mean([c["chunks_mean"] for c in chunk_cells])) if chunk_cells else float("nan")
    max_k = max((c["chunks_max"] for c in chunk_cells), default=0)
    mech = (f"discrete Gaussian, δ = {tc.delta:g} per release (the SDK's exact sampler with Rényi calibration; "
            f"the thesis uses the analytic Gaussian)" if tc.mechanism == "gaussian"
            else "discrete Laplace, pure ε (δ = 0)")
    seeded = ("**seeded** generators: reproducible and **NOT private** — evaluation only" if tc.reproducible
              else "private randomness (OS CSPRNG): not reproducible")
    base_steps = bundles.info.get("base_steps")
    return [
        "**DP-BART Table 6.5 on packaged data** (layout of Igamberdiev 2023, PhD thesis, Table 6.5).",
        "",
        f"- Dataset: {name} ({labels}); {n_train:,} training documents rewritten{full}, {n_test:,} original "
        f"test documents{full_test}.",
        f"- Model: {_model_name(cfg.model)} trained on public text ({cfg.public_corpus}): "
        f"base stage {base_steps:,} steps{_init_note(cfg)}, then clip, {cfg.prune_rounds} pruning round(s) of "
        f"{cfg.steps} steps; "
        f"L = {cfg.seq_len}, C = {clip}, PR prunes {n_pr} neurons (n = {n:,} released coordinates per chunk). "
        f"All bundles from that one base stage; PR+ adds {tc.prplus_steps} noisy-training steps (batch "
        f"{cfg.batch_size}) per ε on public text (the thesis: 100–500 epochs of 500 iterations, batch 32).",
        f"- ADePT: corrected sensitivity (ℓ₂ clip C·√n, Δ₂ = 2C) over the {tc.adept_over.upper()} bundle's "
        f"encoder and decoder.",
        f"- Mechanism: {mech}.",
        f"- ε is per release: one chunk of at most L = {cfg.seq_len} tokens, neighbouring relation "
        f"document-level (replace the whole chunk; any two inputs). Documents longer than one chunk are "
        + ("split: a document of k chunks is k releases, (k·ε, k·δ)" if tc.long == "split"
           else "truncated to one chunk: one release per document")
        + f" (here mean k = {mean_k:.2f}, max {max_k}).",
        f"- Decoding: {'greedy' if tc.beam == 1 else f'beam {tc.beam}'} (the thesis: beam 10).",
        "- BLEU: corpus BLEU-4 × 100 of the rewritten training partition against the original "
        "(ldptext_precompute/bleu.py), mean over seeds. Test F1: macro-F1 on the original test set of the "
        "TF-IDF + logistic-regression classifier (evaluation/utility.py) trained on the rewritten training "
        "partition; Original: trained on the original training partition. Mean (std, ddof = 0) over "
        f"{tc.seeds} seed(s); a seed draws new noise and new cross-validation folds.",
        f"- Randomness: {seeded}. PR+ at ε = ∞ is N/A (no noisy training without noise), as in the thesis.",
    ]


def _init_note(cfg) -> str:
    if not cfg.init_weights:
        return ""
    return f" (starting from the weights {Path(str(cfg.init_weights)).name} of an earlier run)"


def _model_name(model: str) -> str:
    if model == "minilm-bert2bert":
        return ("the MiniLM bert2bert stand-in (all-MiniLM-L6-v2 encoder, BERT decoder with cross-attention; "
                "not BART)")
    return model


def _bundle_numbers(bundles: BundleSet) -> tuple:
    """C, |P| of PR and n of PR (or CLV) from the bundle manifests."""
    for key in ("pr", "clv"):
        p = bundles.paths.get(key)
        if p:
            section = open_unverified(p)[0].manifest["dpbart"]
            n_pr = int(section.get("n_pruned", 0)) if key == "pr" else 0
            n = int(section["seq_len"]) * (int(section["hidden"]) - n_pr)
            return section["clip"], n_pr, n
    return "?", "?", 0


def markdown_table(tc: TableConfig, rows: list[dict], dataset_name: str) -> list[str]:
    """The table in Table 6.5's column order."""
    cols = ["Dataset", "ε", "Original Test F1"]
    for m in MODELS:
        cols += [f"{LABELS[m]} BLEU", f"{LABELS[m]} Test F1"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for i, row in enumerate(rows):
        cells = [dataset_name if i == 0 else "", _fmt_eps(float(row["epsilon"])),
                 _fmt_f1(row["original_f1"]) if row["original_f1"] else ""]
        for m in MODELS:
            v = row["models"][m]
            if v == "N/A":
                cells += ["N/A", "N/A"]
            elif v is None:
                cells += ["–", "–"]
            else:
                cells += [_fmt_bleu(v["bleu"]), _fmt_f1(v["macro_f1"])]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def run_table(tc: TableConfig, cfg, *, adapter_factory: Callable | None = None, sentences: list[str] | None = None,
              rewrite: Callable | None = None, log: Callable[[str], Any] = _log) -> dict:
    """Bundles, rewrites, metrics and the table (``OUT/table.md``, ``OUT/table.json``); resumable.

    Parameters
    ----------
    tc : TableConfig
    cfg : DPBartBuildConfig
        The source's build configuration (:func:`source_build_config`).
    adapter_factory, sentences
        :func:`ensure_bundles` (tests).
    rewrite : callable or None
        :func:`compute_cells` (tests).
    log : callable

    Returns
    -------
    dict
        The table JSON, plus ``computed`` (bundles built, rewrites and classifier fits of this call).
    """
    tc.validate()
    if tc.threads:
        import torch
        torch.set_num_threads(tc.threads)
    t0 = time.time()
    bundles = ensure_bundles(tc, cfg, adapter_factory=adapter_factory, sentences=sentences, log=log)
    ds = load_data(tc)
    cells, counters = compute_cells(tc, ds, bundles, log=log, rewrite=rewrite)
    rows = table_rows(tc, cells)
    name = DATASET_NAMES.get(str(tc.data), Path(str(tc.data)).stem)
    header = header_lines(tc, ds, bundles, cfg, cells)
    md = header + [""] + markdown_table(tc, rows, name) + [""]
    doc = {
        "table": "DP-BART Table 6.5 layout (Igamberdiev 2023, PhD thesis) on packaged data",
        "header": [h for h in header if h],
        "dataset": {"name": name, **{k: v for k, v in ds.info.items() if k != "labels"}, "labels": ds.labels,
                    "fingerprint": ds.fingerprint()},
        "config": {**{k: (str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v)
                      for k, v in asdict(tc).items()}, "epsilons": [_eps_str(e) for e in tc.epsilons]},
        "epsilons": [_eps_str(e) for e in tc.epsilons],
        "build_config": json.loads(json.dumps(asdict(cfg), default=str)),
        "bundles": {k: {"path": str(p), "sha256": file_sha256(p)} for k, p in bundles.paths.items()},
        "bundle_build": bundles.info,
        "rows": rows,
        "cells": cells,
        "privacy": {"unit": "per release (one chunk of at most L tokens)", "neighbouring": "replace the whole chunk "
                    "(document-level LDP, any two inputs)", "mechanism": tc.mechanism,
                    "delta": tc.release_delta or 0.0, "seeded": tc.reproducible, "evaluation_only": True},
        "computed": {"bundles_built": bundles.built, "rewrites": counters.rewrites, "fits": counters.fits},
        "seconds": round(time.time() - t0, 1),
    }
    _write_json(tc.out_dir / "table.json", doc)
    (tc.out_dir / "table.md").write_text("\n".join(md), encoding="utf-8")
    doc["markdown"] = "\n".join(md)
    return doc


# ------------------------------------------------------------------------------------------ CLI
def _epsilons(text: str) -> tuple:
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None


def _cap(text: str) -> int | None:
    v = int(text)
    return None if v <= 0 else v


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source-bundle", default=None,
                    help="the bundle make dpbart-train wrote: its manifest gives the build configuration; its "
                         "work dir (SOURCE.work) the trained stages")
    ap.add_argument("--source-work-dir", default=None, help="the trained work dir (default SOURCE.work); read only")
    ap.add_argument("--config", default=None,
                    help="a JSON file of DPBartBuildConfig fields (or a manifest), instead of --source-bundle")
    ap.add_argument("--init-weights", default=None,
                    help="the starting weights of a source built with --init-weights (its manifest records only "
                         "their name and SHA-256); default: searched beside the source bundle (FILE, *.work/FILE)")
    ap.add_argument("--out-dir", required=True, help="stages, bundles, checkpoints, table.md, table.json")
    ap.add_argument("--epsilons", type=_epsilons, default=EPSILONS,
                    help="epsilon per release, comma-separated, inf allowed (default the thesis's nine)")
    ap.add_argument("--models", default=",".join(MODELS), help="subset of adept,clv,pr,pr+")
    ap.add_argument("--delta", type=float, default=DEFAULT_DELTA, help="delta per release (default 1e-5)")
    ap.add_argument("--mechanism", choices=["gaussian", "laplace"], default="gaussian")
    ap.add_argument("--prplus-steps", type=int, default=DEFAULT_PRPLUS_STEPS,
                    help=f"steps of each PR+ noisy stage (default {DEFAULT_PRPLUS_STEPS})")
    ap.add_argument("--seeds", type=int, default=1, help="seeds per cell (default 1; the thesis: 3)")
    ap.add_argument("--seed-base", type=int, default=0)
    ap.add_argument("--os-randomness", action="store_true",
                    help="draw the noise from the OS CSPRNG instead of seeded generators (not reproducible)")
    ap.add_argument("--data", default="rotten-tomatoes", help="rotten-tomatoes or a CSV/JSONL file")
    ap.add_argument("--text-col", default="text")
    ap.add_argument("--label-col", default="label")
    ap.add_argument("--max-train", type=_cap, default=DEFAULT_MAX_TRAIN,
                    help=f"rewrite at most N training documents, stratified (default {DEFAULT_MAX_TRAIN}; 0: all "
                         "8,648)")
    ap.add_argument("--max-test", type=_cap, default=None, help="at most N test documents (default 0: all 2,162)")
    ap.add_argument("--beam", type=int, default=1, help="beam width (default 1, greedy; the thesis: 10)")
    ap.add_argument("--long", choices=["split", "truncate"], default="split")
    ap.add_argument("--adept-over", choices=["clv", "pr"], default="clv",
                    help="the bundle whose encoder/decoder ADePT runs on (default clv: unpruned)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch / ONNX Runtime threads (default 1: on two shared cores 2 threads rewrote 3-5x slower)")
    ap.add_argument("--keep-prplus-stages", action="store_true")
    ap.add_argument("--quiet", action="store_true", help="no progress bars")
    args = ap.parse_args(argv)
    if args.source_work_dir is None and args.source_bundle is None:
        ap.error("give --source-bundle, or --source-work-dir with --config")
    work = Path(args.source_work_dir or (str(args.source_bundle) + ".work")).expanduser()
    try:
        cfg = source_build_config(args.source_bundle, args.config, init_weights=args.init_weights)
    except ValueError as e:
        ap.error(str(e))
    except Exception as e:     # BundleError, OSError: no source bundle (yet)
        ap.error(f"{e}: has `make dpbart-train` finished (it writes the bundle at the end)?")
    tc = TableConfig(out_dir=Path(args.out_dir).expanduser(), source_work_dir=work, epsilons=args.epsilons,
                     models=tuple(m.strip() for m in args.models.split(",") if m.strip()), delta=args.delta,
                     mechanism=args.mechanism, prplus_steps=args.prplus_steps, seeds=args.seeds,
                     seed_base=args.seed_base, reproducible=not args.os_randomness, data=args.data,
                     text_col=args.text_col, label_col=args.label_col, max_train=args.max_train,
                     max_test=args.max_test, beam=args.beam, long=args.long, adept_over=args.adept_over,
                     threads=args.threads, progress=not args.quiet and sys.stderr.isatty(),
                     keep_prplus_stages=args.keep_prplus_stages)
    try:
        doc = run_table(tc, cfg)
    except ValueError as e:
        print(f"dpbart_table: {e}", file=sys.stderr)
        return 2
    print(doc["markdown"])
    c = doc["computed"]
    _log(f"wrote {tc.out_dir / 'table.md'} and table.json ({len(c['bundles_built'])} bundle(s) built, "
         f"{c['rewrites']} rewrite(s), {c['fits']} classifier fit(s), {doc['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
