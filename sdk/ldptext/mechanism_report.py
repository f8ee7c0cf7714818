"""The privacy report of the comparison mechanisms (TEM, CusText(+), CMP, Mahalanobis).

SanText(+) keeps its own :class:`ldptext.report.PrivacyReport`; the mechanisms users compare it with
(:mod:`ldptext.tem`, :mod:`ldptext.custext`, :mod:`ldptext.cmp`) state different guarantees over
different neighbouring relations, so their report names both explicitly: ``notion`` (what kind of
bound), ``neighbouring`` (between which inputs it holds) and ``metric`` (the distance, where the
bound is a metric one). Like SanText's, a report says what a ledger is charged (``document_epsilon``
in ``ledger_unit``), the worst case over *any* two inputs where one exists (``None`` with the reason
otherwise), the numeric tolerance of the sampler and whether the output is seeded (not private).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class MechanismReport:
    """What one release of a token-level comparison mechanism guarantees.

    Parameters
    ----------
    mechanism : str
        ``"tem"``, ``"custext"``, ``"custext+"``, ``"cmp"`` or ``"mahalanobis"``.
    notion : str
        ``"metric-LDP"`` (Pr[M(x)=y] ≤ exp(ε·d(x, x'))·Pr[M(x')=y]) or ``"LDP within output sets"``
        (CusText: ε-LDP between inputs that share an output set).
    neighbouring : str
        The pairs of inputs the bound is stated for.
    metric : str or None
        The distance d of a metric bound (``None`` for CusText).
    epsilon : float
        The bundle's ε (per unit of distance for a metric bound).
    n_tokens : int
        Tokens in the document (not hidden).
    per_token_epsilon : float
        What each token is charged in ``ledger_unit`` (= ε).
    document_epsilon : float
        n_tokens × ε, the ledger charge of the document (composes by addition within the unit).
    ledger_unit : str
        ``"metric:<id>"`` (a metric bound, shared with SanText bundles over the same metric) or
        ``"partition:<id>"`` (CusText's output sets).
    worst_case_token_epsilon : float or None
        A true LDP level of one token over any two inputs of the domain, where one exists.
    worst_case_document_epsilon : float or None
        n_tokens × ``worst_case_token_epsilon``.
    worst_case_note : str
        What the worst case is, or why there is none.
    numeric_tolerance : float or None
        Exact samplers: τ, a bound on |log P̂ − log P| of every realised probability against the
        formula. ``None`` where the output law is not computable (CMP, Mahalanobis: see
        ``numeric_note``).
    ratio_slack : float or None
        2τ: the ratio bound holds for the realised probabilities with slack exp(2τ).
    numeric_note : str
        How the sampler's floating point relates to the stated guarantee.
    kept_in_clear_probability : float or None
        CusText+: 1.0 for its stop words (released unchanged); ``None`` where nothing is kept.
    seeded : bool
        True when the output came from a seeded generator: reproducible and **not private**.
    backend : str
        What sampled: ``"libldptext"`` (the C library), ``"native"`` (the C extension's sampler) or
        ``"fallback"`` (numpy, the same distribution, much slower).
    parameters : dict
        The mechanism's parameters (ε, γ, β, K, λ, D_max, ...), as the bundle states them.
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
    backend: str                 # "native" or "fallback"
    parameters: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The report as a JSON-ready dict (a missing worst case or tolerance is ``null``).

        Returns
        -------
        dict
            One entry per field.
        """
        return asdict(self)

    def summary(self) -> str:
        """One human-readable line: the guarantee, the ledger charge, tolerance, seeding.

        Returns
        -------
        str
        """
        if self.worst_case_token_epsilon is None:
            worst = "no finite worst-case LDP level over all inputs"
        else:
            worst = (f"worst case {self.worst_case_token_epsilon:.4g}-LDP per token, document "
                     f"{self.worst_case_document_epsilon:.4g}")
        tol = ("numeric tolerance n/a (statistical)" if self.numeric_tolerance is None
               else f"numeric tolerance {self.numeric_tolerance:.1e}")
        kept = ("" if self.kept_in_clear_probability is None else
                f"; stop words in the clear w.p. {self.kept_in_clear_probability:.3g}")
        seeded = "; SEEDED: reproducible, NOT private" if self.seeded else ""
        return (f"{self.mechanism}: {self.notion} eps={self.epsilon:g} per token ({self.neighbouring}); "
                f"{worst}{kept}; {self.n_tokens} tokens, ledger charge {self.document_epsilon:.4g} "
                f"({self.ledger_unit}); {tol}{seeded}")
