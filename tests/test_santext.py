"""SanText / SanText+ guarantees (exact sampling, no underflow, specials and OOV): the realised distribution
equals the formula, the (U)MLDP ratio bound holds for every pair, nothing underflows, specials and
OOV are handled. References are computed here, independently, in float64 from the embeddings."""
import math

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from conftest import build_tiny_bundle, bundle_manifest, load_seeded, rewrite_bundle

BACKENDS = ["native", "fallback"]


def reference_log_probs(san, x: int) -> np.ndarray:
    """Independent float64 reference of the SanText(+) formula for input x over the whole vocabulary."""
    emb = np.asarray(san.embeddings, dtype=np.float64)
    d = np.linalg.norm(emb - emb[x], axis=1)
    if san.mechanism == "santext":
        out = ~np.array([t == "<unk>" for t in san.vocab])
    else:
        out = np.asarray(san.sensitive) & ~np.array([t == "<unk>" for t in san.vocab])
    logw = np.where(out, -san.epsilon * d / 2, -np.inf)
    logp = logw - logsumexp(logw[out])
    if san.mechanism == "santext+" and not san.sensitive[x]:
        logp = logp + math.log(san.p)
        logp[x] = math.log1p(-san.p)
    return logp


def max_rel_error(logp, ref):
    finite = np.isfinite(ref)
    assert (np.isfinite(logp) == finite).all(), "support differs from the formula"
    return float(np.max(np.abs(np.expm1(logp[finite] - ref[finite]))))


def max_log_error(logp, ref):
    finite = np.isfinite(ref)
    return float(np.max(np.abs(logp[finite] - ref[finite])))


def assert_sampler_matches_formula(san, x: int, n: int) -> None:
    """n draws from row x against the float64 reference: no output of probability 0, chi-square
    (p > 1e-4) and total variation within 1.5× what sampling noise alone gives."""
    y = san.sample_ids(np.full(n, x))
    p = np.exp(reference_log_probs(san, x))
    counts = np.bincount(y, minlength=p.size)
    assert counts[p == 0].sum() == 0, "an output of probability 0 was produced"
    big = p * n >= 5
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(p[big], p[~big].sum()) * n
    keep = exp > 0
    assert stats.chisquare(obs[keep], exp[keep]).pvalue > 1e-4
    tv = 0.5 * np.abs(counts / n - p).sum()
    expected_tv = 0.5 * np.sum(np.sqrt(2 * p * (1 - p) / (np.pi * n)))  # sampling noise alone
    assert tv < 1.5 * expected_tv + 1e-3


@pytest.fixture(scope="module", params=[
    dict(mechanism="santext", epsilon=2.0, head_size=8),
    dict(mechanism="santext", epsilon=0.3, head_size=4, n=200, dim=16),
    dict(mechanism="santext+", epsilon=3.0, head_size=8, p=0.3, w=0.7),
    dict(mechanism="santext+", epsilon=25.0, head_size=16, p=0.05, w=0.5, n=120),
], ids=["santext-e2", "santext-e0.3-n200", "santext+-e3", "santext+-e25"])
def tiny(request, tmp_path_factory):
    path = build_tiny_bundle(tmp_path_factory.mktemp("b") / "t.ldpb", **request.param)
    return load_seeded(path)


def test_realised_distribution_equals_formula_for_every_row(tiny):
    rows = np.flatnonzero(tiny.valid_input)
    logp = tiny.log_probabilities(rows)
    worst = max(max_rel_error(logp[i], reference_log_probs(tiny, x)) for i, x in enumerate(rows))
    assert worst <= 1e-9
    assert worst <= tiny.tolerance  # the bundle's stated numeric tolerance holds as stated
    # τ is stated as a bound on |log P̂ - log P| (what the ratio slack exp(2τ) needs)
    worst_log = max(max_log_error(logp[i], reference_log_probs(tiny, x)) for i, x in enumerate(rows))
    assert worst_log <= tiny.tolerance


def test_manifest_states_a_tolerance_at_most_1e9(tiny):
    assert 0 < tiny.tolerance <= 1e-9


@pytest.mark.parametrize("backend", BACKENDS)
def test_sampler_realises_the_distribution_chi_square(tiny, backend, tmp_path):
    san = load_seeded(tiny._bundle.path, seed=11, backend=backend)
    n = 1_000_000
    rows = [int(np.flatnonzero(san.sensitive)[0]), int(np.flatnonzero(san.valid_input)[-1])]
    if san.mechanism == "santext+":
        rows.append(int(np.flatnonzero(san.valid_input & ~san.sensitive)[0]))
    for x in rows:
        assert_sampler_matches_formula(san, x, n)


def test_umldp_ratio_bound_holds_for_all_pairs(tiny):
    """Pr[M(x)=y] ≤ exp(ε·d(x,x') + ε₀·[x, x' on different sides]) · Pr[M(x')=y] for all x, x' and
    all protected y (MLDP / UMLDP, Yue 2023, *Data Synthesis*, Def. 2.3.2/2.3.3), from the realised
    probabilities, with the stated slack exp(2·tolerance) and nothing more (the report's slack adds
    the checks' resolution)."""
    rows = np.flatnonzero(tiny.valid_input)
    logp = tiny.log_probabilities(rows)
    emb = np.asarray(tiny.embeddings, dtype=np.float64)[rows]
    d = np.linalg.norm(emb[:, None, :] - emb[None, :, :], axis=2)
    sens = tiny.sensitive[rows]
    if tiny.mechanism == "santext":
        protected = np.ones(logp.shape[1], dtype=bool)
        eps0 = np.zeros_like(d)
    else:
        protected = np.asarray(tiny.sensitive).copy()
        eps0 = np.where(sens[:, None] != sens[None, :], tiny.epsilon0, 0.0)
    lp = logp[:, protected]
    slack = 2 * tiny.tolerance
    # the report states what the checks confirm: τ plus their float64 resolution 0.5e-12·(1 + ε·D_max)
    assert tiny.privacy_report(1).ratio_slack == 2 * (tiny.tolerance + 0.5e-12 * (1 + tiny.epsilon * tiny.d_max))
    finite = np.isfinite(lp)
    assert (finite == finite[0]).all(), "some input cannot reach an output another input reaches"
    lp = lp[:, finite[0]]
    lhs = lp[:, None, :] - lp[None, :, :]          # log Pr[M(x)=y] - log Pr[M(x')=y]
    bound = (tiny.epsilon * d + eps0)[:, :, None] + slack
    assert np.all(lhs <= bound), "ratio bound violated"
    # and the bound is not vacuous here: some pair uses a good part of its budget
    assert np.max(lhs - bound + slack) > -0.5 * tiny.epsilon * d.max()


def test_unprotected_outputs_come_only_from_themselves(tiny):
    """UMLDP (ii): an output y ∈ V_N is produced only from x = y."""
    if tiny.mechanism != "santext+":
        pytest.skip("SanText has no unprotected outputs")
    rows = np.flatnonzero(tiny.valid_input)
    p = tiny.probabilities(rows)
    unprotected = np.flatnonzero(tiny.valid_input & ~tiny.sensitive)
    for y in unprotected:
        producers = rows[p[:, y] > 0]
        assert producers.tolist() == [y]
        assert p[rows == y, y][0] == pytest.approx(1 - tiny.p, rel=1e-12)


def test_tail_floor_is_a_lower_bound_of_every_tail_distance(tiny):
    a = tiny.tables
    emb = np.asarray(tiny.embeddings, dtype=np.float64)
    outs = np.asarray(tiny.outputs)
    for x in np.flatnonzero(tiny.valid_input):
        tail = np.setdiff1d(outs, a.head_ids[x])
        if tail.size == 0:
            continue
        d_ref = np.linalg.norm(emb[tail] - emb[x], axis=1)
        d_sampler = [tiny._table.distance(int(x), int(t)) for t in tail]
        assert d_ref.min() >= a.tail_floor[x]
        assert min(d_sampler) >= a.tail_floor[x]


def test_every_output_stays_reachable_in_the_sampler(tiny):
    """Every head slot and (when the tail is non-empty) the tail slot has positive proposal mass."""
    from ldptext.alias import realised_masses
    a = tiny.tables
    mass = realised_masses(a.alias_threshold, a.alias_index)
    rows = np.flatnonzero(tiny.valid_input)
    assert (mass[rows, :-1] > 0).all()
    if tiny.outputs.size > tiny.head_size:
        assert (mass[rows, -1] > 0).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_seeded_sampling_is_reproducible_and_unseeded_differs(tiny, backend):
    ids = np.tile(np.flatnonzero(tiny.valid_input), 50)
    a = load_seeded(tiny._bundle.path, seed=5, backend=backend).sample_ids(ids)
    b = load_seeded(tiny._bundle.path, seed=5, backend=backend).sample_ids(ids)
    assert np.array_equal(a, b)
    from ldptext.santext import Sanitizer
    c = Sanitizer.load(tiny._bundle.path, backend=backend, allow_weak_privacy=True).sample_ids(ids)
    d = Sanitizer.load(tiny._bundle.path, backend=backend, allow_weak_privacy=True).sample_ids(ids)
    assert not np.array_equal(c, d)


def test_sample_ids_rejects_ids_outside_the_domain(tiny):
    from ldptext.errors import InputError
    v = tiny.n_rows
    for bad in ([-1], [v], [0, v + 5]):
        with pytest.raises(InputError):
            tiny.sample_ids(np.array(bad))
    with pytest.raises(InputError):
        tiny.sample_ids(np.array([0.5]))
    assert tiny.sample_ids(np.array([], dtype=np.int64)).size == 0


def test_oov_words_never_pass_through_and_specials_never_output(tiny):
    text = "w1 zorblaxian w2 qwertyuiop w3"
    ids = tiny.tokenize(text)
    unk = tiny.vocab.index("<unk>")
    assert ids[1] == unk and ids[3] == unk
    for _ in range(200):
        out = tiny.sanitize(text).text.split()
        assert "zorblaxian" not in out and "qwertyuiop" not in out and "<unk>" not in out
        assert len(out) == 5  # token count is preserved (not hidden)
    y = tiny.sample_ids(np.full(20000, unk))
    assert unk not in set(y.tolist())


def test_sanitize_batch_keeps_order_and_reports(tiny):
    texts = ["w1 w2", "", "w3 w4 w5", "   "]
    res = tiny.sanitize_batch(texts)
    assert [r.n_tokens for r in res] == [2, 0, 3, 0]
    assert [len(r.text.split()) for r in res] == [2, 0, 3, 0]
    r = res[2].report
    assert r.epsilon == tiny.epsilon and r.n_tokens == 3
    # the ledger charge: the per-token metric ε summed over tokens, in the bundle's metric unit
    assert r.per_token_epsilon == tiny.epsilon
    assert r.document_epsilon == pytest.approx(3 * tiny.epsilon)
    assert r.ledger_unit == tiny.ledger_unit and r.ledger_unit.startswith("metric:")
    emb = np.asarray(tiny.embeddings, dtype=np.float64)[tiny.valid_input]
    true_dmax = max(np.linalg.norm(emb - e, axis=1).max() for e in emb)
    assert true_dmax <= tiny.d_max <= true_dmax * (1 + 1e-9)  # rounded outward, but tight
    if tiny.mechanism == "santext":  # ε·D_max is a true LDP level for SanText
        assert r.worst_case_token_epsilon == pytest.approx(tiny.epsilon * true_dmax, rel=1e-9)
        assert r.worst_case_document_epsilon == pytest.approx(3 * tiny.epsilon * true_dmax, rel=1e-9)
    else:  # SanText+ has none: V_N words are released in the clear
        assert r.worst_case_token_epsilon is None and r.worst_case_document_epsilon is None
        assert "clear" in r.worst_case_note and "1 - p" in r.worst_case_note
    assert r.seeded is True


def test_ledger_is_charged_before_output_and_refuses_over_budget(tiny, tmp_path):
    import os
    from ldptext.errors import BudgetExceededError
    from ldptext.ledger import Ledger
    per_token = tiny.epsilon  # the per-token metric ε, in the bundle's metric unit
    ledger = Ledger(tmp_path / "l.ledger", budget=5.5 * per_token, key=os.urandom(32),
                    unit=tiny.ledger_unit)
    san = load_seeded(tiny._bundle.path, ledger=ledger)
    res = san.sanitize_batch(["w1 w2", "w3 w4 w5"])
    assert [r.n_tokens for r in res] == [2, 3]
    assert ledger.spent()[0] == pytest.approx(5 * per_token)
    with pytest.raises(BudgetExceededError):
        san.sanitize("w1")  # 6 tokens would exceed 5.5
    with pytest.raises(BudgetExceededError):
        san.sample_ids(np.array([1]))
    assert ledger.spent()[0] == pytest.approx(5 * per_token)  # refused releases cost nothing
    assert san.sanitize("").n_tokens == 0  # an empty release costs nothing and is allowed


@pytest.mark.parametrize("dim", [7, 16, 50, 384])
def test_native_distance_is_bitwise_the_documented_formula(tmp_path, dim):
    """The sampler's distance (SIMD integer dot product) equals the numpy mirror bit for bit, for
    dimensions on and off the 16-code vector width."""
    from ldptext._fallback import metric_distances
    san = load_seeded(build_tiny_bundle(tmp_path / "d.ldpb", n=30, dim=dim, head_size=4))
    a = san.tables
    xs, ys = np.meshgrid(np.arange(san.n_rows), np.arange(san.n_rows))
    ref = metric_distances(a.emb_q, a.emb_scale, a.emb_sqnorm, xs.ravel(), ys.ravel())
    got = np.array([san._table.distance(int(x), int(y)) for x, y in zip(xs.ravel(), ys.ravel())])
    assert np.array_equal(got, ref)
    exact = np.linalg.norm(san.embeddings[xs.ravel()] - san.embeddings[ys.ravel()], axis=1)
    assert np.allclose(got, exact, rtol=1e-12, atol=1e-7)


@pytest.mark.parametrize("backend", BACKENDS)
def test_forked_child_sanitizes_with_a_different_stream(tiny, backend):
    """A Sanitizer loaded before fork() must not give the child the parent's random stream."""
    import os
    from ldptext.santext import Sanitizer
    san = Sanitizer.load(tiny._bundle.path, backend=backend, allow_weak_privacy=True)
    ids = np.tile(np.flatnonzero(tiny.valid_input), 20)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.write(w, san.sample_ids(ids).astype(np.int32).tobytes())
        os._exit(0)
    os.close(w)
    data = b""
    while len(data) < ids.size * 4:
        chunk = os.read(r, 1 << 16)
        if not chunk:
            break
        data += chunk
    os.waitpid(pid, 0)
    child = np.frombuffer(data, dtype=np.int32)
    assert child.size == ids.size and not np.array_equal(child, san.sample_ids(ids))


def test_sanitizer_is_a_runtime_and_exposes_the_signer(tiny):
    from ldptext.runtime import Runtime
    assert isinstance(tiny, Runtime)
    assert tiny.key_id is not None and tiny.key_id == tiny._bundle.key_id
    assert tiny.per_token_epsilon == tiny.epsilon
    assert tiny.privacy_report(4).per_token_epsilon == tiny.per_token_epsilon


def test_a_kept_report_is_the_one_privacy_report_makes(tiny):
    """sanitize() reuses a document length's report from call to call (TokenRuntime._report): it is
    the report privacy_report gives, and a changed ledger unit is not answered from the old one."""
    docs = ["w1 w2 w3", "w4 w5 w6", "w7 w8 w9 w10"]
    results = [tiny.sanitize(d) for d in docs] + tiny.sanitize_batch(docs)
    for r in results:
        assert r.report == tiny.privacy_report(r.report.n_tokens)
    before = tiny.ledger_unit
    try:
        tiny._ledger_unit = "metric:other"  # what the setter stores, without its ledger check
        assert tiny.sanitize(docs[0]).report.ledger_unit == "metric:other"
    finally:
        tiny._ledger_unit = before
    assert tiny.sanitize(docs[0]).report.ledger_unit == before


def test_native_table_keywords_are_the_schema_sampler_fields():
    """The C constructor's keyword list (native/module.c) is the one the schema builds."""
    from ldptext import _native
    from ldptext.santext_tables import SAMPLER_KEYWORDS
    assert _native.SANTEXT_TABLE_KEYWORDS == SAMPLER_KEYWORDS


def test_bundle_stores_exactly_the_schema_arrays(tiny):
    from ldptext.bundle import BLOB_PREFIX
    from ldptext.santext_tables import STORED_ARRAYS
    names = {n for n in tiny.manifest["arrays"] if not n.startswith(BLOB_PREFIX)}
    assert names == set(STORED_ARRAYS)


def _corruptions(t):
    """(name, mutate) pairs: each breaks one rule of the schema."""
    k = t.head_size

    def with_(name, fn):
        a = {n: np.array(v) for n, v in t.stored_arrays().items()}
        a[name] = fn(a[name])
        return a

    def first_row(fn):
        def f(x):
            fn(x)
            return x
        return f
    return [
        with_("emb_scale", lambda x: x.astype(np.float64)),               # dtype
        with_("tail_floor", lambda x: x[:-1]),                              # shape
        with_("alias_index", lambda x: x[:, :k]),                           # shape (K+1 slots)
        with_("outputs", lambda x: x[::-1].copy()),                         # not increasing
        with_("head_ids", first_row(lambda x: x.__setitem__((0, 0), t.n_rows))),  # out of range
        with_("head_ids", lambda x: np.negative(x.astype(np.int32))),       # negative (int32)
        with_("head_ids", lambda x: x.astype(np.int64)),                    # dtype (neither)
        with_("alias_index", lambda x: x.astype(np.int32)),                 # dtype (neither)
        with_("alias_index", first_row(lambda x: x.__setitem__((0, 0), k + 1))),
        with_("accept_gamma", first_row(lambda x: x.__setitem__((0, 0), -1.0))),
        with_("accept_gamma", lambda x: x + 1.0),                           # not normalised
        with_("tail_floor", first_row(lambda x: x.__setitem__(0, np.nan))),
        with_("valid_input", lambda x: np.zeros_like(x)),                   # outputs not inputs
    ]


def test_schema_refuses_inconsistent_tables(tiny):
    from ldptext.errors import BundleIntegrityError
    from ldptext.santext_tables import SanTextTables
    SanTextTables(**tiny.tables.stored_arrays())  # the bundle's own tables pass
    for arrays in _corruptions(tiny.tables):
        with pytest.raises(BundleIntegrityError):
            SanTextTables(**arrays)


def test_signed_but_inconsistent_bundle_is_refused_on_load(tmp_path):
    """Semantic checks beyond the signed hashes: a validly signed SanText bundle that keeps tokens
    in the clear, or whose manifest head size disagrees with its arrays, is refused."""
    from ldptext.errors import BundleIntegrityError
    san = load_seeded(build_tiny_bundle(tmp_path / "g.ldpb", n=30, head_size=4))
    manifest = bundle_manifest(san)
    arrays = san.tables.stored_arrays()
    bad_keep = dict(arrays, keep_row=np.ones_like(arrays["keep_row"]))
    bad_k = dict(manifest, params=dict(manifest["params"], head_size=5))
    for i, (a, m) in enumerate([(bad_keep, manifest), (arrays, bad_k)]):
        path = rewrite_bundle(san, tmp_path / f"bad{i}.ldpb", a, m)
        with pytest.raises(BundleIntegrityError):
            load_seeded(path)


def test_gamma_float32_reports_its_exact_rounding():
    from ldptext.santext_tables import gamma_float32
    g = np.array([[0.0, 1e-7, 0.1, 1.3], [2.5e-9, 0.0, 46.5, 3.0]])
    rounded, change = gamma_float32(g)
    assert rounded.dtype == np.float32 and (rounded.min(axis=1) == 0).all()
    # independent: each float32 value's distance from the float64 one, in exact rationals
    from fractions import Fraction
    exact = max(abs(Fraction(float(r)) - Fraction(float(x))) for r, x in zip(rounded.ravel(), g.ravel()))
    assert change == float(exact) and 0 < change <= 46.5 * 2.0 ** -24


@pytest.mark.parametrize("kw, gamma32", [
    (dict(mechanism="santext", epsilon=2.0), True),
    (dict(mechanism="santext+", epsilon=25.0, head_size=16, p=0.05, w=0.5, n=120), False),
])
def test_compact_bundle_stores_narrow_arrays_and_samples_like_the_wide_one(tmp_path, kw, gamma32):
    """Precompute stores head ids as uint16 (V <= 65,536), alias slots as uint8 (K + 1 <= 256) and
    the exponents as float32 only when their rounding is within GAMMA32_MAX_ROUNDING (here: a
    small-ε bundle yes; ε = 25, whose far head slots carry exponents up to ~40, no). The same
    tables written wide load to equal arrays and give the same seeded outputs on every backend."""
    from ldptext_precompute.santext.build import GAMMA32_MAX_ROUNDING
    path = build_tiny_bundle(tmp_path / "c.ldpb", **kw)
    san = load_seeded(path)
    dtypes = {n: san._bundle.array(n).dtype for n in ("head_ids", "alias_index", "accept_gamma")}
    assert dtypes == {"head_ids": np.uint16, "alias_index": np.uint8,
                      "accept_gamma": np.float32 if gamma32 else np.float64}
    assert san.tables.gamma_is_float32 == gamma32
    if not gamma32:  # the reason: float32 would move some exponent by more than the budget
        g = san.tables.accept_gamma
        assert np.abs(g.astype(np.float32).astype(np.float64) - g).max() > GAMMA32_MAX_ROUNDING
    wide = {n: a.astype(np.int32 if n == "head_ids" else np.uint16 if n == "alias_index" else a.dtype)
            for n, a in san.tables.stored_arrays().items()}
    wide["accept_gamma"] = san.tables.accept_gamma  # float64 holding the same values
    wide_path = rewrite_bundle(san, tmp_path / "w.ldpb", wide)
    assert wide_path.stat().st_size > path.stat().st_size
    rows = np.resize(np.flatnonzero(san.valid_input), 3000).astype(np.int32)
    for backend in ("auto", "fallback"):
        a, b = load_seeded(path, seed=5, backend=backend), load_seeded(wide_path, seed=5, backend=backend)
        for name in ("head_ids", "alias_index", "accept_gamma"):
            x, y = getattr(a.tables, name), getattr(b.tables, name)
            assert x.dtype == y.dtype and np.array_equal(x, y)
        assert np.array_equal(a.sample_ids(rows), b.sample_ids(rows))


class _FailingTokenizer:
    """Stands in for the bundle's ``tokenizers.Tokenizer``: fails on any piece holding the marker."""

    def __init__(self, inner, marker):
        self.inner, self.marker = inner, marker

    def encode_batch_fast(self, pieces, add_special_tokens=False):
        if any(self.marker in p for p in pieces):
            raise RuntimeError(f"cannot encode {pieces}")  # a library message that quotes the text
        return self.inner.encode_batch(pieces, add_special_tokens=add_special_tokens)

    encode_batch = encode_batch_fast


def test_batch_errors_name_the_document_index_never_the_text(tiny, monkeypatch):
    from ldptext.errors import InputError
    marker = "SECRETMARKER7f3a"
    with pytest.raises(InputError) as e:
        tiny.sanitize_batch(["w1", "w2 w3", 3, "w4"])
    assert str(e.value) == "document 2 is int, not str"
    # the failures below are injected into the Hugging Face tokenizer, which the numpy fallback
    # uses (libldptext's own errors, the same messages: tests/test_santext_native.py)
    tiny = load_seeded(tiny._bundle.path, backend="fallback")
    monkeypatch.setattr(tiny.tokenizer, "_tok", _FailingTokenizer(tiny.tokenizer._tok, marker))
    with pytest.raises(InputError) as e:
        tiny.sanitize_batch(["w1", "w2", f"w3 {marker}", "w4"])
    assert str(e.value) == "document 2 could not be tokenized" and marker not in repr(e.value)
    monkeypatch.undo()
    # a token id the tokenizer produces but the bundle cannot sanitize (e.g. a literal "[MASK]" in a
    # WordPiece bundle): the document and the token position are named
    real = tiny.tokenizer.encode_batch
    bad_row = tiny.n_rows  # out of range

    def encode_batch(texts):
        ids = real(texts)
        ids[1] = np.append(ids[1], np.int32(bad_row))
        return ids
    monkeypatch.setattr(tiny.tokenizer, "encode_batch", encode_batch)
    with pytest.raises(InputError) as e:
        tiny.sanitize_batch(["w1 w2", "w3 w4", "w5"])
    assert str(e.value).startswith("document 1: token 2 is not a valid input")


@pytest.mark.parametrize("bad", [[10 ** 9], [0, -1], [1.5]])
def test_probabilities_of_an_id_outside_the_bundle_is_an_input_error(tmp_path_factory, bad):
    from conftest import build_tiny_bundle, load_seeded
    from ldptext.errors import InputError

    san = load_seeded(build_tiny_bundle(tmp_path_factory.mktemp("ids") / "b.ldpb", n=30))
    with pytest.raises(InputError, match="position|integers") as e:
        san.probabilities(bad)
    assert "1000000000" not in str(e.value)  # the position is named, never the id
