"""DP-BART benchmark: int8 ONNX runtime (``ldptext.Rewriter``) vs the same model in PyTorch fp32 eager,
same decoding settings (greedy or beam 1, fixed max length, clip + prune + the same discrete noise),
plus bundle size vs fp32 and reconstruction BLEU at ε = ∞. Prints a table. One run, same machine.

    ldptext precompute dpbart ... --keep-work --out minilm.ldpb
    python benchmarks/bench_dpbart.py --bundle minilm.ldpb --checkpoint-dir minilm.ldpb.work \
        [--model minilm-bert2bert] [--docs 64] [--batch 8] [--threads 1] [--epsilon 500 --delta 1e-5]

``--checkpoint-dir`` is the precompute work directory (``OUT.work``): the PyTorch side loads the
weights of the stage the bundle was exported from (the one with the bundle's pruned neurons), so both
sides run the same trained model.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path


def _exported_checkpoint(work: Path, pruned) -> Path:
    """The stage checkpoint the bundle was exported from: the newest whose pruned neurons are the
    bundle's (a PR run exports the best pruning round, not necessarily the last)."""
    stages = sorted(work.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    if not stages:
        raise SystemExit(f"no stage checkpoint in {work}")
    want = sorted(int(i) for i in pruned)
    for stage in stages:
        state = json.loads(stage.read_text()).get("state", {})
        if sorted(int(i) for i in state.get("pruned", [])) == want:
            return stage.with_suffix(".pt")
    raise SystemExit(f"no stage checkpoint in {work} has the bundle's {len(want)} pruned neurons")


def torch_greedy_with_cache(adapter, z, max_len: int) -> list[list[int]]:
    """PyTorch fp32 eager greedy decoding with the model's own key/value cache (fair baseline).

    The step function runs the model; the loop is the runtime's (``ldptext.decoding.greedy``).
    """
    import torch
    from transformers.modeling_outputs import BaseModelOutput

    from ldptext.decoding import greedy

    enc = BaseModelOutput(last_hidden_state=z)
    past = None

    def step(tokens):
        nonlocal past
        res = adapter.model(encoder_outputs=enc, attention_mask=None,
                            decoder_input_ids=torch.from_numpy(tokens)[:, None], past_key_values=past,
                            use_cache=True, return_dict=True)
        past = res.past_key_values
        return res.logits[:, -1].numpy()

    return greedy(step, z.shape[0], adapter.special.decoder_start, adapter.special.eos, max_len)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--checkpoint-dir", required=True)
    ap.add_argument("--model", default="minilm-bert2bert")
    ap.add_argument("--public-corpus", default=None,
                    help="held-out sentences from this corpus (default: the one the bundle was trained on)")
    ap.add_argument("--docs", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--epsilon", type=float, default=500.0)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--json", default=None, help="also write the numbers here")
    args = ap.parse_args(argv)

    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    from ldptext.bundle import read_bundle
    from ldptext.dpbart import Rewriter
    from ldptext.noise import calibrate, privatize
    from ldptext.rng import Generator
    from ldptext_precompute.bleu import bleu_tokenize, corpus_bleu
    from ldptext_precompute.dpbart.data import load_public_corpus, split_holdout
    from ldptext_precompute.dpbart.model import load_model

    from ldptext import keys

    warnings.simplefilter("ignore")
    # a bundle built here is signed with this machine's developer key: trusted for this run only
    trusted = [keys.developer_key().public_key()]
    b = read_bundle(args.bundle, trusted_keys=trusted, allow_unsigned=True)
    seed = b.manifest["build"]["config"].get("seed", 0)
    corpus = load_public_corpus(args.public_corpus or b.manifest["build"]["config"].get("public_corpus",
                                                                                     "wiki-sample"))
    _, held_out = split_holdout(corpus, b.manifest["build"]["config"].get("eval_sentences", 200), seed)
    rw = Rewriter.load(args.bundle, trusted_keys=trusted, allow_unsigned=True, threads=args.threads)
    cap = rw.config.capacity
    # documents that fit in one release, so both sides do exactly the same work
    docs = [s for s in held_out if len(rw.tokenizer.encode(s)) <= cap][: args.docs]
    if len(docs) < args.docs:
        docs += [" ".join(s.split()[:8]) for s in held_out[: args.docs - len(docs)]]

    adapter = load_model(args.model)
    adapter.model.load_state_dict(torch.load(_exported_checkpoint(Path(args.checkpoint_dir), rw.pruned),
                                             map_location="cpu", weights_only=True))
    adapter.model.eval()
    pruned = np.asarray(rw.pruned)
    calib = calibrate("gaussian", args.epsilon, args.delta, clip=rw.clip, n=rw.n)
    calib_inf = calibrate("gaussian", math.inf, None, clip=rw.clip, n=rw.n)
    gen = Generator()

    def run_onnx(cal_eps, cal_delta):
        t = time.perf_counter()
        outs = []
        for i in range(0, len(docs), args.batch):
            # ε = ∞ (the reconstruction row) is evaluation only: the benchmark opts in explicitly
            outs += [r.text for r in rw.rewrite_batch(docs[i:i + args.batch], epsilon=cal_eps, delta=cal_delta,
                                                      allow_infinite_epsilon=True)]
        return time.perf_counter() - t, outs

    def run_torch(cal):
        t = time.perf_counter()
        outs = []
        with torch.no_grad():
            for i in range(0, len(docs), args.batch):
                part = docs[i:i + args.batch]
                ids, mask = rw.encoder_inputs([adapter.tokenizer.encode(s, add_special_tokens=False).ids[:cap]
                                               for s in part])
                z = adapter.encode(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()
                zn = torch.from_numpy(privatize(z, cal, gen, pruned=pruned))
                toks = torch_greedy_with_cache(adapter, zn, rw.max_output_tokens)
                outs += [adapter.tokenizer.decode(s, skip_special_tokens=True) for s in toks]
        return time.perf_counter() - t, outs

    run_onnx(args.epsilon, args.delta)  # warm-up (session initialisation, allocator)
    run_torch(calib)
    t_onnx, _ = run_onnx(args.epsilon, args.delta)
    t_torch, _ = run_torch(calib)
    t_onnx_inf, onnx_inf = run_onnx(math.inf, None)
    t_torch_inf, torch_inf = run_torch(calib_inf)

    def bleu(outs):
        return 100 * corpus_bleu([bleu_tokenize(o) for o in outs],
                                 [bleu_tokenize(adapter.tokenizer.decode(
                                     adapter.tokenizer.encode(s, add_special_tokens=False).ids[:cap],
                                     skip_special_tokens=True)) for s in docs])

    prov = b.manifest["provenance"]
    tok_bytes = len(b.blob("tokenizer.json"))
    bundle_bytes = Path(args.bundle).stat().st_size
    fp32_bundle_est = prov["fp32_graph_bytes"] + tok_bytes + (bundle_bytes - prov["shipped_graph_bytes"] - tok_bytes)
    res = {
        "docs": len(docs), "batch": args.batch, "threads": args.threads, "epsilon": args.epsilon,
        "delta": args.delta, "seq_len": rw.seq_len, "n": rw.n, "clip": rw.clip, "n_pruned": len(pruned),
        "onnx_int8_docs_per_s": len(docs) / t_onnx, "torch_fp32_docs_per_s": len(docs) / t_torch,
        "speedup": t_torch / t_onnx, "speedup_eps_inf": t_torch_inf / t_onnx_inf,
        "bundle_bytes": bundle_bytes, "fp32_bundle_bytes_est": fp32_bundle_est,
        "bundle_fraction_of_fp32": bundle_bytes / fp32_bundle_est,
        "bleu_eps_inf_onnx_int8": bleu(onnx_inf), "bleu_eps_inf_torch_fp32": bleu(torch_inf),
        "greedy_identical_eps_inf": sum(a == c for a, c in zip(onnx_inf, torch_inf)) / len(docs),
        "precompute_bleu_eps_inf_torch": prov.get("reconstruction_bleu_eps_inf"),
        "examples_eps_inf": list(zip(docs[:3], onnx_inf[:3])),
    }
    rows = [
        ("docs x batch x threads", f"{res['docs']} x {res['batch']} x {res['threads']}"),
        ("L, n, C, |P|", f"{res['seq_len']}, {res['n']}, {res['clip']}, {res['n_pruned']}"),
        (f"int8 ONNX rewrite, eps={args.epsilon:g} (docs/s)", f"{res['onnx_int8_docs_per_s']:.2f}"),
        (f"PyTorch fp32 eager, eps={args.epsilon:g} (docs/s)", f"{res['torch_fp32_docs_per_s']:.2f}"),
        ("speed-up (target >= 3x)", f"{res['speedup']:.2f}x"),
        ("speed-up at eps=inf", f"{res['speedup_eps_inf']:.2f}x"),
        ("bundle size (MiB)", f"{bundle_bytes / 2**20:.1f}"),
        ("fp32 bundle size, est. (MiB)", f"{fp32_bundle_est / 2**20:.1f}"),
        ("bundle / fp32 (target <= 35 %)", f"{100 * res['bundle_fraction_of_fp32']:.1f} %"),
        ("BLEU eps=inf, int8 ONNX", f"{res['bleu_eps_inf_onnx_int8']:.1f}"),
        ("BLEU eps=inf, PyTorch fp32", f"{res['bleu_eps_inf_torch_fp32']:.1f}"),
        ("identical outputs int8 vs fp32 (eps=inf)", f"{100 * res['greedy_identical_eps_inf']:.0f} %"),
    ]
    w = max(len(r[0]) for r in rows)
    print("\n".join(f"{k:<{w}}  {v}" for k, v in rows))
    for src, out in res["examples_eps_inf"]:
        print(f"  in : {src}\n  out: {out}")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
