"""The records of ``results.json``: one small dataclass per kind, built by keyword, each with ``to_dict``.

Layout of ``results.json`` (format ``ldptext-evaluation``, version 1):

* the top level is a :class:`Results`;
* ``entries`` holds one :class:`Entry` per (SanText row, ε) — SanText, SanText+ with its default split and,
  when asked for, with the frequency split (:mod:`.rows`; ``row`` and ``label`` name each) —, per comparison
  mechanism and ε, per DP-BART ε, per CMP ε and per ε-free baseline (unsanitized, random), with

  - ``privacy``: a :class:`PrivacySummary` (closed-form baselines), a :class:`MechanismPrivacy`
    (SanText / SanText+: the summary plus the formula-vs-sampler check) or an
    :class:`EmpiricalOnlyPrivacy` (CMP, which has no closed-form output distribution) or a
    :class:`DocumentLevelPrivacy` (DP-BART: a document-level guarantee, no token-level metric or attack);
  - ``bundle``: a :class:`BundleInfo` (SanText mechanisms) or a :class:`DPBartBundleInfo` (DP-BART);
  - ``utility``: a :class:`UtilitySummary`, the mean and sample standard deviation (:class:`MeanStd`)
    over one :class:`SeedRun` per seed; ``utility.classifiers`` holds the scores of every classifier
    evaluated (``tfidf``, ``minilm``) by name, and the top-level ``sanitized_test`` / ``original_test``
    repeat those of the first one; ``utility.nn_inversion_success`` the empirical nearest-neighbour
    inversion attack;
* ``utility_at_attack_success`` reads the frontier at equal attack success
  (:func:`utility_at_attack_success`, at the levels :data:`ATTACK_TARGETS`, for each attack of
  :data:`FRONTIER_ATTACKS` and each classifier).

``to_dict`` returns plain dictionaries in the key order of the file; numbers may still be numpy scalars
or NaN, which the runner converts when it writes JSON.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from . import metrics as M
from ..bleu import BLEU_DESCRIPTION
from .rows import Row, row_of
from .utility import CLASSIFIER_DESCRIPTION, ClassifierSettings

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "PAPER_SST2",
    "PRIOR_NAME",
    "ATTACK_DESCRIPTION",
    "CMP_PRIVACY_NOTE",
    "TEST_SETS",
    "CLASSIFIER_METRICS",
    "MeanStd",
    "SeedRun",
    "UtilitySummary",
    "AttackSummary",
    "PrivacySummary",
    "MechanismPrivacy",
    "EmpiricalOnlyPrivacy",
    "DocumentLevelPrivacy",
    "DPBART_PRIVACY_NOTE",
    "BundleInfo",
    "DPBartBundleInfo",
    "Entry",
    "Results",
    "privacy_metric_definitions",
    "randomness_description",
    "ATTACK_TARGETS",
    "FRONTIER_ATTACKS",
    "attack_success",
    "utility_at_attack_success",
    "classifier_scores",
]

FORMAT = "ldptext-evaluation"
FORMAT_VERSION = 1
#: Accuracy on SST-2 reported by Yue et al. 2021, *Differential Privacy for Text Analytics via Natural
#: Text Sanitization* (Findings of ACL), as presented in Yue 2023, *Data Synthesis: Boosting Utility and
#: Privacy in NLP* (PhD thesis, Ohio State), Table 2.1: GloVe vocabulary, BERT fine-tuned on sanitized
#: training text and tested on sanitized test text; mechanism -> ε -> accuracy.
PAPER_SST2 = {"random": {1: 0.4986, 2: 0.4986, 3: 0.4986},
              "cmp": {1: 0.5099, 2: 0.5143, 3: 0.5345},
              "santext": {1: 0.5101, 2: 0.5838, 3: 0.8374},
              "santext+": {1: 0.7796, 2: 0.7943, 3: 0.8516},
              "none": {1: 0.9251, 2: 0.9251, 3: 0.9251}}
#: The attacker's public prior (:func:`.attacks.wordfreq_prior`), as named in the results.
PRIOR_NAME = "wordfreq-en-large"
ATTACK_DESCRIPTION = ("Bayes-optimal token inversion, argmax_x Pr[M(x)=y]·prior(x), prior = wordfreq 'en' "
                      "large (public); exact expected success on the data set's tokens (train + test)")
CMP_PRIVACY_NOTE = ("CMP/FBDD has no closed-form output distribution here; see the empirical "
                    "unchanged-token rate under utility")
#: Why DP-BART has no token-level privacy numbers, and what it guarantees instead.
DPBART_PRIVACY_NOTE = ("DP-BART's guarantee is document-level (epsilon, delta)-LDP: each chunk of at most L "
                       "tokens of a document is one release, (epsilon, delta)-LDP with respect to replacing the "
                       "whole chunk, and a document of k chunks is (k*epsilon, k*delta)-LDP (basic composition). "
                       "The token-level metrics (N_x, S_x, S_y*, entropies) and the Bayes and nearest-neighbour "
                       "inversion attacks do not apply: the output is a new text, not aligned token by token "
                       "with the input")
#: The test sets every classifier is scored on, and the scores kept.
TEST_SETS = ("sanitized_test", "original_test")
CLASSIFIER_METRICS = ("accuracy", "macro_f1")
_PROFILE_METRICS = ("n_x", "s_x", "h0", "h1", "h2", "h_inf", "attack_success")
#: Attack-success levels t of the "utility at attack success ≤ t" table (report.md, results.json).
ATTACK_TARGETS = (0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
#: The attacks the frontier is read at: the exact Bayes inversion, the empirical nearest-neighbour one.
FRONTIER_ATTACKS = ("exact_bayes", "nn_inversion@10")


# -- utility ----------------------------------------------------------------------------------------

@dataclass
class MeanStd:
    """Mean and sample standard deviation (ddof = 1; 0 for a single value) of one score over seeds.

    Attributes
    ----------
    mean : float
        Arithmetic mean of ``values``.
    std : float
        Sample standard deviation (ddof = 1), 0.0 when there is one value.
    values : list of float
        The per-seed values, in seed order.
    """

    mean: float
    std: float
    values: list[float]

    @classmethod
    def of(cls, values: Sequence[float]) -> MeanStd:
        """Summarise per-seed values.

        Parameters
        ----------
        values : sequence of float, length n_seeds >= 1
            One score per seed.

        Returns
        -------
        MeanStd
            Mean, sample standard deviation and the values as Python floats.
        """
        v = np.asarray(values, dtype=np.float64)
        return cls(mean=float(v.mean()), std=float(v.std(ddof=1)) if v.size > 1 else 0.0,
                   values=[float(x) for x in v])

    def to_dict(self) -> dict:
        """The ``{"mean", "std", "values"}`` object of ``results.json``.

        Returns
        -------
        dict
            Keys ``mean`` (float), ``std`` (float) and ``values`` (list of float).
        """
        return {"mean": self.mean, "std": self.std, "values": self.values}


@dataclass
class SeedRun:
    """Utility of one sanitized sample of the corpus (one seed).

    Attributes
    ----------
    classifier : dict
        ``{test set: {"accuracy": float, "macro_f1": float}}`` for each name in :data:`TEST_SETS`, as
        returned by :func:`.utility.train_and_score`.
    bleu : float
        Corpus BLEU-4 of the sanitized documents against their inputs, in [0, 1].
    unchanged_token_rate : float
        Fraction of tokens released unchanged (NaN for an empty corpus).
    empirical_attack_success : float or None
        Fraction of released tokens the exact Bayes decoder inverts correctly; None where the mechanism
        has no closed-form distribution (CMP).
    hyperparameters : dict or None
        The classifier's hyper-parameters chosen by cross-validation on this run's training text
        (:class:`.utility.ClassifierRun`).
    classifiers : dict or None
        Every classifier evaluated on this sample, by name: ``{"scores": <like classifier>,
        "hyperparameters": dict}``; ``classifier`` and ``hyperparameters`` are the first one's. None for
        the run of a single classifier (a utility checkpoint).
    nn_inversion : dict or None
        ``{str(k): success@k}`` of the embedding nearest-neighbour inversion attack on this sample
        (:func:`.attacks.nearest_neighbour_inversion`); None when not measured.
    """

    classifier: dict[str, dict[str, float]]
    bleu: float
    unchanged_token_rate: float
    empirical_attack_success: float | None = None
    hyperparameters: dict | None = None
    classifiers: dict | None = None
    nn_inversion: dict | None = None

    def to_dict(self) -> dict:
        """The run as a JSON-ready dictionary (a utility checkpoint).

        Returns
        -------
        dict
            The attributes by name.
        """
        out = {"classifier": self.classifier, "bleu": self.bleu,
               "unchanged_token_rate": self.unchanged_token_rate,
               "empirical_attack_success": self.empirical_attack_success,
               "hyperparameters": self.hyperparameters}
        if self.classifiers is not None:
            out["classifiers"] = self.classifiers
        if self.nn_inversion is not None:
            out["nn_inversion"] = self.nn_inversion
        return out

    @classmethod
    def from_dict(cls, d: dict) -> SeedRun:
        """The inverse of :meth:`to_dict`.

        Parameters
        ----------
        d : dict
            A dictionary written by :meth:`to_dict` (a null ``unchanged_token_rate`` reads as NaN).

        Returns
        -------
        SeedRun
        """
        rate = d["unchanged_token_rate"]
        return cls(classifier=d["classifier"], bleu=d["bleu"],
                   unchanged_token_rate=float("nan") if rate is None else rate,
                   empirical_attack_success=d.get("empirical_attack_success"),
                   hyperparameters=d.get("hyperparameters"), classifiers=d.get("classifiers"),
                   nn_inversion=d.get("nn_inversion"))

    @classmethod
    def combine(cls, runs: dict[str, SeedRun]) -> SeedRun:
        """One sample's runs of several classifiers (by name, first = primary) as one run.

        Parameters
        ----------
        runs : dict of str to SeedRun
            The run of each classifier on the same sanitized sample (BLEU, unchanged rate and attack
            are the sample's, so equal across them).

        Returns
        -------
        SeedRun
            The first run with ``classifiers`` filled in.
        """
        first = next(iter(runs.values()))
        return cls(classifier=first.classifier, bleu=first.bleu, unchanged_token_rate=first.unchanged_token_rate,
                   empirical_attack_success=first.empirical_attack_success,
                   hyperparameters=first.hyperparameters,
                   classifiers={name: {"scores": r.classifier, "hyperparameters": r.hyperparameters}
                                for name, r in runs.items()})


@dataclass
class UtilitySummary:
    """Per-configuration utility: every :class:`SeedRun` score summarised over seeds.

    Attributes
    ----------
    seeds : int
        Number of runs summarised.
    sanitized_test, original_test : dict of str to MeanStd
        Accuracy and macro-F1 (keys :data:`CLASSIFIER_METRICS`) of the classifier trained on sanitized
        text, on the sanitized and on the original test text.
    bleu, unchanged_token_rate : MeanStd
        See :class:`SeedRun`.
    empirical_attack_success : MeanStd or None
        See :class:`SeedRun`; None (and absent from the file) for CMP.
    seconds : float
        Wall time of the configuration's runs.
    hyperparameters : list of dict
        The classifier's hyper-parameters of each run, in seed order (``classifier_hyperparameters`` in
        the file).
    classifiers : dict of str to dict
        Per classifier (by name, in the order evaluated): ``sanitized_test`` and ``original_test`` (dict
        of str to MeanStd) and ``hyperparameters`` (list of dict); the first is the one above.
    nn_inversion : dict of str to MeanStd or None
        success@k of the embedding nearest-neighbour inversion (``nn_inversion_success`` in the file).
    kept_words : dict of str to MeanStd or None
        SanText+ rows only, per classifier: the accuracy of the same classifier trained and tested on the
        kept-in-clear words alone (the released tokens whose input is non-sensitive under the row's split and
        that came out unchanged; ``kept_words_accuracy`` in the file): how much of the row's utility the words
        its split keeps explain. None for every other row.
    """

    seeds: int
    sanitized_test: dict[str, MeanStd]
    original_test: dict[str, MeanStd]
    bleu: MeanStd
    unchanged_token_rate: MeanStd
    empirical_attack_success: MeanStd | None
    seconds: float
    hyperparameters: list[dict] = field(default_factory=list)
    classifiers: dict[str, dict] = field(default_factory=dict)
    nn_inversion: dict[str, MeanStd] | None = None
    kept_words: dict[str, MeanStd] | None = None

    @classmethod
    def of(cls, runs: Sequence[SeedRun], seconds: float) -> UtilitySummary:
        """Summarise the runs of one configuration.

        Parameters
        ----------
        runs : sequence of SeedRun, length >= 1
            One run per seed (all with or all without ``empirical_attack_success``).
        seconds : float
            Wall time spent on them.

        Returns
        -------
        UtilitySummary
        """
        def scores(test: str) -> dict[str, MeanStd]:
            return {m: MeanStd.of([r.classifier[test][m] for r in runs]) for m in CLASSIFIER_METRICS}

        def by_classifier(name: str) -> dict:
            per_run = [r.classifiers[name] for r in runs]
            return {test: {m: MeanStd.of([c["scores"][test][m] for c in per_run]) for m in CLASSIFIER_METRICS}
                    for test in TEST_SETS} | {"hyperparameters": [c["hyperparameters"] for c in per_run
                                                                  if c.get("hyperparameters")]}

        attack = ([r.empirical_attack_success for r in runs]
                  if runs[0].empirical_attack_success is not None else None)
        return cls(seeds=len(runs), sanitized_test=scores("sanitized_test"),
                   original_test=scores("original_test"), bleu=MeanStd.of([r.bleu for r in runs]),
                   unchanged_token_rate=MeanStd.of([r.unchanged_token_rate for r in runs]),
                   empirical_attack_success=None if attack is None else MeanStd.of(attack),
                   seconds=seconds, hyperparameters=[r.hyperparameters for r in runs if r.hyperparameters],
                   classifiers={name: by_classifier(name) for name in (runs[0].classifiers or {})},
                   nn_inversion=({k: MeanStd.of([r.nn_inversion[k] for r in runs]) for k in runs[0].nn_inversion}
                                 if runs[0].nn_inversion else None))

    def to_dict(self) -> dict:
        """The entry's ``utility`` object of ``results.json``.

        Returns
        -------
        dict
            ``seeds``, ``sanitized_test``, ``original_test``, ``bleu``, ``unchanged_token_rate``,
            ``empirical_attack_success`` (when present), ``classifier_hyperparameters``, ``classifiers``
            (when recorded: ``{name: {"sanitized_test", "original_test", "classifier_hyperparameters"}}``)
            and ``seconds``.
        """
        out: dict = {"seeds": self.seeds,
                     "sanitized_test": {m: s.to_dict() for m, s in self.sanitized_test.items()},
                     "original_test": {m: s.to_dict() for m, s in self.original_test.items()},
                     "bleu": self.bleu.to_dict(),
                     "unchanged_token_rate": self.unchanged_token_rate.to_dict()}
        if self.empirical_attack_success is not None:
            out["empirical_attack_success"] = self.empirical_attack_success.to_dict()
        if self.nn_inversion is not None:
            out["nn_inversion_success"] = {k: s.to_dict() for k, s in self.nn_inversion.items()}
        out["classifier_hyperparameters"] = self.hyperparameters
        if self.classifiers:
            out["classifiers"] = {
                name: {**{test: {m: s.to_dict() for m, s in c[test].items()} for test in TEST_SETS},
                       "classifier_hyperparameters": c["hyperparameters"]}
                for name, c in self.classifiers.items()}
        if self.kept_words:
            out["kept_words_accuracy"] = {name: s.to_dict() for name, s in self.kept_words.items()}
        out["seconds"] = self.seconds
        return out


# -- privacy ----------------------------------------------------------------------------------------

@dataclass
class AttackSummary:
    """Exact success of the Bayes-optimal token-inversion attack (:mod:`.attacks`, :mod:`.metrics`).

    Attributes
    ----------
    exact_success_rate_dataset : float or None
        Expected success over the data set's tokens (train + test, weighted by occurrences); None when
        the data set has no token in the input domain.
    exact_success_rate_vocabulary_mean : float
        Mean expected success over the input domain (uniform over tokens).
    description : str
        What was attacked and with which prior.
    """

    exact_success_rate_dataset: float | None
    exact_success_rate_vocabulary_mean: float
    description: str = ATTACK_DESCRIPTION

    def to_dict(self) -> dict:
        """The ``privacy.attack`` object of ``results.json``.

        Returns
        -------
        dict
            The three attributes by name.
        """
        return {"exact_success_rate_dataset": self.exact_success_rate_dataset,
                "exact_success_rate_vocabulary_mean": self.exact_success_rate_vocabulary_mean,
                "description": self.description}


@dataclass
class PrivacySummary:
    """A :class:`.metrics.MechanismProfile` summarised over the vocabulary and over the data set.

    Attributes
    ----------
    threshold : float
        τ of S_x and S_y*.
    prior : str
        Name of the attacker's prior.
    vocabulary : dict of str to dict
        :func:`.metrics.summarize` of each metric (``n_x``, ``s_x``, ``h0``, ``h1``, ``h2``, ``h_inf``,
        ``attack_success``, and ``s_y_star`` when columns were profiled) over every valid input token
        (S_y*: over the profiled outputs), unweighted.
    dataset : dict of str to dict
        The same summaries weighted by each token's occurrences in the data set (train + test);
        ``s_y_star`` also carries ``token_coverage``, the share of the data set's tokens among the
        profiled outputs.
    attack : AttackSummary
        Exact success of the Bayes-optimal inversion attack.
    s_y_star_columns : int or None
        Number of outputs S_y* was computed for; None (and absent from the file) when none were.
    entropy_unit : str
        Unit of ``h0``, ``h1``, ``h2``, ``h_inf``.
    """

    threshold: float
    prior: str
    vocabulary: dict[str, dict]
    dataset: dict[str, dict]
    attack: AttackSummary
    s_y_star_columns: int | None = None
    entropy_unit: str = "bits"

    @classmethod
    def of(cls, prof: M.MechanismProfile, counts: np.ndarray) -> PrivacySummary:
        """Summarise a profile over the vocabulary and over a data set's tokens.

        Parameters
        ----------
        prof : MechanismProfile
            Exact per-token privacy quantities of one mechanism.
        counts : numpy.ndarray, float64, shape (V,)
            Occurrences of each vocabulary id in the data set (train + test).

        Returns
        -------
        PrivacySummary
        """
        w = counts[prof.inputs]
        vocabulary: dict[str, dict] = {}
        dataset: dict[str, dict] = {}
        for name in _PROFILE_METRICS:
            vals = getattr(prof, name)
            ok = vals >= 0 if name == "s_x" else np.ones(vals.size, bool)   # S_x = -1: not computed
            vocabulary[name] = M.summarize(vals[ok])
            dataset[name] = M.summarize(vals[ok], w[ok]) if w[ok].sum() > 0 else M.summarize([])
        s_y_star_columns = None
        if prof.columns.size:
            cw = counts[prof.columns]
            vocabulary["s_y_star"] = M.summarize(prof.s_y)
            dataset["s_y_star"] = M.summarize(prof.s_y, cw) if cw.sum() > 0 else M.summarize([])
            dataset["s_y_star"]["token_coverage"] = float(cw.sum() / max(counts.sum(), 1))
            s_y_star_columns = int(prof.columns.size)
        total = counts.sum()
        attack = AttackSummary(
            exact_success_rate_dataset=float((w * prof.attack_success).sum() / total) if total else None,
            exact_success_rate_vocabulary_mean=float(prof.attack_success.mean()))
        return cls(threshold=prof.threshold, prior=prof.prior_name, vocabulary=vocabulary, dataset=dataset,
                   attack=attack, s_y_star_columns=s_y_star_columns)

    def to_dict(self) -> dict:
        """The entry's ``privacy`` object of ``results.json``.

        Returns
        -------
        dict
            ``threshold``, ``prior``, ``entropy_unit``, ``vocabulary``, ``dataset``,
            ``s_y_star_columns`` (when present) and ``attack``.
        """
        out: dict = {"threshold": self.threshold, "prior": self.prior, "entropy_unit": self.entropy_unit,
                     "vocabulary": self.vocabulary, "dataset": self.dataset}
        if self.s_y_star_columns is not None:
            out["s_y_star_columns"] = self.s_y_star_columns
        out["attack"] = self.attack.to_dict()
        return out


@dataclass
class MechanismPrivacy:
    """Privacy of a SanText mechanism: its :class:`PrivacySummary` and how the formula was checked.

    Attributes
    ----------
    summary : PrivacySummary
        Summary of the exact profile computed from the SanText formula.
    formula_vs_realised : dict or None
        :func:`.mechanisms.realised_agreement` on a sample of rows; None when no row was checked.
    seconds : float
        Wall time of the profile and the check.
    """

    summary: PrivacySummary
    formula_vs_realised: dict | None
    seconds: float

    def to_dict(self) -> dict:
        """The entry's ``privacy`` object: the summary's keys, ``formula_vs_realised`` and ``seconds``.

        Returns
        -------
        dict
        """
        return {**self.summary.to_dict(), "formula_vs_realised": self.formula_vs_realised,
                "seconds": self.seconds}


@dataclass
class EmpiricalOnlyPrivacy:
    """Privacy of a mechanism without a closed-form output distribution (CMP): a note only.

    Attributes
    ----------
    note : str
        Where the empirical quantities are reported instead.
    """

    note: str = CMP_PRIVACY_NOTE

    def to_dict(self) -> dict:
        """The entry's ``privacy`` object, ``{"note": ...}``.

        Returns
        -------
        dict
        """
        return {"note": self.note}


@dataclass
class DocumentLevelPrivacy:
    """Privacy of DP-BART: the document-level (ε, δ)-LDP guarantee stated by the Rewriter's reports.

    No token-level metric and no inversion attack: the rewritten text is not aligned with its input
    (:data:`DPBART_PRIVACY_NOTE`). ``epsilon``, ``delta`` and ``mechanism`` are known before anything is
    rewritten; the chunk counts and a report are filled in from the rewritten sample (:meth:`with_sample`).

    Attributes
    ----------
    mechanism : str
        ``"gaussian"`` or ``"laplace"`` (the noise of the Rewriter).
    epsilon, delta : float
        The guarantee of each chunk (δ = 0 for Laplace).
    chunks : dict or None
        Over the rewritten documents (train + test): ``documents``, ``max``, ``mean`` and ``split_documents``
        (documents of more than one chunk).
    total_epsilon_max, total_delta_max : float or None
        The composed guarantee of the document with the most chunks (k·ε, min(1, k·δ)).
    report : dict or None
        ``DPBartReport.to_dict()`` of that document (per-chunk and composed guarantee, n, C, Δ, scale,
        ``seeded``).
    note : str
        :data:`DPBART_PRIVACY_NOTE`.
    """

    mechanism: str
    epsilon: float
    delta: float
    chunks: dict | None = None
    total_epsilon_max: float | None = None
    total_delta_max: float | None = None
    report: dict | None = None
    note: str = DPBART_PRIVACY_NOTE

    def with_sample(self, chunks: Sequence[int], report: dict | None) -> DocumentLevelPrivacy:
        """The same guarantee with the chunk counts and the report of one rewritten sample.

        Parameters
        ----------
        chunks : sequence of int
            Chunks (releases) of every rewritten document.
        report : dict or None
            ``DPBartReport.to_dict()`` of a document with the most chunks (None for an empty sample).

        Returns
        -------
        DocumentLevelPrivacy
        """
        k = np.asarray(chunks, dtype=np.int64)
        stats = {"documents": int(k.size), "max": int(k.max()) if k.size else 0,
                 "mean": float(k.mean()) if k.size else float("nan"), "split_documents": int((k > 1).sum())}
        worst = stats["max"]
        return DocumentLevelPrivacy(mechanism=self.mechanism, epsilon=self.epsilon, delta=self.delta, chunks=stats,
                                    total_epsilon_max=self.epsilon * worst,
                                    total_delta_max=min(1.0, self.delta * worst), report=report, note=self.note)

    def describe(self) -> str:
        """One line: the per-chunk guarantee and the composed one of the longest document.

        Returns
        -------
        str
        """
        dl = f", δ={self.delta:g}" if self.mechanism == "gaussian" else ", δ=0"
        line = f"{self.mechanism} noise, (ε={self.epsilon:g}{dl}) per chunk"
        if self.chunks:
            line += (f"; up to {self.chunks['max']} chunk(s) per document (mean {self.chunks['mean']:.2f}) → at "
                     f"most (ε={self.total_epsilon_max:g}, δ={self.total_delta_max:g}) per document")
        return line

    def to_dict(self) -> dict:
        """The entry's ``privacy`` object of ``results.json``.

        Returns
        -------
        dict
            ``guarantee`` (``"document-level (epsilon, delta)-LDP"``), the attributes by name and
            ``description`` (:meth:`describe`); no ``attack`` key (no attack applies).
        """
        return {"guarantee": "document-level (epsilon, delta)-LDP", "mechanism": self.mechanism,
                "epsilon": self.epsilon, "delta": self.delta, "chunks": self.chunks,
                "total_epsilon_max": self.total_epsilon_max, "total_delta_max": self.total_delta_max,
                "report": self.report, "description": self.describe(), "note": self.note}


# -- entries and the whole file ---------------------------------------------------------------------

@dataclass
class BundleInfo:
    """The evaluation bundle behind a SanText entry.

    Attributes
    ----------
    path : str
        Bundle file (in the evaluation cache).
    d_max : float
        Largest distance in the bundle's metric (D_max).
    numeric_tolerance : float
        Relative tolerance to which the sampler realises the formula.
    vocab_size : int
        V, the number of vocabulary ids.
    outputs : int
        Size of the output domain.
    per_token_epsilon : float
        The per-token metric ε charged to the ledger, ``Sanitizer.per_token_epsilon`` (not an LDP level).
    worst_case_token_epsilon : float or None
        ``Sanitizer.worst_case_token_epsilon``: ε·D_max for SanText, None for SanText+ (no finite
        worst case across the sensitive/non-sensitive split).
    epsilon0 : float
        ε₀ of SanText+ (0 for SanText).
    """

    path: str
    d_max: float
    numeric_tolerance: float
    vocab_size: int
    outputs: int
    per_token_epsilon: float
    worst_case_token_epsilon: float | None
    epsilon0: float

    @classmethod
    def of(cls, path, san, vocab_size: int) -> BundleInfo:
        """Describe a loaded bundle.

        Parameters
        ----------
        path : str or Path
            Bundle file.
        san : ldptext.santext.Sanitizer
            The bundle, loaded.
        vocab_size : int
            V.

        Returns
        -------
        BundleInfo
        """
        return cls(path=str(path), d_max=san.d_max, numeric_tolerance=san.tolerance, vocab_size=vocab_size,
                   outputs=int(san.outputs.size), per_token_epsilon=san.per_token_epsilon,
                   worst_case_token_epsilon=san.worst_case_token_epsilon, epsilon0=san.epsilon0)

    def to_dict(self) -> dict:
        """The entry's ``bundle`` object of ``results.json``.

        Returns
        -------
        dict
            The attributes by name.
        """
        return {"path": self.path, "d_max": self.d_max, "numeric_tolerance": self.numeric_tolerance,
                "vocab_size": self.vocab_size, "outputs": self.outputs,
                "per_token_epsilon": self.per_token_epsilon,
                "worst_case_token_epsilon": self.worst_case_token_epsilon, "epsilon0": self.epsilon0}


@dataclass
class DPBartBundleInfo:
    """The DP-BART bundle behind the ``dpbart`` entries (given with ``--dpbart-bundle``, verified).

    Attributes
    ----------
    path : str
        Bundle file.
    key_id : str or None
        Id of the key that signed it (None: an unsigned bundle, allowed explicitly).
    variant : str
        ``"clv"``, ``"pr"`` or ``"pr+"``.
    seq_len, hidden, n_pruned, n : int
        L, d, |P| and the released coordinates per chunk L·(d − |P|).
    clip : float
        C.
    max_output_tokens : int
        The fixed decoding length limit.
    """

    path: str
    key_id: str | None
    variant: str
    seq_len: int
    hidden: int
    n_pruned: int
    n: int
    clip: float
    max_output_tokens: int

    @classmethod
    def of(cls, path, rewriter) -> DPBartBundleInfo:
        """Describe a loaded bundle.

        Parameters
        ----------
        path : str or Path
            Bundle file.
        rewriter : ldptext.dpbart.Rewriter
            The bundle, loaded.

        Returns
        -------
        DPBartBundleInfo
        """
        return cls(path=str(path), key_id=rewriter.key_id, variant=rewriter.variant, seq_len=int(rewriter.seq_len),
                   hidden=int(rewriter.hidden), n_pruned=int(rewriter.pruned.size), n=int(rewriter.n),
                   clip=float(rewriter.clip), max_output_tokens=int(rewriter.max_output_tokens))

    def to_dict(self) -> dict:
        """The entry's ``bundle`` object of ``results.json``.

        Returns
        -------
        dict
            The attributes by name.
        """
        return {"path": self.path, "key_id": self.key_id, "variant": self.variant, "seq_len": self.seq_len,
                "hidden": self.hidden, "n_pruned": self.n_pruned, "n": self.n, "clip": self.clip,
                "max_output_tokens": self.max_output_tokens}


@dataclass
class Entry:
    """One configuration of the sweep: a mechanism at one ε (None for the ε-free baselines).

    Attributes
    ----------
    mechanism : str
        ``santext``, ``santext+``, a comparison mechanism, ``dpbart``, ``none``, ``random`` or ``cmp``.
    split : str or None
        SanText+'s split (:mod:`.rows`: ``function-words``, the default, or ``frequency:w``); None otherwise.
    epsilon : float or None
        ε of the configuration (per chunk for ``dpbart``); None for ``none`` and ``random``.
    privacy : PrivacySummary, MechanismPrivacy, EmpiricalOnlyPrivacy or DocumentLevelPrivacy
        Exact privacy metrics (a note for CMP; the document-level guarantee for DP-BART).
    bundle : BundleInfo, DPBartBundleInfo or None
        The mechanism's bundle (None, and absent from the file, for the baselines).
    utility : UtilitySummary or None
        Filled in by the utility step.
    profile : MechanismProfile or None
        The exact profile the privacy summary came from; its ``decoder`` serves the empirical attack.
        Not written to ``results.json``.
    """

    mechanism: str
    epsilon: float | None
    privacy: PrivacySummary | MechanismPrivacy | EmpiricalOnlyPrivacy | DocumentLevelPrivacy
    bundle: BundleInfo | DPBartBundleInfo | None = None
    utility: UtilitySummary | None = None
    profile: M.MechanismProfile | None = field(default=None, repr=False)
    split: str | None = None

    @property
    def row(self) -> Row:
        """The entry's row (mechanism and split)."""
        return Row(self.mechanism, self.split)

    def to_dict(self) -> dict:
        """One element of ``results.json``'s ``entries``.

        Returns
        -------
        dict
            ``mechanism``, ``split`` (SanText+ only), ``row`` and ``label`` (:class:`.rows.Row`), ``epsilon``,
            ``privacy``, and ``bundle`` / ``utility`` where present.
        """
        out: dict = {"mechanism": self.mechanism, **({"split": self.split} if self.split else {}),
                     "row": self.row.key, "label": self.row.label, "epsilon": self.epsilon,
                     "privacy": self.privacy.to_dict()}
        if self.bundle is not None:
            out["bundle"] = self.bundle.to_dict()
        if self.utility is not None:
            out["utility"] = self.utility.to_dict()
        return out


def privacy_metric_definitions(threshold: float) -> dict[str, str]:
    """The ``privacy_metric_definitions`` section: one line per reported metric.

    Parameters
    ----------
    threshold : float
        τ of S_x and S_y*.

    Returns
    -------
    dict of str to str
    """
    return {"n_x": "Pr[M(x)=x]",
            "s_x": f"smallest output set with cumulative probability >= {threshold}",
            "s_y_star": f"smallest input set with cumulative posterior (uniform prior over inputs) >= "
                        f"{threshold}",
            "h0,h1,h2,h_inf": "Renyi entropies, bits",
            "vocabulary": "over every valid input token (S_y*: over sampled outputs)",
            "dataset": "weighted by the token's occurrences in the data set (train + test)"}


def randomness_description(reproducible: bool) -> str:
    """The ``randomness`` line: seeded (reproducible, not private) or OS-keyed generators.

    Parameters
    ----------
    reproducible : bool
        Whether each seed drew from a seeded :class:`ldptext.rng.Generator`.

    Returns
    -------
    str
    """
    if reproducible:
        return "seeded ldptext Generator per seed (reproducible experiment mode, NOT private)"
    return "OS-keyed ldptext Generator"


@dataclass
class Results:
    """The whole of ``results.json``.

    Attributes
    ----------
    config : dict
        The :class:`.runner.EvaluationConfig`, as a dictionary.
    versions : dict of str to str or None
        Python and package versions.
    dataset : dict
        The data set's provenance (``Dataset.info``), ``name``, ``majority_rate_test`` and
        ``train_class_counts``.
    randomness : str
        :func:`randomness_description`.
    privacy_metric_definitions : dict of str to str
        :func:`privacy_metric_definitions`.
    entries : list of Entry
        Every configuration, SanText mechanisms first, then the baselines.
    timings : dict of str to float
        Seconds per step of the sweep and ``total_s``.
    reused : dict of str to int
        Checkpoints read from an earlier run, per stage (``profile``, ``sample``, ``utility``, …); empty for
        a run that computed everything.
    classifier, bleu : str
        How utility was measured.
    classifier_settings : dict
        :meth:`.utility.ClassifierSettings.to_dict` (grid, folds, metric, solver).
    classifiers : dict of str to dict
        Every classifier evaluated, by name (first = the one of ``classifier``): ``description`` and
        ``settings``; empty (and absent from the file) when not recorded.
    warnings : list of str
        Problems found with the data or the results (also printed on stderr and in ``report.md``).
    paper_reference_sst2 : dict
        :data:`PAPER_SST2` (mechanism -> ε -> accuracy).
    plots : list of str or None
        PNG files written next to the results (None, and absent from the file, without plots).
    runs : list of dict or None
        The runs of this sweep into this output folder (:func:`.runlog.record_run`: start, wall time,
        outcome), this one last; ``timings["all_runs_s"]`` is their total (:func:`.runlog.total_seconds`).
    vocabulary : str or None
        The bundles' vocabulary as ``ldptext calibrate`` states it too
        (:func:`ldptext_precompute.santext.embeddings.describe_vocabulary`: ``10000 words + the input-only
        <unk> row (V = 10001)``); None (and absent from the file) when not recorded.
    format, format_version : str, int
        File format name and version.
    """

    config: dict
    versions: dict
    dataset: dict
    randomness: str
    privacy_metric_definitions: dict[str, str]
    entries: list[Entry]
    timings: dict[str, float]
    reused: dict[str, int] = field(default_factory=dict)
    classifier: str = CLASSIFIER_DESCRIPTION
    classifier_settings: dict = field(default_factory=lambda: ClassifierSettings().to_dict())
    classifiers: dict[str, dict] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    bleu: str = BLEU_DESCRIPTION
    paper_reference_sst2: dict = field(default_factory=lambda: PAPER_SST2)
    plots: list[str] | None = None
    vocabulary: str | None = None
    runs: list[dict] | None = None
    format: str = FORMAT
    format_version: int = FORMAT_VERSION

    def to_dict(self) -> dict:
        """The document written to ``results.json`` (before JSON conversion).

        Returns
        -------
        dict
            The sections in file order; ε keys of ``paper_reference_sst2`` as strings; then
            ``utility_at_attack_success`` (derived from the entries) and ``plots``.
        """
        out = {"format": self.format, "format_version": self.format_version, "config": self.config,
               "versions": self.versions, "dataset": self.dataset, "warnings": self.warnings,
               "classifier": self.classifier, "classifier_settings": self.classifier_settings,
               **({"classifiers": self.classifiers} if self.classifiers else {}),
               "bleu": self.bleu, "randomness": self.randomness,
               "privacy_metric_definitions": self.privacy_metric_definitions,
               "paper_reference_sst2": {k: {str(e): v for e, v in d.items()}
                                        for k, d in self.paper_reference_sst2.items()},
               **({"vocabulary": self.vocabulary} if self.vocabulary else {}),
               "entries": [e.to_dict() for e in self.entries], "timings": self.timings, "reused": self.reused,
               **({"runs": self.runs} if self.runs is not None else {})}
        entries = out["entries"]
        names = list(self.classifiers) or [None]
        out["utility_at_attack_success"] = {
            "definition": "per attack, classifier, attack level t and mechanism: the measured configuration with "
                          "the highest mean accuracy (trained and tested on sanitized text) among those whose "
                          "attack success on the data set's tokens is <= t; measured points only, no "
                          "interpolation. exact_bayes: the exact Bayes inversion (CMP has none and is not "
                          "ranked); nn_inversion@10: the empirical embedding nearest-neighbour inversion, "
                          "success@10 (every token-level mechanism). DP-BART (document-level LDP, output not "
                          "aligned with the input) has no token-level attack and is not ranked",
            "targets": list(ATTACK_TARGETS),
            "by_attack": {attack: {name or "default": {f"{t:g}": utility_at_attack_success(entries, t, name,
                                                                                           attack=attack)
                                                       for t in ATTACK_TARGETS} for name in names}
                          for attack in FRONTIER_ATTACKS}}
        if self.plots is not None:
            out["plots"] = self.plots
        return out


def kept_share(kept: float, accuracy: float, majority: float) -> float | None:
    """The share of a row's gain over the majority class that its kept-in-clear words alone reach:
    ``(kept − majority) / (accuracy − majority)``; None when the row does not beat the majority class."""
    gain = accuracy - majority
    return None if not gain > 1e-9 else (kept - majority) / gain


def classifier_scores(entry: dict, classifier: str | None = None) -> dict | None:
    """The ``{"sanitized_test", "original_test", "classifier_hyperparameters"}`` scores of one classifier
    in an entry of ``results.json`` (the top-level scores when ``classifier`` is None or not recorded).

    Parameters
    ----------
    entry : dict
        One element of ``results.json``'s ``entries``.
    classifier : str or None
        A classifier name (``tfidf``, ``minilm``).

    Returns
    -------
    dict or None
        None when the entry has no utility.
    """
    utility = entry.get("utility")
    if not utility:
        return None
    if classifier is not None and classifier in (utility.get("classifiers") or {}):
        return utility["classifiers"][classifier]
    return utility


def attack_success(entry: dict, attack: str = "exact_bayes") -> float | None:
    """An entry's attack success on the data set's tokens: ``exact_bayes`` (the exact Bayes inversion; None
    for CMP) or ``nn_inversion@K`` (mean empirical nearest-neighbour success@K; None when not measured).

    Parameters
    ----------
    entry : dict
        One element of ``results.json``'s ``entries``.
    attack : str
        ``exact_bayes`` or ``nn_inversion@K``.

    Returns
    -------
    float or None
    """
    if attack == "exact_bayes":
        return (entry.get("privacy") or {}).get("attack", {}).get("exact_success_rate_dataset")
    k = attack.split("@", 1)[1]
    nn = (entry.get("utility") or {}).get("nn_inversion_success") or {}
    return nn[k]["mean"] if k in nn else None


def utility_at_attack_success(entries: Sequence[dict], target: float, classifier: str | None = None,
                              test: str = "sanitized_test", attack: str = "exact_bayes") -> dict[str, dict | None]:
    """Per row (mechanism and split), the measured configuration with the best accuracy whose exact Bayes inversion
    success is at most ``target``: the privacy–utility frontier read at equal attack success (ε scales
    differ across embeddings and mechanisms, attack success does not).

    Parameters
    ----------
    entries : sequence of dict
        ``results.json``'s entries.
    target : float
        The attack-success level t.
    classifier : str or None
        Whose accuracy (:func:`classifier_scores`).
    test : str
        ``sanitized_test`` or ``original_test``.
    attack : str
        Which attack (:func:`attack_success`).

    Returns
    -------
    dict of str to (dict or None)
        For every row (its key, :attr:`.rows.Row.key`) with that attack measured: ``{"accuracy", "std",
        "epsilon", "attack_success"}``
        of the chosen configuration, or None when none of its configurations is at or below ``target``.
    """
    best: dict[str, dict | None] = {}
    for e in entries:
        success = attack_success(e, attack)
        scores = classifier_scores(e, classifier)
        if success is None or scores is None:
            continue
        row = row_of(e).key
        best.setdefault(row, None)
        acc = scores[test]["accuracy"]
        if success <= target + 1e-12 and (best[row] is None or acc["mean"] > best[row]["accuracy"]):
            best[row] = {"accuracy": acc["mean"], "std": acc["std"], "epsilon": e["epsilon"],
                                    "attack_success": success}
    return best
