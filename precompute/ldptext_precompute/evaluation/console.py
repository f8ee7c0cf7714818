"""What the sweep prints on stderr: progress, log lines and warnings (labels and numbers, never text)."""
from __future__ import annotations

import sys

from ..progress import track
from .config import CHECKPOINT_DIR, EvaluationConfig


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


def resume_command(command: str, argv: list[str] | None = None) -> str:
    """The command line that resumes an interrupted ``ldptext COMMAND`` run: the same arguments, without
    ``--fresh`` (which would recompute the kept stages), shell-quoted.

    Parameters
    ----------
    command : str
        ``evaluate`` or ``calibrate``.
    argv : list of str, optional
        The arguments after the program name (default ``sys.argv[1:]``); when they are not this command's
        (an API call), ``ldptext COMMAND`` with the same options.
    """
    import shlex

    args = list(sys.argv[1:] if argv is None else argv)
    if command not in args:
        return f"ldptext {command} with the same options (without --fresh)"
    return " ".join(["ldptext"] + [shlex.quote(a) for a in args if a != "--fresh"])


def kept_checkpoints(out) -> dict[str, int]:
    """The finished stages kept under ``OUT/checkpoints``, counted by stage (``sample``, ``utility``, ...)."""
    from pathlib import Path

    root = Path(out) / CHECKPOINT_DIR
    counts: dict[str, int] = {}
    if root.is_dir():
        for p in root.iterdir():
            stage, sep, _ = p.name.rpartition("-")
            if p.is_file() and sep and p.suffix in (".npz", ".json") and not p.name.startswith("."):
                counts[stage] = counts.get(stage, 0) + 1
    return counts


def interrupted_message(out, command: str, cache=None) -> str:
    """What an interrupted ``evaluate`` run (Ctrl-C) prints: what is kept and the exact command that resumes.

    Parameters
    ----------
    out : str or Path
        The output folder (``--out``).
    command : str
        The command line that resumes (:func:`resume_command`).
    cache : str or Path, optional
        The bundle cache (``--cache-dir``; default ``~/.cache/ldptext/evaluate``), where the bundles built
        so far stay.
    """
    kept = kept_checkpoints(out)
    where = f"{out}/{CHECKPOINT_DIR}"
    bundles = f"the bundles built so far stay in {cache or '~/.cache/ldptext/evaluate'}"
    if not kept:
        return (f"ldptext: interrupted before any stage finished: no checkpoint is kept ({bundles}); the same "
                f"command starts again:\n  {command}")
    stages = ", ".join(f"{n} {stage}" for stage, n in sorted(kept.items()))
    return (f"ldptext: interrupted. Kept in {where}: every finished stage ({stages} checkpoint file(s); the "
            f"sanitized samples among them are your data, private to you); {bundles}. To resume, run the same "
            f"command again; it recomputes only what is missing and the report counts the time of both runs:\n"
            f"  {command}")
