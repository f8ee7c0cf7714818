"""The runs behind one report: the wall time of every run of the same sweep into the same output folder.

A sweep that is interrupted (Ctrl-C) and resumed is several runs; the report states the time of all of them
together and this run's own. Each run, finished or stopped after keeping some checkpoints, is recorded in
``OUT/checkpoints/runs.json`` with its start (UTC) and its wall time. The total is the length of the union of
the runs' intervals: the sum of their own times when they ran one after another (the time between runs is
not counted), and parallel shards (``--shard``) counted once. Only runs of the same sweep count (same
configuration, leaving out what does not change the results: progress, plots, shard, command line, cache
folder); a run with ``resume=False`` recomputes everything and starts the record afresh.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

from filelock import FileLock

from ldptext.fileio import write_bytes_atomic
from ..checkpoints import key_digest
from .config import EvaluationConfig

__all__ = ["RUNS_FILE", "record_run", "total_seconds"]

#: The record of runs, in the checkpoint folder.
RUNS_FILE = "runs.json"
#: Configuration fields that do not change what a sweep computes.
_NOT_THE_SWEEP = ("out", "progress", "plots", "shard", "command", "resume", "cache_dir")


def _sweep_digest(cfg: EvaluationConfig) -> str:
    return key_digest({k: v for k, v in asdict(cfg).items() if k not in _NOT_THE_SWEEP})


def record_run(root: Path, cfg: EvaluationConfig, started: float, seconds: float, outcome: str) -> list[dict]:
    """Add one run to ``root/runs.json`` and return the runs of this sweep, oldest first (this one last).

    Parameters
    ----------
    root : Path
        The checkpoint folder (``OUT/checkpoints``); created when missing.
    cfg : EvaluationConfig
    started : float
        Start of the run, seconds since the epoch.
    seconds : float
        Its wall time.
    outcome : str
        ``finished``, ``interrupted`` or ``failed``.

    Returns
    -------
    list of dict
        ``{"started", "started_unix", "seconds", "outcome", "shard"}`` per run.
    """
    root.mkdir(parents=True, exist_ok=True)
    digest = _sweep_digest(cfg)
    path = root / RUNS_FILE
    with FileLock(str(root / ".runs.lock")):
        runs: list[dict] = []
        if cfg.resume:
            try:
                saved = json.loads(path.read_text())
                if saved.get("sweep") == digest:
                    runs = list(saved.get("runs") or [])
            except (OSError, ValueError, AttributeError):
                runs = []
        runs.append({"started": datetime.fromtimestamp(started, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                     "started_unix": started, "seconds": float(seconds), "outcome": outcome, "shard": cfg.shard})
        write_bytes_atomic(path, (json.dumps({"sweep": digest, "runs": runs}, indent=2) + "\n").encode())
    return runs


def total_seconds(runs: list[dict]) -> float:
    """The length of the union of the runs' intervals ``[started_unix, started_unix + seconds]``: the sum
    of their times when one followed another, overlapping ones (parallel shards) counted once."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted((r["started_unix"], r["started_unix"] + r["seconds"]) for r in runs):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def now() -> float:
    """Seconds since the epoch (the runs' start times)."""
    return time.time()
