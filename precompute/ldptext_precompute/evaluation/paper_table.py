"""The papers' table: a sweep's accuracies next to the published ones (``make evaluate-paper-table``).

Renders, as markdown, the accuracy of one classifier trained and tested on sanitized text (the setting of
Yue 2023, Table 2.1) for every row and ε of a ``results.json``, mean ± sample standard deviation over
seeds, with the published numbers of the same mechanisms beneath each row:

* Yue et al. 2021, *Differential Privacy for Text Analytics via Natural Text Sanitization* (Findings of
  ACL), as presented in Yue 2023, *Data Synthesis: Boosting Utility and Privacy in NLP* (PhD thesis, Ohio
  State), Table 2.1: SST-2, GloVe 300d, fine-tuned BERT, ε = 1, 2, 3 (SanText+ with the frequency split
  w = 0.9, p = 0.3);
* CluSanT (NAACL 2025), SST-2 with a pretrained classifier, ε = 1, 4, 8, 16: SanText and CusText.

The header states the data, the embedding, the classifier, the seeds, the run's wall time (that of the
invocation that wrote the file: a resumed run says so; with ``--started`` also the time from the sweep's
first start to the file, every resumed sitting included) and the mean fine-tuning time per run when the
classifier is the fine-tuned one. Nothing here reads text; only numbers of ``results.json``.

Command line::

    python -m ldptext_precompute.evaluation.paper_table OUT/results.json [--classifier finetune] [--out FILE]
        [--started 2026-11-26T09:53:08Z]
"""
from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .records import classifier_scores
from .rows import Row, frequency_split, ordered_rows, row_of

__all__ = ["Published", "PUBLISHED", "paper_table", "main"]

_YUE = "Yue 2023, Table 2.1 (SST-2, GloVe 300d, fine-tuned BERT)"
_CLUSANT = "CluSanT, NAACL 2025 (SST-2, pretrained classifier)"


@dataclass(frozen=True)
class Published:
    """One published series: the row it belongs to, where it comes from, accuracy by ε (None: any ε)."""

    row: Row
    source: str
    accuracy: dict


#: The published accuracies (trained and tested on sanitized text) placed beside the run's rows.
PUBLISHED = (
    Published(Row("random"), _YUE, {None: 0.4986}),
    Published(Row("cmp"), _YUE, {1.0: 0.5099, 2.0: 0.5143, 3.0: 0.5345}),
    Published(Row("santext"), _YUE, {1.0: 0.5101, 2.0: 0.5838, 3.0: 0.8374}),
    Published(Row("santext"), _CLUSANT, {1.0: 0.678, 4.0: 0.621, 8.0: 0.704, 16.0: 0.713}),
    Published(Row("santext+", frequency_split(0.9)), _YUE, {1.0: 0.7796, 2.0: 0.7943, 3.0: 0.8516}),
    Published(Row("custext"), _CLUSANT, {1.0: 0.805, 4.0: 0.724, 8.0: 0.828, 16.0: 0.874}),
    Published(Row("none"), _YUE, {None: 0.9251}),
)


def _cell(score: dict | None) -> str:
    if not score:
        return ""
    mean, std = score["mean"], score.get("std") or 0.0
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return ""
    return f"{mean:.3f}" if len(score.get("values") or [mean]) < 2 else f"{mean:.3f} ± {std:.3f}"


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600} h {(s % 3600) // 60:02d} min" if s >= 3600 else f"{s // 60} min {s % 60:02d} s"


def _header(results: dict, classifier: str | None, test: str, since: tuple[datetime, datetime] | None
            ) -> list[str]:
    cfg, ds = results["config"], results["dataset"]
    described = (results.get("classifiers") or {}).get(classifier) or {}
    runs = [h for e in results["entries"] for h in (classifier_scores(e, classifier) or {}).get(
        "classifier_hyperparameters") or [] if isinstance(h, dict) and "train_s" in h]
    from .report import _santext_plus_p, _vocabulary   # one wording with report.md and calibrate

    wall = results.get("timings", {}).get("total_s")
    every_run = results.get("timings", {}).get("all_runs_s")
    n_runs = len(results.get("runs") or [])
    resumed = sum((results.get("reused") or {}).values())
    lines = [f"Data: {ds['name']} ({ds['n_train']} training / {ds['n_test']} test documents); embedding "
             f"`{cfg['embeddings']}`, vocabulary {_vocabulary(results)}{_santext_plus_p(results)}; "
             f"classifier: {described.get('description') or results.get('classifier', classifier)}; "
             f"accuracy on the {'sanitized' if test == 'sanitized_test' else 'original'} test text, mean ± "
             f"sample std over {cfg['seeds']} seeds (the unsanitized and random rows have no ε)."]
    if wall is not None and every_run is not None and n_runs > 1:
        lines.append(f"Wall time: {_duration(every_run)} over the {n_runs} runs of this sweep (their own times "
                     f"summed, the time between them not counted); this invocation {_duration(wall)}.")
    elif wall is not None:
        note = (f" (this invocation, which resumed from {resumed} checkpoints of earlier ones)" if resumed else "")
        lines.append(f"Wall time: {_duration(wall)}{note}.")
    if since is not None:
        started, finished = since
        lines.append(f"Sweep: {_duration((finished - started).total_seconds())} from its first start "
                     f"({started.strftime('%Y-%m-%dT%H:%M:%SZ')}) to this results file, every sitting and "
                     "the pauses between them included.")
    if runs:
        mean = sum(h["train_s"] for h in runs) / len(runs)
        devices = sorted({str(h.get("device", "?")) for h in runs})
        lines.append(f"Fine-tuning: {len(runs)} runs, {_duration(mean)} each on average ({', '.join(devices)}).")
    return lines


def paper_table(results: dict, classifier: str | None = None, test: str = "sanitized_test",
                since: tuple[datetime, datetime] | None = None) -> str:
    """The markdown table of a sweep's accuracies beside the published ones.

    Parameters
    ----------
    results : dict
        A ``results.json`` document.
    classifier : str, optional
        The classifier whose accuracies are shown (default: the sweep's first).
    test : str, default ``sanitized_test``
        ``sanitized_test`` (the papers' setting) or ``original_test``.
    since : (datetime, datetime), optional
        The sweep's first start and the time its ``results.json`` was written (timezone-aware): the
        header then states the time between them.

    Returns
    -------
    str
        A header paragraph and a table: one line per row of the sweep (its label), each followed by the
        published series of that row; columns are every ε of the sweep and of the published series.
    """
    names = list(results.get("classifiers") or {})
    classifier = classifier or (names[0] if names else None)
    entries = results["entries"]
    epsilons = sorted({float(e["epsilon"]) for e in entries if e.get("epsilon") is not None}
                      | {eps for p in PUBLISHED for eps in p.accuracy if eps is not None})
    first = epsilons[0] if epsilons else None
    lines = _header(results, classifier, test, since) + [
        "", "| | source | " + " | ".join(f"ε = {eps:g}" for eps in epsilons) + " |",
        "| --- | --- |" + " --- |" * len(epsilons)]
    for row in ordered_rows(entries):
        cells = {eps: "" for eps in epsilons}
        for e in entries:
            if row_of(e) != row:
                continue
            scores = classifier_scores(e, classifier) or {}
            eps = first if e.get("epsilon") is None else float(e["epsilon"])
            cells[eps] = _cell((scores.get(test) or {}).get("accuracy"))
        lines.append(f"| {row.label} | this run | " + " | ".join(cells[eps] for eps in epsilons) + " |")
        for pub in (p for p in PUBLISHED if p.row == row):
            values = {first if eps is None else eps: v for eps, v in pub.accuracy.items()}
            lines.append(f"| | {pub.source} | "
                         + " | ".join(f"{values[eps]:.3f}" if eps in values else "" for eps in epsilons) + " |")
    return "\n".join(lines) + "\n"


def _utc(text: str) -> datetime:
    """An ISO-8601 time; one without a zone is UTC."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO-8601 time: {text!r}") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


def main(argv: list[str] | None = None) -> int:
    """Print (or write) the table of a ``results.json``.

    Parameters
    ----------
    argv : list of str, optional
        Command-line arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        Exit status 0.
    """
    p = argparse.ArgumentParser(prog="python -m ldptext_precompute.evaluation.paper_table",
                                description="A sweep's accuracies next to the published SanText / CusText numbers.")
    p.add_argument("results", help="results.json of ldptext evaluate")
    p.add_argument("--classifier", default=None, help="classifier to show (default: the sweep's first)")
    p.add_argument("--test", choices=["sanitized_test", "original_test"], default="sanitized_test",
                   help="test text the accuracy is on (default sanitized_test, as the papers)")
    p.add_argument("--out", default=None, help="write the markdown here instead of printing it")
    p.add_argument("--started", default=None, type=_utc, metavar="ISO-8601",
                   help="the sweep's first start (UTC, e.g. 2026-11-26T09:53:08Z): the header then states the "
                        "time from it to the results file's modification")
    args = p.parse_args(argv)
    path = Path(args.results)
    since = None
    if args.started is not None:
        since = (args.started, datetime.fromtimestamp(path.stat().st_mtime, timezone.utc))
    table = paper_table(json.loads(path.read_text(encoding="utf-8")), args.classifier, args.test, since)
    if args.out:
        Path(args.out).write_text(table, encoding="utf-8")
    else:
        print(table, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
