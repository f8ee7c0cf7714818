"""Utility metric: a downstream classifier; corpus BLEU is in :mod:`ldptext_precompute.bleu`.

Utility is measured as in Yue et al. 2021, *Differential Privacy for Text Analytics via Natural Text
Sanitization* (Findings of ACL), as presented in Yue 2023, *Data Synthesis: Boosting Utility and Privacy
in NLP* (PhD thesis, Ohio State), §2.5.2: the accuracy of a classifier trained on sanitized text.

**Classifier.** TF-IDF over word unigrams and bigrams (lower-cased, sub-linear tf, terms seen in at
least 2 training documents) feeding an L2-regularised logistic regression (liblinear, C = 1). It is
trained on the (sanitized) training text and scored on any number of test sets — in the runner the
sanitized test text (as Yue 2023, Table 2.1 does) and the original test text. It takes a few seconds on
a CPU for ten thousand documents; it is much weaker than the fine-tuned BERT of the paper, so absolute
accuracies are lower than the paper's, while the ordering of mechanisms is what is compared.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["train_and_score", "CLASSIFIER_DESCRIPTION"]

#: The classifier, in one line (stated in ``results.json``).
CLASSIFIER_DESCRIPTION = ("TF-IDF (word 1-2 grams, lowercase, sublinear tf, min_df=2) + logistic "
                          "regression (liblinear, L2, C=1)")


def train_and_score(train_texts: Sequence[str], train_labels: Sequence,
                    test_sets: dict[str, Sequence[str]], test_labels: Sequence,
                    seed: int = 0) -> dict[str, dict[str, float]]:
    """Fit the classifier on ``train_texts`` and return accuracy and macro-F1 on each test set.

    Parameters
    ----------
    train_texts : sequence of str, length n_train
        Training documents (sanitized, in the runner).
    train_labels : sequence, length n_train
        Their labels.
    test_sets : dict of str to sequence of str
        Named test sets, each of length n_test and aligned with ``test_labels``.
    test_labels : sequence, length n_test
        Labels of every test set.
    seed : int, default 0
        ``random_state`` of the logistic regression.

    Returns
    -------
    dict of str to dict of str to float
        ``{test set name: {"accuracy": float, "macro_f1": float}}``.
    """
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
