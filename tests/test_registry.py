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

TOY = "toy-redact"


# ------------------------------------------------------------------ the toy mechanism: every token → [REDACTED]
# (its output does not depend on the input: 0-LDP per token, for any two inputs of the same length)

@dataclass(frozen=True)
class ToyReport:
    n_tokens: int
    epsilon: float = 0.0

    def to_dict(self) -> dict:
        return {"mechanism": TOY, "n_tokens": self.n_tokens, "epsilon": self.epsilon}


@dataclass(frozen=True)
class ToyResult:
    text: str
    report: ToyReport


class RedactRuntime:
    ledger_unit = "ldp"

    def __init__(self, bundle, *, seed=None, backend="auto"):
        self.bundle, self.ledger = bundle, None
        self.n_marks = int(np.asarray(bundle.arrays["marks"]).size)

    def sanitize_batch(self, texts):
        return [ToyResult(" ".join(["[REDACTED]"] * len(t.split())), ToyReport(len(t.split()))) for t in texts]

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
                          manifest={"params": {"marks": marks if stated_marks is None else stated_marks}},
                          sign_key=keys.build_signing_key(None))


@pytest.fixture
def toy():
    module = sys.modules[__name__].__name__
    entry = registry.register(registry.Mechanism(
        TOY, "toy", "token", f"{module}:RedactRuntime", f"{module}:build_redact_bundle", True, "Redact",
        "a test fixture, not a paper"))
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
    assert ("reference", "a test fixture, not a paper") in privacy_summary(
        {"mechanism": TOY, "params": {"epsilon": 0.0}})
    check_parameters(B.read_bundle(path))
    sign_bundle(path, keys.developer_key(), out=tmp_path / "re.ldpb")
    lie = build_redact_bundle(tmp_path / "lie.ldpb", stated_marks=4)
    with pytest.raises(ParameterMismatchError):
        sign_bundle(lie, keys.developer_key(), force=True)


def test_an_unregistered_mechanism_is_refused_by_writer_and_reader(tmp_path):
    with pytest.raises(BundleFormatError, match="unknown mechanism"):
        build_redact_bundle(tmp_path / "toy.ldpb")
    registry.register(registry.Mechanism(TOY, "toy", "token", f"{__name__}:RedactRuntime", None, True, "Redact",
                                         "test"))
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
