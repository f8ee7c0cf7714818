"""DP-BART precompute on tiny random models: ONNX export equivalence, int8 tolerance, pruning, training
stages, resumable pipeline, CLI. CPU only, seconds."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest_dpbart import build_tiny_bundle, single_thread_torch, tiny_bart, tiny_bert2bert, tiny_sentences

pytest.importorskip("transformers")
pytest.importorskip("onnxruntime")

#: stated int8 tolerance on clipped encoder outputs, as a fraction of C (tiny random models; the
#: benchmark reports the real model's numbers)
INT8_CLIPPED_TOL = 0.5


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    with single_thread_torch():
        yield


@pytest.fixture(scope="module", params=["bert2bert", "bart"])
def exported(request, tmp_path_factory):
    from ldptext_precompute.dpbart.export import export_onnx, quantize_int8

    adapter = tiny_bert2bert() if request.param == "bert2bert" else tiny_bart()
    d = tmp_path_factory.mktemp(f"onnx_{request.param}")
    graphs = export_onnx(adapter, d / "fp32", seq_len=10)
    (d / "int8").mkdir()
    qgraphs = {k: quantize_int8(v, d / "int8" / v.name) for k, v in graphs.items()}
    return adapter, graphs, qgraphs


def _batch(adapter, n=6, seq_len=10):
    from ldptext_precompute.dpbart.train import make_batch, tokenize_corpus

    return make_batch(adapter, tokenize_corpus(adapter, tiny_sentences(n, seed=3), seq_len), seq_len)


def _session(path):
    from ldptext.dpbart import onnx_session

    return onnx_session(path, threads=1)


def test_three_separate_graphs_and_no_random_ops(exported):
    import onnx

    _, graphs, _ = exported
    assert set(graphs) == {"encoder", "decoder_init", "decoder"}
    for path in graphs.values():
        ops = {n.op_type for n in onnx.load(str(path)).graph.node}
        assert not ops & {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
                          "Bernoulli", "Dropout"}, ops
    enc_inputs = [i.name for i in _session(graphs["encoder"]).get_inputs()]
    assert enc_inputs == ["input_ids", "attention_mask"]
    # the decoder has no encoder-attention-mask input: cross-attention always sees all L positions
    dec_inputs = [i.name for i in _session(graphs["decoder"]).get_inputs()]
    assert not any("mask" in n for n in dec_inputs)


def test_onnx_fp32_encoder_matches_pytorch(exported):
    adapter, graphs, _ = exported
    b = _batch(adapter)
    with torch.no_grad():
        z_t = adapter.encode(b["input_ids"], b["attention_mask"]).numpy()
    z_o = _session(graphs["encoder"]).run(None, {"input_ids": b["input_ids"].numpy(),
                                                 "attention_mask": b["attention_mask"].numpy()})[0]
    assert z_o.shape == z_t.shape
    np.testing.assert_allclose(z_o, z_t, atol=1e-4, rtol=1e-4)


def test_onnx_fp32_greedy_decoding_matches_pytorch_at_eps_inf(exported):
    """The shipped runtime (``Rewriter.decode`` over the exported graphs) against the PyTorch oracle."""
    from ldptext_precompute.dpbart.build import dpbart_config, shipped_rewriter
    from ldptext_precompute.dpbart.train import greedy_decode_torch, privatize_torch

    adapter, graphs, _ = exported
    b = _batch(adapter)
    with torch.no_grad():
        z = privatize_torch(adapter.encode(b["input_ids"], b["attention_mask"]), 0.5, None)
    ref = greedy_decode_torch(adapter, z, 10)
    config = dpbart_config(adapter, variant="clv", seq_len=10, clip=0.5, pruned=[], max_output_tokens=10)
    with shipped_rewriter(graphs, adapter.tokenizer_json, config, threads=1) as rw:
        ours = rw.decode(z.numpy())
    assert ours == ref


def test_decoder_with_past_logits_equal_full_recompute_logits(exported):
    """Step-by-step along a fixed token path (a random model may stop at once under greedy)."""
    from ldptext_precompute.dpbart.export import decoder_layout

    adapter, graphs, _ = exported
    b = _batch(adapter, n=3)
    with torch.no_grad():
        z = torch.clamp(adapter.encode(b["input_ids"], b["attention_mask"]), -0.5, 0.5)
    path = torch.tensor([[adapter.special.decoder_start, 7, 9, 11, 13, 8, 6]] * 3)
    with torch.no_grad():
        ref = adapter.decode_logits(z, path).numpy()
    cross = _session(graphs["decoder_init"]).run(None, {"z": z.numpy()})
    dec = _session(graphs["decoder"])
    lay = decoder_layout(adapter)
    past = [np.zeros((3, lay["heads"], 0, lay["head_dim"]), np.float32) for _ in range(2 * lay["n_layers"])]
    names = [i.name for i in dec.get_inputs()]
    for t in range(path.shape[1]):
        out = dec.run(None, dict(zip(names, [path[:, t:t + 1].numpy(), *past, *cross])))
        np.testing.assert_allclose(out[0], ref[:, t], atol=1e-4, rtol=1e-4)
        past = out[1:]
        assert past[0].shape[2] == t + 1


def test_int8_graphs_stay_within_stated_tolerance(exported):
    adapter, graphs, qgraphs = exported
    b = _batch(adapter)
    feeds = {"input_ids": b["input_ids"].numpy(), "attention_mask": b["attention_mask"].numpy()}
    z32 = _session(graphs["encoder"]).run(None, feeds)[0]
    z8 = _session(qgraphs["encoder"]).run(None, feeds)[0]
    c = 0.5
    diff = np.abs(np.clip(z8, -c, c) - np.clip(z32, -c, c))
    assert diff.max() <= INT8_CLIPPED_TOL * c
    assert diff.mean() <= 0.05 * c
    for k in graphs:
        assert Path(qgraphs[k]).stat().st_size <= Path(graphs[k]).stat().st_size


def test_pruning_round_selects_neurons_below_the_25_percent_quantile_of_remaining():
    from ldptext_precompute.dpbart.train import neuron_scores, prune_round

    adapter = tiny_bert2bert(hidden=32)
    w = adapter.first_cross_key_weight()
    with torch.no_grad():
        # neuron j gets score proportional to j+1 (Σ|W_K[:, j]|)
        w.copy_(torch.arange(1, 33, dtype=torch.float32).repeat(w.shape[0], 1) / w.shape[0])
    scores = neuron_scores(adapter)
    assert torch.allclose(scores, torch.arange(1, 33, dtype=torch.float32), atol=1e-4)
    p1 = prune_round(adapter, [])
    assert p1 == list(range(8))  # below the 25 % quantile of 32 neurons
    p2 = prune_round(adapter, p1)
    assert p2[:8] == p1 and p2 == list(range(14))  # 25 % of the remaining 24 (quantile interpolates)


def test_bart_cross_attention_key_is_the_first_decoder_layer():
    adapter = tiny_bart()
    w = adapter.first_cross_key_weight()
    assert w is adapter.model.get_decoder().layers[0].encoder_attn.k_proj.weight
    assert w.shape[1] == adapter.hidden_size


def test_training_applies_clip_prune_and_noise_where_the_runtime_does():
    from ldptext_precompute.dpbart.train import TrainNoise, privatize_torch

    z = torch.randn(4, 10, 32) * 3
    pruned = torch.tensor([1, 5, 9])
    out = privatize_torch(z, 0.2, pruned)
    assert out.abs().max() <= 0.2 and torch.all(out[..., pruned] == 0)
    noisy = privatize_torch(z, 0.2, pruned, TrainNoise("gaussian", 1.0), torch.Generator().manual_seed(0))
    assert torch.all(noisy[..., pruned] == 0)
    kept = (noisy - out)[..., [j for j in range(32) if j not in (1, 5, 9)]]
    assert abs(float(kept.std()) - 1.0) < 0.1  # i.i.d. per coordinate, not per token
    big = torch.zeros(64, 10, 32)
    lap = privatize_torch(big, 0.2, None, TrainNoise("laplace", 0.5), torch.Generator().manual_seed(0))
    assert abs(float(lap.var()) - 2 * 0.25) < 0.05


def test_training_stage_lowers_the_loss_and_estimate_clip_reports_statistics():
    from ldptext_precompute.dpbart.train import estimate_clip, tokenize_corpus, train_stage

    adapter = tiny_bert2bert(seed=1)
    ids = tokenize_corpus(adapter, tiny_sentences(60), 10)
    stats = estimate_clip(adapter, ids, 10, n_docs=32, device=torch.device("cpu"))
    assert stats["suggested_clip"] == pytest.approx(stats["std"] / 2)
    first = train_stage(adapter, ids, 10, steps=2, clip=0.2, batch_size=8, progress=False, lr=1e-3,
                        device=torch.device("cpu"))
    later = train_stage(adapter, ids, 10, steps=40, clip=0.2, batch_size=8, progress=False, lr=1e-3,
                        device=torch.device("cpu"))
    assert later < first


def test_pipeline_builds_a_signed_bundle_and_resumes(tmp_path):
    from ldptext.bundle import read_bundle

    out, summary, adapter = build_tiny_bundle(tmp_path / "t.ldpb", variant="pr+", epsilon=100.0, delta=1e-5,
                                              steps=2, prune_rounds=2, sign_key=None)
    b = read_bundle(out)  # signed with the developer key, trusted locally
    assert b.mechanism == "dpbart" and b.key_id is not None
    dp = b.manifest["dpbart"]
    assert dp["variant"] == "pr+" and dp["seq_len"] == 10 and dp["trained_for"]["epsilon"] == 100.0
    pruned = np.asarray(b.arrays["pruned"])
    # two rounds, the bundle ships round 1's indices (paper: round k-1 of k)
    assert summary["pruned_per_round"] == [8, 14] and len(pruned) == 8 == dp["n_pruned"]
    for blob in ("encoder.onnx", "decoder_init.onnx", "decoder.onnx", "tokenizer.json"):
        assert len(b.blob(blob)) > 0
    assert b.manifest["provenance"]["onnx_checks"]["fp32_greedy_identical_fraction"] == 1.0
    # resume: every stage is checkpointed, a second run retrains nothing
    logs = []
    from ldptext_precompute.dpbart.build import DPBartBuildConfig, build_dpbart_bundle

    cfg = DPBartBuildConfig(model=adapter.source, public_corpus="tiny", variant="pr+", epsilon=100.0, delta=1e-5,
                            seq_len=10, steps=2, base_steps=2, prune_rounds=2, batch_size=8, eval_sentences=16)
    build_dpbart_bundle(tmp_path / "t2.ldpb", cfg, adapter=tiny_bert2bert(), sentences=tiny_sentences(),
                        work_dir=str(tmp_path / "t.ldpb") + ".work", sign_key=False, progress=False,
                        log=logs.append)
    assert any(m.startswith("resuming after stage prplus") for m in logs)


def test_public_corpus_file_and_wiki_markup_cleaning(tmp_path):
    from ldptext_precompute.dpbart.data import load_public_corpus, strip_wiki_markup

    f = tmp_path / "public.txt"
    f.write_text("The cat sat on the mat. The dog ran home!\nA bird flew.\n", encoding="utf-8")
    c = load_public_corpus(str(f))
    assert c.sentences == ["The cat sat on the mat.", "The dog ran home!", "A bird flew."]
    assert "public.txt" in c.sources
    text = strip_wiki_markup("'''Anarchism''' is a [[political philosophy|philosophy]]{{cite}}<ref>x</ref> "
                             "of [[Liberty]].")
    assert text.split() == ["Anarchism", "is", "a", "philosophy", "of", "Liberty."]
    with pytest.raises(FileNotFoundError):
        load_public_corpus(str(tmp_path / "missing.txt"))


@pytest.mark.slow
def test_cli_builds_from_a_local_model_directory(tmp_path):
    """``ldptext precompute dpbart --model PATH --public-corpus PATH`` on a saved tiny BART."""
    adapter = tiny_bart()
    model_dir = tmp_path / "bart"
    adapter.model.save_pretrained(model_dir)
    (model_dir / "tokenizer.json").write_text(adapter.tokenizer_json, encoding="utf-8")
    corpus = tmp_path / "public.txt"
    corpus.write_text("\n".join(tiny_sentences(60)) + "\n", encoding="utf-8")
    out = tmp_path / "cli.ldpb"
    r = subprocess.run([sys.executable, "-m", "ldptext.cli", "precompute", "dpbart", "--model", str(model_dir),
                        "--public-corpus", str(corpus), "--variant", "clv", "--seq-len", "8", "--clip", "0.3",
                        "--steps", "4", "--threads", "1", "--unsigned", "--eval-every", "2", "--save-every", "2",
                        "--warmup-steps", "1", "--dropout", "0", "--log-file", str(tmp_path / "train.log"),
                        "--out", str(out)],
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, "LDPTEXT_PROGRESS_INTERVAL": "0"})
    assert r.returncode == 0, r.stderr[-2000:]
    info = json.loads(r.stdout)
    assert info["clip"] == 0.3 and info["n_pruned"] == 0 and out.is_file()
    log = (tmp_path / "train.log").read_text(encoding="utf-8")
    assert "eval stage=base step=2 " in log and "eval stage=base step=4 " in log and "bundle written" in log
    # stderr is a pipe, not a terminal: plain status lines with counts and an estimate, no tqdm redraws
    assert "ldptext: dpbart stage 1/2 base (denoising AE): step 1/4 (25%)" in r.stderr
    assert "about " in r.stderr and "ldptext: dpbart stage 1/2 base (denoising AE): done, 4 steps" in r.stderr
    assert "exporting the ONNX graphs and quantizing them to int8" in log


def test_cli_rejects_pr_plus_without_epsilon(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ldptext.cli", "precompute", "dpbart", "--variant", "pr+",
                        "--out", str(tmp_path / "x.ldpb")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "epsilon" in r.stderr


def test_freeze_encoder_trains_only_the_decoder():
    from ldptext_precompute.dpbart.train import tokenize_corpus, train_stage

    adapter = tiny_bert2bert(seed=2)
    ids = tokenize_corpus(adapter, tiny_sentences(30), 10)
    enc_before = [p.detach().clone() for p in adapter.encoder().parameters()]
    dec_before = [p.detach().clone() for p in adapter.model.decoder.parameters()]
    train_stage(adapter, ids, 10, steps=3, clip=0.2, batch_size=4, progress=False, lr=1e-3,
                device=torch.device("cpu"), freeze_encoder=True)
    assert all(torch.equal(a, b) for a, b in zip(enc_before, adapter.encoder().parameters()))
    assert not all(torch.equal(a, b) for a, b in zip(dec_before, adapter.model.decoder.parameters()))
    assert all(p.requires_grad for p in adapter.encoder().parameters())


def test_encoder_ffn_output_projections_can_stay_fp32(exported, tmp_path):
    import onnx

    from ldptext_precompute.dpbart.export import ffn_output_nodes, quantize_int8

    _, graphs, _ = exported
    names = ffn_output_nodes(graphs["encoder"])
    assert names
    out = quantize_int8(graphs["encoder"], tmp_path / "enc.onnx", keep_ffn_output_fp32=True)
    nodes = {n.name: n.op_type for n in onnx.load(str(out)).graph.node}
    assert all(nodes.get(n) == "MatMul" for n in names)
    assert any(t == "MatMulInteger" for t in nodes.values())


def test_stage_resumed_from_a_mid_stage_checkpoint_equals_an_uninterrupted_run():
    """Stop after 5 of 12 steps (state saved), resume in a fresh model: the step count continues and the
    weights equal those of 12 uninterrupted steps (seeded; optimizer, schedule and random states restored)."""
    from ldptext_precompute.dpbart.train import StageHooks, TrainingInterrupted, tokenize_corpus, train_stage

    def run(hooks=None):
        adapter = tiny_bert2bert(seed=2)
        ids = tokenize_corpus(adapter, tiny_sentences(60), 10)
        loss = train_stage(adapter, ids, 10, steps=12, clip=0.2, batch_size=8, lr=1e-3, corrupt=0.15, seed=4,
                           progress=False, device=torch.device("cpu"), cross_lr_mult=3.0, hooks=hooks)
        return adapter, loss

    ref, ref_loss = run()
    saved, evals = [], []
    with pytest.raises(TrainingInterrupted) as stopped:
        run(StageHooks(save=saved.append, should_stop=lambda: len(evals) >= 5,
                       evaluate=lambda step, loss: evals.append(step), eval_every=1))
    assert stopped.value.step == 5 and [s["step"] for s in saved] == [5] and evals == [1, 2, 3, 4, 5]
    resumed, loss = run(StageHooks(resume=saved[-1], evaluate=lambda step, loss: evals.append(step), eval_every=4))
    assert evals[5:] == [8, 12]  # the step count continues from 5
    assert loss == pytest.approx(ref_loss, abs=0)
    for (k, a), (_, b) in zip(ref.model.state_dict().items(), resumed.model.state_dict().items()):
        assert torch.equal(a, b), k


def test_pipeline_resumes_inside_a_stage_after_a_clean_stop(tmp_path):
    from ldptext_precompute.dpbart.build import DPBartBuildConfig, train_model
    from ldptext_precompute.dpbart.train import TrainingInterrupted, tokenize_corpus

    cfg = DPBartBuildConfig(model="tiny", public_corpus="tiny", variant="pr", seq_len=10, steps=4, base_steps=10,
                            prune_rounds=1, batch_size=8, eval_sentences=16)
    ref = tiny_bert2bert()
    ids = tokenize_corpus(ref, tiny_sentences(), 10)
    train_model(ref, cfg, ids, tmp_path / "ref", progress=False, log=lambda m: None)
    work, calls, logs = tmp_path / "work", [], []

    def stop_at_7():
        calls.append(1)
        return len(calls) == 7

    adapter = tiny_bert2bert()
    with pytest.raises(TrainingInterrupted):
        train_model(adapter, cfg, ids, work, progress=False, log=logs.append, should_stop=stop_at_7,
                    eval_ids=ids[:8], eval_every=5, save_every=3)
    assert (work / "base.partial.ckpt").is_file() and not (work / "base.json").exists()
    assert any(m.startswith("eval stage=base step=5 ") and "bleu_eps_inf=" in m for m in logs)
    adapter = tiny_bert2bert()
    state = train_model(adapter, cfg, ids, work, progress=False, log=logs.append)
    assert "resuming stage base at step 7" in logs and not (work / "base.partial.ckpt").exists()
    assert state.stage == "prune-1" and state.pruned_history
    for (k, a), (_, b) in zip(ref.model.state_dict().items(), adapter.model.state_dict().items()):
        assert torch.equal(a, b), k


@pytest.mark.parametrize("family", ["bert2bert", "bart"])
def test_set_dropout_reaches_every_dropout_layer(family):
    from ldptext_precompute.dpbart.build import set_dropout

    adapter = tiny_bert2bert() if family == "bert2bert" else tiny_bart()
    assert set_dropout(adapter.model, 0.3) > 0
    for m in adapter.model.modules():
        if isinstance(m, torch.nn.Dropout):
            assert m.p == 0.3
        for attr in ("dropout", "attention_dropout", "activation_dropout"):
            if isinstance(getattr(m, attr, None), float):
                assert getattr(m, attr) == 0.3


def test_identity_lm_head_transform_for_a_bert_decoder_without_mlm_head():
    from ldptext_precompute.dpbart.model import identity_lm_head_transform

    adapter = tiny_bert2bert()
    assert identity_lm_head_transform(adapter.model)
    dense = adapter.model.decoder.cls.predictions.transform.dense
    assert torch.equal(dense.weight, torch.eye(32)) and not dense.bias.any()
    assert not identity_lm_head_transform(tiny_bart().model)  # no such transform: left alone


def test_public_mix_adds_packaged_public_text_and_keeps_the_wiki_held_out_sentences():
    from ldptext_precompute.dpbart.data import load_public_corpus, split_holdout

    wiki, mix = load_public_corpus("wiki-sample"), load_public_corpus("public-mix")
    assert mix.holdout_pool == len(wiki.sentences) and mix.sentences[: len(wiki.sentences)] == wiki.sentences
    assert len(mix.sentences) > 1.5 * len(wiki.sentences)
    assert {"political_data.csv", "guardian_headlines.csv.bz2"} <= set(mix.sources)
    train_w, held_w = split_holdout(wiki, 100, 0)
    train_m, held_m = split_holdout(mix, 100, 0)
    assert held_m == held_w  # comparable held-out BLEU between the two corpora
    assert not set(held_m) & set(train_m) and len(train_m) == len(mix.sentences) - 100
    # the evaluation data never trains the model
    assert not any("rotten" in name or "polarity" in name for name in mix.sources)


def test_init_weights_start_training_and_enter_the_fingerprint_by_content(tmp_path):
    from ldptext_precompute.dpbart.build import DPBartBuildConfig, _manifest_build_config, load_init_weights

    donor = tiny_bert2bert()
    with torch.no_grad():
        for p in donor.model.parameters():
            p.add_(0.01)
    f = tmp_path / "start.pt"
    torch.save(donor.model.state_dict(), f)
    fresh = tiny_bert2bert()
    load_init_weights(fresh, f)
    for (k, a), (_, b) in zip(donor.model.state_dict().items(), fresh.model.state_dict().items()):
        assert torch.equal(a, b), k
    base = DPBartBuildConfig(model="tiny", public_corpus="tiny")
    cfg = DPBartBuildConfig(model="tiny", public_corpus="tiny", init_weights=str(f))
    cfg.validate()
    assert cfg.fingerprint() != base.fingerprint()
    g = tmp_path / "copy.pt"
    g.write_bytes(f.read_bytes())
    assert DPBartBuildConfig(model="tiny", public_corpus="tiny", init_weights=str(g)).fingerprint() == \
        cfg.fingerprint()
    meta = _manifest_build_config(cfg)["init_weights"]
    assert meta["file"] == "start.pt" and len(meta["sha256"]) == 64 and str(tmp_path) not in str(meta)
    bad = tmp_path / "bad.pt"
    torch.save({"nope": torch.zeros(1)}, bad)
    with pytest.raises(ValueError, match="do not fit"):
        load_init_weights(tiny_bert2bert(), bad)
    with pytest.raises(ValueError, match="not found"):
        DPBartBuildConfig(model="tiny", public_corpus="tiny", init_weights=str(tmp_path / "none.pt")).validate()


def test_batch_seed_changes_the_batches_but_not_the_held_out_split():
    from ldptext_precompute.dpbart.build import DPBartBuildConfig, _batch_seed, public_data

    base = DPBartBuildConfig(model="tiny", public_corpus="tiny", eval_sentences=16)
    other = DPBartBuildConfig(model="tiny", public_corpus="tiny", eval_sentences=16, batch_seed=1)
    assert _batch_seed(base) == 0 and _batch_seed(other) == 1
    assert base.fingerprint() != other.fingerprint()
    # unset, the fingerprint is the one older checkpoints carry
    assert DPBartBuildConfig(model="tiny", public_corpus="tiny", eval_sentences=16, batch_seed=None
                             ).fingerprint() == base.fingerprint()
    adapter = tiny_bert2bert()
    a, b = public_data(adapter, base, tiny_sentences()), public_data(adapter, other, tiny_sentences())
    assert a.eval_ids == b.eval_ids and a.train_ids == b.train_ids
