"""Build a CusText / CusText+ bundle: public output sets, then exact engine tables.

Chen et al. 2023, *A Customized Text Sanitization Mechanism with Differential Privacy* (Findings of
ACL; arXiv:2207.01193), §3: a mapping function assigns every input a customised output set, and a
sampling function (the exponential mechanism over that set, with similarity scores normalised to
[0, 1]) draws the replacement. The guarantee and the formula are stated once, in
:mod:`ldptext.custext`.

:func:`build_custext_bundle` is a short sequence of steps: load embeddings → domain (outputs, and for
CusText+ the stop words kept in the clear, :func:`ldptext_precompute.santext.build.split_domain`) →
metric embedding (int8, as SanText's) → output sets (:func:`output_sets`, faiss k-NN, GPU when present)
→ per-row scores and log-weights (:func:`row_log_weights`) → engine tables
(:func:`ldptext_precompute.metricdp.engine.head_only_proposal`) → manifest → signed bundle.
Nothing here reads private text.
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from ldptext import registry
from ldptext.custext import STATED_MAX_TOLERANCE
from ldptext.errors import ParameterError
from ldptext.santext_tables import SanTextTables
from ldptext.verbatim import VerbatimRate, refuse_near_identity, with_kept_in_clear

from ..metricdp import common as _common
from ..metricdp import faiss_search as _faiss
from ..metricdp.engine import U, head_only_proposal, head_only_tolerance
from ..progress import track
from ..santext import build as _st
from ..santext import embeddings as _emb

__all__ = ["MECHANISMS", "SIMILARITIES", "output_sets", "row_log_weights", "custext_verbatim",
           "build_custext_bundle"]

MECHANISMS = registry.names(family="custext")
SIMILARITIES = ("euclidean", "cosine")


def _ranking_vectors(vectors: np.ndarray, similarity: str) -> np.ndarray:
    """Vectors whose Euclidean nearest neighbours are the most similar ones (unit vectors for cosine)."""
    v = np.asarray(vectors, dtype=np.float64)
    if similarity == "cosine":
        norms = np.linalg.norm(v, axis=1, keepdims=True)
        v = v / np.where(norms > 0, norms, 1.0)
    return v


def output_sets(vectors: np.ndarray, outputs: np.ndarray, k: int, *, similarity: str = "euclidean",
                device: str = "auto", candidates: int | None = None,
                progress: bool = False) -> tuple[np.ndarray, str]:
    """CusText's mapping function: a partition of the output domain into groups of at least K.

    In vocabulary order, the first unassigned output and its K − 1 most similar unassigned outputs
    form a group; a last group of fewer than K outputs joins the group formed before it (so every
    group has between K and 2K − 1 members and every input shares its output set with at least K − 1
    others). Similarity neighbours come from a faiss k-NN over the outputs (``candidates`` per output),
    with an exact scan of the unassigned outputs when a candidate list runs out.

    Parameters
    ----------
    vectors : np.ndarray of float, shape (V, m)
        The metric embedding.
    outputs : np.ndarray of int, shape (O,)
        The output domain (ascending ids).
    k : int
        K, the minimum group size (≤ O).
    similarity : str
        ``"euclidean"`` or ``"cosine"``.
    device : str
        faiss device: ``"auto"``, ``"cpu"`` or ``"cuda"``.
    candidates : int or None
        Neighbours fetched per output (default 4K).
    progress : bool
        Progress of the grouping on stderr (:mod:`ldptext_precompute.progress`).

    Returns
    -------
    group_of_output : np.ndarray of int32, shape (O,)
        The group of each output (groups numbered in order of creation).
    backend : str
        The k-NN backend.
    """
    outputs = np.asarray(outputs, dtype=np.int64)
    n = outputs.size
    if not 1 <= k <= n:
        raise ParameterError(f"K must be between 1 and the number of outputs ({n})")
    rank = _ranking_vectors(vectors[outputs], similarity)
    m = min(n, candidates or 4 * k)
    _, nbr, backend, _ = _faiss.knn(rank, rank, m, device=device)
    group = np.full(n, -1, dtype=np.int32)
    unassigned = np.ones(n, dtype=bool)
    n_groups = 0
    last = -1
    for s in track(range(n), "custext output sets", unit="output", enabled=progress):
        if not unassigned[s]:
            continue
        unassigned[s] = False
        need = k - 1
        cand = nbr[s][(nbr[s] >= 0) & (nbr[s] != s)]
        picked = cand[unassigned[cand]][:need]
        if picked.size < need:  # the candidate list ran out: scan the unassigned outputs exactly
            rest = np.flatnonzero(unassigned)
            d2 = ((rank[rest] - rank[s]) ** 2).sum(axis=1)
            picked = rest[np.argsort(d2, kind="stable")[:need]]
        members = np.concatenate([[s], picked])
        if members.size < k:  # the last outputs: too few for a group of their own
            group[members] = last
        else:
            group[members] = n_groups
            last = n_groups
            n_groups += 1
        unassigned[picked] = False
    return group, backend


def row_log_weights(vectors: np.ndarray, rows: np.ndarray, members: np.ndarray, epsilon: float,
                    similarity: str) -> tuple[np.ndarray, np.ndarray]:
    """CusText's sampling function for some rows: log-weights ε·u(x, y)/2 over each row's output set.

    u(x, y) = (s(x, y) − min_{y'} s(x, y')) / (max_{y'} s(x, y') − min_{y'} s(x, y')), the similarity
    s (−d(x, y) for Euclidean, cosine otherwise) min–max normalised over the set, so u ∈ [0, 1] and the
    exponential mechanism's sensitivity is 1 (u ≡ 1 when every member is equally similar).

    Parameters
    ----------
    vectors : np.ndarray of float64, shape (V, m)
        The exact metric embedding.
    rows : np.ndarray of int, shape (n,)
    members : np.ndarray of int, shape (n, S)
        Each row's output set, padded with −1.
    epsilon : float
    similarity : str

    Returns
    -------
    log_w : np.ndarray of float64, shape (n, S)
        ``-inf`` at padding.
    score_error : np.ndarray of float64, shape (n,)
        Per row, a bound on |log_w − the exact ε·u/2| (float64 rounding of s and of the normalisation).
    """
    dim = vectors.shape[1]
    valid = members >= 0
    a = vectors[rows][:, None, :]
    b = vectors[np.where(valid, members, 0)]
    if similarity == "euclidean":
        diff = a - b
        s = -np.sqrt(np.einsum("ijk,ijk->ij", diff, diff))
        # direct formula: relative error ≤ (m + 2)u on d
        err = (dim + 2) * U * np.abs(s)
    else:
        na = np.linalg.norm(a, axis=2)
        nb = np.linalg.norm(b, axis=2)
        s = np.einsum("ijk,ijk->ij", np.broadcast_to(a, b.shape), b) / np.where(na * nb > 0, na * nb, 1.0)
        err = np.full(s.shape, (2 * dim + 8) * U)  # |s| ≤ 1: absolute error of a normalised dot
    s = np.where(valid, s, np.nan)
    hi = np.nanmax(s, axis=1, keepdims=True)
    lo = np.nanmin(s, axis=1, keepdims=True)
    span = hi - lo
    flat = span[:, 0] <= 0
    with np.errstate(invalid="ignore", divide="ignore"):
        u = np.where(flat[:, None], 1.0, (s - lo) / np.where(flat[:, None], 1.0, span))
    u = np.clip(u, 0.0, 1.0)
    log_w = np.where(valid, epsilon / 2.0 * u, -np.inf)
    e_s = np.where(valid, err, 0.0).max(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        e_u = np.where(flat, 0.0, 2 * e_s / np.where(flat, 1.0, span[:, 0] - 2 * e_s) + 4 * U)
    e_u = np.where(np.isfinite(e_u) & (e_u >= 0), np.minimum(e_u, 1.0), 1.0)
    return log_w, epsilon / 2.0 * e_u


def custext_verbatim(head_ids: np.ndarray, log_w: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """CusText's verbatim rate P(M(x) = x) = e^{ε·u(x, x)/2} / Σ_{y ∈ Y_x} e^{ε·u(x, y)/2} for each
    row of ``rows`` (0 when x is not in its own output set), from the rows' log-weights.

    Parameters
    ----------
    head_ids : np.ndarray of int, shape (V, S)
        Each row's output set (padding slots carry weight −inf).
    log_w : np.ndarray of float64, shape (V, S)
    rows : np.ndarray of int
        The sampled inputs (not CusText+'s stop words, released unchanged with probability 1).

    Returns
    -------
    np.ndarray of float64, shape (len(rows),)
    """
    rows = np.asarray(rows, dtype=np.int64)
    w = log_w[rows]
    w = np.exp(w - w.max(axis=1, keepdims=True))
    own = np.where(head_ids[rows] == rows[:, None], w, 0.0).sum(axis=1)
    return own / w.sum(axis=1)


def build_custext_bundle(out: str | Path, *, embeddings: str = _emb.GLOVE, epsilon: float,
                         mechanism: str = "custext", k: int = 20, similarity: str = "euclidean",
                         non_sensitive: str | Path | None = None, vocab_size: int | None = None,
                         sign_key: Any = None, passphrase: bytes | None = None, device: str = "auto",
                         loaded: "_emb.Embeddings | None" = None, progress: bool = False,
                         allow_weak_privacy: bool = False) -> Path:
    """Build and sign a CusText / CusText+ bundle.

    Parameters
    ----------
    out : str or Path
        The bundle file.
    embeddings : str
        ``"glove-6b-50d"``, ``"minilm-wordpiece"`` or a file (as for SanText).
    epsilon : float
        ε of the exponential mechanism (finite, > 0).
    mechanism : str
        ``"custext"`` or ``"custext+"`` (stop words released unchanged).
    k : int
        K, the minimum output-set size (paper: 20).
    similarity : str
        ``"euclidean"`` (s = −d) or ``"cosine"``.
    non_sensitive : str, Path or None
        CusText+'s stop words: ``"function-words"`` (default), ``"frequency:W"`` or a word file (as
        SanText+'s ``--non-sensitive``).
    vocab_size : int or None
        Word-level embeddings: keep the N most frequent words.
    sign_key : key, path, None or False
        ``None``: the local developer key; ``False``: unsigned.
    passphrase : bytes or None
    device : str
        faiss k-NN device (``"auto"``: GPU when present).
    loaded : Embeddings or None
        Embeddings already in memory.
    progress : bool
        Progress of the output-set grouping on stderr.
    allow_weak_privacy : bool
        Accept an ε at which the median sensitive word is released unchanged with probability at
        least :data:`ldptext.verbatim.NEAR_IDENTITY_MEDIAN` (the bundle and every report say so);
        every runtime refuses such a bundle at load without the same opt-in.

    Returns
    -------
    Path

    Raises
    ------
    ParameterError
        A parameter out of range (ε finite > 0, K ≥ 1 and ≤ the output domain, a known similarity),
        or a realised tolerance above 1e-9.
    WeakPrivacyError
        The rates are near identity and ``allow_weak_privacy`` is False.

    Notes
    -----
    Guarantee of the bundle's runtime (:class:`ldptext.custext.CusTextSanitizer`): ε-LDP per token
    between inputs sharing an output set; the set itself is revealed; CusText+ releases its stop
    words unchanged. Chen et al. 2023, §3.
    """
    started = time.perf_counter()
    epsilon = _common.check_epsilon(epsilon)
    if mechanism not in MECHANISMS:
        raise ParameterError(f"mechanism must be one of {MECHANISMS}")
    if similarity not in SIMILARITIES:
        raise ParameterError(f"similarity must be one of {SIMILARITIES}")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ParameterError("K must be an integer >= 1")
    k = int(k)
    emb = loaded or _emb.load_embeddings(embeddings, vocab_size)
    if mechanism == "custext+":
        domain = _st.split_domain(emb, mechanism="santext+", non_sensitive=non_sensitive or _st.FUNCTION_WORDS)
    else:
        domain = _st.split_domain(emb, mechanism="santext")
    emb_q, emb_scale = _st.quantize_int8(emb.vectors)
    vectors = _st.dequantize(emb_q, emb_scale)
    outputs = domain.outputs.astype(np.int64)
    if k > outputs.size:
        raise ParameterError(f"K = {k} exceeds the output domain ({outputs.size} tokens)")
    t_groups = time.perf_counter()
    group_of_output, backend = output_sets(vectors, outputs, k, similarity=similarity, device=device,
                                           progress=progress)
    groups_seconds = time.perf_counter() - t_groups
    n_rows = len(emb.vocab)
    keep = domain.keep_row.astype(bool)
    group_id = np.full(n_rows, -1, dtype=np.int32)
    group_id[outputs] = group_of_output
    # inputs that are not outputs (e.g. <unk>): the output set of their most similar output
    orphan = np.flatnonzero(emb.valid_input & ~keep & (group_id < 0))
    if orphan.size:
        rank = _ranking_vectors(vectors, similarity)
        _, near, _, _ = _faiss.knn(rank[orphan], rank[outputs], 1, device=device)
        group_id[orphan] = group_of_output[near[:, 0]]
    sizes = np.bincount(group_of_output)
    head = int(sizes.max())
    order = np.argsort(group_of_output, kind="stable")
    starts = np.concatenate([[0], np.cumsum(sizes)])
    members_of = [outputs[order[starts[g]:starts[g + 1]]] for g in range(sizes.size)]

    head_ids = np.empty((n_rows, head), dtype=np.int32)
    log_w = np.zeros((n_rows, head), dtype=np.float64)
    score_error = np.zeros(n_rows)
    live = np.flatnonzero(group_id >= 0)
    padded = np.full((live.size, head), -1, dtype=np.int64)
    for i, x in enumerate(live):
        mem = members_of[group_id[x]]
        padded[i, :mem.size] = mem
    w = np.empty(padded.shape)
    for start in range(0, live.size, 2048):  # bounded memory: block x S x m differences
        stop = start + 2048
        w[start:stop], score_error[live[start:stop]] = row_log_weights(
            vectors, live[start:stop], padded[start:stop], epsilon, similarity)
    # rows: the output set plus padding outputs (no mass), strictly increasing as the schema requires
    spare = outputs[:2 * head]
    for i, x in enumerate(live):
        mem = padded[i][padded[i] >= 0]
        fill = spare[~np.isin(spare, mem)][:head - mem.size]
        ids = np.concatenate([mem, fill])
        weights = np.concatenate([w[i, :mem.size], np.full(fill.size, -np.inf)])
        o = np.argsort(ids)
        head_ids[x] = ids[o]
        log_w[x] = weights[o]
    # rows never sampled (not inputs, or CusText+ stop words kept with probability 1): any valid row
    idle = np.flatnonzero(group_id < 0)
    head_ids[idle] = np.sort(outputs[:head])
    log_w[idle] = 0.0
    threshold, alias_index, gamma = head_only_proposal(log_w)
    tables = SanTextTables(
        emb_q=emb_q, emb_scale=emb_scale, outputs=domain.outputs, head_ids=head_ids,
        alias_threshold=threshold, alias_index=alias_index, accept_gamma=gamma,
        tail_floor=np.zeros(n_rows), keep_row=domain.keep_row, sensitive=domain.sensitive,
        valid_input=emb.valid_input)
    tolerance = head_only_tolerance(log_w[live], score_error[live])
    if not (math.isfinite(tolerance) and tolerance <= STATED_MAX_TOLERANCE):
        raise ParameterError(f"numeric tolerance {tolerance:.2e} exceeds the stated maximum "
                             f"{STATED_MAX_TOLERANCE:g}; use a smaller epsilon")
    verbatim = VerbatimRate.of(custext_verbatim(head_ids, log_w, np.flatnonzero(emb.valid_input & ~keep)))
    # near identity by a kept-in-clear majority too (CusText+'s stop words, always kept)
    verbatim = with_kept_in_clear(tables, verbatim, p=None)
    refuse_near_identity(verbatim, allow=allow_weak_privacy, flag="--allow-weak-privacy")
    params = dict(epsilon=epsilon, k=k, similarity=similarity, head_size=head,
                  p=0.0 if mechanism == "custext+" else None)
    if mechanism == "custext+":
        params["non_sensitive"] = domain.non_sensitive
    manifest = dict(
        params=params,
        privacy=dict(notion=registry.get(mechanism).statement().notion,
                     groups=int(sizes.size), smallest_group=int(sizes.min()), largest_group=head,
                     verbatim=verbatim.as_manifest(), **verbatim.weak_privacy_statement(),
                     not_outputs=_st.read_back_statement(domain)),
        vocab=dict(size=n_rows, dim=int(emb.vectors.shape[1]), outputs=int(outputs.size),
                   kept_in_clear=int(keep.sum()), kind=emb.kind),
        sources=dict(embeddings=emb.source, stop_words=domain.frequency_source),
        numeric=dict(max_relative_error=tolerance, stated_maximum=STATED_MAX_TOLERANCE,
                     meaning="bound on |log P_realised - log P_formula| for every (x, y)"),
        build=_common.build_info(started, backend=backend, groups_seconds=round(groups_seconds, 3)),
    )
    arrays = {**tables.stored_arrays(), "group_id": group_id}
    return _common.write_mechanism_bundle(out, mechanism=mechanism, arrays=arrays, manifest=manifest,
                                          emb=emb, sign_key=sign_key, passphrase=passphrase)
