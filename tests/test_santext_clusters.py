"""Tail clusters (santext_tables ``tail_cluster`` / ``cluster_gamma``, native/santext_sampler.h): the
two-trial tail acceptance leaves the distribution exactly as the formula, every stored bound holds
for the sampler's own distance, a false bound is refused rather than sampled, and bundles without
clusters keep loading. References are computed here, independently (mpmath, float64 embeddings)."""
import re
from pathlib import Path

import mpmath
import numpy as np
import pytest

from conftest import build_tiny_bundle, load_seeded, rewrite_bundle
from test_santext import assert_sampler_matches_formula

ROOT = Path(__file__).resolve().parents[1]


def test_cluster_bounds_header_is_the_exact_first_trial():
    """KEEP[q] = ceil(2^32 e^(-q/32)) and 0 <= LOG[q] <= -ln(KEEP[q]/2^32) <= q/32, LOG within 2^-49."""
    keep, logs = _keep_table(), _log_table()
    assert len(keep) == len(logs) == 256
    mpmath.mp.prec = 200
    for q in range(256):
        exact_keep = mpmath.ceil(mpmath.ldexp(mpmath.exp(-mpmath.mpf(q) / 32), 32))
        assert keep[q] == int(exact_keep)
        true_log = -mpmath.log(mpmath.mpf(keep[q]) / 2**32)
        assert 0 <= logs[q] <= true_log <= mpmath.mpf(q) / 32
        assert true_log - logs[q] < mpmath.mpf(2) ** -49


@pytest.fixture(scope="module")
def clustered(tmp_path_factory):
    """A high-ε SanText+ bundle (most tail candidates refused) with 4 tail clusters."""
    path = build_tiny_bundle(tmp_path_factory.mktemp("c") / "c.ldpb", mechanism="santext+", epsilon=12.0,
                             head_size=4, p=0.3, w=0.6, n=150, dim=12, tail_clusters=4)
    return load_seeded(path)


def test_every_cluster_bound_holds_for_the_samplers_distance(clustered):
    t = clustered.tables
    assert t.cluster_gamma.shape[1] == 4
    assert (t.cluster_gamma > 0).mean() > 0.3, "the bounds must be non-trivial for this test to mean anything"
    half = clustered.epsilon / 2
    emb = np.asarray(clustered.embeddings, dtype=np.float64)
    for x in np.flatnonzero(t.valid_input):
        tail = np.setdiff1d(t.outputs, t.head_ids[x])
        d_sampler = np.array([clustered._table.distance(int(x), int(y)) for y in tail])
        d_ref = np.linalg.norm(emb[tail] - emb[x], axis=1)
        bound = t.cluster_gamma[x, t.tail_cluster[tail]] / 32.0
        # the sampler's second exponent (before adding γ_K) is never negative
        assert (half * (d_sampler - t.tail_floor[x]) - bound >= 0).all()
        assert (half * (d_ref - t.tail_floor[x]) - bound >= 0).all()


class _ExtensionTable:
    """The C extension's own sampler table (``_native.SantextTable``, used where libldptext does
    not take the bundle) behind the ``sample_ids`` of a Sanitizer, for the formula check."""

    def __init__(self, san, seed: int):
        from ldptext import _native
        self._san = san
        self._table = _native.SantextTable(**san.tables.sampler_arguments(epsilon=san.epsilon, p=san.p))
        self._g = _native.Generator(bytes([seed]) * 32, 0)

    def __getattr__(self, name):
        return getattr(self._san, name)

    def sample_ids(self, xs):
        xs = np.ascontiguousarray(xs, dtype=np.int32)
        ys = np.empty_like(xs)
        self._g.santext_sample(self._table, xs, ys)
        return ys


@pytest.mark.parametrize("backend", ["auto", "extension", "fallback"])
def test_clustered_sampler_realises_the_distribution_chi_square(clustered, backend):
    """Every sampler: libldptext (auto) and the extension's table draw tail candidates in cluster
    order (the id read only once its cluster's trial passed), the numpy fallback in id order."""
    from ldptext.alias import realised_masses
    if backend == "extension":
        san = _ExtensionTable(load_seeded(clustered._bundle.path, seed=3), seed=3)
    else:
        san = load_seeded(clustered._bundle.path, seed=3, backend=backend)
        assert san.backend == {"auto": "libldptext"}.get(backend, backend)
    t = san.tables
    share = realised_masses(t.alias_threshold, t.alias_index)[:, -1] / ((t.head_size + 1) * 2.0**32)
    # the rows whose tail is proposed most (the path the clusters change), and a typical one
    rows = [int(np.argmax(np.where(t.sensitive, share, -1))),
            int(np.argmax(np.where(t.valid_input & ~t.sensitive, share, -1))),
            int(np.flatnonzero(t.sensitive)[0])]
    assert share[rows[0]] > 0.2 and share[rows[1]] > 0.5
    assert (t.cluster_gamma[rows[:2]] > 0).any(axis=1).all()
    for x in rows:
        assert_sampler_matches_formula(san, x, 600_000)


def test_a_false_cluster_bound_is_refused_not_sampled(clustered):
    """A bound above some tail distance makes the second exponent negative: sampling stops with an
    error instead of drawing from a wrong distribution."""
    from ldptext import _native
    from ldptext.alias import realised_masses
    t = clustered.tables
    tail_share = realised_masses(t.alias_threshold, t.alias_index)[:, -1]
    x = int(np.argmax(np.where(t.sensitive, tail_share, -1)))  # the row proposing its tail most
    args = t.sampler_arguments(epsilon=clustered.epsilon, p=clustered.p)
    lying = t.cluster_gamma.copy()
    lying[x] = np.minimum(lying[x].astype(int) + 32, 255)  # one unit of exponent too much
    tail = np.setdiff1d(t.outputs, t.head_ids[x])
    d = np.array([clustered._table.distance(x, int(y)) for y in tail])
    second = clustered.epsilon / 2 * (d - t.tail_floor[x]) - lying[x, t.tail_cluster[tail]] / 32.0
    assert (second + t.accept_gamma[x, -1] < 0).any(), "the lie must be false somewhere"
    table = _native.SantextTable(**dict(args, cluster_gamma=lying))
    g = _native.Generator(bytes(32), 0)
    xs = np.full(200_000, x, np.int32)
    with pytest.raises(Exception, match="invariant|table"):
        g.santext_sample(table, xs, np.empty_like(xs))


def test_bundle_without_clusters_loads_as_one_cluster_and_samples_the_same(clustered, tmp_path):
    """An older bundle (no cluster arrays) is the plain tail: C = 1, all bounds 0; it gives the same
    seeded outputs as the same tables with explicit one-cluster arrays, on every backend, and its
    distribution is still the formula's."""
    arrays = clustered.tables.stored_arrays()
    plain = {k: v for k, v in arrays.items() if k not in ("tail_cluster", "cluster_gamma")}
    old = rewrite_bundle(clustered, tmp_path / "old.ldpb", plain)
    v = arrays["tail_cluster"].size
    one = rewrite_bundle(clustered, tmp_path / "one.ldpb", dict(plain, tail_cluster=np.zeros(v, np.uint8),
                                                         cluster_gamma=np.zeros((v, 1), np.uint8)))
    rows = np.resize(np.flatnonzero(clustered.valid_input), 5000).astype(np.int32)
    for backend in ("auto", "fallback"):
        a, b = load_seeded(old, seed=8, backend=backend), load_seeded(one, seed=8, backend=backend)
        assert a.tables.cluster_gamma.shape == (v, 1) and not a.tables.cluster_gamma.any()
        assert np.array_equal(a.sample_ids(rows), b.sample_ids(rows))
    san = load_seeded(old, seed=2)
    assert san.backend == "libldptext"
    assert_sampler_matches_formula(san, int(np.flatnonzero(san.sensitive)[0]), 300_000)


def test_cluster_arrays_come_together_and_ids_stay_below_c(clustered, tmp_path):
    from ldptext.errors import BundleFormatError, BundleIntegrityError
    arrays = clustered.tables.stored_arrays()
    half = {k: v for k, v in arrays.items() if k != "cluster_gamma"}
    with pytest.raises(BundleFormatError):  # Python and libldptext (LDP_E_MISSING_ARRAY) alike
        load_seeded(rewrite_bundle(clustered, tmp_path / "half.ldpb", half))
    bad = dict(arrays, tail_cluster=np.full_like(arrays["tail_cluster"], 4))  # C = 4
    with pytest.raises(BundleIntegrityError, match="cluster"):
        load_seeded(rewrite_bundle(clustered, tmp_path / "bad.ldpb", bad))
    with pytest.raises(BundleIntegrityError, match="cluster"):  # C = 0
        load_seeded(rewrite_bundle(clustered, tmp_path / "c0.ldpb", dict(
            arrays, tail_cluster=np.zeros_like(arrays["tail_cluster"]),
            cluster_gamma=np.zeros((arrays["tail_cluster"].size, 0), np.uint8))))


def test_tail_cluster_count_is_a_build_parameter(tmp_path):
    from ldptext.errors import ParameterError
    one = load_seeded(build_tiny_bundle(tmp_path / "one.ldpb", n=40, tail_clusters=1))
    assert one.tables.cluster_gamma.shape == (one.n_rows, 1) and not one.tables.cluster_gamma.any()
    with pytest.raises(ParameterError):
        build_tiny_bundle(tmp_path / "zero.ldpb", n=40, tail_clusters=0)
    with pytest.raises(ParameterError):
        build_tiny_bundle(tmp_path / "many.ldpb", n=40, tail_clusters=257)


def _keep_table() -> list[int]:
    """KEEP[q] of native/cluster_bounds.h."""
    text = (ROOT / "native" / "cluster_bounds.h").read_text()
    return [int(v) for v in re.findall(r"(\d+)u\b", text[text.index("LDP_CLUSTER_KEEP[256]"):
                                                          text.index("LDP_CLUSTER_LOG[256]")])]


def test_rows_that_skip_refused_rounds_are_those_the_rule_names(clustered):
    """A row skips its refused rounds (santext_sampler.c propose_skip) where its cluster trial refuses
    at least two of three tail positions on average, n_T 2^32 >= 3 S with S the sum of KEEP over the
    tail positions, and its head has mass; recomputed here in exact integers."""
    from ldptext import _native
    from ldptext.alias import realised_masses
    t = clustered.tables
    table = _native.SantextTable(**t.sampler_arguments(epsilon=clustered.epsilon, p=clustered.p))
    flags = np.frombuffer(table.skip_rows(), dtype=np.uint8)
    keep = _keep_table()
    tail_mass = realised_masses(t.alias_threshold, t.alias_index)[:, -1]
    expected = np.zeros(t.cluster_gamma.shape[0], dtype=np.uint8)
    for x in range(expected.size):
        tail = np.setdiff1d(t.outputs, t.head_ids[x])
        s = sum(keep[int(q)] for q in t.cluster_gamma[x, t.tail_cluster[tail]])
        head_mass = (t.head_size + 1) * 2**32 - int(tail_mass[x])
        expected[x] = int(tail_mass[x]) > 0 and head_mass > 0 and tail.size * 2**32 >= 3 * s
    assert np.array_equal(flags, expected)
    assert flags[t.valid_input].any() and not flags[t.valid_input].all()


@pytest.mark.parametrize("backend", ["auto", "extension"])
def test_rows_that_skip_refused_rounds_realise_the_distribution_chi_square(clustered, backend):
    """The skip path (the first success of the rounds decided at once, a kept tail candidate drawn by
    its cluster's weight) against the float64 formula, on libldptext and the extension's table: the
    skip rows whose tail is proposed most, sensitive and kept-or-sampled, and the one proposing it
    least."""
    from ldptext import _native
    from ldptext.alias import realised_masses
    t = clustered.tables
    flags = np.frombuffer(_native.SantextTable(**t.sampler_arguments(epsilon=clustered.epsilon, p=clustered.p))
                          .skip_rows(), dtype=np.uint8).astype(bool) & t.valid_input
    if backend == "extension":
        san = _ExtensionTable(load_seeded(clustered._bundle.path, seed=5), seed=5)
    else:
        san = load_seeded(clustered._bundle.path, seed=5, backend=backend)
        assert san.backend == "libldptext"
    share = realised_masses(t.alias_threshold, t.alias_index)[:, -1] / ((t.head_size + 1) * 2.0**32)
    rows = {int(np.argmax(np.where(flags & t.sensitive, share, -1))),
            int(np.argmax(np.where(flags & ~t.sensitive, share, -1))),
            int(np.argmin(np.where(flags, share, 2)))}
    assert all(flags[x] for x in rows) and len(rows) == 3
    for x in rows:
        assert_sampler_matches_formula(san, x, 600_000)


def _log_table() -> list[float]:
    """LOG[q] of native/cluster_bounds.h (exact: hexadecimal floats)."""
    text = (ROOT / "native" / "cluster_bounds.h").read_text()
    return [float.fromhex(v) for v in re.findall(r"-?0x[0-9a-f.]+p[-+]\d+", text[text.index("LDP_CLUSTER_LOG[256]"):])]


def _refined_table(clustered):
    """The extension's table over the clustered bundle, every valid row refined by its first draw."""
    from ldptext import _native
    t = clustered.tables
    table = _native.SantextTable(**t.sampler_arguments(epsilon=clustered.epsilon, p=clustered.p))
    xs = np.flatnonzero(t.valid_input).astype(np.int32)
    _native.Generator(bytes(32), 0).santext_sample(table, xs, np.empty_like(xs))
    return table


@pytest.fixture(scope="module")
def clustered_low(tmp_path_factory):
    """The same build at eps = 1, where a cell's nearest is seldom far above its cluster's."""
    path = build_tiny_bundle(tmp_path_factory.mktemp("c") / "c1.ldpb", mechanism="santext+", epsilon=1.0,
                             head_size=4, p=0.3, w=0.6, n=150, dim=12, tail_clusters=4)
    return load_seeded(path)


def test_refined_bounds_hold_and_are_each_cells_nearest(clustered, clustered_low):
    """Each cell (a part of one cluster) is bounded for a row by the largest q that keeps the
    sampler's second exponent (eps/2 (d - floor) - LOG[q]) + gamma_K >= 0 at the cell's nearest tail
    output (so at all of them), never below the cluster's bound; a row is refined (santext_sampler.h
    ldp_refine_row) exactly where its cells keep at most 3/4 of the weight its clusters keep
    (sum of N KEEP[q]), and then holds those bounds. Recomputed here from the sampler's distances and
    cluster_bounds.h; some rows are refined (eps = 12), some not (eps = 1), and some bound rises above
    its cluster's."""
    counts = [_refinement_as_recomputed(b) for b in (clustered, clustered_low)]
    assert counts[0][0] > 0 and counts[0][1] > 0
    assert counts[1][0] < clustered_low.tables.valid_input.sum()


def _refinement_as_recomputed(bundle) -> tuple[int, int]:
    """Rows refined and bounds raised, every row's verdict and bounds checked against a recomputation."""
    t = bundle.tables
    table, logs, keep, half = _refined_table(bundle), _log_table(), _keep_table(), bundle.epsilon / 2
    refined = raised = 0
    for x in np.flatnonzero(t.valid_input):
        got = table.refined(int(x))
        cells = np.asarray(got[1]) if got is not None else None
        if cells is None:  # the cells of the outputs, from any refined row
            cells = next(np.asarray(table.refined(int(z))[1]) for z in np.flatnonzero(t.valid_input)
                         if table.refined(int(z)) is not None)
        assert np.array_equal(cells // 8, t.tail_cluster[t.outputs])
        tail = ~np.isin(t.outputs, t.head_ids[x])
        expected, fine, coarse = [], 0, 0
        for c in range(8 * t.cluster_gamma.shape[1]):
            base, n = int(t.cluster_gamma[x, c // 8]), int((cells == c).sum())
            members, q = t.outputs[(cells == c) & tail], base
            if members.size:
                d = min(bundle._table.distance(int(x), int(y)) for y in members)

                def holds(qq: int) -> bool:
                    return (half * (d - t.tail_floor[x]) - logs[qq]) + t.accept_gamma[x, -1] >= 0.0

                assert holds(base)
                while q < 255 and holds(q + 1):
                    q += 1
            expected.append(q)
            fine, coarse = fine + n * keep[q], coarse + n * keep[base]
        assert (got is not None) == (fine <= coarse // 4 * 3), x
        if got is not None:
            assert np.frombuffer(got[0], np.uint8).tolist() == expected
            refined += 1
            raised += sum(q > int(t.cluster_gamma[x, c // 8]) for c, q in enumerate(expected))
    return refined, raised


@pytest.mark.parametrize("backend", ["auto", "extension"])
def test_refined_rows_realise_the_distribution_chi_square(clustered, backend):
    """Rows whose cells' bounds rise above their clusters' against the float64 formula, on libldptext
    (its row check refines a row before its first draw) and on the extension's table (its first draw
    refines): a row that skips its refused rounds under the refined bounds and one that keeps them."""
    from ldptext.alias import realised_masses
    t = clustered.tables
    table = _refined_table(clustered)
    share = realised_masses(t.alias_threshold, t.alias_index)[:, -1] / ((t.head_size + 1) * 2.0**32)
    by_skip: dict[int, int] = {}
    for x in np.argsort(-np.where(t.valid_input, share, -1)):
        if not t.valid_input[x]:
            break
        got = table.refined(int(x))
        if got is not None and (np.frombuffer(got[0], np.uint8) > np.repeat(t.cluster_gamma[x], 8)).any():
            by_skip.setdefault(got[2], int(x))
    assert set(by_skip) == {0, 1}
    if backend == "extension":
        san = _ExtensionTable(load_seeded(clustered._bundle.path, seed=7), seed=7)
    else:
        san = load_seeded(clustered._bundle.path, seed=7, backend=backend)
        assert san.backend == "libldptext"
    for x in by_skip.values():
        assert_sampler_matches_formula(san, x, 600_000)
