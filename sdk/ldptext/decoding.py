"""Greedy and beam-search decoding, written once for every backend.

Each backend (the ONNX graphs of :class:`ldptext.dpbart.Rewriter`, the PyTorch reference of the
precompute side, the PyTorch baseline of the benchmark) supplies a *step function*: a closure that
holds its own state (past key/values, or the whole prefix for a full recompute), takes the tokens
chosen at the previous step and returns the next-token logits. The loops below own everything else:
the start token, when a sequence ends, padding finished rows with ``eos``, the fixed maximum length.

Privacy: decoding is post-processing of a released (noised) encoder output, so nothing here changes
a guarantee. Its one privacy-relevant property is that the number of steps is bounded by
``max_len``, which the caller fixes independently of the input (the output length must not be
derived from the input: Igamberdiev & Habernal 2023, *DP-BART for Privatized Text Rewriting under
Local Differential Privacy* (Findings of ACL), as presented in Igamberdiev 2023, *Differentially
Private Methods in NLP* (PhD thesis, TU Darmstadt), §6.3.3–6.3.5).

Runtime dependencies: numpy only (the PyTorch reference converts its logits to numpy).
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

__all__ = ["StepFunction", "greedy", "beam_search"]

#: ``step(tokens) -> logits``: tokens of shape (B,) int64 (the start token at the first call, then the
#: tokens chosen at the previous step), logits of shape (B, V) for the next position. The closure
#: advances its own state by one position per call.
StepFunction = Callable[[np.ndarray], np.ndarray]


def greedy(step: StepFunction, batch: int, start: int, eos: int, max_len: int) -> list[list[int]]:
    """Greedy decoding: at each step every unfinished row takes its most likely token.

    Parameters
    ----------
    step : StepFunction
        ``step(tokens) -> logits`` with tokens np.ndarray of int64, shape (B,), and logits an array of
        shape (B, V) (any float dtype). Called at most ``max_len`` times.
    batch : int
        B, the number of sequences decoded together.
    start : int
        Decoder start token id (fed at the first step).
    eos : int
        End-of-sequence token id: a row ends when it chooses it (``eos`` itself is not output);
        finished rows are fed ``eos`` until every row has ended.
    max_len : int
        Maximum number of steps, fixed by the caller (never derived from the input).

    Returns
    -------
    list of list of int, length B
        The generated token ids of each row, without the start and end tokens. Ties between equal
        logits go to the lowest token id.
    """
    tokens = np.full(batch, start, dtype=np.int64)
    done = np.zeros(batch, dtype=bool)
    out: list[list[int]] = [[] for _ in range(batch)]
    for _ in range(max_len):
        nxt = np.asarray(step(tokens)).argmax(axis=-1)
        for r in range(batch):
            if not done[r]:
                if nxt[r] == eos:
                    done[r] = True
                else:
                    out[r].append(int(nxt[r]))
        if done.all():
            break
        tokens = np.where(done, eos, nxt).astype(np.int64)
    return out


def beam_search(step: StepFunction, reorder: Callable[[np.ndarray], None], *, beams: int, start: int, eos: int,
                max_len: int) -> list[int]:
    """Beam search for one sequence, the beams forming the batch; scores are length-normalised.

    Parameters
    ----------
    step : StepFunction
        ``step(tokens) -> logits`` over the k beams: tokens np.ndarray of int64, shape (k,), logits of
        shape (k, V).
    reorder : callable
        ``reorder(parents)`` with parents np.ndarray of int64, shape (k,): make beam i continue the
        state of beam ``parents[i]`` (e.g. index the past key/values). Called after each step that
        keeps going.
    beams : int
        k, the beam width (≥ 1).
    start : int
        Decoder start token id.
    eos : int
        End-of-sequence token id (ends a hypothesis; not output).
    max_len : int
        Maximum number of steps, fixed by the caller.

    Returns
    -------
    list of int
        The best hypothesis by log-probability divided by (length + 1), without start and end tokens.
    """
    k = int(beams)
    tokens = np.full(k, start, dtype=np.int64)
    scores = np.zeros(k)
    scores[1:] = -np.inf  # all beams start identical: keep one alive at first
    hyps: list[list[int]] = [[] for _ in range(k)]
    finished: list[tuple[float, list[int]]] = []
    for _ in range(max_len):
        logits = np.asarray(step(tokens))
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
            if tok == eos:
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
        reorder(np.asarray(new_src))
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
