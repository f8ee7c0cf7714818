"""Atomic file replacement: the one way the SDK writes a file that others read (bundles, the ledger,
the trust store) and the offline side writes its caches.

A reader sees either the old file or the complete new one, never a half-written file, and a crash at
any point leaves the old file in place: the new content goes to a temporary file in the same
directory (``.<name>.<random>.tmp``), which is flushed to disk, renamed over the target, and the
directory entry is flushed too so the rename survives a power loss.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

__all__ = ["atomic_path", "write_bytes_atomic", "fsync_dir", "temporary_pattern", "file_sha256"]


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 (64 hex digits) of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def temporary_pattern(path: str | os.PathLike) -> str:
    """Glob pattern (relative to the target's directory) of the temporaries :func:`atomic_path`
    creates for ``path``; characters special to glob in the name are not escaped."""
    return f".{Path(path).name}.*.tmp"


@contextmanager
def atomic_path(path: str | os.PathLike, *, mode: int | None = None,
                checkpoint: Callable[[str], None] | None = None) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; when the body returns, make it ``path`` atomically.

    Parameters
    ----------
    path : str or os.PathLike
        The file to create or replace. Its directory must exist.
    mode : int, optional
        Permission bits of the new file (default: 0o600, those of a fresh temporary file).
    checkpoint : callable, optional
        Called with ``"tmp-written"``, ``"tmp-synced"``, ``"renamed"`` and ``"dir-synced"`` after each
        step (crash tests kill the process there).

    Yields
    ------
    pathlib.Path
        An empty temporary file for the body to write. On any exception it is removed and ``path``
        is left as it was.
    """
    path = Path(path)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    step = checkpoint or (lambda _: None)
    try:
        yield tmp
        step("tmp-written")
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        step("tmp-synced")
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
        step("renamed")
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
    step("dir-synced")


def write_bytes_atomic(path: str | os.PathLike, data: bytes, *, mode: int | None = None,
                       checkpoint: Callable[[str], None] | None = None) -> Path:
    """Replace ``path`` with ``data`` atomically (see :func:`atomic_path`); returns the path."""
    with atomic_path(path, mode=mode, checkpoint=checkpoint) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
    return Path(path)


def fsync_dir(directory: str | os.PathLike) -> None:
    """Make a rename in ``directory`` durable (POSIX; a no-op where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
