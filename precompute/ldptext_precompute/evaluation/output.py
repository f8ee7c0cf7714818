"""The sweep's outputs: the ``results.json`` record, ``report.md`` and the plots, each written atomically."""
from __future__ import annotations

import json
import shlex
import sys
from dataclasses import asdict
from pathlib import Path

from ldptext.fileio import write_bytes_atomic
from ..checkpoints import jsonable
from . import report
from .config import EvaluationConfig
from .console import Warnings, log
from .datasets import Dataset
from .records import Entry, Results, privacy_metric_definitions, randomness_description
from .sweep import package_versions
from .utility import classifier_settings


def assemble_results(cfg: EvaluationConfig, ds: Dataset, entries: list[Entry],
                     timings: dict[str, float], notes: Warnings, reused: dict[str, int] | None = None,
                     vocabulary: str | None = None, runs: list[dict] | None = None) -> Results:
    """Step 7a: the ``results.json`` record (``reused``: checkpoints read from an earlier run, per stage;
    ``vocabulary``: :func:`..santext.embeddings.describe_vocabulary` of the bundles' vocabulary; ``runs``: the
    runs of this sweep into this folder, :func:`.runlog.record_run`)."""
    chosen = [classifier_settings(c) for c in cfg.classifiers]
    settings = chosen[0]
    counts = {lab: ds.train_labels.count(lab) for lab in sorted(set(ds.train_labels))}
    return Results(config=asdict(cfg), versions=package_versions(),
                   dataset={**ds.info, "name": ds.name, "majority_rate_test": ds.majority_rate(),
                            "train_class_counts": counts},
                   randomness=randomness_description(cfg.reproducible),
                   privacy_metric_definitions=privacy_metric_definitions(cfg.threshold),
                   entries=entries, timings=timings, reused=dict(reused or {}), vocabulary=vocabulary, runs=runs,
                   classifier=settings.describe(),
                   classifier_settings=settings.to_dict(), warnings=list(notes),
                   classifiers={c.name: {"description": c.describe(), "settings": c.to_dict()} for c in chosen})


def write_outputs(cfg: EvaluationConfig, results: Results, out: Path) -> dict:
    """Step 7b: write ``results.json`` and ``report.md``, then the plots (recorded in ``results.json``);
    return the final document.
    """
    document = results.to_dict()
    write_json(out / "results.json", document)
    report.write_report(document, out / "report.md")
    if cfg.plots:
        from .plots import write_plots
        results.plots = write_plots(document, out)
        document = results.to_dict()
        write_json(out / "results.json", document)
    log(cfg, f"done in {wall_time_text(results.timings)}: {out / 'report.md'}")
    return document


def wall_time_text(timings: dict) -> str:
    """``52 s`` for a run that did everything itself; ``52 s (this run; 1240 s over every run of this sweep)``
    for a resumed one (:mod:`.runlog`)."""
    own = f"{timings['total_s']:.0f} s"
    total = timings.get("all_runs_s")
    # a resumed run says both, however short the earlier runs were
    if total is None or timings.get("runs", 1) < 2:
        return own
    return f"{own} (this run; {total:.0f} s over every run of this sweep)"


def write_json(path: Path, document: dict) -> None:
    """Write a document as indented JSON (non-finite floats as null), atomically."""
    write_bytes_atomic(path, (json.dumps(jsonable(document), indent=2) + "\n").encode(), mode=report.shareable_mode())


def command_line() -> str:
    """The current process's command line, for the report.

    Returns
    -------
    str
        ``sys.argv``, shell-quoted and joined by spaces.
    """
    return " ".join(shlex.quote(a) for a in sys.argv)
