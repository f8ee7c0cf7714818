"""Progress on stderr: tqdm on a terminal, periodic status lines otherwise, nothing when disabled."""
from __future__ import annotations

import io
import re
import sys

import pytest

from ldptext_precompute import progress as P


class FakeClock:
    """Seconds that advance only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_status_lines_off_a_terminal_are_periodic_with_counts_and_an_estimate():
    clock, out = FakeClock(), io.StringIO()
    bar = P.Progress(2000, "dpbart training", unit="step", stream=out, interval=30, clock=clock)
    for _ in range(250):
        clock.now += 1.0  # 1 s per step
        bar.update()
    bar.set_postfix(loss="3.214")
    clock.now += 1.0
    bar.update()
    bar.close()
    lines = out.getvalue().splitlines()
    # a line at the start and after the first step, one per 30 s of the 251 s, then the final "done" line
    assert len(lines) == 2 + 251 // 30 + 1
    assert "\r" not in out.getvalue()
    assert lines[0] == "ldptext: dpbart training: step 0/2000 (0%), 0s elapsed, estimate pending"
    assert lines[1] == "ldptext: dpbart training: step 1/2000 (0%), 1s elapsed, about 33m19s left"
    assert lines[2] == "ldptext: dpbart training: step 31/2000 (2%), 31s elapsed, about 32m49s left"
    assert re.fullmatch(r"ldptext: dpbart training: step 241/2000 \(12%\), 4m01s elapsed, about 29m19s left",
                        lines[9])
    assert lines[-1] == "ldptext: dpbart training: done, 251 steps in 4m11s"


def test_status_line_with_postfix_and_unknown_total():
    clock, out = FakeClock(), io.StringIO()
    bar = P.Progress(None, "search", unit="row", stream=out, interval=0, clock=clock)
    bar.set_postfix(loss="1.5")
    clock.now += 5
    bar.update(3)
    assert out.getvalue().splitlines() == ["ldptext: search: 0 rows, 0s elapsed",
                                           "ldptext: search: 3 rows, 5s elapsed, loss 1.5"]


def test_a_resumed_loop_estimates_from_this_runs_rate_only():
    clock, out = FakeClock(), io.StringIO()
    bar = P.Progress(100, "stage", unit="step", initial=50, stream=out, interval=10, clock=clock)
    clock.now += 10
    bar.update(10)  # 10 steps in 10 s, 40 left
    assert out.getvalue().splitlines() == ["ldptext: stage: step 50/100 (50%), 0s elapsed, estimate pending",
                                           "ldptext: stage: step 60/100 (60%), 10s elapsed, about 40s left"]


def test_off_a_terminal_a_line_at_the_start_and_after_the_first_unit_then_at_the_interval():
    """A log shows a loop at once (not only after the interval, 30 s by default): its start, its first unit
    (the first rate), then a line per interval, and that it ended."""
    clock, out = FakeClock(), io.StringIO()
    for _ in P.track(range(100), "quick", stream=out, interval=30, clock=clock):
        clock.now += 0.1
    assert out.getvalue().splitlines() == ["ldptext: quick: it 0/100 (0%), 0s elapsed, estimate pending",
                                           "ldptext: quick: it 1/100 (1%), 0s elapsed, about 10s left",
                                           "ldptext: quick: done, 100 its in 10s"]


def test_an_interrupted_loop_has_no_done_line():
    clock, out = FakeClock(), io.StringIO()
    with pytest.raises(KeyboardInterrupt):
        for i in P.track(range(10), "stopped", stream=out, interval=30, clock=clock):
            clock.now += 5
            if i == 3:
                raise KeyboardInterrupt
    assert [line.split(",")[0] for line in out.getvalue().splitlines()] == [
        "ldptext: stopped: it 0/10 (0%)", "ldptext: stopped: it 1/10 (10%)"]


def test_disabled_prints_nothing_even_on_a_terminal():
    clock = FakeClock()
    for stream in (io.StringIO(), Terminal()):
        bar = P.Progress(10, "x", enabled=False, stream=stream, interval=0, clock=clock)
        clock.now += 100
        bar.update(5)
        bar.set_postfix(loss=1)
        bar.close()
        assert stream.getvalue() == ""
    assert list(P.track([1, 2], "x", enabled=False, stream=Terminal(), interval=0)) == [1, 2]


def test_a_terminal_gets_a_tqdm_bar():
    term = Terminal()
    bar = P.Progress(4, "neighbours", unit="row", stream=term, interval=0)
    assert bar._bar is not None and type(bar._bar).__module__.startswith("tqdm")
    bar.update(4)
    bar.close()
    text = term.getvalue()
    assert "\r" in text and "neighbours" in text and "4/4" in text
    assert "ldptext: " not in text  # no plain status lines on a terminal


def test_track_counts_items_and_takes_the_total_from_len():
    clock, out = FakeClock(), io.StringIO()
    seen = []
    for x in P.track(["a", "b", "c"], "cfg", unit="config", stream=out, interval=0, clock=clock):
        clock.now += 60
        seen.append(x)
    assert seen == ["a", "b", "c"]
    lines = out.getvalue().splitlines()[1:]     # after the start line
    assert lines[0] == "ldptext: cfg: config 1/3 (33%), 1m00s elapsed, about 2m00s left"
    assert lines[2] == "ldptext: cfg: config 3/3 (100%), 3m00s elapsed"
    assert lines[3] == "ldptext: cfg: done, 3 configs in 3m00s"


def test_default_stream_is_stderr_at_construction(capsys):
    clock = FakeClock()
    bar = P.Progress(2, "x", interval=0, clock=clock)
    clock.now += 1
    bar.update()
    assert capsys.readouterr().err.splitlines()[1].startswith("ldptext: x: it 1/2 (50%)")
    assert bar._stream is sys.stderr


@pytest.mark.parametrize("raw, expected", [(None, 30.0), ("5", 5.0), ("0", 0.0), ("bad", 30.0),
                                           ("-1", 30.0), ("nan", 30.0)])
def test_interval_from_the_environment(monkeypatch, raw, expected):
    if raw is None:
        monkeypatch.delenv(P.ENV_INTERVAL, raising=False)
    else:
        monkeypatch.setenv(P.ENV_INTERVAL, raw)
    assert P.status_interval() == expected
    assert P.status_interval(2) == 2.0


@pytest.mark.parametrize("seconds, text", [(0, "0s"), (59.4, "59s"), (250, "4m10s"), (3599, "59m59s"),
                                           (7500, "2h05m"), (-3, "0s")])
def test_format_duration(seconds, text):
    assert P.format_duration(seconds) == text


@pytest.mark.parametrize("target, label, extra", [
    ("santext", "santext neighbours", ["--head-size", "4"]),
    ("tem", "santext neighbours", ["--head-size", "4"]),
    ("custext", "custext output sets", ["--k", "5"]),
    ("cmp", "cmp largest distance", []),
    ("mahalanobis", "cmp largest distance", []),
])
def test_precompute_command_prints_status_lines_when_stderr_is_not_a_terminal(tmp_path, monkeypatch, capsys,
                                                                              target, label, extra):
    """A real (tiny) ``ldptext precompute`` with stderr captured: its long loop reports progress."""
    if target in ("custext", "cmp", "mahalanobis"):
        pytest.importorskip("faiss")
    import numpy as np

    from ldptext.cli import main

    rng = np.random.default_rng(0)
    src = tmp_path / "tiny.glove.txt"
    src.write_text("".join(f"w{i} " + " ".join(f"{v:.5f}" for v in rng.normal(size=4)) + "\n" for i in range(30)))
    monkeypatch.setenv(P.ENV_INTERVAL, "0")
    assert main(["precompute", target, "--embeddings", str(src), "--epsilon", "2", *extra,
                 "--out", str(tmp_path / "t.ldpb")]) == 0
    err = capsys.readouterr().err
    assert re.search(rf"^ldptext: {label}: \w+ (\d+)/\1 \(100%\), \d+s elapsed$", err, re.M), err
    assert re.search(rf"^ldptext: {label}: done, \d+ \w+s in \d+s$", err, re.M), err
    assert "\r" not in err and "w1" not in err  # no tqdm redraws, no vocabulary in the log


def test_precompute_status_lines_are_off_with_progress_false(tmp_path, monkeypatch, capsys):
    from conftest import build_tiny_bundle

    monkeypatch.setenv(P.ENV_INTERVAL, "0")
    build_tiny_bundle(tmp_path / "t.ldpb")  # progress=False
    assert "ldptext: " not in capsys.readouterr().err


def test_precompute_santext_reports_its_verbatim_stages(tmp_path, monkeypatch, capsys):
    """The verbatim cap (before the neighbours: the rates, then the rounds that remove outputs) and the
    tables' verbatim rates (after them), each |rows| x |outputs| work, report progress like the
    neighbour search; the stated rates are those of one call over every row."""
    import numpy as np

    from ldptext import verbatim
    from ldptext.cli import main
    from ldptext.santext import Sanitizer

    rng = np.random.default_rng(0)
    src = tmp_path / "tiny.glove.txt"
    src.write_text("".join(f"w{i} " + " ".join(f"{v:.5f}" for v in rng.normal(size=8)) + "\n"
                           for i in range(300)))
    monkeypatch.setenv(P.ENV_INTERVAL, "0")
    out = tmp_path / "t.ldpb"
    # at this epsilon and cap some outputs, not all, are above the cap
    assert main(["precompute", "santext", "--embeddings", str(src), "--epsilon", "2", "--head-size", "4",
                 "--verbatim-cap", "0.3", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    stages = ["santext verbatim cap: rates", "santext verbatim cap: removing outputs", "santext neighbours",
              "santext verbatim rates"]
    for label in stages:
        if label != "santext verbatim cap: removing outputs":  # (its total is not known in advance)
            assert re.search(rf"^ldptext: {label}: \w+ (\d+)/\1 \(100%\), \d+s elapsed$", err, re.M), err
        assert re.search(rf"^ldptext: {label}: done, \d+ \w+s in \d+s$", err, re.M), err
    firsts = [err.index(f"ldptext: {label}:") for label in stages]
    assert firsts == sorted(firsts)
    assert "\r" not in err and "w1" not in err
    with Sanitizer.load(out, seed=0) as san:
        stated = san.manifest["privacy"]["verbatim"]
        assert stated["cap"] == 0.3 and san.manifest["privacy"]["not_outputs"]["above_verbatim_cap"] > 0
        assert stated == verbatim.verbatim_rate(san.tables, 2.0, cap=0.3).as_manifest()
