"""One unit per mechanism family: the guarantee each mechanism states, and nothing else.

A unit (``santext``, ``tem``, ``custext``, ``cmp``, ``dpbart``) holds the :class:`ldptext.guarantee.Statement`
of each of its mechanisms (``STATEMENTS``), the identifiers of what a ledger charges (the metric or the
partition), and one pure function ``guarantee(manifest) -> Guarantee``. Its registry line
(:mod:`ldptext.registry`) names it beside the runtime and the builder; the runtime's report,
``bundle inspect`` and the generated C, JavaScript and Java tables all read the guarantee from here.
"""
from __future__ import annotations

from ..guarantee import checked_tolerance, number

__all__ = ["params_of", "section_of", "number", "stated_verbatim", "reported_tolerance"]


def section_of(manifest: dict, name: str) -> dict:
    """``manifest[name]`` when it is an object, else ``{}`` (``bundle inspect`` reads unverified files)."""
    value = manifest.get(name) if isinstance(manifest, dict) else None
    return value if isinstance(value, dict) else {}


def params_of(manifest: dict) -> dict:
    """The manifest's ``params`` section, or ``{}``."""
    return section_of(manifest, "params")


def reported_tolerance(manifest: dict, epsilon: float | None, reach: float | None) -> float | None:
    """The numeric tolerance a report states: the manifest's τ (``numeric.max_relative_error``) plus
    the checks' resolution at ε and reach R (:func:`ldptext.guarantee.checked_tolerance`), or
    ``None`` where any of them is missing."""
    stated = number(section_of(manifest, "numeric").get("max_relative_error"))
    if None in (stated, epsilon, reach):
        return None
    return checked_tolerance(stated, epsilon, reach)


def stated_verbatim(manifest: dict) -> tuple:
    """``(VerbatimRate or None, inspect lines)``: the manifest's ``privacy.verbatim``; a malformed one
    is shown as such (the runtime refuses it) rather than raised, since inspect reads unverified files."""
    from ..verbatim import VerbatimRate

    try:
        return VerbatimRate.from_manifest(section_of(manifest, "privacy").get("verbatim")), ()
    except Exception:
        return None, (("verbatim rate", "malformed"),)
