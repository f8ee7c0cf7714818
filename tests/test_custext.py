"""CusText / CusText+ (Chen et al. 2023) on the exact SanText engine.

The oracle is independent of the implementation: mpmath (50 digits) evaluates the paper's sampling
function — exp(ε·u(x, y)/2) normalised over the output set, u the similarity min–max normalised to
[0, 1] — from the bundle's exact metric embedding and its public partition, and a pure-Python greedy
grouping re-derives the partition. The realised law (computed from the alias tables' exact integer
masses and acceptance exponents) must match to the stated tolerance, and the C sampler's draws must
match the realised law (chi-square)."""
import warnings

import mpmath
import numpy as np
import pytest
from scipy import stats

from conftest import random_word_embeddings

from ldptext.bundle_check import sign_bundle
from ldptext import bundle as _bundle
from ldptext import keys as _keys
from ldptext.custext import CusTextSanitizer
from ldptext.errors import BundleIntegrityError, ParameterError
from ldptext.rng import SeededModeWarning
from ldptext_precompute.custext.build import build_custext_bundle, output_sets

mpmath.mp.dps = 50


def _load(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        return CusTextSanitizer.load(path, **kw)


@pytest.fixture(scope="module")
def emb():
    return random_word_embeddings(53, 6, 3)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory, emb):
    return build_custext_bundle(tmp_path_factory.mktemp("c") / "c.ldpb", embeddings="unused", loaded=emb,
                                epsilon=2.5, k=5, device="cpu")


@pytest.fixture(scope="module")
def plus_bundle(tmp_path_factory, emb):
    words = tmp_path_factory.mktemp("w") / "stop.txt"
    words.write_text("w0\nw1\nw2\nw7\n")
    return build_custext_bundle(tmp_path_factory.mktemp("cp") / "cp.ldpb", embeddings="unused", loaded=emb,
                                epsilon=1.5, k=4, mechanism="custext+", non_sensitive=str(words),
                                similarity="cosine", device="cpu")


def exact_vectors(san):
    t = san.tables
    return [[mpmath.mpf(float(t.emb_scale[i])) * int(c) for c in t.emb_q[i]] for i in range(t.n_rows)]


def oracle_row(vec, x, members, eps, similarity):
    """log Pr[M(x)=y] for y in members, by the paper's formula in mpmath."""
    def sim(a, b):
        if similarity == "euclidean":
            return -mpmath.sqrt(sum((p - q) ** 2 for p, q in zip(a, b)))
        dot = sum(p * q for p, q in zip(a, b))
        return dot / (mpmath.sqrt(sum(p * p for p in a)) * mpmath.sqrt(sum(q * q for q in b)))
    s = [sim(vec[x], vec[y]) for y in members]
    lo, hi = min(s), max(s)
    u = [mpmath.mpf(1)] * len(s) if hi == lo else [(v - lo) / (hi - lo) for v in s]
    w = [mpmath.mpf(eps) * v / 2 for v in u]
    z = mpmath.log(mpmath.fsum(mpmath.exp(v) for v in w))
    return [v - z for v in w]


def check_against_oracle(san, similarity):
    vec = exact_vectors(san)
    worst = 0.0
    rows = np.flatnonzero(san.valid_input & (san.group_id >= 0))
    realised = san.log_probabilities(rows)
    for i, x in enumerate(rows):
        members = np.flatnonzero(san.group_id == san.group_id[x])
        members = members[np.isin(members, san.tables.outputs)]
        ref = oracle_row(vec, int(x), members, san.epsilon, similarity)
        got = realised[i, members]
        worst = max(worst, max(abs(float(r) - float(g)) for r, g in zip(ref, got)))
        outside = np.setdiff1d(np.arange(san.n_rows), members)
        assert np.all(realised[i, outside] == -np.inf)  # nothing outside the output set
    return worst


def test_realised_law_equals_the_papers_formula_euclidean(bundle):
    san = _load(bundle)
    worst = check_against_oracle(san, "euclidean")
    assert worst <= san.tolerance <= 1e-9


def test_realised_law_equals_the_papers_formula_cosine_plus(plus_bundle):
    san = _load(plus_bundle)
    assert san.mechanism == "custext+"
    worst = check_against_oracle(san, "cosine")
    assert worst <= san.tolerance <= 1e-9


def test_native_and_fallback_draws_follow_the_realised_law(bundle):
    for backend in ("native", "fallback"):
        san = _load(bundle, seed=11, backend=backend)
        for x in (0, 17, san.n_rows - 1):  # the last row is <unk>: an input, not an output
            n = 60_000 if backend == "native" else 20_000
            ys = san.sample_ids(np.full(n, x))
            p = san.probabilities([x])[0]
            support = np.flatnonzero(p > 0)
            assert np.isin(ys, support).all()
            observed = np.bincount(ys, minlength=san.n_rows)[support]
            assert stats.chisquare(observed, p[support] * n).pvalue > 1e-4


def test_partition_is_the_greedy_mapping_function(emb, bundle):
    san = _load(bundle)
    outputs = san.tables.outputs
    vec = np.asarray(san.tables.metric_embedding())[outputs]
    # independent pure-Python greedy: in vocabulary order, a seed and its K-1 nearest unassigned
    left = list(range(outputs.size))
    groups = []
    while left:
        s = left.pop(0)
        left.sort(key=lambda j: (float(np.sum((vec[j] - vec[s]) ** 2)), j))
        grp, left = [s] + left[:4], left[4:]
        left.sort()
        if len(grp) < 5:
            groups[-1] += grp
        else:
            groups.append(grp)
    mine, _ = output_sets(san.tables.metric_embedding(), outputs, 5, device="cpu")
    assert [sorted(np.flatnonzero(mine == g)) for g in range(mine.max() + 1)] == [sorted(g) for g in groups]
    sizes = np.bincount(san.group_id[outputs])
    assert sizes.min() >= 5 and sizes.max() <= 9


def test_epsilon_ldp_within_an_output_set_and_disjoint_across(bundle):
    san = _load(bundle)
    rows = np.flatnonzero(san.valid_input)
    lp = san.log_probabilities(rows)
    for g in np.unique(san.group_id[rows]):
        members = rows[san.group_id[rows] == g]
        block = lp[np.isin(rows, members)][:, np.isfinite(lp[np.isin(rows, members)][0])]
        assert np.isfinite(block).all()
        worst = float(np.max(block.max(axis=0) - block.min(axis=0)))
        assert worst <= san.epsilon + 2 * san.tolerance
    a, b = rows[san.group_id[rows] == 0][0], rows[san.group_id[rows] == 1][0]
    pa, pb = san.probabilities([a, b])
    assert not np.any((pa > 0) & (pb > 0))  # the output reveals the group: no finite LDP level
    r = san.privacy_report(3)
    assert r.worst_case_token_epsilon is None and "group" in r.worst_case_note
    assert r.document_epsilon == pytest.approx(3 * 2.5) and r.ledger_unit.startswith("partition:")


def test_custext_plus_keeps_stop_words_and_never_outputs_them(plus_bundle):
    san = _load(plus_bundle, seed=2)
    stop = [san.vocab.index(w) for w in ("w0", "w1", "w2", "w7")]
    assert np.array_equal(san.sample_ids(np.array(stop * 50)), np.array(stop * 50))
    others = np.flatnonzero(san.valid_input & ~np.isin(np.arange(san.n_rows), stop))
    ys = san.sample_ids(np.repeat(others, 30))
    assert not np.isin(ys, stop).any()
    r = san.privacy_report(2)
    assert r.kept_in_clear_probability == 1.0 and "stop words" in r.worst_case_note


def test_sanitize_text_and_ledger_charge(bundle, tmp_path):
    from ldptext.ledger import Ledger
    from ldptext.errors import BudgetExceededError
    san = _load(bundle, seed=5)
    ledger = Ledger(tmp_path / "l", budget=12.0, key=b"k" * 32, unit=san.ledger_unit)
    san.ledger = ledger
    out = san.sanitize("w3 w4 unknownword w5")
    assert len(out.text.split()) == 4 and out.report.n_tokens == 4
    with pytest.raises(BudgetExceededError):
        san.sanitize("w3 w4 w5")  # 10 + 7.5 > 12
    assert ledger.spent()[0] == pytest.approx(10.0)


@pytest.mark.parametrize("kw", [dict(epsilon=0.0), dict(epsilon=-1.0), dict(epsilon=float("inf")),
                                dict(epsilon=float("nan")), dict(epsilon=1.0, k=0),
                                dict(epsilon=1.0, k=10_000), dict(epsilon=1.0, similarity="jaccard"),
                                dict(epsilon=1.0, mechanism="custext++"), dict(epsilon=True)])
def test_bad_parameters_are_refused(tmp_path, emb, kw):
    with pytest.raises(ParameterError):
        build_custext_bundle(tmp_path / "x.ldpb", embeddings="unused", loaded=emb, device="cpu", **kw)


def test_a_resigned_bundle_whose_rows_leave_their_output_set_is_refused(bundle, tmp_path):
    b = _bundle.read_bundle(bundle)
    arrays = {k: np.array(v) for k, v in b.arrays.items() if not k.startswith("blob/")}
    blobs = {k[5:]: bytes(v) for k, v in b.arrays.items() if k.startswith("blob/")}
    manifest = {k: v for k, v in b.manifest.items() if k not in ("format", "format_version", "mechanism", "arrays")}
    gid = arrays["group_id"]
    x = int(np.flatnonzero(gid == 0)[0])
    gid[x] = 1  # claims another group than its head's members
    path = _bundle.write_bundle(tmp_path / "bad.ldpb", mechanism="custext", arrays=arrays, manifest=manifest,
                                blobs=blobs, sign_key=_keys.developer_key())
    with pytest.raises(BundleIntegrityError):
        _load(path)


def glove_file(tmp_path, n=30, dim=4):
    rng = np.random.default_rng(0)
    path = tmp_path / "tiny.glove.txt"
    path.write_text("".join(f"w{i} " + " ".join(f"{v:.5f}" for v in rng.normal(size=dim)) + "\n"
                            for i in range(n)))
    return path


def test_precompute_command_builds_a_signed_bundle_and_refuses_bad_parameters(tmp_path):
    from ldptext.cli import main
    src = glove_file(tmp_path)
    out = tmp_path / "c.ldpb"
    assert main(["precompute", "custext", "--embeddings", str(src), "--epsilon", "2", "--k", "4",
                 "--out", str(out)]) == 0
    san = _load(out)
    assert san.key_id is not None and san.k == 4 and san.mechanism == "custext"
    assert main(["precompute", "custext", "--embeddings", str(src), "--epsilon", "2", "--k", "0",
                 "--out", str(tmp_path / "x.ldpb")]) == 2
    assert main(["precompute", "custext", "--embeddings", str(src), "--epsilon", "inf",
                 "--out", str(tmp_path / "x.ldpb")]) == 2
    assert not (tmp_path / "x.ldpb").exists()


# ---- first-class bundle: ldptext sanitize (lines and Parquet), bundle sign / inspect, exports ----------
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


def test_cli_sanitize_dispatches_to_custext_plus_keeping_stop_words(plus_bundle, tmp_path, capsys):
    import json

    from ldptext.cli import main
    src = tmp_path / "in.txt"
    src.write_text("w0 w3 w1\nw9\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        assert main(["sanitize", "--bundle", str(plus_bundle), "--json", "--seed", "2", str(src)]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(out) == 2 and out[0]["report"]["mechanism"] == "custext+"
    words = out[0]["text"].split()
    assert words[0] == "w0" and words[2] == "w1"          # stop words in the clear
    assert out[0]["report"]["kept_in_clear_probability"] == 1.0
    assert out[0]["report"]["ledger_unit"].startswith("partition:")


def test_cli_sanitize_parquet_local_runs_custext(bundle, tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from ldptext.cli import main
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": ["w1 w2", None, "w3"], "n": [1, 2, 3]}), src)
    out = tmp_path / "out.parquet"
    assert main(["sanitize", "--bundle", str(bundle), "--input", str(src), "--column", "text",
                 "--output", str(out)]) == 0
    table = pq.read_table(out)
    assert table.column("ldp_mechanism").to_pylist() == ["custext", None, "custext"]
    assert table.column("ldp_tokens").to_pylist() == [2, None, 1]


@pytest.mark.parametrize("edit, fragment", [
    (lambda m: m["params"].update(epsilon=m["params"]["epsilon"] * 1.5), "epsilon"),
    (lambda m: m["params"].update(epsilon=m["params"]["epsilon"] * (1 + 1e-6)), "epsilon"),
    (lambda m: m["params"].update(similarity="cosine"), "tables realise"),
    (lambda m: m["params"].update(p=0.5), "p"),
    (lambda m: m["privacy"].update(groups=2), "groups"),
    (lambda m: m["privacy"].update(worst_case_token_epsilon=2.5), "worst-case"),
])
def test_bundle_sign_refuses_relabelled_custext_parameters_even_with_force(bundle, tmp_path, edit, fragment):
    from ldptext.errors import ParameterMismatchError
    sign_bundle(bundle, _keys.developer_key(), out=tmp_path / "ok.ldpb")   # consistent: signs
    assert (tmp_path / "ok.ldpb").read_bytes() == bundle.read_bytes()
    path = _edited(bundle, tmp_path / "e.ldpb", edit)
    with pytest.raises(ParameterMismatchError, match=fragment):
        sign_bundle(path, _keys.developer_key(), force=True)


def test_bundle_sign_refuses_a_relabelled_cosine_custext_plus(plus_bundle, tmp_path):
    from ldptext.errors import ParameterMismatchError
    sign_bundle(plus_bundle, _keys.developer_key(), out=tmp_path / "ok.ldpb")
    for edit in (lambda m: m["params"].update(epsilon=3.0), lambda m: m["params"].update(similarity="euclidean")):
        with pytest.raises(ParameterMismatchError, match="tables realise"):
            sign_bundle(_edited(plus_bundle, tmp_path / "e.ldpb", edit), _keys.developer_key(), force=True)


def test_bundle_inspect_states_the_custext_guarantee(bundle, plus_bundle, capsys):
    from ldptext.cli import main
    assert main(["bundle", "inspect", str(bundle)]) == 0
    out = capsys.readouterr().out
    assert "LDP within output sets" in out and "any two inputs with the same output set" in out
    assert "groups of >= 5 tokens by" in out
    assert "none (not finite): CusText's output sets are disjoint groups" in out and "Chen et al. 2023" in out
    assert "partition:" in out
    assert main(["bundle", "inspect", str(plus_bundle)]) == 0
    out = capsys.readouterr().out
    assert "stop words, released unchanged, with probability 1" in out
    assert "CusText+ also releases its stop words unchanged" in out


def test_custext_is_exported_lazily_and_states_its_guarantee():
    import ldptext
    assert ldptext.CusTextSanitizer is CusTextSanitizer and "CusTextSanitizer" in ldptext.__all__
    doc = CusTextSanitizer.__doc__
    assert "Guarantee" in doc and "Neighbouring" in doc and "Chen et al. 2023" in doc and "§3" in doc


def test_probabilities_of_an_id_outside_the_bundle_is_an_input_error(bundle):
    from ldptext.errors import InputError

    san = CusTextSanitizer.load(bundle)
    for bad in ([10 ** 9], [-1]):
        with pytest.raises(InputError, match="position 0"):
            san.probabilities(bad)
