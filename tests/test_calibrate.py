"""``ldptext calibrate``: the chosen ε meets the target, checked against an independent float64 computation
of the metric from the sampler's own realised distribution (a bundle built at the chosen ε); the search
is tight, handles a non-monotone metric and an unreachable target honestly; bundle families; the CLI."""
import json
import warnings

import numpy as np
import pytest

pytest.importorskip("ldptext.santext")
santext_build = pytest.importorskip("ldptext_precompute.santext.build")
pytest.importorskip("wordfreq")

from ldptext_precompute.calibrate import (Calibration, CalibrationDomain, ExactMetrics,  # noqa: E402
                                          calibrate, calibrate_family, exact_metrics)

WORDS = ("the a and of to is in it that was for on with as film movie good great fine bad awful poor plot "
         "actor story love hate boring funny dull superb music scene director ending camera").split()


@pytest.fixture(scope="module")
def emb(tmp_path_factory):
    d = tmp_path_factory.mktemp("calib")
    rng = np.random.default_rng(11)
    vecs = rng.normal(size=(len(WORDS), 5))
    path = d / "emb.txt"
    path.write_text("".join(w + " " + " ".join(f"{x:.5f}" for x in v) + "\n" for w, v in zip(WORDS, vecs)))
    return path


def _bundle(emb, tmp_path, mechanism, eps, p=0.3, w=0.5):
    from ldptext.santext import Sanitizer
    path = santext_build.build_santext_bundle(
        tmp_path / f"{mechanism}-{eps:.12g}.ldpb", embeddings=str(emb), epsilon=eps, mechanism=mechanism, p=p,
        w=w, head_size=4, sign_key=False, progress=False, allow_weak_privacy=True)  # ε grids reach identity
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return path, Sanitizer.load(path, allow_unsigned=True, allow_weak_privacy=True)


def _independent_metrics(san) -> tuple[float, float]:
    """Attack success and verbatim rate, float64, from a dense matrix of the sampler's realised
    probabilities and the public prior read straight from wordfreq (no code of the module under test)."""
    from wordfreq import get_frequency_dict
    freq = get_frequency_dict("en", wordlist="large")
    vocab, valid = san.vocab, np.asarray(san.valid_input, bool)
    inputs = np.flatnonzero(valid)
    prior = np.array([max(freq.get(vocab[i].lower(), 0.0), 1e-9) for i in inputs])
    prior /= prior.sum()
    P = np.exp(np.asarray(san.log_probabilities(inputs), dtype=np.float64))     # [inputs, V]
    assert np.allclose(P.sum(axis=1), 1.0, atol=1e-12)
    joint = P * prior[:, None]
    reachable = P.max(axis=0) > 0
    guess = np.argmax(joint, axis=0)                                             # earliest input on ties
    succ = np.zeros(inputs.size)
    for y in np.flatnonzero(reachable):
        succ[guess[y]] += P[guess[y], y]
    verbatim = P[np.arange(inputs.size), inputs]
    return float(prior @ succ), float(prior @ verbatim)


@pytest.mark.parametrize("mechanism,metric,target", [("santext", "attack", 0.3), ("santext+", "attack", 0.85),
                                                     ("santext", "verbatim", 0.2), ("santext+", "verbatim", 0.7)])
def test_chosen_epsilon_meets_the_target_by_an_independent_computation(emb, tmp_path, mechanism, metric, target):
    domain = CalibrationDomain.from_embeddings(str(emb), mechanism=mechanism, p=0.3, w=0.5, vocab_size=None)
    result = calibrate(domain, metric=metric, target=target, epsilon_range=(0.05, 200.0), rtol=0.01)
    assert result.epsilon is not None, result.notes
    _, san = _bundle(emb, tmp_path, mechanism, result.epsilon)
    attack, verbatim = _independent_metrics(san)
    # the module's exact metrics are the sampler's (to the bundle's stated tolerance, <= 1e-9 relative)
    assert result.achieved.attack_success == pytest.approx(attack, rel=1e-8, abs=1e-12)
    assert result.achieved.verbatim_rate == pytest.approx(verbatim, rel=1e-8, abs=1e-12)
    achieved = attack if metric == "attack" else verbatim
    assert achieved <= target
    # tight: an evaluated epsilon at most ~rtol above the choice (1 % more for rounding the choice down to
    # three significant digits) misses the target, and every evaluated one in between meets it
    above = sorted((m for m in result.evaluated if m.epsilon > result.epsilon), key=lambda m: m.epsilon)
    miss = next(m for m in above if result.value(m) > target)
    assert all(result.value(m) <= target for m in above if m.epsilon < miss.epsilon)
    assert miss.epsilon / result.epsilon <= 1.01 * 1.01 + 1e-12
    _, san_above = _bundle(emb, tmp_path, mechanism, miss.epsilon)
    assert _independent_metrics(san_above)[0 if metric == "attack" else 1] > target


def test_exact_metrics_agree_with_the_evaluation_profile(emb):
    from ldptext_precompute.evaluation.metrics import profile_mechanism
    domain = CalibrationDomain.from_embeddings(str(emb), mechanism="santext+", p=0.3, w=0.5, vocab_size=None)
    inputs = np.flatnonzero(domain.valid_input)
    for eps in (0.5, 3.0, 40.0):
        prof = profile_mechanism(domain.rows(eps), inputs, domain.valid_input.size, prior=domain.weights)
        m = exact_metrics(domain, eps, chunk_size=7, threads=3)     # several chunks, out-of-order threads
        w = domain.weights[inputs]
        assert m.attack_success == pytest.approx(float(w @ prof.attack_success), rel=1e-12)
        assert m.verbatim_rate == pytest.approx(float(w @ prof.n_x), rel=1e-12)


def test_verbatim_rate_is_monotone_and_high_epsilon_is_flagged(emb):
    domain = CalibrationDomain.from_embeddings(str(emb), mechanism="santext", vocab_size=None)
    result = calibrate(domain, metric="verbatim", target=0.95, epsilon_range=(0.1, 200.0))
    rates = [m.verbatim_rate for m in result.evaluated]
    assert rates == sorted(rates) and result.monotone
    assert result.achieved.verbatim_rate > 0.9
    assert any("nearly the input" in n for n in result.notes)


def test_santext_plus_floor_is_reported_not_hidden(emb):
    domain = CalibrationDomain.from_embeddings(str(emb), mechanism="santext+", p=0.3, w=0.5, vocab_size=None)
    floor = exact_metrics(domain, 1e-3).verbatim_rate       # non-sensitive words kept w.p. 1 - p at any epsilon
    assert floor > 0.1
    result = calibrate(domain, metric="verbatim", target=floor / 2, epsilon_range=(0.1, 10.0))
    assert result.epsilon is None and result.achieved is None
    assert any("1 - p" in n for n in result.notes)


@pytest.mark.parametrize("split, says, never", [
    ("function-words", "lower p, or use SanText", "raise w"),
    ("frequency:0.9", "raise w", "function words"),
])
def test_unreachable_target_advice_depends_on_the_split(split, says, never):
    """The default split (a fixed list of function words) has no w to raise; the frequency split has."""
    domain = CalibrationDomain.of(mechanism="santext+", p=0.3, embeddings=np.zeros((2, 1)), outputs=np.arange(2),
                                  valid_input=np.ones(2, bool), sensitive=np.array([True, False]), vocab=["a", "b"],
                                  description="fake", weights=np.ones(2), split=split)
    result = calibrate(domain, metric="verbatim", target=0.1, epsilon_range=(0.1, 1.0),
                       evaluate=lambda e: ExactMetrics(epsilon=e, attack_success=0.5, verbatim_rate=0.5))
    assert result.epsilon is None
    (note,) = [n for n in result.notes if "smallest epsilon" in n]
    assert says in note and never not in note and "1 - p" in note


def test_from_embeddings_records_the_split_and_states_the_vocabulary_as_evaluate_does(emb):
    from ldptext_precompute.santext.embeddings import describe_vocabulary, load_embeddings
    n_words = len(load_embeddings(str(emb), None).vocab) - 1
    default = CalibrationDomain.from_embeddings(str(emb), mechanism="santext+", vocab_size=None)
    freq = CalibrationDomain.from_embeddings(str(emb), mechanism="santext+", w=0.5, vocab_size=None)
    plain = CalibrationDomain.from_embeddings(str(emb), mechanism="santext", vocab_size=None)
    assert (default.split, freq.split, plain.split) == ("function-words", "frequency:0.5", None)
    stated = f"{n_words} words + the input-only <unk> row (V = {n_words + 1})"
    assert describe_vocabulary(load_embeddings(str(emb), None).vocab) == stated
    assert f"(vocabulary {stated}, p = 0.3" in default.description and "V = " not in default.description.split(
        "(vocabulary ")[0]


def _fake_domain():
    return CalibrationDomain.of(mechanism="santext", p=None, embeddings=np.zeros((2, 1)), outputs=np.arange(2),
                                valid_input=np.ones(2, bool), sensitive=np.ones(2, bool), vocab=["a", "b"],
                                description="fake", weights=np.ones(2))


def test_non_monotone_metric_takes_the_first_crossing_and_says_so():
    def fake(eps: float) -> ExactMetrics:        # dips at 0.5, meets 0.1 below 1 and again in [4, 8)
        v = 0.01 if eps == 0.5 else 0.05 if eps < 1 or 4 <= eps < 8 else 0.2
        return ExactMetrics(epsilon=eps, attack_success=v, verbatim_rate=0.0)

    result = calibrate(_fake_domain(), metric="attack", target=0.1, epsilon_range=(0.125, 32.0), evaluate=fake)
    assert 0.98 <= result.epsilon < 1 and result.achieved.attack_success == 0.05
    assert not result.monotone and any("non-monotone" in n for n in result.notes)


def test_the_search_stops_at_the_first_crossing_and_uses_the_epsilon_it_prints(capsys):
    from ldptext_precompute.calibrate import _print, _round_down
    calls = []

    def fake(eps: float) -> ExactMetrics:        # crosses 0.1 at 2.537; the grid goes on to 64
        calls.append(eps)
        return ExactMetrics(epsilon=eps, attack_success=0.05 if eps < 2.537 else 0.2, verbatim_rate=0.0)

    result = calibrate(_fake_domain(), metric="attack", target=0.1, epsilon_range=(0.1, 64.0), evaluate=fake)
    assert max(calls) == pytest.approx(3.2)                           # nothing beyond the first miss
    assert result.epsilon == 2.53 == float("2.53") and 2.53 in calls  # the decimal, evaluated as such
    assert result.achieved.epsilon == 2.53 and _round_down(2.5371) == 2.53 and _round_down(0.123456) == 0.123
    _print(result)
    assert "chosen epsilon: 2.53\n" in capsys.readouterr().out


def test_every_epsilon_evaluated_is_a_short_decimal_printed_as_evaluated(capsys):
    """The bisection evaluates short decimals (no 2.2627416997969525), and the progress line prints each ε
    as the formatter shared with ``evaluate`` writes it: the float evaluated, ``eps=`` like evaluate's."""
    from ldptext_precompute.epsilon import format_epsilon
    calls = []

    def fake(eps: float) -> ExactMetrics:        # crosses 0.1 at 2.41 (the grid: 0.1, 0.2, ... 1.6, 3.2)
        calls.append(eps)
        return ExactMetrics(epsilon=eps, attack_success=0.05 if eps < 2.41 else 0.2, verbatim_rate=0.0)

    result = calibrate(_fake_domain(), metric="attack", target=0.1, epsilon_range=(0.1, 64.0), evaluate=fake,
                       progress=True)
    err = capsys.readouterr().err
    assert 2.3 < result.epsilon < 2.41
    for eps in calls:
        assert len(format_epsilon(eps).replace(".", "")) <= 4, eps       # at most 4 significant digits
        assert float(format_epsilon(eps)) == eps                           # printed = evaluated
        assert f"[calibrate] eps={format_epsilon(eps)}: attack success " in err
    assert "eps=1.6:" in err and "epsilon " not in err


def test_the_accuracy_interval_spans_the_neighbouring_epsilons_and_the_seed_spread():
    """The researcher's steep curve: 0.30 at epsilon 2, 0.54 at 2.41 (chosen), 0.88 at 3."""
    from ldptext_precompute.calibrate import _accuracy_interval, neighbouring_epsilons
    result = Calibration(metric="attack", target=0.1, epsilon=2.41, achieved=None, monotone=True, evaluated=[
        ExactMetrics(e, 0.0, 0.0) for e in (0.1, 1.6, 2.0, 2.41, 3.0, 3.2)])
    assert neighbouring_epsilons(result) == [2.0, 2.41, 3.0]
    per = {2.0: {"mean": 0.30, "std": 0.02, "original": 0.5}, 2.41: {"mean": 0.54, "std": 0.03, "original": 0.6},
           3.0: {"mean": 0.88, "std": 0.01, "original": 0.7}}
    got = _accuracy_interval(per, 2.41)
    assert got["accuracy_sanitized_test"] == 0.54 and got["accuracy_original_test"] == 0.6
    assert got["interval"] == pytest.approx([0.28, 0.89]) and got["by_epsilon"] == {"2": 0.30, "2.41": 0.54, "3": 0.88}
    result.epsilon = 3.2                                 # the end of the search: no neighbour above
    assert neighbouring_epsilons(result) == [3.0, 3.2]


@pytest.mark.parametrize("crossing, rtol", [(2.5371, 0.01), (2.5371, 0.2), (0.99995, 0.01), (10.04, 0.01)])
def test_the_chosen_epsilon_is_the_largest_three_digit_decimal_that_meets_the_target(crossing, rtol):
    """Whatever the bisection's path (rtol), the choice is the largest ε of three significant digits below
    the first crossing, and it was evaluated."""
    from ldptext_precompute.calibrate import _round_down
    calls = []

    def fake(eps: float) -> ExactMetrics:
        calls.append(eps)
        return ExactMetrics(epsilon=eps, attack_success=0.05 if eps < crossing else 0.2, verbatim_rate=0.0)

    result = calibrate(_fake_domain(), metric="attack", target=0.1, epsilon_range=(0.1, 64.0), rtol=rtol,
                       evaluate=fake)
    expected = _round_down(crossing) if _round_down(crossing) < crossing else _round_down(crossing * (1 - 1e-9))
    assert result.epsilon == expected and result.epsilon in calls


def test_bad_targets_are_refused(emb):
    from ldptext.errors import ParameterError
    domain = CalibrationDomain.from_embeddings(str(emb), mechanism="santext", vocab_size=None)
    for kw in (dict(metric="attack", target=0.0), dict(metric="attack", target=1.5), dict(metric="bleu", target=0.1),
               dict(metric="attack", target=0.1, epsilon_range=(2.0, 1.0))):
        with pytest.raises(ParameterError):
            calibrate(domain, **kw)


def test_bundle_family_picks_the_largest_epsilon_that_meets_the_target(emb, tmp_path):
    paths = [_bundle(emb, tmp_path, "santext", eps)[0] for eps in (0.5, 2.0, 8.0, 32.0)]
    domain = CalibrationDomain.from_embeddings(str(emb), mechanism="santext", vocab_size=None)
    by_eps = {eps: exact_metrics(domain, eps) for eps in (0.5, 2.0, 8.0, 32.0)}
    target = (by_eps[2.0].attack_success + by_eps[8.0].attack_success) / 2
    result = calibrate_family(paths[::-1], metric="attack", target=target, allow_unsigned=True)
    assert result.epsilon == 2.0 and result.bundle == str(paths[1])
    from ldptext_precompute.calibrate import neighbouring_epsilons    # the bundles of the accuracy interval
    assert neighbouring_epsilons(result) == [0.5, 2.0, 8.0] and result.family[8.0] == str(paths[2])
    # a bundle's own tables give the same numbers as the embeddings they were built from
    for m in result.evaluated:
        assert m.attack_success == pytest.approx(by_eps[m.epsilon].attack_success, rel=1e-12)
    assert isinstance(result, Calibration) and [m.epsilon for m in result.evaluated] == [0.5, 2.0, 8.0, 32.0]
    from ldptext.errors import ParameterError
    other, _ = _bundle(emb, tmp_path, "santext+", 2.0)
    with pytest.raises(ParameterError, match="same family"):
        calibrate_family([paths[0], other], metric="attack", target=0.5, allow_unsigned=True)


def test_cli_prints_the_choice_writes_json_and_reports_expected_utility(emb, tmp_path, capsys):
    from ldptext.cli import main
    data = tmp_path / "d.csv"
    rng = np.random.default_rng(3)
    pos, neg = ["good", "great", "fine", "superb", "funny", "love"], ["bad", "awful", "poor", "boring", "dull", "hate"]
    rows = [" ".join([(pos if i % 2 else neg)[j] for j in rng.integers(0, 6, 4)] + ["the", "film"]) + ","
            + ("pos" if i % 2 else "neg") for i in range(60)]
    data.write_text("text,label\n" + "\n".join(rows) + "\n")
    out = tmp_path / "calib.json"
    rc = main(["calibrate", "--embeddings", str(emb), "--vocab-size", "0", "--mechanism", "santext",
               "--max-attack-success", "0.3", "--epsilon-range", "0.1,50", "--data", str(data), "--quiet",
               "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "eval"), "--json", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0 and "chosen epsilon:" in printed and "expected accuracy (tfidf" in printed
    saved = json.loads(out.read_text())
    assert saved["achieved"]["attack_success"] <= 0.3
    assert set(saved["expected_utility"]["sanitized"]) == {"tfidf"}
    assert (tmp_path / "eval" / "report.md").is_file()
    # an interval from the evaluated neighbours of the chosen epsilon, printed with how it is computed
    tfidf = saved["expected_utility"]["sanitized"]["tfidf"]
    lo, hi = tfidf["interval"]
    assert lo <= tfidf["accuracy_sanitized_test"] <= hi and len(tfidf["by_epsilon"]) == 3
    chosen = saved["epsilon"]
    below = max(m["epsilon"] for m in saved["evaluated"] if m["epsilon"] < chosen)
    above = min(m["epsilon"] for m in saved["evaluated"] if m["epsilon"] > chosen)
    from ldptext_precompute.epsilon import format_epsilon
    assert list(tfidf["by_epsilon"]) == [format_epsilon(e) for e in (below, chosen, above)]
    assert f"[{lo:.4f}, {hi:.4f}] trained and tested on sanitized text" in printed
    assert "  interval: from the lowest (mean - std) to the highest (mean + std)" in printed



def test_cli_data_needs_out_and_the_default_split_is_calibrated(emb, tmp_path, capsys, monkeypatch):
    from ldptext.cli import main
    monkeypatch.chdir(tmp_path)
    assert main(["calibrate", "--embeddings", str(emb), "--vocab-size", "0", "--max-attack-success", "0.5",
                 "--data", "d.csv", "--quiet"]) == 2
    assert "--data needs --out" in capsys.readouterr().err and not list(tmp_path.iterdir())
    domain = CalibrationDomain.from_embeddings(str(emb), vocab_size=None)
    assert domain.description.startswith("SanText+ (default split) over ") and "function-words" in domain.description
    assert CalibrationDomain.from_embeddings(str(emb), w=0.5, vocab_size=None).description.startswith(
        "SanText+ (frequency split 0.5) over ")


def test_cli_an_unreachable_target_exits_with_its_documented_status_not_1(emb, capsys):
    from ldptext.cli import EXIT_TARGET_UNMET, main
    rc = main(["calibrate", "--embeddings", str(emb), "--vocab-size", "0", "--mechanism", "santext+", "--w", "0.5",
               "--max-verbatim-rate", "0.01", "--epsilon-range", "0.1,10", "--quiet"])
    assert rc == EXIT_TARGET_UNMET == 9 and "chosen epsilon: none" in capsys.readouterr().out  # 1 means a bug


def test_cli_bundle_family_refuses_unsigned_bundles_unless_allowed_and_then_warns(emb, tmp_path, capsys):
    from ldptext.bundle import UnsignedBundleWarning
    from ldptext.cli import main
    paths = [str(_bundle(emb, tmp_path, "santext", eps)[0]) for eps in (0.5, 2.0)]
    args = ["calibrate", "--bundles", *paths, "--max-attack-success", "0.99", "--quiet"]
    assert main(args) == 5  # trust: unsigned, as `ldptext sanitize` refuses it
    assert "unsigned" in capsys.readouterr().err
    with pytest.warns(UnsignedBundleWarning):
        assert main(args + ["--allow-unsigned"]) == 0
    assert main(["calibrate", "--allow-unsigned", "--max-attack-success", "0.5"]) == 2  # only with --bundles


def test_cli_bundle_family_expected_accuracy_has_an_interval_over_the_neighbouring_bundles(emb, tmp_path, capsys):
    from ldptext.cli import main
    paths = [str(_bundle(emb, tmp_path, "santext", eps)[0]) for eps in (0.5, 2.0, 8.0)]
    data = tmp_path / "d.csv"
    rows = [f"{'good great' if i % 2 else 'bad awful'} the film," + ("pos" if i % 2 else "neg") for i in range(30)]
    data.write_text("text,label\n" + "\n".join(rows) + "\n")
    out = tmp_path / "c.json"
    with pytest.warns(Warning):
        assert main(["calibrate", "--bundles", *paths, "--allow-unsigned", "--max-attack-success", "0.99",
                     "--data", str(data), "--seeds", "2", "--quiet", "--json", str(out)]) == 0
    saved = json.loads(out.read_text())
    assert saved["epsilon"] == 8.0 and set(saved["family"]) == {"0.5", "2", "8"}
    tfidf = saved["expected_utility"]["sanitized"]["tfidf"]
    assert list(tfidf["by_epsilon"]) == ["2", "8"]                 # the chosen bundle and its neighbour below
    lo, hi = tfidf["interval"]
    assert lo <= min(tfidf["by_epsilon"].values()) and max(tfidf["by_epsilon"].values()) <= hi
    assert "interval: from the lowest (mean - std)" in capsys.readouterr().out
