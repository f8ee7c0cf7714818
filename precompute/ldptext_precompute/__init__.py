"""ldptext_precompute: the offline side of ldptext (never shipped to a device).

Data flow: public embeddings or a public pretrained model → :mod:`.santext` / :mod:`.dpbart` →
a signed bundle that the runtime (:mod:`ldptext`) loads. Also offline: :mod:`.evaluation`
(``ldptext evaluate``, the privacy–utility sweep) and :mod:`.demo` (``ldptext demo``). This package
imports the runtime; the runtime never imports it.
"""
