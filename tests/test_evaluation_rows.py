"""``ldptext evaluate``'s rows name their configuration (SanText+'s default split is what ``ldptext precompute
santext`` builds), one exact ε from input to bundle, cache key and seed, and what a run tells its user:
warnings for every classifier, progress, resumed stages, no empty folder after a failure, TSV input, the
plots' baseline lines and ε labels.

Every fixture is generated here and tiny (a 24-word embedding file, 40 documents)."""
import json
import logging
import warnings

import numpy as np
import pytest
from conftest import NEG, POS, SECRET, write_sentiment_embeddings

pytest.importorskip("ldptext.santext")
pytest.importorskip("ldptext_precompute.santext.build")
pytest.importorskip("sklearn")
pytest.importorskip("matplotlib")

from ldptext_precompute.evaluation import bundles as B  # noqa: E402
from ldptext_precompute.evaluation.records import Entry, MeanStd  # noqa: E402
from ldptext_precompute.evaluation.rows import DEFAULT_SPLIT, Row, santext_row  # noqa: E402
from ldptext_precompute.evaluation.runner import EvaluationConfig, evaluate  # noqa: E402



@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("rows")
    write_sentiment_embeddings(d / "emb.txt", seed=7)
    lines = ["text\tlabel"]
    for i in range(40):
        pos = i % 2 == 0
        words = [POS[i % 6] if pos else NEG[i % 6], "movie", "the", "plot", POS[(i + 1) % 6] if pos else NEG[i % 5],
                 SECRET]
        lines.append(" ".join(words) + "\t" + ("pos" if pos else "neg"))
    (d / "data.tsv").write_text("\n".join(lines) + "\n")
    return d


def _cfg(tiny, out, **kw) -> EvaluationConfig:
    base = dict(out=str(out), data=str(tiny / "data.tsv"), embeddings=str(tiny / "emb.txt"), vocab_size=None,
                mechanisms=["santext"], epsilons=[3.0], baselines=["none", "random"], seeds=1, head_size=4,
                cache_dir=str(tiny / "cache"), progress=False, plots=False, columns=5, agreement_rows=2)
    return EvaluationConfig(**{**base, **kw})


def _load(path):
    from ldptext.santext import Sanitizer
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Sanitizer.load(path, allow_unsigned=True, allow_weak_privacy=True)


# -- rows ----------------------------------------------------------------------------------------

def test_rows_name_their_split():
    assert santext_row("santext+") == Row("santext+", DEFAULT_SPLIT) == Row("santext+", "function-words")
    assert santext_row("santext+").label == "SanText+ (default split)"
    assert santext_row("santext+", 0.9).label == "SanText+ (frequency split 0.9)"
    assert santext_row("santext", 0.9) == Row("santext") and Row("santext").label == "SanText"
    assert Row("cmp").label == "CMP (FBDD)" and Row("none").label == "Unsanitized"
    cfg = EvaluationConfig(mechanisms=["santext", "santext+"])
    assert cfg.santext_rows() == [Row("santext"), santext_row("santext+")]          # the default row always
    cfg = EvaluationConfig(mechanisms=["santext+"], w=0.9)
    assert [r.key for r in cfg.santext_rows()] == ["santext+:function-words", "santext+:frequency:0.9"]


def test_default_row_bundle_is_what_precompute_santext_builds_by_default(tiny, tmp_path):
    from ldptext.cli import main
    cfg = _cfg(tiny, tmp_path / "o", mechanisms=["santext+"], epsilons=[1.5], w=0.5,
               head_size=EvaluationConfig().head_size, cache_dir=str(tmp_path / "cache"))
    cfg.validate()
    built = B.load_sanitizers(cfg, tmp_path / "cache")
    assert [row for row, _ in built] == [santext_row("santext+"), santext_row("santext+", 0.5)]
    # `ldptext precompute santext` with nothing but the embeddings, vocabulary and ε: its defaults
    for row, extra in ((santext_row("santext+"), []), (santext_row("santext+", 0.5), ["--w", "0.5"])):
        ref = tmp_path / f"{row.file_tag}.ldpb"
        assert main(["precompute", "santext", "--embeddings", str(tiny / "emb.txt"), "--epsilon", "1.5",
                     "--allow-weak-privacy", "--out", str(ref), *extra]) == 0
        mine, theirs = built[(row, 1.5)].sanitizer.manifest, _load(ref).manifest
        for section in ("params", "vocab", "sources", "privacy", "numeric"):
            assert mine[section] == theirs[section], section
        # the same tables, array by array (and the same tokenizer and vocabulary blobs)
        assert {n: a["sha256"] for n, a in mine["arrays"].items()} == \
            {n: a["sha256"] for n, a in theirs["arrays"].items()}
    assert built[(santext_row("santext+"), 1.5)].sanitizer.manifest["params"]["non_sensitive"] == DEFAULT_SPLIT


def test_sweep_reports_the_default_row_resumes_and_says_so(tiny, tmp_path, capsys):
    cfg = _cfg(tiny, tmp_path / "o", mechanisms=["santext+"], epsilons=[2.0, 2.2, 2.4], progress=True, plots=True)
    first = evaluate(cfg)
    err = capsys.readouterr().err
    assert "eps=None" not in err and SECRET not in err
    assert "utility SanText+ (default split) eps=2:" in err and "utility Unsanitized:" in err
    assert {e["label"] for e in first["entries"]} == {"SanText+ (default split)", "Unsanitized", "Random"}
    report = (tmp_path / "o" / "report.md").read_text()
    assert "| SanText+ (default split) |" in report and "Resumed" not in report and first["reused"] == {}
    again = evaluate(cfg)
    assert again["reused"]["profile"] == 3 and again["reused"]["utility"] >= 4
    report = (tmp_path / "o" / "report.md").read_text()
    assert "- Resumed: reused " in report and "profile" in report
    _plots_read_well(again, tmp_path / "plots")


def _plots_read_well(results, out):
    """The random line is drawn above the majority line; no two ε labels of the frontier overlap."""
    from ldptext_precompute.evaluation import plots

    figs = {}
    original = plots._save
    plots._save = lambda fig, path: figs.__setitem__(path.name, fig)
    try:
        out.mkdir()
        plots.write_plots(results, out)
    finally:
        plots._save = original
    ax = figs["utility_vs_epsilon.png"].axes[0]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert lines["Random"].get_zorder() > lines["Majority class"].get_zorder()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    fig = figs["frontier.png"]
    renderer = FigureCanvasAgg(fig).get_renderer()
    for ax in fig.axes:
        boxes = [t.get_window_extent(renderer) for t in ax.texts]
        assert len(boxes) >= 3
        for i, a in enumerate(boxes):
            for b in boxes[i + 1:]:
                assert not a.overlaps(b), (a, b)


def test_label_offsets_keep_labels_of_one_spot_apart():
    from ldptext_precompute.evaluation.plots import LABEL_BOX, label_offsets
    anchors = [(100.0, 100.0)] * 4 + [(102.0, 101.0)]
    placed = [(x + dx, y + dy) for (x, y), (dx, dy) in zip(anchors, label_offsets(anchors))]
    for i, (x, y) in enumerate(placed):
        for px, py in placed[:i]:
            assert abs(x - px) >= LABEL_BOX[0] or abs(y - py) >= LABEL_BOX[1]


# -- one exact ε -----------------------------------------------------------------------------------

def test_one_exact_epsilon_names_the_bundle_and_the_seed(tiny, tmp_path):
    from ldptext_precompute.evaluation import comparison
    from ldptext_precompute.evaluation.sampling import sample_stream
    cfg = _cfg(tiny, tmp_path / "o", mechanisms=["santext+"], epsilons=[2.53, 2.530004])
    cfg.validate()
    row = santext_row("santext+")
    a, b = (B.bundle_path(cfg, tmp_path, row, e) for e in cfg.epsilons)
    assert a != b and "eps2.53-" in a.name and "eps2.530004-" in b.name
    assert comparison.bundle_path(tmp_path, embeddings="x", vocab_size=None, mechanism="tem", epsilon=2.53) != \
        comparison.bundle_path(tmp_path, embeddings="x", vocab_size=None, mechanism="tem", epsilon=2.530004)
    streams = {sample_stream(Entry(mechanism="santext+", split=DEFAULT_SPLIT, epsilon=e, privacy=None))
               for e in (2.53, 2.530004, 2.5300000000000002)}
    assert len(streams) == 3 and "santext+:function-words:2.53" in streams
    cfg = _cfg(tiny, tmp_path / "o", epsilons=[3])
    cfg.validate()
    assert cfg.epsilons == [3.0] and isinstance(cfg.epsilons[0], float)       # 3 and 3.0: one stream


# -- what a run tells its user ---------------------------------------------------------------------

def test_the_majority_warning_considers_every_classifier():
    from ldptext_precompute.evaluation.records import UtilitySummary
    from ldptext_precompute.evaluation.scoring import _ceiling_warnings

    def scores(acc):
        return {"sanitized_test": {"accuracy": MeanStd.of([acc]), "macro_f1": MeanStd.of([acc])}}

    utility = UtilitySummary(seeds=1, sanitized_test=scores(0.9)["sanitized_test"], original_test={},
                             bleu=MeanStd.of([1.0]), unchanged_token_rate=MeanStd.of([1.0]),
                             empirical_attack_success=None, seconds=0.0,
                             classifiers={"tfidf": scores(0.9), "minilm": scores(0.706)})
    notes = _ceiling_warnings(utility, majority=0.723)
    assert len(notes) == 1 and "the minilm classifier" in notes[0] and "0.7060" in notes[0]
    assert _ceiling_warnings(utility, majority=0.5) == []


def test_a_failed_run_leaves_no_empty_output_folder(tiny, tmp_path):
    from ldptext.errors import InputError
    bad = tmp_path / "bad.tsv"
    bad.write_text("text\tlabel\n")
    out = tmp_path / "new" / "eval"
    with pytest.raises(InputError):
        evaluate(_cfg(tiny, out, data=str(bad)))
    assert not out.exists()
    kept = tmp_path / "kept"
    kept.mkdir()
    with pytest.raises(InputError):
        evaluate(_cfg(tiny, kept, data=str(bad)))
    assert kept.is_dir()                                 # a folder the user made stays


def test_cmp_progress_does_not_change_the_draw():
    from ldptext.rng import SeededModeWarning
    from ldptext_precompute.evaluation.baselines import CMPMechanism

    def gen():
        from ldptext.rng import Generator
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SeededModeWarning)
            return Generator(seed=3)

    emb = np.random.default_rng(0).normal(size=(50, 4))
    cmp = CMPMechanism(emb, np.arange(50), 2.0, chunk_size=16)
    ids = np.arange(50).repeat(3)
    seen = []
    tracked = cmp.sample_ids(ids, gen(), track=lambda chunks: (seen.append(s) or s for s in chunks))
    assert seen == [0, 16, 32, 48, 64, 80, 96, 112, 128, 144]
    np.testing.assert_array_equal(tracked, cmp.sample_ids(ids, gen()))


def test_only_the_onnx_quantization_advice_is_silenced(caplog):
    from ldptext_precompute.evaluation.utility import _without_preprocessing_advice
    with caplog.at_level(logging.WARNING), _without_preprocessing_advice():
        logging.warning("Please consider to run pre-processing before quantization. Refer to example: ...")
        logging.warning("another warning")
    assert [r.getMessage() for r in caplog.records] == ["another warning"]


def test_cli_w_and_non_sensitive_add_the_frequency_row_and_max_train_says_what_it_bounds(tiny, tmp_path, capsys):
    import argparse
    from ldptext.cli import main
    from ldptext_precompute.evaluation import cli
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    for extra, w in (([], None), (["--w", "0.9"], 0.9), (["--non-sensitive", "frequency:0.9"], 0.9),
                     (["--non-sensitive", "function-words"], None)):
        args = parser.parse_args(["evaluate", "--out", "x", *extra])
        assert (args.w if args.w is not None else args.non_sensitive) == w
    with pytest.raises(SystemExit):
        parser.parse_args(["evaluate", "--out", "x", "--non-sensitive", "words.txt"])
    capsys.readouterr()
    with pytest.raises(SystemExit):
        parser.parse_args(["evaluate", "--help"])
    assert "not the run" in " ".join(capsys.readouterr().out.split())
    assert main(["evaluate", "--data", str(tiny / "data.tsv"), "--embeddings", str(tiny / "emb.txt"),
                 "--vocab-size", "0", "--mechanism", "santext+", "--epsilon", "2", "--non-sensitive", "frequency:0.5",
                 "--baselines", "none", "--seeds", "1", "--columns", "3", "--no-plots", "--quiet",
                 "--cache-dir", str(tmp_path / "c"), "--out", str(tmp_path / "o")]) == 0
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert [e["row"] for e in res["entries"] if e["mechanism"] == "santext+"] == [
        "santext+:function-words", "santext+:frequency:0.5"]


def test_shards_split_the_utility_runs_and_the_whole_run_reads_them(tiny, tmp_path, capsys):
    """Two shards score disjoint halves of the configurations into the shared checkpoints and write no
    report; the run without a shard then computes no utility run of its own (every one is reused) and
    its results equal those of a single run."""
    out = tmp_path / "o"
    cfg = dict(mechanisms=["santext", "santext+"], epsilons=[2.0, 3.0], seeds=2)
    shards = [evaluate(_cfg(tiny, out, shard=f"{k}/2", **cfg)) for k in range(2)]
    assert not (out / "results.json").exists() and not (out / "report.md").exists()
    assert [s["configurations"] for s in shards] == [3, 3]   # unsanitized, 2 rows x 2 eps, random
    assert shards[1]["reused"].get("profile") == 4 and "utility" not in shards[1]["reused"]
    utility_files = sorted(p.name for p in (out / "checkpoints").glob("utility-*"))
    assert len(utility_files) == 1 + 5 * 2           # the unsanitized run once, the others per seed
    whole = evaluate(_cfg(tiny, out, **cfg))
    assert whole["reused"]["utility"] == len(utility_files)
    assert sorted(p.name for p in (out / "checkpoints").glob("utility-*")) == utility_files
    single = evaluate(_cfg(tiny, tmp_path / "single", **cfg))
    def scores(results):  # every number but the time it took
        return [{k: v for k, v in e["utility"].items() if k != "seconds"} for e in results["entries"]]
    assert scores(whole) == scores(single)
    for bad in ("2/2", "1", "-1/2", "a/b"):
        with pytest.raises(Exception, match="shard must be K/N"):
            evaluate(_cfg(tiny, tmp_path / "bad", shard=bad, **cfg))


def test_shards_take_the_shared_steps_one_at_a_time(tmp_path):
    """The bundles and profiles of sharded runs are computed under an exclusive lock on the checkpoint
    directory: a second shard waits until the first is through (a whole run takes no lock)."""
    import threading

    from ldptext_precompute.evaluation.runner import _one_shard_at_a_time
    order = []

    def enter(shard, name):
        with _one_shard_at_a_time(EvaluationConfig(out=str(tmp_path), shard=shard), tmp_path):
            order.append(name)

    with _one_shard_at_a_time(EvaluationConfig(out=str(tmp_path), shard="0/2"), tmp_path):
        waiting = threading.Thread(target=enter, args=("1/2", "second shard"))
        waiting.start()
        waiting.join(0.5)
        assert waiting.is_alive()
        enter(None, "whole run")    # takes no lock: not blocked
        order.append("first shard")
    waiting.join(10)
    assert order == ["whole run", "first shard", "second shard"]
