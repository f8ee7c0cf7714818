"""The privacy report returned with every sanitized text: one type for every token mechanism.

A report is rendered from the bundle's :class:`ldptext.guarantee.Guarantee` (stated once, in the
mechanism's unit of :mod:`ldptext.mechanisms`) and the release's own facts: the number of tokens
(not hidden), whether the output is seeded (reproducible, **not private**) and what sampled it.

What a ledger is charged, and composes: the per-token ε summed over tokens (n·ε per document), in the
bundle's ``ledger_unit`` (``metric:<id>`` for a metric bound, ``partition:<id>`` for CusText's output
sets). A worst case over *any* two inputs is stated where one exists (``None`` with the reason
otherwise). For the realised probabilities of an exact sampler every ratio bound holds with slack
exp(2τ), τ the numeric tolerance (``ratio_slack`` = 2τ in log space).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .verbatim import format_probability


@dataclass(frozen=True)
class PrivacyReport:
    """What one release of a token mechanism guarantees.

    Parameters
    ----------
    mechanism : str
        The bundle's mechanism (:mod:`ldptext.registry`).
    notion : str
        A key of :data:`ldptext.guarantee.NOTIONS` (``"metric-LDP"``, ``"UMLDP"``, ``"truncated
        metric-LDP"``, ``"LDP within output sets"``).
    neighbouring : str
        The pairs of inputs the bound is stated for.
    metric : str or None
        The distance d of a metric bound.
    epsilon : float
        The bundle's ε (per unit of distance for a metric bound).
    n_tokens : int
        Tokens in the document (not hidden).
    per_token_epsilon : float
        What each token is charged in ``ledger_unit`` (= ε).
    document_epsilon : float
        n_tokens × ε, the ledger charge of the document (composes by addition within the unit). Not
        an LDP level for a metric bound.
    ledger_unit : str
        ``"metric:<id>"`` or ``"partition:<id>"``.
    worst_case_token_epsilon : float or None
        A true LDP level of one token over any two inputs, where one exists.
    worst_case_document_epsilon : float or None
        n_tokens × ``worst_case_token_epsilon``.
    worst_case_note : str
        What the worst case is, or why there is none.
    numeric_tolerance : float or None
        Exact samplers: τ, a bound on |log P̂ − log P| of every realised probability against the
        formula; ``None`` where the output law is not computable (``numeric_note`` says why).
    ratio_slack : float or None
        2τ.
    numeric_note : str
        How the sampler's floating point relates to the stated guarantee.
    kept_in_clear_probability : float or None
        The probability a kept word (SanText+'s V_N: 1 − p; CusText+'s stop words: 1) is released
        unchanged; ``None`` where nothing is kept.
    seeded : bool
        True when the output came from a seeded generator: reproducible and **not private**.
    backend : str
        What sampled: ``"libldptext"`` (the C library), ``"native"`` (the C extension's sampler) or
        ``"fallback"`` (numpy, the same distribution, much slower).
    parameters : dict
        The numbers the bound depends on (ε, p, ε₀, γ, β, K, λ, D_max, ...), as the bundle states them.
    verbatim_median, verbatim_max : float or None
        Median and largest P(M(x) = x) over the sensitive inputs, where stated
        (:mod:`ldptext.verbatim`).
    verbatim_cap : float or None
        The cap τ the build enforced on every sensitive input's P(M(x) = x), where stated.
    verbatim_p90, verbatim_p99 : float or None
        The 90th and 99th percentiles of P(M(x) = x) over the sensitive inputs, where stated.
    verbatim_above_0_5, verbatim_above_0_9 : int or None
        How many sensitive inputs are released unchanged with probability at least 0.5 and 0.9.
    weak_privacy : bool
        True when the median is at least :data:`ldptext.verbatim.NEAR_IDENTITY_MEDIAN`: the output
        is close to the input (only with ``allow_weak_privacy=True``).
    """

    mechanism: str
    notion: str
    neighbouring: str
    metric: str | None
    epsilon: float
    n_tokens: int
    per_token_epsilon: float
    document_epsilon: float
    ledger_unit: str
    worst_case_token_epsilon: float | None
    worst_case_document_epsilon: float | None
    worst_case_note: str
    numeric_tolerance: float | None
    ratio_slack: float | None
    numeric_note: str
    kept_in_clear_probability: float | None
    seeded: bool
    backend: str
    parameters: dict = field(default_factory=dict)
    verbatim_median: float | None = None
    verbatim_max: float | None = None
    verbatim_cap: float | None = None
    verbatim_p90: float | None = None
    verbatim_p99: float | None = None
    verbatim_above_0_5: int | None = None
    verbatim_above_0_9: int | None = None
    weak_privacy: bool = False

    @property
    def p(self) -> float | None:
        """SanText+'s probability of sanitizing a non-sensitive token (``None`` elsewhere)."""
        return self.parameters.get("p")

    @property
    def epsilon0(self) -> float:
        """SanText+'s ε₀ = ln(1/p) across the sensitive split (0 elsewhere)."""
        return float(self.parameters.get("epsilon0") or 0.0)

    @property
    def d_max(self) -> float | None:
        """The stated bound of the largest distance between two inputs (metric mechanisms)."""
        return self.parameters.get("d_max")

    def to_dict(self) -> dict:
        """The report as a JSON-ready dict (no infinities: a missing number is ``null``)."""
        return asdict(self)

    def summary(self) -> str:
        """One human-readable line: the guarantee, the ledger charge, tolerance, seeding."""
        if self.worst_case_token_epsilon is None:
            worst = "no finite worst-case LDP level over all inputs"
        else:
            rule = self.worst_case_note.partition(":")[0]
            worst = (f"worst case {rule} = {self.worst_case_token_epsilon:.4g}-LDP per token, document "
                     f"{self.worst_case_document_epsilon:.4g}")
        tol = ("numeric tolerance n/a (statistical)" if self.numeric_tolerance is None else
               f"numeric tolerance {self.numeric_tolerance:.1e} (ratio slack exp({self.ratio_slack:.1e}))")
        kept = ("" if self.kept_in_clear_probability is None else
                f"; kept words in the clear w.p. {self.kept_in_clear_probability:.3g}")
        verbatim = "" if self.verbatim_median is None else (
            f"; sensitive words released unchanged w.p. {self.verbatim_median:.3g} (median) to "
            f"{format_probability(self.verbatim_max)} (largest)")
        if self.verbatim_p90 is not None:
            verbatim += (f", p90 {format_probability(self.verbatim_p90)}, p99 "
                         f"{format_probability(self.verbatim_p99)}, {self.verbatim_above_0_5} at >= 0.5, "
                         f"{self.verbatim_above_0_9} at >= 0.9")
        if self.verbatim_cap is not None:
            verbatim += f", capped at {self.verbatim_cap:g}"
        weak = "; WEAK PRIVACY: the output is close to the input (allowed explicitly)" if self.weak_privacy else ""
        seeded = "; SEEDED: reproducible, NOT private" if self.seeded else ""
        return (f"{self.mechanism}: {self.notion} eps={self.epsilon:g} per token ({self.neighbouring}); "
                f"{worst}{kept}; {self.n_tokens} tokens, ledger charge {self.document_epsilon:.4g} "
                f"({self.ledger_unit}); {tol}{verbatim}{weak}{seeded}")


@dataclass(frozen=True)
class Sanitized:
    """A sanitized document: ``text`` may leave the device; ``report`` says what it guarantees.

    Parameters
    ----------
    text : str
        The sanitized document (same number of tokens as the input).
    report : PrivacyReport
        Its guarantee.
    """

    text: str
    report: PrivacyReport

    @property
    def n_tokens(self) -> int:
        """The document's number of tokens (not hidden by the mechanism)."""
        return self.report.n_tokens
