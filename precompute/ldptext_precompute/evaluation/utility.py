"""Utility metric: a downstream classifier (seed 000 §2.5.2); corpus BLEU is in :mod:`ldptext_precompute.bleu`.

**Classifier.** TF-IDF over word unigrams and bigrams (lower-cased, sub-linear tf, terms seen in at
least 2 training documents) feeding an L2-regularised logistic regression (liblinear, C = 1). It is
trained on the (sanitized) training text and scored on any number of test sets — in the runner the
sanitized test text (as seed 000 Table 2.1 does) and the original test text (SPEC §6). It takes a few
seconds on a CPU for ten thousand documents; it is much weaker than the fine-tuned BERT of the paper,
so absolute accuracies are lower than seed 000's, while the ordering of mechanisms is what is compared.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["train_and_score", "CLASSIFIER_DESCRIPTION"]

CLASSIFIER_DESCRIPTION = ("TF-IDF (word 1-2 grams, lowercase, sublinear tf, min_df=2) + logistic "
                          "regression (liblinear, L2, C=1)")


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
