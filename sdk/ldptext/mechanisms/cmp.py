"""CMP and its Mahalanobis variant: what they guarantee.

Feyisetan et al. 2020, *Privacy- and Utility-Preserving Textual Analysis via Calibrated Multivariate
Perturbations* (WSDM), and Xu et al. 2020, *A Differentially Private Text Perturbation Method Using a
Regularized Mahalanobis Metric* (PrivateNLP@EMNLP): noise with density ∝ exp(−ε·‖z‖) (Mahalanobis:
shaped by S = Σ_λ^{1/2}) is added to the input's embedding and the nearest output token released;
Pr[M(x)=y] ≤ exp(ε·d(x, x'))·Pr[M(x')=y] per token, so ε·D_max-LDP over any two inputs.
"""
from __future__ import annotations

import hashlib

from ..errors import BundleFormatError
from ..guarantee import Guarantee, Statement
from . import number, params_of, section_of
from .santext import ledger_unit as metric_ledger_unit

REFERENCES = {
    "cmp": "Feyisetan et al. 2020, Privacy- and Utility-Preserving Textual Analysis via Calibrated "
           "Multivariate Perturbations (WSDM)",
    "mahalanobis": "Xu et al. 2020, A Differentially Private Text Perturbation Method Using a Regularized "
                   "Mahalanobis Metric (PrivateNLP@EMNLP)",
}
_NUMERIC = ("continuous noise in float64 from the CSPRNG, never released; the released token can differ from "
            "the ideal mechanism's only near a nearest-neighbour boundary or with probability "
            "ceil(m/2)*2^-24 (ldptext.multivariate_laplace)")
_NEIGHBOURING = "any two tokens x, x' of the input domain, at the price eps*d(x,x')"

#: the numbers the bound depends on, in report order
PARAMETERS = ("epsilon", "d_max", "index", "lambda")

STATEMENTS = {
    "cmp": Statement(
        notion="metric-LDP", unit="token", neighbouring=_NEIGHBOURING,
        metric="Euclidean over the bundle's int8-quantized embeddings", worst_case_rule="eps*D_max",
        no_worst_case="", numeric_note=_NUMERIC, kept_in_clear=None, ledger_kind="metric",
        reference=REFERENCES["cmp"], parameters=PARAMETERS),
    "mahalanobis": Statement(
        notion="metric-LDP", unit="token", neighbouring=_NEIGHBOURING,
        metric="regularized Mahalanobis ||S^-1 (phi(x) - phi(x'))||, S = Sigma_lambda^(1/2)",
        worst_case_rule="eps*D_max", no_worst_case="", numeric_note=_NUMERIC, kept_in_clear=None,
        ledger_kind="metric", reference=REFERENCES["mahalanobis"], parameters=PARAMETERS),
}


def shapes_noise(mechanism: str) -> bool:
    """Whether the mechanism's noise is shaped by S (Mahalanobis) rather than spherical (CMP)."""
    return STATEMENTS[mechanism].metric != STATEMENTS["cmp"].metric


def worst_case_epsilon(epsilon: float, d_max: float) -> float:
    """ε·D_max, D_max in the guarantee's metric."""
    return float(epsilon) * float(d_max)


def mahalanobis_metric_id(manifest: dict) -> str:
    """Identifier of a Mahalanobis bundle's metric: the embedding, the vocabulary and S (16 hex digits)."""
    try:
        parts = [str(manifest["arrays"][n]["sha256"])
                 for n in ("emb_q", "emb_scale", "blob/vocab.json", "noise_transform")]
    except (KeyError, TypeError):
        raise BundleFormatError("Mahalanobis manifest lacks the metric's hashes") from None
    return hashlib.sha256(("ldptext mahalanobis metric v1:" + ":".join(parts)).encode()).hexdigest()[:16]


def ledger_unit(manifest: dict) -> str | None:
    """``metric:<id>``: CMP shares SanText's metric; Mahalanobis' metric includes S."""
    if not shapes_noise(manifest["mechanism"]):
        return metric_ledger_unit(manifest)
    try:
        return "metric:" + mahalanobis_metric_id(manifest)
    except BundleFormatError:
        return None


def guarantee(manifest: dict) -> Guarantee:
    """The guarantee of a CMP or Mahalanobis bundle, from its manifest's ε, λ and D_max."""
    from ..registry import get

    mech = manifest["mechanism"]
    params = params_of(manifest)
    eps, lam = number(params.get("epsilon")), number(params.get("lambda"))
    d_max = number(section_of(manifest, "privacy").get("d_max"))
    details = [("nearest neighbour", f"faiss index {params.get('index')} (the 'faiss' extra); exact or "
                                     "approximate, the guarantee holds for either")]
    if lam is not None:
        details.append(("lambda", f"{lam:g}"))
    if d_max is not None:
        details.append(("D_max", f"{d_max:.6g}"))
    return Guarantee(
        mechanism=mech, label=get(mech).label, statement=STATEMENTS[mech],
        epsilon=eps, ledger_unit=ledger_unit(manifest),
        worst_case_epsilon=None if eps is None or d_max is None else worst_case_epsilon(eps, d_max),
        numeric_tolerance=None,
        parameters={"epsilon": eps, "d_max": d_max, "index": params.get("index"), "lambda": lam},
        details=tuple(details))
