"""Privacy–utility evaluation of the sanitization mechanisms (``ldptext evaluate``).

The heavy parts (scikit-learn, matplotlib) are imported inside the functions that need them, and this
package is never imported by ``ldptext/__init__.py``: the runtime SDK does not depend on it.

Modules:

* :mod:`.metrics`   exact privacy metrics from a mechanism's realised distribution: N_x, S_x, S_y*,
  Rényi entropies H₀, H₁, H₂, H∞ (Yue et al. 2021, *Differential Privacy for Text Analytics via
  Natural Text Sanitization* (Findings of ACL), as presented in Yue 2023, *Data Synthesis: Boosting
  Utility and Privacy in NLP* (PhD thesis, Ohio State), §2.5.5), and the Bayes-optimal token-inversion
  attack;
* :mod:`.attacks`   the attacker's public prior and the empirical check of the attack;
* :mod:`.mechanisms` the SanText / SanText+ distributions as row functions for :mod:`.metrics`;
* :mod:`.baselines` the comparison mechanisms: unsanitized, uniform random replacement, CMP/FBDD
  (Feyisetan et al. 2020, *Privacy- and Utility-Preserving Textual Analysis via Calibrated
  Multivariate Perturbations* (WSDM));
* :mod:`.utility`   downstream classifier (TF-IDF + logistic regression); corpus BLEU is
  :mod:`ldptext_precompute.bleu`;
* :mod:`.finetune`  the fine-tuned MiniLM classifier (PyTorch, imported only when it trains);
* :mod:`.paper_table` a sweep's accuracies beside the published ones (markdown);
* :mod:`.datasets`  CSV / JSONL loaders and the built-in Rotten Tomatoes corpus;
* :mod:`.runner`    the sweep over mechanisms, ε and seeds (DP-BART too, from a given ``dpbart`` bundle),
  step by step: :mod:`.config` (its configuration), :mod:`.bundles`, :mod:`.sweep` (shared state,
  checkpoints, seeds), :mod:`.profiles` (privacy), :mod:`.sampling` (releases of the corpus),
  :mod:`.scoring` (utility), :mod:`.output` (``results.json``, report, plots), :mod:`.console` (stderr);
* :mod:`.rows`      what each row is (a mechanism and SanText+'s split) and its name;
* :mod:`.records`   the records of ``results.json``;
* :mod:`.report`    ``report.md``;
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
