"""``ldptext evaluate`` on users' own data: multiclass CSV / JSONL, the tuned classifier, warnings,
checkpoints that survive a late failure, and clear errors on bad input before anything is sampled.

Every fixture is generated here and tiny (a 33-word embedding file, at most 150 documents)."""
import json
import sys

import numpy as np
import pytest

pytest.importorskip("ldptext.santext")
pytest.importorskip("ldptext_precompute.santext.build")
pytest.importorskip("sklearn")
pytest.importorskip("matplotlib")

from conftest import CallCounter  # noqa: E402
from ldptext.errors import InputError  # noqa: E402
from ldptext_precompute.evaluation import metrics, runner, sampling, scoring  # noqa: E402
from ldptext_precompute.evaluation.runner import EvaluationConfig, evaluate  # noqa: E402

TOPICS = {"sport": ["goal", "match", "team", "coach"], "food": ["bread", "soup", "salad", "cheese"],
          "music": ["guitar", "song", "drum", "choir"], "tech": ["laptop", "code", "server", "chip"],
          "travel": ["train", "hotel", "beach", "flight"]}
COMMON = "the a and of is it this was very my today".split()
SECRET = "zzzsecretword"      # in every document, never in the embeddings: must never reach an output file


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("userdata")
    words = COMMON + [w for ws in TOPICS.values() for w in ws]
    rng = np.random.default_rng(11)
    vecs = rng.normal(size=(len(words), 6))
    for k, ws in enumerate(TOPICS.values()):          # topic words cluster together
        vecs[[words.index(w) for w in ws]] += 4.0 * np.eye(6)[k]
    (d / "emb.txt").write_text("".join(w + " " + " ".join(f"{x:.5f}" for x in v) + "\n"
                                       for w, v in zip(words, vecs)))
    return d


def _doc(rng, topic: str) -> str:
    ws = list(rng.choice(TOPICS[topic], 3)) + list(rng.choice(COMMON, 3)) + [SECRET]
    rng.shuffle(ws)
    return " ".join(ws)


def _config(work, data, out, **kw) -> EvaluationConfig:
    base = dict(out=str(out), data=str(data), embeddings=str(work / "emb.txt"), vocab_size=None,
                mechanisms=["santext"], epsilons=[3.0], baselines=["none", "random"], seeds=1, head_size=4,
                cache_dir=str(work / "cache"), progress=False, plots=False, columns=5, agreement_rows=2)
    return EvaluationConfig(**{**base, **kw})


def _no_secret_anywhere(out) -> None:
    for f in out.rglob("*"):
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes(), f


# -- 1. multiclass, end to end ------------------------------------------------------------------

@pytest.mark.parametrize("fmt, n_classes", [("csv", 5), ("jsonl", 3)])
def test_multiclass_end_to_end(work, tmp_path, fmt, n_classes):
    rng = np.random.default_rng(n_classes)
    topics = list(TOPICS)[:n_classes]
    rows = [(_doc(rng, topics[i % n_classes]), i % n_classes) for i in range(20 * n_classes)]
    if fmt == "csv":                                   # string labels
        data = tmp_path / "topics.csv"
        data.write_text("text,label\n" + "".join(f"{t},{topics[y]}\n" for t, y in rows))
        expected_labels = sorted(topics)
    else:                                              # integer labels
        data = tmp_path / "topics.jsonl"
        data.write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in rows))
        expected_labels = [str(k) for k in range(n_classes)]
    out = tmp_path / "eval"
    res = evaluate(_config(work, data, out, plots=fmt == "csv"))
    assert res["dataset"]["labels"] == expected_labels
    by = {(e["mechanism"], e["epsilon"]): e for e in res["entries"]}
    none = by[("none", None)]["utility"]["sanitized_test"]
    assert none["accuracy"]["mean"] > res["dataset"]["majority_rate_test"] + 0.3   # topics are learnable
    assert 0 < none["macro_f1"]["mean"] <= 1
    for key in (("santext", 3.0), ("random", None)):
        u = by[key]["utility"]
        assert 0 <= u["sanitized_test"]["macro_f1"]["mean"] <= 1
        (hp,) = u["classifier_hyperparameters"]
        assert hp["C"] in res["classifier_settings"]["c_grid"] and hp["class_weight"] in (None, "balanced")
    report = (out / "report.md").read_text()
    assert "Macro-F1 — sanitized test text" in report and "| Majority class |" in report
    assert "hyper-parameters chosen by cross-validation" in report
    if fmt == "csv":
        assert [p for p in res["plots"] if (out / p).read_bytes()[:4] == b"\x89PNG"] == res["plots"]
    _no_secret_anywhere(out)


# -- 2. the tuned classifier --------------------------------------------------------------------

def _imbalanced(rng, n, minority_share=0.2):
    texts, labels = [], []
    for i in range(n):
        y = "rare" if i % int(1 / minority_share) == 0 else "common"
        strong = rng.random() < 0.6                   # the topic word is present only sometimes
        topic = ("food" if y == "rare" else "sport") if strong else str(rng.choice(["food", "sport"]))
        texts.append(_doc(rng, topic))
        labels.append(y)
    return texts, labels


def test_classifier_is_tuned_on_the_training_set_only_and_deterministic():
    from ldptext_precompute.evaluation.utility import C_GRID, ClassifierSettings, fit_and_score, train_and_score
    rng = np.random.default_rng(0)
    train_x, train_y = _imbalanced(rng, 120)
    test_x, test_y = _imbalanced(rng, 40)
    run = fit_and_score(train_x, train_y, {"t": test_x}, test_y, seed=3)
    hp = run.hyperparameters
    assert hp["C"] in C_GRID and hp["class_weight"] in (None, "balanced") and hp["cv_folds"] == 3
    assert 0 <= hp["cv_score"] <= 1
    # deterministic, and blind to the test set: other test labels and texts change nothing chosen
    assert fit_and_score(train_x, train_y, {"t": test_x}, test_y, seed=3) == run
    other = fit_and_score(train_x, train_y, {"t": test_x[::-1]}, test_y[::-1][:20] + test_y[:20], seed=3)
    assert other.hyperparameters == hp
    # the cross-validation decides: a one-point grid is simply used
    one = fit_and_score(train_x, train_y, {"t": test_x}, test_y, seed=3,
                        settings=ClassifierSettings(c_grid=(10.0,), class_weights=("balanced",)))
    assert (one.hyperparameters["C"], one.hyperparameters["class_weight"]) == (10.0, "balanced")
    # multiclass (4 classes, integer labels) through the plain interface
    texts = [_doc(rng, t) for t in list(TOPICS)[:4] for _ in range(10)]
    labels = [k for k in range(4) for _ in range(10)]
    assert train_and_score(texts, labels, {"same": texts}, labels)["same"]["accuracy"] > 0.9


# -- 3. warnings --------------------------------------------------------------------------------

def test_warns_when_unsanitized_does_not_beat_majority_and_on_tiny_classes(work, tmp_path, capsys):
    rng = np.random.default_rng(4)
    # labels unrelated to the text, 92 % one class; a third class with 3 training documents
    lines = ["text,label"]
    for i in range(150):
        lab = "tiny" if i < 4 else ("minor" if i % 12 == 0 else "major")
        lines.append(f"{_doc(rng, str(rng.choice(list(TOPICS))))},{lab}")
    data = tmp_path / "noise.csv"
    data.write_text("\n".join(lines) + "\n")
    out = tmp_path / "eval"
    res = evaluate(_config(work, data, out, baselines=["none"]))
    err = capsys.readouterr().err
    warnings = res["warnings"]
    assert any("majority-class rate" in w for w in warnings)
    assert any("fewer than 5 training documents" in w and "'tiny' (3)" in w for w in warnings)
    saved = json.loads((out / "results.json").read_text())
    assert saved["warnings"] == warnings
    assert all(f"[evaluate] warning: {w}" in err for w in warnings)
    report = (out / "report.md").read_text()
    assert "## Warnings" in report and all(w in report for w in warnings)
    majority = f"{res['dataset']['majority_rate_test']:.4f}"
    assert f"| Majority class | {majority} |" in report and f"majority class {majority}" in warnings[-1]
    assert SECRET not in err


def test_no_warning_on_a_clean_balanced_set(work, tmp_path, capsys):
    rng = np.random.default_rng(9)
    data = tmp_path / "ok.csv"
    data.write_text("text,label\n" + "".join(f"{_doc(rng, t)},{t}\n" for t in ("food", "tech") * 20))
    res = evaluate(_config(work, data, tmp_path / "eval", mechanisms=[], baselines=["none"]))
    assert res["warnings"] == [] and "warning" not in capsys.readouterr().err


# -- 4. checkpoints: a late failure loses nothing -----------------------------------------------

def _comparable(doc: dict) -> dict:
    doc = json.loads(json.dumps(doc))
    doc.pop("timings")
    doc.pop("reused")            # which stages came from checkpoints: differs by design
    doc.pop("runs")              # when each run of the sweep started and how long it took
    for k in ("out", "command", "resume"):
        doc["config"].pop(k)
    for e in doc["entries"]:
        e["utility"].pop("seconds")
        e["privacy"].pop("seconds", None)
    return doc


def test_resume_after_a_late_failure_recomputes_nothing_finished(work, tmp_path, monkeypatch):
    rng = np.random.default_rng(2)
    data = tmp_path / "d.csv"
    data.write_text("text,label\n" + "".join(f"{_doc(rng, t)},{t}\n" for t in ("food", "music", "tech") * 12))
    out = tmp_path / "eval"
    cfg = dict(seeds=2, epsilons=[2.0, 4.0])       # utility runs: none 1 + santext 2x2 + random 2 = 7
    real_sanitize, real_fit = sampling.sanitize, scoring.fit_and_score
    real_profile = metrics.profile_mechanism

    # the classifier fails on the last configuration's last seed, after every sample was drawn
    fit = CallCounter(real_fit, fail_at=7)
    sanitize = CallCounter(real_sanitize)
    monkeypatch.setattr(scoring, "fit_and_score", fit)
    monkeypatch.setattr(sampling, "sanitize", sanitize)
    with pytest.raises(RuntimeError, match="injected"):
        evaluate(_config(work, data, out, **cfg))
    assert (fit.calls, sanitize.calls) == (7, 6) and not (out / "results.json").exists()
    assert not list(out.rglob("*.tmp"))                 # atomic writes leave no temporaries

    # the re-run samples nothing and profiles nothing again; only the failed fit is redone; then the
    # report writer fails
    from ldptext_precompute.evaluation import report
    fit, sanitize, profile = CallCounter(real_fit), CallCounter(real_sanitize), CallCounter(real_profile)
    monkeypatch.setattr(scoring, "fit_and_score", fit)
    monkeypatch.setattr(sampling, "sanitize", sanitize)
    monkeypatch.setattr(metrics, "profile_mechanism", profile)
    monkeypatch.setattr(report, "write_report", CallCounter(None, fail_at=1))
    with pytest.raises(RuntimeError, match="injected"):
        evaluate(_config(work, data, out, **cfg))
    assert (fit.calls, sanitize.calls, profile.calls) == (1, 0, 0)

    # ... and the next one does nothing but write the outputs
    monkeypatch.undo()
    fit, sanitize = CallCounter(real_fit), CallCounter(real_sanitize)
    monkeypatch.setattr(scoring, "fit_and_score", fit)
    monkeypatch.setattr(sampling, "sanitize", sanitize)
    resumed = evaluate(_config(work, data, out, **cfg))
    assert (fit.calls, sanitize.calls) == (0, 0)

    # equal to a clean run in another directory (and --fresh recomputes everything)
    fit, sanitize = CallCounter(real_fit), CallCounter(real_sanitize)
    monkeypatch.setattr(scoring, "fit_and_score", fit)
    monkeypatch.setattr(sampling, "sanitize", sanitize)
    clean = evaluate(_config(work, data, tmp_path / "clean", resume=False, **cfg))
    assert (fit.calls, sanitize.calls) == (7, 6)
    assert _comparable(resumed) == _comparable(clean)
    # a changed setting that determines the samples is not served from the checkpoints
    sanitize.calls = 0
    evaluate(_config(work, data, out, **{**cfg, "seed_base": 1}))
    assert sanitize.calls == 6
    # raw text stays out of every file, logs and exception messages included
    _no_secret_anywhere(out)
    _no_secret_anywhere(tmp_path / "clean")


# -- 5. bad input: clear errors before anything is sampled --------------------------------------

BAD = {
    "missing column": ("d.csv", b"body,label\nsome words,a\nother words,b\n", ["'text'", "columns: 'body', 'label'"]),
    "single class": ("d.csv", b"text,label\n" + b"".join(b"words %d,same\n" % i for i in range(20)),
                     ["single label", "'same'"]),
    "empty file": ("d.csv", b"", ["empty"]),
    "blank lines": ("d.jsonl", b"\n\n", ["empty"]),
    "not utf-8": ("d.csv", b"text,label\nfine words,a\ncaf\xe9 words,b\n", ["line 3", "UTF-8"]),
    "empty label": ("d.jsonl", b'{"text": "x", "label": "a"}\n{"text": "y", "label": null}\n', ["line 2", "label"]),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_fails_clearly_before_sampling(work, tmp_path, monkeypatch, case):
    name, content, expected = BAD[case]
    (tmp_path / name).write_bytes(content)
    built = CallCounter(None, fail_at=1)                 # loading bundles would be the first heavy step
    monkeypatch.setattr(runner, "load_bundles", built)
    with pytest.raises(InputError) as e:
        evaluate(_config(work, tmp_path / name, tmp_path / "eval"))
    assert built.calls == 0
    assert all(x in str(e.value) for x in expected), str(e.value)
    assert "words" not in str(e.value) and "caf" not in str(e.value)


def test_cli_reports_bad_input_on_one_line(work, tmp_path, capsys):
    from ldptext.cli import main
    (tmp_path / "d.csv").write_bytes(b"\xff\xfetext,label\n")
    rc = main(["evaluate", "--data", str(tmp_path / "d.csv"), "--quiet", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 3 and "not valid UTF-8" in err and "Traceback" not in err  # 3: input data


def test_csv_with_a_byte_order_mark_loads(tmp_path):
    from ldptext_precompute.evaluation.datasets import load_table
    (tmp_path / "d.csv").write_bytes("\ufefftext,label\nx y,1\n".encode())
    assert load_table(tmp_path / "d.csv") == (["x y"], ["1"])


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
