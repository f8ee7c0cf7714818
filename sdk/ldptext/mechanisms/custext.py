"""CusText and CusText+: what they guarantee.

Chen et al. 2023, *A Customized Text Sanitization Mechanism with Differential Privacy* (Findings of
ACL), section 3: each input's output set is a group of at least K tokens; within a group the release
is the exponential mechanism, ε-LDP between any two inputs of the same group. The group of an input is
revealed, so no finite level holds across groups; CusText+ also releases its stop words unchanged.
"""
from __future__ import annotations

import hashlib

from ..errors import BundleFormatError
from ..guarantee import Guarantee, Statement
from . import number, params_of, reported_tolerance, stated_verbatim

REFERENCE = ("Chen et al. 2023, A Customized Text Sanitization Mechanism with Differential Privacy (Findings "
             "of ACL), section 3")
NO_WORST_CASE = ("CusText's output sets are disjoint groups: an output reveals the group of its input, "
                 "so between inputs of different groups no finite LDP level holds; within a group the "
                 "release is eps-LDP")
NO_WORST_CASE_PLUS = NO_WORST_CASE + "; CusText+ also releases its stop words unchanged"
_NEIGHBOURING = "any two inputs with the same output set (a group of at least K tokens)"
_NUMERIC = ("exact sampler (alias + exact Bernoulli(exp(-gamma))); realised log-probabilities within the "
            "stated tolerance of the formula")

#: the numbers the bound depends on, in report order
PARAMETERS = ("epsilon", "k", "similarity")

STATEMENTS = {
    "custext": Statement(
        notion="LDP within output sets", unit="token", neighbouring=_NEIGHBOURING, metric=None,
        worst_case_rule=None, no_worst_case=NO_WORST_CASE, numeric_note=_NUMERIC, kept_in_clear=None,
        ledger_kind="partition", reference=REFERENCE,
        parameters=PARAMETERS),
    "custext+": Statement(
        notion="LDP within output sets", unit="token", neighbouring=_NEIGHBOURING, metric=None,
        worst_case_rule=None, no_worst_case=NO_WORST_CASE_PLUS, numeric_note=_NUMERIC,
        kept_in_clear="stop words, released unchanged", ledger_kind="partition", reference=REFERENCE,
        parameters=PARAMETERS),
}


def partition_id(manifest: dict) -> str:
    """Identifier of a bundle's partition into output sets, from its verified array hashes: equal for
    bundles with the same groups over the same vocabulary (16 lowercase hex digits).

    Raises
    ------
    BundleFormatError
        The manifest lacks one of those array entries.
    """
    try:
        parts = [str(manifest["arrays"][n]["sha256"]) for n in ("group_id", "blob/vocab.json")]
    except (KeyError, TypeError):
        raise BundleFormatError("CusText manifest lacks the partition's hashes") from None
    return hashlib.sha256(("ldptext custext partition v1:" + ":".join(parts)).encode()).hexdigest()[:16]


def guarantee(manifest: dict) -> Guarantee:
    """The guarantee of a CusText(+) bundle, from its manifest's ε, K and similarity."""
    from ..registry import get

    mech = manifest["mechanism"]
    s = STATEMENTS[mech]
    params = params_of(manifest)
    eps = number(params.get("epsilon"))
    try:
        unit = "partition:" + partition_id(manifest)
    except BundleFormatError:
        unit = None
    details = [("output sets", f"groups of >= {params.get('k')} tokens by {params.get('similarity')} "
                               "similarity; the group of every input token is revealed")]
    if s.kept_in_clear is not None:
        details.append(("stop words", str(params.get("non_sensitive", "the bundle's list"))))
    verbatim, shown = stated_verbatim(manifest)
    return Guarantee(
        mechanism=mech, label=get(mech).label, statement=s, epsilon=eps,
        ledger_unit=unit, worst_case_epsilon=None,
        numeric_tolerance=reported_tolerance(manifest, eps, 1.0),
        kept_in_clear_probability=1.0 if s.kept_in_clear is not None else None,
        parameters={"epsilon": eps, "k": params.get("k"), "similarity": params.get("similarity")},
        verbatim=verbatim, details=tuple(details) + shown)
