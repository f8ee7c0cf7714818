"""SanText and SanText+: what they guarantee.

Yue et al. 2021, *Differential Privacy for Text Analytics via Natural Text Sanitization* (Findings of
ACL), as presented in Yue 2023, *Data Synthesis: Boosting Utility and Privacy in NLP* (PhD thesis,
Ohio State), §2.4, Theorems 1–2: SanText is ε·d(x, x')-metric LDP per token, so ε·D_max-LDP over any
two inputs; SanText+ is (V_S, V_P, ε, ε₀)-UMLDP with ε₀ = ln(1/p), and releases non-sensitive (V_N)
words in the clear with probability 1 − p, so no finite worst-case LDP level exists.
"""
from __future__ import annotations

import hashlib

from ..errors import BundleFormatError
from ..guarantee import Guarantee, Statement
from . import number, params_of, reported_tolerance, section_of, stated_verbatim

REFERENCE = ("Yue et al. 2021, Differential Privacy for Text Analytics via Natural Text Sanitization (Findings "
             "of ACL), as presented in Yue 2023, Data Synthesis: Boosting Utility and Privacy in NLP (PhD "
             "thesis, Ohio State), section 2.4")
METRIC = "Euclidean over the bundle's int8-quantized embeddings"
NUMERIC = ("exact sampler (alias tables, exact Bernoulli and exact rejection); realised log-probabilities "
           "within the stated tolerance of the formula, ratio bounds with slack exp(2*tolerance)")
#: Why SanText+ has no finite worst-case LDP level (stated in every SanText+ report).
NO_WORST_CASE = ("SanText+ releases non-sensitive (V_N) words in the clear with probability 1 - p: "
                 "Pr[M(x)=x] = 1 - p for x in V_N but 0 for any other input, so no finite LDP level "
                 "holds over all inputs; the guarantee is UMLDP (metric bound for protected outputs, "
                 "+eps0 across the split)")

#: the numbers the bound depends on, in report order
PARAMETERS = ("epsilon", "p", "epsilon0", "d_max")

STATEMENTS = {
    "santext": Statement(
        notion="metric-LDP", unit="token", neighbouring="any two tokens x, x' of the input domain, at the "
        "price eps*d(x,x'); documents of the same length compose position by position", metric=METRIC,
        worst_case_rule="eps*D_max", no_worst_case="", numeric_note=NUMERIC, kept_in_clear=None,
        ledger_kind="metric", reference=REFERENCE,
        parameters=PARAMETERS, legacy_notion="MLDP"),
    "santext+": Statement(
        notion="UMLDP", unit="token", neighbouring="any two tokens x, x' of the input domain, at the price "
        "eps*d(x,x') for protected outputs, +eps0 = ln(1/p) across the sensitive split", metric=METRIC,
        worst_case_rule=None, no_worst_case=NO_WORST_CASE, numeric_note=NUMERIC,
        kept_in_clear="non-sensitive (V_N) words, released unchanged with probability 1 - p",
        ledger_kind="metric", reference=REFERENCE,
        parameters=PARAMETERS),
}


def metric_id(manifest: dict) -> str:
    """Identifier of a bundle's metric, from its verified array hashes.

    The metric is the Euclidean distance over the bundle's int8 metric embedding, row i being the
    vocabulary's token i; the id hashes exactly that (``emb_q``, ``emb_scale`` and ``vocab.json``),
    so two bundles over the same embedding and vocabulary (any ε, p, split or mechanism using this
    metric: SanText, TEM, CMP) share it, and different metrics differ.

    Returns
    -------
    str
        16 lowercase hex digits.

    Raises
    ------
    BundleFormatError
        The manifest lacks one of those array entries.
    """
    try:
        parts = [str(manifest["arrays"][n]["sha256"]) for n in ("emb_q", "emb_scale", "blob/vocab.json")]
    except (KeyError, TypeError):
        raise BundleFormatError("manifest lacks the metric embedding's hashes") from None
    return hashlib.sha256(("ldptext santext metric v1:" + ":".join(parts)).encode()).hexdigest()[:16]


def ledger_unit(manifest: dict, name: str = "metric") -> str | None:
    """``"<name>:<metric id>"``, or ``None`` when the manifest lacks the hashes (an unverified file)."""
    try:
        return f"{name}:{metric_id(manifest)}"
    except BundleFormatError:
        return None


def worst_case_epsilon(mechanism: str, epsilon: float, d_max: float) -> float | None:
    """SanText ε·D_max (ε·d ≤ ε·D_max); SanText+ none (``None``: :data:`NO_WORST_CASE`)."""
    return None if STATEMENTS[mechanism].worst_case_rule is None else float(epsilon) * float(d_max)


def guarantee(manifest: dict) -> Guarantee:
    """The guarantee of a SanText(+) bundle, from its manifest's numbers (ε, p, D_max, τ, the
    verbatim rate)."""
    from ..registry import get

    mech = manifest["mechanism"]
    params, privacy = params_of(manifest), section_of(manifest, "privacy")
    eps, d_max, p = number(params.get("epsilon")), number(privacy.get("d_max")), number(params.get("p"))
    s = STATEMENTS[mech]
    plus = s.kept_in_clear is not None
    eps0 = number(params.get("epsilon0"))
    worst = None if eps is None or d_max is None else worst_case_epsilon(mech, eps, d_max)
    details: list[tuple[str, str]] = []
    if d_max is not None:
        details.append(("D_max", f"{d_max:.6g}"))
    if plus:
        details.append(("epsilon0 = ln(1/p)", f"{eps0 or 0.0:.6g}" + (f" (p = {p:g})" if p else "")))
        if "non_sensitive" in params:
            details.append(("non-sensitive split", str(params["non_sensitive"])))
    verbatim, shown = stated_verbatim(manifest)
    details += shown
    return Guarantee(
        mechanism=mech, label=get(mech).label, statement=s, epsilon=eps,
        ledger_unit=ledger_unit(manifest), worst_case_epsilon=worst,
        numeric_tolerance=reported_tolerance(manifest, eps, d_max),
        kept_in_clear_probability=(1.0 - p) if plus and p is not None else None, verbatim=verbatim,
        parameters={"epsilon": eps, "p": p if plus else None, "epsilon0": (eps0 or 0.0) if plus else 0.0,
                    "d_max": d_max},
        details=tuple(details))
