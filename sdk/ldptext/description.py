"""A token-level bundle's description: every descriptive manifest field derived from the arrays and
checked, so that ``bundle inspect``, a report or a reader of the manifest never see a number the
tables contradict.

Each field is optional (an older bundle may lack it); a stated one must equal what the arrays and
the tokenizer give. libldptext makes the same checks at open (``native/lib/bundle.c``
``check_description`` and ``check_rendering``), so every runtime refuses the same bundles with the
same code (``LDP_E_PARAMETER_MISMATCH``, exit 4).

=================================  ===========================================================
field                              derived as
=================================  ===========================================================
``vocab.size``                     the rows V
``vocab.outputs``                  |O|, the output domain
``vocab.sensitive``                the rows marked sensitive (V_S)
``vocab.non_sensitive``,           the rows kept in the clear (SanText+'s V_N, CusText+'s stop
``vocab.kept_in_clear``            words)
``vocab.dim``                      the embedding dimension m
``vocab.kind``                     ``"wordpiece"`` for a WordPiece tokenizer, else ``"word"``
``privacy.verbatim.inputs``        the rows the verbatim rates are over: valid inputs not kept
``privacy.rows_with_far_outputs``  TEM: valid inputs with a non-empty far set
``privacy.not_outputs``            its counts sum to the sensitive rows that are not outputs,
                                   less the unknown-word row
``sources.embeddings.vocab_size``  the rows, less the out-of-vocabulary row the builder adds
                                   where ``sources.embeddings.oov_row`` names one
``privacy.notion``                 the mechanism's notion (its registry statement)
``params.non_sensitive``           ``function-words``: the kept rows are exactly the valid inputs
                                   on :mod:`ldptext.function_words` (the frequency and file splits
                                   name their source; their kept rows are counted above and listed
                                   by ``bundle inspect``)
=================================  ===========================================================
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .errors import ParameterMismatchError
from .function_words import LABEL as FUNCTION_WORDS_LABEL
from .function_words import is_function_word

__all__ = ["NOT_OUTPUT_COUNTS", "check_description", "check_rendering", "check_stated"]

#: The counts of ``privacy.not_outputs``: why a valid input is not an output (each optional).
NOT_OUTPUT_COUNTS = ("identifiers", "above_verbatim_cap", "not_read_back")


def _section(manifest: dict, *keys: str) -> dict:
    """``manifest[k0][k1]...`` where each level is an object, else ``{}``."""
    node: Any = manifest
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else {}


def check_stated(manifest: dict, actual: dict[tuple[str, ...], int | str]) -> None:
    """Refuse a stated field (a path of keys) that differs from its derived value.

    Raises
    ------
    ParameterMismatchError
        Naming the field, the stated value and the derived one (public facts, no input text).
    """
    for path, value in actual.items():
        parent = _section(manifest, *path[:-1])
        if path[-1] not in parent:
            continue
        stated = parent[path[-1]]
        # a bool is an int to Python, never a count here (libldptext reads a number, as 16.0 == 16)
        if isinstance(stated, bool) or stated != value:
            raise ParameterMismatchError(f"manifest {'.'.join(path)} {stated!r} is not the tables' {value!r}")


def check_description(manifest: dict, *, rows: int, outputs: np.ndarray, dim: int,
                      valid_input: np.ndarray, sensitive: np.ndarray | None = None,
                      keep_row: np.ndarray | None = None, bot_count: np.ndarray | None = None) -> None:
    """Refuse a manifest whose descriptive fields (the module's table, less those that need the
    tokenizer) are not the arrays'.

    Parameters
    ----------
    manifest : dict
        The bundle's manifest.
    rows, outputs, dim, valid_input
        V, the output ids, m and the valid-input mask.
    sensitive, keep_row : np.ndarray or None
        The sensitive and kept-in-clear masks of the SanText engine's tables (None: a runtime
        without them, CMP).
    bot_count : np.ndarray or None
        TEM's far-set sizes.

    Raises
    ------
    ParameterMismatchError
    """
    from .registry import get

    valid = np.asarray(valid_input, dtype=bool)
    actual: dict[tuple[str, ...], int | str] = {
        ("vocab", "size"): int(rows), ("vocab", "outputs"): int(np.asarray(outputs).size),
        ("vocab", "dim"): int(dim)}
    if sensitive is not None and keep_row is not None:
        kept = np.asarray(keep_row).astype(bool)
        actual.update({("vocab", "sensitive"): int(np.count_nonzero(sensitive)),
                       ("vocab", "non_sensitive"): int(kept.sum()), ("vocab", "kept_in_clear"): int(kept.sum()),
                       ("privacy", "verbatim", "inputs"): int(np.count_nonzero(valid & ~kept))})
    if bot_count is not None:
        actual[("privacy", "rows_with_far_outputs")] = int(np.count_nonzero(valid & (np.asarray(bot_count) > 0)))
    source = _section(manifest, "sources", "embeddings")
    if source:
        actual[("sources", "embeddings", "vocab_size")] = int(rows) - int(source.get("oov_row") is not None)
    check_stated(manifest, actual)
    privacy = _section(manifest, "privacy")
    statement = get(manifest["mechanism"]).statement()
    if "notion" in privacy and not statement.accepts_notion(privacy["notion"]):
        raise ParameterMismatchError(f"manifest privacy.notion is not {statement.notion!r}")


def check_rendering(manifest: dict, *, wordpiece: bool, unk_id: int | None = None,
                    outputs: np.ndarray | None = None, sensitive: np.ndarray | None = None,
                    tokens: list[str] | None = None, keep_row: np.ndarray | None = None,
                    valid_input: np.ndarray | None = None) -> None:
    """Refuse descriptive fields that the tokenizer contradicts: ``vocab.kind``; (given the
    unknown-word row, the outputs and the sensitive mask) the counts of ``privacy.not_outputs``; and
    (given the tokens and the kept and valid masks) a SanText+ split labelled ``function-words``
    (``params.non_sensitive``) that does not keep exactly the valid inputs on that list
    (:func:`ldptext.function_words.is_function_word`; the unknown-word row is never kept).

    Raises
    ------
    ParameterMismatchError
    """
    check_stated(manifest, {("vocab", "kind"): "wordpiece" if wordpiece else "word"})
    if _section(manifest, "params").get("non_sensitive") == FUNCTION_WORDS_LABEL and tokens is not None \
            and keep_row is not None and valid_input is not None:
        listed = np.array([is_function_word(t) for t in tokens], dtype=bool)
        rows = np.asarray(valid_input, dtype=bool).copy()
        if unk_id is not None and 0 <= unk_id < rows.size:
            rows[unk_id] = False
        if (np.asarray(keep_row).astype(bool)[rows] != listed[rows]).any():
            raise ParameterMismatchError("manifest params.non_sensitive 'function-words' is not the kept rows: "
                                         "they are not exactly the vocabulary's function words")
    counts = _section(manifest, "privacy", "not_outputs")
    stated = [counts[k] for k in NOT_OUTPUT_COUNTS if k in counts]
    if not stated or outputs is None or sensitive is None:
        return
    left_out = np.asarray(sensitive, dtype=bool).copy()
    left_out[np.asarray(outputs)] = False
    if unk_id is not None and 0 <= unk_id < left_out.size:
        left_out[unk_id] = False
    # a count: an integer >= 0, or an integral float (libldptext's count_at)
    if any(isinstance(c, bool) or not isinstance(c, (int, float)) or not c >= 0 or not float(c).is_integer()
           for c in stated) or sum(stated) != int(left_out.sum()):
        raise ParameterMismatchError(f"manifest privacy.not_outputs counts {stated!r} do not sum to the "
                                     f"{int(left_out.sum())} sensitive rows that are not outputs")
