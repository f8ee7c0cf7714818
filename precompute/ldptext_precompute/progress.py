"""Progress of long precompute and evaluation work, on stderr.

On a terminal: a tqdm bar with rate and estimate. Otherwise (a log file, CI, ``nohup``, a pipe):
plain status lines, because tqdm's carriage-return redraws turn a log into one unreadable line, and
a job that prints nothing for ten minutes looks hung: one when the loop starts, one after its first
unit (the first rate and estimate), then one at most every ``interval`` seconds, and a "done" line.
Example::

    ldptext: base (denoising AE): step 250/2000 (12%), 4m10s elapsed, about 29m left

Only labels, counts and numbers are printed, never user text. ``enabled=False`` prints nothing.
The interval defaults to 30 s; ``LDPTEXT_PROGRESS_INTERVAL`` (seconds) overrides it.
"""
from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, TypeVar

T = TypeVar("T")

ENV_INTERVAL = "LDPTEXT_PROGRESS_INTERVAL"
DEFAULT_INTERVAL = 30.0
PREFIX = "ldptext: "


def format_duration(seconds: float) -> str:
    """``seconds`` as ``45s``, ``4m10s`` or ``2h05m`` (whole seconds; coarser for long spans)."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def status_interval(interval: float | None = None) -> float:
    """The seconds between status lines: ``interval``, else ``$LDPTEXT_PROGRESS_INTERVAL``, else 30."""
    if interval is not None:
        return float(interval)
    raw = os.environ.get(ENV_INTERVAL)
    if raw:
        try:
            value = float(raw)
        except ValueError:
            return DEFAULT_INTERVAL
        # a negative or NaN setting would print every update or never: fall back
        if math.isfinite(value) and value >= 0:
            return value
    return DEFAULT_INTERVAL


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


class Progress:
    """Progress of one loop of known (or unknown) length.

    Parameters
    ----------
    total : int or None
        Units of work; ``None`` when unknown (no percentage or estimate then).
    desc : str
        Label, e.g. ``"dpbart base (denoising AE)"``. Must not contain user text.
    unit : str
        Name of one unit (``"step"``, ``"row"``, ``"config"``).
    enabled : bool
        ``False``: print nothing at all.
    initial : int
        Units already done (a resumed stage); the estimate uses only the rate seen in this run.
    stream : file or None
        Where to write (default ``sys.stderr`` at construction).
    interval : float or None
        Seconds between status lines off a terminal (:func:`status_interval`).
    leave : bool
        Terminal only: keep the finished bar on screen.
    clock : callable
        Monotonic seconds (tests pass a fake one).
    """

    def __init__(self, total: int | None, desc: str, *, unit: str = "it", enabled: bool = True,
                 initial: int = 0, stream: IO[str] | None = None, interval: float | None = None,
                 leave: bool = True, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = None if total is None else int(total)
        self.desc, self.unit, self.n, self._initial = desc, unit, int(initial), int(initial)
        self._postfix: dict[str, Any] = {}
        self._stream = stream if stream is not None else sys.stderr
        self._clock = clock
        self._bar = None
        self._lines = 0
        self._closed = not enabled
        self._interval = status_interval(interval)
        self._start = self._last = clock()
        self._updates = 0
        if enabled and _is_terminal(self._stream):
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, desc=desc, unit=unit, initial=self.n, file=self._stream,
                             dynamic_ncols=True, leave=leave)
        elif enabled:   # off a terminal: a line at once, so a log shows the loop started
            self._write(self.status(self._start))

    def update(self, n: int = 1) -> None:
        """Count ``n`` more units done; off a terminal, print a status line when one is due (after the first
        update, then every ``interval`` seconds)."""
        if self._closed:
            return
        self.n += n
        if self._bar is not None:
            self._bar.update(n)
            return
        now = self._clock()
        self._updates += 1
        if self._updates == 1 or now - self._last >= self._interval:
            self._last = now
            self._write(self.status(now))

    def set_postfix(self, **values: Any) -> None:
        """Numbers shown after the counts (e.g. ``loss="3.214"``); never user text."""
        if self._closed:
            return
        self._postfix = values
        if self._bar is not None:
            self._bar.set_postfix(values, refresh=False)

    def status(self, now: float | None = None) -> str:
        """The one-line status, e.g. ``ldptext: X: step 250/2000 (12%), 4m10s elapsed, about 29m left``."""
        elapsed = (self._clock() if now is None else now) - self._start
        unit = self.unit
        if self.total is None:
            counts = f"{self.n} {unit}{'' if self.n == 1 else 's'}"
        else:
            pct = 100.0 * self.n / self.total if self.total else 100.0
            counts = f"{unit} {self.n}/{self.total} ({pct:.0f}%)"
        parts = [counts, f"{format_duration(elapsed)} elapsed"]
        if self.total is not None and self.n < self.total:
            done_here = self.n - self._initial
            if done_here > 0 and elapsed > 0:
                parts.append(f"about {format_duration((self.total - self.n) * elapsed / done_here)} left")
            else:
                parts.append("estimate pending")
        parts += [f"{k} {v}" for k, v in self._postfix.items()]
        return f"{PREFIX}{self.desc}: " + ", ".join(parts)

    def close(self, finished: bool = True) -> None:
        """Finish: close the bar, or (off a terminal, if any status line was printed) say it is done.

        ``finished=False`` (an exception or a requested stop) closes without the "done" line. Off a terminal
        the "done" line follows the start line (so a log that showed the loop running shows that it ended).
        """
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
        elif self._lines and finished:  # a log that showed the loop running also shows that it ended
            elapsed = self._clock() - self._start
            self._write(f"{PREFIX}{self.desc}: done, {self.n} {self.unit}{'' if self.n == 1 else 's'} "
                        f"in {format_duration(elapsed)}")

    def _write(self, line: str) -> None:
        self._lines += 1
        print(line, file=self._stream, flush=True)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self.close(finished=exc_type is None)


def track(iterable: Iterable[T], desc: str, *, total: int | None = None, unit: str = "it",
          enabled: bool = True, **kwargs: Any) -> Iterator[T]:
    """Yield from ``iterable``, counting one unit per item (see :class:`Progress`).

    Parameters
    ----------
    iterable : iterable
    desc : str
        Label (no user text).
    total : int or None
        Default ``len(iterable)`` when it has one.
    unit : str
    enabled : bool
    **kwargs
        Passed on to :class:`Progress` (``stream``, ``interval``, ``leave``, ``clock``, ``initial``).

    Yields
    ------
    The items of ``iterable``.
    """
    if total is None:
        try:
            total = len(iterable)  # type: ignore[arg-type]
        except TypeError:
            total = None
    with Progress(total, desc, unit=unit, enabled=enabled, **kwargs) as bar:
        for item in iterable:
            yield item
            bar.update(1)
