"""The papers' table (``make evaluate-paper-table``) rendered from a small fabricated ``results.json``."""
import json
import os
import subprocess
from datetime import datetime, timezone
from pathlib import Path

from ldptext_precompute.evaluation.paper_table import PUBLISHED, main, paper_table


def acc(*values):
    mean = sum(values) / len(values)
    std = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5 if len(values) > 1 else 0.0
    return {"accuracy": {"mean": mean, "std": std, "values": list(values)}}


def entry(mechanism, epsilon, finetune, tfidf=None, split=None, train_s=(120.0,)):
    hyper = [{"best_epoch": 1.0, "holdout_score": 0.8, "train_s": t, "device": "cpu"} for t in train_s]
    classifiers = {"finetune": {"sanitized_test": acc(*finetune), "original_test": acc(*finetune),
                                "classifier_hyperparameters": hyper}}
    if tfidf:
        classifiers["tfidf"] = {"sanitized_test": acc(*tfidf), "original_test": acc(*tfidf),
                                "classifier_hyperparameters": [{"C": 1.0, "class_weight": None}]}
    first = next(iter(classifiers.values()))
    return {"mechanism": mechanism, "split": split, "epsilon": epsilon,
            "utility": {"sanitized_test": first["sanitized_test"], "classifiers": classifiers}}


def results(reused=None):
    return {
        "config": {"embeddings": "glove-6b-50d", "vocab_size": 20000, "p": 0.3, "seeds": 2},
        "dataset": {"name": "rotten-tomatoes", "n_train": 100, "n_test": 20},
        "classifiers": {"finetune": {"description": "fine-tuned thing"}, "tfidf": {"description": "tf-idf thing"}},
        "timings": {"total_s": 3725.0}, "reused": reused or {},
        "entries": [
            entry("none", None, [0.85], [0.70]),
            entry("random", None, [0.50, 0.52], [0.49, 0.51], train_s=(100.0, 140.0)),
            entry("santext", 1.0, [0.60, 0.62], [0.55, 0.57]),
            entry("santext", 3.0, [0.70, 0.74], [0.65, 0.69]),
            entry("santext+", 1.0, [0.75, 0.75], split="function-words"),
            entry("santext+", 1.0, [0.78, 0.80], split="frequency:0.9"),
        ]}


def rows_of(table):
    """``{(row, source): [cell per epsilon]}`` of the table's body lines."""
    out = {}
    for line in table.splitlines():
        if line.startswith("| ") and "---" not in line:
            cells = [c.strip() for c in line.strip("|").split("|")]
            out[tuple(cells[:2])] = cells[2:]
    return out


def test_cells_are_mean_and_std_over_seeds_in_their_epsilon_column():
    table = paper_table(results())
    header = next(line for line in table.splitlines() if line.startswith("| | source"))
    # the columns: every epsilon of the run and of the published series, ascending
    assert header.split("|")[3:-1] == [f" ε = {e} " for e in (1, 2, 3, 4, 8, 16)]
    rows = rows_of(table)
    assert rows[("SanText", "this run")] == ["0.610 ± 0.014", "", "0.720 ± 0.028", "", "", ""]
    assert rows[("SanText+ (default split)", "this run")][0] == "0.750 ± 0.000"
    assert rows[("SanText+ (frequency split 0.9)", "this run")][0] == "0.790 ± 0.014"
    # rows without epsilon sit in the first column; a single run has no std
    assert rows[("Random", "this run")] == ["0.510 ± 0.014", "", "", "", "", ""]
    assert rows[("Unsanitized", "this run")][0] == "0.850"


def test_published_series_follow_their_row_and_rows_absent_from_the_run_are_left_out():
    lines = paper_table(results()).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| SanText | this run"))
    yue, clusant = lines[start + 1], lines[start + 2]
    assert "Yue 2023" in yue and yue.split("|")[3:6] == [" 0.510 ", " 0.584 ", " 0.837 "]
    assert "CluSanT" in clusant and clusant.split("|")[3:-1] == [" 0.678 ", "  ", "  ", " 0.621 ", " 0.704 ", " 0.713 "]
    freq = next(i for i, line in enumerate(lines) if line.startswith("| SanText+ (frequency split 0.9)"))
    assert "Yue 2023" in lines[freq + 1] and "0.780" in lines[freq + 1]
    default = next(i for i, line in enumerate(lines) if line.startswith("| SanText+ (default split)"))
    assert lines[default + 1].startswith("| SanText+ (frequency split")    # no published default split
    assert not any("CusText" in line or "CMP" in line for line in lines)   # not in this run
    order = [line.split("|")[1].strip() for line in lines if "| this run |" in line]
    assert order == ["Random", "SanText", "SanText+ (default split)", "SanText+ (frequency split 0.9)", "Unsanitized"]
    assert {p.row.mechanism for p in PUBLISHED} >= {"santext", "santext+", "custext", "cmp", "random", "none"}


def test_classifier_choice_wall_time_and_fine_tuning_time():
    table = paper_table(results())
    assert "classifier: fine-tuned thing" in table and "Wall time: 1 h 02 min." in table
    # seven fine-tuning runs: five of 120 s and the random row's 100 s and 140 s
    assert "Fine-tuning: 7 runs, 2 min 00 s each on average (cpu)." in table
    other = paper_table(results(reused={"utility": 3, "samples": 2}), classifier="tfidf")
    assert "classifier: tf-idf thing" in other and "Fine-tuning" not in other
    assert "resumed from 5 checkpoints" in other
    assert rows_of(other)[("SanText", "this run")][0] == "0.560 ± 0.014"


def test_command_line_prints_or_writes_the_table(tmp_path, capsys):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results()))
    assert main([str(path)]) == 0
    printed = capsys.readouterr().out
    assert printed == paper_table(results())
    assert main([str(path), "--out", str(tmp_path / "t.md"), "--classifier", "tfidf"]) == 0
    assert (tmp_path / "t.md").read_text() == paper_table(results(), classifier="tfidf")


def test_sweep_time_from_the_first_start_to_the_results_file(tmp_path, capsys):
    first = datetime(2026, 11, 26, 9, 53, 8, tzinfo=timezone.utc)
    table = paper_table(results(), since=(first, datetime(2026, 11, 26, 14, 44, 30, tzinfo=timezone.utc)))
    assert "Sweep: 4 h 51 min from its first start (2026-11-26T09:53:08Z) to this results file" in table
    assert "Sweep:" not in paper_table(results())
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results()))
    written = datetime(2026, 11, 26, 11, 3, 8, tzinfo=timezone.utc).timestamp()
    os.utime(path, (written, written))
    assert main([str(path), "--started", "2026-11-26T09:53:08"]) == 0
    assert "Sweep: 1 h 10 min from its first start (2026-11-26T09:53:08Z)" in capsys.readouterr().out


def test_make_status_of_a_finished_sweep_says_done_not_its_last_progress_line(tmp_path):
    out = tmp_path / "evaluate-paper"
    (out / "checkpoints").mkdir(parents=True)
    (out / "checkpoints" / "utility-1.json").write_text("{}")
    (tmp_path / "evaluate-paper.log").write_text(
        "== start 2026-11-26T09:53:08Z\nldptext: evaluate utility: config 15/32 (47%), about 2h29m left\n")
    root = Path(__file__).resolve().parents[1]

    def status() -> str:
        return subprocess.run(["make", "-s", "evaluate-paper-status", f"EVAL_PAPER_OUT={out}"], cwd=root,
                              capture_output=True, text=True, check=True).stdout

    running = status()
    assert "first started 2026-11-26T09:53:08Z; 1 fine-tuning runs finished" in running
    assert "about 2h29m left" in running and "done:" not in running
    (out / "results.json").write_text(json.dumps(results()))
    done = status()
    assert f"done: {out}/results.json written" in done and "left" not in done


def test_header_states_the_vocabulary_p_and_every_runs_time_as_the_report_does():
    doc = results()
    doc["vocabulary"] = "20000 words + the input-only <unk> row (V = 20001)"
    doc["timings"] = {"total_s": 600.0, "all_runs_s": 3725.0}
    doc["runs"] = [{"seconds": 3125.0}, {"seconds": 600.0}]
    table = paper_table(doc)
    assert "vocabulary 20000 words + the input-only <unk> row (V = 20001); SanText+ p = 0.3;" in table
    assert "Wall time: 1 h 02 min over the 2 runs of this sweep" in table and "this invocation 10 min 00 s" in table
    doc["entries"] = [e for e in doc["entries"] if e["mechanism"] != "santext+"]
    assert "SanText+ p" not in paper_table(doc)
