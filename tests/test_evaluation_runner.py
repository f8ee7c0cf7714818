"""End-to-end: a tiny synthetic vocabulary and data set through bundles, the sweep, the report, the
plots and the CLI; and the SanText formula rows against the sampler's realised distribution."""
import json
import warnings

import numpy as np
import pytest

pytest.importorskip("ldptext.santext")
santext_build = pytest.importorskip("ldptext_precompute.santext.build")
pytest.importorskip("sklearn")
pytest.importorskip("matplotlib")

from ldptext_precompute.evaluation.mechanisms import realised_agreement, santext_log_prob_rows  # noqa: E402
from ldptext_precompute.evaluation.runner import EvaluationConfig, evaluate  # noqa: E402

WORDS = ("the a and of is it this film movie good great fine bad awful poor plot actor story "
         "love hate boring funny dull superb").split()
POS = ["good", "great", "fine", "superb", "funny", "love"]
NEG = ["bad", "awful", "poor", "boring", "dull", "hate"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny")
    rng = np.random.default_rng(5)
    vecs = rng.normal(size=(len(WORDS), 6))
    vecs[[WORDS.index(w) for w in POS]] += 3.0      # sentiment words cluster by polarity
    vecs[[WORDS.index(w) for w in NEG]] -= 3.0
    (d / "emb.txt").write_text("".join(w + " " + " ".join(f"{x:.5f}" for x in v) + "\n"
                                       for w, v in zip(WORDS, vecs)))
    lines = ["text,label"]
    for i in range(60):
        pos = i % 2 == 0
        words = [POS[i % 6] if pos else NEG[i % 6], "movie", "the", "plot", "is",
                 POS[(i + 1) % 6] if pos else NEG[(i + 2) % 6], "zzzunknownword"]
        lines.append(" ".join(words) + ("," + ("pos" if pos else "neg")))
    (d / "data.csv").write_text("\n".join(lines) + "\n")
    return d


@pytest.mark.parametrize("mechanism", ["santext", "santext+"])
def test_formula_rows_equal_the_realised_distribution(tiny, mechanism):
    from ldptext.santext import Sanitizer
    path = santext_build.build_santext_bundle(
        tiny / f"{mechanism}.ldpb", embeddings=str(tiny / "emb.txt"), epsilon=2.0,
        mechanism=mechanism, p=0.3, w=0.5, head_size=4, sign_key=False, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        san = Sanitizer.load(path, allow_unsigned=True)
    rows = santext_log_prob_rows(san)
    inputs = np.flatnonzero(san.valid_input)
    agree = realised_agreement(san, rows, inputs)
    assert agree["zero_pattern_equal"] and agree["max_rel_diff"] < 1e-6
    np.testing.assert_allclose(np.exp(rows(inputs)).sum(axis=1), 1.0, rtol=1e-12)


def test_sweep_writes_results_report_and_plots(tiny, tmp_path):
    out = tmp_path / "eval"
    res = evaluate(EvaluationConfig(
        out=str(out), data=str(tiny / "data.csv"), embeddings=str(tiny / "emb.txt"),
        vocab_size=None, epsilons=[1.0, 30.0], p=0.3, w=0.5, seeds=2, head_size=4,
        cache_dir=str(tmp_path / "cache"), progress=False, columns=5, agreement_rows=4))
    saved = json.loads((out / "results.json").read_text())
    assert saved["config"]["epsilons"] == [1.0, 30.0]
    kinds = {(e["mechanism"], e["epsilon"]) for e in saved["entries"]}
    assert {("santext", 1.0), ("santext+", 30.0), ("none", None), ("random", None),
            ("cmp", 1.0)} <= kinds
    by = {(e["row"], e["epsilon"]): e for e in res["entries"]}
    # SanText+ with the default split (always) and with the frequency split asked for (w)
    assert {e["label"] for e in res["entries"] if e["mechanism"] == "santext+"} == {
        "SanText+ (default split)", "SanText+ (frequency split 0.5)"}
    # the unsanitized ceiling and monotonicity in epsilon of the exact attack
    assert by[("none", None)]["privacy"]["attack"]["exact_success_rate_dataset"] == 1.0
    for m in ("santext", "santext+:function-words", "santext+:frequency:0.5"):
        lo = by[(m, 1.0)]["privacy"]["attack"]["exact_success_rate_dataset"]
        hi = by[(m, 30.0)]["privacy"]["attack"]["exact_success_rate_dataset"]
        assert 0 < lo < hi <= 1
        assert by[(m, 1.0)]["utility"]["sanitized_test"]["accuracy"]["std"] >= 0
        assert len(by[(m, 1.0)]["utility"]["original_test"]["macro_f1"]["values"]) == 2
    assert by[("none", None)]["utility"]["bleu"]["mean"] == 1.0
    # record shapes: CMP has no exact decoder, SanText entries carry their bundle and formula check
    assert "empirical_attack_success" not in by[("cmp", 1.0)]["utility"]
    assert set(by[("cmp", 1.0)]["privacy"]) == {"note"} and "bundle" not in by[("random", None)]
    bundle = by[("santext+:function-words", 30.0)]["bundle"]
    # the ledger's per-token metric ε, and no finite worst case for SanText+ (the split is unbounded)
    assert bundle["per_token_epsilon"] == 30.0 and bundle["worst_case_token_epsilon"] is None
    plain = by[("santext", 1.0)]["bundle"]
    assert plain["worst_case_token_epsilon"] == pytest.approx(1.0 * plain["d_max"], rel=1e-12)
    assert by[("santext", 1.0)]["privacy"]["formula_vs_realised"]["rows_checked"] == 4
    report = (out / "report.md").read_text()
    for row in ("| Random |", "| CMP (FBDD) |", "| SanText |", "| SanText+ (default split) |",
                "| SanText+ (frequency split 0.5) |", "| Unsanitized |"):
        assert row in report
    for png in ("utility_vs_epsilon.png", "privacy_vs_epsilon.png", "frontier.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # no raw text in the outputs
    assert "zzzunknownword" not in report and "zzzunknownword" not in json.dumps(saved)


def test_cli_progress_off_a_terminal_is_status_lines_without_raw_text(tiny, tmp_path, capsys, monkeypatch):
    from ldptext.cli import main
    monkeypatch.setenv("LDPTEXT_PROGRESS_INTERVAL", "0")
    rc = main(["evaluate", "--data", str(tiny / "data.csv"), "--embeddings", str(tiny / "emb.txt"),
               "--vocab-size", "0", "--mechanism", "santext", "--epsilon", "2", "--baselines", "none",
               "--seeds", "1", "--columns", "3", "--no-plots", "--cache-dir", str(tmp_path / "c"),
               "--out", str(tmp_path / "o")])
    assert rc == 0
    err = capsys.readouterr().err
    # stderr is captured, not a terminal: one plain line per update at interval 0, with counts
    assert "ldptext: evaluate utility: config 1/2 (50%), " in err and " left" in err
    assert "ldptext: evaluate utility: config 2/2 (100%), " in err
    assert "ldptext: evaluate utility: done, 2 configs in " in err
    assert "ldptext: santext neighbours: " in err and "ldptext: privacy santext eps=2: chunk " in err
    assert "\r" not in err and "zzzunknownword" not in err and "movie" not in err


def test_cli_parses_and_runs(tiny, tmp_path, capsys):
    from ldptext.cli import main
    rc = main(["evaluate", "--data", str(tiny / "data.csv"), "--embeddings", str(tiny / "emb.txt"),
               "--vocab-size", "0", "--mechanism", "santext+", "--epsilon", "2", "--w", "0.5",
               "--baselines", "none,random", "--seeds", "1", "--columns", "3", "--no-plots",
               "--quiet", "--cache-dir", str(tmp_path / "c"), "--out", str(tmp_path / "o")])
    assert rc == 0
    assert "ldptext: " not in capsys.readouterr().err  # --quiet: no progress
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert {e["mechanism"] for e in res["entries"]} == {"santext+", "none", "random"}
    assert "ldptext" in (res["config"]["command"] or "") or res["config"]["command"] is not None
    assert main(["evaluate", "--mechanism", "bogus", "--out", str(tmp_path / "x"),
                 "--quiet"]) == 2


def test_verbatim_cap_builds_capped_bundles_under_their_own_cache_name(tiny, tmp_path):
    """``--verbatim-cap TAU`` builds the SanText rows' bundles with the cap (stated and realised), under a
    cache name of their own; without it (the default, or ``none``) the bundles and their names are as
    before: uncapped."""
    from ldptext.cli import main
    from ldptext_precompute.evaluation.bundles import bundle_path, load_unsigned
    from ldptext_precompute.evaluation.rows import santext_row

    cache = tmp_path / "c"
    base = ["evaluate", "--data", str(tiny / "data.csv"), "--embeddings", str(tiny / "emb.txt"),
            "--vocab-size", "0", "--mechanism", "santext+", "--epsilon", "1", "--baselines", "none",
            "--seeds", "1", "--columns", "3", "--no-plots", "--quiet", "--cache-dir", str(cache)]
    assert main(base + ["--out", str(tmp_path / "plain")]) == 0
    assert main(base + ["--verbatim-cap", "0.5", "--out", str(tmp_path / "capped")]) == 0
    assert main(base + ["--verbatim-cap", "none", "--out", str(tmp_path / "none")]) == 0
    row = santext_row("santext+")
    plain_cfg = EvaluationConfig(embeddings=str(tiny / "emb.txt"), vocab_size=None, mechanisms=["santext+"])
    capped_cfg = EvaluationConfig(embeddings=str(tiny / "emb.txt"), vocab_size=None, mechanisms=["santext+"],
                                  verbatim_cap=0.5)
    plain, capped = bundle_path(plain_cfg, cache, row, 1.0), bundle_path(capped_cfg, cache, row, 1.0)
    assert plain.name.endswith("-eps1.0-p0.3-v3.ldpb")   # an uncapped bundle's name has no cap part
    assert capped.name.endswith("-eps1.0-p0.3-cap0.5-v3.ldpb")
    assert sorted(p.name for p in cache.glob("eval-*.ldpb")) == sorted([plain.name, capped.name])
    stated = {}
    for name, path in (("plain", plain), ("capped", capped)):
        with load_unsigned(path) as san:
            stated[name] = san.manifest["privacy"]["verbatim"]
            not_outputs = san.manifest["privacy"]["not_outputs"]
        stated[name]["removed"] = not_outputs["above_verbatim_cap"]
    assert stated["plain"]["cap"] is None and stated["plain"]["removed"] == 0
    assert stated["plain"]["max"] > 0.5            # this tiny vocabulary at ε = 1: the cap has work to do
    assert stated["capped"]["cap"] == 0.5 and stated["capped"]["max"] <= 0.5
    assert stated["capped"]["removed"] > 0
    for out, cap in (("plain", None), ("capped", 0.5), ("none", None)):
        res = json.loads((tmp_path / out / "results.json").read_text())
        assert res["config"]["verbatim_cap"] == cap
    assert "capped: P(M(x) = x) ≤ 0.5" in (tmp_path / "capped" / "report.md").read_text()
    with pytest.raises(SystemExit) as bad:
        main(["evaluate", "--verbatim-cap", "1.5", "--out", str(tmp_path / "x"), "--quiet"])
    assert bad.value.code == 2
