"""Token-inversion attacks on sanitized text (SPEC §6).

The Bayes-optimal attacker knows the mechanism exactly and a **public** prior over words, and guesses
``x̂(y) = argmax_x Pr[M(x)=y] · π(x)`` for each released token y. Its exact success probability is
computed with the other privacy metrics in :func:`ldptext_precompute.evaluation.metrics.profile_mechanism` (the
decoder ``x̂`` for every output, and succ(x) per input). This module supplies the public prior and the
empirical check on an actual sanitized sample.

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

PRIOR_FLOOR = 1e-9


def wordfreq_prior(vocab: Sequence[str], valid: np.ndarray | None = None,
                   lang: str = "en") -> np.ndarray:
    """Public prior π over vocabulary ids from ``wordfreq`` (unnormalised; zero where not ``valid``)."""
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
    token (a Monte-Carlo check of the exact success rate)."""
    original_ids = np.asarray(original_ids).ravel()
    released_ids = np.asarray(released_ids).ravel()
    if original_ids.shape != released_ids.shape:
        raise ValueError("original and released id arrays differ in length")
    if original_ids.size == 0:
        return float("nan")
    return float(np.mean(np.asarray(decoder)[released_ids] == original_ids))
