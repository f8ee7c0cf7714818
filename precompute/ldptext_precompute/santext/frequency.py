"""The sensitive / non-sensitive split of SanText+ from a **public** frequency list.

V_S = the fraction ``w`` of least frequent valid tokens (Yue et al. 2021, *Differential Privacy for
Text Analytics via Natural Text Sanitization* (Findings of ACL), as presented in Yue 2023, *Data
Synthesis: Boosting Utility and Privacy in NLP* (PhD thesis, Ohio State), §2.4; the paper's reference
code counts frequencies in the private data, which is outside the guarantee). Here the vocabulary, the
frequencies and V_S never come from the private text being sanitized.

Word-level vocabularies use ``wordfreq``'s English "large" list directly. WordPiece vocabularies get
each piece's frequency by tokenizing that public word list, weighting by word frequency.
"""
from __future__ import annotations

import numpy as np

from ldptext.errors import ParameterError

SOURCE = "wordfreq 'en' large list"


def public_word_frequencies() -> dict[str, float]:
    """The public English word frequencies (wordfreq's "large" list).

    Returns
    -------
    dict of str to float
        Word → frequency (fraction of running text).
    """
    import wordfreq

    return wordfreq.get_frequency_dict("en", wordlist="large")


def token_frequencies(vocab: list[str], kind: str, tokenizer_json: str) -> np.ndarray:
    """Public frequency of every vocabulary entry.

    Parameters
    ----------
    vocab : list of str, length V
        The vocabulary.
    kind : str
        ``"word"`` (looked up directly) or ``"wordpiece"`` (the public word list tokenized, each
        piece weighted by its word's frequency).
    tokenizer_json : str
        The vocabulary's tokenizer (used for WordPiece).

    Returns
    -------
    np.ndarray of float64, shape (V,)
    """
    freq = public_word_frequencies()
    if kind == "word":
        return np.array([freq.get(w, 0.0) for w in vocab], dtype=np.float64)
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(tokenizer_json)
    tok.no_padding()
    tok.no_truncation()
    words = list(freq)
    weights = np.array([freq[w] for w in words])
    out = np.zeros(len(vocab), dtype=np.float64)
    for start in range(0, len(words), 50_000):
        encs = tok.encode_batch(words[start:start + 50_000], add_special_tokens=False)
        for enc, wt in zip(encs, weights[start:start + 50_000]):
            np.add.at(out, enc.ids, wt)
    return out


def sensitive_mask(frequencies: np.ndarray, valid: np.ndarray, w: float) -> np.ndarray:
    """Mark the ``w`` fraction of least frequent valid tokens sensitive.

    Ties: a later vocabulary index counts as rarer. Invalid tokens are never sensitive.

    Parameters
    ----------
    frequencies : np.ndarray of float, shape (V,)
        Public frequencies.
    valid : np.ndarray of bool, shape (V,)
        Valid inputs.
    w : float
        Sensitive fraction, in [0, 1]; ``round(w · n_valid)`` tokens are marked.

    Returns
    -------
    np.ndarray of bool, shape (V,)
        V_S.

    Raises
    ------
    ParameterError
        ``w`` outside [0, 1].
    """
    if not 0.0 <= w <= 1.0:
        raise ParameterError("w must be in [0, 1]")
    idx = np.flatnonzero(valid)
    n_sensitive = int(round(w * idx.size))
    # stable sort by descending frequency, then by index: the first (n - n_sensitive) are V_N
    order = idx[np.lexsort((idx, -frequencies[idx]))]
    mask = np.zeros(valid.shape, dtype=bool)
    mask[order[idx.size - n_sensitive:]] = True
    return mask
