"""One door: every entry point that opens a bundle runs every check of its mechanism.

A runtime is built only through its class (``ldptext.runtime._CheckedOnOpen``: construction runs the
mechanism's checks), so the API, ``load_token_runtime`` (the CLI's line and Parquet modes, Spark's
executors), ``bundle verify`` and a direct construction refuse the same crafted bundle with the same
error. Each bundle here is re-signed with a trusted key: only its statements are wrong.
"""
from __future__ import annotations

import io
import sys
import warnings

import numpy as np
import pytest

from conftest import edited_bundle, random_word_embeddings
from ldptext import keys
from ldptext.bundle import open_unverified, read_bundle, write_bundle, BLOB_PREFIX
from ldptext.cli import main
from ldptext.errors import BundleError, ParameterMismatchError
from ldptext.rng import SeededModeWarning
from ldptext.runtime import load_token_runtime

EXIT_BUNDLE = 4


@pytest.fixture(scope="module")
def custext_relabelled(tmp_path_factory):
    """A CusText bundle whose tables realise ε = 3, re-signed as ε = 1."""
    from ldptext_precompute.custext.build import build_custext_bundle

    d = tmp_path_factory.mktemp("door")
    emb = random_word_embeddings(53, 6, 3)
    honest = build_custext_bundle(d / "c.ldpb", embeddings="unused", loaded=emb, epsilon=3.0, k=5,
                                  device="cpu")

    def relabel(m):
        m["params"]["epsilon"] = 1.0
    return honest, edited_bundle(honest, d / "c_eps1.ldpb", relabel, sign_key=keys.developer_key())


def _entry_points():
    """Every way the SDK opens a token bundle, as (name, callable taking the path)."""
    from ldptext.custext import CusTextSanitizer

    def quiet(fn):
        def run(path):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SeededModeWarning)
                return fn(path)
        return run
    return [
        ("Runtime.load", quiet(lambda p: CusTextSanitizer.load(p, seed=0))),
        ("load_token_runtime (CLI, Parquet, Spark executors)", quiet(lambda p: load_token_runtime(p, seed=0))),
        ("construction around a verified bundle", quiet(lambda p: CusTextSanitizer(read_bundle(p), seed=0))),
        ("construction, numpy backend", quiet(lambda p: CusTextSanitizer(read_bundle(p), backend="fallback"))),
    ]


@pytest.mark.parametrize("name", [n for n, _ in _entry_points()])
def test_every_entry_point_refuses_a_relabelled_epsilon(custext_relabelled, name):
    honest, relabelled = custext_relabelled
    fn = dict(_entry_points())[name]
    fn(honest).close()  # the honest bundle opens through the same door
    with pytest.raises(ParameterMismatchError, match="epsilon"):
        fn(relabelled)


def _sanitize_cli(monkeypatch, capsys, path, text="w1 w2 w3\n") -> tuple[int, str]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode()), encoding="utf-8"))
    rc = main(["sanitize", "--bundle", str(path), "--seed", "0"])
    return rc, capsys.readouterr().out


def test_cli_sanitize_refuses_a_relabelled_custext_bundle(custext_relabelled, monkeypatch, capsys):
    honest, relabelled = custext_relabelled
    rc, out = _sanitize_cli(monkeypatch, capsys, honest)
    assert rc == 0 and out.strip()
    rc, out = _sanitize_cli(monkeypatch, capsys, relabelled)
    assert rc == EXIT_BUNDLE and out == ""  # nothing released
    assert main(["bundle", "verify", str(relabelled)]) == EXIT_BUNDLE


def test_cli_parquet_refuses_a_relabelled_custext_bundle(custext_relabelled, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    _, relabelled = custext_relabelled
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": ["w1 w2", "w3"]}), src)
    rc = main(["sanitize", "--bundle", str(relabelled), "--input", str(src), "--column", "text",
               "--output", str(tmp_path / "out.parquet")])
    assert rc == EXIT_BUNDLE and not (tmp_path / "out.parquet").exists()


def test_the_report_names_the_backend_load_would_use(custext_relabelled):
    """load_token_runtime adopts libldptext as load() does (the report's backend agrees)."""
    from ldptext.custext import CusTextSanitizer

    honest, _ = custext_relabelled
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        with CusTextSanitizer.load(honest, seed=0) as a, load_token_runtime(honest, seed=0) as b:
            assert a.backend == b.backend
            assert a.sanitize("w1 w2").text == b.sanitize("w1 w2").text


# -- DP-BART ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dpbart_bundles(tmp_path_factory):
    pytest.importorskip("transformers")
    from conftest_dpbart import build_tiny_bundle, single_thread_torch

    d = tmp_path_factory.mktemp("door_dpbart")
    with single_thread_torch():
        honest, _, _ = build_tiny_bundle(d / "honest.ldpb", quantize=None, prune_rounds=1,
                                         sign_key=keys.developer_key())

    def wrong_hidden(m):
        m["dpbart"]["hidden"] = int(m["dpbart"]["hidden"]) + 1
    hidden = edited_bundle(honest, d / "hidden.ldpb", wrong_hidden, sign_key=keys.developer_key())
    b, _ = open_unverified(honest)
    manifest = {k: v for k, v in b.manifest.items() if k not in ("format", "format_version", "mechanism", "arrays")}
    arrays = {n: np.array(a) for n, a in b.arrays.items() if not n.startswith(BLOB_PREFIX)}
    blobs = {n[len(BLOB_PREFIX):]: bytes(a) for n, a in b.arrays.items() if n.startswith(BLOB_PREFIX)}
    blobs["encoder.onnx"], blobs["decoder.onnx"] = blobs["decoder.onnx"], blobs["encoder.onnx"]
    swapped = write_bundle(d / "swapped.ldpb", mechanism="dpbart", arrays=arrays, manifest=manifest,
                           blobs=blobs, sign_key=keys.developer_key())
    return honest, {"wrong hidden size": hidden, "swapped graphs": swapped}


@pytest.mark.parametrize("case", ["wrong hidden size", "swapped graphs"])
def test_a_damaged_dpbart_bundle_is_refused_at_load(dpbart_bundles, case, monkeypatch, capsys):
    from ldptext.dpbart import Rewriter

    honest, damaged = dpbart_bundles
    Rewriter.load(honest).close()
    with pytest.raises(ParameterMismatchError):
        Rewriter.load(damaged[case])
    with pytest.raises(BundleError):
        Rewriter(read_bundle(damaged[case]))  # construction is the same door
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"a secret\n"), encoding="utf-8"))
    rc = main(["rewrite", "--bundle", str(damaged[case]), "--epsilon", "1000", "--delta", "1e-6"])
    assert rc == EXIT_BUNDLE and capsys.readouterr().out == ""
