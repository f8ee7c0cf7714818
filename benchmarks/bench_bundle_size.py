"""SanText+ bundle size: the compact tables against the same tables stored wide, and the head size.

For a GloVe vocabulary (default the 50,000 most frequent words, SanText+, p = 0.3) and each ε, the
bundle is built with head size K = 64 (the baseline: the default until 2026-11-25) and K = 32 (the
default since), both with the default tail clusters. Each bundle is also written a second
time with the same tables in the wide dtypes every bundle used before the compact format (int32 head
ids, uint16 alias slots, float64 exponents), so the saving of the format is measured on identical
content. Sampling speed: ``Sanitizer.sample_ids`` (libldptext when built) over the token ids of the
300 English news documents shipped with gensim (``lee_background.cor``, docs/assets.md), repeated to
``--tokens`` ids; the best of ``--repeats`` runs, both head sizes measured in the same run.

Columns: ε; K; the exponents' stored dtype (float32 only where rounding moves no exponent by more
than 1e-12, see ``ldptext_precompute.santext.build.GAMMA32_MAX_ROUNDING``); compact MiB; wide MiB;
compact / wide; compact / (wide, first K), the saving against the bundle this vocabulary had before;
sampling µs per token and its ratio to the first K (> 1: slower).

Usage: python benchmarks/bench_bundle_size.py [--vocab-size 50000] [--epsilons 1,3,10,15]
       [--head-sizes 64,32] [--tokens 200000] [--repeats 5] [--workdir DIR]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_santext import english_documents  # noqa: E402

WIDE = {"head_ids": np.int32, "alias_index": np.uint16, "accept_gamma": np.float64}


def write_wide(san, out: Path) -> Path:
    """The bundle's own tables, manifest and blobs, with the three compact arrays stored wide."""
    from ldptext import bundle as B
    from ldptext import keys
    arrays = san.tables.stored_arrays()
    for name, dtype in WIDE.items():
        arrays[name] = getattr(san.tables, name).astype(dtype)  # the tables hold the exact values
    manifest = {k: v for k, v in san.manifest.items() if k not in ("arrays", "format", "format_version",
                                                                 "mechanism")}
    blobs = {n: san._bundle.blob(n) for n in ("tokenizer.json", "vocab.json")}
    return B.write_bundle(out, mechanism=san.mechanism, arrays=arrays, manifest=manifest, blobs=blobs,
                          sign_key=keys.build_signing_key(None))


def sampling_us(san, ids: np.ndarray, repeats: int) -> float:
    san.sample_ids(ids[:2000])  # warm up
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        san.sample_ids(ids)
        best = min(best, (time.perf_counter() - t) / ids.size)
    return best * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab-size", type=int, default=50_000, help="GloVe words")
    ap.add_argument("--epsilons", default="1,3,10,15", help="comma-separated ε values")
    ap.add_argument("--head-sizes", default="64,32", help="comma-separated K values (the first is the baseline)")
    ap.add_argument("--tokens", type=int, default=200_000, help="ids per sampling measurement")
    ap.add_argument("--repeats", type=int, default=5, help="runs per measurement (the best counts)")
    ap.add_argument("--workdir", default=str(Path.home() / ".cache" / "ldptext" / "bench-bundle-size"),
                    help="bundles and the neighbour cache (reused between runs)")
    args = ap.parse_args()

    from ldptext import keys
    from ldptext.santext import Sanitizer
    from ldptext_precompute.santext.build import build_santext_bundle
    from ldptext_precompute.santext.embeddings import load_embeddings

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    trusted = [keys.developer_key().public_key()]  # this machine's developer key, for this run only
    emb = load_embeddings("glove-6b-50d", args.vocab_size)
    docs = english_documents()
    head_sizes = [int(k) for k in args.head_sizes.split(",")]
    load_before = os.getloadavg()
    rows = []
    for eps in (float(e) for e in args.epsilons.split(",")):
        base_wide, base_us = None, None
        for k in head_sizes:
            path = work / f"glove{args.vocab_size}-k{k}-{eps:g}.ldpb"
            build_santext_bundle(path, embeddings="glove-6b-50d", vocab_size=args.vocab_size, epsilon=eps,
                                 mechanism="santext+", p=0.3, head_size=k, cache_dir=work / "neighbours",
                                 progress=False, loaded=emb)
            with Sanitizer.load(path, trusted_keys=trusted) as san:
                wide = write_wide(san, path.with_suffix(".wide.ldpb"))
                ids = np.resize(np.concatenate([san.tokenize(d) for d in docs]), args.tokens).astype(np.int32)
                us = sampling_us(san, ids, args.repeats)
                gamma = str(san._bundle.array("accept_gamma").dtype)
                backend = san.backend
            size, wide_size = path.stat().st_size, wide.stat().st_size
            wide.unlink()
            if base_wide is None:
                base_wide, base_us = wide_size, us
            rows.append((eps, k, gamma, size, wide_size, base_wide, us, base_us))
    load_after = os.getloadavg()
    print(f"\n## SanText+ bundle size, GloVe {args.vocab_size:,} words (p = 0.3)\n")
    print(f"| ε | K | exponents | compact MiB | wide MiB | compact / wide | compact / wide K={head_sizes[0]} | "
          f"sampling µs/token | time / K={head_sizes[0]} |")
    print("|---|---|---|---|---|---|---|---|---|")
    for eps, k, gamma, size, wide_size, base_wide, us, base_us in rows:
        print(f"| {eps:g} | {k} | {gamma} | {size / 2**20:.1f} | {wide_size / 2**20:.1f} | "
              f"{size / wide_size:.0%} | {size / base_wide:.0%} | {us:.3f} | {us / base_us:.2f}× |")
    print(f"\nSampling: {args.tokens:,} ids of the Lee news documents, best of {args.repeats}; backend "
          f"{backend}. Machine: {os.cpu_count()} CPUs, load average {load_before[0]:.2f} before, "
          f"{load_after[0]:.2f} after.")
    return 0


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    sys.exit(main())
