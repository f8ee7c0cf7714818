"""Precompute of SanText bundles: the neighbour search (torch path and numpy path agree, the tail
floor is a rigorous bound), user embedding files, and the bundle's manifest."""

import numpy as np
import pytest

from conftest import build_tiny_bundle, load_seeded, random_word_embeddings
from ldptext_precompute.santext.clusters import DEFAULT_CLUSTERS, default_clusters
from ldptext_precompute.santext.knn import compute_neighbours, exact_distances
from ldptext_precompute.santext.build import dequantize, quantize_int8


def test_torch_and_numpy_neighbour_search_agree():
    pytest.importorskip("torch")
    emb = random_word_embeddings(300, 12, seed=3)
    vec = dequantize(*quantize_int8(emb.vectors))
    outputs = np.flatnonzero(~emb.special)
    a = compute_neighbours(vec, outputs, emb.valid_input, 16, device="numpy", block=64)
    b = compute_neighbours(vec, outputs, emb.valid_input, 16, device="cpu", block=100)
    assert b.backend == "torch-cpu" and a.backend == "numpy"
    assert np.array_equal(a.head_ids, b.head_ids)
    assert np.allclose(a.tail_floor, b.tail_floor, rtol=1e-12, atol=1e-12)
    assert a.d_max == pytest.approx(b.d_max, rel=1e-12)
    # the tail clusters and their per-row bounds (the GPU path's scatter and slice minima)
    assert np.array_equal(a.tail_cluster, b.tail_cluster) and a.cluster_floor.shape == (vec.shape[0], DEFAULT_CLUSTERS)
    assert np.allclose(a.cluster_floor, b.cluster_floor, rtol=1e-12, atol=1e-12)


def test_default_clusters_grow_with_the_output_domain():
    # 64 per 32,768 outputs begun, at most 256: MiniLM's output domains keep 64, GloVe-50k's 128
    assert [default_clusters(n) for n in (1, 26_571, 29_355, 32_768)] == [64] * 4
    assert [default_clusters(n) for n in (32_769, 45_000, 65_536, 65_537)] == [128, 128, 128, 192]
    assert default_clusters(400_000) == 256


def test_tail_floor_bounds_all_tail_distances_even_with_near_ties():
    rng = np.random.default_rng(0)
    base = rng.normal(size=(1, 32))
    vec = np.repeat(base, 120, axis=0) + rng.normal(size=(120, 32)) * 1e-7  # nearly equal points
    vec = dequantize(*quantize_int8(vec))
    outputs = np.arange(120)
    nb = compute_neighbours(vec, outputs, np.ones(120, bool), 8, n_clusters=5, device="numpy")
    assert len(np.unique(nb.tail_cluster[outputs])) >= 3  # (k-means may leave a cluster empty)
    for x in range(120):
        tail = np.setdiff1d(outputs, nb.head_ids[x])
        d = exact_distances(vec, np.array([x]), tail[None, :])[0]
        assert d.min() >= nb.tail_floor[x]
        # each cluster's bound holds for every tail member of it (inf where it has none)
        for c in range(5):
            members = nb.tail_cluster[tail] == c
            assert (d[members] >= nb.cluster_floor[x, c]).all()
            assert members.any() or nb.cluster_floor[x, c] == np.inf
            assert not members.any() or nb.cluster_floor[x, c] >= nb.tail_floor[x]


def test_quantized_metric_is_exact_in_float64():
    emb = random_word_embeddings(50, 20, seed=1)
    q, s = quantize_int8(emb.vectors)
    deq = dequantize(q, s)
    assert np.abs(deq - emb.vectors).max() <= np.abs(emb.vectors).max() / 127
    # float32 scale × int8 code is exactly representable: recomputing gives identical bits
    assert np.array_equal(deq, s.astype(np.float64)[:, None] * q.astype(np.float64))


def test_glove_text_and_npy_files_build_bundles(tmp_path):
    from ldptext_precompute.santext.build import build_santext_bundle
    emb = random_word_embeddings(30, 6, seed=2)
    words = emb.vocab[:-1]
    txt = tmp_path / "vectors.txt"
    txt.write_text("".join(w + " " + " ".join(f"{v:.6f}" for v in emb.vectors[i]) + "\n"
                           for i, w in enumerate(words)), encoding="utf-8")
    np.save(tmp_path / "vectors.npy", emb.vectors[:-1])
    (tmp_path / "vectors.vocab").write_text("\n".join(words) + "\n", encoding="utf-8")
    for src in (txt, tmp_path / "vectors.npy"):
        out = build_santext_bundle(tmp_path / f"{src.suffix}.ldpb", embeddings=str(src),
                                   epsilon=1.0, mechanism="santext", head_size=4, progress=False)
        san = load_seeded(out)
        assert san.vocab == words + ["<unk>"]
        assert len(san.sanitize("w1 w2 unknownword").text.split()) == 3


def test_bad_embedding_files_give_clear_errors(tmp_path):
    from ldptext.errors import ParameterError
    from ldptext_precompute.santext.embeddings import load_embeddings
    with pytest.raises(ParameterError, match="does not exist"):
        load_embeddings(str(tmp_path / "missing.txt"))
    bad = tmp_path / "bad.txt"
    bad.write_text("a 1 2\nb 1 x\n", encoding="utf-8")
    with pytest.raises(ParameterError, match="bad.txt:2"):
        load_embeddings(str(bad))
    with pytest.raises(ParameterError):
        load_embeddings("minilm-wordpiece", vocab_size=100)


def test_manifest_records_parameters_sources_and_privacy(tmp_path):
    path = build_tiny_bundle(tmp_path / "m.ldpb", mechanism="santext+", epsilon=2.5, p=0.25, w=0.8)
    san = load_seeded(path)
    m = san.manifest
    assert m["mechanism"] == "santext+" and m["format_version"] == 1
    assert m["params"] == {"epsilon": 2.5, "p": 0.25, "w": 0.8, "head_size": 8,
                           "epsilon0": pytest.approx(np.log(4.0)), "non_sensitive": "frequency:0.8"}
    assert m["sources"]["embeddings"]["sha256"] and m["build"]["backend"]
    assert m["privacy"]["notion"] == "UMLDP" and m["privacy"]["d_max"] > 0
    assert set(m["arrays"]) >= {"emb_q", "alias_threshold", "accept_gamma", "blob/tokenizer.json"}
    n_words = int(san.valid_input.sum()) - 1  # w counts the words; <unk> is always sensitive
    assert m["vocab"]["sensitive"] == int(san.sensitive.sum()) == round(0.8 * n_words) + 1
    assert m["vocab"]["non_sensitive"] == int(san.tables.keep_row.sum()) == n_words - round(0.8 * n_words)
    assert m["numeric"]["stated_maximum"] == 1e-9 and 0 < m["numeric"]["max_relative_error"] <= 1e-9
