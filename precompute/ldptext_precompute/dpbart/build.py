"""DP-BART precompute pipeline: public model + public text → signed ``dpbart`` bundle (SPEC §3, §5;
seed 001 §6.3.3–6.3.5).

Stages (each checkpointed in ``work_dir``, so an interrupted run resumes at the last finished stage):

1. ``base``   — denoising-autoencoder training on public text with the encoder output clipped to C
   (needed for the MiniLM BERT-to-BERT stand-in, whose cross-attention starts random; a real BART
   checkpoint may use ``base_steps=0``);
2. ``clip``   — C from encoder-output statistics on public text (``clip="auto"``: σ/2) or given;
3. ``prune-r``— for ``pr``/``pr+``: ``prune_rounds`` rounds of pruning by Σ|W_K[:, j]| (25 % quantile of
   the remaining neurons) each followed by training with value clipping C_train = 0.2; the bundle uses
   the indices of round ``use_round`` (paper: 6 rounds, indices of round 5);
4. ``prplus`` — for ``pr+``: training with clipped + noised encoder outputs at the target (ε, δ);
5. export of the three ONNX graphs, PyTorch↔ONNX equivalence check, int8 quantization, reconstruction
   BLEU at ε = ∞ on held-out public sentences, and the signed bundle.

Nothing here sees private data; no privacy budget is spent by precompute (seed 001 Thm 6.3.3 proof).
"""
from __future__ import annotations

import hashlib
import json
import math
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from .data import load_public_corpus, split_holdout
from .model import Seq2SeqAdapter, content_capacity, load_model
from .train import (TrainNoise, device_for_training, estimate_clip, greedy_decode_torch, prune_round,
                           tokenize_corpus, train_stage)

VARIANTS = ("clv", "pr", "pr+")
TRAIN_CLIP = 0.2  # value clipping during pruning/retraining (seed 001 §6.3.4)


@dataclass
class DPBartBuildConfig:
    """Everything that determines a DP-BART bundle (recorded in its manifest)."""

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

    def validate(self) -> None:
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
        if self.variant in ("pr", "pr+") and self.prune_rounds < 1:
            raise ValueError("pr/pr+ need at least one pruning round")

    def fingerprint(self) -> str:
        """Hash of the settings that determine the trained weights (checkpoints of another config are
        never resumed)."""
        keys = ("model", "public_corpus", "seq_len", "clip", "steps", "base_steps", "batch_size", "lr",
                "max_sentences", "seed", "eval_sentences", "freeze_encoder", "cross_lr_mult", "corrupt")
        return hashlib.sha256(json.dumps({k: getattr(self, k) for k in keys}, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class _State:
    stage: str = "start"
    clip: float | None = None
    clip_stats: dict | None = None
    pruned: list[int] = field(default_factory=list)
    pruned_history: list[list[int]] = field(default_factory=list)
    losses: dict = field(default_factory=dict)
    wall: dict = field(default_factory=dict)


class _Checkpoints:
    """Stage checkpoints: model weights (torch.save, loaded with weights_only) + JSON state."""

    def __init__(self, work_dir: Path, fingerprint: str) -> None:
        self.dir = work_dir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.fp = fingerprint

    def save(self, name: str, adapter: Seq2SeqAdapter, state: _State) -> None:
        tmp = self.dir / f".{name}.tmp"
        torch.save({k: v.detach().cpu() for k, v in adapter.model.state_dict().items()}, tmp)
        tmp.replace(self.dir / f"{name}.pt")
        (self.dir / f"{name}.json").write_text(json.dumps({"fingerprint": self.fp, "state": asdict(state)}))

    def load(self, name: str, adapter: Seq2SeqAdapter) -> _State | None:
        pt, js = self.dir / f"{name}.pt", self.dir / f"{name}.json"
        if not (pt.is_file() and js.is_file()):
            return None
        meta = json.loads(js.read_text())
        if meta.get("fingerprint") != self.fp:
            return None
        adapter.model.load_state_dict(torch.load(pt, map_location="cpu", weights_only=True))
        return _State(**meta["state"])


def _stage_names(cfg: DPBartBuildConfig) -> list[str]:
    names = ["base", "clip"]
    if cfg.variant in ("pr", "pr+"):
        names += [f"prune-{r}" for r in range(1, cfg.prune_rounds + 1)]
    if cfg.variant == "pr+":
        eps = f"{float(cfg.epsilon):g}"
        names.append(f"prplus-{cfg.mechanism}-{eps}-{cfg.delta if cfg.mechanism == 'gaussian' else 0}")
    return names


def train_model(adapter: Seq2SeqAdapter, cfg: DPBartBuildConfig, train_ids: list[list[int]], work_dir: Path,
                *, progress: bool = True, log=print) -> _State:
    """Run (or resume) the training stages; returns the final state (C, pruned indices, losses)."""
    device = device_for_training()
    ck = _Checkpoints(work_dir, cfg.fingerprint())
    state = _State()
    names = _stage_names(cfg)
    # resume from the latest finished stage
    for i in range(len(names) - 1, -1, -1):
        loaded = ck.load(names[i], adapter)
        if loaded is not None:
            state = loaded
            log(f"resuming after stage {names[i]}")
            break
    done = set(names[: names.index(state.stage) + 1]) if state.stage in names else set()
    base_steps = cfg.steps if cfg.base_steps is None else cfg.base_steps
    for name in names:
        if name in done:
            continue
        t0 = time.time()
        if name == "base":
            if base_steps > 0:
                state.losses["base"] = train_stage(
                    adapter, train_ids, cfg.seq_len, steps=base_steps, clip=TRAIN_CLIP, batch_size=cfg.batch_size,
                    lr=cfg.lr, seed=cfg.seed, desc="base (denoising AE)", progress=progress, device=device,
                    freeze_encoder=cfg.freeze_encoder, cross_lr_mult=cfg.cross_lr_mult, corrupt=cfg.corrupt)
        elif name == "clip":
            stats = estimate_clip(adapter, train_ids, cfg.seq_len, device=device)
            state.clip_stats = stats
            state.clip = float(stats["suggested_clip"]) if cfg.clip == "auto" else float(cfg.clip)
            # round C to 4 significant digits so the manifest is readable; C is public either way
            state.clip = float(f"{state.clip:.4g}")
            log(f"encoder output: mean {stats['mean']:.4f}, std {stats['std']:.4f} → C = {state.clip}")
        elif name.startswith("prune-"):
            r = int(name.split("-")[1])
            state.pruned = prune_round(adapter, state.pruned)
            state.pruned_history.append(list(state.pruned))
            state.losses[name] = train_stage(
                adapter, train_ids, cfg.seq_len, steps=cfg.steps, clip=TRAIN_CLIP, pruned=state.pruned,
                batch_size=cfg.batch_size, lr=cfg.lr, seed=cfg.seed + r,
                desc=f"prune round {r} ({len(state.pruned)} pruned)", progress=progress, device=device,
                freeze_encoder=cfg.freeze_encoder, cross_lr_mult=cfg.cross_lr_mult, corrupt=cfg.corrupt)
        elif name.startswith("prplus"):
            scale = training_noise_scale(cfg, adapter.hidden_size, len(final_pruned(cfg, state)), state.clip)
            state.losses[name] = train_stage(
                adapter, train_ids, cfg.seq_len, steps=cfg.steps, clip=state.clip, pruned=final_pruned(cfg, state),
                noise=TrainNoise(cfg.mechanism, scale), batch_size=cfg.batch_size, lr=cfg.lr, corrupt=0.0,
                seed=cfg.seed + 1000, desc=f"pr+ noisy training (ε={cfg.epsilon:g})", progress=progress,
                device=device, freeze_encoder=cfg.freeze_encoder, cross_lr_mult=cfg.cross_lr_mult)
        state.stage = name
        state.wall[name] = time.time() - t0
        ck.save(name, adapter, state)
    adapter.model.to("cpu").eval()
    return state


def final_pruned(cfg: DPBartBuildConfig, state: _State) -> list[int]:
    """The pruned indices the bundle ships: those of round ``use_round`` (paper: k − 1 of k rounds)."""
    if cfg.variant == "clv" or not state.pruned_history:
        return []
    use = cfg.use_round if cfg.use_round is not None else max(1, cfg.prune_rounds - 1)
    use = min(max(1, use), len(state.pruned_history))
    return list(state.pruned_history[use - 1])


def training_noise_scale(cfg: DPBartBuildConfig, hidden: int, n_pruned: int, clip: float) -> float:
    """σ or b the runtime will use at the target (ε, δ): PR+ trains with exactly that noise."""
    from ldptext.noise import calibrate, effective_dim

    n = effective_dim(cfg.seq_len, hidden, n_pruned)
    return calibrate(cfg.mechanism, cfg.epsilon, cfg.delta, clip=clip, n=n).scale


# ------------------------------------------------------------------------------------------ checks
@torch.no_grad()
def onnx_checks(adapter: Seq2SeqAdapter, graphs: dict[str, Path], qgraphs: dict[str, Path] | None,
                contents: list[list[int]], seq_len: int, clip: float, pruned: list[int], max_len: int) -> dict:
    """PyTorch ↔ ONNX fp32 (and int8) agreement on encoder outputs and on greedy decoding at ε = ∞."""
    from .train import make_batch, privatize_torch

    b = make_batch(adapter, contents, seq_len)
    model = adapter.model.to("cpu").eval()
    z_t = adapter.encode(b["input_ids"], b["attention_mask"])
    z_np = z_t.numpy()
    out: dict = {"n_docs": len(contents)}
    pr = torch.tensor(pruned, dtype=torch.long)
    ref_tokens = greedy_decode_torch(adapter, privatize_torch(z_t, clip, pr), max_len)
    for label, gr in (("fp32", graphs), ("int8", qgraphs)):
        if gr is None:
            continue
        enc = _session(gr["encoder"])
        z_o = enc.run(None, {"input_ids": b["input_ids"].numpy(), "attention_mask": b["attention_mask"].numpy()})[0]
        out[f"{label}_encoder_max_abs_diff"] = float(np.abs(z_o - z_np).max())
        # after clipping (what the decoder actually sees)
        zc_o, zc_t = np.clip(z_o, -clip, clip), np.clip(z_np, -clip, clip)
        out[f"{label}_clipped_max_abs_diff"] = float(np.abs(zc_o - zc_t).max())
        toks = _ort_greedy(gr, privatize_torch(torch.from_numpy(z_o), clip, pr).numpy(), adapter, max_len)
        same = sum(a == r for a, r in zip(toks, ref_tokens))
        out[f"{label}_greedy_identical_fraction"] = same / len(ref_tokens)
    return out


def _session(path):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = torch.get_num_threads()  # same budget as training (shared machines)
    opts.log_severity_level = 3
    return ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])


def _ort_greedy(graphs: dict[str, Path], z: np.ndarray, adapter: Seq2SeqAdapter, max_len: int) -> list[list[int]]:
    from .export import decoder_layout

    init, dec = _session(graphs["decoder_init"]), _session(graphs["decoder"])
    lay = decoder_layout(adapter)
    b = z.shape[0]
    cross = init.run(None, {"z": z.astype(np.float32)})
    past = [np.zeros((b, lay["heads"], 0, lay["head_dim"]), np.float32) for _ in range(2 * lay["n_layers"])]
    names = [i.name for i in dec.get_inputs()]
    tok = np.full((b, 1), adapter.special.decoder_start, np.int64)
    done = np.zeros(b, bool)
    out = [[] for _ in range(b)]
    for _ in range(max_len):
        res = dec.run(None, dict(zip(names, [tok, *past, *cross])))
        nxt, past = res[0].argmax(-1), res[1:]
        for r in range(b):
            if not done[r]:
                if nxt[r] == adapter.special.eos:
                    done[r] = True
                else:
                    out[r].append(int(nxt[r]))
        if done.all():
            break
        tok = np.where(done, adapter.special.eos, nxt).astype(np.int64)[:, None]
    return out


def reconstruction_bleu(adapter: Seq2SeqAdapter, contents: list[list[int]], seq_len: int, clip: float,
                        pruned: list[int], max_len: int) -> float:
    """Corpus BLEU (0–100) of greedy reconstructions at ε = ∞ (clip + prune, no noise) against the
    (truncated) held-out public sentences."""
    from ldptext_precompute.bleu import bleu_tokenize, corpus_bleu

    from .train import make_batch, privatize_torch

    hyps, refs = [], []
    pr = torch.tensor(pruned, dtype=torch.long)
    with torch.no_grad():
        for i in range(0, len(contents), 32):
            part = contents[i:i + 32]
            b = make_batch(adapter, part, seq_len)
            z = privatize_torch(adapter.encode(b["input_ids"], b["attention_mask"]), clip, pr)
            for ref, hyp in zip(part, greedy_decode_torch(adapter, z, max_len)):
                hyps.append(bleu_tokenize(adapter.tokenizer.decode(hyp, skip_special_tokens=True)))
                refs.append(bleu_tokenize(adapter.tokenizer.decode(ref, skip_special_tokens=True)))
    return 100.0 * corpus_bleu(hyps, refs)


# ------------------------------------------------------------------------------------------ bundle
def _versions() -> dict:
    import onnx
    import onnxruntime
    import transformers

    import ldptext

    return {"ldptext": ldptext.__version__, "torch": torch.__version__, "transformers": transformers.__version__,
            "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__}


def build_dpbart_bundle(out: str | Path, cfg: DPBartBuildConfig, *, sign_key=None, passphrase: bytes | None = None,
                        work_dir: str | Path | None = None, adapter: Seq2SeqAdapter | None = None,
                        sentences: list[str] | None = None, progress: bool = True, log=print) -> tuple[Path, dict]:
    """Build (or resume) a DP-BART bundle; returns its path and a summary (wall times, C, BLEU, checks).

    ``sign_key=None`` signs with the local developer key; ``False`` writes an unsigned development
    bundle. ``adapter``/``sentences`` inject a model / public sentences (tests use a tiny random model).
    """
    from ldptext import keys as _keys
    from ldptext.bundle import write_bundle

    from .export import decoder_layout, export_onnx, quantize_int8

    cfg.validate()
    t_start = time.time()
    out = Path(out)
    work = Path(work_dir) if work_dir else out.with_name(out.name + ".work")
    if adapter is None:
        adapter = load_model(cfg.model)
    if sentences is None:
        corpus = load_public_corpus(cfg.public_corpus, cfg.max_sentences)
        sources = corpus.sources
        train_s, eval_s = split_holdout(corpus, cfg.eval_sentences, cfg.seed)
    else:
        sources = {"in-memory": hashlib.sha256("\n".join(sentences).encode()).hexdigest()}
        cut = max(1, min(cfg.eval_sentences, len(sentences) // 5))
        train_s, eval_s = sentences[cut:], sentences[:cut]
    train_ids = tokenize_corpus(adapter, train_s, cfg.seq_len)
    eval_ids = tokenize_corpus(adapter, eval_s, cfg.seq_len)
    torch.manual_seed(cfg.seed)
    state = train_model(adapter, cfg, train_ids, work, progress=progress, log=log)
    pruned = final_pruned(cfg, state)
    max_len = cfg.seq_len
    t_export = time.time()
    with tempfile.TemporaryDirectory(prefix="ldptext-dpbart-") as tmp:
        graphs = export_onnx(adapter, Path(tmp) / "fp32", cfg.seq_len)
        qgraphs = None
        if cfg.quantize == "int8":
            qdir = Path(tmp) / "int8"
            qdir.mkdir()
            qgraphs = {k: quantize_int8(v, qdir / v.name, keep_ffn_output_fp32=(k == "encoder"))
                       for k, v in graphs.items()}
        check_docs = eval_ids[: min(16, len(eval_ids))]
        checks = onnx_checks(adapter, graphs, qgraphs, check_docs, cfg.seq_len, state.clip, pruned, max_len)
        bleu = reconstruction_bleu(adapter, eval_ids, cfg.seq_len, state.clip, pruned, max_len)
        log(f"reconstruction BLEU at epsilon=inf (PyTorch fp32, {len(eval_ids)} held-out sentences): {bleu:.1f}")
        ship = qgraphs or graphs
        blobs = {f"{k}.onnx": Path(v).read_bytes() for k, v in ship.items()}
        fp32_size = sum(Path(v).stat().st_size for v in graphs.values())
    blobs["tokenizer.json"] = adapter.tokenizer_json.encode("utf-8")
    lay = decoder_layout(adapter)
    sp = adapter.special
    dp = {
        "variant": cfg.variant, "seq_len": cfg.seq_len, "hidden": adapter.hidden_size, "clip": state.clip,
        "max_output_tokens": max_len, "n_layers": lay["n_layers"], "heads": lay["heads"],
        "head_dim": lay["head_dim"], "family": adapter.family, "quantization": cfg.quantize or "none",
        "special": {"pad": sp.pad, "bos": sp.bos, "eos": sp.eos, "decoder_start": sp.decoder_start},
        "n_pruned": len(pruned),
        "trained_for": ({"epsilon": float(cfg.epsilon), "delta": cfg.delta, "mechanism": cfg.mechanism}
                        if cfg.variant == "pr+" else None),
    }
    summary = {
        "clip": state.clip, "clip_stats": state.clip_stats, "n_pruned": len(pruned),
        "pruned_per_round": [len(p) for p in state.pruned_history], "losses": state.losses,
        "stage_wall_s": state.wall, "reconstruction_bleu_eps_inf": bleu, "onnx_checks": checks,
        "fp32_graph_bytes": fp32_size, "shipped_graph_bytes": sum(len(v) for k, v in blobs.items() if k.endswith(".onnx")),
        "train_sentences": len(train_ids), "eval_sentences": len(eval_ids),
        "device": str(device_for_training()), "export_wall_s": time.time() - t_export,
    }
    manifest = {
        "dpbart": dp,
        "sources": {"model": adapter.source, "public_corpus": cfg.public_corpus, "files": sources},
        "build": {"tool": "ldptext precompute dpbart", "versions": _versions(),
                  "config": {k: v for k, v in asdict(cfg).items()}},
        "provenance": summary,
        "numeric_tolerance": {"onnx_vs_torch": checks},
    }
    manifest = _jsonable(manifest)
    key = _keys.build_signing_key(sign_key)
    path = write_bundle(out, mechanism="dpbart", arrays={"pruned": np.asarray(pruned, dtype=np.int64)},
                        manifest=manifest, blobs=blobs, sign_key=key, passphrase=passphrase)
    summary["total_wall_s"] = time.time() - t_start
    summary["bundle_bytes"] = path.stat().st_size
    return path, summary


def _jsonable(obj):
    """JSON-safe copy: non-finite floats (e.g. the loss of a 0-step stage) become None."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def remove_work_dir(out: str | Path) -> None:
    """Delete the stage checkpoints of a finished build."""
    shutil.rmtree(Path(out).with_name(Path(out).name + ".work"), ignore_errors=True)
