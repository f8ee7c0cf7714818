"""The privacy step of the sweep: the exact profile of every token mechanism, the estimated attack of
the mechanisms without a closed form, the baselines' closed forms and the DP-BART entries."""
from __future__ import annotations

import json
import time

import numpy as np

from ..checkpoints import jsonable
from ..epsilon import format_epsilon
from . import comparison as _comparison
from . import metrics as M
from .bundles import Bundle
from .config import DPBART, SANTEXT_MECHANISMS
from .console import log
from .mechanisms import realised_agreement, santext_log_prob_rows
from .rows import Row
from .records import (PRIOR_NAME, BundleInfo, DocumentLevelPrivacy, EmpiricalOnlyPrivacy, Entry, MechanismPrivacy,
                      PrivacySummary)
from .sampling import dpbart_delta
from .sweep import Sweep, rank, stream_seed


def dpbart_entries(sweep: Sweep) -> list[Entry]:
    """Step 5a: one DP-BART entry per ε (none without a DP-BART bundle). The guarantee's chunk counts and
    report come from the rewritten sample (:func:`measure_utility`).
    """
    cfg = sweep.cfg
    if sweep.dpbart is None:
        return []
    return [Entry(mechanism=DPBART, epsilon=eps, bundle=sweep.dpbart.info,
                  privacy=DocumentLevelPrivacy(mechanism=cfg.dpbart_mechanism, epsilon=eps, delta=dpbart_delta(cfg)))
            for eps in cfg.dpbart_epsilons]


def profile_mechanisms(sweep: Sweep) -> list[Entry]:
    """Step 4: the exact privacy profile of every evaluated SanText configuration, one entry each."""
    return [(_profile_santext if row.mechanism in SANTEXT_MECHANISMS else _profile_comparison)(sweep, row, eps, bundle)
            for (row, eps), bundle in sweep.bundles.items() if row.mechanism in sweep.cfg.mechanisms]


def _profile_comparison(sweep: Sweep, row: Row, eps: float, bundle: Bundle) -> Entry:
    """A comparison mechanism's entry: TEM / CusText(+) profiled exactly from their runtimes' realised
    law (as SanText), CMP / Mahalanobis with the estimated inversion attack
    (:mod:`ldptext_precompute.evaluation.comparison`); each from its checkpoint when there is one.
    """
    cfg, domain, runtime, mech = sweep.cfg, sweep.domain, bundle.sanitizer, row.mechanism
    info = _comparison.bundle_info(bundle.path, runtime, domain.vocab_size)
    started = time.perf_counter()
    if mech in _comparison.ESTIMATED_MECHANISMS:
        key = {"stage": "attack-estimate", "bundle": bundle.digest, "mechanism": mech, "epsilon": eps,
               "seed_base": cfg.seed_base, "reproducible": cfg.reproducible, "prior": PRIOR_NAME,
               "estimator": _comparison.ESTIMATOR}
        seed = stream_seed(cfg, 0, f"attack:{mech}:{eps}") if cfg.reproducible else None
        estimate = sweep.store.cached_json(
            "profile", key, lambda: _comparison.estimate_inversion_attack(
                _comparison.load_runtime(mech, bundle.path, seed), sweep.corpus.counts, sweep.prior),
            lambda d: d, lambda d: d)
        log(cfg, f"privacy {mech} eps={format_epsilon(eps)}: estimated attack {estimate['success_rate_dataset']:.4f}")
        return Entry(mechanism=mech, epsilon=eps, bundle=info, privacy=_comparison.EstimatedAttackPrivacy(
            estimate=estimate, guarantee=_comparison.guarantee_of(runtime)))
    key = {"stage": "profile", "bundle": bundle.digest, "mechanism": mech, "epsilon": eps,
           "threshold": cfg.threshold, "columns": cfg.columns, "seed_base": cfg.seed_base, "prior": PRIOR_NAME}
    saved = sweep.store.load_arrays("profile", key)
    if saved is not None:
        prof, meta = _profile_from_arrays(saved)
        seconds = meta["seconds"]
    else:
        outputs = np.union1d(runtime.tables.outputs, np.flatnonzero(runtime.tables.keep_row))
        prof = M.profile_mechanism(runtime.log_probabilities, domain.inputs, domain.vocab_size,
                                   threshold=cfg.threshold, prior=sweep.prior, prior_name=PRIOR_NAME,
                                   columns=np.intersect1d(sweep.column_pool, outputs),
                                   progress=cfg.progress, desc=f"privacy {mech} eps={format_epsilon(eps)}")
        seconds = time.perf_counter() - started
        sweep.store.save_arrays("profile", key, _profile_to_arrays(prof, {"seconds": seconds}))
    summary = PrivacySummary.of(prof, sweep.corpus.counts)
    log(cfg, f"privacy {mech} eps={format_epsilon(eps)}: attack {summary.attack.exact_success_rate_dataset:.4f}")
    # the rows are the sampler's realised law itself (tests/test_tem.py, test_custext.py check the formula)
    return Entry(mechanism=mech, epsilon=eps, profile=prof, bundle=info,
                 privacy=MechanismPrivacy(summary=summary, formula_vs_realised=None, seconds=seconds))


def _profile_santext(sweep: Sweep, row: Row, eps: float, bundle: Bundle) -> Entry:
    """The exact profile of one SanText bundle from its formula, checked against the sampler (or its
    checkpoint).
    """
    cfg, domain, san, mech = sweep.cfg, sweep.domain, bundle.sanitizer, row.key
    key = {"stage": "profile", "bundle": bundle.digest, "mechanism": mech, "epsilon": eps,
           "threshold": cfg.threshold, "columns": cfg.columns, "seed_base": cfg.seed_base,
           "agreement_rows": cfg.agreement_rows, "prior": PRIOR_NAME}
    saved = sweep.store.load_arrays("profile", key)
    if saved is not None:
        prof, meta = _profile_from_arrays(saved)
        agreement, seconds = meta["formula_vs_realised"], meta["seconds"]
    else:
        rows = santext_log_prob_rows(san)
        started = time.perf_counter()
        prof = M.profile_mechanism(rows, domain.inputs, domain.vocab_size, threshold=cfg.threshold,
                                   prior=sweep.prior, prior_name=PRIOR_NAME,
                                   columns=np.intersect1d(sweep.column_pool, san.outputs),
                                   progress=cfg.progress, desc=f"privacy {mech} eps={format_epsilon(eps)}")
        check_rows = rank(f"agree:{mech}:{eps}", domain.inputs)[:cfg.agreement_rows]
        agreement = realised_agreement(san, rows, check_rows) if cfg.agreement_rows else None
        seconds = time.perf_counter() - started
        sweep.store.save_arrays("profile", key, _profile_to_arrays(
            prof, {"formula_vs_realised": agreement, "seconds": seconds}))
    summary = PrivacySummary.of(prof, sweep.corpus.counts)
    privacy = MechanismPrivacy(summary=summary, formula_vs_realised=agreement, seconds=seconds)
    log(cfg, f"privacy {mech} eps={format_epsilon(eps)}: median N_x {summary.vocabulary['n_x']['median']:.4f}, "
        f"attack {summary.attack.exact_success_rate_dataset:.4f}")
    return Entry(mechanism=row.mechanism, split=row.split, epsilon=eps, privacy=privacy, profile=prof,
                 bundle=BundleInfo.of(bundle.path, san, domain.vocab_size))


def profile_baselines(sweep: Sweep) -> list[Entry]:
    """Step 5: the baselines' entries — closed-form profiles of the unsanitized and the uniformly random
    release; a note for CMP (one entry per ε), whose privacy is only measured empirically.
    """
    cfg, domain, pool = sweep.cfg, sweep.domain, sweep.column_pool
    entries = []
    if "none" in cfg.baselines:
        prof = M.profile_identity(domain.inputs, domain.vocab_size, threshold=cfg.threshold,
                                  columns=np.intersect1d(pool, domain.inputs))
        entries.append(Entry(mechanism="none", epsilon=None, profile=prof,
                             privacy=PrivacySummary.of(prof, sweep.corpus.counts)))
    if "random" in cfg.baselines:
        prof = M.profile_uniform(domain.inputs, domain.outputs, domain.vocab_size, prior=sweep.prior,
                                 prior_name=PRIOR_NAME, columns=np.intersect1d(pool, domain.outputs),
                                 threshold=cfg.threshold)
        entries.append(Entry(mechanism="random", epsilon=None, profile=prof,
                             privacy=PrivacySummary.of(prof, sweep.corpus.counts)))
    if "cmp" in cfg.baselines:
        entries += [Entry(mechanism="cmp", epsilon=eps, privacy=EmpiricalOnlyPrivacy()) for eps in cfg.epsilons]
    return entries


def _profile_to_arrays(prof: M.MechanismProfile, meta: dict) -> dict[str, np.ndarray]:
    """A profile and JSON-able extras as the arrays of one ``.npz`` checkpoint."""
    arrays = {name: np.asarray(getattr(prof, name)) for name in _PROFILE_ARRAYS}
    extra = {"threshold": prof.threshold, "prior_name": prof.prior_name, "extra": prof.extra, **meta}
    arrays["meta"] = np.array(json.dumps(jsonable(extra)))
    return arrays


def _profile_from_arrays(arrays: dict[str, np.ndarray]) -> tuple[M.MechanismProfile, dict]:
    """The inverse of :func:`_profile_to_arrays`: the profile and the extras."""
    meta = json.loads(str(arrays["meta"]))
    prof = M.MechanismProfile(threshold=meta.pop("threshold"), prior_name=meta.pop("prior_name"),
                              extra=meta.pop("extra"), **{name: arrays[name] for name in _PROFILE_ARRAYS})
    return prof, meta


_PROFILE_ARRAYS = ("inputs", "n_x", "s_x", "h0", "h1", "h2", "h_inf", "attack_success", "columns", "s_y",
                   "decoder")
