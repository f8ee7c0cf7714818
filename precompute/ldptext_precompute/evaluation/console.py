"""What the sweep prints on stderr: progress, log lines and warnings (labels and numbers, never text)."""
from __future__ import annotations

import sys

from ..progress import track
from .config import EvaluationConfig


class Warnings(list):
    """The sweep's warnings: each printed on stderr when added (labels and numbers only, never text)."""

    def extend(self, items) -> None:
        """Add warnings, printing each as one ``[evaluate] warning:`` line on stderr."""
        for msg in items:
            print(f"[evaluate] warning: {msg}", file=sys.stderr)
            self.append(msg)


def progress_iter(iterable, cfg: EvaluationConfig, *, desc: str, unit: str = "it"):
    """``iterable`` with progress on stderr when ``cfg.progress`` (a bar on a terminal, else status lines)."""
    return track(iterable, f"evaluate {desc}", unit=unit, enabled=cfg.progress)


def log(cfg: EvaluationConfig, msg: str) -> None:
    """One progress line on stderr when ``cfg.progress`` (never raw text)."""
    if cfg.progress:
        from tqdm.auto import tqdm
        tqdm.write(f"[evaluate] {msg}", file=sys.stderr)
