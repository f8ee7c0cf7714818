"""Data loaders: CSV / JSONL, deterministic stratified splits, no text in error messages."""
import json

import pytest

from ldptext.errors import InputError
from ldptext_precompute.evaluation.datasets import load_dataset, load_table, split_indices


def test_split_is_deterministic_stratified_and_disjoint():
    labels = ["a"] * 10 + ["b"] * 30
    tr, te = split_indices(labels, 0.2, seed=0)
    assert (tr, te) == split_indices(labels, 0.2, seed=0)
    assert sorted(tr + te) == list(range(40)) and not set(tr) & set(te)
    assert sum(labels[i] == "a" for i in te) == 2 and sum(labels[i] == "b" for i in te) == 6
    assert split_indices(labels, 0.2, seed=1)[1] != te


def test_csv_and_jsonl_load_the_same_rows(tmp_path):
    rows = [{"text": f"secret words {i}", "label": i % 2} for i in range(10)]
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (tmp_path / "d.csv").write_text("text,label\n" + "".join(f"{r['text']},{r['label']}\n"
                                                            for r in rows))
    assert load_table(tmp_path / "d.csv") == load_table(tmp_path / "d.jsonl")
    ds = load_dataset(tmp_path / "d.csv", test=tmp_path / "d.jsonl", max_train=4)
    assert len(ds.test_texts) == 10 and len(ds.train_texts) == 4
    assert ds.info["n_train"] == 4 and ds.labels == ["0", "1"]


def test_errors_name_the_line_not_the_text(tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"text": "my secret diagnosis", "lab": 1}\n')
    with pytest.raises(InputError) as e:
        load_table(tmp_path / "bad.jsonl")
    assert "line 1" in str(e.value) and "secret" not in str(e.value)
    (tmp_path / "bad.csv").write_text("body,label\nmy secret diagnosis,1\n")
    with pytest.raises(InputError) as e:
        load_table(tmp_path / "bad.csv")
    assert "secret" not in str(e.value)
