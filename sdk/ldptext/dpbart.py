"""DP-BART runtime: document-level LDP rewriting on the device (SPEC §3; seed 001 §6.3.3–6.3.5).

Guarantee
---------
Each released chunk (at most L tokens of one document) is (ε, 0)-LDP with ``mechanism="laplace"`` or
(ε, δ)-LDP with ``mechanism="gaussian"`` with respect to **any** two inputs (local DP: the neighbouring
relation is "replace the whole chunk"). The mechanism is: encoder (int8 ONNX) → clip every value to
[−C, C] → set the bundle's pruned hidden indices to exactly 0 → add discrete noise from the CSPRNG to
the other n = L·(d − |P|) coordinates (``ldptext.noise``; Δ₁ = 2Cn, Δ₂ = 2C√n) → decoder (ONNX) with
past key/values. Everything after the noise is post-processing. A document split into k chunks is
k releases: the report composes them to (k·ε, k·δ) (basic composition), and the number of chunks
itself (≈ length / L) is visible. With ``long="truncate"`` the tail beyond L is dropped and
``report.truncated`` is True.

Length does not leak through the model: the encoder always gets L positions (padded), the
cross-attention mask is all ones over those L positions (no mask input exists in the decoder graph), and
the maximum output length is fixed by the bundle, never derived from the input.

What is not protected: the number of chunks (with ``long="split"``), timing side channels of the
decoder (decoding stops early when every sequence has ended), and anything about the text that the
caller reveals by other means. ``epsilon=math.inf`` adds no noise and is for evaluation only (the report
says ``private=False``).

Thread safety: a ``Rewriter`` is immutable after ``load``; ONNX Runtime sessions allow concurrent
``run`` calls, the tokenizer is read-only, and ``ldptext.rng.Generator`` serialises its draws with a
lock. Several threads may call ``rewrite`` / ``rewrite_batch`` on one ``Rewriter`` at once.

Runtime dependencies: numpy, onnxruntime, tokenizers and the project's own modules. No torch.
"""
from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from . import noise as _noise
from .errors import BundleError, BundleFormatError, InputError, ParameterError

__all__ = ["Rewriter", "Rewritten", "DPBartReport", "LONG_POLICIES"]

LONG_POLICIES = ("split", "truncate", "refuse")
_BLOBS = ("encoder.onnx", "decoder_init.onnx", "decoder.onnx", "tokenizer.json")


@dataclass(frozen=True)
class DPBartReport:
    """What one DP-BART rewrite guarantees.

    ``epsilon``/``delta``: the guarantee of *each* chunk. ``total_epsilon``/``total_delta``: the
    composed guarantee of the whole document over ``chunks`` releases (k·ε, k·δ). ``n``: released
    informative coordinates per chunk, L·(d − |P|). ``sensitivity``: Δ₁ (Laplace) or Δ₂ (Gaussian).
    ``scale``: b (Laplace) or σ (Gaussian) actually used, in the units of z; ``sigma_analytic``: the
    continuous analytic-Gaussian σ for reference (the discrete noise uses ≥ that). ``grid_unit``: the
    grid of the discrete noise. ``delta_bound``: the δ proved for the discrete noise (≤ ``delta``).
    """

    mechanism: str
    noise: str
    variant: str
    epsilon: float
    delta: float
    n: int
    seq_len: int
    hidden: int
    n_pruned: int
    clip: float
    sensitivity: float
    scale: float
    sigma_analytic: float | None
    grid_unit: float
    delta_bound: float | None
    chunks: int
    truncated: bool
    total_epsilon: float
    total_delta: float
    private: bool
    beam: int
    max_output_tokens: int
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def sigma(self) -> float | None:
        return self.scale if self.mechanism == "gaussian" else None

    @property
    def b(self) -> float | None:
        return self.scale if self.mechanism == "laplace" else None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["notes"] = list(self.notes)
        d["sigma"], d["b"] = self.sigma, self.b
        return d

    def summary(self) -> str:
        dl = f", δ={self.delta:g}" if self.mechanism == "gaussian" else ""
        return (f"dpbart-{self.variant} {self.mechanism}: ε={self.epsilon:g}{dl} per chunk, {self.chunks} "
                f"chunk(s) → ε={self.total_epsilon:g}, δ={self.total_delta:g}; n={self.n}, C={self.clip:g}, "
                f"Δ={self.sensitivity:.4g}, scale={self.scale:.4g}{' (truncated)' if self.truncated else ''}")


@dataclass(frozen=True)
class Rewritten:
    """A rewritten document: ``text`` may leave the device; ``report`` says what it guarantees."""

    text: str
    report: DPBartReport


class Rewriter:
    """DP-BART rewriter over a signed ``dpbart`` bundle. Create with :meth:`load`."""

    def __init__(self, *, sessions: dict, tokenizer, config: dict, pruned: np.ndarray, rng, manifest: dict,
                 key_id: str | None, ledger=None) -> None:
        self.ledger = ledger
        self._enc, self._init, self._dec = sessions["encoder"], sessions["decoder_init"], sessions["decoder"]
        self._tok = tokenizer
        self._cfg = config
        self._pruned = np.asarray(pruned, dtype=np.int64)
        self._pruned.setflags(write=False)
        self._rng = rng
        self.manifest = manifest
        self.key_id = key_id
        self.seq_len = int(config["seq_len"])
        self.hidden = int(config["hidden"])
        self.clip = float(config["clip"])
        self.variant = str(config["variant"])
        self.max_output_tokens = int(config["max_output_tokens"])
        self._n_layers = int(config["n_layers"])
        self._heads = int(config["heads"])
        self._head_dim = int(config["head_dim"])
        sp = config["special"]
        self._pad, self._bos, self._eos = int(sp["pad"]), sp.get("bos"), int(sp["eos"])
        self._start = int(sp["decoder_start"])
        self._capacity = self.seq_len - 1 - (1 if self._bos is not None else 0)
        self._dec_inputs = [i.name for i in self._dec.get_inputs()]
        self.n = _noise.effective_dim(self.seq_len, self.hidden, len(self._pruned))

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, path: str | os.PathLike, *, trusted_keys=None, allow_unsigned: bool = False,
             seed: int | None = None, threads: int | None = None, ledger=None) -> "Rewriter":
        """Verify and load a ``dpbart`` bundle (signature, key trust, hashes: ``ldptext.bundle``).

        ``ledger`` (an :class:`ldptext.ledger.Ledger`) is charged before any output is returned:
        each ``rewrite_batch`` call is one release of Σ k·ε and Σ k·δ over its documents (k chunks
        each); a refused charge raises ``BudgetExceededError`` and nothing is returned.

        ``seed`` makes the noise reproducible (tests only: NOT private, warns ``SeededModeWarning``).
        ``threads``: ONNX Runtime intra-op threads (default: its own choice).
        """
        import onnxruntime as ort
        from tokenizers import Tokenizer

        from .bundle import read_bundle
        from .rng import Generator

        p = Path(path)
        if not p.is_file():
            raise BundleError(f"bundle file not found: {p}")
        b = read_bundle(p, trusted_keys=trusted_keys, allow_unsigned=allow_unsigned)
        if b.mechanism != "dpbart":
            raise BundleFormatError(f"bundle mechanism is {b.mechanism!r}, expected 'dpbart'")
        cfg = b.manifest.get("dpbart")
        required = ("seq_len", "hidden", "clip", "variant", "max_output_tokens", "n_layers", "heads",
                    "head_dim", "special")
        if not isinstance(cfg, dict) or any(k not in cfg for k in required):
            raise BundleFormatError("dpbart bundle manifest is incomplete")
        pruned = np.asarray(b.array("pruned"), dtype=np.int64) if "pruned" in b.arrays else np.zeros(0, np.int64)
        if pruned.size and (pruned.min() < 0 or pruned.max() >= int(cfg["hidden"]) or
                            len(np.unique(pruned)) != pruned.size):
            raise BundleFormatError("dpbart bundle has invalid pruned indices")
        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads = int(threads)
            opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        sessions = {}
        for name in ("encoder", "decoder_init", "decoder"):
            try:
                sessions[name] = ort.InferenceSession(b.blob(f"{name}.onnx"), sess_options=opts,
                                                      providers=["CPUExecutionProvider"])
            except BundleError:
                raise
            except Exception as e:  # ONNX Runtime raises its own types for a malformed graph
                raise BundleFormatError(f"bundle graph {name}.onnx cannot be loaded: {type(e).__name__}") from None
        try:
            tok = Tokenizer.from_str(b.blob("tokenizer.json").decode("utf-8"))
        except BundleError:
            raise
        except Exception:
            raise BundleFormatError("bundle tokenizer.json cannot be loaded") from None
        tok.no_padding()
        tok.no_truncation()
        rng = Generator(seed=seed) if seed is not None else Generator()
        return cls(sessions=sessions, tokenizer=tok, config=cfg, pruned=pruned, rng=rng,
                   manifest=b.manifest, key_id=b.key_id, ledger=ledger)

    @property
    def pruned(self) -> np.ndarray:
        """Pruned hidden indices P (read-only)."""
        return self._pruned

    # ------------------------------------------------------------------ public API
    def rewrite(self, text: str, *, epsilon: float, delta: float | None = None, mechanism: str = "gaussian",
                beam: int = 1, long: str = "split") -> Rewritten:
        """Rewrite one document with (ε, δ)-LDP per chunk (see the module docstring)."""
        return self.rewrite_batch([text], epsilon=epsilon, delta=delta, mechanism=mechanism, beam=beam,
                                  long=long)[0]

    def rewrite_batch(self, texts: Sequence[str], *, epsilon: float, delta: float | None = None,
                      mechanism: str = "gaussian", beam: int = 1, long: str = "split") -> list[Rewritten]:
        """Rewrite several documents (same order). Each chunk of each document is a separate release
        with its own independent noise."""
        calib, beam, long = self._check(epsilon, delta, mechanism, beam, long)
        if isinstance(texts, str):
            raise InputError("rewrite_batch expects a sequence of strings, not one string")
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise InputError(f"document {i} is not a string ({type(t).__name__})")
        chunk_ids: list[list[int]] = []
        owners: list[int] = []
        truncated: list[bool] = []
        for i, t in enumerate(texts):
            chunks, trunc = self._chunks(t, long, i)
            chunk_ids += chunks
            owners += [i] * len(chunks)
            truncated.append(trunc)
        outputs = self._run_chunks(chunk_ids, calib, beam) if chunk_ids else []
        per_doc: list[list[str]] = [[] for _ in texts]
        for owner, out in zip(owners, outputs):
            per_doc[owner].append(out)
        results = [Rewritten(" ".join(s for s in parts if s),
                             self._report(calib, len(parts), truncated[i], beam))
                   for i, parts in enumerate(per_doc)]
        if self.ledger is not None and any(r.report.chunks for r in results):
            self.ledger.charge(sum(r.report.total_epsilon for r in results),
                               min(1.0, sum(r.report.total_delta for r in results)),
                               label=f"dpbart batch of {len(results)} documents")
        return results

    # ------------------------------------------------------------------ internals
    def _check(self, epsilon, delta, mechanism, beam, long):
        if long not in LONG_POLICIES:
            raise ParameterError(f"long must be one of {LONG_POLICIES}, got {long!r}")
        if isinstance(beam, bool) or not isinstance(beam, (int, np.integer)) or not 1 <= int(beam) <= 64:
            raise ParameterError("beam must be an integer between 1 and 64")
        calib = _noise.calibrate(mechanism, epsilon, delta, clip=self.clip, n=self.n)
        return calib, int(beam), long

    def _chunks(self, text: str, long: str, index: int) -> tuple[list[list[int]], bool]:
        try:
            ids = self._tok.encode(text, add_special_tokens=False).ids
        except Exception:
            raise InputError(f"document {index} could not be tokenized") from None
        cap = self._capacity
        if len(ids) <= cap:
            return [ids], False
        if long == "refuse":
            raise InputError(f"document {index} has {len(ids)} tokens, more than the {cap} that fit in "
                             f"one release (L={self.seq_len}); use long='split' or 'truncate'")
        if long == "truncate":
            return [ids[:cap]], True
        return [ids[i:i + cap] for i in range(0, len(ids), cap)], False

    def encoder_inputs(self, chunks: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
        """Fixed-shape (B, L) encoder input ids and attention mask: ``[bos] content [eos] pad…``.

        The shape depends only on the number of chunks, never on their lengths.
        """
        b = len(chunks)
        ids = np.full((b, self.seq_len), self._pad, dtype=np.int64)
        mask = np.zeros((b, self.seq_len), dtype=np.int64)
        for r, content in enumerate(chunks):
            seq = ([self._bos] if self._bos is not None else []) + list(content) + [self._eos]
            if len(seq) > self.seq_len:
                raise InputError("chunk longer than the sequence length")  # guarded by _chunks
            ids[r, :len(seq)] = seq
            mask[r, :len(seq)] = 1
        return ids, mask

    def decoder_settings(self) -> dict:
        """Everything the decoder is run with; identical for every input (property 3)."""
        return {"cross_attention_mask": "all-ones", "cross_positions": self.seq_len,
                "max_output_tokens": self.max_output_tokens, "decoder_start": self._start,
                "graph_inputs": list(self._dec_inputs)}

    def encode_noised(self, chunks: Sequence[Sequence[int]], calib: _noise.NoiseCalibration) -> np.ndarray:
        """Encoder → clip → prune → discrete noise: the private release z̃ of shape (B, L, d)."""
        return _noise.privatize(self.encoder_outputs(chunks), calib, self._rng, pruned=self._pruned)

    def encoder_outputs(self, chunks: Sequence[Sequence[int]]) -> np.ndarray:
        """Raw encoder output z of shape (B, L, d), float32, one encoder run **per chunk**.

        Each chunk runs alone because the int8 graph quantizes activations dynamically
        (``DynamicQuantizeLinear`` takes one scale from the whole input tensor): in a shared batch,
        another document would change this chunk's z and so its release, breaking the
        per-document guarantee.
        """
        ids, mask = self.encoder_inputs(chunks)
        out = np.empty((len(chunks), self.seq_len, self.hidden), dtype=np.float32)
        for r in range(len(chunks)):
            out[r] = self._enc.run(None, {"input_ids": ids[r:r + 1], "attention_mask": mask[r:r + 1]})[0][0]
        return out

    def _run_chunks(self, chunks, calib, beam) -> list[str]:
        z = self.encode_noised(chunks, calib)
        # one chunk at a time, as in the encoder: the int8 decoder graphs also quantize
        # activations with a scale taken from the whole batch
        if beam == 1:
            seqs = [self._greedy(z[i:i + 1])[0] for i in range(z.shape[0])]
        else:
            seqs = [self._beam(z[i:i + 1], beam) for i in range(z.shape[0])]
        return [self._tok.decode([int(t) for t in s], skip_special_tokens=True) for s in seqs]

    def _empty_past(self, batch: int) -> list[np.ndarray]:
        return [np.zeros((batch, self._heads, 0, self._head_dim), dtype=np.float32)
                for _ in range(2 * self._n_layers)]

    def _step(self, tokens: np.ndarray, past: list[np.ndarray], cross: list[np.ndarray]):
        feeds = dict(zip(self._dec_inputs, [tokens.reshape(-1, 1).astype(np.int64), *past, *cross]))
        out = self._dec.run(None, feeds)
        return out[0], out[1:]

    def _greedy(self, z: np.ndarray) -> list[list[int]]:
        b = z.shape[0]
        cross = self._init.run(None, {"z": z.astype(np.float32)})
        past = self._empty_past(b)
        tokens = np.full(b, self._start, dtype=np.int64)
        done = np.zeros(b, dtype=bool)
        out: list[list[int]] = [[] for _ in range(b)]
        for _ in range(self.max_output_tokens):
            logits, past = self._step(tokens, past, cross)
            nxt = logits.argmax(axis=-1)
            for r in range(b):
                if not done[r]:
                    if nxt[r] == self._eos:
                        done[r] = True
                    else:
                        out[r].append(int(nxt[r]))
            if done.all():
                break
            tokens = np.where(done, self._eos, nxt).astype(np.int64)
        return out

    def _beam(self, z1: np.ndarray, k: int) -> list[int]:
        """Beam search for one chunk (beams as the batch), length-normalised scores."""
        cross1 = self._init.run(None, {"z": z1.astype(np.float32)})
        cross = [np.repeat(c, k, axis=0) for c in cross1]
        past = self._empty_past(k)
        tokens = np.full(k, self._start, dtype=np.int64)
        scores = np.zeros(k)
        scores[1:] = -np.inf  # all beams start identical: keep one alive at first
        hyps: list[list[int]] = [[] for _ in range(k)]
        finished: list[tuple[float, list[int]]] = []
        for step in range(self.max_output_tokens):
            logits, past = self._step(tokens, past, cross)
            logp = logits - logits.max(axis=-1, keepdims=True)
            logp = logp - np.log(np.exp(logp).sum(axis=-1, keepdims=True))
            cand = (scores[:, None] + logp).reshape(-1)
            order = np.argsort(-cand, kind="stable")
            vocab = logp.shape[-1]
            new_src, new_tok, new_scores = [], [], []
            for flat in order:
                if not math.isfinite(cand[flat]):
                    break
                src, tok = divmod(int(flat), vocab)
                if tok == self._eos:
                    finished.append((cand[flat] / (len(hyps[src]) + 1), hyps[src]))
                else:
                    new_src.append(src)
                    new_tok.append(tok)
                    new_scores.append(cand[flat])
                if len(new_src) == k:
                    break
            if len(finished) >= k or not new_src:
                break
            while len(new_src) < k:  # pad with dead beams
                new_src.append(new_src[0])
                new_tok.append(new_tok[0])
                new_scores.append(-np.inf)
            idx = np.asarray(new_src)
            past = [p[idx] for p in past]
            hyps = [hyps[s] + [t] for s, t in zip(new_src, new_tok)]
            scores = np.asarray(new_scores, dtype=np.float64)
            tokens = np.asarray(new_tok, dtype=np.int64)
            best_possible = scores.max() / (len(hyps[0]) + 1) if np.isfinite(scores).any() else -np.inf
            if len(finished) >= k and max(f[0] for f in finished) >= best_possible:
                break
        if not finished:
            alive = [(scores[i] / max(len(hyps[i]), 1), hyps[i]) for i in range(k) if np.isfinite(scores[i])]
            finished = alive or [(0.0, [])]
        return max(finished, key=lambda f: f[0])[1]

    def _report(self, calib: _noise.NoiseCalibration, chunks: int, truncated: bool, beam: int) -> DPBartReport:
        notes = list(calib.notes)
        if chunks > 1:
            notes.append("document split into chunks: each chunk is a separate release (basic composition); "
                         "the number of chunks is not hidden")
        if truncated:
            notes.append(f"input truncated to the first {self._capacity} tokens")
        return DPBartReport(
            mechanism=calib.mechanism, noise=f"discrete_{calib.mechanism}", variant=self.variant,
            epsilon=calib.epsilon, delta=calib.delta, n=calib.n, seq_len=self.seq_len, hidden=self.hidden,
            n_pruned=len(self._pruned), clip=calib.clip, sensitivity=calib.sensitivity, scale=calib.scale,
            sigma_analytic=calib.sigma_analytic, grid_unit=calib.grid_unit, delta_bound=calib.delta_bound,
            chunks=chunks, truncated=truncated, total_epsilon=calib.epsilon * chunks,
            total_delta=min(1.0, calib.delta * chunks), private=calib.private, beam=beam,
            max_output_tokens=self.max_output_tokens, notes=tuple(notes))


def iter_rewrite(rewriter: Rewriter, texts: Iterable[str], *, batch_size: int = 32, **kwargs):
    """Stream ``Rewritten`` results for an iterable of documents, ``batch_size`` at a time, in order."""
    batch: list[str] = []
    for t in texts:
        batch.append(t)
        if len(batch) >= batch_size:
            yield from rewriter.rewrite_batch(batch, **kwargs)
            batch = []
    if batch:
        yield from rewriter.rewrite_batch(batch, **kwargs)
