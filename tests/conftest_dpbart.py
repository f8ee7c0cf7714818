"""Tiny, randomly initialised seq2seq models and tokenizers for the DP-BART tests.

Built in the test process in well under a second: a word-level tokenizer over a few dozen words and
a 2-layer BERT-to-BERT (or 1-layer BART) with hidden size 32. Never the real MiniLM.
"""
from __future__ import annotations

import json

import torch

WORDS = ("the a cat dog sat on mat ran to house big small red blue green tree saw bird flew over "
         "river and but or is was quick brown fox jumps lazy sleeps under sun moon star night day "
         "secret marker").split()


def tiny_tokenizer_json(specials=("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")) -> str:
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders, normalizers

    vocab = {tok: i for i, tok in enumerate(list(specials) + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=specials[1] if specials[1].startswith("[") else "<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    from tokenizers import AddedToken

    tok.add_special_tokens([AddedToken(s, special=True) for s in specials])
    return tok.to_str()


def tiny_bert2bert(seed: int = 0, hidden: int = 32, layers: int = 2):
    """A random EncoderDecoderModel (BERT encoder + BERT decoder with cross-attention) and its adapter."""
    from transformers import BertConfig, EncoderDecoderConfig, EncoderDecoderModel

    from ldptext_precompute.dpbart.model import Seq2SeqAdapter, bert2bert_special, configure_bert2bert

    torch.manual_seed(seed)
    tj = tiny_tokenizer_json()
    vocab_size = len(json.loads(tj)["model"]["vocab"])
    common = dict(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=2,
                  intermediate_size=2 * hidden, max_position_embeddings=64, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0)
    enc = BertConfig(**common)
    dec = BertConfig(**common, is_decoder=True, add_cross_attention=True)
    model = EncoderDecoderModel(config=EncoderDecoderConfig.from_encoder_decoder_configs(enc, dec))
    special = bert2bert_special(tj)
    configure_bert2bert(model, special)
    # make the random encoder output span a realistic range for the clip constant
    return Seq2SeqAdapter(model.eval(), tj, special, "bert2bert", "tiny-random-bert2bert")


def tiny_bart(seed: int = 0, hidden: int = 32):
    """A random 1+1-layer BART and its adapter."""
    from transformers import BartConfig, BartForConditionalGeneration

    from ldptext_precompute.dpbart.model import Seq2SeqAdapter, SpecialIds

    torch.manual_seed(seed)
    tj = tiny_tokenizer_json(("<s>", "<unk>", "</s>", "<pad>", "<mask>"))
    vocab = json.loads(tj)["model"]["vocab"]
    cfg = BartConfig(vocab_size=len(vocab), d_model=hidden, encoder_layers=1, decoder_layers=1,
                     encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=2 * hidden,
                     decoder_ffn_dim=2 * hidden, max_position_embeddings=64, dropout=0.0,
                     attention_dropout=0.0, activation_dropout=0.0, pad_token_id=vocab["<pad>"],
                     bos_token_id=vocab["<s>"], eos_token_id=vocab["</s>"],
                     decoder_start_token_id=vocab["</s>"], forced_eos_token_id=None)
    model = BartForConditionalGeneration(cfg).eval()
    special = SpecialIds(pad=vocab["<pad>"], bos=vocab["<s>"], eos=vocab["</s>"],
                         decoder_start=vocab["</s>"], mask=vocab["<mask>"])
    return Seq2SeqAdapter(model, tj, special, "bart", "tiny-random-bart")


def tiny_sentences(n: int = 120, seed: int = 0) -> list[str]:
    """Random word sequences over the tiny vocabulary (never the marker words)."""
    import random

    r = random.Random(seed)
    words = [w for w in WORDS if w not in ("secret", "marker")]
    return [" ".join(r.choice(words) for _ in range(r.randint(2, 9))) for _ in range(n)]


def build_tiny_bundle(path, *, family: str = "bert2bert", variant: str = "pr", quantize: str | None = "int8",
                      seq_len: int = 10, steps: int = 0, sign_key=False, seed: int = 0, **cfg_kwargs):
    """A dpbart bundle over a tiny random model (no training unless ``steps``); returns (path, summary, adapter)."""
    from ldptext_precompute.dpbart.build import DPBartBuildConfig, build_dpbart_bundle

    adapter = tiny_bert2bert(seed) if family == "bert2bert" else tiny_bart(seed)
    cfg = DPBartBuildConfig(model=adapter.source, public_corpus="tiny", variant=variant, seq_len=seq_len,
                            steps=steps, base_steps=steps, prune_rounds=cfg_kwargs.pop("prune_rounds", 2),
                            quantize=quantize, batch_size=8, eval_sentences=16, seed=seed, **cfg_kwargs)
    out, summary = build_dpbart_bundle(path, cfg, adapter=adapter, sentences=tiny_sentences(),
                                       work_dir=str(path) + ".work", sign_key=sign_key, progress=False,
                                       log=lambda m: None)
    return out, summary, adapter


def single_thread_torch():
    """Context: one torch thread (the CI machine has 2 cores shared with other jobs)."""
    import contextlib

    @contextlib.contextmanager
    def _ctx():
        old = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(old)
    return _ctx()
