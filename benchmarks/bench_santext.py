"""SanText performance against the reference approach, measured in one run on this machine.

Reference (the public SanText code of Yue et al. 2021): a dense |V|×|V| softmax matrix and
``np.random.choice(len(row), p=row)`` per token. Ours: the bundle's alias + exact-rejection sampler
(C extension), single thread. Both use the same 30,522-token MiniLM WordPiece vocabulary, the same
ε and the same English text (news documents shipped with gensim, ASSETS.md).

The dense reference matrix is built only for the rows the text uses (a full one is 3.5 GiB); its
per-token sampling cost does not depend on how many rows exist.

Usage: python benchmarks/bench_santext.py [--epsilons 1,3,10] [--tokens 200000] [--glove100k]
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

os.environ.setdefault("OMP_NUM_THREADS", "1")


def english_documents(limit: int = 300) -> list[str]:
    import sysconfig
    path = Path(sysconfig.get_paths()["purelib"]) / "gensim/test/test_data/lee_background.cor"
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()][:limit]


def reference_rows(emb: np.ndarray, rows: np.ndarray, outputs: np.ndarray, eps: float):
    """Dense softmax rows as the reference code computes them (normalised in float64, as
    ``np.random.choice`` insists on a sum of 1 to within 1e-8)."""
    e = emb.astype(np.float32)
    out = e[outputs]
    d = np.sqrt(np.maximum(((e[rows] ** 2).sum(1)[:, None] + (out ** 2).sum(1)[None, :]
                            - 2 * e[rows] @ out.T), 0))
    logits = -eps * d / 2
    p = np.exp((logits - logits.max(1, keepdims=True)).astype(np.float64))
    return p / p.sum(1, keepdims=True)


def bench_sampling(san, ids: np.ndarray, eps: float, n_ref: int) -> dict:
    # dense rows only for the tokens the reference samples (its per-token cost does not depend on
    # how many rows exist; a full matrix would be 3.5 GiB)
    uniq, ref_ids = np.unique(ids[:n_ref], return_inverse=True)
    dense = reference_rows(np.asarray(san.embeddings), uniq, san.outputs, eps)
    np.random.seed(0)
    t = time.perf_counter()
    for r in ref_ids:
        san.outputs[np.random.choice(dense.shape[1], p=dense[r])]
    ref_per_tok = (time.perf_counter() - t) / ref_ids.size
    san.sample_ids(ids[:1000])  # warm up
    t = time.perf_counter()
    san.sample_ids(ids)
    ours_per_tok = (time.perf_counter() - t) / ids.size
    return {"ref_us": ref_per_tok * 1e6, "ours_us": ours_per_tok * 1e6,
            "speedup": ref_per_tok / ours_per_tok}


def bench_end_to_end(san, docs: list[str], eps: float, n_docs_ref: int) -> dict:
    uniq_docs = docs
    ids_all = san.tokenizer.encode_batch(uniq_docs)
    uniq = np.unique(np.concatenate(ids_all[:n_docs_ref]))
    dense = reference_rows(np.asarray(san.embeddings), uniq, san.outputs, eps)
    row_of = {int(t): i for i, t in enumerate(uniq)}
    np.random.seed(0)
    tok = san.tokenizer
    t = time.perf_counter()
    for doc in uniq_docs[:n_docs_ref]:
        ids = tok.encode(doc)
        out = [san.outputs[np.random.choice(dense.shape[1], p=dense[row_of[int(i)]])]
               for i in ids]
        tok.decode(np.asarray(out))
    n_tok_ref = sum(e.size for e in ids_all[:n_docs_ref])
    ref = (time.perf_counter() - t) / n_tok_ref
    san.sanitize_batch(uniq_docs[:5])
    t = time.perf_counter()
    reps = 5
    for _ in range(reps):
        san.sanitize_batch(uniq_docs)
    ours = (time.perf_counter() - t) / (reps * sum(e.size for e in ids_all))
    return {"ref_us": ref * 1e6, "ours_us": ours * 1e6, "speedup": ref / ours}


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epsilons", default="1,3,10")
    ap.add_argument("--tokens", type=int, default=200_000)
    ap.add_argument("--ref-tokens", type=int, default=3000)
    ap.add_argument("--glove100k", action="store_true", help="also build a 100k-word GloVe bundle")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()

    from ldptext_precompute.santext.build import build_santext_bundle
    from ldptext.santext import Sanitizer

    work = Path(args.workdir or tempfile.mkdtemp(prefix="ldptext-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    cache = work / "neighbours"
    docs = english_documents()
    rows_out = []
    size_rows = []
    for i, eps in enumerate(float(e) for e in args.epsilons.split(",")):
        path = work / f"minilm-santext-{eps:g}.ldpb"
        t = time.perf_counter()
        build_santext_bundle(path, embeddings="minilm-wordpiece", epsilon=eps,
                             mechanism="santext", cache_dir=cache, progress=False)
        build_s = time.perf_counter() - t
        t = time.perf_counter()
        san = Sanitizer.load(path)
        load_ms = (time.perf_counter() - t) * 1000
        if i == 0:  # first build includes the ε-independent neighbour search, unless cached
            first_build = build_s
            first_backend = san.manifest["build"]["backend"]
        ids = np.concatenate(san.tokenizer.encode_batch(docs))
        ids = np.resize(ids, args.tokens).astype(np.int32)
        s = bench_sampling(san, ids, eps, args.ref_tokens)
        e2e = bench_end_to_end(san, docs, eps, 20)
        rows_out.append((eps, s, e2e, build_s, load_ms))
        v = len(san.vocab)
        size_rows.append((eps, path.stat().st_size, v * v * 4))

    print("\n## SanText sampling, 30,522-token MiniLM WordPiece vocabulary, single thread\n")
    print("| ε | reference µs/token | ours µs/token | speed-up | end-to-end ref µs/token | "
          "end-to-end ours µs/token | speed-up | build s | load ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for eps, s, e2e, build_s, load_ms in rows_out:
        print(f"| {eps:g} | {s['ref_us']:.1f} | {s['ours_us']:.3f} | {s['speedup']:.0f}× | "
              f"{e2e['ref_us']:.1f} | {e2e['ours_us']:.3f} | {e2e['speedup']:.0f}× | "
              f"{build_s:.1f} | {load_ms:.1f} |")
    print(f"\nfirst build: {first_build:.1f} s (neighbour search: {first_backend}); later ε values "
          "reuse the cached neighbour structure")
    print("\n| ε | bundle MiB | dense float32 matrix MiB | ratio |")
    print("|---|---|---|---|")
    for eps, size, dense in size_rows:
        print(f"| {eps:g} | {size / 2**20:.1f} | {dense / 2**20:.0f} | 1/{dense / size:.0f} |")

    if args.glove100k:
        path = work / "glove100k.ldpb"
        t = time.perf_counter()
        build_santext_bundle(path, embeddings="glove-6b-50d", vocab_size=100_000, epsilon=3.0,
                             mechanism="santext+", progress=False)
        secs = time.perf_counter() - t
        v = 100_001
        print(f"\nGloVe 100,000 words, SanText+: built in {secs:.1f} s, bundle "
              f"{path.stat().st_size / 2**20:.0f} MiB (dense float32 would be "
              f"{v * v * 4 / 2**30:.1f} GiB), peak RSS {peak_rss_mib():.0f} MiB")
    print(f"\npeak RSS of this run: {peak_rss_mib():.0f} MiB")
    return 0


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    sys.exit(main())
