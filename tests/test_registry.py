"""The mechanism registry: the one list of mechanisms, and a toy mechanism added through it alone
(a runtime class, a builder, one register call) that the bundle reader, the loaders, ``ldptext
sanitize``, ``bundle inspect`` and the check before signing all pick up."""
from __future__ import annotations

import io
import json
import sys
from dataclasses import dataclass

import numpy as np
import pytest

import ldptext
from ldptext import bundle as B
from ldptext import keys, registry
from ldptext.errors import BundleFormatError, ParameterMismatchError
from ldptext.guarantee import Guarantee, Statement

TOY = "toy-redact"


# ------------------------------------------------------------------ the toy mechanism: every token → [REDACTED]
# (its output does not depend on the input: 0-LDP per token, for any two inputs of the same length).
# This module is its unit too: STATEMENTS and guarantee(manifest), as ldptext.mechanisms.<name> are.

STATEMENTS = {TOY: Statement(
    notion="LDP", unit="token", neighbouring="any two tokens (the output ignores its input)", metric=None,
    worst_case_rule="eps", no_worst_case="", numeric_note="no randomness: the output is constant",
    kept_in_clear=None, ledger_kind="ldp", reference="a test fixture, not a paper",
    parameters=("epsilon", "marks"))}


def guarantee(manifest: dict) -> Guarantee:
    eps = float(manifest["params"]["epsilon"])
    return Guarantee(mechanism=TOY, label="Redact", statement=STATEMENTS[TOY], epsilon=eps,
                     ledger_unit="ldp", worst_case_epsilon=eps, numeric_tolerance=0.0,
                     parameters={"epsilon": eps, "marks": manifest["params"]["marks"]})


@dataclass(frozen=True)
class ToyResult:
    text: str
    report: "object"


class RedactRuntime:
    ledger_unit = "ldp"

    def __init__(self, bundle, *, seed=None, backend="auto"):
        self.bundle, self.ledger = bundle, None
        self.n_marks = int(np.asarray(bundle.arrays["marks"]).size)

    def sanitize_batch(self, texts):
        g = registry.get(TOY).guarantee(self.bundle.manifest)
        return [ToyResult(" ".join(["[REDACTED]"] * len(t.split())),
                          g.report(len(t.split()), seeded=False, backend="fallback")) for t in texts]

    def check_parameters(self):
        if self.bundle.manifest["params"]["marks"] != self.n_marks:
            raise ParameterMismatchError("stated marks are not the array's")

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def build_redact_bundle(out, *, marks: int = 3, stated_marks: int | None = None):
    return B.write_bundle(out, mechanism=TOY, arrays={"marks": np.zeros(marks, np.int32)},
                          manifest={"params": {"epsilon": 0.0,
                                                "marks": marks if stated_marks is None else stated_marks}},
                          sign_key=keys.build_signing_key(None))


@pytest.fixture
def toy():
    module = sys.modules[__name__].__name__
    entry = registry.register(registry.Mechanism(  # the one registry line
        TOY, "toy", "token", f"{module}:RedactRuntime", f"{module}:build_redact_bundle", True, "Redact", module))
    yield entry
    registry.unregister(TOY)


def test_a_toy_mechanism_runs_end_to_end_through_the_registry_alone(toy, tmp_path, monkeypatch, capsys):
    from ldptext.bundle_check import check_parameters, sign_bundle
    from ldptext.cli import main
    from ldptext.commands.bundle import privacy_summary
    from ldptext.runtime import load_token_runtime

    path = toy.builder_function()(tmp_path / "toy.ldpb")
    assert B.read_bundle(path).mechanism == TOY
    with load_token_runtime(path) as san:
        assert isinstance(san, RedactRuntime)
        assert [r.text for r in san.sanitize_batch(["my secret name"])] == ["[REDACTED] [REDACTED] [REDACTED]"]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"alice went home\n")))
    assert main(["sanitize", "--bundle", str(path), "--json", "-"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["text"] == "[REDACTED] [REDACTED] [REDACTED]" and out["report"]["mechanism"] == TOY
    # the report is the one report type, rendered from the toy's unit
    rep = out["report"]
    assert rep["notion"] == "LDP" and rep["neighbouring"] == STATEMENTS[TOY].neighbouring
    assert rep["worst_case_token_epsilon"] == 0.0 and rep["document_epsilon"] == 0.0 and rep["n_tokens"] == 3
    assert rep["worst_case_note"].startswith("eps: pure LDP")
    summary = dict(privacy_summary(B.read_bundle(path).manifest))
    assert summary["reference"] == "a test fixture, not a paper"
    assert summary["notion"].startswith("LDP: Pr[M(x) in S] <= exp(eps)")
    assert summary["worst case per token"] == "eps = 0-LDP"
    assert main(["bundle", "inspect", str(path)]) == 0
    text = capsys.readouterr().out
    assert "any two tokens (the output ignores its input)" in text and "a test fixture, not a paper" in text
    check_parameters(B.read_bundle(path))
    sign_bundle(path, keys.developer_key(), out=tmp_path / "re.ldpb")
    lie = build_redact_bundle(tmp_path / "lie.ldpb", stated_marks=4)
    with pytest.raises(ParameterMismatchError):
        sign_bundle(lie, keys.developer_key(), force=True)


def test_an_unregistered_mechanism_is_refused_by_writer_and_reader(tmp_path):
    with pytest.raises(BundleFormatError, match="unknown mechanism"):
        build_redact_bundle(tmp_path / "toy.ldpb")
    registry.register(registry.Mechanism(TOY, "toy", "token", f"{__name__}:RedactRuntime", None, True, "Redact",
                                         __name__))
    try:
        path = build_redact_bundle(tmp_path / "toy.ldpb")
    finally:
        registry.unregister(TOY)
    with pytest.raises(BundleFormatError, match="unknown mechanism"):
        B.read_bundle(path)


def test_the_registry_is_the_list_every_consumer_reads():
    from ldptext_precompute.evaluation import comparison, config, report

    token = registry.names(kind="token")
    assert set(token) | {"dpbart"} == set(registry.names())
    assert report.ROW_ORDER == ("random", *registry.names(), "none")
    assert set(config.MECHANISMS) == set(token)
    assert set(comparison.EXACT_MECHANISMS) == {"tem", "custext", "custext+"}
    assert set(comparison.ESTIMATED_MECHANISMS) == {"cmp", "mahalanobis"}
    for m in registry.all_mechanisms():
        cls = m.runtime_class()
        assert getattr(ldptext, cls.__name__) is cls            # every runtime is a top-level name
        assert callable(m.builder_function())
        if m.kind == "token":
            assert m.name in sys.modules[cls.__module__].MECHANISMS  # its module serves what the registry says


def test_register_refuses_a_taken_name_or_an_unknown_kind():
    with pytest.raises(ValueError, match="already"):
        registry.register(registry.get("santext"))
    with pytest.raises(ValueError, match="kind"):
        registry.register(registry.Mechanism("x", "x", "sentence", "a:b", None, True, "X", "r"))
    assert not registry.is_known("x")


def test_no_mechanism_name_is_spelled_outside_its_unit_and_the_registry():
    """A string equal to a mechanism's name appears in the runtime only in the registry and in its
    family's own modules (``ldptext/<family>*.py`` and ``ldptext/mechanisms/<family>.py``): every
    other module asks the registry or the mechanism's statement."""
    import ast
    from pathlib import Path

    root = Path(ldptext.__file__).parent
    names, found = set(registry.names()), []
    for f in sorted(root.rglob("*.py")):
        rel = f.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in names:
                family = registry.get(node.value).family
                if not (rel in ("registry.py", f"mechanisms/{family}.py")
                        or ("/" not in rel and rel.startswith(family))):
                    found.append(f"{rel}:{node.lineno} {node.value!r}")
    assert not found, found


def test_every_mechanism_states_its_guarantee_once_in_its_unit():
    """Each registered mechanism's unit states a valid Statement for it, and the guarantee of a
    manifest carries that statement (no other module states one)."""
    from ldptext.guarantee import NOTIONS, WORST_CASE_RULES
    for m in registry.all_mechanisms():
        s = m.statement()
        assert s.notion in NOTIONS and (s.worst_case_rule is None or s.worst_case_rule in WORST_CASE_RULES)
        assert m.reference == s.reference and s.reference
    codes = [m.c_code for m in registry.all_mechanisms() if m.c_code is not None]
    assert len(codes) == len(set(codes))
