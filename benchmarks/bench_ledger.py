"""Ledger charge cost against the number of recorded entries.

Usage: ``python benchmarks/bench_ledger.py [--entries 0,100,1000,3000] [--repeat 50]``

For each size N, a fresh ledger receives N charges, then ``--repeat`` more charges are timed; the
table shows the median milliseconds per charge and the ledger file's size. To measure another
version of the SDK, put its ``sdk`` directory first on ``PYTHONPATH``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from ldptext.ledger import Ledger


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--entries", default="0,100,1000,3000")
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args()
    key = os.urandom(32)
    print(f"{'entries':>8} {'ms/charge (median)':>19} {'file bytes':>11}")
    for n in (int(x) for x in args.entries.split(",")):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "bench.ledger"
            ledger = Ledger(path, budget=1e9, key=key)
            for _ in range(n):
                ledger.charge(0.1, label="fill")
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                ledger.charge(0.1, label="timed")
                times.append(time.perf_counter() - t0)
            print(f"{n:>8} {1000 * statistics.median(times):>19.2f} {path.stat().st_size:>11}")


if __name__ == "__main__":
    main()
