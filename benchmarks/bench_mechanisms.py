"""The comparison mechanisms (TEM, CusText, CusText+, CMP, Mahalanobis) against faithful
reimplementations of their public implementations' approach, side by side in one run.

Reference ("public"): written here from the published approach of the libraries users compare with
(pyPANTERA, mldp, 1-Diffractor and the papers' own code, as their documentation describes it), not
copied: numpy's global generator (``np.random``: not cryptographic), the embedding matrix in memory,
and per token:

* **TEM**: distances to every word (``np.linalg.norm(E - E[x], axis=1)``), the set L_x = {d ≤ γ},
  scores −d plus the ⊥ candidate −γ + 2·ln|L̄_x|/ε, Gumbel noise of scale 2/ε on each
  (``np.random.gumbel``), argmax; ⊥ gives ``np.random.choice`` over L̄_x;
* **CusText(+)**: a precomputed dictionary token → (its K output ids, their softmax(ε·u/2)
  probabilities), then ``np.random.choice(K, p=row)``; CusText+ looks stop words up first;
* **CMP / Mahalanobis**: noise ``np.random.gamma(m, 1/ε)`` × a normalised ``np.random.normal`` vector
  (× Σ_λ^{1/2}), then the brute-force nearest word ``np.argmin(np.linalg.norm(E - v, axis=1))``.

Ours: the signed bundles of ``ldptext precompute tem|custext|cmp|mahalanobis`` and their runtimes'
``sample_ids`` (exact SanText engine in C for TEM / CusText, CSPRNG noise + faiss for CMP /
Mahalanobis; ``--index hnsw`` for the approximate index).

Same vocabulary (GloVe 6B-50d, ``--vocab-size`` words), same ε, same K / β / λ, same token stream:
the 300 English news documents shipped with gensim (``lee_background.cor``), tokenized by the
bundles' tokenizer. Sizes: our bundle file against the reference's in-memory artifacts (the float32
embedding matrix; for CusText the K ids and float64 probabilities per token, as numpy arrays — its
Python dictionary is larger still). Each time is the best of ``--repeats`` runs; single-threaded
numpy and faiss (OMP_NUM_THREADS=1).

Usage: python benchmarks/bench_mechanisms.py [--vocab-size 20000] [--epsilon 3] [--tokens 20000]
       [--ref-tokens 2000] [--repeats 3] [--workdir DIR] [--index flat|hnsw]
"""
from __future__ import annotations

import argparse
import math
import os
import sysconfig
import tempfile
import time
import warnings
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402


def corpus_ids(runtime, limit: int) -> np.ndarray:
    """Token ids of gensim's 300 news documents (valid inputs only), repeated up to ``limit``."""
    path = Path(sysconfig.get_paths()["purelib"]) / "gensim/test/test_data/lee_background.cor"
    docs = path.read_text(encoding="utf-8", errors="replace").splitlines()
    ids = np.concatenate(runtime.tokenizer.encode_batch(docs)).astype(np.int64)
    ids = ids[np.asarray(runtime.valid_input)[ids]]
    return np.resize(ids, limit)


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


# -- the public approach, reimplemented ---------------------------------------------------------

def public_tem(emb: np.ndarray, outputs: np.ndarray, eps: float, gamma: float, xs: np.ndarray) -> np.ndarray:
    out_emb = emb[outputs]
    res = np.empty(xs.size, dtype=np.int64)
    for i, x in enumerate(xs):
        d = np.linalg.norm(out_emb - emb[x], axis=1)
        inside = np.flatnonzero(d <= gamma)
        outside = d.size - inside.size
        scores = -d[inside]
        if outside:
            scores = np.append(scores, -gamma + 2.0 * math.log(outside) / eps)
        noisy = scores + np.random.gumbel(scale=2.0 / eps, size=scores.size)
        j = int(np.argmax(noisy))
        if j < inside.size:
            res[i] = outputs[inside[j]]
        else:
            res[i] = outputs[np.random.choice(np.flatnonzero(d > gamma))]
    return res


def public_custext_tables(runtime) -> tuple[np.ndarray, np.ndarray]:
    """Per token: its output ids and probabilities (what the public code keeps in a dictionary)."""
    rows = np.arange(runtime.n_rows)
    p = runtime.probabilities(rows)
    k = int((p > 0).sum(axis=1).max())
    ids = np.argsort(-p, axis=1)[:, :k]
    return ids, np.take_along_axis(p, ids, axis=1)


def public_custext(ids: np.ndarray, probs: np.ndarray, xs: np.ndarray, keep: np.ndarray) -> np.ndarray:
    res = np.empty(xs.size, dtype=np.int64)
    for i, x in enumerate(xs):
        if keep[x]:
            res[i] = x
            continue
        row = probs[x]
        res[i] = ids[x, np.random.choice(row.size, p=row / row.sum())]
    return res


def public_cmp(emb: np.ndarray, outputs: np.ndarray, eps: float, xs: np.ndarray,
               transform: np.ndarray | None = None) -> np.ndarray:
    out_emb = emb[outputs].astype(np.float32)
    m = emb.shape[1]
    res = np.empty(xs.size, dtype=np.int64)
    for i, x in enumerate(xs):
        n = np.random.normal(size=m)
        z = n / np.linalg.norm(n) * np.random.gamma(m, 1.0 / eps)
        if transform is not None:
            z = transform @ z
        v = (emb[x] + z).astype(np.float32)
        res[i] = outputs[int(np.argmin(np.linalg.norm(out_emb - v, axis=1)))]
    return res


# -- the run ------------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab-size", type=int, default=20_000)
    ap.add_argument("--epsilon", type=float, default=3.0)
    ap.add_argument("--tokens", type=int, default=20_000, help="tokens timed for ours")
    ap.add_argument("--ref-tokens", type=int, default=2_000, help="tokens timed for the reference")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--index", choices=["flat", "hnsw"], default="flat")
    ap.add_argument("--workdir", default=None, help="bundles and neighbour cache (default: a temp dir)")
    args = ap.parse_args()

    os.environ.setdefault("LDPTEXT_DEV", "1")
    import faiss
    faiss.omp_set_num_threads(1)
    from ldptext.cmp import CMPSanitizer
    from ldptext.custext import CusTextSanitizer
    from ldptext.tem import TEMSanitizer
    from ldptext_precompute.cmp.build import build_cmp_bundle
    from ldptext_precompute.custext.build import build_custext_bundle
    from ldptext_precompute.santext.embeddings import load_embeddings
    from ldptext_precompute.tem.build import build_tem_bundle

    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-mech-"))
    work.mkdir(parents=True, exist_ok=True)
    eps, v = args.epsilon, args.vocab_size
    emb = load_embeddings("glove-6b-50d", v)
    builds = {
        "tem": (TEMSanitizer, lambda p: build_tem_bundle(p, loaded=emb, epsilon=eps, beta=0.001,
                                                          cache_dir=work / "cache")),
        "custext": (CusTextSanitizer, lambda p: build_custext_bundle(p, loaded=emb, epsilon=eps, k=20)),
        "custext+": (CusTextSanitizer, lambda p: build_custext_bundle(p, loaded=emb, epsilon=eps, k=20,
                                                                       mechanism="custext+")),
        "cmp": (CMPSanitizer, lambda p: build_cmp_bundle(p, loaded=emb, epsilon=eps, index=args.index)),
        "mahalanobis": (CMPSanitizer, lambda p: build_cmp_bundle(p, loaded=emb, epsilon=eps, lam=0.5,
                                                                 mechanism="mahalanobis", index=args.index)),
    }
    rows = []
    np.random.seed(0)  # the reference's generator (numpy's global one, as the public code uses)
    for name, (cls, build) in builds.items():
        path = work / f"{name}-V{v}-eps{eps:g}-{args.index}.ldpb"
        t = time.perf_counter()
        if not path.exists():
            build(path)
        build_s = time.perf_counter() - t
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rt = cls.load(path)
        load_ms = (time.perf_counter() - t) * 1e3
        xs = corpus_ids(rt, args.tokens)
        ours = best_of(lambda: rt.sample_ids(xs), args.repeats) / xs.size
        ref_xs = xs[:args.ref_tokens]
        e = np.asarray(rt.embeddings if hasattr(rt, "embeddings") and not callable(rt.embeddings)
                       else rt.tables.metric_embedding())
        outputs = np.asarray(rt.outputs if hasattr(rt, "outputs") else rt.tables.outputs, dtype=np.int64)
        if name == "tem":
            ref = best_of(lambda: public_tem(e, outputs, eps, rt.gamma, ref_xs), args.repeats)
            ref_bytes = e.astype(np.float32).nbytes
        elif name.startswith("custext"):
            ids, probs = public_custext_tables(rt)
            keep = np.asarray(rt.tables.keep_row, bool)
            ref = best_of(lambda: public_custext(ids, probs, ref_xs, keep), args.repeats)
            ref_bytes = ids.astype(np.int32).nbytes + probs.nbytes
        else:
            ref = best_of(lambda: public_cmp(e, outputs, eps, ref_xs, rt.noise_transform), args.repeats)
            ref_bytes = e.astype(np.float32).nbytes
        ref /= ref_xs.size
        size = path.stat().st_size
        rows.append((name, 1 / ours, 1 / ref, ref / ours, size / 2**20, ref_bytes / 2**20, size / ref_bytes,
                     load_ms, build_s))
        print(f"[bench] {name}: ours {1 / ours:,.0f} tokens/s, reference {1 / ref:,.0f} tokens/s", flush=True)

    print(f"\nGloVe 6B-50d, {v:,} words, eps = {eps:g}, index {args.index}; ours {args.tokens:,} tokens, "
          f"reference {args.ref_tokens:,}; best of {args.repeats}; load average {os.getloadavg()[0]:.2f}\n")
    print("| mechanism | ours tokens/s | reference tokens/s | speed-up | bundle MiB | reference MiB | "
          "size ratio | load ms | build s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]:,.0f} | {r[2]:,.0f} | {r[3]:.1f}x | {r[4]:.1f} | {r[5]:.1f} | {r[6]:.2f} | "
              f"{r[7]:.0f} | {r[8]:.1f} |")


if __name__ == "__main__":
    main()
