"""What a released token renders as: a bundle's tokenizer agrees with its vocab.json, and every output
id is read back by that tokenizer as itself.

Both runtimes are checked (sdk/ldptext/tokenization.py ``TextTokenizer.check_vocab`` / ``read_back`` /
``check_outputs``, and native/lib/tokenizer.c through the tool native/build/tests/check_rendering)
against a reference written here from Hugging Face ``tokenizers``' own ``encode`` and ``unicodedata``,
on tokenizers built in the test (word level and WordPiece, with look-alike, split, normalized and
invisible tokens) and on the real GloVe-50k and MiniLM tokenizers."""
from __future__ import annotations

import json
import subprocess
import unicodedata
from pathlib import Path

import numpy as np
import pytest
from tokenizers import AddedToken, Tokenizer, models, normalizers, pre_tokenizers

from ldptext.errors import BundleIntegrityError, ParameterMismatchError
from ldptext.tokenization import TextTokenizer
from test_libldptext import NATIVE, build_library

TOOL = NATIVE / "build" / "tests" / "check_rendering"
E_TOKENIZER, E_PARAMETER_MISMATCH = -111, -100


@pytest.fixture(scope="module")
def tool() -> Path:
    try:
        build_library()
    except subprocess.CalledProcessError as e:
        pytest.fail("libldptext does not build: " + e.stderr.decode(errors="replace")[-2000:])
    return TOOL


def run_c(tool: Path, tmp_path: Path, tokenizer_json: str, vocab_json: bytes | None, n_rows: int,
          ids) -> dict:
    """The C checks of ``ids`` (and, given ``vocab_json``, of the vocabulary)."""
    t, v = tmp_path / "tokenizer.json", tmp_path / "vocab.json"
    t.write_text(tokenizer_json, encoding="utf-8")
    if vocab_json is not None:
        v.write_bytes(vocab_json)
    res = subprocess.run([str(tool), str(t), str(v) if vocab_json is not None else "-", str(n_rows)],
                         input=" ".join(str(int(i)) for i in ids), capture_output=True, text=True,
                         check=True, timeout=300)
    out = dict(line.split(" ", 1) for line in res.stdout.splitlines())
    assert "load" not in out, out
    return {"vocab": int(out["vocab"]), "context": int(out["context"]), "outputs": int(out["outputs"]),
            "ok": np.array([c == "1" for c in out["ok"].strip()], dtype=bool),
            "ms": [float(x) for x in out["ms"].split()]}


# ---- the reference ---------------------------------------------------------------------------------

def _hidden(ch: str) -> bool:
    """A character a reader does not see as text: control, format, private use, surrogate, U+FFFD, or
    whitespace (the classes libldptext takes from tokenizers, for the characters used here)."""
    return ch in "\x00\ufffd" or unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cs") or ch.isspace()


def reference_read_back(tokenizer_json: str, ids) -> tuple[np.ndarray, int]:
    """Whether each id's released text encodes as that id, by ``tokenizers``' encode of each text
    alone, and the context word's id (-1: none): the longest (bytes; smallest id) WordPiece whole
    word that is visible and encodes as itself, found by encoding every one."""
    hf = Tokenizer.from_str(tokenizer_json)
    hf.encode_special_tokens = True
    model = json.loads(tokenizer_json)["model"]
    table = {i: s for s, i in hf.get_vocab(with_added_tokens=True).items()}
    prefix = model.get("continuing_subword_prefix") if model["type"] == "WordPiece" else None

    def enc(text: str) -> list[int]:
        return hf.encode(text, add_special_tokens=False).ids

    def visible(s: str) -> bool:
        return s != "" and not any(_hidden(c) for c in s)

    def continuation(s: str) -> bool:
        return bool(prefix) and s.startswith(prefix)

    context = None
    if prefix is not None:
        whole = [(len(s.encode("utf-8")), -i, s, i) for i, s in table.items()
                 if not continuation(s) and visible(s) and enc(s) == [i]]
        context = max(whole)[2:] if whole else None
    ok = []
    for y in (int(i) for i in ids):
        s = table.get(y)
        if s is None:
            ok.append(False)
        elif continuation(s):
            x = s[len(prefix):]
            ok.append(context is not None and visible(x) and enc(context[0] + x) == [context[1], y])
        else:
            ok.append(visible(s) and enc(s) == [y])
    return np.array(ok, dtype=bool), (-1 if context is None else context[1])


# ---- tokenizers built here -------------------------------------------------------------------------

WORDS = ["hello", "world", "HELLO", "hello\u200b", "hel\u200blo", "u.s.", "1,000", "café", "cafe\u0301",
         "\uff46\uff55\uff4c\uff4c", "full", "a b", "tab\t", "nb\u00a0sp", "pua\ue000", "rep\ufffd", ".",
         "'s", "x" * 150, "\u03a9mega", "\u03c9mega", "line\u2028sep", "soft\u00adhyphen", "<unk>"]

PIECES = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", "affable", "hello",
          "world", "##s", "##.", "##é", "café", "cafe", "##中", "中", ".", "...", "Hello", "##X", "##\u200b",
          "##", "telecom", "tele", "##com", "##comm", "##unication", "a", "##a", "##e", "naïve", "##ï",
          "##ve", "na", "##\u00a0", "##ab\u200bc", "ab"]


def word_level(words: list[str], lowercase: bool = True) -> str:
    """A word-level tokenizer as the builders make one (NFKC, lowercase, BERT pre-tokenizer)."""
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC()] + ([normalizers.Lowercase()] if lowercase else []))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok.to_str()


def word_piece(pieces: list[str], *, lowercase: bool = True, strip_accents: bool | None = None,
               max_chars: int = 100, added: list | None = None) -> str:
    """A BERT-style WordPiece tokenizer with its special tokens (and ``added`` tokens)."""
    tok = Tokenizer(models.WordPiece({w: i for i, w in enumerate(pieces)}, unk_token="[UNK]",
                                     max_input_chars_per_word=max_chars))
    tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=strip_accents)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.add_special_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    if added:
        tok.add_tokens(added)
    return tok.to_str()


def table_of(tokenizer_json: str) -> list[str]:
    """Row i's token, as the builders write vocab.json."""
    vocab = Tokenizer.from_str(tokenizer_json).get_vocab(with_added_tokens=True)
    rows = [""] * (max(vocab.values()) + 1)
    for s, i in vocab.items():
        rows[i] = s
    return rows


CASES = {
    "word-lowercase": lambda: word_level(WORDS),
    "word-cased": lambda: word_level(WORDS, lowercase=False),
    "wordpiece-uncased": lambda: word_piece(PIECES),
    "wordpiece-cased-accents-kept": lambda: word_piece(PIECES, lowercase=False, strip_accents=False),
    "wordpiece-short-words": lambda: word_piece(PIECES, max_chars=10),
    "wordpiece-added": lambda: word_piece(PIECES, added=[AddedToken("zq", normalized=False),
                                                         AddedToken("##zz", normalized=True), "wom"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_id_as_the_reference_reads_it_back(tool, tmp_path, case):
    tj = CASES[case]()
    rows = table_of(tj)
    ids = np.arange(len(rows) + 2)  # two past the end: no token, never read back
    want, context = reference_read_back(tj, ids)
    tok = TextTokenizer(tj)
    got_py = tok.read_back(ids)
    c = run_c(tool, tmp_path, tj, json.dumps(rows).encode(), len(rows), ids)
    bad = lambda got: [rows[i] if i < len(rows) else i for i in np.flatnonzero(got != want)]  # noqa: E731
    assert bad(got_py) == [] and bad(c["ok"]) == []
    assert c["context"] == context == (-1 if tok.context_word() is None else tok.context_word()[1])
    assert want.any() and not want.all()  # the fixture has both kinds
    if case == "word-lowercase":
        readable = {rows[i] for i in np.flatnonzero(want)}
        assert readable == {"hello", "world", "café", "full", ".", "x" * 150, "\u03c9mega"}
    if case == "wordpiece-uncased":
        assert rows[context] in ("affable", "telecom") and context == rows.index("affable")
        readable = {rows[i] for i in np.flatnonzero(want)}
        assert {"un", "##aff", "##able", "##s", "##com", "##unication", "##ve", "hello"} <= readable
        # punctuation, accents (stripped), CJK (isolated), upper case, invisible: never read back
        assert not readable & {"##.", "##é", "##中", "Hello", "##X", "##\u200b", "##", "...", "naïve",
                               "##ï", "[CLS]", "##\u00a0", "##ab\u200bc"}
    # the verdict on the whole set is the conjunction, in both runtimes
    good = ids[want]
    assert run_c(tool, tmp_path, tj, None, 0, good)["outputs"] == 0
    assert c["outputs"] == E_PARAMETER_MISMATCH
    tok.check_outputs(good)
    with pytest.raises(ParameterMismatchError):
        tok.check_outputs(ids)


def test_look_alike_outputs_are_refused(tool, tmp_path):
    """c9-look-alike-outputs: output tokens renamed, in the tokenizer and vocab.json alike, to the
    input word upper-cased and with zero-width spaces: the two agree, but no look-alike reads back."""
    words = [f"w{i}" for i in range(12)] + ["secret", "<unk>"]
    renamed = list(words)
    for k, i in enumerate(range(3, 8)):
        renamed[i] = "SECRET" + "\u200b" * k
    vocab = {w: i for i, w in enumerate(renamed)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tj = tok.to_str()
    outputs = np.arange(len(words) - 1)
    t = TextTokenizer(tj)
    t.check_vocab(renamed)
    assert t.read_back(outputs).tolist() == [i not in range(3, 8) for i in outputs]
    with pytest.raises(ParameterMismatchError) as e:
        t.check_outputs(outputs)
    assert "SECRET" not in str(e.value) and "secret" not in str(e.value)
    c = run_c(tool, tmp_path, tj, json.dumps(renamed).encode(), len(renamed), outputs)
    assert (c["vocab"], c["outputs"]) == (0, E_PARAMETER_MISMATCH)
    assert c["ok"].tolist() == t.read_back(outputs).tolist()


def _vocab_verdicts(tool, tmp_path, tj: str, rows: list, raw: bytes | None = None) -> tuple[int, bool]:
    """(C's code, whether Python accepts) for vocab.json ``raw`` (default: json.dumps(rows))."""
    raw = json.dumps(rows).encode() if raw is None else raw
    c = run_c(tool, tmp_path, tj, raw, len(rows), [])["vocab"]
    try:
        TextTokenizer(tj).check_vocab(rows)
        py = True
    except BundleIntegrityError:
        py = False
    return c, py


@pytest.mark.parametrize("case", sorted(CASES))
def test_tokenizer_agrees_with_vocab(tool, tmp_path, case):
    tj = CASES[case]()
    rows = table_of(tj)
    assert _vocab_verdicts(tool, tmp_path, tj, rows) == (0, True)
    # c9-tokenizer-disagrees-with-vocab: the tokenizer renames ids, vocab.json does not
    spec = json.loads(tj)
    v = spec["model"]["vocab"]
    for w in ("hello", "world"):
        v["X" + w] = v.pop(w)
    assert _vocab_verdicts(tool, tmp_path, json.dumps(spec), rows) == (E_TOKENIZER, False)
    # vocab.json renamed instead, one row shorter or longer, a row's token swapped with another's
    for other in ([r if r != "world" else "WORLD" for r in rows], rows[:-1], rows + ["extra"],
                  [rows[1], rows[0]] + rows[2:]):
        assert _vocab_verdicts(tool, tmp_path, tj, other) == (E_TOKENIZER, False)


def test_a_second_id_for_one_token_is_refused(tool, tmp_path):
    """Two ids rendering as one token (an added token repeating a vocabulary token under another id,
    vocab.json repeating it too): the rows no longer name their tokens one to one."""
    tj = word_piece(PIECES)
    rows = table_of(tj)
    spec = json.loads(tj)
    spec["model"]["vocab"]["extra"] = len(rows)
    spec["added_tokens"].append({"id": len(rows) + 1, "content": "hello", "single_word": False, "lstrip": False,
                                 "rstrip": False, "normalized": False, "special": False})
    doubled = rows + ["extra", "hello"]
    c, py = _vocab_verdicts(tool, tmp_path, json.dumps(spec), doubled)
    assert (c, py) == (E_TOKENIZER, False)


@pytest.mark.parametrize("raw, ok", [
    (lambda rows: json.dumps(rows, ensure_ascii=False), True),
    (lambda rows: json.dumps(rows, indent=2), True),
    (lambda rows: " \n" + json.dumps(rows).replace(", ", ",\t") + "\r\n", True),
    (lambda rows: json.dumps(rows).replace('"hello"', '"\\u0068el\\u006Co"'), True),
    (lambda rows: json.dumps(rows)[:-1], False),
    (lambda rows: json.dumps(rows)[:-1] + ",]", False),
    (lambda rows: json.dumps(rows) + "x", False),
    (lambda rows: json.dumps(rows) + "[]", False),
    (lambda rows: json.dumps(rows).replace('"hello"', '"hel\\x6co"'), False),
    (lambda rows: json.dumps(rows).replace('"hello"', '"hello\\ud800"'), False),
    (lambda rows: json.dumps(rows).replace('"hello"', '"hello\\udc00"'), False),
    (lambda rows: json.dumps(rows).replace('"hello"', '"hel\tlo"'), False),
    (lambda rows: json.dumps(rows).replace('"hello"', '["hello"]'), False),
    (lambda rows: json.dumps(rows).replace('"hello"', "1"), False),
    (lambda rows: json.dumps(rows).replace('"hello"', "'hello'"), False),
    (lambda rows: json.dumps({"vocab": rows}), False),
])
def test_vocab_json_is_read_as_python_reads_it(tool, tmp_path, raw, ok):
    """libldptext reads vocab.json itself (not through a tree: fast); what Python's json reads as the
    same list is accepted, anything else refused. (The escapes of "café", "naïve", "中" are \\u
    escapes in json.dumps's default.)"""
    tj = word_piece(PIECES)
    rows = table_of(tj)
    text = raw(rows)
    assert run_c(tool, tmp_path, tj, text.encode(), len(rows), [])["vocab"] == (0 if ok else E_TOKENIZER)
    if ok:
        assert json.loads(text) == rows
    assert run_c(tool, tmp_path, tj, b"\xff" + text.encode(), len(rows), [])["vocab"] == E_TOKENIZER


# ---- the builders --------------------------------------------------------------------------------

def _embeddings(words: list[str], seed: int = 3):
    from ldptext_precompute.santext.embeddings import from_word_vectors
    rng = np.random.default_rng(seed)
    return from_word_vectors(words, rng.normal(size=(len(words), 6)).astype(np.float32), "rendering-test")


ODD = ["u.s.", "1,000", "mid\u200bdle", "nb\u00a0sp", "'s"]


def test_split_domain_leaves_out_what_is_not_read_back():
    from ldptext_precompute.santext.build import split_domain
    emb = _embeddings([f"w{i}" for i in range(30)] + ODD)
    odd = [emb.vocab.index(w) for w in ODD]
    for mechanism in ("santext", "santext+"):
        d = split_domain(emb, mechanism=mechanism, non_sensitive="function-words")
        assert not np.isin(odd, d.outputs).any() and d.not_read_back == len(ODD)
        assert d.sensitive[odd].all()  # still inputs, sanitized from their rows
        assert TextTokenizer(emb.tokenizer_json).read_back(d.outputs).all()


@pytest.mark.parametrize("builder", ["santext", "tem", "custext"])
def test_builders_state_and_apply_the_rule(tmp_path, builder):
    from ldptext.bundle import open_unverified
    emb = _embeddings([f"w{i}" for i in range(40)] + ODD)
    common = dict(embeddings="unused", loaded=emb, epsilon=2.0, progress=False, allow_weak_privacy=True)
    out = tmp_path / f"{builder}.ldpb"
    if builder == "santext":
        from ldptext_precompute.santext.build import build_santext_bundle
        build_santext_bundle(out, head_size=4, verbatim_cap=None, **common)
    elif builder == "tem":
        from ldptext_precompute.tem.build import build_tem_bundle
        build_tem_bundle(out, head_size=4, **common)
    else:
        from ldptext_precompute.custext.build import build_custext_bundle
        build_custext_bundle(out, k=4, **common)
    b, _ = open_unverified(out)
    assert b.manifest["privacy"]["not_outputs"]["not_read_back"] == len(ODD)
    outputs = np.asarray(b.arrays["outputs"])
    rows = json.loads(bytes(b.arrays["blob/vocab.json"]))
    t = TextTokenizer(bytes(b.arrays["blob/tokenizer.json"]).decode())
    t.check_vocab(rows)
    t.check_outputs(outputs)
    assert not {rows[i] for i in outputs} & set(ODD)


# ---- the real tokenizers ---------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name", ["glove-6b-50d", "minilm-wordpiece"])
def test_real_tokenizers(tool, tmp_path, name):
    """Every id of the packaged GloVe-50k and MiniLM tokenizers, three ways; both checks of the honest
    output domain pass in C within a few milliseconds (printed)."""
    from ldptext_precompute.santext.embeddings import load_embeddings
    try:
        emb = load_embeddings(name)
    except ModuleNotFoundError as e:  # pragma: no cover - the asset packages are in requirements
        pytest.skip(f"{e.name} is not installed")
    ids = np.arange(len(emb.vocab))
    want, context = reference_read_back(emb.tokenizer_json, ids)
    tok = TextTokenizer(emb.tokenizer_json)
    tok.check_vocab(emb.vocab)
    assert (tok.read_back(ids) == want).all()
    c = run_c(tool, tmp_path, emb.tokenizer_json, json.dumps(emb.vocab).encode(), len(emb.vocab), ids)
    assert c["vocab"] == 0 and (c["ok"] == want).all() and c["context"] == context
    outputs = ids[want & ~emb.special]
    c = run_c(tool, tmp_path, emb.tokenizer_json, json.dumps(emb.vocab).encode(), len(emb.vocab), outputs)
    assert (c["vocab"], c["outputs"]) == (0, 0)
    print(f"\n[rendering] {name}: {int((~want & ~emb.special).sum())} of {int((~emb.special).sum())} "
          f"non-special tokens not read back; C check_vocab {c['ms'][0]:.1f} ms, "
          f"check_outputs {c['ms'][1]:.1f} ms")
