"""The verbatim rate P(M(x) = x) and the near-identity refusal (SanText(+) at build and load, DP-BART at
rewrite), against an independent float64 evaluation of the mechanism's formula."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from conftest import build_tiny_bundle, edited_bundle, load_seeded

from ldptext import bundle as B
from ldptext import keys
from ldptext.errors import ParameterMismatchError, WeakPrivacyError
from ldptext.verbatim import NEAR_IDENTITY_MEDIAN, verbatim_probabilities


def reference_verbatim(san) -> np.ndarray:
    """P(M(x)=x) for every sensitive input, from the dequantized metric vectors with plain numpy."""
    t = san.tables
    vec = t.emb_q.astype(np.float64) * t.emb_scale.astype(np.float64)[:, None]
    outs = t.outputs.astype(np.int64)
    xs = np.flatnonzero(t.valid_input.astype(bool) & ~t.keep_row.astype(bool))
    d = np.linalg.norm(vec[xs][:, None, :] - vec[outs][None, :, :], axis=2)
    w = np.exp(-san.epsilon / 2 * (d - d.min(axis=1, keepdims=True)))  # no 0/0 for a far non-output row
    own = np.array([w[i, np.flatnonzero(outs == x)[0]] if (outs == x).any() else 0.0 for i, x in enumerate(xs)])
    return own / w.sum(axis=1)


@pytest.mark.parametrize("mechanism,epsilon", [("santext", 0.5), ("santext", 2.0), ("santext+", 1.5)])
def test_stated_rate_is_the_formula_over_every_sensitive_input(tmp_path, mechanism, epsilon):
    san = load_seeded(build_tiny_bundle(tmp_path / "b.ldpb", mechanism=mechanism, epsilon=epsilon))
    ref = reference_verbatim(san)
    stated = san.manifest["privacy"]["verbatim"]
    assert stated["inputs"] == ref.size
    assert stated["max"] == pytest.approx(ref.max(), rel=1e-9)
    assert stated["median"] == pytest.approx(float(np.median(ref)), rel=1e-9)
    assert stated["near_identity_median"] == NEAR_IDENTITY_MEDIAN
    # and it is what the sampler realises: the exact engine law's diagonal
    from ldptext.engine_rows import engine_log_probabilities
    xs = np.flatnonzero(san.tables.valid_input.astype(bool) & ~san.tables.keep_row.astype(bool))
    lp = engine_log_probabilities(san.tables, xs, engine_epsilon=san.epsilon, p=1.0)
    realised = np.exp(lp[np.arange(xs.size), xs])
    assert np.allclose(realised, ref, rtol=1e-8, atol=1e-15)
    rep = san.privacy_report(5)
    assert rep.verbatim_max == stated["max"] and rep.verbatim_median == stated["median"]
    assert not rep.weak_privacy and "released unchanged" in rep.summary() and "WEAK" not in rep.summary()


def test_rows_outside_the_outputs_are_never_released_unchanged(tmp_path):
    san = load_seeded(build_tiny_bundle(tmp_path / "b.ldpb", mechanism="santext+", epsilon=2.0))
    t = san.tables
    not_out = np.setdiff1d(np.flatnonzero(t.valid_input), t.outputs)
    assert not_out.size  # the split's non-sensitive rows
    assert (verbatim_probabilities(t, san.epsilon, not_out) == 0).all()


def test_near_identity_epsilon_is_refused_at_build_and_labelled_when_allowed(tmp_path):
    with pytest.raises(WeakPrivacyError, match="allow-weak-privacy"):
        build_tiny_bundle(tmp_path / "weak.ldpb", epsilon=5000.0, allow_weak_privacy=False)
    assert not (tmp_path / "weak.ldpb").exists()
    path = build_tiny_bundle(tmp_path / "weak.ldpb", epsilon=5000.0, allow_weak_privacy=True)
    with pytest.raises(WeakPrivacyError, match="allow_weak_privacy"):
        load_seeded(path, allow_weak_privacy=False)
    san = load_seeded(path)
    assert san.manifest["privacy"]["verbatim"]["median"] >= NEAR_IDENTITY_MEDIAN
    assert "allowed at build" in san.manifest["privacy"]["weak_privacy"]
    rep = san.sanitize("w1 w2 w3").report
    assert rep.weak_privacy and "WEAK PRIVACY" in rep.summary()
    assert rep.to_dict()["weak_privacy"] is True
    from ldptext.commands.bundle import privacy_summary
    assert "WEAK PRIVACY" in dict(privacy_summary(san.manifest))


def test_the_threshold_sits_between_default_and_identity(tmp_path):
    # the same tiny vocabulary: a private ε passes, a huge one is refused
    build_tiny_bundle(tmp_path / "ok.ldpb", epsilon=2.0, allow_weak_privacy=False)
    with pytest.raises(WeakPrivacyError):
        build_tiny_bundle(tmp_path / "no.ldpb", epsilon=100.0, allow_weak_privacy=False)


def test_an_understated_largest_rate_is_refused_at_load_and_sign(tmp_path):
    src = build_tiny_bundle(tmp_path / "b.ldpb", epsilon=2.0)

    def lower(m):
        m["privacy"]["verbatim"]["max"] = m["privacy"]["verbatim"]["median"]

    bad = edited_bundle(src, tmp_path / "bad.ldpb", lower, sign_key=keys.build_signing_key(None))
    with pytest.raises(ParameterMismatchError, match="verbatim"):
        from ldptext.bundle_check import check_parameters
        check_parameters(B.open_unverified(bad)[0])


def test_a_hidden_near_identity_label_is_caught_at_load(tmp_path):
    # a trusted signer that states a low median for identity tables: the largest-norm row says otherwise
    src = build_tiny_bundle(tmp_path / "b.ldpb", epsilon=5000.0, allow_weak_privacy=True)

    def hide(m):
        m["privacy"]["verbatim"].update(max=0.1, median=0.05)
        del m["privacy"]["weak_privacy"]

    bad = edited_bundle(src, tmp_path / "bad.ldpb", hide, sign_key=keys.build_signing_key(None))
    with pytest.raises(ParameterMismatchError, match="verbatim"):
        load_seeded(bad)


def test_an_older_bundle_without_the_statement_is_estimated_at_load(tmp_path):
    for eps, weak in ((2.0, False), (5000.0, True)):
        src = build_tiny_bundle(tmp_path / f"b{eps}.ldpb", epsilon=eps, allow_weak_privacy=True)
        old = edited_bundle(src, tmp_path / f"old{eps}.ldpb",
                            lambda m: [m["privacy"].pop(k, None) for k in ("verbatim", "weak_privacy")],
                            sign_key=keys.build_signing_key(None))
        if weak:
            with pytest.raises(WeakPrivacyError):
                load_seeded(old, allow_weak_privacy=False)
        san = load_seeded(old)
        assert san.privacy_report(1).weak_privacy is weak
        ref = reference_verbatim(san)
        assert san.verbatim.maximum <= ref.max() * (1 + 1e-9)  # a sample of the rows


def _cli(args, stdin=None):
    return subprocess.run([sys.executable, "-m", "ldptext.cli", *args], input=stdin, capture_output=True,
                          timeout=300, text=True)


def test_cli_precompute_refuses_a_huge_epsilon_and_labels_it_when_allowed(tmp_path):
    rng = np.random.default_rng(0)
    src = tmp_path / "emb.txt"
    src.write_text("".join(f"w{i} " + " ".join(f"{v:.4f}" for v in rng.normal(size=6)) + "\n" for i in range(40)))
    base = ["precompute", "santext", "--embeddings", str(src), "--epsilon", "5000", "--mechanism", "santext",
            "--head-size", "8"]
    r = _cli(base + ["--out", str(tmp_path / "a.ldpb")])
    assert r.returncode != 0 and "allow-weak-privacy" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "a.ldpb").exists()
    r = _cli(base + ["--allow-weak-privacy", "--out", str(tmp_path / "a.ldpb")])
    assert r.returncode == 0, r.stderr[-2000:]
    r = _cli(["sanitize", "--bundle", str(tmp_path / "a.ldpb"), "--json", "-"], stdin="w1 w2\n")
    assert r.returncode != 0 and "allow" in r.stderr and "w1" not in r.stderr
    r = _cli(["sanitize", "--bundle", str(tmp_path / "a.ldpb"), "--allow-weak-privacy", "--json", "-"],
             stdin="w1 w2\n")
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["report"]["weak_privacy"] is True
    r = _cli(["bundle", "inspect", str(tmp_path / "a.ldpb")])
    assert "WEAK PRIVACY" in r.stdout and "verbatim rate" in r.stdout


# ------------------------------------------------------------------ DP-BART: noise relative to C

def test_dpbart_relative_noise_and_its_threshold():
    from ldptext import noise
    from ldptext.dpbart import NEAR_IDENTITY_NOISE, relative_noise

    for mech, delta in (("gaussian", 1e-5), ("laplace", None)):
        # the thesis' settings (n in the thousands, ε up to 10,000) stay above the threshold
        for n in (1000, 22400):
            for eps in (100.0, 1000.0, 10000.0):
                c = noise.calibrate(mech, eps, delta, clip=0.1, n=n)
                assert relative_noise(c) >= 0.28 > NEAR_IDENTITY_NOISE
        c = noise.calibrate(mech, 1e12, delta, clip=0.1, n=22400)
        # the per-coordinate variance of the discrete noise in units of C², independently
        assert relative_noise(c) == pytest.approx(math.sqrt(c.variance) / 0.1)
        assert relative_noise(c) < 1e-3


@pytest.fixture(scope="module")
def dpbart_bundle(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from conftest_dpbart import build_tiny_bundle as build_dpbart, single_thread_torch

    d = tmp_path_factory.mktemp("dpbart_weak")
    with single_thread_torch():
        path, _, _ = build_dpbart(d / "int8.ldpb", quantize="int8", prune_rounds=1)
    return path


def test_dpbart_rewrite_refuses_a_huge_epsilon_and_labels_it_when_allowed(dpbart_bundle):
    import warnings

    from ldptext.bundle import UnsignedBundleWarning
    from ldptext.dpbart import Rewriter
    from ldptext.rng import SeededModeWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        warnings.simplefilter("ignore", UnsignedBundleWarning)
        rw = Rewriter.load(dpbart_bundle, allow_unsigned=True, seed=0, threads=1)
    with pytest.raises(WeakPrivacyError, match="allow_weak_privacy"):
        rw.rewrite("the cat", epsilon=1e12, delta=1e-5)
    rep = rw.rewrite("the cat", epsilon=1e12, delta=1e-5, allow_weak_privacy=True).report
    assert rep.weak_privacy and not rep.private and "WEAK PRIVACY" in rep.summary()
    ok = rw.rewrite("the cat", epsilon=50.0, delta=1e-5).report
    assert not ok.weak_privacy and ok.private and ok.relative_noise >= 0.1
    r = _cli(["rewrite", "--bundle", str(dpbart_bundle), "--allow-unsigned", "--epsilon", "1e12", "--delta",
              "1e-5", "--threads", "1", "-"], stdin="the cat\n")
    assert r.returncode != 0 and "allow-weak-privacy" in r.stderr and "the cat" not in r.stderr
    r = _cli(["rewrite", "--bundle", str(dpbart_bundle), "--allow-unsigned", "--epsilon", "1e12", "--delta",
              "1e-5", "--threads", "1", "--allow-weak-privacy", "--json", "-"], stdin="the cat\n")
    assert r.returncode == 0, r.stderr[-2000:]
    rep = json.loads(r.stdout)["report"]
    assert rep["weak_privacy"] is True and rep["private"] is False


def test_the_documented_thresholds_are_the_code_s():
    import re
    from pathlib import Path

    from ldptext.dpbart import NEAR_IDENTITY_NOISE

    root = Path(__file__).resolve().parents[1]
    doc = (root / "docs" / "privacy-budgets.md").read_text(encoding="utf-8")
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert float(re.search(r"median verbatim rate is ([\d.]+) or more", doc)[1]) == NEAR_IDENTITY_MEDIAN
    assert float(re.search(r"below \*\*([\d.]+)·C per coordinate", doc)[1]) == NEAR_IDENTITY_NOISE
    assert float(re.search(r"probability ([\d.]+) or more \(and a DP-BART", readme)[1]) == NEAR_IDENTITY_MEDIAN
    assert float(re.search(r"noise below ([\d.]+)·C\)", readme)[1]) == NEAR_IDENTITY_NOISE
    # the settings claim is what test_dpbart_relative_noise_and_its_threshold checks
    assert "0.28·C and more" in doc
