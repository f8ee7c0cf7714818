"""The DP-BART bundle schema, defined once: what ``ldptext precompute dpbart`` writes and
:class:`ldptext.dpbart.Rewriter` reads.

A ``dpbart`` bundle holds

* the manifest section ``"dpbart"``: :class:`DPBartConfig` (:meth:`DPBartConfig.manifest_section`);
* the blobs :data:`BLOBS`: three ONNX graphs (:data:`GRAPHS`) and the ``tokenizers`` JSON;
* the array :data:`PRUNED_ARRAY`: the pruned hidden indices P (int64, shape (|P|,); may be absent
  in bundles without pruning).

The encoder input layout ``[bos] content [eos] pad…`` of fixed length L (:func:`encoder_row`) is
part of the contract too: the model is trained on exactly what the runtime feeds it.

Mechanism: Igamberdiev & Habernal 2023, *DP-BART for Privatized Text Rewriting under Local
Differential Privacy* (Findings of ACL), as presented in Igamberdiev 2023, *Differentially Private
Methods in NLP* (PhD thesis, TU Darmstadt), §6.3.3–6.3.5: the guarantee depends only on L, d, |P| and
C, all recorded here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from .errors import BundleFormatError

if TYPE_CHECKING:  # pragma: no cover
    from .bundle import Bundle

__all__ = ["MECHANISM", "SECTION", "GRAPHS", "BLOBS", "PRUNED_ARRAY", "SpecialTokens", "DPBartConfig",
           "content_capacity", "encoder_row"]

MECHANISM = "dpbart"
#: manifest key of the DP-BART section
SECTION = "dpbart"
#: the ONNX graphs, each stored as the blob ``<name>.onnx``
GRAPHS = ("encoder", "decoder_init", "decoder")
#: every blob a dpbart bundle ships
BLOBS = tuple(f"{g}.onnx" for g in GRAPHS) + ("tokenizer.json",)
#: name of the array of pruned hidden indices
PRUNED_ARRAY = "pruned"
#: keys the manifest section must have (older optional keys: family, quantization, n_pruned, trained_for)
REQUIRED = ("seq_len", "hidden", "clip", "variant", "max_output_tokens", "n_layers", "heads", "head_dim",
            "special")


@dataclass(frozen=True, kw_only=True)
class SpecialTokens:
    """Token ids of the encoder input format and of decoding.

    Attributes
    ----------
    pad : int
        Padding of the encoder input up to L.
    bos : int or None
        First encoder token (``None`` for models without one, e.g. T5).
    eos : int
        Last content token of the encoder input, and the end of a decoded sequence.
    decoder_start : int
        First decoder input token.
    """

    pad: int
    bos: int | None
    eos: int
    decoder_start: int

    def as_dict(self) -> dict:
        """The manifest form: ``{"pad", "bos", "eos", "decoder_start"}``."""
        return {"pad": self.pad, "bos": self.bos, "eos": self.eos, "decoder_start": self.decoder_start}


@dataclass(frozen=True, kw_only=True)
class DPBartConfig:
    """The ``dpbart`` manifest section plus the pruned indices: everything the runtime needs besides
    the graphs and the tokenizer.

    Attributes
    ----------
    variant : str
        ``"clv"``, ``"pr"`` or ``"pr+"``.
    seq_len : int
        L, the fixed number of encoder positions.
    hidden : int
        d, the encoder output width.
    clip : float
        C: every released value lies in [−C, C].
    max_output_tokens : int
        Fixed maximum number of decoding steps (never derived from the input).
    n_layers, heads, head_dim : int
        Decoder layers, attention heads and head size: the shapes of the past key/values.
    special : SpecialTokens
        Encoder-format and decoding token ids.
    pruned : tuple of int
        P, sorted distinct indices in [0, d): zero in every release.
    family : str or None
        Model family (``"bert2bert"``, ``"bart"``, ``"t5"``); informational.
    quantization : str
        ``"int8"`` or ``"none"``; informational.
    trained_for : dict or None
        PR+: the (ε, δ, mechanism) the decoder was trained for; informational.
    """

    variant: str
    seq_len: int
    hidden: int
    clip: float
    max_output_tokens: int
    n_layers: int
    heads: int
    head_dim: int
    special: SpecialTokens
    pruned: tuple[int, ...] = ()
    family: str | None = None
    quantization: str = "none"
    trained_for: dict | None = None

    @property
    def capacity(self) -> int:
        """Content tokens that fit in one release: L minus the bos/eos positions."""
        return content_capacity(self.seq_len, self.special.bos is not None)

    def manifest_section(self) -> dict:
        """The manifest's ``"dpbart"`` section (JSON-ready; the pruned indices go in an array).

        Returns
        -------
        dict
            ``variant, seq_len, hidden, clip, max_output_tokens, n_layers, heads, head_dim, family,
            quantization, special, n_pruned, trained_for``.
        """
        return {"variant": self.variant, "seq_len": self.seq_len, "hidden": self.hidden, "clip": self.clip,
                "max_output_tokens": self.max_output_tokens, "n_layers": self.n_layers, "heads": self.heads,
                "head_dim": self.head_dim, "family": self.family, "quantization": self.quantization,
                "special": self.special.as_dict(), "n_pruned": len(self.pruned), "trained_for": self.trained_for}

    def arrays(self) -> dict[str, np.ndarray]:
        """The bundle arrays: ``{"pruned": np.ndarray of int64, shape (|P|,)}``."""
        return {PRUNED_ARRAY: np.asarray(self.pruned, dtype=np.int64).reshape(-1)}

    @classmethod
    def from_manifest(cls, section: Any, pruned: np.ndarray | Sequence[int] = ()) -> "DPBartConfig":
        """Parse and validate a manifest section and the pruned indices.

        Parameters
        ----------
        section : Any
            ``manifest["dpbart"]`` of a verified bundle.
        pruned : np.ndarray or sequence of int, shape (|P|,)
            The bundle's pruned indices.

        Returns
        -------
        DPBartConfig

        Raises
        ------
        BundleFormatError
            The section is missing, lacks a required key or has a malformed value, or the pruned
            indices are out of [0, d), repeated or not one-dimensional.
        """
        if not isinstance(section, dict) or any(k not in section for k in REQUIRED):
            raise BundleFormatError("dpbart bundle manifest is incomplete")
        try:
            sp = section["special"]
            special = SpecialTokens(pad=int(sp["pad"]), bos=None if sp.get("bos") is None else int(sp["bos"]),
                                    eos=int(sp["eos"]), decoder_start=int(sp["decoder_start"]))
            ints = {k: int(section[k]) for k in ("seq_len", "hidden", "max_output_tokens", "n_layers", "heads",
                                                 "head_dim")}
            clip = float(section["clip"])
            variant = str(section["variant"])
            trained_for = section.get("trained_for")
            if trained_for is not None and not isinstance(trained_for, dict):
                raise TypeError("trained_for")
        except (KeyError, TypeError, ValueError, AttributeError):
            raise BundleFormatError("dpbart bundle manifest is malformed") from None
        p = np.asarray(pruned, dtype=np.int64)
        if p.ndim != 1 or (p.size and (p.min() < 0 or p.max() >= ints["hidden"] or len(np.unique(p)) != p.size)):
            raise BundleFormatError("dpbart bundle has invalid pruned indices")
        family = section.get("family")
        return cls(variant=variant, clip=clip, special=special, pruned=tuple(int(j) for j in p),
                   family=None if family is None else str(family),
                   quantization=str(section.get("quantization") or "none"), trained_for=trained_for, **ints)

    @classmethod
    def from_bundle(cls, bundle: "Bundle") -> "DPBartConfig":
        """The configuration of a verified ``dpbart`` bundle (see :meth:`from_manifest`).

        Parameters
        ----------
        bundle : Bundle
            Opened by :func:`ldptext.runtime.open_bundle`.

        Returns
        -------
        DPBartConfig

        Raises
        ------
        BundleFormatError
            As :meth:`from_manifest`.
        """
        pruned = bundle.array(PRUNED_ARRAY) if PRUNED_ARRAY in bundle.arrays else np.zeros(0, np.int64)
        return cls.from_manifest(bundle.manifest.get(SECTION), pruned)


def content_capacity(seq_len: int, has_bos: bool) -> int:
    """How many content tokens fit in L positions next to ``[bos]`` (if any) and ``[eos]``.

    Parameters
    ----------
    seq_len : int
        L.
    has_bos : bool
        Whether the format starts with a bos token.

    Returns
    -------
    int
        L − 1 − (1 if bos).
    """
    return int(seq_len) - 1 - (1 if has_bos else 0)


def encoder_row(content: Sequence[int], *, seq_len: int, pad: int, bos: int | None,
                eos: int) -> tuple[list[int], list[int]]:
    """One fixed-length encoder input and its attention mask: ``[bos] content [eos] pad…``.

    Parameters
    ----------
    content : sequence of int
        Content token ids (at most :func:`content_capacity`).
    seq_len : int
        L.
    pad, bos, eos : int (bos may be None)
        Special token ids.

    Returns
    -------
    ids : list of int, length L
    mask : list of int, length L
        1 over ``[bos] content [eos]``, 0 over the padding.

    Raises
    ------
    ValueError
        The content does not fit in L positions.
    """
    ids = ([bos] if bos is not None else []) + [int(t) for t in content] + [eos]
    if len(ids) > seq_len:
        raise ValueError("content longer than the sequence length")
    return ids + [pad] * (seq_len - len(ids)), [1] * len(ids) + [0] * (seq_len - len(ids))
