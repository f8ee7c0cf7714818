"""CusText and CusText+ at runtime: ε-LDP per token among the inputs that share an output set.

Mechanism of Chen et al. 2023, *A Customized Text Sanitization Mechanism with Differential Privacy*
(Findings of ACL 2023; arXiv:2207.01193), its mapping function and sampling function (§3; the statements below
are re-derived here):

* **Output sets.** A public mapping partitions the output domain into groups of at least K tokens
  (greedily, in vocabulary order: the first unassigned token and its K − 1 nearest unassigned
  neighbours; a last group smaller than K joins the previous one). Every input x maps to the group
  Y_x it belongs to (an input that is not an output, e.g. ``[UNK]``, to the group of its nearest
  output). The groups are built from the public embedding only, never from private text.
* **Sampling.** Pr[M(x) = y] = exp(ε·u(x, y)/2) / Σ_{y'∈Y_x} exp(ε·u(x, y')/2) for y ∈ Y_x, 0
  otherwise, with u the similarity of x and y min–max normalised to [0, 1] over Y_x (Euclidean:
  similarity −d(x, y); or cosine), so the score's sensitivity is 1: the exponential mechanism.
* **CusText+** releases the stop words (by default the closed-class function words and punctuation
  of :mod:`ldptext_precompute.santext.function_words`; any public word list) **unchanged**, with
  probability 1, and never outputs them.

**Guarantee** (what is private, and between which inputs): for any two inputs x, x' with the same
output set (Y_x = Y_x') and any output y, Pr[M(x)=y] ≤ e^ε·Pr[M(x')=y] — ε-LDP per token with the
neighbouring relation "same output set" (u ∈ [0, 1] moves the numerator by at most e^{ε/2} and the
normaliser by at most e^{ε/2}). Between inputs of *different* output sets there is **no** bound: the
supports are disjoint, so **the output reveals which output set (group) the input token lies in**;
CusText has no finite worst-case LDP level over all inputs, and CusText+ releases its stop words in
the clear. A document of n tokens composes to n·ε against any document whose tokens lie, position by
position, in the same output sets. The number of tokens is not hidden.

**Sampling is exact**, on the SanText engine (:mod:`ldptext.santext_tables`, the C alias + exact
rejection sampler, unchanged): each row's head is its output set, with log-weights ε·u/2 encoded as
an integer alias proposal and acceptance exponents; the tail has no mass. The realised probabilities
equal the formula up to the tolerance the bundle states (float64 rounding of the acceptance
exponents, ≤ 1e-9; :meth:`CusTextSanitizer.log_probabilities` returns them exactly).

Ledger: ε per token in the unit ``partition:<id>`` of the bundle's output sets
(:attr:`CusTextSanitizer.ledger_unit`): amounts in it add up only for the same partition.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import registry as _registry
from . import runtime as _runtime
from .engine_rows import engine_log_probabilities
from .mechanisms.custext import partition_id
from .guarantee import checked_tolerance
from .errors import BundleFormatError, BundleIntegrityError, ParameterMismatchError
from .row_guard import law_matches
from .santext_tables import SanTextTables
from .token_runtime import TokenRuntime, check_stated_worst_case, sampled_rows

__all__ = ["CusTextSanitizer", "MECHANISMS", "STATED_MAX_TOLERANCE", "partition_id"]

MECHANISMS = _registry.names(family="custext")
#: The largest numeric tolerance a bundle may state (as for SanText).
STATED_MAX_TOLERANCE = 1e-9
class CusTextSanitizer(TokenRuntime):
    """Sanitize text with CusText / CusText+ from a verified bundle; create one with :meth:`load`.

    **Guarantee** (per token, module docstring): Pr[M(x)=y] ≤ e^ε·Pr[M(x')=y], ε-LDP. **Neighbouring
    relation**: any two inputs x, x' that share an output set (group of ≥ K tokens); there is **no**
    bound across groups — the output reveals the group of its input, so no finite worst-case LDP
    level exists — and CusText+ releases its stop words unchanged (probability 1). A document
    composes to n·ε against documents whose tokens lie, position by position, in the same groups.
    Ledger: ε per token in ``partition:<id>``. **Reference**: Chen et al. 2023, *A Customized Text
    Sanitization Mechanism with Differential Privacy* (Findings of ACL; arXiv:2207.01193), §3 (the
    mapping and sampling functions).

    Attributes
    ----------
    tables : SanTextTables
        The engine tables: per row, the output set (head) and the exact proposal.
    group_id : np.ndarray of int32, shape (V,)
        Each row's output set (−1 for a CusText+ stop word, released unchanged, and for rows that
        are not inputs).
    k : int
        The minimum group size K.
    tolerance : float
        τ, the bound on |log P̂ − log P| the bundle states.
    """

    MECHANISMS = MECHANISMS
    _RELEASED = TokenRuntime._RELEASED + ("tables", "group_id", "_table")

    def __init__(self, bundle: Any, **kwargs: Any) -> None:
        super().__init__(bundle, **kwargs)
        try:
            self.k: int = int(self.params["k"])
            self.similarity: str = str(self.params["similarity"])
            self.tolerance: float = float(self.manifest["numeric"]["max_relative_error"])
        except (KeyError, TypeError, ValueError):
            raise BundleFormatError("CusText manifest lacks k, similarity or the numeric tolerance") from None
        if not (math.isfinite(self.tolerance) and 0 <= self.tolerance <= STATED_MAX_TOLERANCE):
            raise BundleIntegrityError(f"bundle states a numeric tolerance above {STATED_MAX_TOLERANCE:g}")
        self.tables = SanTextTables.from_arrays(bundle)
        self.group_id: np.ndarray = bundle.array("group_id")
        self._check_tables()
        # CusText+: stop words are kept with probability 1 (p = 0: never sanitized)
        self._p = 0.0 if self._keeps_stop_words else 1.0
        self._table = self._rng.make_santext_table(self.tables, epsilon=self.epsilon, p=self._p)

    def _check_tables(self) -> None:
        """The invariants the guarantee relies on, beyond the engine schema."""
        t, g = self.tables, self.group_id
        if g.dtype != np.int32 or g.shape != (t.n_rows,):
            raise BundleIntegrityError("array 'group_id' is not int32 of one entry per row")
        if not np.array_equal(self.valid_input, t.valid_input):
            raise BundleIntegrityError("valid_input differs from the tables'")
        keep = t.keep_row.astype(bool)
        if not self._keeps_stop_words and keep.any():
            raise BundleIntegrityError("a CusText bundle cannot keep tokens in the clear")
        valid = t.valid_input
        if (keep & ~valid).any() or (keep[valid] != (g[valid] < 0)).any() or (g[t.outputs] < 0).any():
            raise BundleIntegrityError("kept rows and group ids disagree")
        # no tail: every output set lies in the head, and the tail slot has no proposal mass
        from .alias import realised_masses
        mass = realised_masses(t.alias_threshold, t.alias_index)
        if (mass[:, -1] != 0).any():
            raise BundleIntegrityError("a CusText row proposes outside its output set")
        # every positive-mass head member of a row lies in that row's group
        rows = np.flatnonzero(t.valid_input & ~keep)
        live = mass[rows, :-1] > 0
        members = g[t.head_ids[rows]]
        if ((members != g[rows][:, None]) & live).any():
            raise BundleIntegrityError("a row proposes an output outside its output set")
        if self.k < 1 or (np.bincount(g[t.outputs][g[t.outputs] >= 0]) < self.k).any():
            raise BundleIntegrityError("an output set is smaller than the stated K")

    @property
    def _keeps_stop_words(self) -> bool:
        """CusText+ (its statement keeps words in the clear), not CusText."""
        return _registry.get(self.mechanism).statement().kept_in_clear is not None

    @property
    def ledger_unit(self) -> str:
        """``"partition:<id>"`` (:func:`partition_id`): ε-LDP within this bundle's output sets."""
        return "partition:" + partition_id(self.manifest)

    def check_parameters(self) -> None:
        """Refuse stated parameters that the arrays do not realise (``ldptext bundle sign``).

        Checked: ``head_size`` is the tables' K; ``p`` is 0 for CusText+ (stop words kept with
        probability 1) and absent for CusText; the similarity is a known one; the stated group
        statistics are those of ``group_id``; no worst case is stated; and, for sampled rows, the
        realised log-probabilities over each output set (:meth:`log_probabilities`) equal the
        exponential mechanism ε·u(x, y)/2 − log Z(x) recomputed from the bundle's embedding at the
        **stated** ε and similarity, within twice the stated tolerance (so a relabelled ε or
        similarity is refused).

        Raises
        ------
        ParameterMismatchError
        """
        self._check_open()
        t, g, eps = self.tables, self.group_id, self.epsilon
        stated_k = self.params.get("head_size")
        if stated_k is not None and stated_k != t.head_size:
            raise ParameterMismatchError(f"manifest head_size {stated_k!r} is not K = {t.head_size} of 'head_ids'")
        p = self.params.get("p")
        if (p != 0.0) if self._keeps_stop_words else (p is not None):
            raise ParameterMismatchError(f"manifest p {p!r}: CusText+ keeps its stop words with probability 1 "
                                         f"(p = 0), CusText states none")
        if self.similarity not in ("euclidean", "cosine"):
            raise ParameterMismatchError(f"manifest similarity {self.similarity!r} is not euclidean or cosine")
        sizes = np.bincount(g[t.outputs][g[t.outputs] >= 0])
        sizes = sizes[sizes > 0]
        privacy = self.manifest.get("privacy") if isinstance(self.manifest.get("privacy"), dict) else {}
        for key, value in (("groups", sizes.size), ("smallest_group", int(sizes.min()) if sizes.size else 0),
                           ("largest_group", int(sizes.max()) if sizes.size else 0)):
            if key in privacy and privacy[key] != value:
                raise ParameterMismatchError(f"manifest {key} {privacy[key]!r} is not what 'group_id' realises "
                                             f"({value})")
        check_stated_worst_case(self.manifest, None)
        vectors = t.emb_scale.astype(np.float64)[:, None] * t.emb_q.astype(np.float64)
        live = np.flatnonzero(self.valid_input & (g >= 0))
        rows = sampled_rows(live, np.linalg.norm(vectors, axis=1))
        if not self._row_laws_ok(rows).all():
            raise ParameterMismatchError(
                f"manifest epsilon {eps:.10g} ({self.similarity} similarity) is not what the tables "
                f"realise (log-probabilities over a sampled row's output set)")

    def _row_laws_ok(self, rows: np.ndarray) -> np.ndarray:
        """Per row: its whole law over its output set is the exponential mechanism exp(ε·u/2) at the
        stated ε and similarity (u min-max normalised over the set) within twice the stated
        tolerance (:mod:`ldptext.row_guard`), and P(x → x) at most the stated largest verbatim rate; a
        CusText+ stop word (kept, never drawn) passes."""
        t, g, eps = self.tables, self.group_id, self.epsilon
        rows = np.asarray(rows, dtype=np.int64)
        ok = np.ones(rows.size, dtype=bool)
        live = np.flatnonzero(g[rows] >= 0)
        if live.size == 0:
            return ok
        realised = self.log_probabilities(rows[live])
        tol = 2.0 * checked_tolerance(self.tolerance, eps, 1.0)
        is_output = np.zeros(t.n_rows, dtype=bool)
        is_output[t.outputs] = True
        for i, x in zip(live, rows[live]):
            members = np.flatnonzero((g == g[x]) & is_output)
            a = t.emb_scale[x].astype(np.float64) * t.emb_q[x].astype(np.float64)
            b = t.emb_scale[members].astype(np.float64)[:, None] * t.emb_q[members].astype(np.float64)
            if self.similarity == "euclidean":
                score = -np.sqrt(((b - a) ** 2).sum(axis=1))
            else:
                norms = np.linalg.norm(a) * np.linalg.norm(b, axis=1)
                score = (b @ a) / np.where(norms > 0, norms, 1.0)
            span = float(score.max() - score.min())
            u = np.ones(members.size) if span <= 0 else np.clip((score - score.min()) / span, 0.0, 1.0)
            row = realised[np.searchsorted(live, i)]
            # the set's law, and nothing outside the set
            ok[i] = bool(law_matches(row[members][None, :], (eps / 2.0 * u)[None, :], tol)[0]) \
                and np.isclose(np.exp(row[members]).sum(), 1.0, rtol=0, atol=1e-9)
        ok[live] &= self._verbatim_within_stated(rows[live], realised[np.arange(live.size), rows[live]])
        return ok

    def _draw(self, flat: np.ndarray) -> np.ndarray:
        return self._rng.santext_sample(self._table, flat.astype(np.int32))

    def log_probabilities(self, xs: Any) -> np.ndarray:
        """The log-probabilities log Pr[M(x) = y] for every y as the sampler realises them (no draw, no charge).

        Parameters
        ----------
        xs : array_like of int, shape (n,) or scalar
            Input rows.

        Returns
        -------
        np.ndarray of float64, shape (n, V)
            ``-inf`` outside the output set (and, for a CusText+ stop word, everywhere but itself).
        """
        self._check_open()
        # an id out of range: InputError, not numpy's IndexError
        return engine_log_probabilities(self.tables, _runtime.row_ids(xs, self.tables.n_rows),
                                        engine_epsilon=self.epsilon, p=self._p)

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
