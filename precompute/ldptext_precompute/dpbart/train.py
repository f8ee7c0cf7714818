"""Training stages of DP-BART precompute, on public text only.

Igamberdiev & Habernal 2023, *DP-BART for Privatized Text Rewriting under Local Differential Privacy*
(Findings of ACL), as presented in Igamberdiev 2023, *Differentially Private Methods in NLP* (PhD
thesis, TU Darmstadt), §6.3.3–6.3.5.

* :func:`estimate_clip` — encoder-output value statistics on public text → C (paper: σ/2 ≈ 0.1).
* :func:`train_stage` — denoising-autoencoder training with the encoder output clipped to [−C, C],
  pruned neurons zeroed, and (PR+) noise at the target ε added, exactly where the runtime adds it.
* :func:`prune_round` — one round of neuron selection: score neuron j by Σ|W_K[:, j]| of the first
  decoder cross-attention layer and prune the remaining neurons below the 25 % quantile.

Training noise uses torch's generator: it is applied to public data and never released.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from ..progress import Progress
from .model import Seq2SeqAdapter, content_capacity, encoder_input


def device_for_training() -> torch.device:
    """GPU when torch sees one, CPU otherwise.

    Returns
    -------
    torch.device
    """
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


# ------------------------------------------------------------------------------------------- data
def tokenize_corpus(adapter: Seq2SeqAdapter, sentences: list[str], seq_len: int) -> list[list[int]]:
    """Content ids of each sentence, truncated to what fits in L (drops sentences with no tokens).

    Parameters
    ----------
    adapter : Seq2SeqAdapter
    sentences : list of str
        Public sentences.
    seq_len : int
        L.

    Returns
    -------
    list of list of int
    """
    cap = content_capacity(adapter.special, seq_len)
    enc = adapter.tokenizer.encode_batch(sentences, add_special_tokens=False)
    return [e.ids[:cap] for e in enc if e.ids]


def make_batch(adapter: Seq2SeqAdapter, contents: list[list[int]], seq_len: int, *, corrupt: float = 0.0,
               generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
    """Encoder inputs (optionally corrupted for denoising), decoder inputs and labels.

    Parameters
    ----------
    adapter : Seq2SeqAdapter
    contents : list of list of int
        Content ids, each fitting in L.
    seq_len : int
        L.
    corrupt : float
        Denoising: each input token is deleted with probability corrupt/3, masked with 2·corrupt/3.
    generator : torch.Generator or None
        For the corruption.

    Returns
    -------
    dict of str to torch.Tensor of int64, each shape (B, L)
        ``input_ids``, ``attention_mask`` (the runtime's fixed ``[bos] content [eos] pad…`` layout),
        ``decoder_input_ids`` ([decoder_start] + content, teacher forcing) and ``labels`` (content +
        [eos], padding −100).
    """
    sp = adapter.special
    ids, masks, dec_in, labels = [], [], [], []
    for content in contents:
        src = list(content)
        if corrupt > 0 and src:
            r = torch.rand(len(src), generator=generator).tolist()
            keep = []
            for tok, u in zip(src, r):
                if u < corrupt / 3:  # delete
                    continue
                if u < corrupt and sp.mask is not None:  # mask
                    keep.append(sp.mask)
                else:
                    keep.append(tok)
            src = keep
        i, m = encoder_input(src, sp, seq_len)
        ids.append(i)
        masks.append(m)
        tgt = list(content) + [sp.eos]
        d_in = [sp.decoder_start] + list(content)
        pad = seq_len - len(tgt)
        labels.append(tgt + [-100] * pad)
        dec_in.append(d_in + [sp.pad] * pad)
    return {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(masks),
            "decoder_input_ids": torch.tensor(dec_in), "labels": torch.tensor(labels)}


# ------------------------------------------------------------------------------------------- noise
@dataclass(frozen=True)
class TrainNoise:
    """PR+ training noise: i.i.d. per coordinate at the scale the runtime will use for (ε, δ).

    Attributes
    ----------
    mechanism : str
        ``"gaussian"`` or ``"laplace"``.
    scale : float
        σ or b in the units of z.
    """

    mechanism: str  # "gaussian" or "laplace"
    scale: float    # σ or b in the units of z


def privatize_torch(z: torch.Tensor, clip: float, pruned: torch.Tensor | None,
                    noise: TrainNoise | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """Clip to [−C, C], zero pruned neurons for every token, add training noise (differentiable in z).

    Parameters
    ----------
    z : torch.Tensor of float, shape (B, L, d)
    clip : float
        C.
    pruned : torch.Tensor of int64, shape (|P|,), or None
    noise : TrainNoise or None
        PR+ training noise (continuous, torch's generator: public data only, never released).
    generator : torch.Generator or None

    Returns
    -------
    torch.Tensor of float, shape (B, L, d)
        What the decoder sees, as in the runtime (which uses discrete noise from the CSPRNG).
    """
    z = torch.clamp(z, -clip, clip)
    if pruned is not None and pruned.numel():
        keep = torch.ones(z.shape[-1], dtype=z.dtype, device=z.device)
        keep[pruned] = 0
        z = z * keep
    else:
        keep = None
    if noise is not None:
        if noise.mechanism == "gaussian":
            eps = torch.randn(z.shape, generator=generator, device="cpu").to(z.device) * noise.scale
        else:
            u = torch.rand(z.shape, generator=generator, device="cpu").to(z.device) - 0.5
            eps = -noise.scale * torch.sign(u) * torch.log1p(-2 * u.abs())
        z = z + (eps * keep if keep is not None else eps)
    return z


# ------------------------------------------------------------------------------------------- stages
@torch.no_grad()
def estimate_clip(adapter: Seq2SeqAdapter, contents: list[list[int]], seq_len: int, *, n_docs: int = 256,
                  batch_size: int = 32, device: torch.device | None = None) -> dict:
    """Encoder-output value statistics over all L positions of public sentences (thesis §6.3.3).

    Parameters
    ----------
    adapter : Seq2SeqAdapter
    contents : list of list of int
        Public sentences.
    seq_len : int
        L.
    n_docs : int
        At most this many sentences.
    batch_size : int
    device : torch.device or None

    Returns
    -------
    dict
        mean, std, quantiles (q01, q05, median, q95, q99), n_values and the suggested C = std / 2
        (the paper's choice: σ ≈ 0.2 → C = 0.1).
    """
    device = device or device_for_training()
    model = adapter.model.to(device).eval()
    vals = []
    for i in range(0, min(n_docs, len(contents)), batch_size):
        b = make_batch(adapter, contents[i:i + batch_size], seq_len)
        z = adapter.encode(b["input_ids"].to(device), b["attention_mask"].to(device))
        vals.append(z.float().reshape(-1).cpu())
    v = torch.cat(vals)
    q = torch.quantile(v[torch.randperm(len(v))[:200_000]], torch.tensor([0.01, 0.05, 0.5, 0.95, 0.99]))
    std = float(v.std())
    model.train()
    return {"mean": float(v.mean()), "std": std, "q01": float(q[0]), "q05": float(q[1]), "median": float(q[2]),
            "q95": float(q[3]), "q99": float(q[4]), "n_values": int(v.numel()), "suggested_clip": std / 2.0}


def train_stage(adapter: Seq2SeqAdapter, contents: list[list[int]], seq_len: int, *, steps: int, clip: float,
                pruned: list[int] | None = None, noise: TrainNoise | None = None, batch_size: int = 16,
                lr: float = 1e-4, corrupt: float = 0.15, seed: int = 0, desc: str = "train",
                progress: bool = True, device: torch.device | None = None, freeze_encoder: bool = False,
                cross_lr_mult: float = 1.0, warmup_steps: int | None = None,
                hooks: StageHooks | None = None) -> float:
    """Train ``steps`` steps of the denoising autoencoder on public sentences.

    Clip / prune / noise sit exactly where the runtime puts them (:func:`privatize_torch`).

    Parameters
    ----------
    adapter : Seq2SeqAdapter
        Trained in place.
    contents : list of list of int
        Public training sentences.
    seq_len : int
        L.
    steps : int
    clip : float
        C during training.
    pruned : list of int or None
        P.
    noise : TrainNoise or None
        PR+ noise.
    batch_size, lr, corrupt, seed
        Optimisation and denoising settings.
    desc : str
        Progress-bar label.
    progress : bool
        Show progress on stderr with an estimate (:mod:`ldptext_precompute.progress`).
    device : torch.device or None
    freeze_encoder : bool
        Train the decoder only.
    cross_lr_mult : float
        Learning-rate multiplier of the cross-attention parameters.
    warmup_steps : int or None
        Linear learning-rate warm-up length (default a tenth of ``steps``); then linear decay to 5 %.
    hooks : StageHooks or None
        Mid-stage checkpoints (resume state, periodic save), periodic held-out evaluation and a
        clean stop (:class:`StageHooks`). A resumed stage continues at the saved step with the saved
        optimizer, schedule and random states, so it ends exactly where an uninterrupted run would.

    Returns
    -------
    float
        Mean loss of the last 10 % of steps (NaN for 0 steps).

    Raises
    ------
    TrainingInterrupted
        ``hooks.should_stop()`` became true; the state was saved first (``hooks.save``).
    """
    device = device or device_for_training()
    model = adapter.model.to(device).train()
    # optional: keep the (public, pretrained) encoder fixed and train only the decoder: ~2x cheaper steps
    for p in adapter.encoder().parameters():
        p.requires_grad_(not freeze_encoder)
    # the cross-attention is the part that must learn most (random or warm-started): optionally a
    # larger learning rate there
    cross = [p for n, p in model.named_parameters() if p.requires_grad and _is_cross(n)]
    rest = [p for n, p in model.named_parameters() if p.requires_grad and not _is_cross(n)]
    opt = torch.optim.AdamW([{"params": rest, "lr": lr}, {"params": cross, "lr": lr * cross_lr_mult}],
                            weight_decay=0.01)
    warm = max(1, steps // 10 if warmup_steps is None else warmup_steps)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * max(0.05, 1 - s / max(1, steps)))
    g = torch.Generator().manual_seed(seed)
    pr = torch.tensor(sorted(pruned or []), dtype=torch.long, device=device)
    tail, losses, start = max(1, steps // 10), [], 0
    hooks = hooks or StageHooks()
    if hooks.resume is not None:
        start = _restore(hooks.resume, model, opt, sched, g, device)
        losses = list(hooks.resume["losses"])
    bar = Progress(steps, desc, unit="step", enabled=progress, initial=start)
    for step in range(start, steps):
        idx = torch.randint(len(contents), (batch_size,), generator=g).tolist()
        b = {k: v.to(device) for k, v in make_batch(adapter, [contents[i] for i in idx], seq_len,
                                                    corrupt=corrupt, generator=g).items()}
        if freeze_encoder:
            with torch.no_grad():
                z = adapter.encode(b["input_ids"], b["attention_mask"])
        else:
            z = adapter.encode(b["input_ids"], b["attention_mask"])
        z = privatize_torch(z, clip, pr, noise, g)
        logits = adapter.decode_logits(z, b["decoder_input_ids"])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), b["labels"].reshape(-1), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        bar.set_postfix(loss=f"{sum(losses[-20:]) / len(losses[-20:]):.3f}")
        bar.update()
        done = step + 1
        if hooks.eval_every and hooks.evaluate is not None and (done % hooks.eval_every == 0 or done == steps):
            model.eval()
            hooks.evaluate(done, sum(losses[-50:]) / len(losses[-50:]))
            model.train()
        if done < steps:
            stop = hooks.should_stop is not None and hooks.should_stop()
            if hooks.save is not None and (stop or (hooks.save_every and done % hooks.save_every == 0)):
                hooks.save(_snapshot(done, model, opt, sched, g, losses))
            if stop:
                bar.close(finished=False)
                for p in adapter.encoder().parameters():
                    p.requires_grad_(True)
                model.eval()
                raise TrainingInterrupted(done)
    bar.close()
    for p in adapter.encoder().parameters():
        p.requires_grad_(True)
    model.eval()
    return sum(losses[-tail:]) / len(losses[-tail:]) if losses else math.nan


class TrainingInterrupted(Exception):
    """A stage stopped early on request (:attr:`StageHooks.should_stop`) after saving its state.

    Parameters
    ----------
    step : int
        Steps done in the stage.
    """

    def __init__(self, step: int) -> None:
        super().__init__(f"training stopped after step {step}; the state is saved, run again to resume")
        self.step = step


@dataclass
class StageHooks:
    """Optional mid-stage checkpointing, evaluation and stopping for :func:`train_stage`.

    Attributes
    ----------
    resume : dict or None
        A state saved through ``save`` (continue from its step).
    save : callable or None
        ``save(state)`` receives a resumable state (step, model, optimizer, schedule, random states,
        losses; tensors on the CPU), every ``save_every`` steps and before a requested stop.
    save_every : int
        0: only before a stop.
    evaluate : callable or None
        ``evaluate(step, recent_loss)`` every ``eval_every`` steps and at the end (model in eval
        mode; it must not draw from torch's global random state).
    eval_every : int
    should_stop : callable or None
        Checked after every step; when true the state is saved (if ``save`` is set) and
        :class:`TrainingInterrupted` raised.
    """

    resume: dict | None = None
    save: Callable[[dict], None] | None = None
    save_every: int = 0
    evaluate: Callable[[int, float], None] | None = None
    eval_every: int = 0
    should_stop: Callable[[], bool] | None = None


def _snapshot(step: int, model, opt, sched, g: torch.Generator, losses: list[float]) -> dict:
    def cpu(obj):
        if isinstance(obj, torch.Tensor):
            return obj.detach().cpu().clone()
        if isinstance(obj, dict):
            return {k: cpu(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return type(obj)(cpu(v) for v in obj)
        return obj

    return {"step": step, "model": cpu(model.state_dict()), "optimizer": cpu(opt.state_dict()),
            "scheduler": sched.state_dict(), "generator": g.get_state(), "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "losses": list(losses)}


def _restore(snap: dict, model, opt, sched, g: torch.Generator, device: torch.device) -> int:
    model.load_state_dict(snap["model"])
    model.to(device)
    opt.load_state_dict(snap["optimizer"])
    sched.load_state_dict(snap["scheduler"])
    g.set_state(snap["generator"])
    torch.set_rng_state(snap["torch_rng"])
    if snap.get("cuda_rng") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(snap["cuda_rng"])
    return int(snap["step"])


def _is_cross(name: str) -> bool:
    return any(k in name for k in ("crossattention", "encoder_attn", "EncDecAttention"))


@torch.no_grad()
def neuron_scores(adapter: Seq2SeqAdapter) -> torch.Tensor:
    """Σ|W_K[:, j]| of the first decoder cross-attention layer, one score per hidden neuron j.

    Parameters
    ----------
    adapter : Seq2SeqAdapter

    Returns
    -------
    torch.Tensor of float32, shape (d,)
    """
    return adapter.first_cross_key_weight().detach().abs().sum(dim=0).float().cpu()


def prune_round(adapter: Seq2SeqAdapter, pruned: list[int], quantile: float = 0.25) -> list[int]:
    """One pruning round (thesis §6.3.4): add the remaining neurons scored below the ``quantile``.

    Parameters
    ----------
    adapter : Seq2SeqAdapter
    pruned : list of int
        Already pruned neurons.
    quantile : float
        Of the scores of the neurons not yet pruned (paper: 0.25).

    Returns
    -------
    list of int
        The new sorted pruned list.
    """
    scores = neuron_scores(adapter)
    remaining = torch.tensor([j for j in range(scores.numel()) if j not in set(pruned)])
    thr = torch.quantile(scores[remaining], quantile)
    new = remaining[scores[remaining] < thr].tolist()
    return sorted(set(pruned) | set(new))


@torch.no_grad()
def greedy_decode_torch(adapter: Seq2SeqAdapter, z: torch.Tensor, max_len: int) -> list[list[int]]:
    """Greedy decoding in PyTorch: the independent oracle of the runtime's ONNX decoding.

    The decoder recomputes the whole prefix at every step (no key/value cache, no ONNX); only the
    loop is shared with the runtime (:func:`ldptext.decoding.greedy`).

    Parameters
    ----------
    adapter : Seq2SeqAdapter
        The model.
    z : torch.Tensor of float, shape (B, L, d)
        Encoder outputs as the decoder sees them (clipped, pruned, possibly noised).
    max_len : int
        Fixed maximum number of generated tokens.

    Returns
    -------
    list of list of int, length B
        Generated ids per row, without start and end tokens.
    """
    from ldptext.decoding import greedy

    sp = adapter.special
    prefix = torch.zeros((z.shape[0], 0), dtype=torch.long, device=z.device)

    def step(tokens: np.ndarray) -> np.ndarray:
        nonlocal prefix
        prefix = torch.cat([prefix, torch.from_numpy(tokens).to(z.device)[:, None]], dim=1)
        return adapter.decode_logits(z, prefix)[:, -1].float().cpu().numpy()

    return greedy(step, z.shape[0], sp.decoder_start, sp.eos, max_len)
