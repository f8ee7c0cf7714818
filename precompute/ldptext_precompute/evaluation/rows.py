"""What each row of an evaluation is: a mechanism and, for SanText+, its split; and what the row is called.

SanText+ releases its non-sensitive words in the clear with probability 1 − p; which words those are is
the *split*. What ``ldptext precompute santext`` builds by default (and so what the SDK ships) is the
function-word split (:data:`DEFAULT_SPLIT`); the paper's split is by frequency (the fraction w of least
frequent words is sensitive, ``frequency:w``). Every evaluation of SanText+ has the default split's row,
"SanText+ (default split)"; the frequency split's row, "SanText+ (frequency split w)", is added when
asked for. Every other mechanism has one row, named by the mechanism alone.
"""
from __future__ import annotations

from typing import NamedTuple

from ldptext import registry
from ..santext.build import FUNCTION_WORDS, parse_non_sensitive

__all__ = ["DEFAULT_SPLIT", "ROW_ORDER", "Row", "frequency_split", "santext_row", "split_w", "row_of", "label_of",
           "ordered_rows"]

#: The split of SanText+ that ``ldptext precompute santext`` builds without ``--non-sensitive``.
DEFAULT_SPLIT = FUNCTION_WORDS

#: Row order of every table (as in Yue 2023, Table 2.1): the random baseline, the mechanisms in the
#: registry's order, the unsanitized baseline; a mechanism's default split before its other splits.
ROW_ORDER = ("random", *registry.names(), "none")

#: Display names of the rows that are not registry mechanisms (CMP as Yue 2023 names it).
_BASELINE_LABELS = {"none": "Unsanitized", "random": "Random", "cmp": "CMP (FBDD)"}


def frequency_split(w: float) -> str:
    """The split spec of the paper's frequency split with sensitive fraction ``w`` (exact: ``repr``)."""
    return f"frequency:{float(w)!r}"


class Row(NamedTuple):
    """One row of the tables: a mechanism (or baseline) name and SanText+'s split (None for the others)."""

    mechanism: str
    split: str | None = None

    @property
    def key(self) -> str:
        """The row's name in ``results.json`` (``santext+:function-words``; the mechanism alone without a split)."""
        return self.mechanism if self.split is None else f"{self.mechanism}:{self.split}"

    @property
    def label(self) -> str:
        """The row's display name, e.g. ``SanText+ (default split)``, ``SanText+ (frequency split 0.9)``."""
        if self.mechanism in _BASELINE_LABELS:
            base = _BASELINE_LABELS[self.mechanism]
        else:
            base = registry.get(self.mechanism).label if registry.is_known(self.mechanism) else self.mechanism
        if self.split is None:
            return base
        if self.split == DEFAULT_SPLIT:
            return f"{base} (default split)"
        if self.split.startswith("frequency:"):
            return f"{base} (frequency split {float(self.split.split(':', 1)[1]):g})"
        return f"{base} ({self.split})"

    @property
    def file_tag(self) -> str:
        """The row as a file-name fragment (no ``:``)."""
        return self.key.replace(":", "-")


def split_w(spec: str) -> float | None:
    """The ``w`` a ``--non-sensitive`` option asks for: W of ``frequency:W``; None for the default split.

    Raises
    ------
    ParameterError
        Anything else (a word file is not an evaluation row), or a malformed ``frequency:W``.
    """
    from ldptext.errors import ParameterError

    if spec.strip() == DEFAULT_SPLIT:
        return None
    if not spec.startswith("frequency:"):
        raise ParameterError(f"expected '{DEFAULT_SPLIT}' or 'frequency:W'")
    return parse_non_sensitive(spec)[1]


def santext_row(mechanism: str, w: float | None = None) -> Row:
    """The row of a SanText mechanism: SanText+ with the frequency split ``w``, or its default split when
    ``w`` is None; SanText (no split)."""
    if mechanism != "santext+":
        return Row(mechanism)
    return Row(mechanism, DEFAULT_SPLIT if w is None else frequency_split(w))


def row_of(entry: dict) -> Row:
    """The row of one element of ``results.json``'s ``entries`` (a file without splits: the mechanism)."""
    return Row(entry["mechanism"], entry.get("split"))


def label_of(entry: dict) -> str:
    """The display name of one element of ``results.json``'s ``entries``."""
    return row_of(entry).label


def ordered_rows(entries) -> list[Row]:
    """The distinct rows of ``results.json``'s entries, in table order (:data:`ROW_ORDER`)."""
    order = {m: i for i, m in enumerate(ROW_ORDER)}
    return sorted({row_of(e) for e in entries},
                  key=lambda r: (order.get(r.mechanism, len(order)), r.split not in (None, DEFAULT_SPLIT),
                                 r.split or ""))
