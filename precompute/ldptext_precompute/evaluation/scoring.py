"""The utility step of the sweep: per configuration and seed, the classifiers trained on released text,
BLEU against the input and the token attacks, each run kept as a checkpoint."""
from __future__ import annotations

import time

import numpy as np

from ..bleu import bleu_tokenize, corpus_bleu
from .attacks import empirical_attack_success, nearest_neighbour_inversion
from .config import DPBART
from ..epsilon import format_epsilon
from .console import Warnings, log, progress_iter
from .mechanisms import santext_keep_rows
from .records import Entry, MeanStd, SeedRun, UtilitySummary, kept_share
from .sampling import rewritten_sample, sample_key, sanitized_sample
from .sweep import NN_KS, NN_TABLE_VERSION, Sweep
from .finetune import FineTuneSettings, fingerprint as finetune_fingerprint
from .utility import ClassifierSettings, SentenceEmbeddingSettings, fit_and_score


def measure_utility(sweep: Sweep, entries: list[Entry], notes: Warnings) -> None:
    """Step 6: fill in every entry's :class:`.records.UtilitySummary` (one run per seed).

    The unsanitized configuration goes first: a classifier that cannot handle the data fails before
    anything is sampled, and one that does not beat the majority-class rate is warned about at once.
    """
    majority = sweep.corpus.ds.majority_rate()
    ordered = sorted(entries, key=lambda e: e.mechanism != "none")
    shard = sweep.cfg.shard_parts()
    if shard is not None:  # this run's share (EvaluationConfig.shard); the others score the rest
        ordered = ordered[shard[0]::shard[1]]
    for entry in progress_iter(ordered, sweep.cfg, desc="utility", unit="config"):
        started = time.perf_counter()
        runs = _utility_runs(sweep, entry)
        kept = _kept_words_accuracy(sweep, entry)
        entry.utility = UtilitySummary.of(runs, seconds=time.perf_counter() - started)
        entry.utility.kept_words = kept
        if entry.mechanism == DPBART:  # the guarantee as the Rewriter reported it (chunks are seed-free)
            sample = rewritten_sample(sweep, entry, 0, sample_key(sweep, entry, 0))
            entry.privacy = entry.privacy.with_sample(sample["chunks"], sample["report"])
        accuracies = ", ".join(f"{name} {c['sanitized_test']['accuracy'].mean:.4f}"
                               for name, c in entry.utility.classifiers.items())
        at = "" if entry.epsilon is None else f" eps={format_epsilon(entry.epsilon)}"
        tested = "trained and tested on unsanitized text" if entry.mechanism == "none" else "sanitized test"
        if kept:
            accuracies += "; kept-in-clear words alone " + ", ".join(
                f"{name} {k.mean:.4f}" + _share_text(k.mean, entry.utility.classifiers[name]["sanitized_test"]
                                                     ["accuracy"].mean, majority) for name, k in kept.items())
        log(sweep.cfg, f"utility {entry.row.label}{at}: accuracy ({tested}) "
            f"{accuracies} (majority class {majority:.4f})")
        if entry.mechanism == "none":
            notes.extend(_ceiling_warnings(entry.utility, majority))


def _share_text(kept: float, accuracy: float, majority: float) -> str:
    share = kept_share(kept, accuracy, majority)
    return "" if share is None else f" ({share:.0%} of the gain)"


def _kept_words_accuracy(sweep: Sweep, entry: Entry) -> dict[str, MeanStd] | None:
    """For a SanText+ row, per classifier: the accuracy (mean over seeds) of the same classifier trained and
    tested on the kept-in-clear words alone of each seed's sample — the released tokens whose input is
    non-sensitive under the row's split and that came out unchanged (:func:`kept_words_texts`); how much of the
    row's utility the words its split keeps explain. None for every other row."""
    if entry.mechanism != "santext+" or (entry.row, entry.epsilon) not in sweep.bundles:
        return None
    keep_rows = santext_keep_rows(sweep.bundles[(entry.row, entry.epsilon)].sanitizer)
    out = {}
    for settings in sweep.classifiers:
        fingerprint = _classifier_fingerprint(sweep, settings)
        values = []
        for s in range(sweep.cfg.seeds):
            skey = sample_key(sweep, entry, s)
            key = {"stage": "kept_words", "sample": skey, "classifier": fingerprint}

            def compute(s=s, skey=skey, settings=settings) -> dict:
                released = sanitized_sample(sweep, entry, s, skey)
                train_txt, test_txt = kept_words_texts(sweep.corpus, released, keep_rows)
                ds = sweep.corpus.ds
                try:
                    run = fit_and_score(train_txt, ds.train_labels, {"kept": test_txt}, ds.test_labels, seed=s,
                                        settings=settings, encoder=sweep.encoder(settings),
                                        progress=sweep.cfg.progress)
                except ValueError as e:   # too few kept words for a TF-IDF vocabulary: nothing to learn from,
                    if "empty vocabulary" not in str(e):    # the majority class is what is left
                        raise
                    return {"accuracy": float(ds.majority_rate())}
                return {"accuracy": run.scores["kept"]["accuracy"]}

            values.append(sweep.store.cached_json("kept_words", key, compute, dict, dict)["accuracy"])
        out[settings.name] = MeanStd.of(values)
    return out


def kept_words_texts(corpus, released: np.ndarray, keep_rows: np.ndarray) -> tuple[list[str], list[str]]:
    """The kept-in-clear words of a released corpus: per document, only the released tokens whose input is
    in ``keep_rows`` (SanText+'s non-sensitive words) and that were released unchanged, in order; (train
    texts, test texts). Every other token is dropped.

    Parameters
    ----------
    corpus : Corpus
        The tokenised data (``flat``, ``lengths``, ``n_train``, ``tokenizer``).
    released : numpy.ndarray, int, shape like ``corpus.flat``
        One sanitized sample.
    keep_rows : numpy.ndarray, bool, shape (V,)
        The inputs the split keeps in the clear (:func:`.mechanisms.santext_keep_rows`).
    """
    mask = keep_rows[corpus.flat] & (released == corpus.flat)
    bounds = np.cumsum(corpus.lengths)[:-1] if corpus.lengths else []
    pieces = [ids[m] for ids, m in zip(np.split(released, bounds), np.split(mask, bounds))] if corpus.lengths else []
    texts = corpus.tokenizer.decode_batch(pieces)
    return texts[:corpus.n_train], texts[corpus.n_train:]


def _classifier_fingerprint(sweep: Sweep, classifier: ClassifierSettings) -> dict:
    """What determines a classifier's runs besides its data and seed (part of their checkpoint keys)."""
    settings = classifier.to_dict()
    if isinstance(classifier, SentenceEmbeddingSettings):
        settings["encoder"] = sweep.encoder_fingerprint(classifier)
    elif isinstance(classifier, FineTuneSettings):   # the weights, versions and training procedure
        settings["fine_tuning"] = finetune_fingerprint(classifier)
    return settings


def _ceiling_warnings(utility: UtilitySummary, majority: float) -> list[str]:
    """One warning per classifier that, on unsanitized text, does not beat the majority-class rate."""
    notes = []
    for name, scores in (utility.classifiers or {"": {"sanitized_test": utility.sanitized_test}}).items():
        acc = scores["sanitized_test"]["accuracy"].mean
        if not (acc > majority + 1e-9):
            who = f"the {name} classifier" if name else "the classifier"
            notes.append(f"{who} on unsanitized text does not beat the majority-class rate "
                         f"(accuracy {acc:.4f}, macro-F1 {scores['sanitized_test']['macro_f1'].mean:.4f}, "
                         f"majority class {majority:.4f}): the data set is too small or its labels are not "
                         f"predictable from the text with it, so its sanitized rows say nothing about utility")
    return notes


def _utility_runs(sweep: Sweep, entry: Entry) -> list[SeedRun]:
    """The runs of one configuration: one per seed (a single one for the unsanitized text, where seeds
    change nothing), each combining the runs of every classifier (:meth:`.records.SeedRun.combine`).
    """
    per_classifier = {settings.name: _classifier_runs(sweep, entry, settings) for settings in sweep.classifiers}
    n_runs = len(next(iter(per_classifier.values())))
    runs = [SeedRun.combine({name: runs[i] for name, runs in per_classifier.items()}) for i in range(n_runs)]
    if entry.mechanism != DPBART:  # DP-BART's output is not aligned with its input: no token attack
        for s, run in enumerate(runs):
            run.nn_inversion = _nn_inversion(sweep, entry, s)
    return runs


def _nn_inversion(sweep: Sweep, entry: Entry, seed_index: int) -> dict:
    """success@k of the embedding nearest-neighbour inversion on one seed's sample (from its checkpoint)."""
    if entry.mechanism == "none":
        key = {"stage": "nn_attack", "mechanism": "none", "ks": list(NN_KS), "table": NN_TABLE_VERSION}
        return sweep.store.cached_json("nn_attack", key, lambda: nearest_neighbour_inversion(
            sweep.nn_table(), sweep.corpus.flat, sweep.corpus.flat, NN_KS), dict, dict)
    skey = sample_key(sweep, entry, seed_index)
    key = {"stage": "nn_attack", "sample": skey, "ks": list(NN_KS), "table": NN_TABLE_VERSION}
    return sweep.store.cached_json("nn_attack", key, lambda: nearest_neighbour_inversion(
        sweep.nn_table(), sweep.corpus.flat, sanitized_sample(sweep, entry, seed_index, skey), NN_KS),
        dict, dict)


def _classifier_runs(sweep: Sweep, entry: Entry, classifier: ClassifierSettings) -> list[SeedRun]:
    """The runs of one configuration with one classifier, each from its checkpoint when there is one."""
    settings = _classifier_fingerprint(sweep, classifier)
    if entry.mechanism == "none":
        key = {"stage": "utility", "mechanism": "none", "classifier": settings}
        return [sweep.store.cached_json("utility", key, lambda: _unsanitized_run(sweep, classifier),
                                        SeedRun.to_dict, SeedRun.from_dict)]
    runs = []
    for s in range(sweep.cfg.seeds):
        skey = sample_key(sweep, entry, s)
        key = {"stage": "utility", "sample": skey, "classifier": settings}

        def compute(s=s, skey=skey) -> SeedRun:
            if entry.mechanism == DPBART:
                return _rewritten_run(sweep, rewritten_sample(sweep, entry, s, skey), seed=s,
                                      settings=classifier)
            released = sanitized_sample(sweep, entry, s, skey)
            return _release_run(sweep, released, _decoder(entry), seed=s, settings=classifier)

        runs.append(sweep.store.cached_json("utility", key, compute, SeedRun.to_dict, SeedRun.from_dict))
    return runs


def _decoder(entry: Entry) -> np.ndarray | None:
    """The exact Bayes decoder of the entry's mechanism (None for CMP, which has none)."""
    return None if entry.mechanism == "cmp" or entry.profile is None else entry.profile.decoder


def _rewritten_run(sweep: Sweep, sample: dict, seed: int, settings: ClassifierSettings) -> SeedRun:
    """Utility of one DP-BART rewrite of the corpus with one classifier: no unchanged-token rate (NaN) and
    no token attack (the output is not aligned with the input).
    """
    n_train = sweep.corpus.n_train
    run, bleu = _fit_and_bleu(sweep, sample["texts"][:n_train], sample["texts"][n_train:], seed, settings)
    return SeedRun(classifier=run.scores, bleu=bleu, unchanged_token_rate=float("nan"),
                   empirical_attack_success=None, hyperparameters=run.hyperparameters)


def _fit_and_bleu(sweep: Sweep, train_txt: list[str], test_txt: list[str], seed: int, settings: ClassifierSettings):
    """The classifier trained on released training text, scored on released and original test text, and
    the corpus BLEU of the released documents against their inputs.
    """
    corpus, ds = sweep.corpus, sweep.corpus.ds
    run = fit_and_score(train_txt, ds.train_labels, {"sanitized_test": test_txt, "original_test": ds.test_texts},
                        ds.test_labels, seed=seed, settings=settings, encoder=sweep.encoder(settings),
                        progress=sweep.cfg.progress)
    hyps = [bleu_tokenize(t) for t in train_txt + test_txt]
    return run, corpus_bleu(hyps, corpus.references)


def _unsanitized_run(sweep: Sweep, settings: ClassifierSettings) -> SeedRun:
    """The utility ceiling: the classifier on the raw text; BLEU, unchanged rate and attack all 1."""
    ds = sweep.corpus.ds
    run = fit_and_score(ds.train_texts, ds.train_labels,
                        {"sanitized_test": ds.test_texts, "original_test": ds.test_texts}, ds.test_labels,
                        settings=settings, encoder=sweep.encoder(settings), progress=sweep.cfg.progress)
    return SeedRun(classifier=run.scores, bleu=1.0, unchanged_token_rate=1.0, empirical_attack_success=1.0,
                   hyperparameters=run.hyperparameters)


def _release_run(sweep: Sweep, released: np.ndarray, decoder: np.ndarray | None, seed: int,
                 settings: ClassifierSettings) -> SeedRun:
    """Utility of one sanitized sample of the corpus (train + test) with one classifier."""
    corpus = sweep.corpus
    train_txt, test_txt = corpus.decode(released)
    run, bleu = _fit_and_bleu(sweep, train_txt, test_txt, seed, settings)
    return SeedRun(
        classifier=run.scores, bleu=bleu,
        unchanged_token_rate=float(np.mean(released == corpus.flat)) if released.size else float("nan"),
        empirical_attack_success=(None if decoder is None
                                  else empirical_attack_success(decoder, corpus.flat, released)),
        hyperparameters=run.hyperparameters)
