"""What a mechanism guarantees, stated once: :class:`Statement` (its fixed prose) and
:class:`Guarantee` (that prose with one bundle's numbers).

Each mechanism's unit (:mod:`ldptext.mechanisms`) owns one pure function ``guarantee(manifest) ->
Guarantee`` and the :class:`Statement` of each mechanism it runs. Everything that says what a release
guarantees is rendered from them: the report returned with every release
(:meth:`Guarantee.report`), ``bundle inspect`` (:meth:`Guarantee.rows`), and, through
``native/gen_mechanisms.py``, the C library's ``ldp_bundle_info``, the web wrapper's and the JVM
binding's reports. In the manner of OpenDP's measurements, a guarantee names what is private
(``unit``), with respect to which neighbouring relation, under which notion and at which ε.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .report import PrivacyReport
    from .verbatim import VerbatimRate

__all__ = ["NOTIONS", "WORST_CASE_RULES", "CHECK_RESOLUTION", "Statement", "Guarantee", "number", "checked_tolerance"]

#: Every notion a mechanism may state, spelled once.
NOTIONS = {
    "metric-LDP": "Pr[M(x)=y] <= exp(eps*d(x,x'))*Pr[M(x')=y]",
    "UMLDP": "Pr[M(x)=y] <= exp(eps*d(x,x') + eps0*[x, x' across the sensitive split])*Pr[M(x')=y] "
             "for protected outputs y",
    "truncated metric-LDP": "Pr[M(x)=y] <= exp(eps*min(d(x,x'), gamma))*Pr[M(x')=y]",
    "LDP within output sets": "Pr[M(x)=y] <= exp(eps)*Pr[M(x')=y] for x, x' with the same output set",
    "LDP": "Pr[M(x) in S] <= exp(eps)*Pr[M(x') in S] + delta",
}

#: How a worst case over any two inputs follows from a bundle's numbers (the C library evaluates the
#: same rule by name): ``None`` where no finite level exists.
WORST_CASE_RULES = {
    "eps": "pure LDP: the bound holds between any two inputs",
    "eps*D_max": "the metric bound at the largest input distance D_max",
    "eps*min(gamma, D_max)": "the truncated distance never exceeds gamma, nor d its maximum D_max",
}


@dataclass(frozen=True)
class Statement:
    """The fixed prose of one mechanism's guarantee: the same for every bundle of it.

    Attributes
    ----------
    notion : str
        A key of :data:`NOTIONS`.
    unit : str
        What one release protects: ``"token"`` or ``"chunk"``.
    neighbouring : str
        Between which inputs the bound holds.
    metric : str or None
        The distance d of a metric bound.
    worst_case_rule : str or None
        A key of :data:`WORST_CASE_RULES`, or ``None`` (``no_worst_case`` says why).
    no_worst_case : str
        Why there is no finite worst case ("" where there is one).
    numeric_note : str
        How the sampler's floating point relates to the bound.
    kept_in_clear : str or None
        What is released unchanged by design, if anything.
    ledger_kind : str
        ``"metric"``, ``"partition"`` or ``"ldp"``: the kind of the ledger unit.
    reference : str
        The paper, by title and section.
    parameters : tuple of str
        The names of the numbers the bound depends on, in report order (the report's
        ``parameters``; the C library's reports carry the same keys).
    legacy_notion : str or None
        The spelling of the notion that bundles built before it was unified state (accepted in a
        manifest's ``privacy.notion`` besides ``notion``).
    """

    notion: str
    unit: str
    neighbouring: str
    metric: str | None
    worst_case_rule: str | None
    no_worst_case: str
    numeric_note: str
    kept_in_clear: str | None
    ledger_kind: str
    reference: str
    parameters: tuple = ("epsilon",)
    legacy_notion: str | None = None

    def accepts_notion(self, stated: object) -> bool:
        """Whether a manifest's ``privacy.notion`` names this statement's notion."""
        return stated == self.notion or (self.legacy_notion is not None and stated == self.legacy_notion)

    def __post_init__(self) -> None:
        if self.notion not in NOTIONS:
            raise ValueError(f"unknown notion {self.notion!r}: one of {sorted(NOTIONS)}")
        if self.worst_case_rule is not None and self.worst_case_rule not in WORST_CASE_RULES:
            raise ValueError(f"unknown worst-case rule {self.worst_case_rule!r}")
        if (self.worst_case_rule is None) != bool(self.no_worst_case):
            raise ValueError("state either a worst-case rule or why there is none")
        if "epsilon" not in self.parameters and self.unit == "token":
            raise ValueError("a token mechanism's parameters include epsilon")


#: The float64 resolution of the checks of a realised law, per unit of (1 + ε·R): every runtime
#: recomputes log-probabilities from the bundle's integers and accepts a log-ratio off the formula by
#: at most 2·:func:`checked_tolerance`. Below it no check can tell a stated tolerance from another.
CHECK_RESOLUTION = 0.5e-12


def checked_tolerance(stated: float, epsilon: float, reach: float) -> float:
    """The per-probability tolerance every runtime's checks confirm: the stated τ plus their float64
    resolution, τ + :data:`CHECK_RESOLUTION`·(1 + ε·R), with R the largest quantity ε multiplies in
    the law (D_max for SanText and TEM, 1 for CusText). What the reports state (a signer's smaller
    τ cannot be confirmed, so it is never repeated alone); libldptext computes the same
    (``native/lib/bundle.c``)."""
    return stated + CHECK_RESOLUTION * (1.0 + epsilon * reach)


def number(value: object) -> float | None:
    """A finite number from a manifest, or ``None``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


@dataclass(frozen=True)
class Guarantee:
    """One bundle's guarantee: its mechanism's :class:`Statement` with the bundle's numbers.

    Attributes
    ----------
    mechanism, label : str
        The registry's name and display label.
    statement : Statement
    epsilon : float or None
        ε per unit (per unit of distance for a metric bound); ``None`` where it is chosen per call
        (DP-BART).
    ledger_unit : str or None
        What a ledger is charged in (``metric:<id>``, ``partition:<id>``); ``None`` when the
        manifest lacks what names it.
    worst_case_epsilon : float or None
        A true LDP level per unit over any two inputs, where one exists.
    numeric_tolerance : float or None
        τ, a bound on |log P̂ − log P| of every realised probability (exact samplers only).
    kept_in_clear_probability : float or None
        Probability a kept word is released unchanged.
    verbatim : VerbatimRate or None
        P(M(x) = x) over the sensitive inputs, where stated.
    parameters : dict
        The numbers the bound depends on, as the bundle states them.
    details : tuple of (str, str)
        Mechanism-specific lines for ``bundle inspect``.
    """

    mechanism: str
    label: str
    statement: Statement
    epsilon: float | None
    ledger_unit: str | None
    worst_case_epsilon: float | None
    numeric_tolerance: float | None
    kept_in_clear_probability: float | None = None
    verbatim: "VerbatimRate | None" = None
    parameters: dict = field(default_factory=dict)
    details: tuple = ()

    @property
    def notion(self) -> str:
        """The statement's notion (a key of :data:`NOTIONS`)."""
        return self.statement.notion

    @property
    def reference(self) -> str:
        """The paper, by title and section."""
        return self.statement.reference

    @property
    def worst_case_note(self) -> str:
        """What the worst case is, or why there is none."""
        s = self.statement
        if s.worst_case_rule is None:
            return s.no_worst_case
        return f"{s.worst_case_rule}: {WORST_CASE_RULES[s.worst_case_rule]}"

    @property
    def weak_privacy(self) -> bool:
        """The output is close to the input (:mod:`ldptext.verbatim`)."""
        return self.verbatim is not None and self.verbatim.near_identity

    def report(self, n_tokens: int, *, seeded: bool, backend: str,
               ledger_unit: str | None = None) -> "PrivacyReport":
        """The report of one release of ``n_tokens`` units (tokens), composing by addition;
        ``ledger_unit``: the runtime's, where it charges another unit than the bundle's own."""
        from .report import PrivacyReport

        n, s, eps, worst = int(n_tokens), self.statement, self.epsilon, self.worst_case_epsilon
        v = self.verbatim
        return PrivacyReport(
            mechanism=self.mechanism, notion=s.notion, neighbouring=s.neighbouring, metric=s.metric,
            epsilon=eps, n_tokens=n, per_token_epsilon=eps, document_epsilon=None if eps is None else eps * n,
            ledger_unit=ledger_unit or self.ledger_unit, worst_case_token_epsilon=worst,
            worst_case_document_epsilon=None if worst is None else worst * n,
            worst_case_note=self.worst_case_note, numeric_tolerance=self.numeric_tolerance,
            ratio_slack=None if self.numeric_tolerance is None else 2 * self.numeric_tolerance,
            numeric_note=s.numeric_note, kept_in_clear_probability=self.kept_in_clear_probability,
            seeded=bool(seeded), backend=backend,
            parameters={k: self.parameters.get(k) for k in s.parameters},
            verbatim_median=None if v is None else v.median, verbatim_max=None if v is None else v.maximum,
            verbatim_cap=None if v is None else v.cap, verbatim_p90=None if v is None else v.p90,
            verbatim_p99=None if v is None else v.p99, verbatim_above_0_5=None if v is None else v.above_0_5,
            verbatim_above_0_9=None if v is None else v.above_0_9, weak_privacy=self.weak_privacy)

    def rows(self) -> list[tuple[str, str]]:
        """Labelled lines for ``bundle inspect``, in display order."""
        from .verbatim import format_probability

        s, eps = self.statement, self.epsilon
        rows = [("notion", f"{s.notion}: {NOTIONS[s.notion]} (per {s.unit})"),
                ("neighbouring", s.neighbouring)]
        if s.metric is not None:
            rows.append(("metric", s.metric))
        if eps is not None:
            label = "metric epsilon" if s.ledger_kind == "metric" else "epsilon"
            rows.append((label, f"{eps:g} per {s.unit} (ledger charge: n x {eps:g} per document)"))
        if self.ledger_unit is not None:
            rows.append(("ledger unit", self.ledger_unit))
        rows += list(self.details)
        if self.worst_case_epsilon is not None:
            w = self.worst_case_epsilon
            rows.append((f"worst case per {s.unit}", f"{s.worst_case_rule} = {w:.6g}-LDP"))
            rows.append(("document of n tokens", f"n x {w:.6g}-LDP (e.g. 100 tokens: {100 * w:.6g}); "
                                                 "the number of tokens is not hidden"))
        elif s.worst_case_rule is None:
            rows.append(("worst-case LDP level", "none (not finite): " + s.no_worst_case))
        if s.kept_in_clear is not None:
            p = self.kept_in_clear_probability
            rows.append(("kept in the clear", s.kept_in_clear
                         + ("" if p is None else f", with probability {p:.6g}")))
        if self.verbatim is not None:
            v = self.verbatim
            rows.append(("verbatim rate", v.describe()))
            if v.has_tail:
                rows.append(("verbatim tail", f"p90 {format_probability(v.p90)}, p99 {format_probability(v.p99)}; "
                                              f"{v.above_0_5} sensitive words released unchanged w.p. >= 0.5, "
                                              f"{v.above_0_9} w.p. >= 0.9"))
            rows.append(("verbatim cap", "none" if v.cap is None else
                         f"{v.cap:g}: no sensitive word is released unchanged with a higher probability"))
            if self.weak_privacy:
                rows.append(("WEAK PRIVACY", "the output is close to the input: median sensitive word "
                                             "released unchanged w.p. >= 0.9 (built with --allow-weak-privacy)"))
        rows.append(("floating point", s.numeric_note))
        rows.append(("reference", self.reference))
        return rows
