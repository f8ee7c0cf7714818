"""Utility metrics: a downstream classifier and corpus BLEU (SPEC §6; seed 000 §2.5.2; seed 001
§6.5.2).

**Classifier.** TF-IDF over word unigrams and bigrams (lower-cased, sub-linear tf, terms seen in at
least 2 training documents) feeding an L2-regularised logistic regression (liblinear, C = 1). It is
trained on the (sanitized) training text and scored on any number of test sets — in the runner the
sanitized test text (as seed 000 Table 2.1 does) and the original test text (SPEC §6). It takes a few
seconds on a CPU for ten thousand documents; it is much weaker than the fine-tuned BERT of the paper,
so absolute accuracies are lower than seed 000's, while the ordering of mechanisms is what is compared.

**BLEU.** Corpus BLEU-4 (Papineni et al. 2002) of the sanitized output against its input as the only
reference: modified n-gram precisions p₁..p₄ pooled over the corpus, uniform weights, brevity penalty
BP = exp(1 − r/c) when the output is shorter (c < r), no smoothing. Reported on a 0–1 scale. A high
BLEU means much of the input survives verbatim: utility for some tasks, leakage for privacy (seed 001
§6.5.2).
"""
from __future__ import annotations

import math
import re
from collections import Counter
from typing import Iterable, Sequence

import numpy as np

__all__ = ["bleu_tokenize", "corpus_bleu", "train_and_score", "CLASSIFIER_DESCRIPTION"]

CLASSIFIER_DESCRIPTION = ("TF-IDF (word 1-2 grams, lowercase, sublinear tf, min_df=2) + logistic "
                          "regression (liblinear, L2, C=1)")

_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def bleu_tokenize(text: str) -> list[str]:
    """Lower-cased word and punctuation tokens (the same tokenisation for input and output)."""
    return _TOKEN.findall(text.lower())


def _ngrams(tokens: Sequence[str], n: int) -> Counter:
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def corpus_bleu(hypotheses: Iterable[Sequence[str]], references: Iterable[Sequence[str]],
                max_n: int = 4) -> float:
    """Corpus BLEU of tokenised hypotheses against one tokenised reference each (0–1 scale)."""
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


def train_and_score(train_texts: Sequence[str], train_labels: Sequence,
                    test_sets: dict[str, Sequence[str]], test_labels: Sequence,
                    seed: int = 0) -> dict[str, dict[str, float]]:
    """Fit the classifier on ``train_texts`` and return accuracy and macro-F1 on each test set."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import accuracy_score, f1_score

    vectorizer = TfidfVectorizer(lowercase=True, ngram_range=(1, 2), min_df=2, sublinear_tf=True,
                                 dtype=np.float32)
    try:
        x_train = vectorizer.fit_transform(train_texts)
    except ValueError:
        # every term occurs once (tiny corpora): fall back to keeping all terms
        vectorizer.set_params(min_df=1)
        x_train = vectorizer.fit_transform(train_texts)
    model = LogisticRegression(C=1.0, solver="liblinear", max_iter=1000, random_state=seed)
    model.fit(x_train, np.asarray(train_labels))
    y_true = np.asarray(test_labels)
    scores = {}
    for name, texts in test_sets.items():
        pred = model.predict(vectorizer.transform(texts))
        scores[name] = {"accuracy": float(accuracy_score(y_true, pred)),
                        "macro_f1": float(f1_score(y_true, pred, average="macro"))}
    return scores
