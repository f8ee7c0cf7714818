"""Corpus BLEU-4 (Papineni et al. 2002), shared by ``ldptext evaluate`` and the DP-BART build.

The sanitized or reconstructed output is scored against its input as the only reference: modified
n-gram precisions p₁..p₄ pooled over the corpus, uniform weights, brevity penalty BP = exp(1 − r/c)
when the output is shorter (c < r), no smoothing; on a 0–1 scale. A high BLEU means much of the input
survives verbatim: utility for some tasks, leakage for privacy (Igamberdiev & Habernal 2023, *DP-BART for
Privatized Text Rewriting under Local Differential Privacy* (Findings of ACL), as presented in
Igamberdiev 2023, *Differentially Private Methods in NLP* (PhD thesis), §6.5.2).
"""
from __future__ import annotations

import math
import re
from collections import Counter
from typing import Iterable, Sequence

__all__ = ["bleu_tokenize", "corpus_bleu", "BLEU_DESCRIPTION"]

#: How :func:`corpus_bleu` is computed, in one line (stated in ``results.json``).
BLEU_DESCRIPTION = "corpus BLEU-4 of sanitized output vs its input, 0-1 scale, no smoothing"

_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def bleu_tokenize(text: str) -> list[str]:
    """Lower-cased word and punctuation tokens (the same tokenisation for input and output).

    Parameters
    ----------
    text : str
        One document.

    Returns
    -------
    list of str
        Maximal runs of word characters, and every other non-space character on its own.
    """
    return _TOKEN.findall(text.lower())


def _ngrams(tokens: Sequence[str], n: int) -> Counter:
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def corpus_bleu(hypotheses: Iterable[Sequence[str]], references: Iterable[Sequence[str]],
                max_n: int = 4) -> float:
    """Corpus BLEU of tokenised hypotheses against one tokenised reference each (0–1 scale).

    Parameters
    ----------
    hypotheses : iterable of sequence of str, length n_docs
        Tokenised outputs (e.g. by :func:`bleu_tokenize`).
    references : iterable of sequence of str, length n_docs
        The one tokenised reference of each hypothesis, in the same order.
    max_n : int, default 4
        Longest n-gram; the precisions of orders 1..``max_n`` are weighted uniformly.

    Returns
    -------
    float
        BLEU in [0, 1]; 0.0 for an empty output or when some order has no matching n-gram (no
        smoothing).

    Raises
    ------
    ValueError
        When ``hypotheses`` and ``references`` differ in length.
    """
    matches = [0] * max_n
    totals = [0] * max_n
    hyp_len = ref_len = 0
    for hyp, ref in zip(hypotheses, references, strict=True):
        hyp_len += len(hyp)
        ref_len += len(ref)
        for n in range(1, max_n + 1):
            h, r = _ngrams(hyp, n), _ngrams(ref, n)
            matches[n - 1] += sum(min(c, r[g]) for g, c in h.items())
            totals[n - 1] += max(len(hyp) - n + 1, 0)
    if hyp_len == 0 or min(matches) == 0:
        return 0.0
    log_precision = sum(math.log(m / t) for m, t in zip(matches, totals)) / max_n
    brevity = 1.0 if hyp_len > ref_len else math.exp(1.0 - ref_len / hyp_len)
    return brevity * math.exp(log_precision)
