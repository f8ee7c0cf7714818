"""TEM at runtime: the truncated exponential mechanism, ε·d metric LDP per token, on the exact engine.

Mechanism of Carvalho, Vasiloudis, Feyisetan & Wang, *TEM: High Utility Metric Differential Privacy
on Text* (arXiv:2107.07928, 2021; SDM 2023) — the truncated exponential mechanism and its threshold
(statements re-derived here). With d the Euclidean distance of
the bundle's metric embedding (the same int8-quantized embedding as SanText's), O the output domain
(the vocabulary minus special tokens), a threshold γ > 0, L_x = {y ∈ O : d(x, y) ≤ γ} and
L̄_x = O − L_x, TEM releases

* with probability P⊥(x) = |L̄_x|·e^{−εγ/2} / Z(x): a uniformly random y ∈ L̄_x ("⊥", the paper's
  Gumbel-noised ⊥ candidate of score −γ + 2 ln|L̄_x|/ε);
* otherwise y ∈ L_x with probability ∝ e^{−ε·d(x, y)/2};

with Z(x) = Σ_{y∈L_x} e^{−εd(x,y)/2} + |L̄_x|·e^{−εγ/2}. Altogether
**Pr[M(x) = y] = exp(−ε·min(d(x, y), γ)/2) / Z(x)**: SanText with the distance truncated at γ.

**Guarantee.** min(d, γ) is a metric (truncating a metric keeps the triangle inequality), so for any
two inputs x, x' and any output y: Pr[M(x)=y] ≤ exp(ε·min(d(x, x'), γ))·Pr[M(x')=y] — ε·d-metric LDP
per token (the neighbouring relation: any two tokens, at the price of their distance), and, because
the truncated distance never exceeds γ, a true worst case of **ε·min(γ, D_max)-LDP per token** over
any two inputs. The threshold of the paper, γ = (2/ε)·ln((1−β)|O|/β), makes P⊥(x) ≤ β for every x
(Z(x) ≥ 1 from y = x, and |L̄_x|·e^{−εγ/2} ≤ β/(1−β)). Documents compose: ε·Σᵢ min(d(xᵢ, x'ᵢ), γ) for
two documents of the same length (the length is not hidden). Ledger: ε per token in the unit
``metric:<id>`` of the bundle's metric — the same unit as a SanText bundle over the same
embedding and vocabulary, whose charges therefore add up with TEM's.

**Sampling is exact and reuses the SanText engine unchanged.** The bundle holds SanText tables at the
same ε (exactly ∝ e^{−εd/2} over O) plus, per row, −ln P⊥(x) and |L̄_x|. A token draws ⊥ with an exact
Bernoulli(exp(−(−ln P⊥))); a ⊥ draws uniform candidates from O until one lies in L̄_x (exact
rejection); otherwise the engine's draw is kept if it lies in L_x and redrawn if not (rejection =
exact conditioning of SanText's law on L_x). Both loops take at most one expected round per token,
for any γ: the engine branch is taken with probability 1 − P⊥ = A/Z and accepts with probability
A/Σ_O e^{−εd/2} ≥ A/Z; the ⊥ branch needs |O|/|L̄_x| expected candidates and is taken with
probability |L̄_x|e^{−εγ/2}/Z ≤ |L̄_x|/|O|. Membership in L_x uses the sampler's own float64 distance
(bit for bit the C sampler's), the same function that counted |L̄_x| at build; its error near γ
(≤ 16u·max|φ|²/γ) is part of the stated tolerance. Realised probabilities are within the bundle's
numeric tolerance (≤ 1e-9) of the formula: :meth:`TEMSanitizer.log_probabilities` returns them exactly.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import registry as _registry
from . import runtime as _runtime
from .engine_rows import engine_distance_rows, engine_distances, engine_log_probabilities
from .guarantee import checked_tolerance
from .errors import BundleFormatError, BundleIntegrityError, ParameterMismatchError
from .row_guard import engine_tail_ok, law_matches
from .mechanisms.santext import metric_id
from .mechanisms.tem import worst_case_epsilon
from .santext_tables import SanTextTables
from .token_runtime import TokenRuntime, check_stated_d_max, check_stated_worst_case, sampled_rows

__all__ = ["TEMSanitizer", "MECHANISMS", "STATED_MAX_TOLERANCE", "threshold_from_beta", "worst_case_epsilon"]

MECHANISMS = _registry.names(family="tem")
#: The largest numeric tolerance a bundle may state (as for SanText).
STATED_MAX_TOLERANCE = 1e-9


def threshold_from_beta(epsilon: float, beta: float, n_outputs: int) -> float:
    """TEM's threshold γ = (2/ε)·ln((1 − β)·|O|/β): every input then draws ⊥ with probability ≤ β.

    Parameters
    ----------
    epsilon : float
        ε > 0.
    beta : float
        In (0, 1).
    n_outputs : int
        |O| ≥ 1.

    Returns
    -------
    float
        γ (> 0 when (1 − β)|O| > β).

    Raises
    ------
    ValueError
        A parameter out of range, or a γ that is not positive.
    """
    if not (0.0 < beta < 1.0) or not (epsilon > 0) or n_outputs < 1:
        raise ValueError("need epsilon > 0, beta in (0, 1), at least one output")
    gamma = 2.0 / epsilon * math.log((1.0 - beta) * n_outputs / beta)
    if not (math.isfinite(gamma) and gamma > 0):
        raise ValueError("beta too large for this vocabulary: the threshold gamma would not be positive")
    return gamma


class TEMSanitizer(TokenRuntime):
    """Sanitize text with TEM from a verified bundle; create one with :meth:`load`.

    **Guarantee** (per token, module docstring): ε·d(x, x')-metric LDP truncated at γ,
    Pr[M(x)=y] ≤ exp(ε·min(d(x, x'), γ))·Pr[M(x')=y], hence ε·min(γ, D_max)-LDP in the worst case;
    d is the Euclidean distance of the bundle's metric embedding. **Neighbouring relation**: any two
    tokens x, x' of the input domain, at the price ε·min(d(x, x'), γ); a document composes position by
    position over documents of the same length (the number of tokens is not hidden). Ledger: ε per
    token in ``metric:<id>`` (shared with SanText over the same metric). **Reference**: Carvalho,
    Vasiloudis, Feyisetan & Wang 2021, *TEM: High Utility Metric Differential Privacy on Text*
    (arXiv:2107.07928; SDM 2023), the section defining the truncated exponential mechanism, its
    privacy theorem and the threshold γ (section numbers not checked).

    Attributes
    ----------
    gamma : float
        The truncation threshold γ.
    beta : float or None
        The β that chose γ (``None`` when γ was given).
    d_max : float
        Upper bound of the largest distance between two inputs.
    tables : SanTextTables
        SanText's engine tables at the same ε.
    tolerance : float
        τ, the stated bound on |log P̂ − log P|.
    """

    MECHANISMS = MECHANISMS
    _RELEASED = TokenRuntime._RELEASED + ("tables", "bot_gamma", "bot_count", "_table")

    def __init__(self, bundle: Any, **kwargs: Any) -> None:
        super().__init__(bundle, **kwargs)
        try:
            self.gamma: float = float(self.params["gamma"])
            self.beta: float | None = None if self.params.get("beta") is None else float(self.params["beta"])
            self.d_max: float = float(self.manifest["privacy"]["d_max"])
            self.tolerance: float = float(self.manifest["numeric"]["max_relative_error"])
        except (KeyError, TypeError, ValueError):
            raise BundleFormatError("TEM manifest lacks gamma, d_max or the numeric tolerance") from None
        if not (math.isfinite(self.gamma) and self.gamma > 0 and math.isfinite(self.d_max)):
            raise BundleIntegrityError("bundle gamma or d_max is not a positive finite number")
        if not (math.isfinite(self.tolerance) and 0 <= self.tolerance <= STATED_MAX_TOLERANCE):
            raise BundleIntegrityError(f"bundle states a numeric tolerance above {STATED_MAX_TOLERANCE:g}")
        self.tables = SanTextTables.from_arrays(bundle)
        self.bot_gamma: np.ndarray = bundle.array("bot_gamma")
        self.bot_count: np.ndarray = bundle.array("bot_count")
        self._check_tables()
        self._table = self._rng.make_santext_table(self.tables, epsilon=self.epsilon, p=1.0)

    def _check_tables(self) -> None:
        t = self.tables
        v = t.n_rows
        if self.bot_gamma.dtype != np.float64 or self.bot_gamma.shape != (v,) \
                or self.bot_count.dtype != np.int32 or self.bot_count.shape != (v,):
            raise BundleIntegrityError("arrays 'bot_gamma' / 'bot_count' have the wrong dtype or shape")
        if not (np.isfinite(self.bot_gamma).all() and (self.bot_gamma >= 0).all()):
            raise BundleIntegrityError("array 'bot_gamma' is negative or not finite")
        if (self.bot_count < 0).any() or (self.bot_count > t.outputs.size).any():
            raise BundleIntegrityError("array 'bot_count' is out of range")
        if t.keep_row.any() or not np.array_equal(self.valid_input, t.valid_input):
            raise BundleIntegrityError("TEM tables keep rows in the clear or disagree on valid inputs")

    @property
    def ledger_unit(self) -> str:
        """``"metric:<id>"``: the bundle's metric (shared with SanText bundles over the same one)."""
        return "metric:" + metric_id(self.manifest)

    def check_parameters(self) -> None:
        """Refuse stated parameters that the arrays do not realise (``ldptext bundle sign``).

        Checked: ``head_size`` is the tables' K; no p or ε₀ is stated (TEM keeps no word);
        γ is the threshold of the stated β (when β is stated)
        and every input's ⊥ probability is ≤ β; |L̄_x| (``bot_count``) counts the outputs farther than
        γ; D_max bounds the sampled input distances; the stated worst case is ε·min(γ, D_max); and,
        for sampled rows (largest norms and an even spread), the realised log-probabilities
        (:meth:`log_probabilities`: the tables' alias masses and acceptance exponents, ``bot_gamma``)
        equal TEM's formula −ε·min(d(x, y), γ)/2 − log Z(x) at the **stated** ε and γ within twice the
        stated tolerance (so a relabelled ε or γ is refused; the realised ε, a least-squares fit, is
        named in the error).

        Raises
        ------
        ParameterMismatchError
        """
        self._check_open()
        t, eps, gamma = self.tables, self.epsilon, self.gamma
        stated_k = self.params.get("head_size")
        if stated_k is not None and stated_k != t.head_size:
            raise ParameterMismatchError(f"manifest head_size {stated_k!r} is not K = {t.head_size} of 'head_ids'")
        if self.params.get("p") is not None or self.params.get("epsilon0", 0.0) != 0.0:
            raise ParameterMismatchError("manifest states p or epsilon0, but TEM releases no word in the clear")
        outs = t.outputs.astype(np.int64)
        if self.beta is not None:
            try:
                expected = threshold_from_beta(eps, self.beta, outs.size)
            except ValueError as e:
                raise ParameterMismatchError(f"manifest beta {self.beta!r}: {e}") from None
            if not math.isclose(gamma, expected, rel_tol=1e-12, abs_tol=0.0):
                raise ParameterMismatchError(f"manifest gamma {gamma:.12g} is not the threshold of beta "
                                             f"{self.beta:g}: {expected:.12g}")
            valid = self.valid_input & (self.bot_count > 0)
            worst_bot = float(np.exp(-self.bot_gamma[valid]).max()) if valid.any() else 0.0
            if worst_bot > self.beta * (1 + 1e-9):
                raise ParameterMismatchError(f"an input draws the far set with probability {worst_bot:.6g} "
                                             f"> beta = {self.beta:g}")
        valid = np.flatnonzero(self.valid_input)
        vectors = t.emb_scale.astype(np.float64)[:, None] * t.emb_q.astype(np.float64)
        rows = sampled_rows(valid, np.linalg.norm(vectors, axis=1))
        d = engine_distance_rows(t, rows, outs)
        far = (d > gamma).sum(axis=1)
        if (far != self.bot_count[rows]).any():
            raise ParameterMismatchError(f"manifest gamma {gamma:.10g} is not what array 'bot_count' realises "
                                         f"(|far set| differs)")
        if not self._row_laws_ok(rows).all():
            # the tables' own ε: the slope of the realised log-probabilities of near head outputs
            full = self.log_probabilities(rows)
            num = den = 0.0
            for i, x in enumerate(rows):
                head = t.head_ids[x].astype(np.int64)
                dh = engine_distance_rows(t, np.array([x]), head)[0]
                ok = (dh <= gamma) & np.isfinite(full[i, head])
                if ok.sum() >= 2:
                    dc, rc = dh[ok] - dh[ok].mean(), full[i, head][ok] - full[i, head][ok].mean()
                    num, den = num + float(dc @ rc), den + float(dc @ dc)
            fit = f"about {-2.0 * num / den:.10g}" if den > 0 else "unknown"
            raise ParameterMismatchError(
                f"manifest epsilon {eps:.10g} and gamma {gamma:.10g} are not what the tables realise "
                f"(realised epsilon {fit}: log-probabilities of sampled rows' head outputs)")
        check_stated_d_max(vectors, valid, self.d_max)
        check_stated_worst_case(self.manifest, worst_case_epsilon(eps, gamma, self.d_max))

    def _row_laws_ok(self, rows: np.ndarray) -> np.ndarray:
        """Per row: its whole law is TEM's at the stated ε and γ (:mod:`ldptext.row_guard`): |L̄_x|
        is ``bot_count[x]``, every output's realised probability is exp(−ε·min(d, γ)/2) / Z(x)
        within twice the stated tolerance, every tail output's engine trial is possible, and P(x → x) is
        at most the stated largest verbatim rate."""
        t, eps, gamma = self.tables, self.epsilon, self.gamma
        rows = np.asarray(rows, dtype=np.int64)
        outs = t.outputs.astype(np.int64)
        d = engine_distance_rows(t, rows, outs)
        tol = 2.0 * checked_tolerance(self.tolerance, eps, min(gamma, self.d_max))
        full = self.log_probabilities(rows)
        ok = law_matches(full[:, outs], -eps * np.minimum(d, gamma) / 2.0, tol)
        ok &= (d > gamma).sum(axis=1) == self.bot_count[rows]
        ok &= self._verbatim_within_stated(rows, full[np.arange(rows.size), rows])
        return ok & engine_tail_ok(t, rows, engine_epsilon=eps, d=d)

    def _draw(self, flat: np.ndarray) -> np.ndarray:
        t, rng, gamma = self.tables, self._rng, self.gamma
        xs = flat.astype(np.int64)
        out = np.empty(xs.size, dtype=np.int64)
        is_bot = np.zeros(xs.size, dtype=bool)
        can = np.flatnonzero(self.bot_count[xs] > 0)
        if can.size:
            is_bot[can] = rng.bernoulli_exp(self.bot_gamma[xs[can]])
        todo = np.flatnonzero(is_bot)  # ⊥: uniform over L̄_x, by rejection from uniform over O
        while todo.size:
            cand = t.outputs[rng.uniform_int(t.outputs.size, todo.size)].astype(np.int64)
            ok = engine_distances(t, xs[todo], cand) > gamma
            out[todo[ok]] = cand[ok]
            todo = todo[~ok]
        todo = np.flatnonzero(~is_bot)  # SanText's law conditioned on L_x, by rejection
        while todo.size:
            cand = rng.santext_sample(self._table, xs[todo].astype(np.int32)).astype(np.int64)
            ok = engine_distances(t, xs[todo], cand) <= gamma
            out[todo[ok]] = cand[ok]
            todo = todo[~ok]
        return out

    def log_probabilities(self, xs: Any) -> np.ndarray:
        """The log-probabilities log Pr[M(x) = y] for every y as the sampler realises them (no draw, no charge).

        Parameters
        ----------
        xs : array_like of int, shape (n,) or scalar
            Valid input rows.

        Returns
        -------
        np.ndarray of float64, shape (n, V)
            ``-inf`` for special tokens (never output).
        """
        self._check_open()
        t = self.tables
        xs = _runtime.row_ids(xs, t.n_rows)  # an id out of range: InputError, not IndexError
        outs = t.outputs.astype(np.int64)
        santext = engine_log_probabilities(t, xs, engine_epsilon=self.epsilon, p=1.0)[:, outs]
        near = engine_distance_rows(t, xs, outs) <= self.gamma
        res = np.full((xs.size, t.n_rows), -np.inf)
        for i in range(xs.size):
            g, count = float(self.bot_gamma[xs[i]]), int(self.bot_count[xs[i]])
            row = np.full(outs.size, -np.inf)
            if count > 0:
                row[~near[i]] = -g - math.log(count)
            if near[i].any() and not (count > 0 and g == 0.0):
                s = santext[i, near[i]]
                mx = s.max()
                stay = math.log(-math.expm1(-g)) if count > 0 else 0.0
                row[near[i]] = s - (mx + math.log(np.exp(s - mx).sum())) + stay
            res[i, outs] = row
        return res

    def probabilities(self, xs: Any) -> np.ndarray:
        """``exp(log_probabilities(xs))``: rows sum to 1.

        Parameters
        ----------
        xs : array_like of int

        Returns
        -------
        np.ndarray of float64, shape (n, V)
        """
        return np.exp(self.log_probabilities(xs))
