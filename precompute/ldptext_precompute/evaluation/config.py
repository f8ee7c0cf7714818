"""The configuration of the privacy–utility sweep (``ldptext evaluate``) and the names it accepts."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ldptext import registry
from ldptext.errors import ParameterError
from ..epsilon import normalize_epsilons
from . import comparison as _comparison
from ..santext.knn import DEFAULT_HEAD_SIZE
from . import metrics as M
from .rows import Row, santext_row
from .utility import CLASSIFIERS

#: Sub-directory of the output directory that holds the checkpoints.
CHECKPOINT_DIR = "checkpoints"


SANTEXT_MECHANISMS = registry.names(family="santext")


MECHANISMS = SANTEXT_MECHANISMS + _comparison.COMPARISON_MECHANISMS


BASELINES = ("none", "random", "cmp")


def epsilon_text(epsilon: float) -> str:
    """ε as it names a bundle and a random stream: the exact float (``repr``), so 2.53 and 2.530004 differ.
    A key, never printed: ε is printed by :func:`ldptext_precompute.epsilon.format_epsilon`."""
    return repr(float(epsilon))


#: The mechanism name of the DP-BART entries (enabled by ``dpbart_bundle``, not by ``mechanisms``).
DPBART = "dpbart"


#: The Rewriter's noise mechanisms.
DPBART_NOISE = ("gaussian", "laplace")


#: δ per chunk of the Gaussian mechanism. The Rewriter has no default (it requires δ with Gaussian noise,
#: its default); this is the value of the README's ``ldptext rewrite`` examples.
DEFAULT_DPBART_DELTA = 1e-5


#: Documents per ``Rewriter.rewrite_batch`` call (each document's chunks are rewritten alone either way).
DPBART_BATCH = 64


@dataclass
class EvaluationConfig:
    """Everything the sweep depends on (stored verbatim in ``results.json``).

    Attributes
    ----------
    out : str
        Output directory.
    data, text_col, label_col, test : str, str, str, str or None
        Data set (a file or ``rotten-tomatoes``), its columns and an optional separate test file.
    mechanisms : list of str
        SanText mechanisms to evaluate (from :data:`MECHANISMS`).
    embeddings : str
        ``glove-6b-50d``, ``minilm-wordpiece`` or a path to a text embedding file.
    vocab_size : int or None
        Word-level vocabulary size; None for the embeddings' default (always None for WordPiece).
    epsilons : list of float
        The ε of every mechanism and of CMP, each used exactly as given (bundle, cache key and seeds);
        :meth:`validate` keeps numerically equal values once and sorts them ascending (the table columns).
    p : float
        SanText+'s probability of sanitizing a non-sensitive token.
    w : float or None
        SanText+: also evaluate the paper's frequency split with sensitive fraction w (the row "SanText+
        (frequency split w)"); the default split's row (what ``ldptext precompute santext`` builds) is
        always evaluated. None: the default split only.
    baselines : list of str
        Baselines to evaluate (from :data:`BASELINES`).
    classifiers : list of str
        Utility classifiers, by name (:data:`.utility.CLASSIFIERS`: ``tfidf``, ``minilm``); the first is
        the one of the top-level scores.
    seeds, seed_base : int
        Repetitions per configuration and the base of their seeds.
    reproducible : bool
        Seeded (reproducible, not private) generators; False for OS-keyed ones.
    threshold : float
        τ of S_x and S_y*.
    columns : int
        Outputs sampled for S_y* (the data set's most frequent tokens are added).
    agreement_rows : int
        Rows of each SanText formula compared with ``Sanitizer.log_probabilities``.
    test_fraction, split_seed : float, int
        Deterministic stratified train/test split when there is no separate test file.
    max_train, max_test : int or None
        Deterministic stratified subsets of the documents. They bound the sampling and the classifiers,
        not the run: the bundles and the exact privacy profiles cover the whole vocabulary.
    cache_dir : str or None
        Where bundles are cached (default ``~/.cache/ldptext/evaluate``).
    resume : bool
        Reuse the checkpoints of finished stages under ``out/checkpoints`` (they are written either way).
    head_size : int
        Bundle head size.
    verbatim_cap : float or None
        τ in (0, 1] of the SanText rows' bundles: every sensitive word is released unchanged with
        probability at most τ (``build_santext_bundle(verbatim_cap=τ)``: a word above it leaves the
        output domain), as ``ldptext precompute santext --verbatim-cap`` builds by default (0.5).
        None (default): no cap, as the evaluation has always built them (same bundles, same cache).
        The comparison mechanisms' bundles are built as before either way.
    dpbart_bundle : str or None
        A ``dpbart`` bundle (``ldptext precompute dpbart``): adds the ``dpbart`` entries (the name
        ``dpbart`` in ``mechanisms`` requires it and is otherwise ignored).
    dpbart_epsilons : list of float or None
        DP-BART's ε per chunk (its scale is not the token mechanisms'); None: ``epsilons``. Distinct and
        ascending after :meth:`validate`, as ``epsilons``.
    dpbart_delta : float
        δ per chunk of the Gaussian mechanism (:data:`DEFAULT_DPBART_DELTA`; 0 is recorded for Laplace).
    dpbart_mechanism : str
        ``gaussian`` (the Rewriter's default) or ``laplace``.
    trusted_keys : list of str or None
        Public keys the DP-BART bundle's signer must be among; None: the local trust store.
    allow_unsigned : bool
        Accept an unsigned (development) DP-BART bundle.
    progress, plots : bool
        Progress bars and log lines; PNG plots.
    shard : str or None
        ``"K/N"``: score only the utility configurations K, K + N, K + 2N, … (0-based, in the order
        they are scored) into ``out``'s checkpoints and write no report. N such runs at once share the
        work on N cores; one run without ``shard`` then writes the report from their checkpoints.
        They build the bundles and the privacy profiles one at a time (a lock in ``out/checkpoints``),
        so the first computes them and the others read its checkpoints.
    command : str or None
        The command line, for the report.
    """

    out: str = "evaluation"
    data: str = "rotten-tomatoes"
    text_col: str = "text"
    label_col: str = "label"
    test: str | None = None
    mechanisms: list[str] = field(default_factory=lambda: ["santext", "santext+"])
    embeddings: str = "glove-6b-50d"
    vocab_size: int | None = 20_000
    epsilons: list[float] = field(default_factory=lambda: [1.0, 2.0, 3.0])
    p: float = 0.3
    w: float | None = None
    baselines: list[str] = field(default_factory=lambda: ["none", "random", "cmp"])
    classifiers: list[str] = field(default_factory=lambda: ["tfidf"])
    seeds: int = 3
    seed_base: int = 0
    reproducible: bool = True
    threshold: float = M.DEFAULT_THRESHOLD
    columns: int = 500              # outputs sampled for S_y* (plus the data set's most frequent)
    agreement_rows: int = 16        # rows compared with Sanitizer.log_probabilities
    test_fraction: float = 0.2
    split_seed: int = 0
    max_train: int | None = None
    max_test: int | None = None
    cache_dir: str | None = None
    resume: bool = True
    head_size: int = DEFAULT_HEAD_SIZE
    verbatim_cap: float | None = None   # τ of the SanText bundles; None: no cap
    dpbart_bundle: str | None = None
    dpbart_epsilons: list[float] | None = None
    dpbart_delta: float = DEFAULT_DPBART_DELTA
    dpbart_mechanism: str = "gaussian"
    trusted_keys: list[str] | None = None
    allow_unsigned: bool = False
    progress: bool = True
    plots: bool = True
    shard: str | None = None        # "K/N": this run's share of the utility configurations
    command: str | None = None      # the command line, for the report

    def validate(self) -> None:
        """Check every parameter (and clear ``vocab_size`` for the fixed WordPiece vocabulary).

        Raises
        ------
        ParameterError
            On an unknown mechanism or baseline, a non-positive or non-finite ε, p or w outside
            (0, 1], fewer than one seed, a threshold outside (0, 1], ``dpbart`` without a DP-BART
            bundle, a DP-BART δ outside (0, 1) or an unknown noise, nothing to evaluate, or a
            ``shard`` that is not K/N with 0 <= K < N.
        """
        if self.embeddings == "minilm-wordpiece":
            self.vocab_size = None   # a fixed WordPiece vocabulary: no size to choose
        self._validate_dpbart()
        for m in self.mechanisms:
            if m not in MECHANISMS:
                raise ParameterError(f"unknown mechanism {m!r} (choose from {', '.join(MECHANISMS)})")
        for b in self.baselines:
            if b not in BASELINES:
                raise ParameterError(f"unknown baseline {b!r} (choose from {', '.join(BASELINES)})")
        if "cmp" in self.mechanisms:  # the CMP bundle supersedes the evaluation-only CMP baseline
            self.baselines = [b for b in self.baselines if b != "cmp"]
        if not self.epsilons or any(not (e > 0 and math.isfinite(e)) for e in self.epsilons):
            raise ParameterError("every epsilon must be a positive finite number")
        self.epsilons = normalize_epsilons(self.epsilons)[0]
        if not 0 < self.p <= 1 or (self.w is not None and not 0 < self.w <= 1):
            raise ParameterError("p and w must be in (0, 1]")
        if not self.classifiers or len(set(self.classifiers)) != len(self.classifiers) or any(
                c not in CLASSIFIERS for c in self.classifiers):
            raise ParameterError(f"classifiers must be distinct names from {', '.join(CLASSIFIERS)}")
        if self.seeds < 1:
            raise ParameterError("seeds must be >= 1")
        if not 0 < self.threshold <= 1:
            raise ParameterError("threshold must be in (0, 1]")
        if self.verbatim_cap is not None:
            if isinstance(self.verbatim_cap, bool) or not 0 < self.verbatim_cap <= 1:
                raise ParameterError("the verbatim cap must be in (0, 1] (or None for no cap)")
            self.verbatim_cap = float(self.verbatim_cap)
        if not self.mechanisms and not self.baselines and not self.dpbart_bundle:
            raise ParameterError("nothing to evaluate")
        if self.shard is not None:
            self.shard_parts()

    def shard_parts(self) -> tuple[int, int] | None:
        """``shard`` as (K, N), or None for a whole run; ParameterError unless 0 <= K < N."""
        if self.shard is None:
            return None
        k, sep, n = str(self.shard).partition("/")
        if not (sep and k.isdigit() and n.isdigit() and int(k) < int(n)):
            raise ParameterError(f"shard must be K/N with 0 <= K < N, not {self.shard!r}")
        return int(k), int(n)

    def santext_rows(self) -> list[Row]:
        """The SanText rows to evaluate, in order: SanText, then SanText+ with the default split and (when
        ``w`` is given) the frequency split."""
        rows = []
        for m in (m for m in self.mechanisms if m in SANTEXT_MECHANISMS):
            rows.append(santext_row(m))
            if m == "santext+" and self.w is not None:
                rows.append(santext_row(m, self.w))
        return rows

    def _validate_dpbart(self) -> None:
        """Check the DP-BART options; take ``dpbart`` out of ``mechanisms``; fill in ``dpbart_epsilons``."""
        if DPBART in self.mechanisms:
            if not self.dpbart_bundle:
                raise ParameterError("mechanism 'dpbart' needs a DP-BART bundle (--dpbart-bundle)")
            self.mechanisms = [m for m in self.mechanisms if m != DPBART]
        if not self.dpbart_bundle:
            return
        if self.dpbart_epsilons is None:
            self.dpbart_epsilons = list(self.epsilons)
        if not self.dpbart_epsilons or any(not (e > 0 and math.isfinite(e)) for e in self.dpbart_epsilons):
            raise ParameterError("every DP-BART epsilon must be a positive finite number")
        self.dpbart_epsilons = normalize_epsilons(self.dpbart_epsilons)[0]
        if self.dpbart_mechanism not in DPBART_NOISE:
            raise ParameterError(f"unknown DP-BART mechanism {self.dpbart_mechanism!r} (choose from "
                                 f"{', '.join(DPBART_NOISE)})")
        if self.dpbart_mechanism == "gaussian" and not 0 < self.dpbart_delta < 1:
            raise ParameterError("the DP-BART delta must be in (0, 1)")
