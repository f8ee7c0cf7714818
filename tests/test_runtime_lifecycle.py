"""Both runtimes' lifecycle (``ldptext.runtime.Closable``) and loading from bytes: ``close()`` and
``with`` release the memory map and the ONNX sessions, use after close raises ``ClosedError``, and a
bundle given as bytes is verified as its file is and gives the same seeded output."""
from __future__ import annotations

import gc
import sys
import warnings

import numpy as np
import pytest

from conftest import build_tiny_bundle, load_seeded
from ldptext.errors import ClosedError
from ldptext.runtime import Closable, Runtime


@pytest.fixture(scope="module")
def santext_bundle(tmp_path_factory):
    return build_tiny_bundle(tmp_path_factory.mktemp("life") / "t.ldpb", n=40, mechanism="santext+")


def mapped(path) -> bool:
    with open("/proc/self/maps", encoding="utf-8") as f:
        return str(path) in f.read()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_with_block_releases_the_memory_map(santext_bundle):
    with load_seeded(santext_bundle) as san:
        assert mapped(santext_bundle) and not san.closed
        san.sanitize("w1 w2")
        _ = san.embeddings, san.vocab, san.tokenizer  # every lazily built view too
    gc.collect()
    assert san.closed and not mapped(santext_bundle)


def test_sanitizer_use_after_close_raises_closed_error(santext_bundle):
    san = load_seeded(santext_bundle)
    assert isinstance(san, Runtime) and isinstance(san, Closable)
    san.close()
    san.close()  # idempotent
    for use in (lambda: san.sanitize("w1"), lambda: san.sanitize_batch(["w1"]), lambda: san.sample_ids([1]),
                lambda: san.tokenize("w1"), lambda: san.detokenize([1]), lambda: san.probabilities([1]),
                lambda: san.log_probabilities([1]), lambda: san.outputs, lambda: san.tables, lambda: san.vocab,
                lambda: san.embeddings, lambda: san.tokenizer, lambda: san.sensitive, lambda: san.__enter__()):
        with pytest.raises(ClosedError, match="this Sanitizer is closed"):
            use()
    # the verified metadata stays readable
    assert san.mechanism == "santext+" and san.epsilon == 2.0 and san.key_id and san.manifest["params"]
    with pytest.raises(AttributeError):
        san.no_such_attribute


def test_bytes_and_path_loads_give_the_same_seeded_output(santext_bundle):
    data = santext_bundle.read_bytes()
    texts = [f"w{i} w{(i * 7) % 40} zorblax" for i in range(50)]
    with load_seeded(santext_bundle, seed=11) as a, load_seeded(data, seed=11) as b, \
            load_seeded(memoryview(bytearray(data)), seed=11) as c:
        assert a.manifest == b.manifest == c.manifest and a.key_id == b.key_id == c.key_id
        out = [r.text for r in a.sanitize_batch(texts)]
        assert out == [r.text for r in b.sanitize_batch(texts)] == [r.text for r in c.sanitize_batch(texts)]
        np.testing.assert_array_equal(a.probabilities([1, 2]), b.probabilities([1, 2]))


def test_tampered_bytes_are_refused_by_the_sanitizer_like_the_file(santext_bundle, tmp_path):
    from ldptext.errors import BundleError
    from ldptext.santext import Sanitizer
    data = bytearray(santext_bundle.read_bytes())
    data[len(data) // 2] ^= 0x10
    bad = tmp_path / "bad.ldpb"
    bad.write_bytes(bytes(data))
    with pytest.raises(BundleError) as from_file:
        Sanitizer.load(bad)
    with pytest.raises(BundleError) as from_bytes:
        Sanitizer.load(bytes(data))
    assert type(from_file.value) is type(from_bytes.value) and str(from_file.value) == str(from_bytes.value)


# ---- DP-BART --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dpbart_bundle(tmp_path_factory):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("transformers")
    from conftest_dpbart import build_tiny_bundle as build_dpbart, single_thread_torch

    with single_thread_torch():
        path, _, _ = build_dpbart(tmp_path_factory.mktemp("life_dpbart") / "d.ldpb", quantize=None, prune_rounds=1)
    return path


def load_rewriter(source, seed=0):
    from ldptext.bundle import UnsignedBundleWarning
    from ldptext.dpbart import Rewriter
    from ldptext.rng import SeededModeWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        warnings.simplefilter("ignore", UnsignedBundleWarning)
        return Rewriter.load(source, allow_unsigned=True, seed=seed, threads=1)


def test_rewriter_closes_and_loads_from_bytes(dpbart_bundle):
    texts = ["the cat sat on the mat", "a dog ran to the house"]
    with load_rewriter(dpbart_bundle, seed=4) as a, load_rewriter(dpbart_bundle.read_bytes(), seed=4) as b:
        assert a.manifest == b.manifest
        ra = a.rewrite_batch(texts, epsilon=50.0, delta=1e-5)
        rb = b.rewrite_batch(texts, epsilon=50.0, delta=1e-5)
        assert [r.text for r in ra] == [r.text for r in rb]
    assert a.closed and b.closed
    for use in (lambda: a.rewrite("the cat", epsilon=5.0, delta=1e-5), lambda: a.tokenizer,
                lambda: a.rewrite_batch(["the cat"], epsilon=5.0, delta=1e-5)):
        with pytest.raises(ClosedError, match="this Rewriter is closed"):
            use()
    assert a.mechanism == "dpbart" and a.seq_len == 10
