"""Exact privacy metrics of a token-replacement mechanism.

A mechanism M over a vocabulary of size V is described by its realised conditional distribution
``Pr[M(x) = y]``, given here as a function ``log_prob_rows(xs) -> float64 [len(xs), V]`` (natural log,
``-inf`` where the probability is exactly zero) — for SanText the formula of
:func:`.mechanisms.santext_log_prob_rows`, checked against ``Sanitizer.log_probabilities`` — or as a
dense matrix for small vocabularies. Nothing is estimated by sampling: every number below is computed
from those probabilities.

The metrics are those of Yue et al. 2021, *Differential Privacy for Text Analytics via Natural Text
Sanitization* (Findings of ACL), as presented in Yue 2023, *Data Synthesis: Boosting Utility and
Privacy in NLP* (PhD thesis, Ohio State), §2.5.5, where N_x and S_x follow the plausible-deniability
statistics of Feyisetan et al. 2020, *Privacy- and Utility-Preserving Textual Analysis via Calibrated
Multivariate Perturbations* (WSDM). The paper estimates them from samples; here they are exact.

Per input token x (a row):

* ``N_x = Pr[M(x) = x]`` — the probability that x is released unchanged: how often the token itself
  leaks (higher = less private);
* ``S_x`` — effective support: the size of the smallest set of outputs whose cumulative probability
  reaches the threshold τ (default 0.95, stated in every result): how many different outputs x
  plausibly becomes (higher = more private);
* Rényi entropies ``H_α(M(x)) = 1/(1-α) · log Σ_y Pr[M(x)=y]^α`` (Rényi 1961, *On Measures of Entropy
  and Information* (Fourth Berkeley Symposium)) for α = 0 (Hartley, log of the exact support size),
  1 (Shannon), 2 (collision) and ∞ (min-entropy, ``-log max_y Pr[M(x)=y]``), in bits: the uncertainty
  of the output given the input (higher = more private). The paper approximates H₀ by log S_x and
  H∞ by −log N_x; we report the exact values, and log₂ S_x.

Per output token y (a column):

* ``S_y*`` — plausible deniability set size: the size of the smallest set of inputs whose cumulative
  posterior probability, under a uniform prior over the input domain,
  ``Pr[x | y] = Pr[M(x)=y] / Σ_x' Pr[M(x')=y]``, reaches τ: how many inputs could plausibly have
  produced y (higher = more private). (The paper estimates it by the number of distinct inputs that
  were seen mapping to y; the thresholded posterior is its exact counterpart.)

Bayes-optimal token inversion: an attacker who knows the mechanism and a public prior π over inputs
guesses ``x̂(y) = argmax_x Pr[M(x)=y] · π(x)`` for every released token y. Its exact success
probability on input x is ``succ(x) = Σ_{y : x̂(y) = x} Pr[M(x)=y]``; the success rate on a data set is
the token-weighted mean of succ: the share of tokens an informed adversary recovers (lower = more
private). No other decoder does better on average under π (it is the maximum a posteriori rule).

All of this is computed in one pass over the rows, in chunks, so a 50k vocabulary never needs a dense
V×V matrix in memory; only the selected columns for S_y* are kept (``n_inputs × n_columns``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..progress import track

LogProbRows = Callable[[np.ndarray], np.ndarray]

__all__ = [
    "DEFAULT_THRESHOLD",
    "MechanismProfile",
    "effective_support_size",
    "renyi_entropy_bits",
    "profile_mechanism",
    "profile_identity",
    "profile_uniform",
    "summarize",
    "dense_log_prob_rows",
]

DEFAULT_THRESHOLD = 0.95
_LOG2E = 1.0 / np.log(2.0)


def dense_log_prob_rows(matrix: np.ndarray, *, log: bool = False) -> LogProbRows:
    """Wrap a dense probability (or log-probability) matrix as a row function (tests, small vocabularies).

    Parameters
    ----------
    matrix : numpy.ndarray, float, shape (V, V)
        ``matrix[x, y] = Pr[M(x)=y]`` (or its natural log when ``log``).
    log : bool, default False
        Whether ``matrix`` already holds log-probabilities.

    Returns
    -------
    callable
        ``xs -> float64 array of shape (len(xs), V)`` of natural-log probabilities.
    """
    m = np.asarray(matrix, dtype=np.float64)
    if not log:
        with np.errstate(divide="ignore"):
            m = np.log(m)
    return lambda xs: m[np.asarray(xs, dtype=np.int64)]


def effective_support_size(probs: np.ndarray, threshold: float = DEFAULT_THRESHOLD) -> np.ndarray:
    """Smallest number of entries of each row whose sum reaches ``threshold`` × the row's total.

    This is S_x of a row of the mechanism, and S_y* of a column of posteriors (see the module
    docstring). The threshold is relative to the row's total, so a total of 1 − 1e-16 (rounding) cannot
    make it unreachable. Ties are irrelevant to the count.

    Parameters
    ----------
    probs : numpy.ndarray, float64, shape (n, V)
        Non-negative weights, one distribution per row (need not be normalised).
    threshold : float, default 0.95
        τ in (0, 1].

    Returns
    -------
    numpy.ndarray, int64, shape (n,)
        The effective support size of each row, in [1, V].

    Raises
    ------
    ValueError
        When ``threshold`` is not in (0, 1] or ``probs`` is not 2-D.
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError("threshold must be in (0, 1]")
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 2:
        raise ValueError("probs must be 2-D")
    srt = -np.sort(-p, axis=1)                       # descending
    csum = np.cumsum(srt, axis=1)
    target = threshold * csum[:, -1:]
    # first position where the cumulative mass reaches the target; relative slack 1e-12 so that a
    # threshold of exactly 1.0 is met by the last non-zero entry despite rounding in cumsum
    reached = csum >= target * (1.0 - 1e-12)
    return reached.argmax(axis=1).astype(np.int64) + 1


def renyi_entropy_bits(log_probs: np.ndarray, alpha: float) -> np.ndarray:
    """Rényi entropy of order ``alpha`` of each row, in bits.

    The uncertainty of the output given the input (Rényi 1961, *On Measures of Entropy and
    Information*; used as a privacy metric in Yue 2023, *Data Synthesis: Boosting Utility and Privacy
    in NLP* (PhD thesis, Ohio State), §2.5.5). α = 0 is the log of the exact support size, α = 1 the
    Shannon limit, α = inf the min-entropy. This is the reference implementation;
    :func:`profile_mechanism` computes the same values from one exponentiation per chunk.

    Parameters
    ----------
    log_probs : numpy.ndarray, float64, shape (n, V)
        Natural-log probabilities, ``-inf`` for zero; each row sums to 1.
    alpha : float
        Order α ≥ 0 (``numpy.inf`` for the min-entropy).

    Returns
    -------
    numpy.ndarray, float64, shape (n,)
        H_α of each row, in bits.

    Raises
    ------
    ValueError
        When ``alpha < 0``.
    """
    lp = np.asarray(log_probs, dtype=np.float64)
    finite = np.isfinite(lp)
    if alpha == 0:
        return np.log2(finite.sum(axis=1).astype(np.float64))
    if alpha == np.inf:
        return -lp.max(axis=1) * _LOG2E
    if alpha == 1:
        p = np.exp(lp)
        plogp = np.where(finite, p * np.where(finite, lp, 0.0), 0.0)
        return -plogp.sum(axis=1) * _LOG2E
    if alpha < 0:
        raise ValueError("alpha must be >= 0")
    # log Σ p^α computed as a log-sum-exp of α·log p, stable for tiny probabilities
    a = alpha * lp
    mx = a.max(axis=1, keepdims=True)
    lse = mx[:, 0] + np.log(np.exp(a - mx).sum(axis=1))
    return lse / (1.0 - alpha) * _LOG2E


@dataclass
class MechanismProfile:
    """Exact per-token privacy quantities of one mechanism (see the module docstring).

    Attributes
    ----------
    threshold : float
        τ of S_x and S_y*.
    inputs : numpy.ndarray, int64, shape (n,)
        Vocabulary ids of the input domain; position i of every per-input array is ``inputs[i]``.
    n_x : numpy.ndarray, float64, shape (n,)
        N_x = Pr[M(x)=x].
    s_x : numpy.ndarray, int64, shape (n,)
        Effective support size S_x at ``threshold``; -1 where not computed.
    h0, h1, h2, h_inf : numpy.ndarray, float64, shape (n,)
        Rényi entropies of orders 0, 1, 2 and ∞, in bits.
    attack_success : numpy.ndarray, float64, shape (n,)
        succ(x): exact success probability of the Bayes-optimal inversion attack on input x.
    columns : numpy.ndarray, int64, shape (c,)
        Output ids for which S_y* was computed.
    s_y : numpy.ndarray, int64, shape (c,)
        S_y* of those outputs (0 for an output no input can produce).
    decoder : numpy.ndarray, int64, shape (V,)
        The attacker's guess x̂(y) for every vocabulary id y; -1 where y is never output.
    prior_name : str
        Name of the attacker's prior.
    extra : dict
        Anything else a caller wants to keep with the profile.
    """

    threshold: float
    inputs: np.ndarray            # int64 ids of the input domain, rows of the arrays below
    n_x: np.ndarray               # Pr[M(x)=x]
    s_x: np.ndarray               # effective support size at `threshold` (int64; -1 if not computed)
    h0: np.ndarray                # Rényi entropies, bits
    h1: np.ndarray
    h2: np.ndarray
    h_inf: np.ndarray
    attack_success: np.ndarray    # exact Bayes-attack success probability on input x
    columns: np.ndarray           # int64 output ids for which S_y* was computed
    s_y: np.ndarray               # S_y* of those outputs (int64)
    decoder: np.ndarray           # int64 [V]: x̂(y)
    prior_name: str = "uniform"
    extra: dict = field(default_factory=dict)

    def row_index(self, token_ids: np.ndarray) -> np.ndarray:
        """Positions in ``inputs`` of the given vocabulary ids.

        Parameters
        ----------
        token_ids : numpy.ndarray, integer, any shape
            Vocabulary ids, all in the input domain.

        Returns
        -------
        numpy.ndarray, int64, shape of ``token_ids``

        Raises
        ------
        ValueError
            When an id is outside the input domain.
        """
        lookup = np.full(int(max(self.inputs.max(), np.max(token_ids, initial=0))) + 1, -1,
                         dtype=np.int64)
        lookup[self.inputs] = np.arange(self.inputs.size)
        pos = lookup[np.asarray(token_ids, dtype=np.int64)]
        if (pos < 0).any():
            raise ValueError("a token id outside the mechanism's input domain")
        return pos


def _normalise_prior(prior: np.ndarray | None, inputs: np.ndarray, vocab_size: int) -> np.ndarray:
    """Log prior over the input domain (uniform when None); zero-prior inputs are never guessed."""
    if prior is None:
        return np.zeros(inputs.size)
    pr = np.asarray(prior, dtype=np.float64)
    if pr.shape != (vocab_size,):
        raise ValueError("prior must have one entry per vocabulary id")
    if (pr < 0).any() or not np.isfinite(pr).all():
        raise ValueError("prior must be finite and non-negative")
    sub = pr[inputs]
    if sub.sum() <= 0:
        raise ValueError("prior has no mass on the input domain")
    with np.errstate(divide="ignore"):
        return np.log(sub / sub.sum())


def profile_mechanism(log_prob_rows: LogProbRows | np.ndarray, inputs: Sequence[int] | np.ndarray,
                      vocab_size: int | None = None, *, threshold: float = DEFAULT_THRESHOLD,
                      prior: np.ndarray | None = None, prior_name: str = "uniform",
                      columns: Sequence[int] | np.ndarray | None = None,
                      support_rows: np.ndarray | None = None, chunk_size: int = 256,
                      progress: bool = False, desc: str = "privacy metrics") -> MechanismProfile:
    """Compute a :class:`MechanismProfile` exactly, one chunk of input rows at a time.

    Parameters
    ----------
    log_prob_rows : callable or numpy.ndarray
        ``xs -> float64 array of shape (len(xs), V)`` of natural-log conditional probabilities (rows
        sum to 1), or a dense float64 log-probability matrix of shape (V, V).
    inputs : array_like of int, shape (n,)
        The input domain: vocabulary ids whose rows are evaluated (every id the attacker may guess).
    vocab_size : int, optional
        V; required with a row function.
    threshold : float, default 0.95
        τ for S_x and S_y*.
    prior : numpy.ndarray, float, shape (V,), optional
        Public prior over vocabulary ids for the Bayes attack (any non-negative weights with mass on
        ``inputs``; uniform when None).
    prior_name : str, default "uniform"
        Name recorded in the profile.
    columns : array_like of int, shape (c,), optional
        Output ids for which S_y* is computed (their full columns, float64 (n, c), are kept in
        memory; default: none).
    support_rows : numpy.ndarray, bool, shape (n,), optional
        Compute S_x (a sort per row, the costliest step) only where True; -1 elsewhere. Default: every
        row.
    chunk_size : int, default 256
        Rows evaluated at once (memory ≈ chunk_size × V float64 arrays).
    progress : bool, default False
        Show a progress bar labelled ``desc``.
    desc : str
        Progress bar label.

    Returns
    -------
    MechanismProfile

    Raises
    ------
    ValueError
        On an empty or non-1-D ``inputs``, a missing ``vocab_size``, an invalid prior or threshold, or
        rows of the wrong shape.
    """
    if callable(log_prob_rows):
        rows_fn = log_prob_rows
    else:
        dense = np.asarray(log_prob_rows, dtype=np.float64)
        rows_fn = lambda xs: dense[xs]  # noqa: E731
        vocab_size = dense.shape[1] if vocab_size is None else vocab_size
    if vocab_size is None:
        raise ValueError("vocab_size is required with a row function")
    inputs = np.asarray(inputs, dtype=np.int64)
    if inputs.ndim != 1 or inputs.size == 0:
        raise ValueError("inputs must be a non-empty 1-D array of ids")
    cols = np.zeros(0, dtype=np.int64) if columns is None else np.asarray(columns, dtype=np.int64)
    log_prior = _normalise_prior(prior, inputs, vocab_size)
    n = inputs.size
    out = {k: np.empty(n) for k in ("n_x", "h0", "h1", "h2", "h_inf")}
    s_x = np.full(n, -1, dtype=np.int64)
    col_logp = np.empty((n, cols.size))
    best_score = np.full(vocab_size, -np.inf)      # running max over x of log Pr[M(x)=y] + log π(x)
    best_input = np.full(vocab_size, -1, dtype=np.int64)
    best_logp = np.full(vocab_size, -np.inf)       # log Pr[M(x̂(y)) = y]

    starts = range(0, n, chunk_size)
    starts = track(starts, desc, unit="chunk", enabled=progress, leave=False)
    for start in starts:
        xs = inputs[start:start + chunk_size]
        lp = np.asarray(rows_fn(xs), dtype=np.float64)
        if lp.shape != (xs.size, vocab_size):
            raise ValueError("log_prob_rows returned an array of the wrong shape")
        sl = slice(start, start + xs.size)
        out["n_x"][sl] = np.exp(lp[np.arange(xs.size), xs])
        # entropies from one exp of the chunk (renyi_entropy_bits is the slower reference)
        p = np.exp(lp)
        finite = np.isfinite(lp)
        out["h0"][sl] = np.log2(finite.sum(axis=1).astype(np.float64))
        out["h1"][sl] = -np.einsum("ij,ij->i", p, np.where(finite, lp, 0.0)) * _LOG2E
        out["h2"][sl] = -np.log2(np.einsum("ij,ij->i", p, p))
        out["h_inf"][sl] = -lp.max(axis=1) * _LOG2E
        want = np.ones(xs.size, bool) if support_rows is None else np.asarray(support_rows)[sl]
        if want.any():
            s_x[sl][want] = effective_support_size(p[want], threshold)
        if cols.size:
            col_logp[sl] = lp[:, cols]
        # Bayes decoder: strict '>' keeps the earliest input on ties, the same rule as np.argmax
        score = lp + log_prior[sl, None]
        arg = score.argmax(axis=0)
        top = score[arg, np.arange(vocab_size)]
        better = top > best_score
        best_score[better] = top[better]
        best_input[better] = xs[arg[better]]
        best_logp[better] = lp[arg[better], np.nonzero(better)[0]]

    # succ(x) = Σ_{y: x̂(y)=x} Pr[M(x)=y]: each y contributes its winner's own probability
    reachable = best_input >= 0
    decoder = np.where(reachable, best_input, -1)
    weights = np.where(reachable & np.isfinite(best_logp), np.exp(best_logp), 0.0)
    succ_by_id = np.bincount(decoder[reachable], weights=weights[reachable],
                             minlength=int(max(vocab_size, inputs.max() + 1)))
    attack = succ_by_id[inputs]

    if cols.size:
        # posterior over inputs under a uniform prior: normalise each kept column
        mx = col_logp.max(axis=0, keepdims=True)
        post = np.exp(col_logp - np.where(np.isfinite(mx), mx, 0.0))
        s_y = effective_support_size(post.T, threshold)
        s_y[~np.isfinite(mx[0])] = 0  # an output no input can produce
    else:
        s_y = np.zeros(0, dtype=np.int64)
    return MechanismProfile(threshold=threshold, inputs=inputs, s_x=s_x, attack_success=attack,
                            columns=cols, s_y=s_y, decoder=decoder, prior_name=prior_name, **out)


def profile_identity(inputs: np.ndarray, vocab_size: int, *, columns: np.ndarray | None = None,
                     threshold: float = DEFAULT_THRESHOLD) -> MechanismProfile:
    """Closed-form profile of the unsanitized release M(x) = x (the ceiling of every leakage metric).

    N_x = 1, S_x = S_y* = 1, all entropies 0, and the Bayes attack always succeeds, whatever the prior.

    Parameters
    ----------
    inputs : numpy.ndarray, integer, shape (n,)
        The input domain.
    vocab_size : int
        V.
    columns : numpy.ndarray, integer, shape (c,), optional
        Output ids for S_y* (0 for those outside the input domain).
    threshold : float, default 0.95
        τ, recorded in the profile.

    Returns
    -------
    MechanismProfile
        With ``prior_name`` "any".
    """
    inputs = np.asarray(inputs, dtype=np.int64)
    cols = np.zeros(0, dtype=np.int64) if columns is None else np.asarray(columns, dtype=np.int64)
    n = inputs.size
    decoder = np.full(vocab_size, -1, dtype=np.int64)
    decoder[inputs] = inputs
    in_domain = np.isin(cols, inputs)
    return MechanismProfile(threshold=threshold, inputs=inputs, n_x=np.ones(n),
                            s_x=np.ones(n, np.int64), h0=np.zeros(n), h1=np.zeros(n),
                            h2=np.zeros(n), h_inf=np.zeros(n), attack_success=np.ones(n),
                            columns=cols, s_y=in_domain.astype(np.int64), decoder=decoder,
                            prior_name="any")


def profile_uniform(inputs: np.ndarray, outputs: np.ndarray, vocab_size: int, *,
                    prior: np.ndarray | None = None, prior_name: str = "uniform",
                    columns: np.ndarray | None = None,
                    threshold: float = DEFAULT_THRESHOLD) -> MechanismProfile:
    """Closed-form profile of uniform random replacement over ``outputs`` (the floor of leakage).

    The closed form of :func:`profile_mechanism` for Pr[M(x)=y] = 1/|O| (the two agree, which a test
    checks). The attacker learns nothing from y and always guesses the prior's mode.

    Parameters
    ----------
    inputs : numpy.ndarray, integer, shape (n,)
        The input domain.
    outputs : numpy.ndarray, integer, shape (k,)
        The output domain O.
    vocab_size : int
        V.
    prior : numpy.ndarray, float, shape (V,), optional
        The attacker's prior (uniform when None).
    prior_name : str, default "uniform"
        Name recorded in the profile.
    columns : numpy.ndarray, integer, shape (c,), optional
        Output ids for S_y* (0 for those outside O).
    threshold : float, default 0.95
        τ of S_x and S_y*.

    Returns
    -------
    MechanismProfile
    """
    inputs = np.asarray(inputs, dtype=np.int64)
    outputs = np.asarray(outputs, dtype=np.int64)
    cols = np.zeros(0, dtype=np.int64) if columns is None else np.asarray(columns, dtype=np.int64)
    n, k = inputs.size, outputs.size
    log_prior = _normalise_prior(prior, inputs, vocab_size)
    guess = inputs[int(np.argmax(log_prior))]
    decoder = np.full(vocab_size, -1, dtype=np.int64)
    decoder[outputs] = guess
    h = np.full(n, np.log2(k))
    # ceil with a relative slack, the same convention as effective_support_size
    s_x = np.full(n, int(np.ceil(threshold * k * (1 - 1e-12))), dtype=np.int64)
    s_y = np.where(np.isin(cols, outputs), int(np.ceil(threshold * n * (1 - 1e-12))), 0)
    return MechanismProfile(threshold=threshold, inputs=inputs,
                            n_x=np.where(np.isin(inputs, outputs), 1.0 / k, 0.0), s_x=s_x,
                            h0=h, h1=h.copy(), h2=h.copy(), h_inf=h.copy(),
                            attack_success=(inputs == guess).astype(np.float64), columns=cols,
                            s_y=s_y.astype(np.int64), decoder=decoder, prior_name=prior_name)


def summarize(values: np.ndarray, weights: np.ndarray | None = None) -> dict:
    """Mean, median and quartiles (optionally weighted, e.g. by token counts in a data set).

    Weighted quantiles use the inverse of the weighted empirical CDF (the smallest value whose
    cumulative weight reaches q), so with unit weights they equal numpy's 'inverted_cdf' method.

    Parameters
    ----------
    values : array_like of float, shape (n,)
        The values summarised.
    weights : array_like of float, shape (n,), optional
        Non-negative weights (default: 1 each).

    Returns
    -------
    dict
        ``n`` (int), ``weight`` (float, the total weight), ``mean``, ``q25``, ``median``, ``q75``,
        ``min``, ``max`` (float); for no values, ``n`` = 0 and the statistics None (no ``weight``).
    """
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return {"n": 0, "mean": None, "q25": None, "median": None, "q75": None, "min": None,
                "max": None}
    w = np.ones_like(v) if weights is None else np.asarray(weights, dtype=np.float64)
    order = np.argsort(v, kind="stable")
    v, w = v[order], w[order]
    cw = np.cumsum(w)
    total = cw[-1]

    def q(frac: float) -> float:
        return float(v[np.searchsorted(cw, frac * total * (1 - 1e-12))])

    return {"n": int(v.size), "weight": float(total), "mean": float(np.sum(v * w) / total),
            "q25": q(0.25), "median": q(0.5), "q75": q(0.75), "min": float(v[0]),
            "max": float(v[-1])}
