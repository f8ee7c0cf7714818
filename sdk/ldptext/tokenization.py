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
import re
from typing import TYPE_CHECKING, Sequence

import numpy as np
from .errors import BundleError, BundleFormatError, BundleIntegrityError, InputError, ParameterMismatchError

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
        # what the checks of a bundle's open read (its (token, id) pairs, its pipeline), kept from
        # this one parse: parsing again took 0.05 s for GloVe-50k
        self._spec = {k: spec.get(k) for k in ("model", "added_tokens", "normalizer", "pre_tokenizer")}
        self._tokens = tokens
        self._prefix = prefix or None  # "": no piece attaches (as decode)
        self._context: tuple[str, int] | None | bool = False  # read_back's prefix word (False: not yet)
        self._shortcut: _AsciiShortcut | None | bool = False  # (False: not yet)

    @property
    def unk_id(self) -> int | None:
        """The id unknown words map to (the model's ``unk_token``), or None where it has none."""
        unk = (self._spec.get("model") or {}).get("unk_token")
        return None if unk is None else self._tok.token_to_id(unk)

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

    # ---- what a released id renders as (the rules of native/lib/tokenizer.c's
    # ldp_tokenizer_check_vocab and ldp_tokenizer_check_outputs; a bundle's runtime checks both
    # when it opens it, vocab first)

    def agrees_with_vocab(self, vocab: Sequence[str]) -> bool:
        """Whether this tokenizer's tokens are exactly the rows of ``vocab`` (the bundle's vocab.json).

        Every (token, id) pair of the tokenizer JSON (``model.vocab`` and each non-empty added
        token) must have ``0 <= id < len(vocab)`` and ``vocab[id] == token``; no token may have two
        ids, and every row must have its token. Tokens and rows are then one bijection: a released
        id renders as the word its row's embedding (and so the metric) was built over. The
        library's own table, which :meth:`decode` and :meth:`encode` use, must be those pairs too.

        Parameters
        ----------
        vocab : sequence of str
            Row i's token.

        Returns
        -------
        bool
        """
        n = len(vocab)
        if not all(isinstance(w, str) for w in vocab):
            return False
        spec = self._spec
        model_vocab = (spec.get("model") or {}).get("vocab")
        added = spec.get("added_tokens") or []
        if not isinstance(model_vocab, dict) or not isinstance(added, list):
            return False
        pairs = list(model_vocab.items())
        for a in added:
            if not isinstance(a, dict) or not isinstance(a.get("content"), str):
                return False
            if a["content"]:  # an empty added token is ignored (tokenizers, libldptext)
                pairs.append((a["content"], a.get("id")))
        ids: dict[str, int] = {}
        for tok, i in pairs:
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n or vocab[i] != tok:
                return False
            if ids.setdefault(tok, i) != i:
                return False
        return len(set(ids.values())) == n and self._tok.get_vocab(with_added_tokens=True) == ids

    def check_vocab(self, vocab: Sequence[str]) -> None:
        """Refuse a tokenizer that disagrees with the bundle's vocab.json (:meth:`agrees_with_vocab`).

        Raises
        ------
        BundleIntegrityError
            libldptext's LDP_E_TOKENIZER.
        """
        if not self.agrees_with_vocab(vocab):
            raise BundleIntegrityError("bundle tokenizer.json disagrees with its vocab.json")

    def read_back(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """Whether each id, released, is read back by this tokenizer as itself.

        An id is released as its token's text (:meth:`decode`): a word-level token or a WordPiece
        whole word as itself after a space, a WordPiece continuation ``##x`` as ``x`` attached to
        the piece before it. It reads back as itself when:

        * that text (``x`` for a continuation) is not empty and holds no character that BERT's
          clean-up removes or that is whitespace (control and format characters such as U+200B,
          private use, U+FFFD, spaces): the same classes as libldptext's tables;
        * a whole word or word-level token: encoding the token gives exactly ``[id]``;
        * a continuation: encoding ``P + x`` gives exactly ``[id(P), id]``, where ``P`` is the
          tokenizer's context word (:meth:`context_word`), the longest whole word that reads back
          itself. No word the tokenizer can read is longer, so reading ``P + x`` stops after ``P``
          and reads ``x`` as a continuation unless ``x`` itself changes the reading (punctuation,
          a CJK character, an accent that is stripped, a combining mark that joins ``P``'s last
          letter): then the piece is not read back. Without a context word no continuation is.

        A token the normalizer changes (upper case under lower-casing, accents under
        ``strip_accents``, a compatibility character under NFKC) encodes as another id, or the
        unknown one, so it never reads back: its text would be read as a different token (an
        input's look-alike), and no input can ever be that id.

        Parameters
        ----------
        ids : sequence of int or np.ndarray of int, shape (n,)

        Returns
        -------
        np.ndarray of bool, shape (n,)
            False also for an id outside the tokenizer's range or without a token.
        """
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        ok = np.zeros(ids.size, dtype=bool)
        texts: list[str] = []
        expect: list[list[int]] = []
        where: list[int] = []
        if self._shortcut is False:
            self._shortcut = _AsciiShortcut.of(self._tok, self._spec)
        fast = self._shortcut
        for k, i in enumerate(ids.tolist()):
            if not 0 <= i < len(self._tokens):
                continue
            tok = self._tokens[i]
            if self._prefix and tok.startswith(self._prefix):
                shown, ctx = tok[len(self._prefix):], self.context_word()
                if ctx is None or not _visible(shown):
                    continue
                r = fast.continuation(ctx, shown, tok, i) if fast is not None else None
                texts.append(ctx[0] + shown)
                expect.append([ctx[1], i])
            else:
                if not _visible(tok):
                    continue
                r = fast.whole(tok, i) if fast is not None else None
                texts.append(tok)
                expect.append([i])
            if r is not None:  # certain without encoding
                ok[k] = r
                texts.pop()
                expect.pop()
                continue
            where.append(k)
        for k, e, enc in zip(where, expect, self._encode_exact(texts)):
            ok[k] = enc == e
        return ok

    def check_outputs(self, outputs: Sequence[int] | np.ndarray) -> None:
        """Refuse an output id that is not read back as itself (:meth:`read_back`).

        Raises
        ------
        ParameterMismatchError
            libldptext's LDP_E_PARAMETER_MISMATCH (the message names how many, never a token).
        """
        ok = self.read_back(outputs)
        if not ok.all():
            raise ParameterMismatchError(f"{int((~ok).sum())} output tokens of the bundle are not read "
                                         "back as themselves by its tokenizer (they render as other text)")

    def context_word(self) -> tuple[str, int] | None:
        """The whole word continuation pieces are read back after (:meth:`read_back`): of the
        WordPiece tokens that are not continuations, have visible text and encode as exactly
        themselves, the longest in UTF-8 bytes (the smallest id among equals). None for a word-level
        tokenizer or when there is none. Being longest, no longer word that reads back can be read
        in its place at the start of ``P + x``."""
        if self._context is False:
            self._context = None
            if self.kind == "wordpiece":
                cands = sorted((-len(t.encode("utf-8")), i) for i, t in enumerate(self._tokens)
                               if t and not (self._prefix and t.startswith(self._prefix)) and _visible(t))
                for s in range(0, len(cands), 256):  # the first one nearly always reads back
                    chunk = [i for _, i in cands[s:s + 256]]
                    encs = self._encode_exact([self._tokens[i] for i in chunk])
                    hit = next((i for i, e in zip(chunk, encs) if e == [i]), None)
                    if hit is not None:
                        self._context = (self._tokens[hit], hit)
                        break
        return self._context  # type: ignore[return-value]

    def _encode_exact(self, texts: list[str]) -> list[list[int]]:
        """Ids of each text, whole (no cut at whitespace), no special tokens added."""
        if not texts:
            return []
        encode = getattr(self._tok, "encode_batch_fast", self._tok.encode_batch)
        return [e.ids for e in encode(texts, add_special_tokens=False)]


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


# ASCII a released token must not hold: controls, DEL and whitespace (libldptext's ASCII classes)
_ASCII_HIDDEN = re.compile(r"[\x00-\x20\x7f]")
_CLEAN = None


def _visible(text: str) -> bool:
    """Non-empty, and no character that BERT's clean_text removes (control, format, private use,
    U+FFFD) or maps to a space (whitespace), nor a space: Hugging Face tokenizers' own classes, from
    which libldptext's tables are generated (native/lib/gen_unicode_tables.py)."""
    global _CLEAN
    if not text:
        return False
    if text.isascii():
        return _ASCII_HIDDEN.search(text) is None
    if _CLEAN is None:
        from tokenizers import normalizers

        _CLEAN = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=False,
                                            strip_accents=False, lowercase=False)
    return " " not in text and _CLEAN.normalize_str(text) == text


class _AsciiShortcut:
    """What encoding a visible ASCII token (or a context word + an ASCII continuation) gives, found
    without running the tokenizer where that is certain (libldptext's ascii_reads_back and
    ascii_continuation_reads_back, the same reasoning): the GloVe-50k check took about a second
    through ``tokenizers``, 0.05 s with this. Only for the pipelines libldptext implements and no
    non-special added token (none is then matched in text)."""

    _NORMALIZERS = {"BertNormalizer", "Lowercase", "NFC", "NFD", "NFKC", "NFKD", "StripAccents"}
    _PRE_TOKENIZERS = {"BertPreTokenizer", "WhitespaceSplit"}

    def __init__(self, tok, model: dict) -> None:
        printable = [chr(c) for c in range(33, 127)]
        norm, pre = tok.normalizer, tok.pre_tokenizer
        # ASCII the normalizers change (only lowercase does) and that the pre-tokenizer splits off
        unstable = [c for c in printable if norm is not None and norm.normalize_str(c) != c]
        split = [c for c in printable if pre is not None and len(pre.pre_tokenize_str("a" + c + "b")) != 1]
        self._unstable = re.compile("[" + re.escape("".join(unstable)) + "]") if unstable else None
        self._split = re.compile("[" + re.escape("".join(split)) + "]") if split else None
        self._vocab: dict[str, int] = model["vocab"]
        self._unk: int = self._vocab[model["unk_token"]]
        self._wordpiece = model["type"] == "WordPiece"
        self._max_chars = int(model.get("max_input_chars_per_word", 0)) if self._wordpiece else 0
        self._prefix = model.get("continuing_subword_prefix", "") if self._wordpiece else ""

    @classmethod
    def of(cls, tok, spec: dict) -> "_AsciiShortcut | None":
        """The shortcut of a tokenizer (``tokenizers.Tokenizer`` and its JSON), or None where it
        does not apply."""
        def steps(v, key):
            if v is None:
                return []
            return v.get(key) or [] if v.get("type") == "Sequence" else [v]
        try:
            model = spec["model"]
            ok = (model["type"] in ("WordPiece", "WordLevel") and isinstance(model["vocab"], dict)
                  and model.get("unk_token") in model["vocab"]
                  and all(s.get("type") in cls._NORMALIZERS for s in steps(spec.get("normalizer"), "normalizers"))
                  and all(s.get("type") in cls._PRE_TOKENIZERS
                          for s in steps(spec.get("pre_tokenizer"), "pretokenizers"))
                  and all(a.get("special") for a in spec.get("added_tokens") or []))
            return cls(tok, model) if ok else None
        except (AttributeError, KeyError, TypeError, ValueError):
            return None

    def _plain(self, s: str) -> bool:
        """ASCII that no normalizer changes."""
        return s.isascii() and (self._unstable is None or self._unstable.search(s) is None)

    def whole(self, s: str, y: int) -> bool | None:
        """Whether visible ``s`` encodes as exactly ``[y]``; None when not certain."""
        if not self._plain(s):
            return None
        if len(s) > 1 and self._split is not None and self._split.search(s):
            return False  # two words or more, each one id at least
        if not self._wordpiece:
            return self._vocab.get(s, self._unk) == y
        if len(s) > self._max_chars:
            return self._unk == y
        i = self._vocab.get(s)
        return None if i is None else i == y

    def continuation(self, ctx: tuple[str, int], x: str, token: str, y: int) -> bool | None:
        """Whether ``ctx[0] + x`` encodes as exactly ``[ctx[1], y]`` (``token``: y's, the prefix +
        x); None when not certain."""
        word, cid = ctx
        if not (self._plain(word) and self._plain(x)) or self._vocab.get(word) != cid:
            return None
        if self._split is not None and (self._split.search(word) or self._split.search(x)):
            return None
        text = word + x
        if len(text) > self._max_chars:
            return False  # read as one unknown word
        if any(text[:k] in self._vocab for k in range(len(word) + 1, len(text) + 1)):
            return None  # a longer word than the context word comes first
        i = self._vocab.get(self._prefix + x)
        return None if i is None or self._prefix + x != token else i == y
