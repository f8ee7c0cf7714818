"""DP-BART precompute pipeline: public model + public text → signed ``dpbart`` bundle.

Mechanism of Igamberdiev & Habernal 2023, *DP-BART for Privatized Text Rewriting under Local
Differential Privacy* (Findings of ACL), as presented in Igamberdiev 2023, *Differentially Private
Methods in NLP* (PhD thesis, TU Darmstadt), §6.3.3–6.3.5.

Stages (each checkpointed in ``work_dir``, so an interrupted run resumes at the last finished stage):

1. ``base``   — denoising-autoencoder training on public text with the encoder output clipped to C
   (needed for the MiniLM BERT-to-BERT stand-in, whose cross-attention starts random; a real BART
   checkpoint may use ``base_steps=0``);
2. ``clip``   — C from encoder-output statistics on public text (``clip="auto"``: σ/2) or given;
3. ``prune-r``— for ``pr``/``pr+``: ``prune_rounds`` rounds of pruning by Σ|W_K[:, j]| (25 % quantile of
   the remaining neurons) each followed by training with value clipping C_train = 0.2; the bundle uses
   the indices of round ``use_round`` (paper: 6 rounds, indices of round 5);
4. ``prplus`` — for ``pr+``: training with clipped + noised encoder outputs at the target (ε, δ);
5. export of the three ONNX graphs, int8 quantization, the PyTorch ↔ runtime check (the graphs are
   loaded by the device's own :class:`ldptext.dpbart.Rewriter`), reconstruction BLEU at ε = ∞ on
   held-out public sentences, and the signed bundle (schema: :mod:`ldptext.dpbart_schema`).

Nothing here sees private data; no privacy budget is spent by precompute (the training data is public
and only the trained model ships).
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import shutil
import tempfile
import time
import warnings
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import torch

from ldptext.dpbart import Rewriter
from ldptext.dpbart_schema import GRAPHS, MECHANISM, SECTION, DPBartConfig, SpecialTokens
from ldptext.fileio import file_sha256

from ..checkpoints import StageCheckpoints, jsonable
from .data import load_public_corpus, split_holdout
from .model import Seq2SeqAdapter, load_model
from .train import (StageHooks, TrainNoise, device_for_training, estimate_clip, greedy_decode_torch,
                    prune_round, tokenize_corpus, train_stage)

VARIANTS = ("clv", "pr", "pr+")
TRAIN_CLIP = 0.2  # value clipping during pruning/retraining (Igamberdiev 2023 thesis, §6.3.4)


@dataclass
class DPBartBuildConfig:
    """Everything that determines a DP-BART bundle (recorded in its manifest under ``build.config``).

    Attributes
    ----------
    model : str
        ``"minilm-bert2bert"`` (offline stand-in) or a local BART / T5 / encoder-decoder directory.
    public_corpus : str
        ``"wiki-sample"`` or a UTF-8 file of public text, one document per line.
    variant : str
        ``"clv"`` (clipping only), ``"pr"`` (+ pruning) or ``"pr+"`` (+ noisy training).
    epsilon, delta : float or None
        PR+: the target (ε, δ) of the noisy training (δ for the Gaussian mechanism only).
    mechanism : str
        PR+: ``"gaussian"`` or ``"laplace"`` training noise.
    seq_len : int
        L, the fixed sequence length (≥ 3; paper: 20).
    clip : float or str
        C, or ``"auto"``: half the standard deviation of encoder outputs on public text.
    steps : int
        Training steps per stage.
    base_steps : int or None
        Steps of the first (autoencoder) stage; default ``steps``.
    batch_size : int
        Training batch size.
    lr : float
        Learning rate.
    prune_rounds : int
        Pruning rounds for PR / PR+ (paper: 6).
    use_round : int or None
        Ship the indices of this round (default ``prune_rounds - 1``, at least 1).
    quantize : str or None
        ``"int8"`` (default) or ``None`` / ``"none"``.
    max_sentences : int or None
        Use at most this many public sentences.
    eval_sentences : int
        Held-out public sentences for the checks and BLEU.
    freeze_encoder : bool
        Train the decoder only (cheaper; quick CPU builds).
    cross_lr_mult : float
        Learning-rate multiplier of the cross-attention parameters.
    corrupt : float
        Denoising: fraction of input tokens masked or deleted.
    seed : int
        Seed of the (public-data) training.
    warmup_steps : int or None
        Learning-rate warm-up steps of every stage (default a tenth of the stage's steps: slow for
        long runs).
    dropout : float or None
        Dropout probability of every dropout layer during training (default: the model's own, 0.1
        for MiniLM). 0 helps the autoencoder fit faster; with a frozen encoder its dropout only
        perturbs the features the decoder learns to read.

    Notes
    -----
    The variants are those of Igamberdiev & Habernal 2023, *DP-BART for Privatized Text Rewriting
    under Local Differential Privacy* (Findings of ACL), as presented in Igamberdiev 2023,
    *Differentially Private Methods in NLP* (PhD thesis, TU Darmstadt), §6.3.3–6.3.5.
    """

    model: str = "minilm-bert2bert"
    public_corpus: str = "wiki-sample"
    variant: str = "clv"
    epsilon: float | None = None        # pr+: the target ε of noisy training
    delta: float | None = None          # pr+ with the Gaussian mechanism
    mechanism: str = "gaussian"         # pr+ training noise
    seq_len: int = 20
    clip: float | str = "auto"
    steps: int = 300                    # training steps per stage
    base_steps: int | None = None       # default: ``steps``
    batch_size: int = 16
    lr: float = 1e-4
    prune_rounds: int = 6
    use_round: int | None = None        # default: prune_rounds - 1 (at least 1)
    quantize: str | None = "int8"
    max_sentences: int | None = None
    eval_sentences: int = 200
    freeze_encoder: bool = False        # train the decoder only (cheaper; for quick CPU builds)
    cross_lr_mult: float = 1.0          # learning-rate multiplier of the cross-attention parameters
    corrupt: float = 0.15               # denoising: fraction of input tokens masked or deleted
    seed: int = 0
    warmup_steps: int | None = None     # default: a tenth of each stage's steps
    dropout: float | None = None        # default: the model's own
    init_weights: str | None = None     # a state dict (e.g. another run's WORK/base.pt) to start from
    batch_seed: int | None = None       # training batches (default ``seed``, which keeps the held-out split)

    def validate(self) -> None:
        """Check every field.

        Raises
        ------
        ValueError
            A field is out of range (``ParameterError`` for bad PR+ privacy parameters).
        """
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}")
        if self.variant == "pr+":
            from ldptext.noise import validate_privacy_parameters

            validate_privacy_parameters(self.epsilon, self.delta, self.mechanism)
            if math.isinf(float(self.epsilon)):
                raise ValueError("pr+ needs a finite target epsilon")
        if self.seq_len < 3:
            raise ValueError("seq_len must be at least 3")
        if self.clip != "auto" and not (isinstance(self.clip, (int, float)) and 0 < float(self.clip) < math.inf):
            raise ValueError("clip must be 'auto' or a number > 0")
        if self.quantize not in (None, "none", "int8"):
            raise ValueError("quantize must be 'int8' or none")
        if self.dropout is not None and not 0 <= self.dropout < 1:
            raise ValueError("dropout must be in [0, 1)")
        if self.warmup_steps is not None and self.warmup_steps < 0:
            raise ValueError("warmup_steps must be >= 0")
        if self.variant in ("pr", "pr+") and self.prune_rounds < 1:
            raise ValueError("pr/pr+ need at least one pruning round")
        if self.init_weights is not None and not Path(self.init_weights).is_file():
            raise ValueError(f"init_weights not found: {self.init_weights}")

    def fingerprint(self) -> str:
        """Hash of the settings that determine the trained weights.

        Returns
        -------
        str
            16 hex digits; checkpoints of another fingerprint are never resumed.
        """
        keys = ("model", "public_corpus", "seq_len", "clip", "steps", "base_steps", "batch_size", "lr",
                "max_sentences", "seed", "eval_sentences", "freeze_encoder", "cross_lr_mult", "corrupt")
        values = {k: getattr(self, k) for k in keys}
        for k in ("warmup_steps", "dropout"):  # older fingerprints stay valid when unset
            if getattr(self, k) is not None:
                values[k] = getattr(self, k)
        if self.batch_seed is not None:
            values["batch_seed"] = self.batch_seed
        if self.init_weights is not None:  # the starting weights by content, not by path
            values["init_weights_sha256"] = _weights_sha256(Path(self.init_weights))
        return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:16]


def _weights_sha256(path: Path) -> str:
    """SHA-256 of a starting-weights file, hashed once per (file, size, modification time): a build
    asks for its fingerprint several times, and the file is ~200 MB."""
    st = path.stat()
    return _hash_once(str(path.resolve()), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _hash_once(path: str, size: int, mtime_ns: int) -> str:
    return file_sha256(Path(path))


@dataclass
class _State:
    stage: str = "start"
    clip: float | None = None
    clip_stats: dict | None = None
    pruned: list[int] = field(default_factory=list)
    pruned_history: list[list[int]] = field(default_factory=list)
    losses: dict = field(default_factory=dict)
    wall: dict = field(default_factory=dict)


def _save_stage(ck: StageCheckpoints, name: str, adapter: Seq2SeqAdapter, state: _State) -> None:
    ck.save(name, adapter.model.state_dict(), asdict(state))


def _load_stage(ck: StageCheckpoints, name: str, adapter: Seq2SeqAdapter) -> _State | None:
    """The state of a finished stage, its weights loaded into ``adapter``; None when not finished."""
    loaded = ck.load(name)
    if loaded is None:
        return None
    weights, state = loaded
    adapter.model.load_state_dict(weights)
    return _State(**state)


def load_init_weights(adapter: Seq2SeqAdapter, path: str | Path) -> None:
    """Start training from a saved state dict (e.g. the ``base.pt`` of a run on other public text).

    Parameters
    ----------
    adapter : Seq2SeqAdapter
        Its model receives the weights.
    path : str or Path
        A state dict saved with ``torch.save``, of the same architecture.

    Raises
    ------
    ValueError
        The file does not hold this model's parameters.
    """
    weights = torch.load(path, map_location="cpu", weights_only=True)
    try:
        adapter.model.load_state_dict(weights, strict=True)
    except (RuntimeError, TypeError, AttributeError) as e:
        raise ValueError(f"init_weights {Path(path).name} do not fit this model: "
                         f"{str(e).splitlines()[0]}") from None


def _batch_seed(cfg: DPBartBuildConfig) -> int:
    """Seed of the training batches: a run continuing another (``init_weights``) on the same text
    passes ``batch_seed`` so it draws other sentences, while ``seed`` keeps the same held-out split."""
    return cfg.seed if cfg.batch_seed is None else cfg.batch_seed


def _manifest_build_config(cfg: DPBartBuildConfig) -> dict:
    """The build settings for the manifest; starting weights by content (a local path says nothing)."""
    out = asdict(cfg)
    if cfg.init_weights is not None:
        out["init_weights"] = {"file": Path(cfg.init_weights).name,
                               "sha256": _weights_sha256(Path(cfg.init_weights))}
    return out


def _stage_names(cfg: DPBartBuildConfig) -> list[str]:
    names = ["base", "clip"]
    if cfg.variant in ("pr", "pr+"):
        names += [f"prune-{r}" for r in range(1, cfg.prune_rounds + 1)]
    if cfg.variant == "pr+":
        eps = f"{float(cfg.epsilon):g}"
        names.append(f"prplus-{cfg.mechanism}-{eps}-{cfg.delta if cfg.mechanism == 'gaussian' else 0}")
    return names


def train_model(adapter: Seq2SeqAdapter, cfg: DPBartBuildConfig, train_ids: list[list[int]], work_dir: Path,
                *, progress: bool = True, log=print, eval_ids: list[list[int]] | None = None, eval_every: int = 0,
                save_every: int = 0, should_stop: Callable[[], bool] | None = None) -> _State:
    """Run (or resume) the training stages on public text.

    Parameters
    ----------
    adapter : Seq2SeqAdapter
        The model, trained in place.
    cfg : DPBartBuildConfig
    train_ids : list of list of int
        Public training sentences (content ids).
    work_dir : Path
        Stage checkpoints.
    progress : bool
        Training progress on stderr (:mod:`ldptext_precompute.progress`: a bar on a terminal, else
        status lines with an estimate).
    log : callable
        Receives one line per event.
    eval_ids : list of list of int or None
        Held-out public sentences for the periodic evaluation.
    eval_every : int
        Every this many steps of a training stage, log the recent training loss, the held-out
        teacher-forced loss and the held-out reconstruction BLEU at ε = ∞ (clip C_train = 0.2 in the
        base and pruning stages, as trained; no noise); 0: never.
    save_every : int
        Every this many steps, save the stage's mid-stage state (``NAME.partial.ckpt``): a rerun
        resumes there instead of at the start of the stage; 0: only when stopped.
    should_stop : callable or None
        Checked after every step: when true, save the mid-stage state and raise
        :class:`~ldptext_precompute.dpbart.train.TrainingInterrupted`.

    Returns
    -------
    _State
        C, its statistics, the pruning history, losses and wall times per stage.
    """
    device = device_for_training()
    if cfg.dropout is not None:
        set_dropout(adapter.model, cfg.dropout)
    ck = StageCheckpoints(work_dir, cfg.fingerprint())
    state = _State()
    names = _stage_names(cfg)
    # resume from the latest finished stage
    for i in range(len(names) - 1, -1, -1):
        loaded = _load_stage(ck, names[i], adapter)
        if loaded is not None:
            state = loaded
            log(f"resuming after stage {names[i]}")
            break
    done = set(names[: names.index(state.stage) + 1]) if state.stage in names else set()
    base_steps = cfg.steps if cfg.base_steps is None else cfg.base_steps
    for index, name in enumerate(names, 1):
        if name in done:
            continue
        t0 = time.time()
        stage = f"dpbart stage {index}/{len(names)}"  # which of the stages, for the progress label
        partial = ck.load_partial(name)
        snap = None
        if partial is not None:
            snap, partial_state = partial
            log(f"resuming stage {name} at step {snap['step']}")
            # the JSON state of the partial checkpoint (C, pruning history) replaces the stage-start one
            state = _State(**partial_state)
        hooks = StageHooks(
            resume=snap, save=lambda sn, _n=name: ck.save_partial(_n, sn, asdict(state)), save_every=save_every,
            evaluate=(lambda step, loss, _n=name: _log_eval(adapter, eval_ids, cfg, _n, step, loss, log,
                                                            pruned=state.pruned if _n.startswith("prune-") else []))
            if eval_ids else None, eval_every=eval_every, should_stop=should_stop)
        if name == "base":
            if base_steps > 0:
                state.losses["base"] = train_stage(
                    adapter, train_ids, cfg.seq_len, steps=base_steps, clip=TRAIN_CLIP, batch_size=cfg.batch_size,
                    lr=cfg.lr, seed=_batch_seed(cfg), desc=f"{stage} base (denoising AE)", progress=progress,
                    device=device, freeze_encoder=cfg.freeze_encoder, cross_lr_mult=cfg.cross_lr_mult,
                    corrupt=cfg.corrupt, warmup_steps=cfg.warmup_steps, hooks=hooks)
        elif name == "clip":
            stats = estimate_clip(adapter, train_ids, cfg.seq_len, device=device)
            state.clip_stats = stats
            state.clip = float(stats["suggested_clip"]) if cfg.clip == "auto" else float(cfg.clip)
            # round C to 4 significant digits so the manifest is readable; C is public either way
            state.clip = float(f"{state.clip:.4g}")
            log(f"encoder output: mean {stats['mean']:.4f}, std {stats['std']:.4f} → C = {state.clip}")
        elif name.startswith("prune-"):
            r = int(name.split("-")[1])
            if snap is None:  # a resumed round already chose its neurons
                state.pruned = prune_round(adapter, state.pruned)
                state.pruned_history.append(list(state.pruned))
            state.losses[name] = train_stage(
                adapter, train_ids, cfg.seq_len, steps=cfg.steps, clip=TRAIN_CLIP, pruned=state.pruned,
                batch_size=cfg.batch_size, lr=cfg.lr, seed=_batch_seed(cfg) + r,
                desc=f"{stage} prune round {r} ({len(state.pruned)} pruned)", progress=progress, device=device,
                freeze_encoder=cfg.freeze_encoder, cross_lr_mult=cfg.cross_lr_mult, corrupt=cfg.corrupt,
                    warmup_steps=cfg.warmup_steps, hooks=hooks)
        elif name.startswith("prplus"):
            scale = training_noise_scale(cfg, adapter.hidden_size, len(final_pruned(cfg, state)), state.clip)
            state.losses[name] = train_stage(
                adapter, train_ids, cfg.seq_len, steps=cfg.steps, clip=state.clip, pruned=final_pruned(cfg, state),
                noise=TrainNoise(cfg.mechanism, scale), batch_size=cfg.batch_size, lr=cfg.lr, corrupt=0.0,
                seed=cfg.seed + 1000, desc=f"{stage} pr+ noisy training (ε={cfg.epsilon:g})", progress=progress,
                device=device, freeze_encoder=cfg.freeze_encoder, cross_lr_mult=cfg.cross_lr_mult,
                warmup_steps=cfg.warmup_steps, hooks=hooks)
        state.stage = name
        state.wall[name] = state.wall.get(name, 0.0) + time.time() - t0
        _save_stage(ck, name, adapter, state)
        ck.drop_partial(name)
    adapter.model.to("cpu").eval()
    return state


def set_dropout(model: torch.nn.Module, p: float) -> int:
    """Set the probability of every dropout layer of ``model`` (training only; export runs in eval mode).

    Parameters
    ----------
    model : torch.nn.Module
        Changed in place.
    p : float

    Returns
    -------
    int
        The number of dropout layers (``nn.Dropout`` modules and the float ``dropout`` /
        ``attention_dropout`` / ``activation_dropout`` attributes BART-style layers use) changed.
    """
    n = 0
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p, n = float(p), n + 1
        for attr in ("dropout", "attention_dropout", "activation_dropout"):
            if isinstance(getattr(m, attr, None), float):
                setattr(m, attr, float(p))
                n += 1
    return n


def _log_eval(adapter: Seq2SeqAdapter, eval_ids: list[list[int]], cfg: DPBartBuildConfig, stage: str, step: int,
              train_loss: float, log, pruned: Sequence[int] = ()) -> None:
    """One periodic evaluation line: training loss, held-out loss and BLEU at ε = ∞ (clip 0.2, the
    stage's pruned neurons zeroed, no noise)."""
    import torch.nn.functional as F

    from .train import make_batch, privatize_torch

    t0 = time.time()
    ids = eval_ids[:100]
    pr = torch.tensor(list(pruned), dtype=torch.long)
    with torch.no_grad():
        dev = next(adapter.model.parameters()).device
        b = {k: v.to(dev) for k, v in make_batch(adapter, ids, cfg.seq_len).items()}
        z = privatize_torch(adapter.encode(b["input_ids"], b["attention_mask"]), TRAIN_CLIP, pr.to(dev))
        logits = adapter.decode_logits(z, b["decoder_input_ids"])
        loss = float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), b["labels"].reshape(-1),
                                     ignore_index=-100))
    bleu = reconstruction_bleu(adapter, ids, cfg.seq_len, TRAIN_CLIP, list(pruned), cfg.seq_len)
    log(f"eval stage={stage} step={step} train_loss={train_loss:.4f} heldout_loss={loss:.4f} "
        f"bleu_eps_inf={bleu:.2f} n={len(ids)} eval_s={time.time() - t0:.1f} time={time.strftime('%H:%M:%S')}")


def final_pruned(cfg: DPBartBuildConfig, state: _State) -> list[int]:
    """The pruned indices the bundle ships: those of round ``use_round`` (paper: k − 1 of k rounds).

    Parameters
    ----------
    cfg : DPBartBuildConfig
    state : _State
        After training.

    Returns
    -------
    list of int
        Sorted; empty for CLV.
    """
    if cfg.variant == "clv" or not state.pruned_history:
        return []
    use = cfg.use_round if cfg.use_round is not None else max(1, cfg.prune_rounds - 1)
    use = min(max(1, use), len(state.pruned_history))
    return list(state.pruned_history[use - 1])


def training_noise_scale(cfg: DPBartBuildConfig, hidden: int, n_pruned: int, clip: float) -> float:
    """σ or b the runtime will use at the target (ε, δ): PR+ trains with exactly that noise.

    Parameters
    ----------
    cfg : DPBartBuildConfig
        The target ε, δ and mechanism.
    hidden : int
        d.
    n_pruned : int
        |P|.
    clip : float
        C.

    Returns
    -------
    float
        :func:`ldptext.noise.calibrate` ``(...).scale`` for n = L·(d − |P|).
    """
    from ldptext.noise import calibrate, effective_dim

    n = effective_dim(cfg.seq_len, hidden, n_pruned)
    return calibrate(cfg.mechanism, cfg.epsilon, cfg.delta, clip=clip, n=n).scale


# ------------------------------------------------------------------------------------------ corpus
@dataclass(frozen=True, kw_only=True)
class PublicData:
    """The public sentences of a build, as token ids.

    Attributes
    ----------
    train_ids : list of list of int
        Training sentences (content ids, truncated to what fits in L).
    eval_ids : list of list of int
        Held-out sentences: ONNX checks and reconstruction BLEU.
    sources : dict of str to str
        File name → sha256 of the public text (or ``{"in-memory": sha256}``).
    """

    train_ids: list[list[int]]
    eval_ids: list[list[int]]
    sources: dict[str, str]


def public_data(adapter: Seq2SeqAdapter, cfg: DPBartBuildConfig, sentences: list[str] | None = None) -> PublicData:
    """Load (or take) the public sentences, split off the held-out part, and tokenize both.

    Parameters
    ----------
    adapter : Seq2SeqAdapter
        Its tokenizer is used.
    cfg : DPBartBuildConfig
        ``public_corpus``, ``max_sentences``, ``eval_sentences``, ``seed``, ``seq_len``.
    sentences : list of str or None
        Public sentences already in memory (tests); the first ``eval_sentences`` (at most a fifth)
        are held out.

    Returns
    -------
    PublicData
    """
    if sentences is None:
        corpus = load_public_corpus(cfg.public_corpus, cfg.max_sentences)
        sources = corpus.sources
        train_s, eval_s = split_holdout(corpus, cfg.eval_sentences, cfg.seed)
    else:
        sources = {"in-memory": hashlib.sha256("\n".join(sentences).encode()).hexdigest()}
        cut = max(1, min(cfg.eval_sentences, len(sentences) // 5))
        train_s, eval_s = sentences[cut:], sentences[:cut]
    return PublicData(train_ids=tokenize_corpus(adapter, train_s, cfg.seq_len),
                      eval_ids=tokenize_corpus(adapter, eval_s, cfg.seq_len), sources=sources)


# ------------------------------------------------------------------------------------------ schema
def dpbart_config(adapter: Seq2SeqAdapter, *, variant: str, seq_len: int, clip: float, pruned: Sequence[int],
                  max_output_tokens: int | None = None, quantization: str = "none",
                  trained_for: dict | None = None) -> DPBartConfig:
    """The runtime's :class:`ldptext.dpbart_schema.DPBartConfig` for a model.

    Parameters
    ----------
    adapter : Seq2SeqAdapter
        Gives d, the decoder layout (layers, heads, head size), the special ids and the family.
    variant : str
        ``"clv"``, ``"pr"`` or ``"pr+"``.
    seq_len : int
        L.
    clip : float
        C.
    pruned : sequence of int
        P, the pruned hidden indices.
    max_output_tokens : int or None
        Fixed decoding limit (default L).
    quantization : str
        ``"int8"`` or ``"none"`` (informational).
    trained_for : dict or None
        PR+: the target (ε, δ, mechanism).

    Returns
    -------
    DPBartConfig
    """
    from .export import decoder_layout

    lay = decoder_layout(adapter)
    sp = adapter.special
    return DPBartConfig(
        variant=variant, seq_len=int(seq_len), hidden=adapter.hidden_size, clip=float(clip),
        max_output_tokens=int(seq_len if max_output_tokens is None else max_output_tokens),
        n_layers=lay["n_layers"], heads=lay["heads"], head_dim=lay["head_dim"],
        special=SpecialTokens(pad=sp.pad, bos=sp.bos, eos=sp.eos, decoder_start=sp.decoder_start),
        pruned=tuple(int(j) for j in pruned), family=adapter.family, quantization=quantization,
        trained_for=trained_for)


def bundle_config(adapter: Seq2SeqAdapter, cfg: DPBartBuildConfig, state: _State) -> DPBartConfig:
    """The configuration the bundle ships: C and P from training, L as the decoding limit.

    Parameters
    ----------
    adapter : Seq2SeqAdapter
    cfg : DPBartBuildConfig
    state : _State
        The finished training state (C, pruning history).

    Returns
    -------
    DPBartConfig
    """
    trained_for = ({"epsilon": float(cfg.epsilon), "delta": cfg.delta, "mechanism": cfg.mechanism}
                   if cfg.variant == "pr+" else None)
    return dpbart_config(adapter, variant=cfg.variant, seq_len=cfg.seq_len, clip=float(state.clip),
                         pruned=final_pruned(cfg, state), max_output_tokens=cfg.seq_len,
                         quantization=cfg.quantize or "none", trained_for=trained_for)


# ------------------------------------------------------------------------------------------ graphs
def export_graphs(adapter: Seq2SeqAdapter, out_dir: Path, *, seq_len: int,
                  quantize: str | None) -> dict[str, dict[str, Path]]:
    """Export the fp32 graphs and, with ``quantize="int8"``, their int8 versions.

    Parameters
    ----------
    adapter : Seq2SeqAdapter
    out_dir : Path
        Gets ``fp32/`` and ``int8/``.
    seq_len : int
        L, fixed in the encoder graph.
    quantize : str or None
        ``"int8"``, or ``None`` / ``"none"``.

    Returns
    -------
    dict
        ``{"fp32": {graph: path}}`` plus ``"int8"`` when quantized; graphs are
        :data:`ldptext.dpbart_schema.GRAPHS`. The encoder's feed-forward output projections stay fp32.
    """
    from .export import export_onnx, quantize_int8

    graphs = {"fp32": export_onnx(adapter, out_dir / "fp32", seq_len)}
    if quantize == "int8":
        qdir = out_dir / "int8"
        qdir.mkdir()
        graphs["int8"] = {k: quantize_int8(v, qdir / v.name, keep_ffn_output_fp32=(k == "encoder"))
                          for k, v in graphs["fp32"].items()}
    return graphs


def bundle_blobs(graphs: Mapping[str, Path], tokenizer_json: str) -> dict[str, bytes]:
    """The blobs of a dpbart bundle (:data:`ldptext.dpbart_schema.BLOBS`).

    Parameters
    ----------
    graphs : mapping of str to Path
        One path per graph name.
    tokenizer_json : str
        The model's ``tokenizers`` JSON.

    Returns
    -------
    dict of str to bytes
        ``encoder.onnx``, ``decoder_init.onnx``, ``decoder.onnx``, ``tokenizer.json``.
    """
    blobs = {f"{g}.onnx": Path(graphs[g]).read_bytes() for g in GRAPHS}
    blobs["tokenizer.json"] = tokenizer_json.encode("utf-8")
    return blobs


@contextmanager
def shipped_rewriter(graphs: Mapping[str, Path], tokenizer_json: str, config: DPBartConfig, *,
                     threads: int | None = None) -> Iterator[Rewriter]:
    """The device runtime over given graphs: an unsigned temporary bundle loaded by :class:`Rewriter`.

    Parameters
    ----------
    graphs : mapping of str to Path
        One path per graph name (fp32 or int8).
    tokenizer_json : str
        The model's tokenizer.
    config : DPBartConfig
        The manifest section and pruned indices, exactly as they will ship.
    threads : int or None
        ONNX Runtime threads.

    Yields
    ------
    Rewriter
        Loaded with ``allow_unsigned=True`` (the warning is silenced: this bundle never leaves the
        build) and private randomness.
    """
    from ldptext.bundle import UnsignedBundleWarning, write_bundle

    with tempfile.TemporaryDirectory(prefix="ldptext-dpbart-check-") as tmp:
        path = write_bundle(Path(tmp) / "check.ldpb", mechanism=MECHANISM, arrays=config.arrays(),
                            manifest={SECTION: config.manifest_section()},
                            blobs=bundle_blobs(graphs, tokenizer_json), sign_key=None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnsignedBundleWarning)
            rewriter = Rewriter.load(path, allow_unsigned=True, threads=threads)
        yield rewriter


# ------------------------------------------------------------------------------------------ checks
@torch.no_grad()
def onnx_checks(adapter: Seq2SeqAdapter, graphs: Mapping[str, Mapping[str, Path]], config: DPBartConfig,
                contents: list[list[int]]) -> dict:
    """PyTorch ↔ shipped runtime agreement at ε = ∞, for each graph set (fp32, int8).

    Each graph set is loaded by the real :class:`ldptext.dpbart.Rewriter` (:func:`shipped_rewriter`);
    its :meth:`~ldptext.dpbart.Rewriter.encoder_outputs` are compared with the PyTorch encoder, and
    its :meth:`~ldptext.dpbart.Rewriter.decode` of the clipped, pruned ONNX encoder output with the
    PyTorch reference decoding (:func:`greedy_decode_torch`) of the clipped, pruned PyTorch output.

    Parameters
    ----------
    adapter : Seq2SeqAdapter
        The trained model (moved to the CPU).
    graphs : mapping of str to mapping of str to Path
        ``{"fp32": {graph: path}, "int8": ...}`` as from :func:`export_graphs`.
    config : DPBartConfig
        What ships (C, P, L, decoding limit).
    contents : list of list of int
        Held-out public sentences (content ids that fit in one chunk).

    Returns
    -------
    dict
        ``n_docs`` and per label ``<label>_encoder_max_abs_diff``, ``<label>_clipped_max_abs_diff``
        (after clipping to C: what the noise step sees) and ``<label>_greedy_identical_fraction``.
    """
    from .train import make_batch, privatize_torch

    b = make_batch(adapter, contents, config.seq_len)
    adapter.model.to("cpu").eval()
    z_t = adapter.encode(b["input_ids"], b["attention_mask"])
    z_np = z_t.numpy()
    clip = config.clip
    out: dict = {"n_docs": len(contents)}
    pr = torch.tensor(config.pruned, dtype=torch.long)
    ref_tokens = greedy_decode_torch(adapter, privatize_torch(z_t, clip, pr), config.max_output_tokens)
    for label, gr in graphs.items():
        shipped = replace(config, quantization="none" if label == "fp32" else label)
        # same thread budget as training (shared machines)
        with shipped_rewriter(gr, adapter.tokenizer_json, shipped, threads=torch.get_num_threads()) as rw:
            z_o = rw.encoder_outputs(contents)
            toks = rw.decode(privatize_torch(torch.from_numpy(z_o), clip, pr).numpy())
        out[f"{label}_encoder_max_abs_diff"] = float(np.abs(z_o - z_np).max())
        # after clipping (what the decoder actually sees)
        zc_o, zc_t = np.clip(z_o, -clip, clip), np.clip(z_np, -clip, clip)
        out[f"{label}_clipped_max_abs_diff"] = float(np.abs(zc_o - zc_t).max())
        same = sum(a == r for a, r in zip(toks, ref_tokens))
        out[f"{label}_greedy_identical_fraction"] = same / len(ref_tokens)
    return out


def reconstruction_bleu(adapter: Seq2SeqAdapter, contents: list[list[int]], seq_len: int, clip: float,
                        pruned: Sequence[int], max_len: int) -> float:
    """Corpus BLEU of PyTorch greedy reconstructions at ε = ∞ (clip + prune, no noise).

    Parameters
    ----------
    adapter : Seq2SeqAdapter
    contents : list of list of int
        Held-out public sentences (content ids).
    seq_len : int
        L.
    clip : float
        C.
    pruned : sequence of int
        P.
    max_len : int
        Decoding limit.

    Returns
    -------
    float
        BLEU in [0, 100] against the (truncated) held-out sentences.
    """
    from ldptext_precompute.bleu import bleu_tokenize, corpus_bleu

    from .train import make_batch, privatize_torch

    hyps, refs = [], []
    dev = next(adapter.model.parameters()).device
    pr = torch.tensor(list(pruned), dtype=torch.long, device=dev)
    with torch.no_grad():
        for i in range(0, len(contents), 32):
            part = contents[i:i + 32]
            b = make_batch(adapter, part, seq_len)
            z = privatize_torch(adapter.encode(b["input_ids"].to(dev), b["attention_mask"].to(dev)), clip, pr)
            for ref, hyp in zip(part, greedy_decode_torch(adapter, z, max_len)):
                hyps.append(bleu_tokenize(adapter.tokenizer.decode(hyp, skip_special_tokens=True)))
                refs.append(bleu_tokenize(adapter.tokenizer.decode(ref, skip_special_tokens=True)))
    return 100.0 * corpus_bleu(hyps, refs)


# ------------------------------------------------------------------------------------------ records
@dataclass(frozen=True, kw_only=True)
class BuildSummary:
    """What a build measured: the manifest's ``provenance`` section.

    Attributes
    ----------
    clip : float
        C.
    clip_stats : dict or None
        Encoder-output statistics on public text (mean, std, quantiles).
    n_pruned : int
        |P| shipped.
    pruned_per_round : list of int
        |P| after each pruning round.
    losses : dict
        Mean loss of the last 10 % of steps, per stage.
    stage_wall_s : dict
        Seconds per stage.
    reconstruction_bleu_eps_inf : float
        :func:`reconstruction_bleu` on the held-out sentences.
    onnx_checks : dict
        :func:`onnx_checks`.
    fp32_graph_bytes, shipped_graph_bytes : int
        Size of the fp32 graphs and of the graphs that ship.
    train_sentences, eval_sentences : int
        Public sentences used for training and held out.
    device : str
        Where training ran.
    export_wall_s : float
        Seconds for export, quantization, checks and BLEU.
    """

    clip: float
    clip_stats: dict | None
    n_pruned: int
    pruned_per_round: list[int]
    losses: dict
    stage_wall_s: dict
    reconstruction_bleu_eps_inf: float
    onnx_checks: dict
    fp32_graph_bytes: int
    shipped_graph_bytes: int
    train_sentences: int
    eval_sentences: int
    device: str
    export_wall_s: float

    def as_dict(self) -> dict:
        """Field → value (a deep copy)."""
        return asdict(self)


def _versions() -> dict:
    import onnx
    import onnxruntime
    import transformers

    import ldptext

    return {"ldptext": ldptext.__version__, "torch": torch.__version__, "transformers": transformers.__version__,
            "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__}


def dpbart_manifest(*, config: DPBartConfig, cfg: DPBartBuildConfig, model_source: str, sources: dict[str, str],
                    summary: BuildSummary) -> dict:
    """The bundle manifest (before ``write_bundle`` adds format, mechanism and the array table).

    Parameters
    ----------
    config : DPBartConfig
        The ``dpbart`` section.
    cfg : DPBartBuildConfig
        Recorded under ``build.config``.
    model_source : str
        Where the public model came from.
    sources : dict of str to str
        The public text files and their sha256.
    summary : BuildSummary
        Recorded as ``provenance``; its ONNX checks also as ``numeric_tolerance.onnx_vs_torch``.

    Returns
    -------
    dict
        JSON-safe (non-finite floats become ``None``).
    """
    return jsonable({
        SECTION: config.manifest_section(),
        "sources": {"model": model_source, "public_corpus": cfg.public_corpus, "files": sources},
        "build": {"tool": "ldptext precompute dpbart", "versions": _versions(), "config": _manifest_build_config(cfg)},
        "provenance": summary.as_dict(),
        "numeric_tolerance": {"onnx_vs_torch": summary.onnx_checks},
    })


def write_dpbart_bundle(out: str | Path, *, config: DPBartConfig, blobs: dict[str, bytes], manifest: dict,
                        sign_key: Any = None, passphrase: bytes | None = None) -> Path:
    """Sign and write the bundle: the manifest, the pruned-index array and the blobs.

    Parameters
    ----------
    out : str or Path
        The bundle file.
    config : DPBartConfig
        Gives the arrays (:meth:`DPBartConfig.arrays`).
    blobs : dict of str to bytes
        :func:`bundle_blobs`.
    manifest : dict
        :func:`dpbart_manifest`.
    sign_key : key, path, None or False
        ``None`` signs with the local developer key; ``False`` writes an unsigned development bundle.
    passphrase : bytes or None
        For an encrypted PEM key.

    Returns
    -------
    Path
        The written bundle.
    """
    from ldptext import keys as _keys
    from ldptext.bundle import write_bundle

    return write_bundle(out, mechanism=MECHANISM, arrays=config.arrays(), manifest=manifest, blobs=blobs,
                        sign_key=_keys.build_signing_key(sign_key), passphrase=passphrase)


# ------------------------------------------------------------------------------------------ pipeline
def build_dpbart_bundle(out: str | Path, cfg: DPBartBuildConfig, *, sign_key: Any = None,
                        passphrase: bytes | None = None, work_dir: str | Path | None = None,
                        adapter: Seq2SeqAdapter | None = None, sentences: list[str] | None = None,
                        progress: bool = True, log: Callable[[str], Any] = print, eval_every: int = 0,
                        save_every: int = 0, should_stop: Callable[[], bool] | None = None) -> tuple[Path, dict]:
    """Build (or resume) a signed DP-BART bundle from a public model and public text.

    Steps: public data → training stages (checkpointed, resumable) → bundle configuration (C, P) →
    ONNX export and int8 quantization → checks through the shipped runtime and reconstruction BLEU →
    manifest → signed bundle.

    Parameters
    ----------
    out : str or Path
        The bundle file to write.
    cfg : DPBartBuildConfig
        Everything that determines the bundle (validated here).
    sign_key : key, path, None or False
        ``None`` signs with the local developer key; ``False`` writes an unsigned development bundle.
    passphrase : bytes or None
        For an encrypted PEM key.
    work_dir : str or Path or None
        Stage checkpoints (default ``OUT.work``).
    adapter : Seq2SeqAdapter or None
        A model already in memory (tests use a tiny random one); default :func:`load_model`.
    sentences : list of str or None
        Public sentences already in memory; default the corpus ``cfg.public_corpus``.
    progress : bool
        Training progress on stderr (:mod:`ldptext_precompute.progress`: a bar on a terminal, else
        status lines with an estimate).
    log : callable
        Receives one line per event.
    eval_every, save_every, should_stop
        Periodic held-out evaluation, mid-stage checkpoints and a clean stop: see :func:`train_model`
        (none of them changes the trained weights).

    Returns
    -------
    path : Path
        The written bundle.
    summary : dict
        :class:`BuildSummary` fields plus ``total_wall_s`` and ``bundle_bytes``.

    Raises
    ------
    ValueError
        ``cfg`` is invalid.
    TrainingInterrupted
        ``should_stop()`` became true during training (the state is saved; call again to resume).

    Notes
    -----
    Nothing here sees private data, so no privacy budget is spent. The bundle's runtime releases each
    chunk (ε, δ)-LDP, neighbouring relation "replace the whole chunk": Igamberdiev & Habernal 2023,
    *DP-BART for Privatized Text Rewriting under Local Differential Privacy* (Findings of ACL), as
    presented in Igamberdiev 2023, *Differentially Private Methods in NLP* (PhD thesis, TU
    Darmstadt), §6.3.3–6.3.5.
    """
    cfg.validate()
    t_start = time.time()
    out = Path(out)
    work = Path(work_dir) if work_dir else out.with_name(out.name + ".work")
    adapter = adapter if adapter is not None else load_model(cfg.model)
    if cfg.init_weights is not None:  # a resumed stage checkpoint, if any, replaces them
        load_init_weights(adapter, cfg.init_weights)
    data = public_data(adapter, cfg, sentences)
    torch.manual_seed(cfg.seed)
    state = train_model(adapter, cfg, data.train_ids, work, progress=progress, log=log, eval_ids=data.eval_ids,
                        eval_every=eval_every, save_every=save_every, should_stop=should_stop)
    config = bundle_config(adapter, cfg, state)
    t_export = time.time()
    # export and checks have no step count; a line each so a log shows which phase is running
    log("exporting the ONNX graphs" + (f" and quantizing them to {cfg.quantize}" if cfg.quantize else ""))
    with tempfile.TemporaryDirectory(prefix="ldptext-dpbart-") as tmp:
        graphs = export_graphs(adapter, Path(tmp), seq_len=cfg.seq_len, quantize=cfg.quantize)
        log("checking the ONNX graphs against PyTorch and measuring reconstruction BLEU")
        checks = onnx_checks(adapter, graphs, config, data.eval_ids[:16])
        bleu = reconstruction_bleu(adapter, data.eval_ids, cfg.seq_len, config.clip, config.pruned,
                                   config.max_output_tokens)
        log(f"reconstruction BLEU at epsilon=inf (PyTorch fp32, {len(data.eval_ids)} held-out sentences): {bleu:.1f}")
        blobs = bundle_blobs(graphs.get("int8", graphs["fp32"]), adapter.tokenizer_json)
        fp32_bytes = sum(Path(v).stat().st_size for v in graphs["fp32"].values())
    summary = BuildSummary(
        clip=config.clip, clip_stats=state.clip_stats, n_pruned=len(config.pruned),
        pruned_per_round=[len(p) for p in state.pruned_history], losses=state.losses, stage_wall_s=state.wall,
        reconstruction_bleu_eps_inf=bleu, onnx_checks=checks, fp32_graph_bytes=fp32_bytes,
        shipped_graph_bytes=sum(len(v) for k, v in blobs.items() if k.endswith(".onnx")),
        train_sentences=len(data.train_ids), eval_sentences=len(data.eval_ids),
        device=str(device_for_training()), export_wall_s=time.time() - t_export)
    manifest = dpbart_manifest(config=config, cfg=cfg, model_source=adapter.source, sources=data.sources,
                               summary=summary)
    path = write_dpbart_bundle(out, config=config, blobs=blobs, manifest=manifest, sign_key=sign_key,
                               passphrase=passphrase)
    return path, {**summary.as_dict(), "total_wall_s": time.time() - t_start, "bundle_bytes": path.stat().st_size}


def remove_work_dir(out: str | Path) -> None:
    """Delete the stage checkpoints of a finished build.

    Parameters
    ----------
    out : str or Path
        The bundle path; its checkpoints are in ``OUT.work``.
    """
    shutil.rmtree(Path(out).with_name(Path(out).name + ".work"), ignore_errors=True)
