"""ldptext: on-device text sanitization with local differential privacy.

Entry points: :class:`ldptext.Sanitizer` (SanText / SanText+, metric LDP per token) and
:class:`ldptext.Rewriter` (DP-BART, document-level LDP). Both load a signed bundle built by
``ldptext precompute``. See README.md, "What is and is not protected".
"""
__version__ = "0.1.0"
