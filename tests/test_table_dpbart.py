"""ldptext_precompute.evaluation.dpbart_table: the Table 6.5 layout, every bundle from one trained base
stage (the source work dir only read, the base never retrained), a rerun that recomputes nothing, a resumed interrupted
run, BLEU = 100 for an identity rewrite and macro-F1 against an independent computation.

Every fixture is generated and tiny: a random DP-BART model over a 40-word vocabulary trained 2 steps per stage
(tests/conftest_dpbart.py), 40 labelled documents, ε ∈ {∞, 500, 10}, two seeds."""
import hashlib
import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("transformers")
pytest.importorskip("sklearn")

from conftest import CallCounter  # noqa: E402
from ldptext_precompute.evaluation import dpbart_table as T  # noqa: E402
from conftest_dpbart import build_tiny_bundle, single_thread_torch, tiny_bert2bert, tiny_sentences  # noqa: E402

pytestmark = pytest.mark.slow  # trains and rewrites the whole table once per module

EPS = (math.inf, 500.0, 10.0)
TOPICS = {"animals": ["cat", "dog", "bird", "fox"], "sky": ["sun", "moon", "star", "night"]}
COMMON = "the a and on is was over under".split()


def _snapshot(d: Path) -> dict:
    return {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns) for p in sorted(d.iterdir())}


def _config(src: Path, data: Path, out: Path, **kw):
    base = dict(out_dir=out, source_work_dir=Path(str(src) + ".work"), epsilons=EPS, data=str(data), seeds=2,
                prplus_steps=2, threads=1, progress=False, max_train=None)
    return T.TableConfig(**{**base, **kw})


def _run(src, data, out, **kw):
    from ldptext_precompute.dpbart import build

    descs = []
    mp = pytest.MonkeyPatch()
    real = build.train_stage
    mp.setattr(build, "train_stage", lambda *a, **k: (descs.append(k.get("desc")), real(*a, **k))[1])
    try:
        with single_thread_torch():
            doc = T.run_table(_config(src, data, out, **{k: v for k, v in kw.items() if k != "rewrite"}),
                              T.source_build_config(src), adapter_factory=lambda: tiny_bert2bert(0),
                              sentences=tiny_sentences(), log=lambda m: None, rewrite=kw.get("rewrite"))
    finally:
        mp.undo()
    return doc, descs


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    d = tmp_path_factory.mktemp("table_dpbart")
    with single_thread_torch():
        build_tiny_bundle(d / "src.ldpb", variant="pr", steps=2, prune_rounds=1, sign_key=False)
    rng = np.random.default_rng(5)
    rows = []
    for i in range(40):
        topic = list(TOPICS)[i % 2]
        ws = list(rng.choice(TOPICS[topic], 3)) + list(rng.choice(COMMON, 2 + i % 6))
        rng.shuffle(ws)
        rows.append(f"{' '.join(ws)},{topic}\n")
    (d / "data.csv").write_text("text,label\n" + "".join(rows))
    work = Path(str(d / "src.ldpb") + ".work")
    before = _snapshot(work)
    doc, descs = _run(d / "src.ldpb", d / "data.csv", d / "out")
    return {"dir": d, "src": d / "src.ldpb", "work": work, "data": d / "data.csv", "out": d / "out", "doc": doc,
            "descs": descs, "before": before}


def test_table_layout_rows_columns_and_na(table):
    md = (table["out"] / "table.md").read_text().splitlines()
    start = next(i for i, line in enumerate(md) if line.startswith("| Dataset |"))
    head, rule, *rows = [line for line in md[start:] if line.startswith("|")]
    cols = [c.strip() for c in head.strip("|").split("|")]
    assert cols == ["Dataset", "ε", "Original Test F1", "ADePT BLEU", "ADePT Test F1", "DP-BART-CLV BLEU",
                    "DP-BART-CLV Test F1", "DP-BART-PR BLEU", "DP-BART-PR Test F1", "DP-BART-PR+ BLEU",
                    "DP-BART-PR+ Test F1"]
    cells = [[c.strip() for c in r.strip("|").split("|")] for r in rows]
    assert [c[1] for c in cells] == ["∞", "500", "10"] and all(len(c) == len(cols) for c in cells)
    assert cells[0][0] == "data" and cells[1][0] == cells[2][0] == ""
    f1 = r"^\d\.\d\d \(\d\.\d\d\)$"
    import re
    assert re.match(f1, cells[0][2]) and cells[1][2] == cells[2][2] == ""       # original F1: first row only
    assert cells[0][9:] == ["N/A", "N/A"]                                         # PR+ at ε = ∞
    for row in cells:
        for j in range(3, 11, 2):
            if row[j] == "N/A":
                continue
            assert re.match(r"^\d+\.\d\d$", row[j]) and re.match(f1, row[j + 1]), row
    # the header states dataset, sizes, model, mechanism, δ, the unit of ε and the seeded mode
    text = "\n".join(md[:start])
    for needle in ("32 training documents", "8 original test documents", "discrete Gaussian, δ = 1e-05 per release",
                   "ε is per release", "replace the whole chunk", "NOT private", "over the CLV bundle",
                   "2 seed(s)", "greedy"):
        assert needle in text, needle
    doc = json.loads((table["out"] / "table.json").read_text())
    assert [r["epsilon"] for r in doc["rows"]] == ["inf", "500", "10"]
    assert doc["rows"][0]["models"]["pr+"] == "N/A" and doc["rows"][1]["original_f1"] is None
    pr500 = doc["rows"][1]["models"]["pr+"]
    assert len(pr500["macro_f1"]["values"]) == 2 and pr500["macro_f1"]["std"] == pytest.approx(
        float(np.std(pr500["macro_f1"]["values"])))
    assert doc["privacy"]["seeded"] is True and doc["privacy"]["delta"] == 1e-5
    # 1 original + (3 models x 3 eps + PR+ x 2 eps) cells, per seed
    assert len(doc["cells"]) == 2 * (1 + 3 * 3 + 2)


def test_bundles_from_one_base_stage_without_retraining(table):
    from ldptext.bundle import open_unverified

    # only the PR+ noisy stages trained (one per finite ε): no base, no pruning round retrained
    # (each label starts with the stage's place among the build's stages, for the progress line)
    assert [re.sub(r"^dpbart stage \d+/\d+ ", "", d) for d in table["descs"]] == \
        ["pr+ noisy training (ε=500)", "pr+ noisy training (ε=10)"]
    assert table["doc"]["computed"]["bundles_built"] == ["clv", "pr", "pr+:500", "pr+:10"]
    # the source work dir is untouched (content and mtime), and the stages are its very files
    assert _snapshot(table["work"]) == table["before"]
    for name in ("base", "clip", "prune-1"):
        assert (table["out"] / "stages" / f"{name}.pt").samefile(table["work"] / f"{name}.pt")
    src_state = json.loads((table["work"] / "base.json").read_text())["state"]
    for key, info in table["doc"]["bundles"].items():
        man = open_unverified(info["path"])[0].manifest
        assert man["provenance"]["losses"]["base"] == src_state["losses"]["base"], key
        assert man["build"]["config"]["base_steps"] == 2
    log = table["doc"]["bundle_build"]["build_log"]
    assert log["clv"] == ["resuming after stage clip"] and log["pr"] == ["resuming after stage prune-1"]
    assert log["pr+:500"] == log["pr+:10"] == ["resuming after stage prune-1"]
    # the PR+ noisy checkpoints are gone once their bundle exists; the linked pruning stage is kept
    assert not list((table["out"] / "stages-prplus-2").glob("prplus-*"))
    assert (table["out"] / "stages-prplus-2" / "prune-1.pt").samefile(table["work"] / "prune-1.pt")


def test_missing_or_foreign_base_stage_is_refused_before_building(table, tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    (work / "base.partial.ckpt").write_bytes(b"x")
    cfg = T.source_build_config(table["src"])
    tc = _config(table["src"], table["data"], tmp_path / "out", source_work_dir=work)
    with pytest.raises(ValueError, match="no finished base stage.*base.partial.ckpt"):
        T.run_table(tc, cfg, adapter_factory=lambda: pytest.fail("nothing may be built"), log=lambda m: None)
    # a stage of another configuration (fingerprint) is not used either
    shutil.copy(table["work"] / "base.pt", work / "base.pt")
    (work / "base.json").write_text(json.dumps({"fingerprint": "0" * 16, "state": {}}))
    with pytest.raises(ValueError, match="no finished base stage"):
        T.run_table(tc, cfg, adapter_factory=lambda: pytest.fail("nothing may be built"), log=lambda m: None)
    assert not (tmp_path / "out" / "bundles").exists()


def _counting(monkeypatch):
    from ldptext.dpbart import Rewriter
    from ldptext_precompute.dpbart import build
    from ldptext_precompute.dpbart.adept import AdeptRewriter
    from ldptext_precompute.evaluation import utility

    counts = {"rewrite": CallCounter(Rewriter.rewrite_batch), "adept": CallCounter(AdeptRewriter.rewrite_batch),
              "fit": CallCounter(utility.fit_and_score), "build": CallCounter(build.build_dpbart_bundle)}
    monkeypatch.setattr(Rewriter, "rewrite_batch", lambda self, *a, **k: counts["rewrite"](self, *a, **k))
    monkeypatch.setattr(AdeptRewriter, "rewrite_batch", lambda self, *a, **k: counts["adept"](self, *a, **k))
    monkeypatch.setattr(utility, "fit_and_score", counts["fit"])
    monkeypatch.setattr(build, "build_dpbart_bundle", counts["build"])
    return counts


def test_rerun_recomputes_nothing(table, monkeypatch, capsys):
    counts = _counting(monkeypatch)
    doc, descs = _run(table["src"], table["data"], table["out"])
    assert descs == [] and {k: c.calls for k, c in counts.items()} == {"rewrite": 0, "adept": 0, "fit": 0, "build": 0}
    assert doc["computed"] == {"bundles_built": [], "rewrites": 0, "fits": 0}
    assert doc["rows"] == table["doc"]["rows"] and doc["markdown"] == table["doc"]["markdown"]
    # the command line on the finished directory: the same table, nothing computed, no model needed
    rc = T.main(["--source-bundle", str(table["src"]), "--out-dir", str(table["out"]), "--data", str(table["data"]),
                 "--epsilons", "inf,500,10", "--seeds", "2", "--prplus-steps", "2", "--max-train", "0",
                 "--threads", "1", "--quiet"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "| DP-BART-PR+ BLEU |" in out.out and "0 rewrite(s), 0 classifier fit(s)" in out.err
    assert {k: c.calls for k, c in counts.items()} == {"rewrite": 0, "adept": 0, "fit": 0, "build": 0}


def test_interrupted_run_resumes_where_it_stopped(table, tmp_path, monkeypatch):
    out = tmp_path / "out"
    shutil.copytree(table["out"], out)
    cells = sorted((out / "cells").glob("pr_eps*_seed*.json")) + sorted((out / "cells").glob("original_*.json"))
    rewrites = sorted((out / "rewrites").glob("pr_eps*.json"))
    for f in cells + rewrites:
        f.unlink()
    assert len(rewrites) == 5          # ε = ∞ shared by the seeds, 2 x 2 noisy
    # interrupted: the third rewrite fails (after two were checkpointed)
    fail = CallCounter(T.rewrite_texts, fail_at=3)
    with pytest.raises(RuntimeError, match="injected"):
        _run(table["src"], table["data"], out, rewrite=fail)
    assert len(list((out / "rewrites").glob("pr_eps*.json"))) == 2
    counts = _counting(monkeypatch)
    again = CallCounter(T.rewrite_texts)
    doc, descs = _run(table["src"], table["data"], out, rewrite=again)
    assert descs == [] and again.calls == 3 and doc["computed"]["rewrites"] == 3
    # the failed run had checkpointed both original cells, PR at ∞ (both seeds) and PR at 500 seed 0
    assert counts["fit"].calls == 3 == doc["computed"]["fits"]
    assert doc["rows"] == table["doc"]["rows"]      # seeded: the same numbers as the uninterrupted run


def test_identity_rewrite_has_bleu_100_and_the_original_f1(table, tmp_path):
    texts = ["The cat sat on the mat .", "a quick brown fox, over the lazy dog!", ""]
    assert T.bleu100(texts, texts) == 100.0
    assert T.bleu100(["the dog sat"], ["the cat sat on the mat"]) < 100.0
    out = tmp_path / "out"
    shutil.copytree(table["out"], out, ignore=shutil.ignore_patterns("cells", "rewrites"))

    def identity(tc, model, bundle, eps, seed, texts, desc):
        return {"texts": list(texts), "chunks": [1] * len(texts), "report": None}

    doc, _ = _run(table["src"], table["data"], out, rewrite=identity)
    original = {c["seed"]: c["macro_f1"] for c in doc["cells"] if c["model"] == "original"}
    for c in doc["cells"]:
        assert c["bleu"] == 100.0
        assert c["macro_f1"] == original[c["seed"]]


def test_macro_f1_matches_an_independent_computation():
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(0)
    vocab = {"a": "cat dog bird fox", "b": "sun moon star night", "c": "river tree house mat"}
    train, ytrain = [], []
    for lab, n in (("a", 12), ("b", 9), ("c", 6)):
        for _ in range(n):   # class words plus shared noise, so the classes overlap
            ws = list(rng.choice(vocab[lab].split(), 2)) + list(rng.choice("the a big small red blue".split(), 3))
            ws += list(rng.choice(vocab[str(rng.choice(list(vocab)))].split(), 1))
            train.append(" ".join(ws))
            ytrain.append(lab)
    test = ["cat sun red", "moon river the", "tree dog big", "star night blue", "house fox small", "mat bird",
            "the a big", "river sun cat"]
    ytest = ["a", "b", "c", "b", "c", "a", "a", "c"]
    d = T.downstream(train, ytrain, test, ytest, seed=3)
    hp = d["hyperparameters"]
    vec = TfidfVectorizer(lowercase=True, ngram_range=(1, 2), min_df=2, sublinear_tf=True, dtype=np.float32)
    model = LogisticRegression(C=hp["C"], class_weight=hp["class_weight"], solver="newton-cg", max_iter=1000,
                               random_state=3).fit(vec.fit_transform(train), ytrain)
    pred = model.predict(vec.transform(test))
    assert d["macro_f1"] == pytest.approx(f1_score(ytest, pred, average="macro"), abs=1e-9)
    # by hand: per-class F1 from the counts, unweighted mean over the three classes
    per = []
    for lab in "abc":
        tp = sum(p == lab == t for p, t in zip(pred, ytest))
        fp = sum(p == lab != t for p, t in zip(pred, ytest))
        fn = sum(t == lab != p for p, t in zip(pred, ytest))
        per.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    assert d["macro_f1"] == pytest.approx(sum(per) / 3, abs=1e-9)
    assert d["accuracy"] == pytest.approx(np.mean(pred == np.asarray(ytest)))
    assert abs(d["macro_f1"] - d["accuracy"]) > 1e-6          # the case tells macro-F1 from accuracy
    assert T.summarize([0.5, 0.7]) == {"mean": pytest.approx(0.6), "std": pytest.approx(0.1), "values": [0.5, 0.7]}


def test_source_started_from_other_weights_is_found_by_content(table, tmp_path):
    from ldptext_precompute.dpbart.build import DPBartBuildConfig, _manifest_build_config

    donor = tmp_path / "wiki.ldpb.work"
    donor.mkdir()
    shutil.copy(table["work"] / "base.pt", donor / "base.pt")
    cfg = DPBartBuildConfig(model="tiny", public_corpus="tiny", init_weights=str(donor / "base.pt"))
    recorded = json.loads(json.dumps(_manifest_build_config(cfg)))     # as a manifest records it: name + sha256
    assert isinstance(recorded["init_weights"], dict)
    found = T.source_build_config(config=recorded, search=[tmp_path])
    assert Path(found.init_weights).samefile(donor / "base.pt") and found.fingerprint() == cfg.fingerprint()
    given = T.source_build_config(config=recorded, init_weights=donor / "base.pt")
    assert given.fingerprint() == cfg.fingerprint()
    (tmp_path / "other.pt").write_bytes(b"not the weights")
    with pytest.raises(ValueError, match="not the recorded starting weights"):
        T.source_build_config(config=recorded, init_weights=tmp_path / "other.pt")
    with pytest.raises(ValueError, match="--init-weights"):
        T.source_build_config(config=recorded, search=[tmp_path / "nowhere"])


def test_a_retrained_source_is_refused_for_an_existing_output(table, tmp_path):
    src_work, out = tmp_path / "src.ldpb.work", tmp_path / "out"
    shutil.copytree(table["work"], src_work)            # copy2: same sizes and modification times
    shutil.copytree(table["out"], out)
    doc, _ = _run(table["src"], table["data"], out, source_work_dir=src_work)
    assert doc["computed"] == {"bundles_built": [], "rewrites": 0, "fits": 0}
    data = (src_work / "prune-1.pt").read_bytes()      # "retrained": the stage replaced by a new file
    (src_work / "prune-1.pt").unlink()
    (src_work / "prune-1.pt").write_bytes(data)
    with pytest.raises(ValueError, match="prune-1.*changed.*new --out-dir"):
        _run(table["src"], table["data"], out, source_work_dir=src_work)
