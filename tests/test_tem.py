"""TEM (Carvalho et al. 2021) on the exact SanText engine.

Oracle, independent of the implementation: mpmath (50 digits) evaluates
Pr[M(x)=y] = exp(−ε·min(d(x, y), γ)/2) / Σ_{y'} exp(−ε·min(d(x, y'), γ)/2) from the bundle's exact
metric embedding; the realised law (SanText's engine law conditioned on L_x, mixed with the ⊥ branch,
from the tables' exact masses) must match it within the stated tolerance, and the draws of the
native and the numpy samplers must match the realised law (chi-square)."""
import math
import warnings

import mpmath
import numpy as np
import pytest
from scipy import stats

from conftest import edited_bundle, random_word_embeddings

from ldptext.bundle_check import sign_bundle
from ldptext.errors import ParameterError
from ldptext.rng import SeededModeWarning
from ldptext.tem import TEMSanitizer, threshold_from_beta
from ldptext_precompute.tem.build import build_tem_bundle

mpmath.mp.dps = 50


def _load(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        return TEMSanitizer.load(path, **kw)


@pytest.fixture(scope="module")
def emb():
    return random_word_embeddings(47, 5, 8)


@pytest.fixture(scope="module", params=[1.6, 2.4, 50.0], ids=["gamma-small", "gamma-mid", "gamma-huge"])
def bundle(request, tmp_path_factory, emb):
    return build_tem_bundle(tmp_path_factory.mktemp("t") / "t.ldpb", embeddings="unused", loaded=emb,
                            epsilon=3.0, gamma=request.param, head_size=6)


def oracle_rows(san):
    t = san.tables
    vec = [[mpmath.mpf(float(t.emb_scale[i])) * int(c) for c in t.emb_q[i]] for i in range(t.n_rows)]
    outs = [int(o) for o in t.outputs]
    eps, gamma = mpmath.mpf(san.epsilon), mpmath.mpf(san.gamma)
    rows = {}
    for x in np.flatnonzero(san.valid_input):
        d = [mpmath.sqrt(mpmath.fsum((p - q) ** 2 for p, q in zip(vec[x], vec[y]))) for y in outs]
        w = [-eps * min(di, gamma) / 2 for di in d]
        z = mpmath.log(mpmath.fsum(mpmath.exp(v) for v in w))
        rows[int(x)] = (outs, [float(v - z) for v in w], [float(di) for di in d])
    return rows


def test_realised_law_equals_the_truncated_exponential_mechanism(bundle):
    san = _load(bundle)
    realised = san.log_probabilities(np.flatnonzero(san.valid_input))
    worst = 0.0
    for i, (x, (outs, ref, dist)) in enumerate(oracle_rows(san).items()):
        # a distance within 1e-9 of gamma could fall on either side by rounding: none here
        assert min(abs(d - san.gamma) for d in dist) > 1e-9
        worst = max(worst, float(np.max(np.abs(realised[i, outs] - np.array(ref)))))
        special = np.setdiff1d(np.arange(san.n_rows), outs)
        assert np.all(realised[i, special] == -np.inf)
    assert worst <= san.tolerance <= 1e-9


def test_native_and_fallback_draws_follow_the_realised_law(bundle):
    for backend in ("native", "fallback"):
        san = _load(bundle, seed=7, backend=backend)
        n = 40_000 if backend == "native" else 15_000
        for x in (0, 20, san.n_rows - 1):
            ys = san.sample_ids(np.full(n, x))
            p = san.probabilities([x])[0]
            support = np.flatnonzero(p > 0)
            assert np.isin(ys, support).all()
            expected = p[support] * n
            observed = np.bincount(ys, minlength=san.n_rows)[support]
            big = expected >= 5  # pool the rare outputs into one cell
            obs = np.append(observed[big], observed[~big].sum())
            exp_ = np.append(expected[big], expected[~big].sum())
            keep = exp_ > 0
            assert stats.chisquare(obs[keep], exp_[keep]).pvalue > 1e-4


def test_metric_bound_truncated_at_gamma_holds_for_every_pair(bundle):
    san = _load(bundle)
    rows = np.flatnonzero(san.valid_input)
    lp = san.log_probabilities(rows)[:, san.tables.outputs]
    emb = san.tables.metric_embedding()[rows]
    for i in range(rows.size):
        d = np.linalg.norm(emb - emb[i], axis=1)
        bound = san.epsilon * np.minimum(d, san.gamma) + 2 * san.tolerance + 1e-12
        assert np.all(np.max(lp[i][None, :] - lp, axis=1) <= bound)
    r = san.privacy_report(3)
    assert r.worst_case_token_epsilon == pytest.approx(san.epsilon * min(san.gamma, san.d_max))
    assert r.ledger_unit.startswith("metric:") and r.document_epsilon == pytest.approx(9.0)


def test_tem_shares_santexts_metric_ledger_unit(tmp_path, emb):
    from conftest import load_seeded
    tem = _load(build_tem_bundle(tmp_path / "t.ldpb", embeddings="unused", loaded=emb, epsilon=2.0,
                                 beta=0.01, head_size=6))
    from ldptext_precompute.santext.build import build_santext_bundle
    st = load_seeded(build_santext_bundle(tmp_path / "s.ldpb", embeddings="unused", loaded=emb, epsilon=1.0,
                                          mechanism="santext", head_size=6, progress=False))
    assert tem.ledger_unit == st.ledger_unit  # the same metric: charges add up


def test_beta_threshold_bounds_the_bot_probability(tmp_path):
    emb = random_word_embeddings(80, 4, 1, scale=2.0)
    for beta in (0.3, 0.05):
        san = _load(build_tem_bundle(tmp_path / f"b{beta}.ldpb", embeddings="unused", loaded=emb,
                                     epsilon=4.0, beta=beta, head_size=6))
        n_out = san.tables.outputs.size
        assert san.gamma == pytest.approx(2 / 4.0 * math.log((1 - beta) * n_out / beta))
        p_bot = np.where(san.bot_count > 0, np.exp(-san.bot_gamma), 0.0)[san.valid_input]
        assert p_bot.max() <= beta * (1 + 1e-12)


def test_huge_gamma_is_santext(tmp_path, emb):
    san = _load(build_tem_bundle(tmp_path / "h.ldpb", embeddings="unused", loaded=emb, epsilon=2.0,
                                 gamma=1e6, head_size=6))
    from conftest import load_seeded
    from ldptext_precompute.santext.build import build_santext_bundle
    ref = load_seeded(build_santext_bundle(tmp_path / "s.ldpb", embeddings="unused", loaded=emb, epsilon=2.0,
                                           mechanism="santext", head_size=6, progress=False))
    assert not san.bot_count.any()
    np.testing.assert_allclose(san.log_probabilities([0, 5]), ref.log_probabilities([0, 5]), atol=1e-9)


@pytest.mark.parametrize("kw", [dict(epsilon=0.0), dict(epsilon=float("inf")), dict(epsilon=float("nan")),
                                dict(epsilon=1.0, beta=0.0), dict(epsilon=1.0, beta=1.0),
                                dict(epsilon=1.0, beta=None), dict(epsilon=1.0, gamma=0.0),
                                dict(epsilon=1.0, gamma=-2.0), dict(epsilon=1.0, gamma=float("inf")),
                                dict(epsilon=1.0, head_size=0)])
def test_bad_parameters_are_refused(tmp_path, emb, kw):
    with pytest.raises(ParameterError):
        build_tem_bundle(tmp_path / "x.ldpb", embeddings="unused", loaded=emb, **kw)


def test_threshold_from_beta_refuses_out_of_range():
    for args in ((1.0, 0.0, 10), (1.0, 1.0, 10), (0.0, 0.1, 10), (1.0, 0.9, 1)):
        with pytest.raises(ValueError):
            threshold_from_beta(*args)


def test_precompute_command_builds_a_signed_bundle_and_refuses_bad_parameters(tmp_path):
    from ldptext.cli import main
    rng = np.random.default_rng(0)
    src = tmp_path / "tiny.glove.txt"
    src.write_text("".join(f"w{i} " + " ".join(f"{v:.5f}" for v in rng.normal(size=4)) + "\n" for i in range(30)))
    out = tmp_path / "t.ldpb"
    assert main(["precompute", "tem", "--embeddings", str(src), "--epsilon", "2", "--beta", "0.01",
                 "--head-size", "4", "--out", str(out)]) == 0
    san = _load(out)
    assert san.key_id is not None and san.beta == 0.01
    assert san.sanitize("w1 w2 nope").report.n_tokens == 3
    for bad in (["--beta", "1.5"], ["--gamma", "-1"], ["--epsilon", "0"]):
        args = ["precompute", "tem", "--embeddings", str(src), "--epsilon", "2", "--out", str(tmp_path / "x.ldpb")]
        assert main(args + bad) == 2


# ---- first-class bundle: ldptext sanitize, bundle sign / inspect, the package's exports ----------
def _edited(src, dst, edit, sign_key=None):
    """A copy of ``src`` with its manifest edited (unsigned: what a relabeller hands to ``bundle sign``)."""
    return edited_bundle(src, dst, edit, sign_key=sign_key)


@pytest.fixture(scope="module")
def signed(tmp_path_factory, emb):
    return build_tem_bundle(tmp_path_factory.mktemp("tem_cli") / "t.ldpb", embeddings="unused", loaded=emb,
                            epsilon=3.0, gamma=2.4, head_size=6)


def test_cli_sanitize_dispatches_to_tem_with_reports_pins_and_skips(signed, tmp_path, capsys):
    import json

    from ldptext.cli import main
    src = tmp_path / "in.txt"
    src.write_bytes(b"w1 w2 w3\n\xff bad\nw4\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        assert main(["sanitize", "--bundle", str(signed), "--json", "--seed", "1", "--skip-bad-lines",
                     "--expect-mechanism", "tem", "--expect-epsilon-max", "3", str(src)]) == 0
    captured = capsys.readouterr()
    out = [json.loads(line) for line in captured.out.splitlines()]
    assert [o["report"]["n_tokens"] for o in out] == [3, 1]       # the bad line: no output line
    report = out[0]["report"]
    assert report["mechanism"] == "tem" and report["seeded"] is True
    assert report["neighbouring"].startswith("any two tokens") and report["worst_case_token_epsilon"] == 3.0 * 2.4
    assert "line 2" in captured.err
    # the pins apply to every mechanism; a wrong mechanism pin is a bundle error
    assert main(["sanitize", "--bundle", str(signed), "--expect-mechanism", "santext", str(src)]) == 4
    assert main(["sanitize", "--bundle", str(signed), "--expect-epsilon-min", "4", str(src)]) == 4


def test_cli_sanitize_refuses_a_dpbart_bundle_naming_rewrite(tmp_path, capsys):
    from ldptext import bundle as B
    from ldptext import keys as K
    from ldptext.cli import main
    path = B.write_bundle(tmp_path / "d.ldpb", mechanism="dpbart", arrays={"pruned": np.zeros(2, np.int64)},
                          manifest={"dpbart": {"seq_len": 4, "hidden": 8}}, sign_key=K.developer_key())
    src = tmp_path / "in.txt"
    src.write_text("w1\n")
    assert main(["sanitize", "--bundle", str(path), str(src)]) == 4
    err = capsys.readouterr().err
    assert "ldptext rewrite" in err and err.count("\n") == 1


def test_bundle_sign_resigns_a_consistent_tem_bundle_identically(signed, tmp_path, capsys):
    from ldptext import keys as K
    from ldptext.cli import main
    key = K.developer_key()
    from cryptography.hazmat.primitives import serialization
    pem = tmp_path / "k.pem"
    pem.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
    pem.chmod(0o600)
    assert main(["bundle", "sign", str(signed), "--key", str(pem), "--out", str(tmp_path / "re.ldpb")]) == 0
    assert (tmp_path / "re.ldpb").read_bytes() == signed.read_bytes()


@pytest.mark.parametrize("edit, fragment", [
    (lambda m: m["params"].update(epsilon=m["params"]["epsilon"] * 1.5), "epsilon"),
    (lambda m: m["params"].update(epsilon=m["params"]["epsilon"] * (1 + 1e-6)), "epsilon"),
    # ε relabelled together with the stated worst case: the tables still give it away
    (lambda m: (m["params"].update(epsilon=1.5),
                m["privacy"].update(worst_case_token_epsilon=1.5 * 2.4)), "tables realise"),
    (lambda m: m["params"].update(gamma=3.0), "gamma"),
    (lambda m: m["privacy"].update(d_max=m["privacy"]["d_max"] / 2), "D_max"),
    (lambda m: m["privacy"].update(worst_case_token_epsilon=1.0), "worst_case"),
    (lambda m: m["params"].update(head_size=7), "head_size"),
])
def test_bundle_sign_refuses_relabelled_tem_parameters_even_with_force(signed, tmp_path, edit, fragment):
    from ldptext import keys as K
    from ldptext.errors import ParameterMismatchError
    path = _edited(signed, tmp_path / "e.ldpb", edit)
    with pytest.raises(ParameterMismatchError, match=fragment):
        sign_bundle(path, K.developer_key(), force=True)


@pytest.mark.parametrize("edit, fragment", [
    (lambda m: m["params"].update(epsilon=1.5), "epsilon"),
    (lambda m: (m["params"].update(epsilon=1.5),
                m["privacy"].update(worst_case_token_epsilon=1.5 * 2.4)), "tables realise"),
    (lambda m: m["privacy"].update(d_max=m["privacy"]["d_max"] / 2), "D_max"),
])
def test_a_trusted_signers_relabelled_tem_bundle_is_refused_at_load(signed, tmp_path, edit, fragment):
    """Re-signed with the trusted key without the sign-time check: the load runs it anyway."""
    from ldptext import bundle as B
    from ldptext import keys as K
    from ldptext.errors import ParameterMismatchError
    path = _edited(signed, tmp_path / "e.ldpb", edit, sign_key=K.developer_key())
    B.read_bundle(path)                                # validly signed by the trusted key
    for backend in ("fallback", "native"):
        with pytest.raises(ParameterMismatchError, match=fragment):
            TEMSanitizer.load(path, backend=backend)


def test_bundle_sign_refuses_a_gamma_that_is_not_betas_threshold(tmp_path, emb):
    from ldptext import keys as K
    from ldptext.errors import ParameterMismatchError
    path = build_tem_bundle(tmp_path / "b.ldpb", embeddings="unused", loaded=emb, epsilon=3.0, beta=0.2, head_size=6)
    sign_bundle(path, K.developer_key(), out=tmp_path / "ok.ldpb")
    with pytest.raises(ParameterMismatchError, match="beta"):
        sign_bundle(_edited(path, tmp_path / "e.ldpb", lambda m: m["params"].update(beta=0.1)),
                      K.developer_key(), force=True)


def test_bundle_inspect_states_the_tem_guarantee(signed, capsys):
    from ldptext.cli import main
    assert main(["bundle", "inspect", str(signed)]) == 0
    out = capsys.readouterr().out
    assert "truncated metric-LDP: Pr[M(x)=y] <= exp(eps*min(d(x,x'), gamma))" in out and "any two tokens x, x'" in out
    assert "eps*min(gamma, D_max) = 7.2-LDP" in out and "Carvalho et al. 2021" in out
    assert "ledger unit                  metric:" in out


def test_tem_is_exported_lazily_and_states_its_guarantee():
    import ldptext
    assert ldptext.TEMSanitizer is TEMSanitizer and "TEMSanitizer" in ldptext.__all__
    doc = TEMSanitizer.__doc__
    assert "Guarantee" in doc and "Neighbouring relation" in doc and "Carvalho" in doc


def test_tem_refuses_a_ledger_of_another_unit_at_load_and_reports_its_backend(signed, tmp_path):
    import os

    from ldptext.errors import LedgerError
    from ldptext.ledger import Ledger

    ldp = Ledger(tmp_path / "ldp.ledger", budget=10.0, key=os.urandom(32))
    with pytest.raises(LedgerError, match="unit 'ldp'"):
        TEMSanitizer.load(signed, ledger=ldp)
    san = TEMSanitizer.load(signed, backend="fallback")
    assert san.sanitize("w1").report.to_dict()["backend"] == "fallback"


def test_probabilities_of_an_id_outside_the_bundle_is_an_input_error(signed):
    from ldptext.errors import InputError

    san = TEMSanitizer.load(signed)
    for bad in ([10 ** 9], [0, -1]):
        with pytest.raises(InputError, match="position"):
            san.probabilities(bad)
