"""Tokenizer of a bundle: a Hugging Face ``tokenizers`` pipeline serialised as JSON inside the
bundle (WordPiece for MiniLM, word level for GloVe). Special tokens are never added when encoding."""
from __future__ import annotations

import numpy as np
from tokenizers import Tokenizer

from .errors import InputError


class TextTokenizer:
    def __init__(self, tokenizer_json: str) -> None:
        self._tok = Tokenizer.from_str(tokenizer_json)
        self._tok.no_padding()
        self._tok.no_truncation()

    def encode(self, text: str) -> np.ndarray:
        return self.encode_batch([text])[0]

    def encode_batch(self, texts: list[str]) -> list[np.ndarray]:
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise InputError(f"document {i} is {type(t).__name__}, not str")
        try:
            encs = self._tok.encode_batch(texts, add_special_tokens=False)
        except Exception:  # the library's message may quote the text: never re-raise it
            raise InputError("the tokenizer could not process the input") from None
        return [np.asarray(e.ids, dtype=np.int32) for e in encs]

    def decode(self, ids: np.ndarray) -> str:
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=False)

    def decode_batch(self, batch: list[np.ndarray]) -> list[str]:
        return self._tok.decode_batch([[int(i) for i in ids] for ids in batch],
                                      skip_special_tokens=False)
