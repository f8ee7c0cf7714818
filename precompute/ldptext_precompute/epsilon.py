"""How the offline tools (``ldptext evaluate``, ``ldptext calibrate``) print ε, and how they read a list of ε.

One rule everywhere, in progress lines, log lines, reports and plots: the shortest decimal that reads back
as the same float (Python's ``repr``), without a trailing ``.0`` — ``1``, ``2.5``, ``2.2627416997969525``,
``1e-05``. So what is printed is always the ε that was evaluated, and ``--epsilon`` with it selects the same
bundle and the same draws.
"""
from __future__ import annotations

import math
from typing import Iterable

__all__ = ["format_epsilon", "normalize_epsilons"]


def format_epsilon(epsilon: float) -> str:
    """ε as every offline tool prints it: ``repr(float(ε))`` without a trailing ``.0`` (``inf`` for ∞).

    Parameters
    ----------
    epsilon : float

    Returns
    -------
    str
        The shortest decimal that round-trips to ``float(epsilon)``: ``1``, ``2.41``, ``2.2627416997969525``.
    """
    value = float(epsilon)
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


def normalize_epsilons(values: Iterable[float]) -> tuple[list[float], str | None]:
    """A list of ε as it is swept: numerically equal values once, in ascending order.

    Parameters
    ----------
    values : iterable of float

    Returns
    -------
    (list of float, str or None)
        The distinct values, ascending; and a note saying what changed (equal values dropped, the order
        changed), or None when the list was already distinct and ascending.
    """
    given = [float(v) for v in values]
    swept = sorted(set(given))
    if swept == given:
        return swept, None
    parts = []
    if len(swept) < len(given):
        parts.append(f"{len(given) - len(swept)} numerically equal value(s) evaluated once")
    if sorted(given) != given:
        parts.append("columns in ascending order")
    return swept, (f"epsilon {', '.join(format_epsilon(v) for v in given)} given: " + " and ".join(parts)
                   + f": {', '.join(format_epsilon(v) for v in swept)}")
