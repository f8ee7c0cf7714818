"""Token-inversion attacks on sanitized text.

The Bayes-optimal attacker knows the mechanism exactly and a **public** prior over words, and guesses
``x̂(y) = argmax_x Pr[M(x)=y] · π(x)`` for each released token y (the maximum a posteriori rule: no
decoder has a higher expected success under π). Its exact success probability is computed with the
other privacy metrics in :func:`ldptext_precompute.evaluation.metrics.profile_mechanism` (the decoder
``x̂`` for every output, and succ(x) per input). This module supplies the public prior and the empirical
check on an actual sanitized sample.

Beside it, an attacker who knows neither the mechanism nor ε: **embedding nearest-neighbour inversion**
(:func:`nearest_neighbour_inversion`), which lists the k words nearest to each released token in the
public embedding; measured on the sample drawn, it applies to CMP too, which has no exact attack here.

Prior: word frequencies of the ``wordfreq`` package's large English list (public; never the private
data set's own counts), looked up lower-cased; WordPiece continuations ``##xx`` use the frequency of
``xx``; words absent from the list get a floor of 1e-9 (below the list's smallest entry, ~1e-8) so
that every input keeps a non-zero prior; special tokens get 0 (they are never inputs the attacker must
consider).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["PRIOR_FLOOR", "wordfreq_prior", "empirical_attack_success", "nearest_neighbour_table",
           "nearest_neighbour_inversion"]

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


def nearest_neighbour_table(embeddings: np.ndarray, candidates: np.ndarray, queries: np.ndarray, k: int = 10,
                            chunk_size: int = 512) -> np.ndarray:
    """The ``k`` nearest candidates of each query id in the embedding (Euclidean), nearest first.

    The attacker's candidate list of the embedding-inversion attack (:func:`nearest_neighbour_inversion`).
    Distances are float64; a query that is itself a candidate is at distance exactly 0 from itself (first);
    ties go to the smaller id.

    Parameters
    ----------
    embeddings : numpy.ndarray, float, shape (V, m)
        The public embedding (in the runner: the bundle's metric embedding).
    candidates : numpy.ndarray, int, shape (c,)
        Ids the attacker may guess (the input domain).
    queries : numpy.ndarray, int, shape (q,)
        Ids whose neighbours are wanted (the outputs a mechanism may release).
    k : int, default 10
        Neighbours per query (at most ``c``).
    chunk_size : int, default 512
        Queries per matrix product.

    Returns
    -------
    numpy.ndarray, int64, shape (V, k)
        Row y: the k nearest candidates of y, nearest first; -1 in rows that are not queries.
    """
    emb = np.asarray(embeddings, dtype=np.float64)
    cand = np.sort(np.asarray(candidates, dtype=np.int64))
    k = min(int(k), cand.size)
    cand_emb = emb[cand]
    cand_sq = np.einsum("ij,ij->i", cand_emb, cand_emb)
    position = np.full(emb.shape[0], -1, dtype=np.int64)
    position[cand] = np.arange(cand.size)
    table = np.full((emb.shape[0], k), -1, dtype=np.int64)
    queries = np.asarray(queries, dtype=np.int64)
    for start in range(0, queries.size, chunk_size):
        ys = queries[start:start + chunk_size]
        q = emb[ys]
        d2 = np.maximum(np.einsum("ij,ij->i", q, q)[:, None] + cand_sq[None, :] - 2.0 * (q @ cand_emb.T), 0.0)
        own = position[ys] >= 0
        d2[np.nonzero(own)[0], position[ys][own]] = -1.0        # the query itself, when a candidate, first
        kth = np.partition(d2, k - 1, axis=1)[:, k - 1]
        for r, y in enumerate(ys):
            # every candidate up to the k-th distance (ties at the boundary included), by distance then id
            # (candidates are sorted, so position order is id order)
            near = np.flatnonzero(d2[r] <= kth[r])
            table[y] = cand[near[np.lexsort((near, d2[r, near]))][:k]]
    return table


def nearest_neighbour_inversion(table: np.ndarray, original_ids: np.ndarray, released_ids: np.ndarray,
                                ks: Sequence[int] = (1, 10)) -> dict[str, float]:
    """Empirical success of the embedding nearest-neighbour inversion attack on one sanitized sample.

    The attacker needs neither the mechanism nor ε: for each released token y it guesses the input among
    the k vocabulary words nearest to y in the public embedding (the word itself first when it can be an
    input). success@k is the share of released tokens whose original is in that list; success@1 is the
    "the output is the input, or its nearest word" guess. It applies to every mechanism, CMP included
    (Feyisetan et al. 2020, *Privacy- and Utility-Preserving Textual Analysis via Calibrated Multivariate
    Perturbations* (WSDM), release the nearest word to a noised embedding, so nearest neighbours are the
    attacker's natural candidates); unlike the exact Bayes attack it is an estimate from the sample drawn
    and a lower bound on what an informed attacker achieves.

    Parameters
    ----------
    table : numpy.ndarray, int64, shape (V, K)
        :func:`nearest_neighbour_table` (K >= max(ks)).
    original_ids, released_ids : numpy.ndarray, int, shape (n,)
        The input tokens and the sanitized tokens, aligned.
    ks : sequence of int
        List lengths.

    Returns
    -------
    dict of str to float
        ``{str(k): success@k}``; NaN for an empty sample.

    Raises
    ------
    ValueError
        When the id arrays differ in length or a k exceeds the table's width.
    """
    original_ids = np.asarray(original_ids, dtype=np.int64).ravel()
    released_ids = np.asarray(released_ids, dtype=np.int64).ravel()
    if original_ids.shape != released_ids.shape:
        raise ValueError("original and released id arrays differ in length")
    if max(ks) > table.shape[1]:
        raise ValueError("k exceeds the neighbour table's width")
    if original_ids.size == 0:
        return {str(k): float("nan") for k in ks}
    hits = table[released_ids] == original_ids[:, None]            # (n, K): where the original is listed
    first = np.where(hits.any(axis=1), hits.argmax(axis=1), table.shape[1])
    return {str(k): float(np.mean(first < k)) for k in ks}
