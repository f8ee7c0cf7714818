"""DP-BART runtime (``ldptext.dpbart.Rewriter``, ``ldptext rewrite``) on tiny random bundles: noise
source, length hiding, pruning, ONNX equivalence, bad input, no raw text in errors. CPU only, seconds."""
from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest
import torch

from conftest_dpbart import build_tiny_bundle, single_thread_torch, tiny_sentences

pytest.importorskip("onnxruntime")
pytest.importorskip("transformers")

MARKER = "secret marker"  # words of the tiny vocabulary: they survive tokenization


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    """fp32 and int8 'pr' bundles over the same tiny random BERT-to-BERT (no training)."""
    d = tmp_path_factory.mktemp("dpbart_rt")
    with single_thread_torch():
        fp32, _, adapter = build_tiny_bundle(d / "fp32.ldpb", quantize=None, prune_rounds=2)
        int8, _, _ = build_tiny_bundle(d / "int8.ldpb", quantize="int8", prune_rounds=2)
    return {"fp32": fp32, "int8": int8, "adapter": adapter}


def load(path, seed=0, **kw):
    from ldptext.bundle import UnsignedBundleWarning
    from ldptext.dpbart import Rewriter
    from ldptext.rng import SeededModeWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        warnings.simplefilter("ignore", UnsignedBundleWarning)
        return Rewriter.load(path, allow_unsigned=True, seed=seed, threads=1, **kw)


# ------------------------------------------------------------------------------ happy path + report
def test_rewrite_returns_text_and_a_complete_report(bundles):
    rw = load(bundles["int8"])
    r = rw.rewrite("the cat sat on the mat", epsilon=500.0, delta=1e-5)
    assert isinstance(r.text, str)
    rep = r.report
    assert rep.mechanism == "gaussian" and rep.noise == "discrete_gaussian"
    assert rep.epsilon == 500.0 and rep.delta == 1e-5 and rep.chunks == 1 and not rep.truncated
    assert rep.n == rw.seq_len * (rw.hidden - len(rw.pruned)) == 10 * (32 - 8)
    assert rep.sensitivity == pytest.approx(2 * rep.clip * math.sqrt(rep.n))
    assert rep.sigma == rep.scale >= rep.sigma_analytic > 0 and rep.b is None
    assert rep.delta_bound <= 1e-5 and rep.private
    assert rep.total_epsilon == 500.0 and rep.total_delta == 1e-5
    lap = rw.rewrite("the cat", epsilon=2.0, mechanism="laplace").report
    assert lap.delta == 0.0 and lap.total_delta == 0.0 and lap.b == pytest.approx(2 * lap.clip * lap.n / 2.0)
    d = r.report.to_dict()
    assert d["sigma"] == rep.scale and d["b"] is None and d["n"] == rep.n
    json.dumps(d)


def test_report_names_the_backend_and_a_metric_ledger_is_refused_at_load(bundles, tmp_path):
    import os

    from ldptext.errors import LedgerError
    from ldptext.ledger import Ledger
    from ldptext.rng import available_backend

    rw = load(bundles["int8"])
    rep = rw.rewrite("the cat", epsilon=2.0, mechanism="laplace").report
    assert rep.backend == rep.to_dict()["backend"] == ("fallback" if available_backend() == "fallback" else "native")
    metric = Ledger(tmp_path / "m.ledger", budget=10.0, key=os.urandom(32), unit="metric:0123456789abcdef")
    with pytest.raises(LedgerError, match="unit 'metric:0123456789abcdef'.*'ldp'"):
        load(bundles["int8"], ledger=metric)  # refused before any text is rewritten


def test_long_inputs_split_truncate_refuse_and_compose(bundles):
    from ldptext.errors import InputError

    rw = load(bundles["int8"])
    cap = rw.seq_len - 2
    words = ("the cat sat on the mat and " * 10).split()[: 3 * cap + 1]  # 4 chunks
    text = " ".join(words)
    split = rw.rewrite(text, epsilon=10.0, delta=1e-6, long="split").report
    assert split.chunks == 4 and split.total_epsilon == 40.0 and split.total_delta == pytest.approx(4e-6)
    assert not split.truncated
    trunc = rw.rewrite(text, epsilon=10.0, delta=1e-6, long="truncate").report
    assert trunc.chunks == 1 and trunc.truncated and trunc.total_epsilon == 10.0
    with pytest.raises(InputError) as e:
        rw.rewrite(MARKER + " " + text, epsilon=10.0, delta=1e-6, long="refuse")
    assert MARKER not in str(e.value)
    exact = rw.rewrite(" ".join(words[:cap]), epsilon=10.0, delta=1e-6, long="refuse").report
    assert exact.chunks == 1 and not exact.truncated


def test_rewrite_batch_keeps_order_and_matches_single_calls(bundles):
    texts = tiny_sentences(5, seed=9)
    a = load(bundles["int8"], seed=3).rewrite_batch(texts, epsilon=math.inf, allow_infinite_epsilon=True)
    b = [load(bundles["int8"], seed=3).rewrite(t, epsilon=math.inf, allow_infinite_epsilon=True) for t in texts]
    assert [x.text for x in a] == [y.text for y in b]
    assert all(not x.report.private for x in a)


# ------------------------------------------------------------------------------ noise source
def test_noise_comes_from_the_csprng_and_is_reproducible_only_when_seeded(bundles):
    from ldptext.dpbart import Rewriter
    from ldptext.rng import Generator

    from ldptext.bundle import UnsignedBundleWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsignedBundleWarning)
        rw = Rewriter.load(bundles["int8"], allow_unsigned=True, threads=1)
    assert isinstance(rw._rng, Generator) and not rw._rng.seeded
    from ldptext.noise import calibrate

    cal = calibrate("gaussian", 50.0, 1e-5, clip=rw.clip, n=rw.n)
    z1 = load(bundles["int8"], seed=7).encode_noised([[7, 8, 9]], cal)
    z2 = load(bundles["int8"], seed=7).encode_noised([[7, 8, 9]], cal)
    z3 = rw.encode_noised([[7, 8, 9]], cal)
    np.testing.assert_array_equal(z1, z2)
    assert not np.array_equal(z1, z3)


def test_release_noise_variance_matches_calibration(bundles):
    from ldptext.noise import calibrate

    rw = load(bundles["int8"], seed=11)
    cal = calibrate("gaussian", 5.0, 1e-5, clip=rw.clip, n=rw.n)
    zero = rw.encode_noised([[]] * 200, calibrate("gaussian", math.inf, None, clip=rw.clip, n=rw.n))
    noisy = rw.encode_noised([[]] * 200, cal)
    keep = np.setdiff1d(np.arange(rw.hidden), rw.pruned)
    diff = (noisy - zero)[..., keep].astype(np.float64)
    assert diff.var() == pytest.approx(cal.variance, rel=0.05)


# ------------------------------------------------------------------------------ length
class _Recorder:
    def __init__(self, sess):
        self.sess, self.calls = sess, []

    def run(self, names, feeds):
        self.calls.append({k: (v.shape, v.dtype.str) for k, v in feeds.items()})
        return self.sess.run(names, feeds)

    def get_inputs(self):
        return self.sess.get_inputs()


def test_length_does_not_leak_into_encoder_shapes_or_decoder_settings(bundles):
    rw = load(bundles["int8"])
    enc, init, dec = _Recorder(rw._enc), _Recorder(rw._init), _Recorder(rw._dec)
    rw._enc, rw._init, rw._dec = enc, init, dec
    settings = []
    for text in ("cat", "the quick brown fox jumps over lazy dog"):  # 1 and 8 = L - 2 tokens
        settings.append(rw.decoder_settings())
        rw.rewrite(text, epsilon=100.0, delta=1e-5)
    assert enc.calls[0] == enc.calls[1]  # identical shapes and dtypes: (1, L) ids and mask
    assert enc.calls[0]["input_ids"][0] == (1, rw.seq_len)
    assert init.calls[0] == init.calls[1]
    assert settings[0] == settings[1]
    assert settings[0]["cross_attention_mask"] == "all-ones" and settings[0]["max_output_tokens"] == rw.seq_len
    # no mask is ever fed to the decoder; its cross K/V always span L positions
    for call in dec.calls:
        assert not any("mask" in k for k in call)
        assert call["cross_k_0"][0][2] == rw.seq_len
    # decoding never runs longer than the fixed maximum, whatever the input
    assert len(dec.calls) <= 2 * rw.max_output_tokens
    ids_a, mask_a = rw.encoder_inputs([[5]])
    ids_b, mask_b = rw.encoder_inputs([list(range(5, 5 + rw.seq_len - 2))])
    assert ids_a.shape == ids_b.shape == mask_a.shape == mask_b.shape == (1, rw.seq_len)


# ------------------------------------------------------------------------------ pruning
def test_pruned_coordinates_are_exactly_zero_in_every_release(bundles):
    from ldptext.noise import calibrate

    rw = load(bundles["int8"], seed=2)
    assert len(rw.pruned) == 8
    for mech, eps, delta in (("gaussian", 1.0, 1e-5), ("laplace", 3.0, None), ("gaussian", math.inf, None)):
        cal = calibrate(mech, eps, delta, clip=rw.clip, n=rw.n)
        z = rw.encode_noised([[5, 6, 7], [], list(range(5, 13))], cal)
        assert np.all(z[..., rw.pruned] == 0.0)
        keep = np.setdiff1d(np.arange(rw.hidden), rw.pruned)
        if math.isfinite(eps):
            assert np.all(z[..., keep] != 0.0) or np.mean(z[..., keep] != 0.0) > 0.99
        else:
            assert np.abs(z).max() <= rw.clip


# ------------------------------------------------------------------------------ equivalence
def test_rewriter_greedy_at_eps_inf_matches_pytorch(bundles):
    from ldptext_precompute.dpbart.train import greedy_decode_torch, make_batch, privatize_torch, tokenize_corpus

    adapter = bundles["adapter"]
    rw = load(bundles["fp32"])
    texts = [t for t in tiny_sentences(12, seed=5) if len(t.split()) <= rw.seq_len - 2][:6]
    ids = tokenize_corpus(adapter, texts, rw.seq_len)
    b = make_batch(adapter, ids, rw.seq_len)
    with torch.no_grad(), single_thread_torch():
        z = privatize_torch(adapter.encode(b["input_ids"], b["attention_mask"]), rw.clip,
                            torch.tensor(rw.pruned))
        ref = greedy_decode_torch(adapter, z, rw.max_output_tokens)
    ref_text = [adapter.tokenizer.decode(r, skip_special_tokens=True) for r in ref]
    got = [r.text for r in rw.rewrite_batch(texts, epsilon=math.inf, allow_infinite_epsilon=True)]
    assert got == ref_text


def test_int8_bundle_is_smaller_and_beam_search_runs(bundles):
    import os

    assert os.path.getsize(bundles["int8"]) < os.path.getsize(bundles["fp32"])
    rw = load(bundles["int8"])
    greedy = rw.rewrite("the cat sat", epsilon=math.inf, allow_infinite_epsilon=True).text
    beam1 = rw.rewrite("the cat sat", epsilon=math.inf, beam=1, allow_infinite_epsilon=True).text
    assert greedy == beam1
    r = rw.rewrite("the cat sat", epsilon=math.inf, beam=3, allow_infinite_epsilon=True)
    assert isinstance(r.text, str) and r.report.beam == 3


# ------------------------------------------------------------------------------ bad input, bundles
@pytest.mark.parametrize("kwargs", [
    dict(epsilon=0), dict(epsilon=-1.0), dict(epsilon=float("nan")), dict(epsilon=1.0, delta=0.0),
    dict(epsilon=1.0, delta=1.0), dict(epsilon=1.0), dict(epsilon=1.0, delta=1e-5, mechanism="exponential"),
    dict(epsilon=1.0, delta=1e-5, beam=0), dict(epsilon=1.0, delta=1e-5, long="drop"),
])
def test_bad_parameters_raise_parameter_error(bundles, kwargs):
    from ldptext.errors import ParameterError

    rw = load(bundles["int8"])
    with pytest.raises(ParameterError):
        rw.rewrite(MARKER, **kwargs)


def test_non_text_input_raises_input_error(bundles):
    from ldptext.errors import InputError

    rw = load(bundles["int8"])
    with pytest.raises(InputError):
        rw.rewrite(b"bytes", epsilon=1.0, delta=1e-5)
    with pytest.raises(InputError):
        rw.rewrite_batch("a string", epsilon=1.0, delta=1e-5)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_missing_corrupt_unsigned_and_foreign_bundles_are_refused(bundles, tmp_path):
    from ldptext.bundle import write_bundle
    from ldptext.dpbart import Rewriter
    from ldptext.errors import BundleError, BundleFormatError, UnsignedBundleError

    with pytest.raises(BundleError):
        Rewriter.load(tmp_path / "missing.ldpb")
    with pytest.raises(UnsignedBundleError):
        Rewriter.load(bundles["int8"])  # unsigned, and allow_unsigned not given
    data = bytearray(bundles["int8"].read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad = tmp_path / "corrupt.ldpb"
    bad.write_bytes(bytes(data))
    with pytest.raises(BundleError):
        Rewriter.load(bad, allow_unsigned=True)
    trunc = tmp_path / "trunc.ldpb"
    trunc.write_bytes(bytes(data[: len(data) // 3]))
    with pytest.raises(BundleError):
        Rewriter.load(trunc, allow_unsigned=True)
    other = write_bundle(tmp_path / "santext.ldpb", mechanism="santext", arrays={"x": np.zeros(3)},
                         manifest={}, sign_key=None)
    with pytest.raises(BundleFormatError):
        Rewriter.load(other, allow_unsigned=True)


def test_no_raw_text_in_logs_or_exceptions(bundles, caplog, capsys):
    from ldptext.errors import LdptextError

    rw = load(bundles["int8"])
    caplog.set_level(logging.DEBUG)
    rw.rewrite(MARKER + " cat", epsilon=10.0, delta=1e-5)
    for kwargs in (dict(epsilon=-1), dict(epsilon=1.0, delta=2.0), dict(epsilon=1.0, mechanism="x"),
                   dict(epsilon=1.0, delta=1e-5, long="refuse")):
        try:
            rw.rewrite(MARKER + " the" * 40, **kwargs)
        except LdptextError as e:
            assert MARKER not in str(e) and MARKER not in repr(e.args)
    out = capsys.readouterr()
    assert MARKER not in caplog.text and MARKER not in out.out and MARKER not in out.err


def test_rewriter_is_thread_safe(bundles):
    rw = load(bundles["int8"])
    errors, results = [], {}

    def work(i):
        try:
            results[i] = [r.report.chunks for r in rw.rewrite_batch(tiny_sentences(4, seed=i), epsilon=20.0,
                                                                    delta=1e-5)]
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 4


def test_runtime_does_not_import_torch(bundles):
    code = ("import sys, warnings; warnings.simplefilter('ignore');"
            "from ldptext.dpbart import Rewriter;"
            f"rw = Rewriter.load({str(bundles['int8'])!r}, allow_unsigned=True, threads=1);"
            "rw.rewrite('the cat', epsilon=5.0, delta=1e-5);"
            "assert 'torch' not in sys.modules and 'transformers' not in sys.modules, 'torch imported';"
            "print('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-1500:]


# ------------------------------------------------------------------------------ CLI
def _cli(args, stdin=None):
    return subprocess.run([sys.executable, "-m", "ldptext.cli", *args], input=stdin, capture_output=True,
                          timeout=120)


def test_cli_rewrite_streams_lines_in_order_with_json_reports(bundles, tmp_path):
    f = tmp_path / "in.txt"
    f.write_text("the cat sat\nthe dog ran\n\nbig red tree\n", encoding="utf-8")
    r = _cli(["rewrite", "--bundle", str(bundles["int8"]), "--allow-unsigned", "--epsilon", "50",
              "--delta", "1e-5", "--seed", "1", "--threads", "1", "--json", str(f)])
    assert r.returncode == 0, r.stderr.decode()[-1500:]
    lines = r.stdout.decode().splitlines()
    assert len(lines) == 4
    rep = json.loads(lines[0])["report"]
    assert rep["epsilon"] == 50.0 and rep["delta"] == 1e-5 and rep["chunks"] == 1
    r2 = _cli(["rewrite", "--bundle", str(bundles["int8"]), "--allow-unsigned", "--epsilon", "3",
               "--mechanism", "laplace", "--threads", "1", "-"], stdin=b"the cat\nthe dog\n")
    assert r2.returncode == 0 and len(r2.stdout.decode().splitlines()) == 2


def test_cli_rewrite_checks_its_options_before_opening_the_bundle(tmp_path, capsys):
    from ldptext.cli import main

    missing = str(tmp_path / "missing.ldpb")
    for bad in (["--epsilon", "1", "--delta", "2"], ["--epsilon", "1", "--mechanism", "laplace", "--delta", "1.5"],
                ["--epsilon", "1", "--delta", "1e-5", "--beam", "0"],
                ["--epsilon", "1", "--delta", "1e-5", "--budget", "3"]):
        assert main(["rewrite", "--bundle", missing, *bad, "-"]) == 2, bad  # usage, not "bundle not found"
        assert "missing.ldpb" not in capsys.readouterr().err


def test_cli_rewrite_charges_the_ledger_and_exits_6_when_it_refuses(bundles, tmp_path, monkeypatch):
    monkeypatch.setenv("LEDGER_PASS", "pw")
    f = tmp_path / "in.txt"
    f.write_text("the cat\nthe dog\n", encoding="utf-8")  # one batch: 2 releases of epsilon 3
    ledger = tmp_path / "dp.ledger"
    args = ["rewrite", "--bundle", str(bundles["int8"]), "--allow-unsigned", "--epsilon", "3", "--mechanism",
            "laplace", "--threads", "1", "--ledger", str(ledger), "--ledger-passphrase-env", "LEDGER_PASS"]
    r = _cli(args + ["--budget", "10", str(f)])
    assert r.returncode == 0 and len(r.stdout.decode().splitlines()) == 2, r.stderr.decode()[-800:]
    r = _cli(args + [str(f)])
    assert r.returncode == 6 and r.stdout == b""  # 6 + 6 > 10: the batch is refused and not written
    monkeypatch.setenv("LEDGER_PASS", "other")
    assert _cli(args + [str(f)]).returncode == 7


def test_cli_rewrite_reports_bad_utf8_line_number_without_echoing_text(bundles):
    data = b"the cat sat\n" + MARKER.encode() + b" \xff\xfe cat\n"
    r = _cli(["rewrite", "--bundle", str(bundles["int8"]), "--allow-unsigned", "--epsilon", "5",
              "--delta", "1e-5", "--threads", "1", "-"], stdin=data)
    assert r.returncode == 3  # input data (ldptext.cli exit status)
    err = r.stderr.decode()
    assert "line 2" in err and MARKER not in err and MARKER not in r.stdout.decode()


def test_cli_rewrite_skip_bad_lines_skips_bad_utf8_and_refused_documents(bundles):
    long_doc = " ".join(["cat"] * 40)  # longer than L = 10: refused under --long refuse
    data = (b"the cat sat\n" + MARKER.encode() + b" \xff\xfe cat\n" + long_doc.encode() + b"\nthe dog ran\n")
    r = _cli(["rewrite", "--bundle", str(bundles["int8"]), "--allow-unsigned", "--epsilon", "5",
              "--delta", "1e-5", "--threads", "1", "--long", "refuse", "--skip-bad-lines", "--json", "-"],
             stdin=data)
    assert r.returncode == 0, r.stderr.decode()[-1500:]
    assert len(r.stdout.decode().splitlines()) == 2  # lines 1 and 4, in order, nothing for 2 and 3
    err = r.stderr.decode()
    assert "skipped 2 of 4" in err and "2" in err and "3" in err and MARKER not in err


def test_cli_rewrite_rejects_bad_epsilon_and_missing_bundle(bundles, tmp_path):
    r = _cli(["rewrite", "--bundle", str(bundles["int8"]), "--allow-unsigned", "--epsilon", "0", "-"], stdin=b"x\n")
    assert r.returncode == 2 and b"epsilon" in r.stderr
    r = _cli(["rewrite", "--bundle", str(tmp_path / "nope.ldpb"), "--epsilon", "1", "--delta", "1e-5", "-"],
             stdin=b"x\n")
    assert r.returncode == 4 and b"not found" in r.stderr  # bundle error


def test_ledger_records_every_chunk_and_refuses_over_budget(bundles, tmp_path):
    import os
    from ldptext.errors import BudgetExceededError
    from ldptext.ledger import Ledger
    ledger = Ledger(tmp_path / "l.ledger", budget=10.0, delta_budget=1e-3, key=os.urandom(32))
    rw = load(bundles["int8"], ledger=ledger)
    long_doc = " ".join(["the cat sat on the mat"] * 4)  # several chunks of L tokens
    res = rw.rewrite_batch(["the cat", long_doc], epsilon=2.0, mechanism="laplace")
    k = sum(r.report.chunks for r in res)
    assert k >= 3 and ledger.spent()[0] == pytest.approx(2.0 * k)
    with pytest.raises(BudgetExceededError):
        rw.rewrite(long_doc, epsilon=2.0, mechanism="laplace")  # would exceed 10
    assert ledger.spent()[0] == pytest.approx(2.0 * k)


# ------------------------------------------------------------------------------ per-document independence
# The int8 graphs quantize activations dynamically (DynamicQuantizeLinear: one scale for the whole
# input tensor). Run as one batch, another document would change this document's encoder output, so
# its release z̃, and (in the decoder graphs) its text: one person's output would depend on someone
# else's private text. The Rewriter therefore encodes and decodes each chunk alone; these tests pin it.
DOC0 = "the cat sat on the mat"
COMPANIONS = (["big red tree", "the dog ran"], ["quick brown fox jumps over lazy dog day", "a"])


@pytest.mark.parametrize("kind", ["int8", "fp32"])
def test_a_companion_document_changes_no_coordinate_of_another_documents_release(bundles, kind):
    from ldptext.noise import calibrate

    rw0 = load(bundles[kind], seed=5)
    tok = rw0.tokenizer
    cal = calibrate("gaussian", 50.0, 1e-5, clip=rw0.clip, n=rw0.n)
    batches = [[tok.encode(DOC0).tolist()] + [tok.encode(c).tolist() for c in comps] for comps in COMPANIONS]
    releases = [load(bundles[kind], seed=5).encode_noised(chunks, cal) for chunks in batches]
    np.testing.assert_array_equal(releases[0][0], releases[1][0])  # every coordinate of document 0
    assert not np.array_equal(releases[0][1:], releases[1][1:])
    if kind == "int8":
        # the hazard is real: the same graph run on the whole batch gives document 0 another z
        runs = [rw0._enc.run(None, dict(zip(("input_ids", "attention_mask"), rw0.encoder_inputs(chunks))))[0]
                for chunks in batches]
        assert not np.array_equal(runs[0][0], runs[1][0])


@pytest.mark.parametrize("kind", ["int8", "fp32"])
def test_rewrite_batch_output_of_a_document_does_not_depend_on_its_companions(bundles, kind):
    released, texts = [], []
    for comps in COMPANIONS:
        rw = load(bundles[kind], seed=5)
        enc, init, dec = _Recorder(rw._enc), _Recorder(rw._init), _Recorder(rw._dec)
        rw._enc, rw._init, rw._dec = enc, init, dec
        decode = rw.decode
        rw.decode = lambda z, **kw: (released.append(np.array(z)), decode(z, **kw))[1]
        texts.append(rw.rewrite_batch([DOC0, *comps], epsilon=50.0, delta=1e-5)[0].text)
        # every graph run holds exactly one chunk: nothing of another document is in its tensors
        for call in enc.calls + init.calls + dec.calls:
            assert all(shape[0] == 1 for shape, _ in call.values())
    np.testing.assert_array_equal(released[0][0], released[1][0])
    assert texts[0] == texts[1]


def test_cli_rewrite_line_does_not_depend_on_the_other_lines_of_its_batch(bundles, tmp_path):
    from ldptext.commands.rewrite import BATCH

    outs = []
    for comps in COMPANIONS:
        lines = [DOC0, *comps] * BATCH  # more than one CLI batch of BATCH lines
        f = tmp_path / f"in{len(outs)}.txt"
        f.write_text("\n".join(lines[:BATCH + 2]) + "\n", encoding="utf-8")
        r = _cli(["rewrite", "--bundle", str(bundles["int8"]), "--allow-unsigned", "--epsilon", "50",
                  "--delta", "1e-5", "--seed", "3", "--threads", "1", str(f)])
        assert r.returncode == 0, r.stderr.decode()[-1500:]
        outs.append(r.stdout.decode().splitlines())
    assert len(outs[0]) == len(outs[1]) == BATCH + 2
    assert outs[0][0] == outs[1][0]


def test_rewriter_is_a_runtime(bundles):
    from ldptext.runtime import Runtime

    rw = load(bundles["int8"])
    assert isinstance(rw, Runtime)
    assert rw.mechanism == "dpbart" and rw.key_id is None and rw.manifest["mechanism"] == "dpbart"
    assert rw.config.seq_len == rw.seq_len and rw.config.pruned == tuple(int(j) for j in rw.pruned)


def test_bundle_schema_round_trips_and_refuses_malformed_sections(bundles):
    from ldptext.bundle import read_bundle
    from ldptext.dpbart_schema import DPBartConfig
    from ldptext.errors import BundleFormatError

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = read_bundle(bundles["int8"], allow_unsigned=True)
    cfg = DPBartConfig.from_bundle(b)
    assert cfg.manifest_section() == b.manifest["dpbart"]
    np.testing.assert_array_equal(cfg.arrays()["pruned"], b.array("pruned"))
    section = dict(b.manifest["dpbart"])
    for bad, pruned in (({k: v for k, v in section.items() if k != "heads"}, []), ({**section, "hidden": "x"}, []),
                        (section, [0, 0]), (section, [section["hidden"]]), (section, [[1]]), ([], [])):
        with pytest.raises(BundleFormatError):
            DPBartConfig.from_manifest(bad, np.asarray(pruned, dtype=np.int64))


def test_shared_greedy_loop_stops_rows_at_eos_and_at_the_fixed_length():
    from ldptext.decoding import greedy

    script = iter([[[0, 5, 1], [0, 1, 5]], [[9, 0, 0], [0, 0, 9]], [[0, 0, 9], [0, 9, 0]]])
    fed = []

    def step(tokens):
        fed.append(tokens.tolist())
        return np.asarray(next(script), dtype=np.float32)

    # row 0: 1, then eos (0); row 1: 2, 2, 1, then the length limit
    assert greedy(step, 2, start=7, eos=0, max_len=3) == [[1], [2, 2, 1]]
    assert fed == [[7, 7], [1, 2], [0, 2]]  # a finished row is fed eos


# ------------------------------------------------------------------------------ stated numbers
def _strict_json(line: str) -> dict:
    """json.loads that refuses Infinity / NaN (not JSON)."""
    def bad(name):
        raise ValueError(f"non-JSON constant {name}")
    return json.loads(line, parse_constant=bad)


@pytest.mark.parametrize("value", [math.inf, float("1e400"), 10**400, np.float64("inf")])
def test_infinite_epsilon_is_refused_unless_explicitly_allowed_for_evaluation(bundles, value):
    from ldptext.errors import ParameterError

    rw = load(bundles["int8"])
    for call in (lambda **kw: rw.rewrite(MARKER, **kw), lambda **kw: rw.rewrite_batch([MARKER], **kw)):
        for mech, delta in (("gaussian", 1e-5), ("gaussian", None), ("laplace", None)):
            with pytest.raises(ParameterError) as e:
                call(epsilon=value, delta=delta, mechanism=mech)
            msg = str(e.value)
            assert "allow_infinite_epsilon=True" in msg and "not be private" in msg and MARKER not in msg
    r = rw.rewrite("the cat sat", epsilon=value, allow_infinite_epsilon=True)
    rep = r.report
    assert not rep.private and rep.evaluation_only and rep.epsilon == math.inf and rep.sampler_parameters is None
    assert any("NOT private" in n and "evaluation only" in n for n in rep.notes)
    assert "NO PRIVACY, evaluation only" in rep.summary()
    d = rep.to_dict()
    assert d["epsilon"] == "inf" and d["total_epsilon"] == "inf" and d["evaluation_only"] is True
    _strict_json(json.dumps(d, allow_nan=False))


def test_nan_epsilon_is_refused_with_a_specific_message(bundles):
    from ldptext.errors import ParameterError

    rw = load(bundles["int8"])
    for allow in (False, True):
        with pytest.raises(ParameterError, match="nan"):
            rw.rewrite("the cat", epsilon=float("nan"), delta=1e-5, allow_infinite_epsilon=allow)


def test_report_states_exact_noise_its_rational_parameter_and_seeding(bundles):
    from ldptext.noise import calibrate

    seeded = load(bundles["int8"], seed=4)
    from ldptext.bundle import UnsignedBundleWarning
    from ldptext.dpbart import Rewriter

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsignedBundleWarning)
        private = Rewriter.load(bundles["int8"], allow_unsigned=True, threads=1)
    for rw, is_seeded in ((seeded, True), (private, False)):
        for mech, eps, delta in (("gaussian", 50.0, 1e-5), ("laplace", 7.3, None)):
            rep = rw.rewrite("the cat sat", epsilon=eps, delta=delta, mechanism=mech).report
            cal = calibrate(mech, eps, delta, clip=rw.clip, n=rw.n)
            assert rep.seeded is is_seeded and not rep.evaluation_only and rep.private
            assert rep.noise_exact is True and rep.epsilon_slack == 0.0
            assert rep.sampler_parameters == cal.sampler_parameters
            a, b = rep.sampler_parameters
            assert isinstance(a, int) and isinstance(b, int)
            if mech == "laplace":
                assert rep.noise_parameter.startswith(f"t = {a}/{b}")
                # 2Kn/t ≤ ε in exact arithmetic, for the t the sampler got
                from fractions import Fraction
                k = 1 << cal.grid_bits
                assert Fraction(2 * k * rep.n) * b / a <= Fraction(eps)
                assert rep.epsilon_bound <= eps
            else:
                assert rep.noise_parameter.startswith(f"sigma^2 = {a}*{b}")
                assert rep.delta_bound <= delta and rep.epsilon_bound == eps
            assert ("SEEDED" in rep.summary()) is is_seeded
            d = rep.to_dict()
            for key in ("seeded", "evaluation_only", "noise_exact", "noise_parameter", "sampler_parameters",
                        "epsilon_slack", "epsilon_bound"):
                assert key in d
            assert d["seeded"] is is_seeded and d["sampler_parameters"] == [a, b]
            _strict_json(json.dumps(d, allow_nan=False))


def test_rewrite_docstring_states_the_noise_is_exact():
    from ldptext.dpbart import Rewriter

    doc = " ".join(Rewriter.rewrite.__doc__.split())
    assert "epsilon_slack" in doc and "noise_exact" in doc and "allow_infinite_epsilon" in doc


def test_cli_rewrite_refuses_infinite_epsilon_unless_allowed_and_json_says_seeded(bundles, tmp_path):
    base = ["rewrite", "--bundle", str(bundles["int8"]), "--allow-unsigned", "--threads", "1", "--json"]
    for value, words in (("inf", "is infinite"), ("Infinity", "is infinite"), ("1e400", "overflows to inf"),
                         ("-inf", "> 0"), ("nan", "not a number")):
        r = _cli([*base, f"--epsilon={value}", "-"], stdin=MARKER.encode() + b"\n")
        err = r.stderr.decode()
        assert r.returncode == 2 and words in err and r.stdout == b"" and MARKER not in err, (value, err)
        if words in ("is infinite", "overflows to inf"):
            assert "--allow-infinite-epsilon" in err and "not be private" in err
    r = _cli([*base, "--epsilon", "1e400", "--allow-infinite-epsilon", "--seed", "2", "-"], stdin=b"the cat sat\n")
    assert r.returncode == 0, r.stderr.decode()[-1500:]
    assert "NOT private" in r.stderr.decode()
    rep = _strict_json(r.stdout.decode().splitlines()[0])["report"]
    assert rep["epsilon"] == "inf" and rep["private"] is False and rep["evaluation_only"] is True
    assert rep["seeded"] is True
    r = _cli([*base, "--epsilon", "50", "--delta", "1e-5", "-"], stdin=b"the cat sat\n")
    assert r.returncode == 0, r.stderr.decode()[-1500:]
    rep = _strict_json(r.stdout.decode().splitlines()[0])["report"]
    assert rep["seeded"] is False and rep["evaluation_only"] is False and rep["noise_exact"] is True
    assert rep["epsilon_slack"] == 0.0 and len(rep["sampler_parameters"]) == 2


# ------------------------------------------------------------------------------ the one DP-BART check
# Every door (Rewriter.load, a direct construction, `ldptext rewrite`, `bundle verify`, `bundle sign`)
# runs ldptext.dpbart_check.open_checked; each damaged bundle below is signed by a trusted key, so only
# its statements (or graphs) are wrong, and every door must refuse it with a bundle error (exit 4).

def _set(key, value):
    def edit(m):
        m["dpbart"][key] = value
    return edit


def _special(name, value):
    def edit(m):
        m["dpbart"]["special"][name] = value
    return edit


def _graph_from(dst, src):
    return ("blobs", lambda bl: bl.__setitem__(dst, bl[src]))


def _prune_all(a):
    a["pruned"] = np.arange(32, dtype=np.int64)


def _prune_twice(a):
    a["pruned"] = np.concatenate([a["pruned"][:1], a["pruned"][:-1]])


def _prune_past_d(a):
    a["pruned"] = np.concatenate([a["pruned"][:-1], [32]]).astype(np.int64)


#: case → (manifest edit or ("blobs", edit) or ("arrays", edit, manifest edit), expected error class)
DAMAGED = {
    "n_pruned 8 stated as 2": (_set("n_pruned", 2), "ParameterMismatchError"),
    "max_output_tokens one past the decoder's 64 positions": (_set("max_output_tokens", 65),
                                                              "ParameterMismatchError"),
    "max_output_tokens 10000": (_set("max_output_tokens", 10000), "ParameterMismatchError"),
    "max_output_tokens 10**12 (cache too large)": (_set("max_output_tokens", 10 ** 12), "BundleFormatError"),
    "heads 2 stated as 4": (_set("heads", 4), "ParameterMismatchError"),
    "head_dim 16 stated as 8": (_set("head_dim", 8), "ParameterMismatchError"),
    "n_layers 2 stated as 3": (_set("n_layers", 3), "ParameterMismatchError"),
    "n_layers 2 stated as 1": (_set("n_layers", 1), "ParameterMismatchError"),
    "decoder is the encoder graph": (_graph_from("decoder.onnx", "encoder.onnx"), "ParameterMismatchError"),
    "decoder_init is the decoder graph": (_graph_from("decoder_init.onnx", "decoder.onnx"),
                                          "ParameterMismatchError"),
    "decoder_start past the vocabulary": (_special("decoder_start", 45), "ParameterMismatchError"),
    "eos past the vocabulary": (_special("eos", 1000), "ParameterMismatchError"),
    "clip 0": (_set("clip", 0.0), "BundleFormatError"),
    "seq_len 1 leaves no content position": (_set("seq_len", 1), "BundleFormatError"),
    "every hidden index pruned": (("arrays", _prune_all, _set("n_pruned", 32)), "ParameterMismatchError"),
    "hidden 32 stated as 64": (_set("hidden", 64), "ParameterMismatchError"),
    "a pruned index twice": (("arrays", _prune_twice, lambda m: None), "BundleFormatError"),
    "a pruned index past d": (("arrays", _prune_past_d, lambda m: None), "BundleFormatError"),
}
DOORS = ("load", "construct", "cli rewrite", "verify", "sign")


def _recraft(src, dst, edit, key):
    """``src`` with ``edit`` applied, signed by ``key`` (no parameter check: what an attacker hands over)."""
    from conftest import edited_bundle
    from ldptext import bundle as B

    if isinstance(edit, tuple) and edit[0] == "arrays":
        return edited_bundle(src, dst, edit[2], arrays_edit=edit[1], sign_key=key)
    if isinstance(edit, tuple) and edit[0] == "blobs":
        b, _ = B.open_unverified(src)
        manifest = {k: v for k, v in b.manifest.items() if k not in ("format", "format_version", "mechanism",
                                                                        "arrays")}
        arrays = {n: np.array(a) for n, a in b.arrays.items() if not n.startswith(B.BLOB_PREFIX)}
        blobs = {n[len(B.BLOB_PREFIX):]: bytes(a) for n, a in b.arrays.items() if n.startswith(B.BLOB_PREFIX)}
        edit[1](blobs)
        return B.write_bundle(dst, mechanism=b.mechanism, arrays=arrays, manifest=manifest, blobs=blobs,
                              sign_key=key)
    return edited_bundle(src, dst, edit, sign_key=key)


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    """An honest signed fp32 tiny bundle (64 decoder positions, L = 10), its key files, and one damaged,
    re-signed copy per :data:`DAMAGED` case, plus honest edge cases."""
    from ldptext.keys import generate_keypair, load_private_key

    d = tmp_path_factory.mktemp("dpbart_door")
    key_path, pub_path = generate_keypair(d / "keys")
    key = load_private_key(key_path)
    with single_thread_torch():
        honest, _, _ = build_tiny_bundle(d / "honest.ldpb", quantize=None, prune_rounds=2, sign_key=key)
    damaged = {name: _recraft(honest, d / f"damaged-{i}.ldpb", edit, key)
               for i, (name, (edit, _)) in enumerate(DAMAGED.items())}

    def drop_n_pruned(m):
        del m["dpbart"]["n_pruned"]
    edges = {"max_output_tokens 64": _recraft(honest, d / "mot64.ldpb", _set("max_output_tokens", 64), key),
             "no n_pruned": _recraft(honest, d / "old.ldpb", drop_n_pruned, key)}
    return {"honest": honest, "damaged": damaged, "edges": edges, "key": key_path, "pub": pub_path}


def _door(door, path, signed, tmp_path, capsys):
    """Open ``path`` through ``door``; returns the exception (Python doors) or (exit status, stdout, stderr)."""
    from ldptext import cli
    from ldptext.bundle import read_bundle
    from ldptext.dpbart import Rewriter
    from ldptext.errors import BundleError

    pub = str(signed["pub"])
    if door in ("load", "construct"):
        try:
            with (Rewriter.load(path, trusted_keys=[pub], threads=1) if door == "load"
                  else Rewriter(read_bundle(path, trusted_keys=[pub]), threads=1)) as rw:
                rw.rewrite(f"the cat sat {MARKER}", epsilon=5.0, delta=1e-5)
        except BundleError as e:
            return e
        return None
    if door == "cli rewrite":
        inp = tmp_path / "in.txt"
        inp.write_text(f"the cat sat {MARKER}\n", encoding="utf-8")
        argv = ["rewrite", "--bundle", str(path), "--epsilon", "5", "--delta", "1e-5", "--threads", "1",
                "--trusted-key", pub, "--no-progress", str(inp)]
    elif door == "verify":
        argv = ["bundle", "verify", "--trusted-key", pub, str(path)]
    else:
        dst = tmp_path / "resigned.ldpb"
        if dst.exists():
            dst.unlink()
        argv = ["bundle", "sign", "--key", str(signed["key"]), "--out", str(dst), str(path)]
    rc = cli.main(argv)  # an unexpected exception is exit 1 with a traceback: it fails the test here
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("case", list(DAMAGED))
def test_every_door_refuses_a_damaged_dpbart_bundle_with_a_bundle_error(signed, case, door, tmp_path, capsys):
    from ldptext import errors

    got = _door(door, signed["damaged"][case], signed, tmp_path, capsys)
    if door in ("load", "construct"):
        assert got is not None, f"{door} accepted: {case}"
        assert isinstance(got, getattr(errors, DAMAGED[case][1])), f"{type(got).__name__}: {got}"
        assert MARKER not in str(got) and "ONNXRuntimeError" not in str(got)
        return
    rc, out, err = got
    assert rc == 4, out + err
    assert "Traceback" not in err and MARKER not in err and "ONNXRuntimeError" not in err
    assert err.count("\n") == 1, err  # one line: the reason
    if door == "cli rewrite":
        assert out == ""
    if door == "sign":
        assert not (tmp_path / "resigned.ldpb").exists()


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("case", ["honest", "max_output_tokens 64", "no n_pruned"])
def test_every_door_accepts_an_honest_dpbart_bundle(signed, case, door, tmp_path, capsys):
    """The bound is the decoder's own: 64 positions decode (a rewrite of 64 tokens runs), 65 are
    refused above; a bundle from before ``n_pruned`` was written still opens."""
    path = signed["honest"] if case == "honest" else signed["edges"][case]
    got = _door(door, path, signed, tmp_path, capsys)
    if door in ("load", "construct"):
        assert got is None, f"{type(got).__name__}: {got}"
    else:
        rc, out, err = got
        assert rc == 0, out + err


def test_max_output_tokens_at_the_decoders_last_position_decodes_that_many_tokens(signed):
    """With max_output_tokens = 64 (all the decoder's positions) decoding that never meets eos runs the
    64 steps without an ONNX Runtime error, and a 65th step would fail: the check probes exactly the last
    position decoding reaches."""
    from ldptext.decoding import greedy
    from ldptext.dpbart import Rewriter

    with Rewriter.load(signed["edges"]["max_output_tokens 64"], trusted_keys=[str(signed["pub"])],
                       threads=1) as rw:
        z = np.zeros((1, rw.seq_len, rw.hidden), dtype=np.float32)
        step, _ = rw._decoder_state(z, copies=1)
        assert len(greedy(step, 1, rw.config.special.decoder_start, -1, rw.max_output_tokens)[0]) == 64
        with pytest.raises(Exception, match="ONNXRuntimeError"):
            step(np.array([rw.config.special.decoder_start], dtype=np.int64))  # position 64


def test_every_door_runs_the_one_dpbart_check(signed, tmp_path, capsys, monkeypatch):
    """Rewriter.load, a construction, `ldptext rewrite`, `bundle verify` and `bundle sign` all call
    ldptext.dpbart_check.open_checked, once each: there is no second, weaker check."""
    from ldptext import dpbart, dpbart_check

    calls = []

    def spy(bundle, **kw):
        calls.append(bundle.bundle_id)
        return dpbart_check.open_checked(bundle, **kw)
    monkeypatch.setattr(dpbart, "open_checked", spy)
    for door in DOORS:
        before = len(calls)
        got = _door(door, signed["honest"], signed, tmp_path, capsys)
        assert got is None or got[0] == 0, (door, got)
        assert len(calls) == before + 1, door
