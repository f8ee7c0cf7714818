"""The comparison mechanisms in ``ldptext evaluate``: bundles, privacy (exact or estimated), sampling.

``ldptext evaluate --mechanism santext,santext+,tem,custext,custext+,cmp,mahalanobis`` puts every
mechanism on one privacy–utility frontier: utility of a classifier trained on sanitized text against
the success of the token-inversion attack on the data set's tokens.

* **TEM, CusText, CusText+** have an exactly computable output law (their runtimes' realised
  ``log_probabilities``): the same exact profile as SanText (N_x, S_x, S_y*, Rényi entropies and the
  exact Bayes-optimal inversion success, :func:`ldptext_precompute.evaluation.metrics.profile_mechanism`).
* **CMP, Mahalanobis** have none: the attack success is **estimated** (:func:`estimate_inversion_attack`):
  a plug-in MAP decoder x̂(y) = argmax_x (Ĉ(y | x) + ½)·π(x) (counts, add-½ smoothed) is fitted on S
  draws per candidate input (the data set's distinct tokens), then scored on S fresh draws per
  candidate. It is an unbiased estimate
  of *that* decoder's success, hence (up to sampling error) a lower bound of the Bayes-optimal
  attacker's; ``results.json`` says ``estimated: true``.

Defaults of the bundles built here (unsigned, cached like SanText's): TEM β = 0.001, CusText K = 20
(Euclidean similarity; CusText+ keeps the function words), Mahalanobis λ = 0.5, exact flat faiss
index. When ``cmp`` is evaluated as a mechanism (this faiss bundle), the ε-only ``cmp`` baseline is
left out (the same mechanism twice).
"""
from __future__ import annotations

import hashlib
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ldptext import registry
from ldptext.errors import LdptextError
from ..epsilon import format_epsilon

__all__ = ["COMPARISON_MECHANISMS", "EXACT_MECHANISMS", "ESTIMATED_MECHANISMS", "DEFAULTS",
           "load_runtime", "build_comparison_bundle", "load_comparison_bundles",
           "estimate_inversion_attack", "EstimatedAttackPrivacy", "bundle_info"]

#: the token mechanisms beside SanText(+), by whether their output law is exactly computable
EXACT_MECHANISMS = tuple(m for m in registry.names(kind="token", exact_law=True)
                         if registry.get(m).family != "santext")
ESTIMATED_MECHANISMS = registry.names(kind="token", exact_law=False)
COMPARISON_MECHANISMS = EXACT_MECHANISMS + ESTIMATED_MECHANISMS
#: The parameters of the bundles ``evaluate`` builds (each registry entry's evaluation defaults).
DEFAULTS = {m: registry.get(m).evaluation_defaults for m in COMPARISON_MECHANISMS}
#: Draws per candidate input for the decoder, and again for scoring it.
ATTACK_DRAWS = 32
#: Add-α smoothing of the decoder's counts (any decoder gives a valid lower bound; this one falls back
#: to the prior where the estimated channel is flat).
SMOOTHING = 0.5
#: Names the estimator in checkpoint keys (a changed estimator never reads an old estimate).
ESTIMATOR = f"plug-in-map-add{SMOOTHING:g}-s{ATTACK_DRAWS}-v1"
ESTIMATE_DESCRIPTION = ("estimated: a plug-in MAP decoder argmax_x (C(y|x) + 0.5)·prior(x) fitted on {s} draws per "
                        "candidate input (the data set's distinct tokens), scored on {s} fresh draws per "
                        "candidate, weighted by occurrences; a lower bound of the Bayes-optimal success "
                        "up to sampling error; prior = wordfreq 'en' large (public)")


def load_runtime(mechanism: str, path: Path, seed: int | None = None) -> Any:
    """An evaluation bundle (unsigned: built here, never shipped) loaded by its runtime.

    Parameters
    ----------
    mechanism : str
    path : Path
    seed : int or None
        Seeded (reproducible, not private) draws for a reproducible sweep.

    Returns
    -------
    TokenRuntime
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # a sweep measures every eps, near identity included (its reports say weak_privacy)
        return registry.get(mechanism).runtime_class().load(path, allow_unsigned=True, seed=seed,
                                                            allow_weak_privacy=True)


def bundle_path(cache: Path, *, embeddings: str, vocab_size: int | None, mechanism: str, epsilon: float) -> Path:
    """Cache file of one comparison bundle."""
    emb = embeddings
    if Path(emb).exists():
        emb = "file-" + hashlib.sha256(str(Path(emb).resolve()).encode()).hexdigest()[:12]
    params = "-".join(f"{k}{v}" for k, v in sorted(DEFAULTS[mechanism].items()))
    # v3: the read-back rule changed the output domain (as evaluation.bundles.bundle_path)
    return cache / f"eval-{emb}-V{vocab_size or 'all'}-{mechanism}-eps{float(epsilon)!r}-{params}-v3.ldpb"


def build_comparison_bundle(path: Path, mechanism: str, epsilon: float, *, embeddings: str,
                            vocab_size: int | None, loaded: Any, cache: Path, progress: bool) -> Path:
    """Build one unsigned comparison bundle with :data:`DEFAULTS`.

    Parameters
    ----------
    path : Path
    mechanism : str
    epsilon : float
    embeddings : str
    vocab_size : int or None
    loaded : Embeddings
    cache : Path
        SanText's neighbour cache (TEM reuses it).
    progress : bool

    Returns
    -------
    Path
    """
    common = dict(embeddings=embeddings, epsilon=epsilon, vocab_size=vocab_size, sign_key=False, loaded=loaded)
    opts = DEFAULTS[mechanism]
    # a sweep measures every eps, near identity included (its bundle and reports say weak_privacy)
    if mechanism == "tem":
        from ..tem.build import build_tem_bundle
        return build_tem_bundle(path, beta=opts["beta"], cache_dir=cache / "neighbours", progress=progress,
                                allow_weak_privacy=True, **common)
    if mechanism in ("custext", "custext+"):
        from ..custext.build import build_custext_bundle
        return build_custext_bundle(path, mechanism=mechanism, k=opts["k"], allow_weak_privacy=True, **common)
    from ..cmp.build import build_cmp_bundle
    return build_cmp_bundle(path, mechanism=mechanism, lam=opts.get("lam", 0.5), index=opts["index"], **common)


def load_comparison_bundles(mechanisms: list[str], epsilons: list[float], *, embeddings: str,
                            vocab_size: int | None, cache: Path, progress: bool,
                            log: Callable[[str], None]) -> dict[tuple[str, float], tuple[Path, Any]]:
    """Build (or reuse from the cache) and load one bundle per (comparison mechanism, ε).

    Parameters
    ----------
    mechanisms : list of str
        Any of :data:`COMPARISON_MECHANISMS` (others are skipped).
    epsilons : list of float
    embeddings : str
    vocab_size : int or None
    cache : Path
    progress : bool
    log : callable
        One progress line (no raw text).

    Returns
    -------
    dict
        ``(mechanism, ε) -> (path, runtime)``.
    """
    from ..santext.embeddings import load_embeddings

    loaded = None
    out = {}
    for mech in mechanisms:
        if mech not in COMPARISON_MECHANISMS:
            continue
        for eps in epsilons:
            path = bundle_path(cache, embeddings=embeddings, vocab_size=vocab_size, mechanism=mech, epsilon=eps)
            if path.exists():
                try:
                    load_runtime(mech, path)
                except LdptextError:
                    path.unlink()  # built by an older version
            if not path.exists():
                if loaded is None:
                    loaded = load_embeddings(embeddings, vocab_size)
                log(f"building {mech} bundle, eps={format_epsilon(eps)}")
                build_comparison_bundle(path, mech, eps, embeddings=embeddings, vocab_size=vocab_size,
                                        loaded=loaded, cache=cache, progress=progress)
            out[(mech, eps)] = (path, load_runtime(mech, path))
    return out


def estimate_inversion_attack(runtime: Any, counts: np.ndarray, prior: np.ndarray, *,
                              draws: int = ATTACK_DRAWS) -> dict:
    """Estimated success of a plug-in MAP inversion attack on the data set's tokens (module docstring).

    Parameters
    ----------
    runtime : TokenRuntime
        A loaded comparison bundle (its ``sample_ids``; seeded for a reproducible estimate).
    counts : np.ndarray of float64, shape (V,)
        Occurrences of each id in the data set.
    prior : np.ndarray of float64, shape (V,)
        The attacker's public prior.
    draws : int
        S: draws per candidate for fitting, and again for scoring.

    Returns
    -------
    dict
        ``success_rate_dataset`` (weighted by occurrences), ``success_rate_candidates_mean``,
        ``candidates``, ``draws``, ``seconds``.
    """
    started = time.perf_counter()
    cand = np.flatnonzero((counts > 0) & np.asarray(runtime.valid_input, bool))
    v = runtime.n_rows
    if cand.size == 0:
        return {"success_rate_dataset": None, "success_rate_candidates_mean": None, "candidates": 0,
                "draws": draws, "seconds": 0.0}
    fit = runtime.sample_ids(np.repeat(cand, draws)).astype(np.int64)
    pos = np.repeat(np.arange(cand.size), draws)
    key = fit * cand.size + pos
    uniq, cnt = np.unique(key, return_counts=True)
    ys, xs_pos = uniq // cand.size, uniq % cand.size
    score = (cnt + SMOOTHING) * prior[cand[xs_pos]]
    # for each output y, the candidate with the highest (count + α)·prior (ties: the smaller id); a
    # candidate never seen with y scores α·prior, so the prior's favourite wins where the channel is flat
    order = np.lexsort((xs_pos, -score, ys))
    first = np.ones(order.size, dtype=bool)
    first[1:] = ys[order][1:] != ys[order][:-1]
    top = int(cand[np.argmax(prior[cand])])
    decoder = np.full(v, top, dtype=np.int64)
    best_y, best_x, best_s = ys[order][first], cand[xs_pos[order][first]], score[order][first]
    better = best_s > SMOOTHING * prior[top]
    decoder[best_y[better]] = best_x[better]
    test = runtime.sample_ids(np.repeat(cand, draws)).astype(np.int64).reshape(cand.size, draws)
    success = (decoder[test] == cand[:, None]).mean(axis=1)
    w = counts[cand]
    return {"success_rate_dataset": float((w * success).sum() / w.sum()),
            "success_rate_candidates_mean": float(success.mean()), "candidates": int(cand.size),
            "draws": int(draws), "seconds": time.perf_counter() - started}


@dataclass
class EstimatedAttackPrivacy:
    """Privacy of a mechanism without a computable output law: the estimated inversion attack.

    Its ``attack.exact_success_rate_dataset`` key carries the *estimate* (so that the frontier reads
    it), with ``estimated: true`` and the method in ``description``.

    Attributes
    ----------
    estimate : dict
        :func:`estimate_inversion_attack`.
    guarantee : dict
        The bundle's stated guarantee (notion, ε, worst case).
    """

    estimate: dict
    guarantee: dict

    def to_dict(self) -> dict:
        """The entry's ``privacy`` object.

        Returns
        -------
        dict
        """
        return {"note": "no closed-form output distribution: the inversion attack is estimated by sampling",
                "guarantee": self.guarantee,
                "attack": {"exact_success_rate_dataset": self.estimate["success_rate_dataset"],
                           "exact_success_rate_vocabulary_mean": self.estimate["success_rate_candidates_mean"],
                           "estimated": True, "candidates": self.estimate["candidates"],
                           "draws_per_candidate": self.estimate["draws"], "seconds": self.estimate["seconds"],
                           "description": ESTIMATE_DESCRIPTION.format(s=self.estimate["draws"])}}


def bundle_info(path: Path, runtime: Any, vocab_size: int):
    """The entry's ``bundle`` record for a comparison runtime.

    Parameters
    ----------
    path : Path
    runtime : TokenRuntime
    vocab_size : int

    Returns
    -------
    ldptext_precompute.evaluation.records.BundleInfo
    """
    from .records import BundleInfo

    report = runtime.privacy_report(1)
    outputs = runtime.outputs if hasattr(runtime, "outputs") else runtime.tables.outputs
    return BundleInfo(path=str(path), d_max=float(getattr(runtime, "d_max", float("nan"))),
                      numeric_tolerance=report.numeric_tolerance, vocab_size=vocab_size,
                      outputs=int(np.asarray(outputs).size), per_token_epsilon=runtime.per_token_epsilon,
                      worst_case_token_epsilon=report.worst_case_token_epsilon, epsilon0=0.0)


def guarantee_of(runtime: Any) -> dict:
    """The guarantee fields of a runtime's report (notion, neighbouring, ε, worst case, ledger unit)."""
    r = runtime.privacy_report(1).to_dict()
    return {k: r[k] for k in ("notion", "neighbouring", "metric", "epsilon", "worst_case_token_epsilon",
                              "worst_case_note", "ledger_unit")}
