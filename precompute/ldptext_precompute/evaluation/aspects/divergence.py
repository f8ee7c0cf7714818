"""Divergence of a sanitized corpus from its original: a proxy for privacy.

Chim, Ive & Liakata, *Evaluating Synthetic Data Generation from User Generated Text* (Computational
Linguistics, 2025), §4 (Divergence): per pair, ``1 − BLEU(original, sanitized)`` (self-BLEU); per corpus,
the Jensen–Shannon divergence between the character-trigram distributions of the original and of the
sanitized corpus. Higher means further from the original (less verbatim text left).

Per-pair BLEU is sentence BLEU-4 with the tokenisation of :mod:`ldptext_precompute.bleu`; orders 2–4 are
add-one smoothed (Lin & Och 2004, *ORANGE*, §3: ``(m + 1) / (c + 1)``), since one short pair often has no
matching 4-gram and unsmoothed BLEU would be 0 for it. The unigram precision is not smoothed, so a pair
with no word in common scores BLEU 0 (divergence 1).
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Iterable, Mapping, Sequence

from ...bleu import bleu_tokenize

__all__ = ["sentence_bleu", "self_bleu_divergence", "jensen_shannon", "char_trigrams", "char_trigram_jsd"]


def _ngrams(tokens: Sequence[str], n: int) -> Counter:
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def sentence_bleu(hypothesis: Sequence[str], reference: Sequence[str], max_n: int = 4) -> float:
    """Smoothed sentence BLEU of one tokenised hypothesis against one tokenised reference (0–1).

    p₁ = clipped unigram matches / hypothesis unigrams; pₙ = (matchesₙ + 1) / (countₙ + 1) for n ≥ 2;
    BLEU = BP · exp(mean log pₙ), BP = exp(1 − r/c) when c < r, else 1.

    Returns
    -------
    float
        0.0 for an empty hypothesis or one with no unigram in common with the reference.
    """
    c, r = len(hypothesis), len(reference)
    if c == 0:
        return 0.0
    logs = []
    for n in range(1, max_n + 1):
        h, ref = _ngrams(hypothesis, n), _ngrams(reference, n)
        matches = sum(min(k, ref[g]) for g, k in h.items())
        total = max(c - n + 1, 0)
        if n == 1:
            if matches == 0:
                return 0.0
            logs.append(math.log(matches / total))
        else:
            logs.append(math.log((matches + 1) / (total + 1)))
    bp = 1.0 if c >= r else math.exp(1.0 - r / c)
    return bp * math.exp(sum(logs) / max_n)


def self_bleu_divergence(originals: Sequence[str], sanitized: Sequence[str]) -> list[float]:
    """``1 − sentence_bleu`` of every (original, sanitized) pair, tokenised by :func:`bleu_tokenize`.

    Raises
    ------
    ValueError
        When the two lists differ in length.
    """
    return [1.0 - sentence_bleu(bleu_tokenize(s), bleu_tokenize(o)) for o, s in zip(originals, sanitized, strict=True)]


def jensen_shannon(p: Mapping, q: Mapping) -> float:
    """Jensen–Shannon divergence (base 2, in [0, 1]) between two count (or probability) tables.

    JSD(P, Q) = ½ KL(P ‖ M) + ½ KL(Q ‖ M), M = ½ (P + Q), each table normalised to sum 1; 0 when the
    distributions are equal, 1 when their supports are disjoint. An empty table counts as disjoint from a
    non-empty one (1.0); two empty tables give 0.0.
    """
    sp, sq = float(sum(p.values())), float(sum(q.values()))
    if sp == 0 or sq == 0:
        return 0.0 if sp == sq else 1.0
    total = 0.0
    for key in set(p) | set(q):
        a, b = p.get(key, 0) / sp, q.get(key, 0) / sq
        m = (a + b) / 2
        if a > 0:
            total += a * math.log2(a / m)
        if b > 0:
            total += b * math.log2(b / m)
    return min(max(total / 2, 0.0), 1.0)


def char_trigrams(texts: Iterable[str]) -> Counter:
    """Counts of character trigrams over a corpus (each text lower-cased, whitespace runs as one space)."""
    counts: Counter = Counter()
    for t in texts:
        s = " ".join(t.lower().split())
        counts.update(s[i:i + 3] for i in range(len(s) - 2))
    return counts


def char_trigram_jsd(originals: Iterable[str], sanitized: Iterable[str]) -> float:
    """JSD between the character-trigram distributions of two corpora (:func:`jensen_shannon`)."""
    return jensen_shannon(char_trigrams(originals), char_trigrams(sanitized))
