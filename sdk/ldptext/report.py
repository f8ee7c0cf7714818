"""Result and privacy-report dataclasses returned with every sanitized text (SPEC §2 item 5)."""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class PrivacyReport:
    """What one SanText(+) release guarantees.

    ``per_token_epsilon`` = ε·D_max (+ ε₀ for SanText+): the worst-case LDP level of one token over
    any two inputs of the domain; ``document_epsilon`` = n_tokens × that (sequential composition).
    The metric guarantee is finer: two documents of equal length are ε·Σᵢ d(xᵢ, x'ᵢ)-indistinguishable.
    The number of tokens is **not** hidden.
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
        return asdict(self)

    def summary(self) -> str:
        extra = f", ε₀={self.epsilon0:.3g} (p={self.p})" if self.p is not None else ""
        return (f"{self.mechanism}: {self.notion} ε={self.epsilon:g}{extra}; "
                f"{self.n_tokens} tokens; worst case per token ε·D_max={self.per_token_epsilon:.4g}, "
                f"document {self.document_epsilon:.4g}; numeric tolerance {self.numeric_tolerance:.1e}")


@dataclass(frozen=True)
class Sanitized:
    """A sanitized document: ``text`` may leave the device; ``report`` says what it guarantees."""

    text: str
    report: PrivacyReport

    @property
    def n_tokens(self) -> int:
        return self.report.n_tokens
