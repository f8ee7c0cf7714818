"""Token-inversion attacks on sanitized text.

The Bayes-optimal attacker knows the mechanism exactly and a **public** prior over words, and guesses
``x̂(y) = argmax_x Pr[M(x)=y] · π(x)`` for each released token y (the maximum a posteriori rule: no
decoder has a higher expected success under π). Its exact success probability is computed with the
other privacy metrics in :func:`ldptext_precompute.evaluation.metrics.profile_mechanism` (the decoder
``x̂`` for every output, and succ(x) per input). This module supplies the public prior and the empirical
check on an actual sanitized sample.

Prior: word frequencies of the ``wordfreq`` package's large English list (public; never the private
data set's own counts), looked up lower-cased; WordPiece continuations ``##xx`` use the frequency of
``xx``; words absent from the list get a floor of 1e-9 (below the list's smallest entry, ~1e-8) so
that every input keeps a non-zero prior; special tokens get 0 (they are never inputs the attacker must
consider).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["PRIOR_FLOOR", "wordfreq_prior", "empirical_attack_success"]

#: Prior weight of a word missing from the ``wordfreq`` list.
PRIOR_FLOOR = 1e-9


def wordfreq_prior(vocab: Sequence[str], valid: np.ndarray | None = None,
                   lang: str = "en") -> np.ndarray:
    """Public prior π over vocabulary ids from ``wordfreq`` (see the module docstring).

    Parameters
    ----------
    vocab : sequence of str, length V
        The token of each vocabulary id.
    valid : numpy.ndarray, bool, shape (V,), optional
        Valid inputs; the prior is 0 elsewhere (default: every id).
    lang : str, default "en"
        ``wordfreq`` language code (its ``large`` word list).

    Returns
    -------
    numpy.ndarray, float64, shape (V,)
        Unnormalised weights: the word's frequency, at least :data:`PRIOR_FLOOR`; 0 where not ``valid``.
    """
    from wordfreq import get_frequency_dict

    freq = get_frequency_dict(lang, wordlist="large")
    prior = np.empty(len(vocab))
    for i, word in enumerate(vocab):
        key = word[2:] if word.startswith("##") else word
        prior[i] = max(freq.get(key.lower(), 0.0), PRIOR_FLOOR)
    if valid is not None:
        prior[~np.asarray(valid, dtype=bool)] = 0.0
    return prior


def empirical_attack_success(decoder: np.ndarray, original_ids: np.ndarray,
                             released_ids: np.ndarray) -> float:
    """Fraction of released tokens for which the attacker's guess ``decoder[y]`` equals the original
    token: a Monte-Carlo check of the exact success rate on one sanitized sample.

    Parameters
    ----------
    decoder : numpy.ndarray, int64, shape (V,)
        The attacker's guess for every vocabulary id (``MechanismProfile.decoder``; -1 where never
        output).
    original_ids : numpy.ndarray, integer, shape (n,)
        The input tokens (any shape; flattened).
    released_ids : numpy.ndarray, integer, shape (n,)
        The sanitized tokens, aligned with ``original_ids``.

    Returns
    -------
    float
        The success rate in [0, 1]; NaN when there is no token.

    Raises
    ------
    ValueError
        When the two id arrays differ in length.
    """
    original_ids = np.asarray(original_ids).ravel()
    released_ids = np.asarray(released_ids).ravel()
    if original_ids.shape != released_ids.shape:
        raise ValueError("original and released id arrays differ in length")
    if original_ids.size == 0:
        return float("nan")
    return float(np.mean(np.asarray(decoder)[released_ids] == original_ids))
