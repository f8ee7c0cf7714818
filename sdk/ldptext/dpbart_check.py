"""The one check of a DP-BART bundle: what :class:`ldptext.dpbart.Rewriter` (``Rewriter.load``,
``ldptext rewrite``), ``ldptext bundle verify`` and ``ldptext bundle sign`` all run, so that each of
them refuses exactly the same bundles.

:func:`open_checked` parses the ``"dpbart"`` section (:class:`ldptext.dpbart_schema.DPBartConfig`),
checks its statements against the arrays, loads the tokenizer and the three ONNX graphs and runs
them on the shapes the runtime will feed:

* the section: L, d, layers, heads, head size and ``max_output_tokens`` positive, C finite and > 0,
  room for at least one content token and one unpruned hidden index; the stated ``n_pruned`` (when
  present) is |P|, the length of the array ``pruned`` (whose indices are distinct and in [0, d));
* the graphs load; the decoder takes one token, 2·layers past key/values and the cross key/values
  :file:`decoder_init` returns, and returns the logits and 2·layers present key/values;
* the encoder, on one input of length L (``[bos] [eos] pad…``), returns shape (1, L, d);
* one decoder step on that output, from ``decoder_start`` with an empty past of shape
  (1, heads, 0, head_dim), returns one row of next-token scores and present key/values of shape
  (1, heads, 1, head_dim); the special token ids are below the number of scores;
* one decoder step at the **last position decoding can reach** (a past of ``max_output_tokens`` − 1
  positions) runs: the stated output limit is within the decoder's positions (its position
  embedding), so a rewrite never fails half-way with an ONNX Runtime error. The key/value cache this
  step needs is what one greedy rewrite needs; a statement that would need more than
  :data:`MAX_CACHE_BYTES` is refused before anything is allocated.

A failure raises a :class:`~ldptext.errors.BundleError` subclass (``BundleFormatError`` for a
malformed section, tokenizer or graph; ``ParameterMismatchError`` for a statement the graphs or the
arrays contradict), never an ONNX Runtime error.

Mechanism: Igamberdiev & Habernal 2023, *DP-BART for Privatized Text Rewriting under Local
Differential Privacy* (Findings of ACL), as presented in Igamberdiev 2023, *Differentially Private
Methods in NLP* (PhD thesis, TU Darmstadt), §6.3.3–6.3.5.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .dpbart_schema import GRAPHS, DPBartConfig, encoder_row
from .errors import BundleFormatError, ParameterMismatchError
from .tokenization import TextTokenizer

if TYPE_CHECKING:  # pragma: no cover
    from .bundle import Bundle

__all__ = ["CheckedDPBart", "open_checked", "onnx_session", "MAX_CACHE_BYTES"]

#: The largest key/value cache (bytes, float32) one chunk's greedy decoding up to
#: ``max_output_tokens`` may need: 512 MiB (BART-large with 1,024 output positions needs about 100 MiB).
MAX_CACHE_BYTES = 512 * 2 ** 20


def onnx_session(model: bytes | str | os.PathLike, *, threads: int | None = None) -> Any:
    """An ONNX Runtime CPU session with the project's options: the one place they are set.

    Parameters
    ----------
    model : bytes, str or os.PathLike
        The serialised graph, or a path to it.
    threads : int or None
        Intra-op threads (inter-op: 1); ``None`` leaves ONNX Runtime's own choice.

    Returns
    -------
    onnxruntime.InferenceSession
        On the CPU execution provider, logging only errors.
    """
    import onnxruntime as ort

    opts = ort.SessionOptions()
    if threads:
        opts.intra_op_num_threads = int(threads)
        opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    src = bytes(model) if isinstance(model, (bytes, bytearray, memoryview)) else str(model)
    return ort.InferenceSession(src, sess_options=opts, providers=["CPUExecutionProvider"])


@dataclass(frozen=True)
class CheckedDPBart:
    """What :func:`open_checked` opened and checked: everything a runtime needs.

    Attributes
    ----------
    config : DPBartConfig
        The section and the pruned indices.
    encoder, decoder_init, decoder : onnxruntime.InferenceSession
        The three graphs.
    decoder_inputs : tuple of str
        The decoder graph's input names, in order: the token, the past key/values, the cross
        key/values.
    tokenizer : TextTokenizer
        The bundle's tokenizer.
    """

    config: DPBartConfig
    encoder: Any
    decoder_init: Any
    decoder: Any
    decoder_inputs: tuple[str, ...]
    tokenizer: TextTokenizer


def _quiet_run_options() -> Any:
    """Run options that keep ONNX Runtime from logging a failing check run to stderr (the check
    raises its own error instead)."""
    import onnxruntime as ort

    ro = ort.RunOptions()
    ro.log_severity_level = 4
    return ro


def check_section(cfg: DPBartConfig, stated_n_pruned: Any) -> None:
    """The section's own statements: positive sizes, a finite C > 0, room for content and for an
    unpruned index, and ``n_pruned`` = |P|.

    Parameters
    ----------
    cfg : DPBartConfig
        Parsed by :meth:`DPBartConfig.from_bundle` (the pruned indices are distinct and in [0, d)).
    stated_n_pruned : Any
        The section's ``n_pruned`` (``None`` when absent: older bundles).

    Raises
    ------
    BundleFormatError
        A size is not positive, C is not finite and > 0, or no content token fits in L.
    ParameterMismatchError
        ``n_pruned`` is not |P|, or every hidden index is pruned.
    """
    for name in ("seq_len", "hidden", "n_layers", "heads", "head_dim", "max_output_tokens"):
        if getattr(cfg, name) < 1:
            raise BundleFormatError(f"dpbart {name} must be positive, got {getattr(cfg, name)}")
    if not (math.isfinite(cfg.clip) and cfg.clip > 0):
        raise BundleFormatError(f"dpbart clip must be finite and > 0, got {cfg.clip!r}")
    if cfg.capacity < 1:
        raise BundleFormatError(f"dpbart seq_len {cfg.seq_len} leaves no position for content")
    n_pruned = len(cfg.pruned)
    if stated_n_pruned is not None and (isinstance(stated_n_pruned, bool) or stated_n_pruned != n_pruned):
        raise ParameterMismatchError(f"manifest n_pruned {stated_n_pruned!r} is not |P| = {n_pruned} "
                                     f"(array 'pruned')")
    if n_pruned >= cfg.hidden:
        raise ParameterMismatchError(f"all {cfg.hidden} hidden indices are pruned: nothing is released")


def open_checked(bundle: "Bundle", *, threads: int | None = None) -> CheckedDPBart:
    """Open a ``dpbart`` bundle and run every check of the mechanism (see the module docstring).

    The one door of DP-BART: :class:`ldptext.dpbart.Rewriter` is built from its result, and
    ``bundle verify`` / ``bundle sign`` (:meth:`ldptext.dpbart.Rewriter.check_bundle`) run it too.

    Parameters
    ----------
    bundle : Bundle
        A bundle whose structure and hashes were verified (trust need not be decided).
    threads : int or None
        ONNX Runtime intra-op threads of each graph's inference (default: ONNX Runtime's choice).

    Returns
    -------
    CheckedDPBart

    Raises
    ------
    BundleFormatError
        The section, the pruned indices, the tokenizer or a graph is malformed, or the stated output
        limit needs a key/value cache over :data:`MAX_CACHE_BYTES`.
    ParameterMismatchError
        A statement (L, d, |P|, layers, heads, head size, ``max_output_tokens``, a special id) is not
        what the arrays and the graphs realise, or a graph is not the one its name says.
    """
    section = bundle.manifest.get("dpbart")
    cfg = DPBartConfig.from_bundle(bundle)
    check_section(cfg, section.get("n_pruned"))
    tokenizer = TextTokenizer.from_bundle(bundle)
    sessions = {}
    for name in GRAPHS:
        blob = bundle.blob(f"{name}.onnx")  # a missing blob: BundleFormatError
        try:
            sessions[name] = onnx_session(blob, threads=threads)
        except Exception as e:  # ONNX Runtime raises its own types for a malformed graph
            raise BundleFormatError(f"bundle graph {name}.onnx cannot be loaded: {type(e).__name__}") from None
    enc, init, dec = sessions["encoder"], sessions["decoder_init"], sessions["decoder"]
    dec_inputs = tuple(i.name for i in dec.get_inputs())
    quiet = _quiet_run_options()

    # the encoder on one input of length L, exactly as the runtime builds it
    sp = cfg.special
    ids, mask = encoder_row([], seq_len=cfg.seq_len, pad=sp.pad, bos=sp.bos, eos=sp.eos)
    try:
        z = enc.run(None, {"input_ids": np.asarray([ids], np.int64), "attention_mask": np.asarray([mask], np.int64)},
                    quiet)[0]
    except Exception as e:  # ONNX Runtime raises its own types
        raise ParameterMismatchError(f"the encoder graph does not run on an input of length L={cfg.seq_len}: "
                                     f"{type(e).__name__}") from None
    if tuple(np.shape(z)) != (1, cfg.seq_len, cfg.hidden):
        raise ParameterMismatchError(f"the encoder graph returns shape {tuple(np.shape(z))}, but the manifest "
                                     f"states L={cfg.seq_len}, d={cfg.hidden}")

    # the cross key/values, and the decoder's interface
    try:
        cross = [np.asarray(c) for c in init.run(None, {"z": np.asarray(z, dtype=np.float32)}, quiet)]
    except Exception as e:
        raise ParameterMismatchError(f"the decoder_init graph does not run on the encoder's output: "
                                     f"{type(e).__name__}") from None
    n_past = 2 * cfg.n_layers
    if len(dec_inputs) != 1 + n_past + len(cross) or len(dec.get_outputs()) != 1 + n_past:
        raise ParameterMismatchError(
            f"the decoder graph takes {len(dec_inputs)} inputs and returns {len(dec.get_outputs())} outputs, "
            f"but {cfg.n_layers} layers with {len(cross)} cross key/values need {1 + n_past + len(cross)} and "
            f"{1 + n_past}")

    def step(past_len: int) -> list[np.ndarray]:
        past = [np.zeros((1, cfg.heads, past_len, cfg.head_dim), dtype=np.float32) for _ in range(n_past)]
        feeds = dict(zip(dec_inputs, [np.array([[sp.decoder_start]], dtype=np.int64), *past, *cross]))
        return [np.asarray(o) for o in dec.run(None, feeds, quiet)]

    # one step from the start token with an empty past
    try:
        out = step(0)
    except Exception as e:
        raise ParameterMismatchError(f"the decoder graphs do not run on the encoder's output with the stated "
                                     f"{cfg.n_layers} layers, {cfg.heads} heads of size {cfg.head_dim}: "
                                     f"{type(e).__name__}") from None
    logits = out[0]
    if logits.ndim < 2 or logits.shape[0] != 1 or logits.shape[-1] < 2:
        raise ParameterMismatchError(f"the decoder step returns shape {logits.shape}, not one row of "
                                     f"next-token scores")
    want = (1, cfg.heads, 1, cfg.head_dim)
    bad = [tuple(p.shape) for p in out[1:] if tuple(p.shape) != want]
    if bad:
        raise ParameterMismatchError(f"the decoder step returns key/values of shape {bad[0]}, but the manifest "
                                     f"states {cfg.heads} heads of size {cfg.head_dim} ({want})")
    vocab = int(logits.shape[-1])
    for name, tok in sp.as_dict().items():
        if tok is not None and not 0 <= tok < vocab:
            raise ParameterMismatchError(f"special token {name} = {tok} is not among the decoder's {vocab} tokens")

    # the last position decoding can reach: max_output_tokens steps, the last with that many − 1 past
    last = cfg.max_output_tokens - 1
    if last > 0:
        cache = 2 * n_past * cfg.heads * cfg.head_dim * (last + 1) * 4  # the past in, the present out
        if cache > MAX_CACHE_BYTES:
            raise BundleFormatError(f"dpbart max_output_tokens {cfg.max_output_tokens} needs a key/value cache "
                                    f"of {cache / 2 ** 20:.0f} MiB per chunk, more than the "
                                    f"{MAX_CACHE_BYTES // 2 ** 20} MiB a bundle may ask for")
        try:
            step(last)
        except Exception as e:
            raise ParameterMismatchError(f"dpbart max_output_tokens {cfg.max_output_tokens} is past the decoder's "
                                         f"positions: a step at position {last} fails ({type(e).__name__})") from None
    return CheckedDPBart(config=cfg, encoder=enc, decoder_init=init, decoder=dec, decoder_inputs=dec_inputs,
                         tokenizer=tokenizer)
