"""The mechanisms ldptext runs: one entry each, the only list of them.

An entry names the mechanism as a bundle's manifest does, its runtime class and offline builder (as
``"module:attribute"`` strings, imported on first use, so that this module sits below everything
that reads it), its kind (``token``: one sanitized token per input token; ``document``: a rewritten
document), its family (mechanisms sharing a runtime class and a builder), whether its output law is
exactly computable, a display label and its reference. The bundle reader, the runtime loaders, the
parameter check before signing, ``bundle inspect``, ``ldptext evaluate`` and the top-level
``ldptext`` names all read this table; adding a mechanism is one runtime module, one builder
module, one :func:`register` call here and their tests.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Mechanism", "register", "unregister", "get", "names", "is_known", "all_mechanisms"]


@dataclass(frozen=True)
class Mechanism:
    """One mechanism.

    Attributes
    ----------
    name : str
        The manifest's ``mechanism``.
    family : str
        Mechanisms that share a runtime class and a builder (``santext`` for SanText and SanText+).
    kind : str
        ``"token"`` or ``"document"``.
    runtime : str
        ``"module:Class"`` of its runtime.
    builder : str or None
        ``"module:function"`` of its offline builder (in ``ldptext_precompute``).
    exact_law : bool
        Its output law is exactly computable from the bundle (exact privacy profiles in
        ``ldptext evaluate``); otherwise estimated.
    label : str
        Display name.
    reference : str
        The paper, by title and section.
    """

    name: str
    family: str
    kind: str
    runtime: str
    builder: str | None
    exact_law: bool
    label: str
    reference: str

    def runtime_class(self) -> type:
        """The runtime class, imported on first use."""
        return _attribute(self.runtime)

    def builder_function(self) -> Callable[..., Any]:
        """The offline builder, imported on first use (needs the ``precompute`` extra)."""
        if self.builder is None:
            raise LookupError(f"mechanism {self.name!r} has no builder")
        return _attribute(self.builder)


def _attribute(spec: str) -> Any:
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


_REGISTRY: dict[str, Mechanism] = {}


def register(mechanism: Mechanism) -> Mechanism:
    """Add a mechanism (its name must be new).

    Raises
    ------
    ValueError
        The name is taken, or the kind is neither ``token`` nor ``document``.
    """
    if mechanism.name in _REGISTRY:
        raise ValueError(f"mechanism {mechanism.name!r} is already registered")
    if mechanism.kind not in ("token", "document"):
        raise ValueError(f"mechanism kind must be 'token' or 'document', got {mechanism.kind!r}")
    _REGISTRY[mechanism.name] = mechanism
    return mechanism


def unregister(name: str) -> None:
    """Remove a mechanism added with :func:`register` (tests of an extension)."""
    _REGISTRY.pop(name, None)


def get(name: str) -> Mechanism:
    """The entry of ``name``.

    Raises
    ------
    KeyError
        Not a registered mechanism.
    """
    return _REGISTRY[name]


def is_known(name: object) -> bool:
    """Whether ``name`` is a registered mechanism."""
    return isinstance(name, str) and name in _REGISTRY


def all_mechanisms() -> tuple[Mechanism, ...]:
    """Every entry, in registration (display) order."""
    return tuple(_REGISTRY.values())


def names(*, kind: str | None = None, family: str | None = None, exact_law: bool | None = None) -> tuple[str, ...]:
    """Registered names, in display order, optionally only of one kind, family or law."""
    return tuple(m.name for m in _REGISTRY.values()
                 if (kind is None or m.kind == kind) and (family is None or m.family == family)
                 and (exact_law is None or m.exact_law == exact_law))


_SANTEXT = ("Yue et al. 2021, Differential Privacy for Text Analytics via Natural Text Sanitization (Findings "
            "of ACL), as presented in Yue 2023, Data Synthesis: Boosting Utility and Privacy in NLP (PhD "
            "thesis, Ohio State), section 2.4")
_CUSTEXT = ("Chen et al. 2023, A Customized Text Sanitization Mechanism with Differential Privacy (Findings "
            "of ACL), section 3")
for _m in (
    Mechanism("cmp", "cmp", "token", "ldptext.cmp:CMPSanitizer", "ldptext_precompute.cmp.build:build_cmp_bundle",
              False, "CMP", "Feyisetan et al. 2020, Privacy- and Utility-Preserving Textual Analysis via "
              "Calibrated Multivariate Perturbations (WSDM)"),
    Mechanism("mahalanobis", "cmp", "token", "ldptext.cmp:CMPSanitizer",
              "ldptext_precompute.cmp.build:build_cmp_bundle", False, "Mahalanobis",
              "Xu et al. 2020, A Differentially Private Text Perturbation Method Using a Regularized "
              "Mahalanobis Metric (PrivateNLP@EMNLP)"),
    Mechanism("tem", "tem", "token", "ldptext.tem:TEMSanitizer", "ldptext_precompute.tem.build:build_tem_bundle",
              True, "TEM", "Carvalho et al. 2021, TEM: High Utility Metric Differential Privacy on Text "
              "(arXiv:2107.07928)"),
    Mechanism("custext", "custext", "token", "ldptext.custext:CusTextSanitizer",
              "ldptext_precompute.custext.build:build_custext_bundle", True, "CusText", _CUSTEXT),
    Mechanism("custext+", "custext", "token", "ldptext.custext:CusTextSanitizer",
              "ldptext_precompute.custext.build:build_custext_bundle", True, "CusText+", _CUSTEXT),
    Mechanism("santext", "santext", "token", "ldptext.santext:Sanitizer",
              "ldptext_precompute.santext.build:build_santext_bundle", True, "SanText", _SANTEXT),
    Mechanism("santext+", "santext", "token", "ldptext.santext:Sanitizer",
              "ldptext_precompute.santext.build:build_santext_bundle", True, "SanText+", _SANTEXT),
    Mechanism("dpbart", "dpbart", "document", "ldptext.dpbart:Rewriter",
              "ldptext_precompute.dpbart.build:build_dpbart_bundle", False, "DP-BART",
              "Igamberdiev & Habernal 2023, DP-BART for Privatized Text Rewriting under Local Differential "
              "Privacy (Findings of ACL), as presented in Igamberdiev 2023, Differentially Private Methods "
              "in NLP (PhD thesis, TU Darmstadt), chapter 6"),
):
    register(_m)
del _m
