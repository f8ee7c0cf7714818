"""The ``evaluate`` / ``calibrate`` command lines: options shared with other commands, ε lists, and what
is printed around a run (no data set needed: parsers and small helpers only)."""
import argparse

import pytest
from conftest import NEG, POS, SECRET, WORDS, write_sentiment_embeddings

pytest.importorskip("ldptext_precompute.santext.build")


def _parser(register):
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return parser


def _cap_action(parser, command):
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    return next(a for a in sub._actions if "--verbatim-cap" in a.option_strings)


def test_one_verbatim_cap_option_for_evaluate_and_precompute_santext():
    """``--verbatim-cap TAU|none`` is one helper (beside the TAU|none parser): the same parsing in
    ``evaluate`` (default: no cap) and ``precompute santext`` (default: the builders' default)."""
    from ldptext_precompute.evaluation import cli as evaluation_cli
    from ldptext_precompute.santext import cli as santext_cli
    from ldptext_precompute.santext.build import DEFAULT

    evaluate = _cap_action(_parser(evaluation_cli.register), "evaluate")
    precompute = _cap_action(_parser(santext_cli.register), "santext")
    assert evaluate.default is None and precompute.default == DEFAULT
    for action in (evaluate, precompute):
        assert action.type("none") is None and action.type("0.5") == 0.5 and action.metavar == "TAU"
        for bad in ("0", "1.5", "half"):
            with pytest.raises(argparse.ArgumentTypeError):
                action.type(bad)
    assert precompute.type(DEFAULT) == DEFAULT     # the builders' default passes through ...
    with pytest.raises(argparse.ArgumentTypeError):
        evaluate.type(DEFAULT)                     # ... evaluate has none of its own


@pytest.mark.parametrize("value, text", [(1.0, "1"), (1, "1"), (2.5, "2.5"), (2.2627416997969525, "2.2627416997969525"),
                                         (1e-05, "1e-05"), (0.1 + 0.2, "0.30000000000000004"), (float("inf"), "inf")])
def test_one_epsilon_format_the_shortest_decimal_that_round_trips(value, text):
    from ldptext_precompute.epsilon import format_epsilon
    assert format_epsilon(value) == text
    assert float(text) == float(value)


def test_equal_epsilons_are_swept_once_in_ascending_order_and_it_is_said():
    from ldptext_precompute.epsilon import normalize_epsilons
    from ldptext_precompute.evaluation.config import EvaluationConfig

    assert normalize_epsilons([1.0, 2.0]) == ([1.0, 2.0], None)
    swept, note = normalize_epsilons([3.0, 1, 1.0])
    assert swept == [1.0, 3.0]
    assert "1 numerically equal value(s) evaluated once" in note and "ascending" in note
    cfg = EvaluationConfig(epsilons=[3.0, 1, 1.0], mechanisms=["santext"], baselines=[],
                           dpbart_bundle="x.ldpb", dpbart_epsilons=[500.0, 50.0, 500])
    cfg.validate()
    assert cfg.epsilons == [1.0, 3.0] and cfg.dpbart_epsilons == [50.0, 500.0]


def test_report_columns_are_ascending_and_distinct_even_for_an_old_results_file():
    from ldptext_precompute.evaluation.report import _epsilon_columns

    results = {"config": {"epsilons": [3.0, 1.0, 1.0]},
               "entries": [{"epsilon": 1.0}, {"epsilon": None}, {"epsilon": 500.0}]}
    assert _epsilon_columns(results) == [1.0, 3.0, 500.0]


# -- a tiny sweep through the command line ---------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    pytest.importorskip("numpy")
    pytest.importorskip("sklearn")
    d = tmp_path_factory.mktemp("cli")
    write_sentiment_embeddings(d / "emb.txt", seed=3)
    lines = ["text,label"]
    for i in range(40):
        pos = i % 2 == 0
        words = [POS[i % 6] if pos else NEG[i % 6], "the", "movie", "is", "a",
                 POS[(i + 1) % 6] if pos else NEG[i % 5], SECRET]
        lines.append(" ".join(words) + "," + ("pos" if pos else "neg"))
    (d / "data.csv").write_text("\n".join(lines) + "\n")
    return d


def _evaluate_argv(tiny, tmp_path, *extra):
    return ["evaluate", "--data", str(tiny / "data.csv"), "--embeddings", str(tiny / "emb.txt"), "--vocab-size",
            "0", "--baselines", "none", "--seeds", "1", "--columns", "3", "--no-plots",
            "--cache-dir", str(tiny / "cache"), *extra]


def test_ctrl_c_says_what_is_kept_and_how_to_resume_and_the_report_counts_both_runs(tiny, tmp_path, capsys,
                                                                                   monkeypatch):
    """Ctrl-C: exit 130 with what is kept and the exact command that resumes (without --fresh); the resumed
    run's report states the time of both runs and its own. Also: equal ε once, ascending, and said so; the
    first progress line at once (interval 1000 s); the unsanitized line's label; a SanText-only report
    without SanText+'s p; the vocabulary as calibrate states it."""
    from ldptext.cli import main
    from ldptext_precompute.evaluation import scoring

    out = tmp_path / "o"
    argv = _evaluate_argv(tiny, tmp_path, "--mechanism", "santext", "--epsilon", "3,1,1.0", "--out", str(out))
    monkeypatch.setattr("sys.argv", ["ldptext", *argv, "--fresh"])
    monkeypatch.setenv("LDPTEXT_PROGRESS_INTERVAL", "1000")
    real, calls = scoring._utility_runs, []

    def stop_at_the_second(sweep, entry):
        calls.append(entry.mechanism)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(sweep, entry)

    monkeypatch.setattr(scoring, "_utility_runs", stop_at_the_second)
    assert main(argv + ["--fresh"]) == 130
    err = capsys.readouterr().err
    assert "ldptext: interrupted. Kept in " in err and " utility" in err and SECRET not in err
    assert f"the bundles built so far stay in {tiny / 'cache'}" in err
    resume = err.strip().splitlines()[-1].strip()
    assert resume.startswith("ldptext evaluate --data ") and "--fresh" not in resume
    assert "epsilon 3, 1, 1 given: 1 numerically equal value(s) evaluated once and columns in ascending order: " \
           "1, 3" in err
    assert "ldptext: evaluate utility: config 0/3 (0%), " in err          # at once, not after 1000 s
    assert "ldptext: evaluate utility: config 1/3 (33%), " in err         # after the first unit
    assert "utility Unsanitized: accuracy (trained and tested on unsanitized text) " in err
    assert "sanitized test" not in err.split("utility Unsanitized")[1].splitlines()[0]

    monkeypatch.setattr(scoring, "_utility_runs", real)
    assert main(argv) == 0
    done = capsys.readouterr()
    assert "(this run; " in done.out and " over every run of this sweep)" in done.out
    import json
    res = json.loads((out / "results.json").read_text())
    assert [r["outcome"] for r in res["runs"]] == ["interrupted", "finished"]
    assert res["timings"]["all_runs_s"] == pytest.approx(sum(r["seconds"] for r in res["runs"]), rel=1e-6)
    assert res["config"]["epsilons"] == [1.0, 3.0]
    report = (out / "report.md").read_text()
    assert " s in all** over 2 runs of this sweep" in report and "this run (which wrote this report) " in report
    assert "| mechanism | ε = 1 | ε = 3 |" in report
    assert "SanText+ p" not in report                                  # no SanText+ row
    assert f"vocabulary {len(WORDS)} words + the input-only <unk> row (V = {len(WORDS) + 1})" in report
    # a fresh run starts the record of runs again
    assert main(argv + ["--fresh", "--quiet"]) == 0
    assert len(json.loads((out / "results.json").read_text())["runs"]) == 1


def test_runs_total_is_the_union_of_their_intervals():
    from ldptext_precompute.evaluation.runlog import total_seconds
    runs = [{"started_unix": 0.0, "seconds": 10.0}, {"started_unix": 100.0, "seconds": 5.0},   # one after another
            {"started_unix": 101.0, "seconds": 5.0}]                                         # a parallel shard
    assert total_seconds(runs) == 10.0 + 6.0


def test_calibrate_ctrl_c_says_nothing_of_the_search_is_kept_and_how_to_resume(monkeypatch, capsys):
    from ldptext import cli
    from ldptext_precompute import calibrate as C

    def interrupted(*a, **kw):
        raise KeyboardInterrupt

    argv = ["calibrate", "--max-attack-success", "0.1", "--vocab-size", "100", "--quiet"]
    monkeypatch.setattr(C.CalibrationDomain, "from_embeddings", interrupted)
    monkeypatch.setattr("sys.argv", ["ldptext", *argv])
    assert cli.main(argv) == 130
    err = capsys.readouterr().err
    assert "ldptext: interrupted: nothing is kept" in err
    assert err.strip().splitlines()[-1].strip() == "ldptext calibrate --max-attack-success 0.1 --vocab-size 100 --quiet"


# -- SanText+: how much of a row's utility its kept-in-clear words explain --------------------------

def test_kept_words_texts_keep_only_non_sensitive_tokens_released_unchanged():
    np = pytest.importorskip("numpy")
    from types import SimpleNamespace

    from ldptext_precompute.evaluation.scoring import kept_words_texts

    class Tok:
        def decode_batch(self, pieces):
            return [" ".join(f"w{int(i)}" for i in p) for p in pieces]

    flat = np.array([0, 1, 2, 0, 3, 1, 1])            # documents [0 1 2] [0 3] [1 1]
    released = np.array([0, 4, 2, 5, 3, 1, 2])       # 1 -> 4, 0 -> 5 and 1 -> 2 replaced
    keep_rows = np.array([True, True, False, True, False, False])   # 0, 1 and 3 are non-sensitive
    corpus = SimpleNamespace(flat=flat, lengths=[3, 2, 2], n_train=2, tokenizer=Tok())
    train, test = kept_words_texts(corpus, released, keep_rows)
    # 2 came out unchanged but is sensitive: dropped; replaced non-sensitive words: dropped
    assert train == ["w0", "w3"] and test == ["w1"]


def test_each_santext_plus_row_says_how_much_of_its_utility_the_kept_words_explain(tiny, tmp_path):
    """Labels carried by function words alone ("the" vs "a"): the default split keeps them in the clear,
    so its kept-in-clear words alone reach the row's accuracy (about 100% of its gain over chance); the
    report has the sub-row under the SanText+ row and defines it, and only SanText+ rows have it."""
    import json

    from ldptext.cli import main

    data = tmp_path / "function-words.csv"
    rows = ["text,label"]
    for i in range(40):
        pos = i % 2 == 0
        word = ("the" if pos else "a")
        rows.append(f"{WORDS[9 + i % 9]} {word} {word} {word} movie {word} {word} plot," + ("pos" if pos else "neg"))
    data.write_text("\n".join(rows) + "\n")
    argv = _evaluate_argv(tiny, tmp_path, "--mechanism", "santext,santext+", "--epsilon", "1", "--quiet",
                          "--out", str(tmp_path / "o"))
    argv[argv.index("--data") + 1] = str(data)
    assert main(argv) == 0
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    by = {e["row"]: e for e in res["entries"]}
    kept = by["santext+:function-words"]["utility"]["kept_words_accuracy"]["tfidf"]
    row = by["santext+:function-words"]["utility"]["sanitized_test"]["accuracy"]["mean"]
    assert kept["mean"] >= 0.9 and row >= 0.9
    assert "kept_words_accuracy" not in by["santext"]["utility"] and "kept_words_accuracy" not in by["none"]["utility"]
    report = (tmp_path / "o" / "report.md").read_text()
    lines = report.splitlines()
    at = lines.index(next(ln for ln in lines if ln.startswith("| SanText+ (default split) |")))
    assert lines[at + 1].startswith("| ↳ its kept-in-clear words alone | ") and "% of the gain)" in lines[at + 1]
    assert report.count("| ↳ its kept-in-clear words alone |") == 1          # one accuracy table, one row
    assert "*↳ its kept-in-clear words alone* (under each SanText+ row)" in report
    assert "SanText+ p = 0.3" in report                                     # a SanText+ row: its p is stated


def test_interrupted_before_any_checkpoint_says_nothing_is_kept(tmp_path):
    from ldptext_precompute.evaluation.console import interrupted_message, resume_command

    msg = interrupted_message(tmp_path / "o", "ldptext evaluate --out o", tmp_path / "c")
    assert "no checkpoint is kept" in msg and f"stay in {tmp_path / 'c'}" in msg
    assert msg.splitlines()[-1] == "  ldptext evaluate --out o"
    assert resume_command("evaluate", ["evaluate", "--fresh", "--out", "my out"]) == "ldptext evaluate --out 'my out'"
