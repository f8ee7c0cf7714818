"""Tokenizer of a bundle: a Hugging Face ``tokenizers`` pipeline serialised as JSON inside the
bundle (WordPiece for MiniLM, word level for GloVe, or a DP-BART model's own tokenizer). Special
tokens are never added when encoding.

:meth:`TextTokenizer.decode` (SanText) is our own table lookup (a sanitized id sequence maps to text
with one join), about ten times faster than the library's decoder: WordPiece continuation pieces
(``##x``) attach to the previous piece, other pieces are separated by a space, and the usual BERT
clean-up removes the space before punctuation and English contractions.
:meth:`TextTokenizer.decode_generated` (DP-BART) is the library's own decoder with special tokens
dropped: a generated sequence may hold them, and the model's reference outputs (the PyTorch oracle,
BLEU) are defined by that decoder, which differs from the table lookup in corner cases (a leading
continuation piece, " do not").
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Sequence

import numpy as np
from .errors import BundleError, BundleFormatError, InputError

if TYPE_CHECKING:  # pragma: no cover
    from .bundle import Bundle

# Texts longer than this are encoded in pieces cut at whitespace (the tokenizers split on
# whitespace first, so the ids are the same), which bounds the library's per-character bookkeeping
# (about 125 bytes per character: a 10 MB document would take 1.3 GB and 14 s in one piece).
PIECE_CHARS = 1 << 16

# BERT decoder clean-up (the space a WordPiece join leaves before punctuation and contractions)
_CLEANUP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
            (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


# pre-tokenizers that split on whitespace before anything else: only for these is encoding a long
# text in pieces cut at whitespace guaranteed to give the same ids (byte-level BPE and SentencePiece's
# Metaspace fold the space into the next token, so a cut there would change the ids)
_WHITESPACE_PRETOKENIZERS = ("BertPreTokenizer", "Whitespace", "WhitespaceSplit")


class TextTokenizer:
    """A bundle's tokenizer: text → token ids, ids → text.

    Parameters
    ----------
    tokenizer_json : str
        A ``tokenizers`` pipeline serialised as JSON.

    Attributes
    ----------
    kind : str
        ``"wordpiece"`` or ``"word"`` (any other model): how :meth:`decode` joins pieces.
    """

    def __init__(self, tokenizer_json: str) -> None:
        # imported here: a runtime whose text goes through libldptext never builds this pipeline, and
        # the module costs a few MiB of resident memory
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_str(tokenizer_json)
        self._tok.no_padding()
        self._tok.no_truncation()
        # A user who types "[MASK]" or "[CLS]" wrote ordinary text: special tokens are never matched
        # in input (else the literal would become a special id, which the mechanisms refuse or
        # treat as markup). libldptext's tokenizer does the same (native/lib/tokenizer.c).
        self._tok.encode_special_tokens = True
        spec = json.loads(tokenizer_json)
        model = spec.get("model", {})
        pre = spec.get("pre_tokenizer") or {}
        if pre.get("type") == "Sequence":
            pre = (pre.get("pretokenizers") or [{}])[0] or {}
        self._split_long = pre.get("type") in _WHITESPACE_PRETOKENIZERS
        self.kind = "wordpiece" if model.get("type") == "WordPiece" else "word"
        vocab = self._tok.get_vocab(with_added_tokens=True)
        tokens = [""] * (max(vocab.values()) + 1)
        for tok, i in vocab.items():
            tokens[i] = tok
        prefix = model.get("continuing_subword_prefix", "##") if self.kind == "wordpiece" else None
        pieces = [t[len(prefix):] if prefix and t.startswith(prefix) else " " + t for t in tokens]
        self._pieces = np.array(pieces, dtype=object)

    @classmethod
    def from_bundle(cls, bundle: "Bundle") -> "TextTokenizer":
        """The tokenizer stored in a verified bundle as the blob ``tokenizer.json``.

        Parameters
        ----------
        bundle : Bundle
            A verified bundle.

        Returns
        -------
        TextTokenizer

        Raises
        ------
        BundleFormatError
            The blob is missing, not UTF-8, or not a loadable tokenizer (the library's message is
            not repeated).
        """
        try:
            return cls(bundle.blob("tokenizer.json").decode("utf-8"))
        except BundleError:
            raise
        except Exception:
            raise BundleFormatError("bundle tokenizer.json cannot be loaded") from None

    def encode(self, text: str) -> np.ndarray:
        """Token ids of one text, no special tokens added.

        Parameters
        ----------
        text : str

        Returns
        -------
        np.ndarray of int32, shape (n_tokens,)

        Raises
        ------
        InputError
            Not a string, or the tokenizer failed (the text is never quoted).
        """
        return self.encode_batch([text])[0]

    def encode_batch(self, texts: list[str]) -> list[np.ndarray]:
        """Token ids of several texts (same order), no special tokens added.

        Parameters
        ----------
        texts : list of str

        Returns
        -------
        list of np.ndarray of int32, each of shape (n_tokens_i,)

        Raises
        ------
        InputError
            A document is not a string, or the tokenizer failed (the text is never quoted).
        """
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise InputError(f"document {i} is {type(t).__name__}, not str", document=i)
        pieces, owner = [], []
        for i, t in enumerate(texts):
            for piece in (_split_at_whitespace(t, PIECE_CHARS) if self._split_long else [t]):
                pieces.append(piece)
                owner.append(i)
        # encode_batch_fast (tokenizers >= 0.21) skips the character offsets we never use
        encode = getattr(self._tok, "encode_batch_fast", self._tok.encode_batch)
        try:
            encs = encode(pieces, add_special_tokens=False)
        except Exception:  # the library's message may quote the text: never re-raise it
            raise InputError("the tokenizer could not process the input") from None
        ids: list[list[np.ndarray]] = [[] for _ in texts]
        for i, e in zip(owner, encs):
            ids[i].append(np.asarray(e.ids, dtype=np.int32))
        return [np.concatenate(parts) if len(parts) != 1 else parts[0] for parts in ids]

    def decode(self, ids: np.ndarray) -> str:
        """Text of token ids by table lookup (fast; every id is shown, special tokens included).

        Parameters
        ----------
        ids : np.ndarray of int, shape (n,)

        Returns
        -------
        str
        """
        text = "".join(self._pieces[np.asarray(ids, dtype=np.int64)].tolist()).lstrip(" ")
        if self.kind == "wordpiece":
            for a, b in _CLEANUP:
                text = text.replace(a, b)
        return text

    def decode_batch(self, batch: list[np.ndarray]) -> list[str]:
        """:meth:`decode` of each id sequence.

        Parameters
        ----------
        batch : list of np.ndarray of int

        Returns
        -------
        list of str
        """
        return [self.decode(ids) for ids in batch]

    def decode_generated(self, ids: Sequence[int] | np.ndarray) -> str:
        """Text of ids a model generated: the tokenizer's own decoder, special tokens dropped.

        Parameters
        ----------
        ids : sequence of int or np.ndarray of int, shape (n,)

        Returns
        -------
        str
            Exactly ``tokenizers.Tokenizer.decode(ids, skip_special_tokens=True)``.
        """
        return self._tok.decode([int(t) for t in ids], skip_special_tokens=True)


def _split_at_whitespace(text: str, limit: int) -> list[str]:
    """Pieces of at most about ``limit`` characters, each cut just after a whitespace character
    (a text with no whitespace for longer than ``limit`` is cut there: one very long "word")."""
    if len(text) <= limit:
        return [text]
    pieces, start = [], 0
    while len(text) - start > limit:
        cut = max(text.rfind(" ", start, start + limit), text.rfind("\n", start, start + limit))
        cut = start + limit if cut <= start else cut + 1
        pieces.append(text[start:cut])
        start = cut
    pieces.append(text[start:])
    return pieces
