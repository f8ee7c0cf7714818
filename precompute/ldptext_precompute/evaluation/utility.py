"""Utility metric: a downstream classifier; corpus BLEU is in :mod:`ldptext_precompute.bleu`.

Utility is measured as in Yue et al. 2021, *Differential Privacy for Text Analytics via Natural Text
Sanitization* (Findings of ACL), as presented in Yue 2023, *Data Synthesis: Boosting Utility and Privacy
in NLP* (PhD thesis, Ohio State), §2.5.2: the accuracy of a classifier trained on sanitized text.

**Classifier.** TF-IDF over word unigrams and bigrams (lower-cased, sub-linear tf, terms seen in at
least 2 training documents) feeding an L2-regularised multinomial logistic regression (``newton-cg``,
which handles any number of classes). Its hyper-parameters are tuned on the (sanitized) training set
only, never on a test set: stratified, shuffled k-fold cross-validation (k = 3, fewer when the smallest
class has fewer documents; seeded, so deterministic) over ``C`` in :data:`C_GRID` and ``class_weight`` in
:data:`CLASS_WEIGHTS`, scored by macro-F1 (so that a majority-class predictor does not win on an
imbalanced set); ties go to the earlier grid point. The TF-IDF vocabulary is fitted once on the whole
training set (unsupervised) and the folds are its rows. The chosen model is refitted on the whole
training set and scored on any number of test sets — in the runner the sanitized test text (as Yue 2023,
Table 2.1 does) and the original test text. It takes a few seconds on a CPU for ten thousand documents;
it is much weaker than the fine-tuned BERT of the paper, so absolute accuracies are lower than the
paper's, while the ordering of mechanisms is what is compared.
"""
from __future__ import annotations

import warnings
from collections import Counter
from dataclasses import asdict, dataclass
from typing import NamedTuple, Sequence

import numpy as np

__all__ = ["train_and_score", "fit_and_score", "ClassifierSettings", "ClassifierRun", "C_GRID",
           "CLASS_WEIGHTS", "CLASSIFIER_DESCRIPTION"]

#: Inverse regularisation strengths tried by the cross-validation (ascending: warm-started path).
C_GRID = (0.1, 1.0, 10.0)
#: Class weightings tried by the cross-validation.
CLASS_WEIGHTS = (None, "balanced")


@dataclass(frozen=True)
class ClassifierSettings:
    """Everything that determines the classifier besides its data and seed (part of checkpoint keys).

    Attributes
    ----------
    c_grid : tuple of float
        ``C`` values tried, ascending.
    class_weights : tuple of (str or None)
        ``class_weight`` values tried.
    folds : int
        Cross-validation folds (fewer when the smallest class has fewer training documents).
    metric : str
        Cross-validation score (``macro_f1`` or ``accuracy``).
    solver : str
        scikit-learn ``LogisticRegression`` solver.
    max_iter : int
        Iteration limit of the solver.
    """

    c_grid: tuple = C_GRID
    class_weights: tuple = CLASS_WEIGHTS
    folds: int = 3
    metric: str = "macro_f1"
    solver: str = "newton-cg"
    max_iter: int = 1000

    def to_dict(self) -> dict:
        """The ``classifier_settings`` object of ``results.json``.

        Returns
        -------
        dict
            The attributes by name (tuples as lists).
        """
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    def describe(self) -> str:
        """One line describing the classifier (``results.json``'s ``classifier``).

        Returns
        -------
        str
        """
        grid = ", ".join(f"{c:g}" for c in self.c_grid)
        weights = ", ".join(str(w) for w in self.class_weights)
        return ("TF-IDF (word 1-2 grams, lowercase, sublinear tf, min_df=2) + multinomial logistic "
                f"regression ({self.solver}, L2); C in {{{grid}}} and class_weight in {{{weights}}} chosen "
                f"by {self.folds}-fold stratified cross-validation ({self.metric}) on the training set only")


#: The default classifier, in one line (stated in ``results.json``).
CLASSIFIER_DESCRIPTION = ClassifierSettings().describe()


class ClassifierRun(NamedTuple):
    """Scores of one fitted classifier and the hyper-parameters the cross-validation chose.

    Attributes
    ----------
    scores : dict of str to dict of str to float
        ``{test set name: {"accuracy": float, "macro_f1": float}}``.
    hyperparameters : dict
        ``C`` (float), ``class_weight`` (str or None), ``cv_folds`` (int; 0 when no cross-validation
        was possible) and ``cv_score`` (float or None, the mean validation score of the choice).
    """

    scores: dict
    hyperparameters: dict


def _vectorize(train_texts: Sequence[str]):
    """The fitted TF-IDF vectorizer and the training matrix (float32 CSR)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    vectorizer = TfidfVectorizer(lowercase=True, ngram_range=(1, 2), min_df=2, sublinear_tf=True,
                                 dtype=np.float32)
    try:
        return vectorizer, vectorizer.fit_transform(train_texts)
    except ValueError:
        # every term occurs once (tiny corpora): fall back to keeping all terms
        vectorizer.set_params(min_df=1)
        try:
            return vectorizer, vectorizer.fit_transform(train_texts)
        except ValueError:
            # not a single term (e.g. every document empty): one constant feature, so the model
            # predicts the class prior
            from scipy import sparse
            return None, sparse.csr_matrix(np.ones((len(train_texts), 1), np.float32))


def _transform(vectorizer, texts: Sequence[str]):
    if vectorizer is None:
        from scipy import sparse
        return sparse.csr_matrix(np.ones((len(texts), 1), np.float32))
    return vectorizer.transform(texts)


def _score(metric: str, y_true: np.ndarray, y_pred: np.ndarray) -> float:
    from sklearn.metrics import accuracy_score, f1_score
    if metric == "accuracy":
        return float(accuracy_score(y_true, y_pred))
    return float(f1_score(y_true, y_pred, average="macro", zero_division=0))


def _model(settings: ClassifierSettings, seed: int, **params):
    from sklearn.linear_model import LogisticRegression
    return LogisticRegression(solver=settings.solver, max_iter=settings.max_iter, random_state=seed, **params)


def _tune(x, y: np.ndarray, settings: ClassifierSettings, seed: int) -> dict:
    """Cross-validate the grid on the training rows; the chosen hyper-parameters (see the module)."""
    from sklearn.model_selection import StratifiedKFold
    folds = min(settings.folds, min(Counter(y.tolist()).values()))
    if folds < 2 or len(settings.c_grid) * len(settings.class_weights) == 1:
        return {"C": float(sorted(settings.c_grid)[len(settings.c_grid) // 2]),
                "class_weight": settings.class_weights[-1], "cv_folds": 0, "cv_score": None}
    c_grid = sorted(settings.c_grid)
    total = np.zeros((len(settings.class_weights), len(c_grid)))
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed % 2**32)
    for train_rows, valid_rows in splitter.split(np.zeros(len(y)), y):
        x_tr, x_va, y_tr, y_va = x[train_rows], x[valid_rows], y[train_rows], y[valid_rows]
        for i, weight in enumerate(settings.class_weights):
            model = _model(settings, seed, class_weight=weight, warm_start=True)
            for j, c in enumerate(c_grid):       # ascending C: each fit starts from the previous one
                model.set_params(C=c)
                model.fit(x_tr, y_tr)
                total[i, j] += _score(settings.metric, y_va, model.predict(x_va))
    mean = total / folds
    best = np.unravel_index(int(np.argmax(mean)), mean.shape)     # first maximum: ties -> earlier
    return {"C": float(c_grid[best[1]]), "class_weight": settings.class_weights[best[0]],
            "cv_folds": int(folds), "cv_score": float(mean[best])}


def fit_and_score(train_texts: Sequence[str], train_labels: Sequence,
                  test_sets: dict[str, Sequence[str]], test_labels: Sequence, seed: int = 0,
                  settings: ClassifierSettings | None = None) -> ClassifierRun:
    """Tune and fit the classifier on the training text; score it on each test set.

    Parameters
    ----------
    train_texts : sequence of str, length n_train
        Training documents (sanitized, in the runner); the only data the tuning sees.
    train_labels : sequence, length n_train
        Their labels (any hashable values; two or more distinct).
    test_sets : dict of str to sequence of str
        Named test sets, each of length n_test and aligned with ``test_labels``.
    test_labels : sequence, length n_test
        Labels of every test set.
    seed : int, default 0
        Seed of the cross-validation folds and ``random_state`` of the model.
    settings : ClassifierSettings, optional
        The grid and the solver (default :class:`ClassifierSettings`).

    Returns
    -------
    ClassifierRun
        Accuracy and macro-F1 per test set, and the chosen hyper-parameters.
    """
    from sklearn.exceptions import ConvergenceWarning

    settings = settings or ClassifierSettings()
    y = np.asarray([str(v) for v in train_labels])
    vectorizer, x_train = _vectorize(train_texts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        chosen = _tune(x_train, y, settings, seed)
        model = _model(settings, seed, C=chosen["C"], class_weight=chosen["class_weight"])
        model.fit(x_train, y)
    y_true = np.asarray([str(v) for v in test_labels])
    scores = {}
    for name, texts in test_sets.items():
        pred = model.predict(_transform(vectorizer, texts))
        scores[name] = {"accuracy": _score("accuracy", y_true, pred), "macro_f1": _score("macro_f1", y_true, pred)}
    return ClassifierRun(scores=scores, hyperparameters=chosen)


def train_and_score(train_texts: Sequence[str], train_labels: Sequence,
                    test_sets: dict[str, Sequence[str]], test_labels: Sequence,
                    seed: int = 0) -> dict[str, dict[str, float]]:
    """Fit the (tuned) classifier on ``train_texts`` and return accuracy and macro-F1 on each test set.

    Parameters
    ----------
    train_texts : sequence of str, length n_train
        Training documents.
    train_labels : sequence, length n_train
        Their labels.
    test_sets : dict of str to sequence of str
        Named test sets, each of length n_test and aligned with ``test_labels``.
    test_labels : sequence, length n_test
        Labels of every test set.
    seed : int, default 0
        Seed of the cross-validation and the model.

    Returns
    -------
    dict of str to dict of str to float
        ``{test set name: {"accuracy": float, "macro_f1": float}}`` (:func:`fit_and_score`'s scores).
    """
    return fit_and_score(train_texts, train_labels, test_sets, test_labels, seed=seed).scores
