"""The offline checkpoint stores: keyed stages (the evaluation sweep) and named training stages."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from ldptext_precompute.checkpoints import CheckpointStore, StageCheckpoints, jsonable, key_digest


def test_jsonable_and_key_digest_are_canonical():
    assert jsonable({1: np.float32(0.5), "p": Path("a/b"), "x": [np.int64(3), math.nan, math.inf]}) == \
        {"1": 0.5, "p": "a/b", "x": [3, None, None]}
    assert key_digest({"a": 1, "b": 2}) == key_digest({"b": 2, "a": 1})
    assert key_digest({"a": 1}) != key_digest({"a": 2})


def test_keyed_file_depends_on_stage_key_and_base(tmp_path):
    a = CheckpointStore(tmp_path, base={"format": 1})
    b = CheckpointStore(tmp_path, base={"format": 2})
    assert a.path("s", {"k": 1}, "npz") != a.path("s", {"k": 2}, "npz")
    assert a.path("s", {"k": 1}, "npz") != b.path("s", {"k": 1}, "npz")
    assert a.path("s", {"k": 1}, "npz").name.startswith("s-")


def test_arrays_round_trip_and_count_reuse_of_earlier_runs_only(tmp_path):
    first = CheckpointStore(tmp_path / "ck", base={"data": "d"})
    assert first.load_arrays("sample", {"seed": 0}) is None
    first.save_arrays("sample", {"seed": 0}, {"x": np.arange(4)})
    assert np.array_equal(first.load_arrays("sample", {"seed": 0})["x"], np.arange(4))
    assert first.reused == {}                      # its own file
    again = CheckpointStore(tmp_path / "ck", base={"data": "d"})
    assert np.array_equal(again.load_arrays("sample", {"seed": 0})["x"], np.arange(4))
    assert again.reused == {"sample": 1}
    assert CheckpointStore(tmp_path / "ck", base={"data": "other"}).load_arrays("sample", {"seed": 0}) is None


def test_without_resume_only_this_runs_files_are_read(tmp_path):
    CheckpointStore(tmp_path).save_arrays("s", {}, {"x": np.zeros(1)})
    fresh = CheckpointStore(tmp_path, resume=False)
    assert fresh.load_arrays("s", {}) is None
    fresh.save_arrays("s", {}, {"x": np.ones(1)})
    assert fresh.load_arrays("s", {})["x"][0] == 1 and fresh.reused == {}


def test_an_unreadable_checkpoint_counts_as_missing(tmp_path):
    store = CheckpointStore(tmp_path)
    store.path("s", {}, "npz").write_bytes(b"not an npz")
    assert store.load_arrays("s", {}) is None
    store.path("j", {}, "json").write_text("{broken")
    assert store.cached_json("j", {}, lambda: 7, lambda v: {"v": v}, lambda d: d["v"]) == 7


def test_cached_json_computes_once(tmp_path):
    calls = []

    def compute() -> float:
        calls.append(1)
        return 0.25

    for _ in range(2):
        store = CheckpointStore(tmp_path)
        assert store.cached_json("fit", {"c": 1}, compute, lambda v: {"v": v}, lambda d: d["v"]) == 0.25
    assert len(calls) == 1 and store.reused == {"fit": 1}
    assert json.loads(store.path("fit", {"c": 1}, "json").read_text()) == {"v": 0.25}


def test_checkpoint_files_are_private(tmp_path):
    store = CheckpointStore(tmp_path)
    store.save_arrays("s", {}, {"x": np.zeros(1)})
    assert store.path("s", {}, "npz").stat().st_mode & 0o777 == 0o600


# -- named training stages -----------------------------------------------------------------------

@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def test_stage_round_trip_and_fingerprint(tmp_path, torch):
    ck = StageCheckpoints(tmp_path, "fp1")
    assert ck.load("base") is None and ck.finished(["base"]) == []
    ck.save("base", {"w": torch.ones(2, requires_grad=True)}, {"stage": "base", "clip": None})
    weights, state = ck.load("base")
    assert torch.equal(weights["w"], torch.ones(2)) and state == {"stage": "base", "clip": None}
    assert json.loads((tmp_path / "base.json").read_text())["fingerprint"] == "fp1"
    assert ck.finished(["base", "clip"]) == ["base"]
    assert StageCheckpoints(tmp_path, "fp2").load("base") is None      # another configuration
    (tmp_path / "base.pt").unlink()
    assert ck.load("base") is None                                     # a record without weights


def test_partial_stage_round_trip(tmp_path, torch):
    ck = StageCheckpoints(tmp_path, "fp")
    assert ck.load_partial("base") is None
    ck.save_partial("base", {"step": 7, "w": torch.zeros(3)}, {"pruned": [1, 2]})
    snap, state = ck.load_partial("base")
    assert snap["step"] == 7 and state == {"pruned": [1, 2]}
    assert ck.partial_names() == ["base.partial.ckpt"]
    assert StageCheckpoints(tmp_path, "other").load_partial("base") is None
    assert ck.load_partial("clip") is None
    ck.drop_partial("base")
    assert ck.partial_names() == []


def test_adopt_links_weights_and_writes_own_records(tmp_path, torch):
    src = StageCheckpoints(tmp_path / "src", "a")
    src.save("base", {"w": torch.ones(1)}, {"stage": "base"})
    src.save("clip", {"w": torch.ones(1)}, {"stage": "clip"})
    dst = StageCheckpoints(tmp_path / "dst", "b")
    assert dst.adopt(src, ["base", "clip", "prune-1"]) == ["base", "clip"]
    assert (tmp_path / "dst" / "base.pt").samefile(tmp_path / "src" / "base.pt")
    assert dst.state("clip") == {"stage": "clip"} and src.finished(["base"]) == ["base"]  # source untouched
    src.save("base", {"w": torch.zeros(1)}, {"stage": "base"})      # replaced, not written through
    assert torch.equal(dst.load("base")[0]["w"], torch.ones(1))
    dst.remove("clip")
    assert dst.finished(["base", "clip"]) == ["base"]
