"""Every SanText privacy statement literally true: the report states the guarantee that holds
(SanText: ε·d-MLDP with the true worst case ε·D_max; SanText+: UMLDP, no finite worst-case LDP level),
the ledger is charged the per-token metric ε in the bundle's metric unit, the numeric tolerance is
never above the stated 1e-9, and seeded output says so. Reference numbers are computed here in
float64 from the bundle's embeddings, independently of the implementation."""
import json
import os
import re

import numpy as np
import pytest

from conftest import build_tiny_bundle, load_seeded


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    return load_seeded(build_tiny_bundle(tmp_path_factory.mktemp("p") / "s.ldpb", mechanism="santext",
                                         epsilon=2.0, n=40))


@pytest.fixture(scope="module")
def plus(tmp_path_factory):
    return load_seeded(build_tiny_bundle(tmp_path_factory.mktemp("q") / "sp.ldpb", mechanism="santext+",
                                         epsilon=3.0, p=0.3, w=0.7, n=40))


def true_dmax(san) -> float:
    emb = np.asarray(san.embeddings, dtype=np.float64)[san.valid_input]
    return float(max(np.linalg.norm(emb - e, axis=1).max() for e in emb))


def test_santext_plus_has_no_finite_worst_case_ldp_level(plus):
    kept = np.flatnonzero(plus.valid_input & ~plus.sensitive)
    x, other = int(kept[0]), int(kept[1])
    probs = plus.probabilities([x, other])
    # the witness: Pr[M(x)=x] = 1 - p while Pr[M(x')=x] = 0, an unbounded ratio
    assert probs[0, x] == pytest.approx(0.7, rel=1e-12) and probs[1, x] == 0.0
    assert plus.worst_case_token_epsilon is None
    r = plus.privacy_report(5)
    assert r.worst_case_token_epsilon is None and r.worst_case_document_epsilon is None
    assert "in the clear" in r.worst_case_note and r.kept_in_clear_probability == pytest.approx(0.7)
    d = r.to_dict()
    json.dumps(d, allow_nan=False)  # no infinities in the JSON either
    assert d["worst_case_token_epsilon"] is None
    text = r.summary()
    assert "no finite worst-case LDP level" in text and "D_max" not in text
    # the per-token number is the metric ε (what the ledger composes), not a claimed LDP level
    assert r.per_token_epsilon == 3.0 and r.document_epsilon == pytest.approx(15.0)


def test_santext_worst_case_is_eps_dmax_and_bounds_every_ratio(plain):
    rows = np.flatnonzero(plain.valid_input)
    logp = plain.log_probabilities(rows)[:, plain.outputs]
    worst_ratio = float(np.max(logp.max(axis=0) - logp.min(axis=0)))
    dmax = true_dmax(plain)
    r = plain.privacy_report(4)
    assert r.worst_case_token_epsilon == pytest.approx(2.0 * dmax, rel=1e-9)
    assert r.worst_case_document_epsilon == pytest.approx(4 * 2.0 * dmax, rel=1e-9)
    assert worst_ratio <= r.worst_case_token_epsilon + r.ratio_slack  # a true LDP level
    assert r.ratio_slack == 2 * r.numeric_tolerance
    assert "eps*D_max" in r.summary()


def test_ledger_is_charged_the_metric_epsilon_in_the_bundles_metric_unit(tmp_path, plain, plus):
    from ldptext.errors import BudgetExceededError, LedgerError
    from ldptext.ledger import Ledger
    # same embedding (seed 0, n=40) at another ε and mechanism: same metric, same unit
    assert re.fullmatch(r"metric:[0-9a-f]{16}", plain.ledger_unit)
    assert plain.ledger_unit == plus.ledger_unit
    other = load_seeded(build_tiny_bundle(tmp_path / "o.ldpb", mechanism="santext", epsilon=3.0, n=40, seed=1))
    assert other.ledger_unit != plus.ledger_unit
    # a budget of B buys B / ε tokens: 1000 at ε = 3 is 333 tokens
    ledger = Ledger(tmp_path / "l.ledger", budget=1000.0, key=os.urandom(32), unit=plus.ledger_unit)
    san = load_seeded(plus._bundle.path, ledger=ledger)
    res = san.sanitize_batch([" ".join(["w1"] * 300), " ".join(["w2"] * 33)])
    assert [r.n_tokens for r in res] == [300, 33]
    assert ledger.spent()[0] == 999.0
    assert ledger.receipts()[-1].epsilon == 999.0
    with pytest.raises(BudgetExceededError):
        san.sanitize("w3")
    with pytest.raises(LedgerError):  # another metric's ledger refuses the charge
        load_seeded(other._bundle.path, ledger=ledger).sanitize("w3")
    ldp = Ledger(tmp_path / "ldp.ledger", budget=1e9, key=os.urandom(32))
    with pytest.raises(LedgerError):  # an (ε, δ)-LDP ledger refuses a metric ε
        load_seeded(plus._bundle.path, ledger=ldp).sanitize("w3")


def test_report_says_whether_output_is_seeded(plain):
    import warnings

    from ldptext.santext import Sanitizer
    assert plain.seeded and plain.privacy_report(1).seeded
    assert plain.privacy_report(1).to_dict()["seeded"] is True
    assert "NOT private" in plain.privacy_report(1).summary()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an unseeded load does not warn
        private = Sanitizer.load(plain._bundle.path)
    r = private.sanitize("w1 w2").report
    assert private.seeded is False and r.seeded is False and r.to_dict()["seeded"] is False
    assert "NOT private" not in r.summary()


def test_build_refuses_a_tolerance_above_the_stated_1e9(tmp_path):
    from ldptext.errors import ParameterError
    out = tmp_path / "big.ldpb"
    with pytest.raises(ParameterError, match="tolerance"):
        build_tiny_bundle(out, mechanism="santext", epsilon=5e5, n=30)
    assert not out.exists()


def test_runtime_refuses_a_bundle_stating_a_tolerance_above_1e9(tmp_path, plain):
    from ldptext import bundle as B
    from ldptext import keys
    from ldptext.errors import BundleIntegrityError
    blobs = {n: plain._bundle.blob(n) for n in ("tokenizer.json", "vocab.json")}
    manifest = {k: v for k, v in plain.manifest.items()
                if k not in ("arrays", "format", "format_version", "mechanism")}
    bad = dict(manifest, numeric=dict(manifest["numeric"], max_relative_error=1e-6))
    path = B.write_bundle(tmp_path / "bad.ldpb", mechanism="santext", arrays=plain.tables.stored_arrays(),
                          manifest=bad, blobs=blobs, sign_key=keys.build_signing_key(None))
    with pytest.raises(BundleIntegrityError, match="tolerance"):
        load_seeded(path)


@pytest.mark.parametrize("epsilon", ["inf", "1e309", "Infinity"])
def test_infinite_epsilon_is_refused_with_a_clear_error(tmp_path, capsys, epsilon):
    from ldptext.cli import main
    out = tmp_path / "x.ldpb"
    code = main(["precompute", "santext", "--embeddings", "glove-6b-50d", "--vocab-size", "50",
                 "--epsilon", epsilon, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert "not private" in err and "inf" in err


@pytest.mark.parametrize("epsilon", ["1e308", "1e7"])
def test_a_huge_finite_epsilon_is_a_clear_argument_error_not_a_traceback(tmp_path, capsys, epsilon):
    from ldptext.cli import main
    out = tmp_path / "x.ldpb"
    code = main(["precompute", "santext", "--embeddings", "glove-6b-50d", "--vocab-size", "50",
                 "--epsilon", epsilon, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert err.startswith("ldptext: error: epsilon must be at most 1e+06") and err.count("\n") == 1


def test_a_ledger_of_another_unit_is_refused_at_load_not_at_the_first_release(tmp_path, plus):
    from ldptext.errors import LedgerError
    from ldptext.ledger import Ledger
    from ldptext.santext import Sanitizer

    ldp = Ledger(tmp_path / "ldp.ledger", budget=10.0, key=os.urandom(32))  # unit "ldp"
    with pytest.raises(LedgerError, match="unit 'ldp'.*" + re.escape(plus.ledger_unit)):
        Sanitizer.load(plus._bundle.path, ledger=ldp)
    assert ldp.spent() == (0.0, 0.0)
    right = Ledger(tmp_path / "m.ledger", budget=10.0, key=os.urandom(32), unit=plus.ledger_unit)
    assert load_seeded(plus._bundle.path, ledger=right).ledger is right


def test_report_names_the_backend_that_sampled(plain):
    from ldptext.rng import SeededModeWarning
    from ldptext.santext import Sanitizer

    assert plain.privacy_report(1).backend == plain.backend
    assert plain.sanitize("w1").report.to_dict()["backend"] == plain.backend
    with pytest.warns(SeededModeWarning):
        slow = Sanitizer.load(plain._bundle.path, backend="fallback", seed=1)
    assert slow.sanitize("w1 w2").report.backend == "fallback"
