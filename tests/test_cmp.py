"""CMP (Feyisetan et al. 2020) and Mahalanobis (Xu et al. 2020): CSPRNG noise, faiss nearest neighbour.

Their output law has no closed form, so the oracle is statistical and independent of the
implementation: an ideal float64 reference (numpy's own generator — fine for a test reference, never
for a release — direction from normalised Gaussians, radius Gamma(m, 1/ε), then S·z, then the
brute-force nearest output) sampled 400,000 times on a tiny vocabulary, compared with the SDK's
draws by a chi-square test of homogeneity. The noise itself is checked against its distribution
(radius Gamma(m, 1/ε) after S⁻¹, uniform direction), and the floating-point caveat's ν (draws within
the coupling distance δ of a nearest-neighbour boundary) is estimated."""
import builtins
import warnings

import numpy as np
import pytest
from scipy import stats

from conftest import load_seeded, random_word_embeddings

from ldptext.bundle_check import sign_bundle
from ldptext import bundle as _bundle
from ldptext import keys as _keys
from ldptext.cmp import CMPSanitizer
from ldptext.errors import BundleIntegrityError, ParameterError
from ldptext.multivariate_laplace import COUPLING_DELTA, small_exponential_probability
from ldptext.rng import SeededModeWarning
from ldptext_precompute.cmp.build import build_cmp_bundle
from ldptext_precompute.santext.build import build_santext_bundle


def _load(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        return CMPSanitizer.load(path, **kw)


@pytest.fixture(scope="module")
def emb():
    return random_word_embeddings(11, 3, 4)


@pytest.fixture(scope="module", params=["cmp", "mahalanobis"])
def bundle(request, tmp_path_factory, emb):
    return build_cmp_bundle(tmp_path_factory.mktemp("m") / f"{request.param}.ldpb", embeddings="unused",
                            loaded=emb, epsilon=1.5, mechanism=request.param, lam=0.8)


def reference_counts(san, x, n, seed=0):
    """Ideal mechanism, independently: numpy float64 noise, brute-force nearest output."""
    rng = np.random.default_rng(seed)
    m = san.embeddings.shape[1]
    g = rng.standard_normal((n, m))
    z = g / np.linalg.norm(g, axis=1, keepdims=True) * rng.gamma(m, 1 / san.epsilon, n)[:, None]
    if san.mechanism == "mahalanobis":
        z = z @ san.noise_transform.T
    out = san.embeddings[san.outputs]
    v = san.embeddings[x] + z
    d2 = ((v[:, None, :] - out[None, :, :]) ** 2).sum(axis=2)
    return np.bincount(d2.argmin(axis=1), minlength=san.outputs.size)


def test_draws_match_an_independent_float64_reference(bundle):
    san = _load(bundle, seed=3)
    for x in (0, 5, san.n_rows - 1):  # the last row: <unk>, an input that is never output
        ref = reference_counts(san, x, 400_000, seed=x)
        ys = san.sample_ids(np.full(100_000, x))
        assert np.isin(ys, san.outputs).all()
        ours = np.bincount(np.searchsorted(san.outputs, ys), minlength=san.outputs.size)
        table = np.vstack([ours, ref])
        table = table[:, table.sum(axis=0) > 0]
        assert stats.chi2_contingency(table).pvalue > 1e-4


def test_noise_has_the_multivariate_laplace_law(bundle):
    san = _load(bundle, seed=4)
    z = san.noisy_points(np.zeros(50_000, dtype=np.int64)) - san.embeddings[0]
    if san.mechanism == "mahalanobis":
        z = np.linalg.solve(san.noise_transform, z.T).T
    r = np.linalg.norm(z, axis=1)
    m = z.shape[1]
    assert stats.kstest(r, "gamma", args=(m, 0, 1 / san.epsilon)).pvalue > 1e-4
    u = z / r[:, None]  # uniform on the sphere: each coordinate ~ Beta-like with mean 0, variance 1/m
    assert np.all(np.abs(u.mean(axis=0)) < 5 / np.sqrt(50_000 * m))
    np.testing.assert_allclose((u ** 2).mean(axis=0), 1 / m, rtol=0.03)


def test_floating_point_caveat_nu_is_small(bundle):
    san = _load(bundle, seed=5)
    pts = san.noisy_points(np.full(100_000, 2))
    r = np.linalg.norm(pts - san.embeddings[2], axis=1)
    out = san.embeddings[san.outputs]
    d = np.sqrt(((pts[:, None, :] - out[None]) ** 2).sum(axis=2))
    d.sort(axis=1)
    # the margin to the nearest boundary is (d2 - d1)/2 >= ... a draw is ambiguous when below delta
    ambiguous = int(((d[:, 1] - d[:, 0]) / 2 < COUPLING_DELTA * (1 + r)).sum())
    assert ambiguous <= 1  # nu <~ 4.7e-5 at 95 % (plus the analytic ceil(m/2)*2^-24 = 1.2e-7 here)
    assert small_exponential_probability(3) == 2 * 2.0 ** -24


def test_metric_bound_between_neighbours_on_the_reference(bundle):
    san = _load(bundle)
    a, b = 0, 1
    pa = reference_counts(san, a, 400_000, seed=10) / 400_000
    pb = reference_counts(san, b, 400_000, seed=11) / 400_000
    diff = san.embeddings[a] - san.embeddings[b]
    if san.mechanism == "mahalanobis":
        diff = np.linalg.solve(san.noise_transform, diff)
    bound = san.epsilon * np.linalg.norm(diff)
    ok = (pa > 0.01) & (pb > 0.01)  # cells with small relative sampling error
    assert ok.sum() >= 2
    assert np.all(np.abs(np.log(pa[ok] / pb[ok])) <= bound + 0.1)
    r = san.privacy_report(2)
    assert r.worst_case_token_epsilon == pytest.approx(san.epsilon * san.d_max)
    assert r.numeric_tolerance is None and "float64" in r.numeric_note


def test_exact_and_approximate_index_release_the_same_tokens_here(tmp_path, emb):
    flat = _load(build_cmp_bundle(tmp_path / "f.ldpb", embeddings="unused", loaded=emb, epsilon=1.0), seed=1)
    hnsw = _load(build_cmp_bundle(tmp_path / "h.ldpb", embeddings="unused", loaded=emb, epsilon=1.0,
                                  index="hnsw"), seed=1)
    assert hnsw.index_kind == "hnsw"
    pts = flat.noisy_points(np.arange(flat.n_rows).repeat(200))
    np.testing.assert_array_equal(flat.nearest(pts), hnsw.nearest(pts))


def test_cmp_shares_santexts_metric_unit_and_dmax(tmp_path, emb):
    cmp = _load(build_cmp_bundle(tmp_path / "c.ldpb", embeddings="unused", loaded=emb, epsilon=1.0))
    st = load_seeded(build_santext_bundle(tmp_path / "s.ldpb", embeddings="unused", loaded=emb, epsilon=1.0,
                                          mechanism="santext", head_size=4, progress=False))
    assert cmp.ledger_unit == st.ledger_unit
    assert cmp.d_max == pytest.approx(st.d_max, rel=1e-9)
    np.testing.assert_array_equal(cmp.embeddings, st.embeddings)


@pytest.mark.parametrize("kw", [dict(epsilon=0.0), dict(epsilon=float("inf")), dict(epsilon=float("nan")),
                                dict(epsilon=1.0, mechanism="laplace"), dict(epsilon=1.0, index="ivf"),
                                dict(epsilon=1.0, mechanism="mahalanobis", lam=1.5),
                                dict(epsilon=1.0, mechanism="mahalanobis", lam=-0.1)])
def test_bad_parameters_are_refused(tmp_path, emb, kw):
    with pytest.raises(ParameterError):
        build_cmp_bundle(tmp_path / "x.ldpb", embeddings="unused", loaded=emb, **kw)


def test_singular_covariance_needs_lambda_below_one(tmp_path):
    flat = random_word_embeddings(12, 3, 0)
    flat.vectors[:, 2] = 0.0  # every word in a plane: a singular covariance
    with pytest.raises(ParameterError):
        build_cmp_bundle(tmp_path / "x.ldpb", embeddings="unused", loaded=flat, epsilon=1.0,
                         mechanism="mahalanobis", lam=1.0)
    build_cmp_bundle(tmp_path / "y.ldpb", embeddings="unused", loaded=flat, epsilon=1.0,
                     mechanism="mahalanobis", lam=0.9)


def test_an_index_over_other_vectors_is_refused(bundle, tmp_path):
    from ldptext_precompute.metricdp.faiss_search import build_index, serialize_index
    b = _bundle.read_bundle(bundle)
    arrays = {k: np.array(v) for k, v in b.arrays.items() if not k.startswith("blob/")}
    blobs = {k[5:]: bytes(v) for k, v in b.arrays.items() if k.startswith("blob/")}
    manifest = {k: v for k, v in b.manifest.items() if k not in ("format", "format_version", "mechanism", "arrays")}
    vec = arrays["emb_scale"].astype(np.float64)[:, None] * arrays["emb_q"]
    blobs["index.faiss"] = serialize_index(build_index(vec[arrays["outputs"]][::-1]))  # labels permuted
    path = _bundle.write_bundle(tmp_path / "bad.ldpb", mechanism=b.mechanism, arrays=arrays, manifest=manifest,
                                blobs=blobs, sign_key=_keys.developer_key())
    with pytest.raises(BundleIntegrityError):
        _load(path)


def test_missing_faiss_names_the_extra(bundle, monkeypatch):
    real_import = builtins.__import__

    def no_faiss(name, *args, **kwargs):
        if name == "faiss":
            raise ImportError("No module named 'faiss'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_faiss)
    with pytest.raises(ModuleNotFoundError, match=r"ldptext\[faiss\]"):
        _load(bundle)


def test_precompute_commands_build_signed_bundles_and_refuse_bad_parameters(tmp_path):
    from ldptext.cli import main
    rng = np.random.default_rng(0)
    src = tmp_path / "tiny.glove.txt"
    src.write_text("".join(f"w{i} " + " ".join(f"{v:.5f}" for v in rng.normal(size=4)) + "\n" for i in range(30)))
    for target, extra in (("cmp", ["--index", "hnsw"]), ("mahalanobis", ["--lam", "0.3"])):
        out = tmp_path / f"{target}.ldpb"
        assert main(["precompute", target, "--embeddings", str(src), "--epsilon", "2", "--out", str(out)]
                    + extra) == 0
        san = _load(out)
        assert san.mechanism == target and san.key_id is not None
    assert main(["precompute", "mahalanobis", "--embeddings", str(src), "--epsilon", "2", "--lam", "2",
                 "--out", str(tmp_path / "x.ldpb")]) == 2


def test_estimated_inversion_attack_is_a_sane_lower_bound(tmp_path, emb):
    from ldptext_precompute.evaluation.comparison import estimate_inversion_attack
    counts = np.zeros(emb.vectors.shape[0])
    counts[:8] = np.arange(8) + 1.0
    prior = np.ones_like(counts)
    prior[0] = 100.0
    loose = _load(build_cmp_bundle(tmp_path / "l.ldpb", embeddings="unused", loaded=emb, epsilon=0.01), seed=1)
    tight = _load(build_cmp_bundle(tmp_path / "t.ldpb", embeddings="unused", loaded=emb, epsilon=500.0), seed=1)
    a = estimate_inversion_attack(loose, counts, prior, draws=64)
    b = estimate_inversion_attack(tight, counts, prior, draws=64)
    assert a["candidates"] == b["candidates"] == 8
    # flat channel: the decoder falls back to the prior's favourite (token 0): its share of the data
    assert a["success_rate_dataset"] == pytest.approx(counts[0] / counts.sum(), abs=0.05)
    assert b["success_rate_dataset"] > 0.95  # almost no noise: the input is recovered


def test_evaluate_accepts_the_comparison_mechanisms_and_drops_the_duplicate_cmp_baseline():
    from ldptext_precompute.evaluation.runner import MECHANISMS, EvaluationConfig
    assert {"tem", "custext", "custext+", "cmp", "mahalanobis"} <= set(MECHANISMS)
    cfg = EvaluationConfig(mechanisms=["santext", "cmp", "tem"], baselines=["none", "random", "cmp"])
    cfg.validate()
    assert cfg.baselines == ["none", "random"]


# ---- first-class bundle: ldptext sanitize, the faiss extra, bundle sign / inspect, exports ----------
def _edited(src, dst, edit):
    """An unsigned copy of ``src`` with its manifest edited: what a relabeller hands to ``bundle sign``."""
    import json
    b, _ = _bundle.open_unverified(src)
    manifest = json.loads(json.dumps({k: v for k, v in b.manifest.items()
                                      if k not in ("format", "format_version", "mechanism", "arrays")}))
    edit(manifest)
    arrays = {n: np.array(a) for n, a in b.arrays.items() if not n.startswith(_bundle.BLOB_PREFIX)}
    blobs = {n[len(_bundle.BLOB_PREFIX):]: bytes(a) for n, a in b.arrays.items()
             if n.startswith(_bundle.BLOB_PREFIX)}
    return _bundle.write_bundle(dst, mechanism=b.mechanism, arrays=arrays, manifest=manifest, blobs=blobs)


def test_cli_sanitize_dispatches_to_cmp_and_mahalanobis(bundle, tmp_path, capsys):
    import json

    from ldptext.cli import main
    src = tmp_path / "in.txt"
    src.write_text("w1 w2 w3\nw4\n")
    mech = _bundle.open_unverified(bundle)[0].mechanism
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        assert main(["sanitize", "--bundle", str(bundle), "--json", "--seed", "4", "--expect-mechanism", mech,
                     str(src)]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [o["report"]["n_tokens"] for o in out] == [3, 1]
    report = out[0]["report"]
    assert report["mechanism"] == mech and report["notion"] == "metric-LDP"
    assert report["worst_case_token_epsilon"] == pytest.approx(1.5 * report["parameters"]["d_max"])


def test_cli_sanitize_without_faiss_is_one_line_naming_the_extra(bundle, tmp_path):
    import subprocess
    import sys
    src = tmp_path / "in.txt"
    src.write_text("w1\n")
    code = ("import sys; sys.modules['faiss'] = None\n"  # as if faiss were not installed
            "from ldptext.cli import main\n"
            f"sys.exit(main(['sanitize', '--bundle', {str(bundle)!r}, {str(src)!r}]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 8, r.stderr
    assert "pip install 'ldptext[faiss]'" in r.stderr and r.stderr.count("\n") == 1
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_bundle_sign_checks_cmp_parameters_even_with_force(bundle, tmp_path):
    from ldptext.errors import ParameterMismatchError
    sign_bundle(bundle, _keys.developer_key(), out=tmp_path / "ok.ldpb")   # consistent: signs
    assert (tmp_path / "ok.ldpb").read_bytes() == bundle.read_bytes()
    mech = _bundle.open_unverified(bundle)[0].mechanism
    edits = [(lambda m: m["privacy"].update(d_max=m["privacy"]["d_max"] * 0.8), "D_max"),
             # ε is read by the noise from the manifest; a relabel shows in the stated worst case
             (lambda m: m["params"].update(epsilon=m["params"]["epsilon"] * 2), "worst_case"),
             (lambda m: m["params"].update(index="ivf"), "index")]
    if mech == "mahalanobis":
        edits.append((lambda m: m["params"].update({"lambda": 0.5}), "lambda"))
    else:
        edits.append((lambda m: m["params"].update({"lambda": 0.5}), "Mahalanobis only"))
    for edit, fragment in edits:
        with pytest.raises(ParameterMismatchError, match=fragment):
            sign_bundle(_edited(bundle, tmp_path / "e.ldpb", edit), _keys.developer_key(), force=True)


def test_bundle_inspect_states_the_cmp_guarantee(bundle, capsys):
    from ldptext.cli import main
    assert main(["bundle", "inspect", str(bundle)]) == 0
    out = capsys.readouterr().out
    mech = _bundle.open_unverified(bundle)[0].mechanism
    assert "metric-LDP: Pr[M(x)=y] <= exp(eps*d(x,x'))*Pr[M(x')=y]" in out and "any two tokens x, x'" in out
    assert "worst case per token         eps*D_max = " in out and "floating point" in out
    assert ("regularized Mahalanobis" in out and "Xu et al. 2020" in out) if mech == "mahalanobis" else \
        ("Feyisetan et al. 2020" in out)


def test_cmp_is_exported_lazily_and_states_its_guarantee():
    import ldptext
    assert ldptext.CMPSanitizer is CMPSanitizer and "CMPSanitizer" in ldptext.__all__
    doc = CMPSanitizer.__doc__
    assert "Guarantee" in doc and "Neighbouring relation" in doc and "Feyisetan" in doc and "Xu" in doc
