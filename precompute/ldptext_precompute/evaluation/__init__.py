"""Privacy–utility evaluation of the sanitization mechanisms (``ldptext evaluate``, SPEC §6).

The heavy parts (scikit-learn, matplotlib) are imported inside the functions that need them, and this
package is never imported by ``ldptext/__init__.py``: the runtime SDK does not depend on it.

Modules:

* :mod:`.metrics`   exact privacy metrics from a mechanism's realised distribution (seed 000 §2.5.5):
  N_x, S_x, S_y*, Rényi entropies H₀, H₁, H₂, H∞, and the Bayes-optimal token-inversion attack;
* :mod:`.baselines` the comparison mechanisms: unsanitized, uniform random replacement, CMP/FBDD;
* :mod:`.utility`   downstream classifier (TF-IDF + logistic regression);
* :mod:`.datasets`  CSV / JSONL loaders and the built-in Rotten Tomatoes corpus;
* :mod:`.runner`    the sweep over mechanisms, ε and seeds; ``results.json`` and ``report.md``;
* :mod:`.plots`     PNG plots (matplotlib, Agg backend).

Entry point: :func:`ldptext_precompute.evaluation.runner.evaluate` (re-exported here lazily).
"""
from __future__ import annotations

__all__ = ["evaluate", "EvaluationConfig"]


def __getattr__(name: str):
    # Lazy so that ``import ldptext_precompute.evaluation.metrics`` does not pull the runner's imports.
    if name in __all__:
        from . import runner
        return getattr(runner, name)
    raise AttributeError(name)
