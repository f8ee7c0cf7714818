"""Checkpoint stores of the offline jobs: a finished stage kept as files, valid only for what made it.

Two ways to address a stage, one per kind of job:

* :class:`CheckpointStore` — *keyed* stages (the evaluation sweep): the file name is the stage and a
  hash of a JSON key of everything that determines the result, so a changed setting never reads an
  old file; payloads are numpy arrays (``.npz``) or JSON.
* :class:`StageCheckpoints` — *named* training stages (the DP-BART build and the experiments that
  reuse its stages): ``NAME.pt`` holds the model weights and ``NAME.json`` the stage state with the
  build's fingerprint; ``NAME.partial.ckpt`` holds a stage stopped midway. A file of another
  fingerprint counts as missing.

Every file is written through a temporary file and a rename (:func:`ldptext.fileio.atomic_path`,
mode 0o600: sanitized samples are the user's data), so an interrupted run never leaves half a
checkpoint, and a weight file is replaced, never written through (hard links to it stay intact).
"""
from __future__ import annotations

import hashlib
import io
import json
import math
import os
import shutil
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TypeVar

import numpy as np

from ldptext.fileio import atomic_path, write_bytes_atomic

__all__ = ["CheckpointStore", "StageCheckpoints", "jsonable", "key_digest"]

T = TypeVar("T")


def jsonable(obj: Any) -> Any:
    """``obj`` with numpy scalars as Python numbers, non-finite floats as None, paths and keys as str."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        f = float(obj)
        return f if math.isfinite(f) else None
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, Path):
        return str(obj)
    return obj


def key_digest(key: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of ``key`` (sorted keys, :func:`jsonable` values)."""
    return hashlib.sha256(json.dumps(jsonable(dict(key)), sort_keys=True).encode()).hexdigest()


class CheckpointStore:
    """Keyed stages as files ``{stage}-{sha256 of the key}.{npz|json}`` under ``root``.

    A key is a JSON-able dictionary of everything that determines the stage; ``base`` (e.g. the
    layout version, the data set's fingerprint and package versions) is added to every key. An
    unreadable file counts as missing. With ``resume=False`` nothing from an earlier run is read
    (everything is recomputed and written again), but what this run wrote is: two stages that share
    a sample see the same draw. ``reused`` counts the checkpoints read from earlier runs, per stage.
    """

    def __init__(self, root: Path, *, resume: bool = True, base: Mapping[str, Any] | None = None) -> None:
        self.root = Path(root)
        self.resume = resume
        self.base = dict(base or {})
        self.reused: dict[str, int] = {}
        self._written: set[Path] = set()  # what this run wrote: readable even with resume=False

    def path(self, stage: str, key: Mapping[str, Any], suffix: str) -> Path:
        """The file of one stage's checkpoint."""
        return self.root / f"{stage}-{key_digest({**self.base, **key})[:32]}.{suffix}"

    def _readable(self, path: Path) -> bool:
        return (self.resume or path in self._written) and path.is_file()

    def _hit(self, stage: str, path: Path) -> None:
        if path not in self._written:  # an earlier run's work, not this run's own
            self.reused[stage] = self.reused.get(stage, 0) + 1

    def _write(self, path: Path, data: bytes) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, data)
        self._written.add(path)

    def load_arrays(self, stage: str, key: Mapping[str, Any]) -> dict[str, np.ndarray] | None:
        """The arrays of a checkpoint, or None when there is none (or it cannot be read)."""
        path = self.path(stage, key, "npz")
        if not self._readable(path):
            return None
        try:
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except (OSError, ValueError, EOFError):
            return None
        self._hit(stage, path)
        return arrays

    def save_arrays(self, stage: str, key: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
        """Write a checkpoint of arrays (``.npz``)."""
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        self._write(self.path(stage, key, "npz"), buf.getvalue())

    def cached_json(self, stage: str, key: Mapping[str, Any], compute: Callable[[], T],
                    encode: Callable[[T], Any], decode: Callable[[Any], T]) -> T:
        """``decode`` of the JSON checkpoint when there is one; else ``compute()``, saved via ``encode``."""
        path = self.path(stage, key, "json")
        if self._readable(path):
            try:
                value = decode(json.loads(path.read_text()))
            except (OSError, ValueError, KeyError, TypeError):
                pass
            else:
                self._hit(stage, path)
                return value
        value = compute()
        self._write(path, (json.dumps(jsonable(encode(value)), sort_keys=True) + "\n").encode())
        return value


class StageCheckpoints:
    """Named training stages of one build configuration (its ``fingerprint``) under ``root``.

    ``NAME.pt``: the weights (``torch.save`` of a state dict, loaded with ``weights_only``);
    ``NAME.json``: ``{"fingerprint": ..., "state": ...}``; ``NAME.partial.ckpt``: a stage stopped
    midway (its fingerprint, name, state and snapshot). torch is imported only by the methods that
    read or write weights, so the rest of the offline package does not need it.
    """

    def __init__(self, root: Path, fingerprint: str) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.fingerprint = fingerprint

    def _weights(self, name: str) -> Path:
        return self.root / f"{name}.pt"

    def _record(self, name: str) -> Path:
        return self.root / f"{name}.json"

    def _partial(self, name: str) -> Path:
        return self.root / f"{name}.partial.ckpt"

    def _write_record(self, name: str, state: Mapping[str, Any]) -> None:
        payload = {"fingerprint": self.fingerprint, "state": dict(state)}
        write_bytes_atomic(self._record(name), json.dumps(payload).encode())

    def save(self, name: str, weights: Mapping[str, Any], state: Mapping[str, Any]) -> None:
        """Keep a finished stage: its weights (tensors, moved to the CPU) and its JSON state."""
        import torch

        with atomic_path(self._weights(name)) as tmp:
            torch.save({k: v.detach().cpu() for k, v in weights.items()}, tmp)
        self._write_record(name, state)

    def state(self, name: str) -> dict | None:
        """The JSON state of a finished stage of this fingerprint, or None."""
        if not self._weights(name).is_file():
            return None
        try:
            meta = json.loads(self._record(name).read_text())
        except (OSError, ValueError):
            return None
        return meta.get("state") if meta.get("fingerprint") == self.fingerprint else None

    def load(self, name: str) -> tuple[dict, dict] | None:
        """(weights, state) of a finished stage of this fingerprint, or None."""
        state = self.state(name)
        if state is None:
            return None
        import torch

        return torch.load(self._weights(name), map_location="cpu", weights_only=True), state

    def finished(self, names: Sequence[str]) -> list[str]:
        """The stages of ``names`` finished under this fingerprint, in the order of ``names``."""
        return [n for n in names if self.state(n) is not None]

    def partial_names(self) -> list[str]:
        """File names of the stages stopped midway (any fingerprint), sorted."""
        return sorted(p.name for p in self.root.glob("*.partial.ckpt"))

    def save_partial(self, name: str, snap: Mapping[str, Any], state: Mapping[str, Any]) -> None:
        """Keep a stage stopped midway: ``snap`` (weights, optimizer, schedule, random states) and state."""
        import torch

        with atomic_path(self._partial(name)) as tmp:
            torch.save({"fingerprint": self.fingerprint, "stage": name, "state": json.dumps(dict(state)),
                        "snap": dict(snap)}, tmp)

    def load_partial(self, name: str) -> tuple[dict, dict] | None:
        """(snapshot, state) of ``name`` saved by :meth:`save_partial` under this fingerprint, or None."""
        f = self._partial(name)
        if not f.is_file():
            return None
        import torch

        data = torch.load(f, map_location="cpu", weights_only=True)
        if data.get("fingerprint") != self.fingerprint or data.get("stage") != name:
            return None
        return data["snap"], json.loads(data["state"])

    def drop_partial(self, name: str) -> None:
        """Delete the mid-stage state of ``name`` (once the stage is finished)."""
        self._partial(name).unlink(missing_ok=True)

    def remove(self, name: str) -> None:
        """Delete every file of stage ``name``."""
        for path in (self._weights(name), self._record(name), self._partial(name)):
            path.unlink(missing_ok=True)

    def adopt(self, source: StageCheckpoints, names: Sequence[str]) -> list[str]:
        """Make the finished stages of ``source`` finished stages here, under this fingerprint.

        The weights are hard-linked (copied across file systems): a stage's ``.pt`` is replaced,
        never written through, so ``source`` is only read. The JSON state is written anew here,
        never shared. Stages already here are left alone.

        Returns
        -------
        list of str
            The stages of ``names`` finished here afterwards.
        """
        have = set(self.finished(names))
        for name in source.finished(names):
            if name in have:
                continue
            state = source.state(name)
            _link_or_copy(source._weights(name), self._weights(name))
            self._write_record(name, state)
        return self.finished(names)


def _link_or_copy(src: Path, dst: Path) -> None:
    """``dst`` becomes a hard link to ``src`` (a copy across file systems), via a temporary name + rename."""
    tmp = dst.with_name(f".{dst.name}.link")
    tmp.unlink(missing_ok=True)
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copy2(src, tmp)
    tmp.replace(dst)
