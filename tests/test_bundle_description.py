"""A manifest's descriptive numbers are derived and checked, not trusted (``ldptext.description``):
``vocab.size``, ``outputs``, ``sensitive``, ``non_sensitive``, ``kept_in_clear`` and ``dim`` must be the
tables' counts, ``vocab.kind`` the tokenizer's model, ``privacy.verbatim.inputs`` the rows the rates are
over, the counts of ``privacy.not_outputs`` the outputs a build left out, TEM's
``rows_with_far_outputs`` its far rows, ``sources.embeddings.vocab_size`` the source's words and
``privacy.notion`` the mechanism's (or the spelling older bundles use), in the Python SDK (on
libldptext and on the numpy fallback) and in libldptext alike, so that ``bundle inspect`` and the
reports never show a number the tables contradict."""
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
    from ldptext_precompute.tem.build import build_tem_bundle
    d = tmp_path_factory.mktemp("description")
    stop = d / "stop.txt"
    stop.write_text("w0\nw1\nw2\nw7\n")
    return {
        "santext+": build_tiny_bundle(d / "sp.ldpb", mechanism="santext+", p=0.3, w=0.7),
        "santext": build_tiny_bundle(d / "s.ldpb", mechanism="santext", epsilon=3.0, verbatim_cap="default"),
        "tem": build_tem_bundle(d / "t.ldpb", embeddings="unused", loaded=random_word_embeddings(47, 5, 8),
                                epsilon=3.0, beta=None, gamma=1.0, head_size=4, progress=False,
                                sign_key=keys.developer_key()),
        "custext+": build_custext_bundle(d / "cp.ldpb", embeddings="unused", loaded=random_word_embeddings(47, 5, 8),
                                         epsilon=1.5, k=4, mechanism="custext+", non_sensitive=str(stop),
                                         similarity="cosine", device="cpu", sign_key=keys.developer_key()),
    }


def _python(path, backend: str = "auto") -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        if backend == "auto":
            with load_token_runtime(path, seed=0):
                pass
            return
        from ldptext.bundle import open_unverified
        mechanism = open_unverified(path)[0].mechanism
        with registry.get(mechanism).runtime_class().load(path, seed=0, backend=backend):
            pass


def _bump(*keys):
    """An edit adding 1 to the stated count at ``keys``."""
    def edit(m):
        node = m
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] += 1
    return edit


EDITS = [
    ("santext+", lambda m: m["vocab"].update(size=m["vocab"]["size"] + 1)),
    ("santext+", lambda m: m["vocab"].update(outputs=m["vocab"]["outputs"] - 1)),
    ("santext+", lambda m: m["vocab"].update(sensitive=0)),
    ("santext+", lambda m: m["vocab"].update(non_sensitive=0)),   # "nothing is kept in the clear"
    ("santext+", lambda m: m["privacy"].update(notion="metric-LDP")),  # SanText+ is UMLDP
    ("custext+", lambda m: m["vocab"].update(kept_in_clear=0)),   # the audit's CusText+ with 0 stated
    ("custext+", lambda m: m["privacy"].update(notion="metric-LDP")),
    ("santext", lambda m: m["vocab"].update(dim=300)),
    ("santext", lambda m: m["vocab"].update(kind="wordpiece")),  # over a word-level tokenizer
    ("santext", _bump("privacy", "verbatim", "inputs")),
    ("santext+", lambda m: m["privacy"]["verbatim"].update(inputs=m["vocab"]["size"])),  # V, not V_S
    ("santext", _bump("privacy", "not_outputs", "above_verbatim_cap")),
    ("santext", lambda m: m["privacy"]["not_outputs"].update(not_read_back=1)),
    ("santext", _bump("sources", "embeddings", "vocab_size")),
    ("tem", lambda m: m["privacy"].update(rows_with_far_outputs=0)),
    ("tem", lambda m: m["vocab"].update(dim=4)),
    ("santext+", lambda m: m["params"].update(non_sensitive="function-words")),  # a frequency split
]


@pytest.mark.parametrize("case", range(len(EDITS)))
def test_a_misdescribed_bundle_is_refused_by_python_and_c(clib, dev_key, bundles, tmp_path, case):  # noqa: F811
    mechanism, edit = EDITS[case]
    bad = edited_bundle(bundles[mechanism], tmp_path / "bad.ldpb", edit, sign_key=keys.developer_key())
    for backend in ("auto", "fallback"):
        with pytest.raises(ParameterMismatchError):
            _python(bad, backend)
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
        if mechanism.endswith("+"):
            assert kept > 0 and kept in (b.manifest["vocab"].get("non_sensitive"),
                                         b.manifest["vocab"].get("kept_in_clear"))
        _python(path)
        _python(path, "fallback")
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
