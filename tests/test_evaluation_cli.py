"""The ``evaluate`` / ``calibrate`` command lines: options shared with other commands, ε lists, and what
is printed around a run (no data set needed: parsers and small helpers only)."""
import argparse

import pytest

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
