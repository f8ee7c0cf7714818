"""The mechanisms ldptext runs: one entry each, the only list of them.

An entry names the mechanism as a bundle's manifest does, its runtime class, its **unit** (the module
of :mod:`ldptext.mechanisms` that states its guarantee: ``guarantee(manifest)`` and its
:class:`ldptext.guarantee.Statement`), its offline builder and the builder's CLI module (as
``"module:attribute"`` / module strings, imported on first use, so that this module sits below
everything that reads it), its kind (``token``: one sanitized token per input token; ``document``: a
rewritten document), its family (mechanisms sharing a runtime class and a builder), whether its
output law is exactly computable, a display label, the parameters ``ldptext evaluate`` builds it
with, and its code in libldptext where the C library runs it. The bundle reader, the runtime loaders,
the check before signing, the reports, ``bundle inspect``, ``ldptext precompute`` and ``ldptext
evaluate``, the top-level ``ldptext`` names and the generated C, JavaScript and Java tables
(``native/gen_mechanisms.py``) all read this table; adding a mechanism is one runtime module, one
unit, one builder module, one :func:`register` call here and their tests.
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
    unit : str
        The module stating its guarantee (``STATEMENTS[name]`` and ``guarantee(manifest)``).
    c_code : int or None
        Its ``LDP_MECH_*`` value where libldptext runs it (generated into ``ldptext.h``).
    builder_cli : str or None
        The module whose ``register(targets)`` adds its ``ldptext precompute`` target.
    evaluation : tuple of (str, object)
        The builder parameters ``ldptext evaluate`` uses beside ε.
    """

    name: str
    family: str
    kind: str
    runtime: str
    builder: str | None
    exact_law: bool
    label: str
    unit: str
    c_code: int | None = None
    builder_cli: str | None = None
    evaluation: tuple = ()

    def statement(self) -> Any:
        """Its :class:`ldptext.guarantee.Statement` (the fixed prose of its guarantee)."""
        return importlib.import_module(self.unit).STATEMENTS[self.name]

    def guarantee(self, manifest: dict) -> Any:
        """The :class:`ldptext.guarantee.Guarantee` of a bundle of it, from its manifest alone."""
        return importlib.import_module(self.unit).guarantee(manifest)

    @property
    def reference(self) -> str:
        """The paper, by title and section."""
        return self.statement().reference

    @property
    def evaluation_defaults(self) -> dict:
        """The builder parameters ``ldptext evaluate`` uses beside ε."""
        return dict(self.evaluation)

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
        The name or the C code is taken, or the kind is neither ``token`` nor ``document``.
    """
    if mechanism.name in _REGISTRY:
        raise ValueError(f"mechanism {mechanism.name!r} is already registered")
    if mechanism.kind not in ("token", "document"):
        raise ValueError(f"mechanism kind must be 'token' or 'document', got {mechanism.kind!r}")
    if mechanism.c_code is not None and any(m.c_code == mechanism.c_code for m in _REGISTRY.values()):
        raise ValueError(f"libldptext code {mechanism.c_code} is already registered")
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


_U = "ldptext.mechanisms."
_P = "ldptext_precompute."
for _m in (
    Mechanism("cmp", "cmp", "token", "ldptext.cmp:CMPSanitizer", _P + "cmp.build:build_cmp_bundle", False, "CMP",
              _U + "cmp", None, _P + "cmp.cli", (("index", "flat"),)),
    Mechanism("mahalanobis", "cmp", "token", "ldptext.cmp:CMPSanitizer", _P + "cmp.build:build_cmp_bundle", False,
              "Mahalanobis", _U + "cmp", None, _P + "cmp.cli", (("lam", 0.5), ("index", "flat"))),
    Mechanism("tem", "tem", "token", "ldptext.tem:TEMSanitizer", _P + "tem.build:build_tem_bundle", True, "TEM",
              _U + "tem", 3, _P + "tem.cli", (("beta", 0.001),)),
    Mechanism("custext", "custext", "token", "ldptext.custext:CusTextSanitizer",
              _P + "custext.build:build_custext_bundle", True, "CusText", _U + "custext", 4, _P + "custext.cli",
              (("k", 20),)),
    Mechanism("custext+", "custext", "token", "ldptext.custext:CusTextSanitizer",
              _P + "custext.build:build_custext_bundle", True, "CusText+", _U + "custext", 5, _P + "custext.cli",
              (("k", 20),)),
    Mechanism("santext", "santext", "token", "ldptext.santext:Sanitizer", _P + "santext.build:build_santext_bundle",
              True, "SanText", _U + "santext", 1, _P + "santext.cli"),
    Mechanism("santext+", "santext", "token", "ldptext.santext:Sanitizer",
              _P + "santext.build:build_santext_bundle", True, "SanText+", _U + "santext", 2, _P + "santext.cli"),
    Mechanism("dpbart", "dpbart", "document", "ldptext.dpbart:Rewriter", _P + "dpbart.build:build_dpbart_bundle",
              False, "DP-BART", _U + "dpbart", None, _P + "dpbart.cli"),
):
    register(_m)
del _m
