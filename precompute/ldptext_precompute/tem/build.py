"""Build a TEM bundle: SanText's exact engine tables at ε, plus TEM's per-row ⊥ probability.

Carvalho et al. 2021, *TEM: High Utility Metric Differential Privacy on Text* (arXiv:2107.07928): the
truncated exponential mechanism; formula, guarantee and sampling are stated once, in
:mod:`ldptext.tem`. Steps: SanText's (:mod:`ldptext_precompute.santext.build`: embeddings → domain →
int8 metric embedding → neighbours → tables at ε) → threshold γ (given, or from β,
:func:`ldptext.tem.threshold_from_beta`) → per row, over every output in blocks, the sampler's own
distances: |L̄_x| (outputs farther than γ) and −ln P⊥(x) = softplus(ln A(x) − ln B(x)), with
A = Σ_{L_x} e^{−εd/2} and B = |L̄_x|·e^{−εγ/2} (:func:`bot_rows`) → tolerance → manifest → signed bundle.
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from ldptext.engine_rows import engine_distance_rows
from ldptext.errors import ParameterError
from ldptext import registry
from ldptext.santext_tables import SanTextTables
from ldptext.tem import STATED_MAX_TOLERANCE, threshold_from_beta, worst_case_epsilon
from ldptext.verbatim import VerbatimRate, refuse_near_identity

from ..metricdp import common as _common
from ..metricdp.engine import U
from ..santext import build as _st
from ..santext import embeddings as _emb
from ..santext.knn import cached_neighbours

__all__ = ["bot_rows", "tem_verbatim", "check_far_probabilities", "build_tem_bundle"]


def bot_rows(tables: SanTextTables, epsilon: float, gamma: float, *, block: int = 1024
             ) -> tuple[np.ndarray, np.ndarray, float]:
    """TEM's ⊥ branch for every row: −ln P⊥(x), |L̄_x|, and the float64 error bound of the former.

    Parameters
    ----------
    tables : SanTextTables
        The engine tables (their metric embedding and output domain).
    epsilon, gamma : float
    block : int
        Rows per distance block.

    Returns
    -------
    bot_gamma : np.ndarray of float64, shape (V,)
        −ln P⊥(x) ≥ 0 (0 for rows with no output beyond γ, or that are not inputs: unused there).
    bot_count : np.ndarray of int32, shape (V,)
        |L̄_x| (0 for rows that are not inputs).
    log_error : float
        Bound, over rows with |L̄_x| > 0, on the log-space error of the realised P⊥ and 1 − P⊥
        against the values computed in exact arithmetic from the same distances.
    """
    v = tables.n_rows
    outs = tables.outputs.astype(np.int64)
    half = epsilon / 2.0
    bot_gamma = np.zeros(v)
    bot_count = np.zeros(v, dtype=np.int32)
    log_error = 0.0
    rows = np.flatnonzero(tables.valid_input)
    for start in range(0, rows.size, block):
        xs = rows[start:start + block]
        d = engine_distance_rows(tables, xs, outs)
        far = d > gamma
        count = far.sum(axis=1)
        w = np.where(far, -np.inf, -half * d)
        mx = w.max(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_a = np.where(np.isfinite(mx), mx + np.log(np.exp(w - mx[:, None]).sum(axis=1)), -np.inf)
            log_b = np.where(count > 0, np.log(np.maximum(count, 1)) - half * gamma, -np.inf)
            diff = log_a - log_b
        has = count > 0
        g = np.where(has, np.logaddexp(0.0, np.where(has, diff, 0.0)), 0.0)  # softplus(ln A − ln B)
        bot_gamma[xs] = g
        bot_count[xs] = count.astype(np.int32)
        if has.any():
            # float64 error of g: a few roundings of numbers of size |ln A| + |ln B| (+ the sum of
            # |O| terms, relative |O|u); 1 − P⊥ = 1 − e^{−g} moves by e^{−g}/(1 − e^{−g}) times that
            mag = np.abs(np.where(np.isfinite(log_a), log_a, 0.0)) + np.abs(log_b) + 1.0
            e_g = 16 * U * mag[has] + outs.size * U
            gh = g[has]
            # an empty L_x (ln A = −inf) gives exactly g = 0, P⊥ = 1 and no L branch: nothing to amplify
            empty = ~np.isfinite(log_a[has])
            amplify = np.where(empty, 0.0, np.where(gh > 0, np.exp(-gh) / -np.expm1(-np.maximum(gh, 1e-300)),
                                                    np.inf))
            log_error = max(log_error, float(np.max(e_g * np.maximum(1.0, amplify))))
    return bot_gamma, bot_count, log_error


def tem_verbatim(tables: SanTextTables, epsilon: float, gamma: float, rows: np.ndarray, *,
                 block: int = 1024) -> np.ndarray:
    """TEM's verbatim rate P(M(x) = x) = e^{−ε·min(d(x, x), γ)/2} / Z(x) for each row of ``rows``
    (0 for a row that is not an output), Z(x) = Σ_{y ∈ O} e^{−ε·min(d(x, y), γ)/2}, from the
    sampler's own distances, in float64 (terms shifted by d(x, x) so none underflows).

    Parameters
    ----------
    tables : SanTextTables
    epsilon, gamma : float
    rows : np.ndarray of int
    block : int

    Returns
    -------
    np.ndarray of float64, shape (len(rows),)
    """
    rows = np.asarray(rows, dtype=np.int64)
    outs = tables.outputs.astype(np.int64)
    pos = np.full(tables.n_rows, -1, dtype=np.int64)
    pos[outs] = np.arange(outs.size)
    half = epsilon / 2.0
    out = np.zeros(rows.size)
    for start in range(0, rows.size, block):
        xs = rows[start:start + block]
        p = pos[xs]
        d = np.minimum(engine_distance_rows(tables, xs, outs), gamma)
        own = d[np.arange(xs.size), np.maximum(p, 0)]
        z = np.exp(-half * (d - own[:, None])).sum(axis=1)
        out[start:start + block] = np.where(p >= 0, 1.0 / z, 0.0)
    return out


def check_far_probabilities(p_bot: np.ndarray, bot_count: np.ndarray, valid: np.ndarray,
                            beta: float | None) -> None:
    """Refuse a β bundle in which an input would draw the far set more often than β.

    The runtime refuses such a bundle at every load (:class:`ldptext.tem.TEMSanitizer`: every input
    with a far set draws it with probability ≤ β·(1 + 1e-9)). γ from β bounds P⊥(x) by β only for
    an input that is itself an output (its own term e⁰ = 1 is in the near mass); an input that is
    not an output — the out-of-vocabulary row — whose near set is light or empty (large ε) draws the
    far set with probability up to 1.

    Raises
    ------
    ParameterError
        With the largest such probability and what to change.
    """
    if beta is None:
        return
    rows = valid & (bot_count > 0)
    worst = float(p_bot[rows].max()) if rows.any() else 0.0
    if worst > beta * (1 + 1e-9):
        n = int((rows & (p_bot > beta * (1 + 1e-9))).sum())
        raise ParameterError(
            f"{n} input row(s) that are not outputs (e.g. the out-of-vocabulary row) would draw the far set "
            f"with probability up to {worst:.6g} > beta = {beta:g}, which every load refuses; use a smaller "
            f"epsilon, a larger beta, or give --gamma directly (the bundle then states no beta)")


def build_tem_bundle(out: str | Path, *, embeddings: str = _emb.GLOVE, epsilon: float,
                     beta: float | None = 0.001, gamma: float | None = None,
                     vocab_size: int | None = None, head_size: int = 64, sign_key: Any = None,
                     passphrase: bytes | None = None, device: str = "auto",
                     cache_dir: str | Path | None = None, progress: bool = False,
                     loaded: "_emb.Embeddings | None" = None, allow_weak_privacy: bool = False) -> Path:
    """Build and sign a TEM bundle.

    Parameters
    ----------
    out : str or Path
    embeddings : str
        ``"glove-6b-50d"``, ``"minilm-wordpiece"`` or a file.
    epsilon : float
        ε (finite, > 0).
    beta : float or None
        The paper's β ∈ (0, 1): γ = (2/ε)·ln((1 − β)|O|/β), so that P⊥ ≤ β; ignored when ``gamma``
        is given.
    gamma : float or None
        The threshold γ > 0 directly.
    vocab_size : int or None
    head_size : int
        K of the engine's alias head.
    sign_key : key, path, None or False
    passphrase : bytes or None
    device : str
        SanText neighbour search (``"auto"``: a GPU through torch when present).
    cache_dir : str, Path or None
        Reuse SanText's ε-independent neighbour structure.
    progress : bool
    loaded : Embeddings or None
    allow_weak_privacy : bool
        Accept an ε at which the median input is released unchanged with probability at least
        :data:`ldptext.verbatim.NEAR_IDENTITY_MEDIAN` (the bundle and every report say so); every
        runtime refuses such a bundle at load without the same opt-in.

    Returns
    -------
    Path

    Raises
    ------
    ParameterError
        ε, β or γ out of range, a realised tolerance above 1e-9, or (with β) an input whose far-set
        probability would exceed β (:func:`check_far_probabilities`).
    WeakPrivacyError
        The rates are near identity and ``allow_weak_privacy`` is False.

    Notes
    -----
    Guarantee of the runtime (:class:`ldptext.tem.TEMSanitizer`): ε·min(d(x, x'), γ)-metric LDP per
    token, ε·min(γ, D_max)-LDP in the worst case. Carvalho et al. 2021 (TEM).
    """
    started = time.perf_counter()
    epsilon = _common.check_epsilon(epsilon)
    if gamma is not None:
        gamma = _common.check_epsilon(gamma, "gamma")
        beta = None
    elif beta is None or isinstance(beta, bool) or not (0.0 < float(beta) < 1.0):
        raise ParameterError("beta must be in (0, 1) (or give gamma)")
    _st.check_head_size(head_size)
    emb = loaded or _emb.load_embeddings(embeddings, vocab_size)
    domain = _st.split_domain(emb, mechanism="santext")
    emb_q, emb_scale = _st.quantize_int8(emb.vectors)
    vectors = _st.dequantize(emb_q, emb_scale)
    if gamma is None:
        try:
            gamma = threshold_from_beta(epsilon, float(beta), int(domain.outputs.size))
        except ValueError as e:
            raise ParameterError(str(e)) from None
    nb = cached_neighbours(cache_dir, vectors, domain.outputs, emb.valid_input,
                           min(head_size, int(domain.outputs.size)), device=device, progress=progress)
    tables, rounding = _st.santext_tables(emb_q=emb_q, emb_scale=emb_scale, valid_input=emb.valid_input,
                                          domain=domain, nb=nb, epsilon=epsilon)
    tau_santext = _st.numeric_tolerance(epsilon, nb, vectors, int(domain.outputs.size), rounding)
    t_bot = time.perf_counter()
    bot_gamma, bot_count, bot_error = bot_rows(tables, epsilon, gamma)
    bot_seconds = time.perf_counter() - t_bot
    # membership of L_x by the sampler's distance: within E/γ of the true one near γ, E = 16u·max|φ|²
    sq = np.einsum("ij,ij->i", vectors, vectors)
    membership = epsilon / 2.0 * 16 * U * 2 * float(sq.max()) / gamma
    tolerance = float(2 * tau_santext + 2 * bot_error + 2 * membership)
    if not (math.isfinite(tolerance) and tolerance <= STATED_MAX_TOLERANCE):
        raise ParameterError(f"numeric tolerance {tolerance:.2e} exceeds the stated maximum "
                             f"{STATED_MAX_TOLERANCE:g} (epsilon*D_max too large, or gamma too small)")
    valid = emb.valid_input
    with np.errstate(divide="ignore"):
        p_bot = np.where(bot_count > 0, np.exp(-bot_gamma), 0.0)
    check_far_probabilities(p_bot, bot_count, valid, beta)
    # the verbatim rate over every input (TEM has no split: every valid input is sensitive); stated,
    # with no cap
    verbatim = VerbatimRate.of(tem_verbatim(tables, epsilon, gamma, np.flatnonzero(valid)))
    refuse_near_identity(verbatim, allow=allow_weak_privacy, flag="--allow-weak-privacy")
    manifest = dict(
        params=dict(epsilon=epsilon, gamma=gamma, beta=beta, head_size=int(nb.head_ids.shape[1])),
        privacy=dict(d_max=nb.d_max, notion=registry.get("tem").statement().notion,
                     worst_case_token_epsilon=worst_case_epsilon(epsilon, gamma, nb.d_max),
                     max_bot_probability=float(p_bot[valid].max()),
                     rows_with_far_outputs=int((bot_count[valid] > 0).sum()),
                     verbatim=verbatim.as_manifest(), **verbatim.weak_privacy_statement(),
                     not_outputs=_st.read_back_statement(domain)),
        vocab=dict(size=len(emb.vocab), dim=int(emb.vectors.shape[1]), outputs=int(domain.outputs.size),
                   kind=emb.kind),
        sources=dict(embeddings=emb.source),
        numeric=dict(max_relative_error=tolerance, stated_maximum=STATED_MAX_TOLERANCE,
                     santext_engine=tau_santext, bot_probability=bot_error, membership=membership,
                     meaning="bound on |log P_realised - log P_formula| for every (x, y)"),
        build=_common.build_info(started, backend=nb.backend, neighbour_seconds=round(nb.seconds, 3),
                                 bot_seconds=round(bot_seconds, 3)),
    )
    arrays = {**tables.stored_arrays(), "bot_gamma": bot_gamma, "bot_count": bot_count}
    return _common.write_mechanism_bundle(out, mechanism="tem", arrays=arrays, manifest=manifest, emb=emb,
                                          sign_key=sign_key, passphrase=passphrase)
