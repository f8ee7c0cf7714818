"""TEM, the truncated exponential mechanism: what it guarantees.

Carvalho, Vasiloudis, Feyisetan & Wang 2021, *TEM: High Utility Metric Differential Privacy on Text*
(arXiv:2107.07928): Pr[M(x)=y] ≤ exp(ε·min(d(x, x'), γ))·Pr[M(x')=y] per token, so ε·min(γ, D_max)-LDP
over any two inputs; d is the Euclidean distance of the bundle's metric embedding (the same metric as
SanText's, so a ledger charges both in one unit).
"""
from __future__ import annotations

from ..guarantee import Guarantee, Statement
from . import number, params_of, reported_tolerance, section_of, stated_verbatim
from .santext import ledger_unit

REFERENCE = ("Carvalho et al. 2021, TEM: High Utility Metric Differential Privacy on Text (arXiv:2107.07928), "
             "the truncated exponential mechanism and its privacy theorem")

#: the numbers the bound depends on, in report order
PARAMETERS = ("epsilon", "gamma", "beta", "d_max")

STATEMENTS = {
    "tem": Statement(
        notion="truncated metric-LDP", unit="token",
        neighbouring="any two tokens x, x' of the input domain, at the price eps*min(d(x,x'), gamma)",
        metric="Euclidean over the bundle's int8-quantized embeddings, truncated at gamma",
        worst_case_rule="eps*min(gamma, D_max)", no_worst_case="",
        numeric_note="exact sampler (the SanText engine, exact Bernoulli and exact rejection); realised "
                     "log-probabilities within the stated tolerance of the formula",
        kept_in_clear=None, ledger_kind="metric", reference=REFERENCE,
        parameters=PARAMETERS, legacy_notion="metric-LDP"),
}


def worst_case_epsilon(epsilon: float, gamma: float, d_max: float) -> float:
    """ε·min(γ, D_max): the truncated distance min(d, γ) never exceeds γ, nor d its maximum D_max."""
    return float(epsilon) * min(float(gamma), float(d_max))


def guarantee(manifest: dict) -> Guarantee:
    """The guarantee of a TEM bundle, from its manifest's ε, γ, β and D_max."""
    from ..registry import get

    mech = manifest["mechanism"]
    params = params_of(manifest)
    eps, gamma, beta = (number(params.get(k)) for k in ("epsilon", "gamma", "beta"))
    d_max = number(section_of(manifest, "privacy").get("d_max"))
    details: list[tuple[str, str]] = []
    if gamma is not None:
        details.append(("threshold gamma", f"{gamma:.6g}" + (
            "" if beta is None else f" (from beta = {beta:g}: every input that is itself an output draws "
                                    "the far set w.p. <= beta)")))
    if d_max is not None:
        details.append(("D_max", f"{d_max:.6g}"))
    worst = None if None in (eps, gamma, d_max) else worst_case_epsilon(eps, gamma, d_max)
    verbatim, shown = stated_verbatim(manifest)
    return Guarantee(
        mechanism=mech, label=get(mech).label, statement=STATEMENTS[mech], epsilon=eps,
        ledger_unit=ledger_unit(manifest), worst_case_epsilon=worst,
        numeric_tolerance=reported_tolerance(manifest, eps, d_max),
        parameters={"epsilon": eps, "gamma": gamma, "beta": beta, "d_max": d_max},
        verbatim=verbatim, details=tuple(details) + shown)
