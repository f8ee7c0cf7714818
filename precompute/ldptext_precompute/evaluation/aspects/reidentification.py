"""Extrinsic privacy: who wrote a sanitized text, and what group its author belongs to.

Chim, Ive & Liakata, *Evaluating Synthetic Data Generation from User Generated Text* (Computational
Linguistics, 2025), §3.4 and §5: the privacy of a released corpus is measured by how far it brings down
an adversary who holds *original* text, against chance and against the same adversary on the unsanitized
corpus. Three adversaries, all trained on original text only and applied to the released (sanitized) text:

* **re-identification** (:class:`AuthorAttack`): an author classifier trained on each author's *other*
  documents (TF-IDF of word 1–2-grams and character 2–4-grams within words, a linear SVM, one-vs-rest);
  a released document is re-identified at k when its author is among the k highest-scoring of the N
  authors. Chance: k / N;
* **linkage** (:class:`Linkage`): the paper's worst case (§5.3), where the adversary holds the authors'
  full histories, the originals of the released documents included; each released document is matched
  to its nearest original document by cosine similarity of character-trigram TF-IDF (the paper uses
  MinHash over character trigrams, an approximation of the same overlap), and the author of that
  document is the guess. Chance: 1 / N;
* **attribute profiling** (:class:`AttributeAttack`): an attribute classifier (word 1–2-gram TF-IDF,
  logistic regression) trained on the original text of other authors (grouped folds: no author is in
  both its training and its test fold) predicts the attribute of each released document. Chance: the
  majority attribute's share of the documents.

These are attacks, not bounds: a low success says this adversary failed, not that every adversary would.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["AuthorAttack", "Linkage", "AttributeAttack", "topk_accuracy"]


def topk_accuracy(scores: np.ndarray, truth: np.ndarray, ks: Sequence[int]) -> dict[int, float]:
    """Share of rows whose true column is among the k highest scores, for each k.

    Ties count against the truth (a column scoring equal to the truth and listed before it ranks
    above it), so a constant score matrix gives the chance rate only in expectation over columns.

    Parameters
    ----------
    scores : numpy.ndarray, shape (n, N)
    truth : numpy.ndarray, int, shape (n,)
        Column of the right answer per row.
    ks : sequence of int
    """
    scores = np.asarray(scores, np.float64)
    truth = np.asarray(truth, np.int64)
    if scores.shape[0] == 0:
        return {int(k): float("nan") for k in ks}
    true_score = scores[np.arange(len(truth)), truth][:, None]
    cols = np.arange(scores.shape[1])[None, :]
    above = (scores > true_score) | ((scores == true_score) & (cols < truth[:, None]))
    rank = above.sum(axis=1)          # 0 = first
    return {int(k): float((rank < k).mean()) for k in ks}


def _author_features():
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.pipeline import FeatureUnion

    return FeatureUnion([
        ("words", TfidfVectorizer(lowercase=True, ngram_range=(1, 2), min_df=1, sublinear_tf=True)),
        ("chars", TfidfVectorizer(lowercase=True, analyzer="char_wb", ngram_range=(2, 4), min_df=2,
                                  sublinear_tf=True))])


class AuthorAttack:
    """Author classifier over N authors, trained on the original documents it is given.

    Parameters
    ----------
    texts : sequence of str
        The adversary's original documents.
    authors : sequence of str
        Their authors (N distinct).
    """

    def __init__(self, texts: Sequence[str], authors: Sequence[str]) -> None:
        from sklearn.svm import LinearSVC

        self.authors = sorted(set(authors))
        self._index = {a: i for i, a in enumerate(self.authors)}
        self._features = _author_features()
        x = self._features.fit_transform(list(texts))
        y = np.array([self._index[a] for a in authors])
        self._model = LinearSVC(C=1.0).fit(x, y)

    def accuracy(self, texts: Sequence[str], authors: Sequence[str], ks: Sequence[int] = (1, 5)) -> dict[int, float]:
        """Top-k re-identification accuracy of released ``texts`` written by ``authors``."""
        scores = self._model.decision_function(self._features.transform(list(texts)))
        if scores.ndim == 1:      # two authors: one score column
            scores = np.stack([-scores, scores], axis=1)
        return topk_accuracy(scores, np.array([self._index[a] for a in authors]), ks)

    def chance(self, ks: Sequence[int] = (1, 5)) -> dict[int, float]:
        """The chance rate k / N for each k."""
        return {int(k): min(k, len(self.authors)) / len(self.authors) for k in ks}


class Linkage:
    """Nearest original document by character-trigram TF-IDF cosine; its author is the guess."""

    def __init__(self, texts: Sequence[str], authors: Sequence[str]) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        self._vectorizer = TfidfVectorizer(lowercase=True, analyzer="char", ngram_range=(3, 3), sublinear_tf=True)
        self._index = self._vectorizer.fit_transform(list(texts))
        self._authors = np.array(list(authors), dtype=object)

    def accuracy(self, texts: Sequence[str], authors: Sequence[str]) -> float:
        """Share of released ``texts`` whose nearest original document is by their author."""
        if not len(texts):
            return float("nan")
        sims = (self._vectorizer.transform(list(texts)) @ self._index.T).toarray()
        guess = self._authors[sims.argmax(axis=1)]
        return float(np.mean(guess == np.array(list(authors), dtype=object)))


class AttributeAttack:
    """Attribute classifiers trained on original text, in author-grouped folds.

    Parameters
    ----------
    texts, authors, attributes : sequences of str, aligned
        The original documents, their authors and their authors' attribute.
    folds : int
        Grouped folds (at most the number of authors).
    """

    def __init__(self, texts: Sequence[str], authors: Sequence[str], attributes: Sequence[str],
                 folds: int = 5) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import GroupKFold
        from sklearn.pipeline import make_pipeline

        texts, self.attributes = list(texts), np.array(list(attributes), dtype=object)
        groups = np.array(list(authors), dtype=object)
        folds = min(int(folds), len(set(groups)))
        self._folds = []
        for train, test in GroupKFold(n_splits=folds).split(texts, self.attributes, groups):
            model = make_pipeline(TfidfVectorizer(lowercase=True, ngram_range=(1, 2), min_df=2, sublinear_tf=True),
                                  LogisticRegression(C=10.0, max_iter=2000))
            model.fit([texts[i] for i in train], self.attributes[train])
            self._folds.append((model, test))

    def accuracy(self, released: Sequence[str]) -> float:
        """Accuracy of the attribute predicted for each released document (aligned with the originals)."""
        released = list(released)
        right = 0
        for model, test in self._folds:
            right += int(np.sum(model.predict([released[i] for i in test]) == self.attributes[test]))
        return right / len(released) if released else float("nan")

    def chance(self) -> float:
        """The majority attribute's share of the documents."""
        _, counts = np.unique(self.attributes.astype(str), return_counts=True)
        return float(counts.max() / counts.sum())
