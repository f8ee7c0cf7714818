"""ldptext: on-device text sanitization with local differential privacy.

Entry points: :class:`ldptext.Sanitizer` (SanText / SanText+, metric LDP per token) and
:class:`ldptext.Rewriter` (DP-BART, document-level LDP); for comparison, the token-level
:class:`ldptext.TEMSanitizer` (TEM, truncated metric LDP), :class:`ldptext.CusTextSanitizer`
(CusText(+), LDP within output sets) and :class:`ldptext.CMPSanitizer` (CMP / Mahalanobis, metric LDP
by noise then nearest neighbour; the ``faiss`` extra). Each loads a signed bundle built by
``ldptext precompute``. See README.md, "What is and is not protected", and docs/mechanisms.md.
"""
from __future__ import annotations

import importlib

from . import registry as _registry

__version__ = "0.1.0"

# imported on first use, so that `import ldptext` stays cheap and a missing optional runtime
# (onnxruntime for DP-BART) does not break SanText users
_LAZY = {
    # every mechanism's runtime class (ldptext.registry): Sanitizer, TEMSanitizer, CusTextSanitizer,
    # CMPSanitizer, Rewriter
    **{spec.partition(":")[2]: tuple(spec.split(":")) for spec in dict.fromkeys(
        m.runtime for m in _registry.all_mechanisms())},
    "Guarantee": ("ldptext.guarantee", "Guarantee"),
    "Sanitized": ("ldptext.report", "Sanitized"),
    "PrivacyReport": ("ldptext.report", "PrivacyReport"),
    "Rewritten": ("ldptext.dpbart", "Rewritten"),
    "Ledger": ("ldptext.ledger", "Ledger"),
    "Generator": ("ldptext.rng", "Generator"),
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'ldptext' has no attribute {name!r}") from None
    return getattr(importlib.import_module(module), attr)
