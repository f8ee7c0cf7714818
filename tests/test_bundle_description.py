"""A manifest's descriptive numbers are derived and checked, not trusted: ``vocab.size``, ``outputs``,
``sensitive``, ``non_sensitive`` and ``kept_in_clear`` must be the tables' counts and ``privacy.notion``
the mechanism's (or the spelling older bundles use), in the Python SDK and in libldptext alike, so that
``bundle inspect`` and the reports never show a number the tables contradict."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import build_tiny_bundle, edited_bundle, random_word_embeddings
from test_libldptext import OK, clib, dev_key  # noqa: F401 (fixtures)

from ldptext import keys, registry
from ldptext.errors import ParameterMismatchError
from ldptext.rng import SeededModeWarning
from ldptext.runtime import load_token_runtime

E_PARAMETER_MISMATCH = -100


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    from ldptext_precompute.custext.build import build_custext_bundle
    d = tmp_path_factory.mktemp("description")
    stop = d / "stop.txt"
    stop.write_text("w0\nw1\nw2\nw7\n")
    return {
        "santext+": build_tiny_bundle(d / "sp.ldpb", mechanism="santext+", p=0.3, w=0.7),
        "custext+": build_custext_bundle(d / "cp.ldpb", embeddings="unused", loaded=random_word_embeddings(47, 5, 8),
                                         epsilon=1.5, k=4, mechanism="custext+", non_sensitive=str(stop),
                                         similarity="cosine", device="cpu", sign_key=keys.developer_key()),
    }


def _python(path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        with load_token_runtime(path, seed=0):
            pass


EDITS = [
    ("santext+", lambda m: m["vocab"].update(size=m["vocab"]["size"] + 1)),
    ("santext+", lambda m: m["vocab"].update(outputs=m["vocab"]["outputs"] - 1)),
    ("santext+", lambda m: m["vocab"].update(sensitive=0)),
    ("santext+", lambda m: m["vocab"].update(non_sensitive=0)),   # "nothing is kept in the clear"
    ("santext+", lambda m: m["privacy"].update(notion="metric-LDP")),  # SanText+ is UMLDP
    ("custext+", lambda m: m["vocab"].update(kept_in_clear=0)),   # the audit's CusText+ with 0 stated
    ("custext+", lambda m: m["privacy"].update(notion="metric-LDP")),
]


@pytest.mark.parametrize("case", range(len(EDITS)))
def test_a_misdescribed_bundle_is_refused_by_python_and_c(clib, dev_key, bundles, tmp_path, case):  # noqa: F811
    mechanism, edit = EDITS[case]
    bad = edited_bundle(bundles[mechanism], tmp_path / "bad.ldpb", edit, sign_key=keys.developer_key())
    with pytest.raises(ParameterMismatchError, match="vocab|notion"):
        _python(bad)
    rc, _ = clib.open(bad, [dev_key])
    assert rc == E_PARAMETER_MISMATCH, clib.strerror(rc)


def test_the_stated_description_is_the_tables(clib, dev_key, bundles, tmp_path):  # noqa: F811
    """The builders' numbers are right (both runtimes open them), and the older spelling of a notion
    is still accepted where the statement names one."""
    from ldptext.bundle import open_unverified
    for mechanism, path in bundles.items():
        b, _ = open_unverified(path)
        assert b.manifest["privacy"]["notion"] == registry.get(mechanism).statement().notion
        kept = int(np.count_nonzero(np.asarray(b.arrays["keep_row"])))
        assert kept > 0 and kept in (b.manifest["vocab"].get("non_sensitive"), b.manifest["vocab"].get("kept_in_clear"))
        _python(path)
        rc, h = clib.open(path, [dev_key])
        assert rc == OK, clib.strerror(rc)
        clib.close(h)
    santext = build_tiny_bundle(tmp_path / "s.ldpb", mechanism="santext")
    old = edited_bundle(santext, tmp_path / "old.ldpb", lambda m: m["privacy"].update(notion="MLDP"),
                        sign_key=keys.developer_key())
    _python(old)
    rc, h = clib.open(old, [dev_key])
    assert rc == OK, clib.strerror(rc)
    clib.close(h)
