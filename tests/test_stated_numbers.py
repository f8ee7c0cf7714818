"""Stated numbers: what the DP-BART tools say about ε = ∞, the exactness of the noise
and every option's help text (the runtime and its reports are tested in test_dpbart.py and
test_noise.py). No bundle needed: seconds."""
from __future__ import annotations

import argparse

import pytest

from ldptext.cli import build_parser


def _sub(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    if name not in sub.choices:
        pytest.skip(f"{name} is not registered (offline extra missing)")
    return sub.choices[name]


@pytest.mark.parametrize("command", ["rewrite", "evaluate"])
def test_every_option_has_help_text(command):
    missing = [a.option_strings or [a.dest] for a in _sub(command)._actions
               if not isinstance(a, argparse._HelpAction) and not (a.help or "").strip()]
    assert missing == []


@pytest.mark.parametrize("value,words", [("inf", "infinite"), ("1,1e400", "infinite"), ("2,nan", "not a number"),
                                         ("0", "> 0"), ("1,-3", "> 0")])
def test_evaluate_refuses_infinite_and_invalid_epsilon_at_parse_time(value, words, capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["evaluate", "--out", "x", f"--epsilon={value}"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert words in err
    if words == "infinite":
        assert "'none' baseline" in err and "no privacy" in err


def test_evaluate_accepts_finite_epsilons():
    args = build_parser().parse_args(["evaluate", "--out", "x", "--epsilon", "0.5,2,3e2"])
    assert args.epsilon == [0.5, 2.0, 300.0]


def test_inspect_of_a_dpbart_bundle_states_exact_noise_and_the_eps_inf_rule():
    from ldptext.commands.bundle import privacy_summary

    rows = dict(privacy_summary({"mechanism": "dpbart",
                                 "dpbart": {"seq_len": 32, "hidden": 768, "n_pruned": 68, "clip": 0.1}}))
    assert "exact" in rows["floating point"] and "no slack is added to eps" in rows["floating point"]
    assert "rounded up" in rows["floating point"]
    assert "evaluation" in rows["eps = inf"] and "no privacy" in rows["eps = inf"]
