"""SanText+'s non-sensitive set V_N (released in the clear with probability 1 − p): by default only
closed-class function words and punctuation, never names, places, numbers, health, religion or
sexuality words; special and out-of-vocabulary rows are always sensitive and never kept. Checked on
the real packaged embeddings (GloVe 6B-50d 50k words, MiniLM WordPiece)."""
import string

import numpy as np
import pytest

from conftest import load_seeded

# words users call sensitive; the frequency split puts some of them into V_N (released in the clear):
# at w = 0.98 on GloVe 50k the names, places, hospital, bank, police, court, death, sex, church and the
# digits (not cancer, gay, muslim, jewish, prison, arrested or 1990); at w = 0.9 on MiniLM all but 1990
SENSITIVE_WORDS = ["john", "james", "david", "michael", "london", "washington", "india", "hospital", "bank",
                   "police", "court", "death", "sex", "church", "cancer", "gay", "muslim", "jewish",
                   "prison", "arrested", *"0123456789", "1990"]


@pytest.fixture(scope="module", params=["glove-6b-50d", "minilm-wordpiece"])
def real(request):
    from ldptext_precompute.santext.embeddings import load_embeddings
    return load_embeddings(request.param)


def test_default_non_sensitive_set_is_closed_class_words_only(real):
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
    from ldptext_precompute.santext.build import split_domain
    from ldptext_precompute.santext.function_words import CLOSED_CLASS, PUNCTUATION_MARKS
    d = split_domain(real, mechanism="santext+")
    index = {t: i for i, t in enumerate(real.vocab)}
    for w in SENSITIVE_WORDS:
        i = index[w]  # every one of them is a token of both vocabularies
        assert d.sensitive[i] and not d.keep_row[i], f"{w!r} would be released in the clear"
    kept = [real.vocab[i] for i in np.flatnonzero(d.keep_row)]
    assert {"the", "of", "and", "is", ",", "."} <= set(kept)
    assert set(kept) <= CLOSED_CLASS | PUNCTUATION_MARKS
    assert set(kept) <= set(ENGLISH_STOP_WORDS) | set(string.punctuation)  # the public list
    assert not any(ch.isdigit() for w in kept for ch in w)
    assert not np.any(d.keep_row.astype(bool) & real.special)
    assert d.non_sensitive == "function-words"


def test_the_runtime_list_is_the_derived_one():
    """The runtime's list (what every door checks a function-words bundle against) is the closed
    classes ∩ scikit-learn's public stop-word list, plus punctuation marks, derived again here."""
    from ldptext.function_words import FUNCTION_WORDS, is_function_word
    from ldptext_precompute.santext.function_words import derived_function_words
    assert FUNCTION_WORDS == derived_function_words()
    assert all(w.isascii() and "k" not in w for w in FUNCTION_WORDS)  # ASCII lowercasing decides the same
    assert is_function_word("The") and is_function_word(",") and not is_function_word("##the")


def test_frequency_and_file_splits_remain_available(tmp_path):
    from ldptext.errors import ParameterError
    from ldptext_precompute.santext.build import parse_non_sensitive, split_domain
    from ldptext_precompute.santext.embeddings import load_embeddings
    emb = load_embeddings("glove-6b-50d", 2000)
    freq = split_domain(emb, mechanism="santext+", non_sensitive="frequency:0.9")
    assert freq.keep_row.sum() == 2000 - round(0.9 * 2000)  # <unk> is not among the words counted
    assert split_domain(emb, mechanism="santext+", w=0.9).keep_row.tolist() == freq.keep_row.tolist()
    words = tmp_path / "ns.txt"
    words.write_text("the\nof\n\n<unk>\nnotaword\n", encoding="utf-8")
    d = split_domain(emb, mechanism="santext+", non_sensitive=str(words))
    assert sorted(emb.vocab[i] for i in np.flatnonzero(d.keep_row)) == ["of", "the"]
    assert d.sensitive[emb.vocab.index("<unk>")]
    for bad in ("frequency:x", "frequency:1.5", str(tmp_path / "missing.txt")):
        with pytest.raises(ParameterError):
            parse_non_sensitive(bad)
    with pytest.raises(ParameterError):
        parse_non_sensitive("function-words", 0.9)


def check_special_rows(san):
    special = np.array([t in ("<unk>", "[UNK]") or (t.startswith("[") and t.endswith("]"))
                        for t in san.vocab])
    assert not san.tables.keep_row[special].any()
    assert san.sensitive[special & san.valid_input].all()
    assert not np.isin(np.flatnonzero(special), san.outputs).any()
    unk = san.vocab.index("[UNK]" if "[UNK]" in san.vocab else "<unk>")
    probs = san.probabilities([unk])[0]
    assert probs[unk] == 0.0 and probs[special].sum() == 0.0  # never released as itself
    assert probs.sum() == pytest.approx(1.0, abs=1e-12)
    y = san.sample_ids(np.full(20000, unk))
    assert unk not in set(y.tolist())


@pytest.mark.slow
def test_minilm_unk_is_sensitive_even_under_the_frequency_split(minilm_bundle):
    san = load_seeded(minilm_bundle)
    assert san.mechanism == "santext+" and san.manifest["params"]["w"] == 0.9
    check_special_rows(san)


def test_glove_unk_is_sensitive_even_when_public_frequencies_rank_it_first(tmp_path):
    from ldptext_precompute.santext.build import build_santext_bundle
    from ldptext_precompute.santext.embeddings import load_embeddings
    emb = load_embeddings("glove-6b-50d", 3000)
    freqs = np.linspace(1.0, 0.0, len(emb.vocab))
    freqs[emb.vocab.index("<unk>")] = 2.0  # the most frequent row by the supplied list
    path = build_santext_bundle(tmp_path / "g.ldpb", loaded=emb, epsilon=3.0, mechanism="santext+",
                                p=0.3, w=0.5, frequencies=freqs, head_size=16, progress=False)
    san = load_seeded(path)
    check_special_rows(san)
    oov = san.sanitize_batch(["zzqxunknownword"] * 200)
    assert all(r.text != "<unk>" for r in oov)
