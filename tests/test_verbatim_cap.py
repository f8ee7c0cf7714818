"""The verbatim cap τ (no sensitive word released unchanged with probability above τ), the identifier
rule (identifier-shaped tokens are never outputs), the tail statistics a manifest states, and the TEM
builder's far-set refusal — each against an independent float64 evaluation of the formula."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import build_tiny_bundle, edited_bundle, load_seeded, random_word_embeddings

from ldptext import keys
from ldptext.bundle import read_bundle
from ldptext.errors import ParameterError, ParameterMismatchError, WeakPrivacyError
from ldptext.verbatim import VerbatimRate, format_probability

CAP = 0.5


def metric(t) -> np.ndarray:
    """The bundle's metric embedding, dequantized with plain numpy."""
    return t.emb_q.astype(np.float64) * t.emb_scale.astype(np.float64)[:, None]


def reference_rates(vec: np.ndarray, xs: np.ndarray, outs: np.ndarray, epsilon: float) -> np.ndarray:
    """P(M(x) = x) = 1 / Σ_{y ∈ O} exp(−ε·(d(x, y) − d(x, x))/2) for x ∈ O, 0 otherwise (float64)."""
    d = np.linalg.norm(vec[xs][:, None, :] - vec[outs][None, :, :], axis=2)
    is_out = np.isin(xs, outs)
    own = np.where(is_out, 0.0, d.min(axis=1))  # (a non-output's rate is 0; shift only avoids 0/0)
    w = np.exp(-epsilon / 2 * (d - own[:, None]))
    return np.where(is_out, 1.0 / w.sum(axis=1), 0.0)


def reference_survivors(vec: np.ndarray, sensitive: np.ndarray, outs: np.ndarray, epsilon: float,
                        cap: float) -> np.ndarray:
    """The largest output set on which every sensitive output's rate is ≤ cap, by plain repetition:
    drop every output above the cap, recompute everything, until none is above."""
    outs = np.asarray(outs)
    while True:
        xs = outs[sensitive[outs]]
        over = xs[reference_rates(vec, xs, outs, epsilon) > cap * (1 - 1e-9)]
        if over.size == 0:
            return outs
        outs = np.setdiff1d(outs, over)


def stated(san) -> dict:
    return san.manifest["privacy"]["verbatim"]


def check_statement(san, ref: np.ndarray, cap: float | None) -> None:
    """The manifest's verbatim section against the reference rates of every sensitive input."""
    s = stated(san)
    v = np.sort(ref)
    assert s["inputs"] == v.size and s["cap"] == cap
    assert s["max"] == pytest.approx(v[-1], rel=1e-9, abs=1e-15)
    assert s["median"] == pytest.approx(float(np.median(v)), rel=1e-9, abs=1e-15)
    for key, q in (("p90", 90), ("p99", 99)):
        assert s[key] == pytest.approx(float(np.percentile(v, q, method="inverted_cdf")), rel=1e-9, abs=1e-15)
    # counts: no reference rate may sit within rounding of a level, or the count would be ambiguous
    for key, level in (("above_0_5", 0.5), ("above_0_9", 0.9)):
        assert not np.any(np.abs(v - level) < 1e-9)
        assert s[key] == int((v >= level).sum())
    if cap is not None:
        assert s["max"] <= cap and v[-1] <= cap * (1 + 1e-12)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """One generated vocabulary built with and without the cap (SanText+, frequency split)."""
    d = tmp_path_factory.mktemp("cap")
    kw = dict(n=150, dim=6, seed=3, epsilon=3.0, mechanism="santext+", w=0.8, allow_weak_privacy=False)
    return (load_seeded(build_tiny_bundle(d / "free.ldpb", verbatim_cap=None, **kw)),
            load_seeded(build_tiny_bundle(d / "cap.ldpb", verbatim_cap=CAP, **kw)))


def sensitive_rows(t) -> np.ndarray:
    return np.flatnonzero(t.valid_input.astype(bool) & ~t.keep_row.astype(bool))


def test_uncapped_statement_is_the_formula_and_has_a_tail_above_the_cap(pair):
    free, _ = pair
    t = free.tables
    ref = reference_rates(metric(t), sensitive_rows(t), t.outputs.astype(np.int64), free.epsilon)
    check_statement(free, ref, None)
    assert (ref > CAP).sum() >= 3  # the fixture has isolated words for the cap to act on


def test_capped_bundle_removes_exactly_the_reference_set_and_states_the_formula(pair):
    free, capped = pair
    t, tc = free.tables, capped.tables
    vec = metric(t)
    assert np.array_equal(vec, metric(tc))
    # inputs, V_S and the kept rows are the uncapped build's: only outputs leave
    for name in ("valid_input", "sensitive", "keep_row"):
        assert np.array_equal(getattr(t, name), getattr(tc, name)), name
    sens = t.valid_input.astype(bool) & ~t.keep_row.astype(bool)
    survivors = reference_survivors(vec, sens, t.outputs.astype(np.int64), free.epsilon, CAP)
    assert np.array_equal(tc.outputs, survivors)
    removed = np.setdiff1d(t.outputs, tc.outputs)
    assert removed.size == capped.manifest["privacy"]["not_outputs"]["above_verbatim_cap"] > 0
    ref = reference_rates(vec, sensitive_rows(tc), tc.outputs.astype(np.int64), capped.epsilon)
    check_statement(capped, ref, CAP)
    assert capped.verbatim.cap == CAP and capped.verbatim.maximum <= CAP


def test_the_sampler_realises_the_capped_rates(pair):
    _, capped = pair
    t = capped.tables
    xs = sensitive_rows(t)
    ref = reference_rates(metric(t), xs, t.outputs.astype(np.int64), capped.epsilon)
    realised = np.array([capped.probabilities([int(x)])[0][x] for x in xs])
    np.testing.assert_allclose(realised, ref, rtol=1e-8, atol=1e-15)
    assert realised.max() <= CAP * (1 + 1e-8)


def test_a_capped_word_is_never_returned_unchanged(pair):
    free, capped = pair
    removed = np.setdiff1d(free.tables.outputs, capped.tables.outputs)
    above = [int(x) for x in removed if free.probabilities([int(x)])[0][x] > CAP]
    assert len(above) >= 3  # released unchanged more often than τ without the cap (the others: after
    # the first removals raised their rates)
    for x in removed:
        x = int(x)
        p = capped.probabilities([x])[0]
        assert p[x] == 0.0 and p.sum() == pytest.approx(1.0, abs=1e-9)
        ys = capped.sample_ids(np.full(2_000 if x not in above[:3] else 50_000, x, dtype=np.int64))
        assert not np.isin(removed, ys).any()  # no capped word is ever an output, for any input
        word = capped.vocab[x]
        out = capped.sanitize(f"{word} {word} {word}").text.split()
        assert word not in out


def test_verbatim_rate_refuses_a_build_above_its_cap(pair):
    from ldptext.verbatim import verbatim_rate
    free, _ = pair
    with pytest.raises(ParameterMismatchError, match="above the cap"):
        verbatim_rate(free.tables, free.epsilon, cap=CAP)


def test_a_stated_maximum_above_the_stated_cap_is_refused_at_load(pair, tmp_path):
    _, capped = pair
    src = capped._bundle.path if hasattr(capped._bundle, "path") else None
    if src is None:
        pytest.skip("bundle path not exposed")

    def lower_cap(m):
        m["privacy"]["verbatim"]["cap"] = m["privacy"]["verbatim"]["max"] / 2

    bad = edited_bundle(src, tmp_path / "bad.ldpb", lower_cap, sign_key=keys.build_signing_key(None))
    with pytest.raises(ParameterMismatchError, match="cap"):
        load_seeded(bad)


# ---------------------------------------------------------------------------- the manifest section

def _section(**over) -> dict:
    base = VerbatimRate.of(np.array([0.0, 0.1, 0.2, 0.3, 0.4, 0.45, 0.55, 0.6, 0.7, 0.95]), cap=0.96)
    return {**base.as_manifest(), **over}


def test_manifest_round_trip_and_older_bundles():
    s = _section()
    rate = VerbatimRate.from_manifest(s)
    assert rate.as_manifest() == s
    assert (rate.p90, rate.p99, rate.above_0_5, rate.above_0_9) == (0.7, 0.95, 4, 1)
    old = {k: s[k] for k in ("max", "median", "inputs", "near_identity_median")}
    r = VerbatimRate.from_manifest(old)
    assert (r.cap, r.p90, r.p99, r.above_0_5, r.above_0_9) == (None,) * 5
    assert VerbatimRate.from_manifest(None) is None


@pytest.mark.parametrize("over,match", [
    (dict(cap=0.9), "above its own cap"),
    (dict(cap=0.0), "cap"),
    (dict(cap=1.5), "cap"),
    (dict(p90=0.99), "ordered"),
    (dict(p99=0.5), "ordered"),
    (dict(p90=0.3), "ordered"),               # below the median
    (dict(above_0_9=5), "counts"),
    (dict(above_0_5=11), "counts"),
    (dict(above_0_9=0), "largest rate"),      # max 0.95 is an input at or above 0.9
    (dict(above_0_5=1), "percentile"),        # p90 = 0.7 >= 0.5: at least 2 inputs are
    (dict(p90=0.45, median=0.45), "percentile"),
    (dict(p99=None), "malformed"),             # the tail comes whole or not at all
    (dict(above_0_5=2.5), "malformed"),
    (dict(cap="0.5"), "malformed"),
    (dict(max=float("nan")), "malformed"),
])
def test_inconsistent_statements_are_refused(over, match):
    with pytest.raises(ParameterMismatchError, match=match):
        VerbatimRate.from_manifest(_section(**over))


def test_the_maximum_is_shown_with_the_digits_that_tell_it_from_1():
    assert format_probability(0.99998) == "0.99998"
    assert format_probability(0.9993) == "0.9993"
    assert format_probability(1.0) == "1"
    assert format_probability(0.172) == "0.172"
    rate = VerbatimRate.of(np.array([0.1, 0.99998]))
    assert "0.99998 (largest)" in rate.describe()


# ------------------------------------------------------------------------------------ identifiers

IDENTIFIERS = ["202-383-7824", "1-800-444-0267", "20003", "90210", "123456789", "http://www.nytimes.com",
               "www.example.org", "nytimes.com", "someone@example.com", "20003-1234"]
ORDINARY = ["1990", "7", "2008-2009", "3.14", "london", "u.s.", "e-mail", "1,000"]


def test_identifier_shapes():
    from ldptext_precompute.santext.identifiers import is_identifier
    assert all(is_identifier(w) for w in IDENTIFIERS)
    assert not any(is_identifier(w) for w in ORDINARY)


def _vocabulary_file(path, seed=11):
    emb = random_word_embeddings(60, 6, seed)
    words = IDENTIFIERS + ORDINARY + emb.vocab[:60 - len(IDENTIFIERS) - len(ORDINARY)]
    path.write_text("".join(w + " " + " ".join(f"{v:.6f}" for v in emb.vectors[i]) + "\n"
                            for i, w in enumerate(words)), encoding="utf-8")
    return words


@pytest.mark.parametrize("mechanism", ["santext", "santext+"])
def test_identifiers_are_never_outputs_of_a_default_build(tmp_path, mechanism):
    from ldptext.cli import main
    src = tmp_path / "vectors.txt"
    _vocabulary_file(src)
    out = tmp_path / "b.ldpb"
    assert main(["precompute", "santext", "--embeddings", str(src), "--epsilon", "1", "--head-size", "4",
                 "--mechanism", mechanism, "--verbatim-cap", "none", "--out", str(out)]) == 0
    san = load_seeded(out)
    index = {w: i for i, w in enumerate(san.vocab)}
    ids = np.array([index[w] for w in IDENTIFIERS])
    assert not np.isin(ids, san.tables.outputs).any()
    assert san.tables.valid_input[ids].all()  # still inputs: sanitized from their own rows
    # ordinary words are outputs where their text reads back as themselves; the others (u.s., 1,000:
    # split at punctuation by the word-level tokenizer) are left out by the read-back rule
    read_back = ["1990", "7", "london"]
    assert np.isin([index[w] for w in read_back], san.tables.outputs).all()
    assert san.manifest["privacy"]["not_outputs"]["identifiers"] == len(IDENTIFIERS)
    assert san.manifest["privacy"]["not_outputs"]["not_read_back"] == len(ORDINARY) - len(read_back)
    probs = san.probabilities(ids)
    assert (probs[:, ids] == 0).all()
    ys = san.sample_ids(np.repeat(ids, 2_000))
    assert not np.isin(ys, ids).any()
    # the stated rates count them as sensitive inputs released unchanged with probability 0
    ref = reference_rates(metric(san.tables), sensitive_rows(san.tables), san.tables.outputs.astype(np.int64),
                          san.epsilon)
    check_statement(san, ref, None)
    # opting out keeps them as outputs
    kept = tmp_path / "k.ldpb"
    assert main(["precompute", "santext", "--embeddings", str(src), "--epsilon", "1", "--head-size", "4",
                 "--mechanism", mechanism, "--verbatim-cap", "none", "--identifier-outputs",
                 "--out", str(kept)]) == 0
    # (except those the read-back rule leaves out all the same: 202-383-7824, nytimes.com, split at
    # punctuation by the word-level tokenizer)
    kept_san = load_seeded(kept)
    plain = ["20003", "90210", "123456789"]
    assert np.isin([index[w] for w in plain], kept_san.tables.outputs).all()
    assert kept_san.manifest["privacy"]["not_outputs"]["not_read_back"] == \
        len(IDENTIFIERS) - len(plain) + len(ORDINARY) - len(read_back)


def test_the_cli_caps_by_default_and_not_when_weak_privacy_is_allowed(tmp_path):
    from ldptext.cli import main
    src = tmp_path / "vectors.txt"
    _vocabulary_file(src)
    base = ["precompute", "santext", "--embeddings", str(src), "--head-size", "4", "--mechanism", "santext"]
    assert main(base + ["--epsilon", "1", "--out", str(tmp_path / "d.ldpb")]) == 0
    assert stated(load_seeded(tmp_path / "d.ldpb"))["cap"] == 0.5
    assert main(base + ["--epsilon", "1", "--verbatim-cap", "0.3", "--out", str(tmp_path / "c.ldpb")]) == 0
    san = load_seeded(tmp_path / "c.ldpb")
    assert stated(san)["cap"] == 0.3 and stated(san)["max"] <= 0.3
    with pytest.raises(SystemExit):  # argparse: not a probability in (0, 1]
        main(base + ["--epsilon", "1", "--verbatim-cap", "0", "--out", str(tmp_path / "x.ldpb")])
    assert main(base + ["--epsilon", "1", "--allow-weak-privacy", "--out", str(tmp_path / "w.ldpb")]) == 0
    assert stated(load_seeded(tmp_path / "w.ldpb"))["cap"] is None
    # a cap that would leave no output is refused, with what to change
    with pytest.raises(ParameterError, match="no output would remain"):
        build_tiny_bundle(tmp_path / "e.ldpb", n=20, epsilon=40.0, verbatim_cap=0.05, allow_weak_privacy=True)


# ---------------------------------------------------------------------------------- TEM, CusText

def test_tem_states_its_verbatim_rates(tmp_path):
    from ldptext_precompute.tem.build import build_tem_bundle

    from ldptext.tem import TEMSanitizer
    emb = random_word_embeddings(50, 5, 2)
    eps, gamma = 2.0, 2.5
    path = build_tem_bundle(tmp_path / "t.ldpb", embeddings="unused", loaded=emb, epsilon=eps, gamma=gamma,
                            head_size=6, sign_key=None)
    san = TEMSanitizer.load(path)
    t = san.tables
    vec, outs = metric(t), t.outputs.astype(np.int64)
    xs = np.flatnonzero(t.valid_input)
    d = np.minimum(np.linalg.norm(vec[xs][:, None, :] - vec[outs][None, :, :], axis=2), gamma)
    is_out = np.isin(xs, outs)
    own = np.where(is_out, d[np.arange(xs.size), np.searchsorted(outs, np.minimum(xs, outs[-1]))], 0.0)
    ref = np.where(is_out, 1.0 / np.exp(-eps / 2 * (d - own[:, None])).sum(axis=1), 0.0)
    check_statement(san, ref, None)
    realised = np.exp(np.array([san.log_probabilities([int(x)])[0][x] for x in xs[is_out]]))
    np.testing.assert_allclose(realised, ref[is_out], rtol=1e-8)


def test_custext_refuses_a_near_identity_build_without_the_opt_in(tmp_path):
    from ldptext_precompute.custext.build import build_custext_bundle

    from ldptext.custext import CusTextSanitizer
    emb = random_word_embeddings(40, 6, 5)
    with pytest.raises(WeakPrivacyError, match="--allow-weak-privacy"):
        build_custext_bundle(tmp_path / "c.ldpb", embeddings="unused", loaded=emb, epsilon=200.0, k=4)
    assert not (tmp_path / "c.ldpb").exists()
    path = build_custext_bundle(tmp_path / "c.ldpb", embeddings="unused", loaded=emb, epsilon=200.0, k=4,
                                allow_weak_privacy=True)
    stated = VerbatimRate.from_manifest(read_bundle(path).manifest["privacy"]["verbatim"])
    assert stated.median >= 0.9 and "weak_privacy" in read_bundle(path).manifest["privacy"]
    with pytest.raises(WeakPrivacyError):
        CusTextSanitizer.load(path)


def test_custext_states_its_verbatim_rates(tmp_path):
    from ldptext_precompute.custext.build import build_custext_bundle

    from ldptext.custext import CusTextSanitizer
    emb = random_word_embeddings(48, 5, 4)
    eps = 3.0
    path = build_custext_bundle(tmp_path / "c.ldpb", embeddings="unused", loaded=emb, epsilon=eps, k=4)
    san = CusTextSanitizer.load(path)
    t = san.tables
    vec = metric(t)
    groups = np.asarray(san._bundle.array("group_id"))
    xs = np.flatnonzero(t.valid_input.astype(bool) & ~t.keep_row.astype(bool))
    ref = []
    for x in xs:
        members = np.flatnonzero(groups == groups[x])
        members = members[np.isin(members, t.outputs)]
        s = -np.linalg.norm(vec[members] - vec[x], axis=1)  # euclidean similarity, min-max normalised
        u = (s - s.min()) / (s.max() - s.min()) if s.max() > s.min() else np.ones_like(s)
        w = np.exp(eps / 2 * (u - u.max()))
        ref.append(float(w[members == x].sum() / w.sum()))
    ref = np.array(ref)
    check_statement(san, ref, None)


def test_tem_refuses_a_vocabulary_whose_unknown_row_would_draw_the_far_set_above_beta(tmp_path):
    from ldptext_precompute.tem.build import build_tem_bundle
    from ldptext_precompute.tem.build import check_far_probabilities

    from ldptext.tem import TEMSanitizer
    emb = random_word_embeddings(40, 6, 5, scale=3.0)  # <unk> (the mean) lies far from every word
    with pytest.raises(ParameterError, match="far set"):
        build_tem_bundle(tmp_path / "t.ldpb", embeddings="unused", loaded=emb, epsilon=30.0, beta=0.001,
                         head_size=6)
    assert not (tmp_path / "t.ldpb").exists()
    # the same check as every load (TEMSanitizer: every input's far probability <= beta (1 + 1e-9))
    with pytest.raises(ParameterError):
        check_far_probabilities(np.array([1.0, 0.0005]), np.array([3, 2]), np.array([True, True]), 0.001)
    check_far_probabilities(np.array([1.0, 0.0005]), np.array([3, 2]), np.array([False, True]), 0.001)
    # with gamma given there is no beta to break; at eps = 30 TEM is near identity: the build refuses
    # it without the opt-in, and with it the stated median falls under the load's weak-privacy rule
    with pytest.raises(WeakPrivacyError, match="--allow-weak-privacy"):
        build_tem_bundle(tmp_path / "g.ldpb", embeddings="unused", loaded=emb, epsilon=30.0, gamma=1.0,
                         head_size=6)
    assert not (tmp_path / "g.ldpb").exists()
    path = build_tem_bundle(tmp_path / "g.ldpb", embeddings="unused", loaded=emb, epsilon=30.0, gamma=1.0,
                            head_size=6, allow_weak_privacy=True)
    assert read_bundle(path).manifest["privacy"]["weak_privacy"].startswith("allowed at build")
    with pytest.raises(WeakPrivacyError):
        TEMSanitizer.load(path)
    TEMSanitizer.load(path, allow_weak_privacy=True)
    # a moderate epsilon on the same vocabulary passes with beta
    TEMSanitizer.load(build_tem_bundle(tmp_path / "m.ldpb", embeddings="unused", loaded=emb, epsilon=1.0,
                                       beta=0.001, head_size=6))
