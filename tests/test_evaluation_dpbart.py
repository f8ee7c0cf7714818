"""DP-BART in ``ldptext evaluate``: the ``dpbart`` entries next to SanText on a tiny labelled CSV,
"–" in every token-level privacy and attack cell with the document-level guarantee stated instead, BLEU and
the classifiers, checkpoints that survive a late failure (a re-run rewrites nothing), clear errors on a bundle
that is not a trusted DP-BART bundle (before anything is sampled), and no raw text in any output file.

Every fixture is generated here and tiny: a random DP-BART bundle over a 40-word vocabulary
(tests/conftest_dpbart.py, no training), a 6-dimensional embedding file over the same words, 40 documents."""
import json
import math

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("transformers")
pytest.importorskip("sklearn")
pytest.importorskip("matplotlib")
pytest.importorskip("ldptext_precompute.santext.build")

from conftest import CallCounter  # noqa: E402
from conftest_dpbart import build_tiny_bundle, single_thread_torch  # noqa: E402
from ldptext.dpbart import Rewriter  # noqa: E402
from ldptext.errors import BundleFormatError, ParameterError, SignatureError  # noqa: E402
from ldptext_precompute.evaluation import runner, sampling, scoring  # noqa: E402
from ldptext_precompute.evaluation.runner import EvaluationConfig, evaluate  # noqa: E402

# words of the tiny DP-BART vocabulary (conftest_dpbart.WORDS), so that both tokenizers know them
TOPICS = {"animals": ["cat", "dog", "bird", "fox"], "sky": ["sun", "moon", "star", "night"]}
COMMON = "the a and on is was over under".split()
SECRET = "zzzsecretword"      # in every document, in no vocabulary: must never reach an output file
DPBART_EPS = [50.0, 500.0]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("eval_dpbart")
    words = COMMON + [w for ws in TOPICS.values() for w in ws]
    rng = np.random.default_rng(5)
    vecs = rng.normal(size=(len(words), 6))
    for k, ws in enumerate(TOPICS.values()):
        vecs[[words.index(w) for w in ws]] += 4.0 * np.eye(6)[k]
    (d / "emb.txt").write_text("".join(w + " " + " ".join(f"{x:.5f}" for x in v) + "\n"
                                       for w, v in zip(words, vecs)))
    rows = []
    for i in range(40):
        topic = list(TOPICS)[i % 2]
        ws = list(rng.choice(TOPICS[topic], 3)) + list(rng.choice(COMMON, 2 + i % 6)) + [SECRET]
        rng.shuffle(ws)
        rows.append(f"{' '.join(ws)},{topic}\n")
    (d / "data.csv").write_text("text,label\n" + "".join(rows))
    with single_thread_torch():
        build_tiny_bundle(d / "signed.ldpb", sign_key=None)        # the test run's developer key (trusted)
        build_tiny_bundle(d / "unsigned.ldpb", sign_key=False)
    return d


def _config(work, out, **kw) -> EvaluationConfig:
    base = dict(out=str(out), data=str(work / "data.csv"), embeddings=str(work / "emb.txt"), vocab_size=None,
                mechanisms=["santext"], epsilons=[3.0], baselines=["none"], seeds=2, head_size=4,
                cache_dir=str(work / "cache"), progress=False, plots=False, columns=5, agreement_rows=2,
                dpbart_bundle=str(work / "signed.ldpb"), dpbart_epsilons=DPBART_EPS)
    return EvaluationConfig(**{**base, **kw})


def _count_rewrites(monkeypatch) -> CallCounter:
    counter = CallCounter(Rewriter.rewrite_batch)
    monkeypatch.setattr(Rewriter, "rewrite_batch", lambda self, *a, **kw: counter(self, *a, **kw))
    return counter


def _no_secret_anywhere(out) -> None:
    for f in out.rglob("*"):
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes(), f


def _comparable(doc: dict) -> dict:
    doc = json.loads(json.dumps(doc))
    doc.pop("timings")
    doc.pop("reused")            # which stages came from checkpoints: differs by design
    doc.pop("runs")              # when each run of the sweep started and how long it took
    doc.pop("plots", None)
    for k in ("out", "command", "resume", "plots"):
        doc["config"].pop(k)
    for e in doc["entries"]:
        e["utility"].pop("seconds")
        e["privacy"].pop("seconds", None)
    return doc


@pytest.mark.slow
def test_dpbart_in_the_sweep_end_to_end_and_resumed(work, tmp_path, monkeypatch, capsys):
    out = tmp_path / "eval"
    # a late failure: the classifier fails on the last run (none 1 + santext 2 + dpbart 2 x 2 = 7 fits),
    # after every DP-BART rewrite was drawn
    rewrites = _count_rewrites(monkeypatch)
    monkeypatch.setattr(scoring, "fit_and_score", CallCounter(scoring.fit_and_score, fail_at=7))
    with pytest.raises(RuntimeError, match="injected"):
        evaluate(_config(work, out))
    assert rewrites.calls == 4 and not (out / "results.json").exists()

    # the re-run rewrites nothing and only redoes the failed fit
    monkeypatch.undo()
    rewrites = _count_rewrites(monkeypatch)
    fit = CallCounter(scoring.fit_and_score)
    monkeypatch.setattr(scoring, "fit_and_score", fit)
    res = evaluate(_config(work, out, plots=True))
    assert (rewrites.calls, fit.calls) == (0, 1)
    saved = json.loads((out / "results.json").read_text())

    # the dpbart entries: utility and BLEU measured, a document-level guarantee, no token-level number
    dp = [e for e in saved["entries"] if e["mechanism"] == "dpbart"]
    assert [e["epsilon"] for e in dp] == DPBART_EPS
    for e in dp:
        u = e["utility"]
        assert u["seeds"] == 2 and all(0 <= b <= 1 for b in u["bleu"]["values"])
        assert 0 <= u["sanitized_test"]["accuracy"]["mean"] <= 1 and 0 <= u["original_test"]["macro_f1"]["mean"] <= 1
        assert "nn_inversion_success" not in u and "empirical_attack_success" not in u
        assert u["unchanged_token_rate"]["mean"] is None
        pv = e["privacy"]
        assert "attack" not in pv and "vocabulary" not in pv
        assert pv["guarantee"] == "document-level (epsilon, delta)-LDP"
        assert (pv["mechanism"], pv["epsilon"], pv["delta"]) == ("gaussian", e["epsilon"], 1e-5)
        assert pv["chunks"]["documents"] == 40 and pv["chunks"]["max"] >= 2      # long documents split
        assert pv["total_epsilon_max"] == e["epsilon"] * pv["chunks"]["max"]
        assert pv["report"]["seeded"] is True and pv["report"]["epsilon"] == e["epsilon"]
        assert e["bundle"]["key_id"] and e["bundle"]["variant"] == "pr"
    assert saved["config"]["dpbart_epsilons"] == DPBART_EPS
    # not on the attack axis: utility_at_attack_success ranks the token mechanisms only
    for per_classifier in saved["utility_at_attack_success"]["by_attack"].values():
        for cells in per_classifier.values():
            assert all("dpbart" not in c and "santext" in c for c in cells.values())

    report = (out / "report.md").read_text()
    assert "| DP-BART | 50 | – | – | – | – | – | – | – | – |" in report          # the privacy table
    assert "| DP-BART | – | – | – |" in report                                  # attack / N_x / NN tables
    assert "ε = 50: gaussian noise, (ε=50, δ=1e-05) per chunk; up to" in report
    assert "DP-BART is not ranked here" in report and "- DP-BART: bundle" in report
    bleu = report.split("**BLEU of the sanitized text")[1].split("**Exact Bayes")[0]
    (row,) = [line for line in bleu.splitlines() if line.startswith("| DP-BART |")]
    assert [c.strip() for c in row.split("|")[2:-1]] == ["–"] + [f"{e['utility']['bleu']['mean']:.4f}" for e in dp]
    assert all((out / p).read_bytes()[:4] == b"\x89PNG" for p in saved["plots"]) and "frontier.png" in saved["plots"]

    # a clean run in another directory draws the same (seeded) rewrites
    monkeypatch.undo()
    rewrites = _count_rewrites(monkeypatch)
    clean = evaluate(_config(work, tmp_path / "clean", resume=False, plots=True))
    assert rewrites.calls == 4
    assert _comparable(clean) == _comparable(res)

    assert SECRET not in capsys.readouterr().err
    _no_secret_anywhere(out)
    _no_secret_anywhere(tmp_path / "clean")


def test_private_randomness_and_an_allowed_unsigned_bundle(work, tmp_path):
    res = evaluate(_config(work, tmp_path / "eval", mechanisms=[], seeds=1, dpbart_epsilons=[500.0],
                           reproducible=False, dpbart_bundle=str(work / "unsigned.ldpb"), allow_unsigned=True,
                           dpbart_mechanism="laplace"))
    (e,) = [e for e in res["entries"] if e["mechanism"] == "dpbart"]
    assert e["privacy"]["report"]["seeded"] is False and e["bundle"]["key_id"] is None
    assert (e["privacy"]["mechanism"], e["privacy"]["delta"]) == ("laplace", 0.0)
    assert 0 <= e["utility"]["bleu"]["mean"] <= 1 and math.isnan(e["utility"]["unchanged_token_rate"]["mean"])
    report = (tmp_path / "eval" / "report.md").read_text()
    assert "**unsigned** (allowed explicitly)" in report and "laplace noise, (ε=500, δ=0) per chunk" in report
    _no_secret_anywhere(tmp_path / "eval")


@pytest.fixture(scope="module")
def santext_bundle(work):
    from conftest import build_tiny_bundle as build_santext_bundle
    build_santext_bundle(work / "santext.ldpb", sign_key=False)
    return work / "santext.ldpb"


@pytest.mark.parametrize("case", ["santext bundle", "unsigned not allowed", "missing file"])
def test_bad_dpbart_bundle_fails_clearly_before_sampling(work, tmp_path, monkeypatch, santext_bundle, case):
    path, allow, error, expected = {
        "santext bundle": (santext_bundle, True, BundleFormatError, ["DP-BART bundle", "mechanism", "santext"]),
        "unsigned not allowed": (work / "unsigned.ldpb", False, SignatureError, ["DP-BART bundle", "unsigned"]),
        "missing file": (tmp_path / "nope.ldpb", True, Exception, ["DP-BART bundle"]),
    }[case]
    built, sanitize = CallCounter(None, fail_at=1), CallCounter(None, fail_at=1)
    monkeypatch.setattr(runner, "load_bundles", built)
    monkeypatch.setattr(sampling, "sanitize", sanitize)
    rewrites = _count_rewrites(monkeypatch)
    with pytest.raises(error) as e:
        evaluate(_config(work, tmp_path / "eval", dpbart_bundle=str(path), allow_unsigned=allow))
    assert (built.calls, sanitize.calls, rewrites.calls) == (0, 0, 0)
    assert all(x.lower() in str(e.value).lower() for x in expected), str(e.value)


def test_bad_dpbart_options(work, tmp_path):
    with pytest.raises(ParameterError, match="--dpbart-bundle"):
        evaluate(_config(work, tmp_path / "e", mechanisms=["santext", "dpbart"], dpbart_bundle=None))
    with pytest.raises(ParameterError, match="delta"):
        evaluate(_config(work, tmp_path / "e", dpbart_delta=0.0))
    with pytest.raises(ParameterError, match="epsilon"):
        evaluate(_config(work, tmp_path / "e", dpbart_epsilons=[-1.0]))


def test_cli_refuses_a_santext_bundle_as_dpbart_bundle_on_one_line(work, tmp_path, santext_bundle, capsys):
    from ldptext.cli import main
    rc = main(["evaluate", "--data", str(work / "data.csv"), "--embeddings", str(work / "emb.txt"),
               "--vocab-size", "0", "--mechanism", "santext", "--baselines", "none", "--epsilon", "3",
               "--dpbart-bundle", str(santext_bundle), "--allow-unsigned", "--dpbart-epsilon", "500",
               "--cache-dir", str(work / "cache"), "--quiet", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 4 and "DP-BART bundle" in err and "Traceback" not in err and SECRET not in err
