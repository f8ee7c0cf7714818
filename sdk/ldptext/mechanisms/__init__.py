"""One unit per mechanism family: the guarantee each mechanism states, and nothing else.

A unit (``santext``, ``tem``, ``custext``, ``cmp``, ``dpbart``) holds the :class:`ldptext.guarantee.Statement`
of each of its mechanisms (``STATEMENTS``), the identifiers of what a ledger charges (the metric or the
partition), and one pure function ``guarantee(manifest) -> Guarantee``. Its registry line
(:mod:`ldptext.registry`) names it beside the runtime and the builder; the runtime's report,
``bundle inspect`` and the generated C, JavaScript and Java tables all read the guarantee from here.
"""
from __future__ import annotations

from ..guarantee import number

__all__ = ["params_of", "section_of", "number", "stated_verbatim"]


def section_of(manifest: dict, name: str) -> dict:
    """``manifest[name]`` when it is an object, else ``{}`` (``bundle inspect`` reads unverified files)."""
    value = manifest.get(name) if isinstance(manifest, dict) else None
    return value if isinstance(value, dict) else {}


def params_of(manifest: dict) -> dict:
    """The manifest's ``params`` section, or ``{}``."""
    return section_of(manifest, "params")


def stated_verbatim(manifest: dict) -> tuple:
    """``(VerbatimRate or None, inspect lines)``: the manifest's ``privacy.verbatim``; a malformed one
    is shown as such (the runtime refuses it) rather than raised, since inspect reads unverified files."""
    from ..verbatim import VerbatimRate

    try:
        return VerbatimRate.from_manifest(section_of(manifest, "privacy").get("verbatim")), ()
    except Exception:
        return None, (("verbatim rate", "malformed"),)
