"""Result and privacy-report dataclasses returned with every sanitized text.

The report states what the release guarantees: ε, p, ε₀, the vocabulary's maximum distance D_max, the
per-token worst-case LDP level ε·D_max (+ε₀), the document's worst case (n_tokens × that) and the
realised numeric tolerance, for SanText / SanText+ as in Yue et al. 2021, *Differential Privacy for
Text Analytics via Natural Text Sanitization* (Findings of ACL), as presented in Yue 2023, *Data
Synthesis: Boosting Utility and Privacy in NLP* (PhD thesis, Ohio State), §2.4, Theorems 1–2.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class PrivacyReport:
    """What one SanText(+) release guarantees.

    ``per_token_epsilon`` = ε·D_max (+ ε₀ for SanText+): the worst-case LDP level of one token over
    any two inputs of the domain; ``document_epsilon`` = n_tokens × that (sequential composition).
    The metric guarantee is finer: two documents of equal length are ε·Σᵢ d(xᵢ, x'ᵢ)-indistinguishable
    (SanText, ε·d-MLDP, Theorem 1; SanText+ adds ε₀ per token pair across the sensitive split, UMLDP,
    Theorem 2 of Yue et al. 2021, *Differential Privacy for Text Analytics via Natural Text
    Sanitization* (Findings of ACL), as presented in Yue 2023, *Data Synthesis: Boosting Utility and
    Privacy in NLP* (PhD thesis, Ohio State), §2.4). The number of tokens is **not** hidden.

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
        ln(1/p) for SanText+, else 0.
    d_max : float
        Upper bound of the largest distance between two inputs.
    per_token_epsilon : float
        ε·D_max + ε₀.
    n_tokens : int
        Tokens in the document.
    document_epsilon : float
        n_tokens × per_token_epsilon.
    numeric_tolerance : float
        Bound on the relative error of every realised probability against the formula.
    kept_in_clear_probability : float or None
        SanText+: 1 − p, the probability a non-sensitive token is released unchanged.
    """

    mechanism: str
    notion: str                  # "MLDP" or "UMLDP"
    epsilon: float               # the metric ε of ε·d(x, x')
    p: float | None
    epsilon0: float              # ln(1/p) for SanText+, else 0
    d_max: float                 # upper bound of the largest distance between two inputs
    per_token_epsilon: float
    n_tokens: int
    document_epsilon: float
    numeric_tolerance: float     # bound on the relative error of every realised probability
    kept_in_clear_probability: float | None  # SanText+: 1 - p for non-sensitive tokens

    def to_dict(self) -> dict:
        """The report as a JSON-ready dict.

        Returns
        -------
        dict
            One entry per field.
        """
        return asdict(self)

    def summary(self) -> str:
        """One human-readable line: notion, ε (and ε₀, p), token count, worst cases, tolerance.

        Returns
        -------
        str
        """
        extra = f", ε₀={self.epsilon0:.3g} (p={self.p})" if self.p is not None else ""
        return (f"{self.mechanism}: {self.notion} ε={self.epsilon:g}{extra}; "
                f"{self.n_tokens} tokens; worst case per token ε·D_max={self.per_token_epsilon:.4g}, "
                f"document {self.document_epsilon:.4g}; numeric tolerance {self.numeric_tolerance:.1e}")


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
