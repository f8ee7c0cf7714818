"""Every row is checked before its first draw, in every runtime: a table wrong on one row only is
never sampled (ldptext.row_guard, native/lib/check.c).

Each crafted bundle is re-signed with a trusted key (what a misused signing key produces), so every
signature and hash check passes; only the tables are wrong, on one row. The load-time check reads a
sample of rows and usually misses it (a random row may hit it: then the load itself refuses), so
each case asserts the one property that must always hold: no output is ever drawn from the row,
and the first call that needs it refuses with a bundle error before any draw.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from conftest import build_tiny_bundle, edited_bundle
from ldptext import keys
from ldptext.errors import ParameterMismatchError
from ldptext.library import available
from ldptext.rng import SeededModeWarning
from ldptext.santext import Sanitizer

from test_libldptext import OK, clib, dev_key  # noqa: F401 (fixtures)

E_PARAMETER_MISMATCH = -100
BACKENDS = ["fallback"] + (["auto"] if available() else [])


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return build_tiny_bundle(tmp_path_factory.mktemp("rg") / "base.ldpb", n=120, mechanism="santext+",
                             epsilon=2.0, p=0.3, w=0.7)


def _victim(path) -> tuple[int, int]:
    """A sensitive input that is its own head output, not the largest-norm row (always checked at
    load), and its head slot."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        san = Sanitizer.load(path, seed=0, backend="fallback", allow_weak_privacy=True)
    t = san.tables
    norms = t.emb_scale.astype(float) * np.sqrt(t.emb_sqnorm.astype(float))
    sens = np.flatnonzero(t.valid_input & ~t.keep_row.astype(bool))
    sens = sens[np.argsort(norms[sens])]
    x = int(sens[sens.size // 2])
    slot = int(np.flatnonzero(t.stored("head_ids")[x] == x)[0])
    san.close()
    return x, slot


def _identity_row(x, slot):
    """Row x proposes only its own head slot, accepted with probability 1: P(x -> x) = 1."""
    def edit(arrays):
        arrays["alias_threshold"][x, :] = 0
        arrays["alias_threshold"][x, slot] = 0xFFFFFFFF
        arrays["alias_index"][x, :] = slot
        arrays["accept_gamma"][x, :] = 0.0
    return edit


def _tail_gamma_raised(x, slot):
    """Row x's tail is accepted e^-3 as often as its formula says: its head, x itself included, is
    released more often."""
    def edit(arrays):
        arrays["accept_gamma"][x, -1] += 3.0
    return edit


def _tail_floor_raised(x, slot):
    """Row x's tail floor above the distances of its tail: the second trial's exponent is negative
    for the near tail outputs (the sampler would refuse half-way through a document)."""
    def edit(arrays):
        arrays["tail_floor"][x] = arrays["tail_floor"][x] * 4.0 + 1.0
    return edit


CASES = {"identity row": _identity_row, "tail gamma raised": _tail_gamma_raised,
         "tail floor raised": _tail_floor_raised}


@pytest.fixture(scope="module")
def crafted(base, tmp_path_factory):
    d = tmp_path_factory.mktemp("crafted")
    x, slot = _victim(base)
    out = {}
    for name, make in CASES.items():
        out[name] = edited_bundle(base, d / f"{name.replace(' ', '_')}.ldpb", lambda m: None,
                                  make(x, slot), sign_key=keys.developer_key())
    return out, x


def _load(path, backend):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        return Sanitizer.load(path, seed=1, backend=backend, allow_weak_privacy=True)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(CASES))
def test_a_wrong_row_is_never_sampled(crafted, case, backend):
    paths, x = crafted
    try:
        san = _load(paths[case], backend)
    except ParameterMismatchError:
        return  # the load's random rows hit it: refused before any draw, as well
    with san:
        other = int(np.flatnonzero(san.valid_input & (np.arange(san.n_rows) != x))[0])
        assert san.sample_ids([other, other]).shape == (2,)  # other rows sample
        with pytest.raises(ParameterMismatchError, match="nothing was released"):
            san.sample_ids([other, x, other])
        word = san.vocab[x]
        with pytest.raises(ParameterMismatchError) as e:
            san.sanitize_batch([f"{san.vocab[other]} {word}"])
        assert word not in str(e.value) and str(x) not in str(e.value)  # no word or row id named
        with pytest.raises(ParameterMismatchError):  # the verdict is kept
            san.sample_ids([x])


@pytest.mark.parametrize("case", list(CASES))
def test_the_c_library_refuses_the_row_before_any_draw(clib, crafted, dev_key, case):  # noqa: F811
    paths, x = crafted
    rc, b = clib.open(paths[case], [dev_key])
    if rc == E_PARAMETER_MISMATCH:
        return  # refused at open (a random row hit it)
    assert rc == OK, clib.strerror(rc)
    s = clib.sanitizer(b, seed=0)
    try:
        rc, _ = clib.sample(s, [x])
        assert rc == E_PARAMETER_MISMATCH
        rc, _ = clib.sample(s, [x])
        assert rc == E_PARAMETER_MISMATCH
    finally:
        clib.free_sanitizer(s)
        clib.close(b)


def test_an_honest_bundle_passes_every_row(base):
    from ldptext.bundle import read_bundle
    from ldptext.bundle_check import check_parameters

    check_parameters(read_bundle(base), every_row=True)
    for backend in BACKENDS:
        with _load(base, backend) as san:
            rows = np.flatnonzero(san.valid_input)
            assert san.sample_ids(rows).shape == rows.shape


@pytest.mark.parametrize("case", list(CASES))
def test_bundle_sign_and_verify_full_check_every_row(crafted, case, tmp_path):
    from ldptext.bundle import read_bundle
    from ldptext.bundle_check import check_parameters, sign_bundle

    paths, _ = crafted
    with pytest.raises(ParameterMismatchError):
        check_parameters(read_bundle(paths[case]), every_row=True)
    with pytest.raises(ParameterMismatchError):
        sign_bundle(paths[case], keys.developer_key(), out=tmp_path / "signed.ldpb")
    assert not (tmp_path / "signed.ldpb").exists()


def test_python_row_check_agrees_with_the_formula_independently(base):
    """The Python row check's notion of "right" against an independent float64 evaluation of
    SanText's law from the int8 codes, row by row (not the runtime's own probabilities)."""
    with _load(base, "fallback") as san:
        t = san.tables
        vec = t.emb_scale.astype(np.float64)[:, None] * t.emb_q.astype(np.float64)
        outs = t.outputs.astype(np.int64)
        rows = np.flatnonzero(san.valid_input)[:20]
        realised = san.probabilities(rows)
        for i, x in enumerate(rows):
            w = np.exp(-san.epsilon / 2 * np.linalg.norm(vec[outs] - vec[x], axis=1))
            engine = realised[i, outs] / realised[i, outs].sum()  # before SanText+'s keep
            assert np.allclose(engine, w / w.sum(), rtol=1e-6, atol=0)
        assert san._row_laws_ok(rows).all()


@pytest.mark.skipif(not available(), reason="needs the C extension")
@pytest.mark.parametrize("case", list(CASES))
def test_rows_checked_together_get_the_verdicts_of_rows_checked_alone(crafted, case):
    """libldptext checks a call's new rows together, up to 32 per pass over the outputs
    (native/lib/check.c check_engine_rows): the wrong row is found wherever it falls in a block,
    and the rows beside it get the verdict they get alone."""
    paths, x = crafted
    try:
        alone = _load(paths[case], "auto")
    except ParameterMismatchError:
        return  # refused at open (a random row hit it)
    with alone:
        rows = np.flatnonzero(alone.valid_input)
        verdicts = [alone._library.check_rows(int(r), 1) for r in rows]
        assert [int(r) for r, v in zip(rows, verdicts) if v >= 0] == [x]
    for first in (0, max(0, x - 31), x, max(0, x - 7)):
        with _load(paths[case], "auto") as san:
            assert san._library.check_rows(first, san.n_rows) == (x if first <= x else -1)
    with _load(paths[case], "auto") as san:  # one call with the row among 100 others: refused
        others = rows[rows != x][:100]
        with pytest.raises(ParameterMismatchError):
            san.sample_ids(np.insert(others, 50, x))
        assert san.sample_ids(others).shape == others.shape  # each of the others checked right
