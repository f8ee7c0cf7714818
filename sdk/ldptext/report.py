"""Result and privacy-report dataclasses returned with every sanitized text.

The report states the guarantee that holds, for SanText / SanText+ as in Yue et al. 2021,
*Differential Privacy for Text Analytics via Natural Text Sanitization* (Findings of ACL), as
presented in Yue 2023, *Data Synthesis: Boosting Utility and Privacy in NLP* (PhD thesis, Ohio State),
§2.4, Theorems 1–2:

* SanText: ε·d(x, x')-MLDP per token; its worst case over the vocabulary, ε·D_max, is a true LDP
  level per token (n·ε·D_max per document of n tokens).
* SanText+: (V_S, V_P, ε, ε₀)-UMLDP — the metric bound for protected outputs y ∈ V_P, an extra
  ε₀ = ln(1/p) across the sensitive split, and non-sensitive (V_N) words released **in the clear with
  probability 1 − p**: there is no finite worst-case LDP level (reported as ``None``, with the reason).

What a ledger is charged, and composes: the per-token metric ε summed over tokens (n·ε per
document), in the unit ``metric:<id>`` of the bundle's metric. The number of tokens is not hidden.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class PrivacyReport:
    """What one SanText(+) release guarantees.

    Neighbouring relation: two documents of the same length n (the length is not hidden); they are
    ε·Σᵢ d(xᵢ, x'ᵢ)-indistinguishable (SanText, ε·d-MLDP, Theorem 1; SanText+ for protected outputs,
    with ε₀ more per token pair across the sensitive split, UMLDP, Theorem 2 of Yue et al. 2021,
    *Differential Privacy for Text Analytics via Natural Text Sanitization* (Findings of ACL), as
    presented in Yue 2023, *Data Synthesis: Boosting Utility and Privacy in NLP* (PhD thesis, Ohio
    State), §2.4). For the realised probabilities every ratio bound holds with slack exp(2τ), τ the
    numeric tolerance (``ratio_slack`` = 2τ in log space).

    Parameters
    ----------
    mechanism : str
        ``"santext"`` or ``"santext+"``.
    notion : str
        ``"MLDP"`` or ``"UMLDP"``.
    epsilon : float
        The metric ε of ε·d(x, x').
    p : float or None
        SanText+'s probability of sanitizing a non-sensitive token (``None`` for SanText).
    epsilon0 : float
        ln(1/p) for SanText+ (the extra bound across the split), else 0.
    d_max : float
        Upper bound of the largest distance between two inputs.
    n_tokens : int
        Tokens in the document.
    per_token_epsilon : float
        The per-token metric ε (= ε): what each token is charged in ``ledger_unit``.
    document_epsilon : float
        n_tokens × ε: the document's ledger charge in ``ledger_unit`` (metric ε, composes by
        addition for the same metric). Not an LDP level.
    ledger_unit : str
        ``"metric:<id>"``, the bundle's metric.
    worst_case_token_epsilon : float or None
        SanText: ε·D_max, a true per-token LDP level over any two inputs. SanText+: ``None``, no
        finite level exists (``worst_case_note`` says why).
    worst_case_document_epsilon : float or None
        n_tokens × ``worst_case_token_epsilon`` (``None`` for SanText+).
    worst_case_note : str
        What the worst case means, or why there is none.
    numeric_tolerance : float
        τ: bound on |log P̂ − log P| of every realised probability against the formula.
    ratio_slack : float
        2τ: Pr[M(x)=y] ≤ exp(ε·d(x, x') (+ε₀) + 2τ)·Pr[M(x')=y] for the realised probabilities.
    kept_in_clear_probability : float or None
        SanText+: 1 − p, the probability a non-sensitive token is released unchanged.
    seeded : bool
        True when the output came from a seeded generator: reproducible and **not private**.
    backend : str
        What sampled: ``"libldptext"`` (the C library), ``"native"`` (the C extension's sampler) or
        ``"fallback"`` (numpy, the same distribution, much slower).
    verbatim_median, verbatim_max : float or None
        Median and largest P(M(x) = x) over the sensitive inputs: how often a sensitive word is
        released unchanged (:mod:`ldptext.verbatim`).
    weak_privacy : bool
        True when the median is at least :data:`ldptext.verbatim.NEAR_IDENTITY_MEDIAN`: the output
        is close to the input (only with ``allow_weak_privacy=True``).
    """

    mechanism: str
    notion: str                  # "MLDP" or "UMLDP"
    epsilon: float               # the metric ε of ε·d(x, x')
    p: float | None
    epsilon0: float              # ln(1/p) for SanText+, else 0
    d_max: float                 # upper bound of the largest distance between two inputs
    n_tokens: int
    per_token_epsilon: float     # metric ε per token (the ledger charge per token)
    document_epsilon: float      # n_tokens · ε, in ledger_unit
    ledger_unit: str             # "metric:<id>"
    worst_case_token_epsilon: float | None      # SanText: ε·D_max; SanText+: None
    worst_case_document_epsilon: float | None
    worst_case_note: str
    numeric_tolerance: float     # τ: |log P̂ − log P| ≤ τ
    ratio_slack: float           # 2τ
    kept_in_clear_probability: float | None  # SanText+: 1 - p for non-sensitive tokens
    seeded: bool
    backend: str                 # "libldptext", "native" or "fallback"
    verbatim_median: float | None = None
    verbatim_max: float | None = None
    weak_privacy: bool = False

    def to_dict(self) -> dict:
        """The report as a JSON-ready dict (no infinities: a missing worst case is ``null``).

        Returns
        -------
        dict
            One entry per field.
        """
        return asdict(self)

    def summary(self) -> str:
        """One human-readable line: the guarantee that holds, the ledger charge, tolerance, seeding.

        Returns
        -------
        str
        """
        if self.mechanism == "santext+":
            guarantee = (f"UMLDP: eps*d(x,x') for protected outputs, +eps0={self.epsilon0:.3g} across the "
                         f"split (p={self.p:g}); non-sensitive words in the clear w.p. "
                         f"{self.kept_in_clear_probability:.3g}, so no finite worst-case LDP level")
        else:
            guarantee = (f"MLDP eps*d(x,x'); worst case eps*D_max={self.worst_case_token_epsilon:.4g}-LDP "
                         f"per token, document {self.worst_case_document_epsilon:.4g}")
        seeded = "; SEEDED: reproducible, NOT private" if self.seeded else ""
        verbatim = "" if self.verbatim_median is None else (
            f"; sensitive words released unchanged w.p. {self.verbatim_median:.3g} (median) to "
            f"{self.verbatim_max:.3g} (largest)")
        weak = "; WEAK PRIVACY: the output is close to the input (allowed explicitly)" if self.weak_privacy else ""
        return (f"{self.mechanism}: metric eps={self.epsilon:g} per token; {guarantee}; {self.n_tokens} "
                f"tokens, ledger charge {self.document_epsilon:.4g} ({self.ledger_unit}); numeric "
                f"tolerance {self.numeric_tolerance:.1e} (ratio slack exp({self.ratio_slack:.1e}))"
                f"{verbatim}{weak}{seeded}")


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
