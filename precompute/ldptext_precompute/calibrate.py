"""``ldptext calibrate``: choose the SanText / SanText+ ε that meets a privacy target, and say what it costs.

A metric ε is not comparable across embeddings (it multiplies a distance whose scale is the embedding's:
GloVe 6B-50d and MiniLM WordPiece need very different ε for the same protection, Yue 2023, *Data
Synthesis: Boosting Utility and Privacy in NLP* (PhD thesis, Ohio State), §2.5.3). This command fixes
the protection instead and searches ε for it. Targets, both computed **exactly** from the mechanism's
distribution (the SanText formula of :func:`.evaluation.mechanisms.santext_log_prob_rows` over the
bundle's int8 metric embedding, which the sampler realises to ≤ 1e-9; nothing is sampled):

* ``--max-attack-success t``: the success of the Bayes-optimal token-inversion attacker, who knows the
  mechanism and guesses ``argmax_x Pr[M(x)=y]·π(x)`` with the public ``wordfreq`` prior π
  (:mod:`.evaluation.attacks`, :func:`.evaluation.metrics.profile_mechanism`), averaged over input
  words drawn from that same public distribution: ``A(ε) = Σ_x π(x)·succ_ε(x)``;
* ``--max-verbatim-rate r``: the expected share of words released unchanged, ``R(ε) = Σ_x π(x)·Pr[M(x)=x]``
  (N_x of Yue 2023, §2.5.5, weighted by public frequency).

Both averages use a **public** word distribution, never the private data: a target computed from the data
would make ε itself depend on it. With ``--data`` a short ``ldptext evaluate`` run at the chosen ε reports
the accuracy to expect (and the attack success on the data's own tokens).

**Search.** R(ε) is non-decreasing in ε (for SanText, N_x = 1/Σ_y exp(−ε(d(x,y) − d(x,x))/2) with d(x,x) = 0
is increasing; SanText+'s non-sensitive words add the constant 1 − p). A(ε) usually increases too but
nothing guarantees it (the decoder changes with ε), so: the metric is evaluated on a doubling grid over
``--epsilon-range``, in increasing order, up to the first grid point above the target (no larger ε is
evaluated: the first crossing is the one chosen); that point brackets the crossing with the last one below,
and bisection (geometric, each midpoint rounded to a short decimal: 2.26, not 2.2627416997969525) narrows
the bracket to a relative width of ``rtol``; then the largest decimal of three significant digits in that
bracket that meets the target is chosen (a bisection over those decimals: two or three more evaluations),
so the chosen ε is always a point **where the metric was evaluated and met the target**, the float of its
decimal (2.53, not 2.5300000000000002). Every ε is printed as :func:`.epsilon.format_epsilon` writes it,
the shortest decimal of the float evaluated, so the ε printed is the ε evaluated, and ``ldptext evaluate
--epsilon`` with it builds the same bundle and draws the
same samples. Every decrease of the metric between evaluated points is reported (non-monotone). When the
smallest ε misses the target, nothing is chosen: its value is reported (SanText+ releases non-sensitive
words in the clear with probability 1 − p at every ε; lower p or make more words sensitive). A chosen ε
whose verbatim rate exceeds :data:`VERBATIM_WARNING` is flagged: the output is then nearly the input.

**Bundle family** (``--bundles``): bundles of one vocabulary, split and p at several ε (as ``ldptext
precompute santext`` writes them); each one's metrics are computed from its own tables and the largest ε
that meets the target is chosen among them.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Sequence

import numpy as np

from ldptext import registry
from ldptext.cli import EXIT_OK, EXIT_TARGET_UNMET
from ldptext.errors import ParameterError
from .epsilon import format_epsilon

__all__ = ["CalibrationDomain", "ExactMetrics", "Calibration", "exact_metrics", "calibrate", "calibrate_family",
           "register", "run", "METRICS", "VERBATIM_WARNING"]

#: The targets: command-line name -> attribute of :class:`ExactMetrics`.
METRICS = {"attack": "attack_success", "verbatim": "verbatim_rate"}
#: Verbatim rate above which the chosen ε is flagged as releasing nearly the input.
VERBATIM_WARNING = 0.9
#: Default search range of ε.
EPSILON_RANGE = (0.1, 64.0)


@dataclass(frozen=True)
class CalibrationDomain:
    """Everything the exact metrics of a SanText(+) configuration depend on besides ε.

    Attributes
    ----------
    mechanism : str
        ``santext`` or ``santext+``.
    p : float or None
        SanText+'s probability of sanitizing a non-sensitive word (None for SanText).
    embeddings : numpy.ndarray, float64, shape (V, m)
        The metric embedding (the bundle's int8 codes × scales).
    outputs : numpy.ndarray, int, shape (O,)
        The output domain.
    valid_input : numpy.ndarray, bool, shape (V,)
        The input domain.
    sensitive : numpy.ndarray, bool, shape (V,)
        V_S (every valid input for SanText).
    weights : numpy.ndarray, float64, shape (V,)
        The public word distribution π (normalised over the input domain): the attacker's prior and the
        weights of both averages.
    description : str
        What the domain was built from.
    split : str or None
        SanText+'s split (``function-words``, the default, or ``frequency:W``; :mod:`.evaluation.rows`);
        None for SanText or when unknown (a bundle). The advice of an unreachable target depends on it.
    """

    mechanism: str
    p: float | None
    embeddings: np.ndarray
    outputs: np.ndarray
    valid_input: np.ndarray
    sensitive: np.ndarray
    weights: np.ndarray
    description: str
    split: str | None = None

    @classmethod
    def from_embeddings(cls, embeddings: str, *, mechanism: str = "santext+", p: float | None = 0.3,
                        w: float | None = None, vocab_size: int | None = 20_000,
                        non_sensitive: str | None = None) -> CalibrationDomain:
        """The domain a bundle built with these arguments would have (``ldptext precompute santext``,
        ``ldptext evaluate``), without building it.

        Parameters
        ----------
        embeddings : str
            ``glove-6b-50d``, ``minilm-wordpiece`` or an embedding file.
        mechanism : str
            ``santext`` or ``santext+``.
        p : float or None
            SanText+'s p.
        w : float or None
            SanText+'s frequency split (the fraction w of least frequent words is sensitive); None (default):
            ``non_sensitive``.
        vocab_size : int or None
            Word-level vocabulary size.
        non_sensitive : str or None
            SanText+'s non-sensitive set when ``w`` is None (default: function words).

        Returns
        -------
        CalibrationDomain
        """
        from .evaluation.rows import DEFAULT_SPLIT, Row, frequency_split
        from .santext import build
        from .santext.embeddings import describe_vocabulary, load_embeddings

        if mechanism == "santext":
            p = w = non_sensitive = None
        build.check_parameters(1.0, mechanism, p, w)
        if non_sensitive is not None:
            w = None
        emb = load_embeddings(embeddings, vocab_size)
        domain = build.split_domain(emb, mechanism=mechanism, w=w, non_sensitive=non_sensitive)
        metric = build.dequantize(*build.quantize_int8(emb.vectors))
        row = Row(mechanism, (frequency_split(w) if w is not None else non_sensitive or DEFAULT_SPLIT)
                  if mechanism == "santext+" else None)
        params = f", p = {p:g}, non-sensitive = {domain.non_sensitive}" if mechanism == "santext+" else ""
        return cls.of(mechanism=mechanism, p=p, embeddings=metric, outputs=domain.outputs,
                      valid_input=emb.valid_input, sensitive=domain.sensitive, vocab=emb.vocab, split=row.split,
                      description=f"{row.label} over {embeddings} (vocabulary {describe_vocabulary(emb.vocab)}"
                                  f"{params})")

    @classmethod
    def from_bundle(cls, san) -> CalibrationDomain:
        """The domain of a loaded bundle (its own metric embedding, outputs and split).

        Parameters
        ----------
        san : ldptext.santext.Sanitizer

        Returns
        -------
        CalibrationDomain
        """
        from .santext.embeddings import describe_vocabulary

        return cls.of(mechanism=san.mechanism, p=san.p, embeddings=np.asarray(san.embeddings, np.float64),
                      outputs=np.asarray(san.outputs), valid_input=np.asarray(san.valid_input, bool),
                      sensitive=np.asarray(san.sensitive, bool), vocab=san.vocab,
                      description=f"{san.mechanism} bundle (vocabulary {describe_vocabulary(list(san.vocab))})")

    @classmethod
    def of(cls, *, mechanism: str, p: float | None, embeddings: np.ndarray, outputs: np.ndarray,
           valid_input: np.ndarray, sensitive: np.ndarray, vocab: Sequence[str], description: str,
           weights: np.ndarray | None = None, split: str | None = None) -> CalibrationDomain:
        """A domain from its parts; the weights default to the public ``wordfreq`` prior of ``vocab``.

        Parameters
        ----------
        mechanism, p, embeddings, outputs, valid_input, sensitive, description
            See the attributes.
        vocab : sequence of str
            The token of each id (for the ``wordfreq`` prior).
        weights : numpy.ndarray, optional
            Non-negative weights over ids instead of the prior (tests).
        split : str, optional
            SanText+'s split, when known.

        Returns
        -------
        CalibrationDomain
        """
        from .evaluation.attacks import wordfreq_prior

        valid = np.asarray(valid_input, bool)
        prior = wordfreq_prior(vocab, valid) if weights is None else np.asarray(weights, np.float64) * valid
        if not prior.sum() > 0:
            raise ParameterError("the public prior has no mass on the input domain")
        return cls(mechanism=mechanism, p=None if mechanism == "santext" else p,
                   embeddings=np.asarray(embeddings, np.float64), outputs=np.asarray(outputs, np.int64),
                   valid_input=valid, sensitive=np.asarray(sensitive, bool), weights=prior / prior.sum(),
                   description=description, split=split if mechanism == "santext+" else None)

    def rows(self, epsilon: float) -> Callable[[np.ndarray], np.ndarray]:
        """The exact log-probability rows at ``epsilon`` (:func:`.evaluation.mechanisms.santext_log_prob_rows`)."""
        from .evaluation.mechanisms import santext_log_prob_rows

        view = SimpleNamespace(embeddings=self.embeddings, outputs=self.outputs, epsilon=float(epsilon),
                               p=self.p, mechanism=self.mechanism, valid_input=self.valid_input,
                               sensitive=self.sensitive)
        return santext_log_prob_rows(view)


@dataclass(frozen=True)
class ExactMetrics:
    """The two calibration targets at one ε, exact.

    Attributes
    ----------
    epsilon : float
    attack_success : float
        ``Σ_x π(x)·succ(x)``: expected success of the Bayes-optimal inversion attack with prior π on a
        word drawn from π.
    verbatim_rate : float
        ``Σ_x π(x)·Pr[M(x)=x]``.
    """

    epsilon: float
    attack_success: float
    verbatim_rate: float


def exact_metrics(domain: CalibrationDomain, epsilon: float, *, chunk_size: int = 256,
                  threads: int | None = None) -> ExactMetrics:
    """Exact attack success and verbatim rate of a domain at one ε (one pass over every input row).

    The Bayes decoder is that of :func:`.evaluation.metrics.profile_mechanism` (``x̂(y) = argmax_x
    log Pr[M(x)=y] + log π(x)``, the earliest input on ties), computed here without the entropies and
    with chunks of rows spread over threads (numpy releases the GIL in its array operations).

    Parameters
    ----------
    domain : CalibrationDomain
    epsilon : float
        ε > 0.
    chunk_size : int, default 256
        Rows per chunk.
    threads : int, optional
        Worker threads (default: the CPU count, at most 4).

    Returns
    -------
    ExactMetrics
    """
    from concurrent.futures import ThreadPoolExecutor

    rows_fn = domain.rows(epsilon)
    inputs = np.flatnonzero(domain.valid_input).astype(np.int64)
    v = domain.valid_input.size
    with np.errstate(divide="ignore"):
        log_prior = np.log(domain.weights)

    def chunk(start: int):
        xs = inputs[start:start + chunk_size]
        lp = rows_fn(xs)
        n_x = np.exp(lp[np.arange(xs.size), xs])
        score = lp + log_prior[xs, None]
        arg = score.argmax(axis=0)
        cols = np.arange(v)
        return n_x, score[arg, cols], xs[arg], lp[arg, cols]

    n_x = np.empty(inputs.size)
    best_score = np.full(v, -np.inf)
    best_input = np.full(v, -1, dtype=np.int64)
    best_logp = np.full(v, -np.inf)
    starts = range(0, inputs.size, chunk_size)
    workers = threads or min(4, os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for start, (nx, top, who, logp) in zip(starts, pool.map(chunk, starts)):   # in order: ties -> earliest
            n_x[start:start + nx.size] = nx
            better = top > best_score
            best_score[better], best_input[better], best_logp[better] = top[better], who[better], logp[better]
    reachable = (best_input >= 0) & np.isfinite(best_logp)
    succ = np.bincount(best_input[reachable], weights=np.exp(best_logp[reachable]), minlength=v)
    w = domain.weights[inputs]
    return ExactMetrics(epsilon=float(epsilon), attack_success=float(np.dot(w, succ[inputs])),
                        verbatim_rate=float(np.dot(w, n_x)))


@dataclass
class Calibration:
    """The outcome of a search.

    Attributes
    ----------
    metric : str
        ``attack`` or ``verbatim`` (:data:`METRICS`).
    target : float
        The largest acceptable value.
    epsilon : float or None
        The chosen ε (None when no searched ε meets the target).
    achieved : ExactMetrics or None
        Both metrics at the chosen ε.
    evaluated : list of ExactMetrics
        Every ε evaluated, ascending.
    monotone : bool
        Whether the metric never decreased between evaluated points.
    notes : list of str
        What the user must know (unreachable target, non-monotone, output ≈ input).
    domain : str
        What was calibrated.
    expected_utility : dict or None
        From ``--data``: accuracies at the chosen ε and unsanitized.
    bundle : str or None
        The chosen bundle of a family (:func:`calibrate_family`).
    family : dict of float to str or None
        A family's bundle of each ε (:func:`calibrate_family`).
    """

    metric: str
    target: float
    epsilon: float | None
    achieved: ExactMetrics | None
    evaluated: list[ExactMetrics]
    monotone: bool
    notes: list[str] = field(default_factory=list)
    domain: str = ""
    expected_utility: dict | None = None
    bundle: str | None = None
    family: dict[float, str] | None = None

    def value(self, m: ExactMetrics) -> float:
        """The target metric of one evaluation."""
        return getattr(m, METRICS[self.metric])

    def to_dict(self) -> dict:
        """A JSON-able record (``--json``)."""
        return {"metric": self.metric, "target": self.target, "epsilon": self.epsilon,
                "achieved": None if self.achieved is None else asdict(self.achieved),
                "evaluated": [asdict(m) for m in self.evaluated], "monotone": self.monotone,
                "notes": self.notes, "domain": self.domain, "bundle": self.bundle,
                "family": (None if self.family is None
                           else {format_epsilon(e): p for e, p in sorted(self.family.items())}),
                "expected_utility": self.expected_utility}


def _round_down(x: float, digits: int = 3) -> float:
    """``x`` rounded down to ``digits`` significant digits: the float of that decimal (``2.53``, exactly
    what ``float("2.53")`` is), so the ε printed, evaluated and used later is one number."""
    if x <= 0:
        return x
    exponent = math.floor(math.log10(x)) - digits + 1
    return float(f"{math.floor(x / 10.0 ** exponent + 1e-9)}e{exponent}")


def _short_decimal_between(good: float, bad: float) -> float:
    """The next point of the bisection of ``[good, bad]``: the geometric midpoint rounded to the fewest
    significant digits (at least 3) that keep it in the middle half of the bracket (log scale), as the float
    of that decimal. So the ε evaluated, printed (:func:`.epsilon.format_epsilon`) and usable with
    ``ldptext evaluate --epsilon`` is a short decimal (``2.26``, not ``2.2627416997969525``), and every
    step still shrinks the bracket by at least a quarter (log scale)."""
    mid = math.sqrt(good * bad)
    lo, hi = good * (bad / good) ** 0.25, good * (bad / good) ** 0.75
    for digits in range(3, 18):
        short = float(f"{mid:.{digits - 1}e}")
        if lo <= short <= hi and good < short < bad:
            return short
    return mid


def _three_digit_points(start: float, stop: float) -> list[float]:
    """The decimals of three significant digits from ``start`` (one of them) up to, not including, ``stop``,
    ascending, each the float of its decimal."""
    points = []
    x = start
    while x < stop and len(points) < 100_000:
        points.append(x)
        exponent = math.floor(math.log10(x)) - 2
        x = float(f"{round(x / 10.0 ** exponent) + 1}e{exponent}")
    return points


def calibrate(domain: CalibrationDomain, *, metric: str, target: float,
              epsilon_range: tuple[float, float] = EPSILON_RANGE, rtol: float = 0.01,
              progress: bool = False, evaluate: Callable[[float], ExactMetrics] | None = None) -> Calibration:
    """Search the largest ε at the first crossing of ``target`` (see the module docstring).

    Parameters
    ----------
    domain : CalibrationDomain
        What is calibrated.
    metric : str
        ``attack`` or ``verbatim``.
    target : float
        Largest acceptable value of the metric, in (0, 1].
    epsilon_range : (float, float)
        Smallest and largest ε searched (0 < lo < hi).
    rtol : float, default 0.01
        Relative width of the final bracket.
    progress : bool
        One line per evaluation on stderr.
    evaluate : callable, optional
        ``ε -> ExactMetrics`` (default :func:`exact_metrics` on ``domain``).

    Returns
    -------
    Calibration

    Raises
    ------
    ParameterError
        On an unknown metric, a target outside (0, 1] or an invalid range.
    """
    if metric not in METRICS:
        raise ParameterError(f"metric must be one of {', '.join(METRICS)}")
    if not 0 < target <= 1:
        raise ParameterError("the target must be in (0, 1]")
    lo, hi = (float(x) for x in epsilon_range)
    if not (0 < lo < hi and math.isfinite(hi)):
        raise ParameterError("the epsilon range must satisfy 0 < lo < hi < inf")
    evaluate = evaluate or (lambda e: exact_metrics(domain, e))
    cache: dict[float, ExactMetrics] = {}

    def at(eps: float) -> ExactMetrics:
        if eps not in cache:
            cache[eps] = evaluate(eps)
            if progress:
                m = cache[eps]
                print(f"[calibrate] eps={format_epsilon(eps)}: attack success {m.attack_success:.4f}, verbatim "
                      f"rate {m.verbatim_rate:.4f}", file=sys.stderr)
        return cache[eps]

    def value(eps: float) -> float:
        return getattr(at(eps), METRICS[metric])

    n = max(1, math.ceil(math.log2(hi / lo) - 1e-9))
    grid = sorted({lo * 2.0 ** i for i in range(n)} | {hi})
    result = Calibration(metric=metric, target=target, epsilon=None, achieved=None, evaluated=[], monotone=True,
                         domain=domain.description)
    met = []
    for e in grid:           # increasing; stop at the first miss: no larger epsilon is evaluated
        met.append(value(e) <= target)
        if not met[-1]:
            break
    if not met[0]:
        result.notes.append(
            f"the smallest epsilon searched, {format_epsilon(lo)}, does not meet {metric} <= {target:g}: its value is "
            f"{value(lo):.4f}; " + _unreachable_advice(domain))
    else:
        first_miss = next((i for i, ok in enumerate(met) if not ok), None)
        if first_miss is None:
            chosen = hi
            result.notes.append(f"the target holds over the whole range: epsilon {format_epsilon(hi)} is the largest "
                                f"searched (--epsilon-range to search further)")
        else:
            good, bad = grid[first_miss - 1], grid[first_miss]
            while bad / good > 1 + rtol:
                mid = _short_decimal_between(good, bad)
                good, bad = (mid, bad) if value(mid) <= target else (good, mid)
            chosen = good
            # the largest three-digit decimal in the last bracket that meets the target (bisection over them)
            points = [p for p in _three_digit_points(_round_down(good), bad) if p >= lo]
            first, last = 0, len(points) - 1
            while first <= last:
                mid_i = (first + last) // 2
                if value(points[mid_i]) <= target:
                    chosen, first = points[mid_i], mid_i + 1
                else:
                    last = mid_i - 1
        result.epsilon, result.achieved = chosen, at(chosen)
    result.evaluated = [cache[e] for e in sorted(cache)]
    values = [value(m.epsilon) for m in result.evaluated]
    drops = [(a.epsilon, b.epsilon) for a, b, va, vb in zip(result.evaluated, result.evaluated[1:], values, values[1:])
             if vb < va - 1e-12]
    if drops:
        result.monotone = False
        result.notes.append("non-monotone: the metric decreases between epsilon " +
                            "; ".join(f"{format_epsilon(a)} and {format_epsilon(b)}" for a, b in drops))
    _verbatim_note(result)
    return result


def _unreachable_advice(domain: CalibrationDomain) -> str:
    """What to change when even the smallest ε misses the target: for SanText+, what its split allows."""
    from .evaluation.rows import DEFAULT_SPLIT

    if domain.mechanism != "santext+":
        return "lower the range or relax the target"
    floor = "SanText+ releases its non-sensitive words in the clear with probability 1 - p at every epsilon: "
    if domain.split == DEFAULT_SPLIT:      # a fixed word list: no fraction to raise
        return (floor + "the default split's non-sensitive words are the function words and punctuation, a fixed "
                "list; lower p, or use SanText (--mechanism santext), which sanitizes every word")
    if domain.split and domain.split.startswith("frequency:"):
        return floor + "lower p or raise w (more words sensitive), or use SanText (--mechanism santext)"
    return floor + "lower p or make more words sensitive, or use SanText"


def _verbatim_note(result: Calibration) -> None:
    """Flag a chosen ε whose output is nearly its input."""
    if result.achieved is not None and result.achieved.verbatim_rate > VERBATIM_WARNING:
        result.notes.append(
            f"warning: at epsilon {format_epsilon(result.epsilon)} a word is released unchanged with probability "
            f"{result.achieved.verbatim_rate:.3f} (public-frequency average): the output is nearly the input")


def calibrate_family(paths: Sequence[str | Path], *, metric: str, target: float,
                     progress: bool = False, trusted_keys: Sequence[Any] | None = None,
                     allow_unsigned: bool = False) -> Calibration:
    """The largest-ε bundle of a family that meets the target (exact metrics of each bundle).

    Parameters
    ----------
    paths : sequence of path
        SanText(+) bundles of one vocabulary, metric embedding, split and p, verified as a runtime
        verifies them: the chosen ε is only as trustworthy as the tables it was computed from.
    metric : str
        ``attack`` or ``verbatim``.
    target : float
        Largest acceptable value, in (0, 1].
    progress : bool
        One line per bundle on stderr.
    trusted_keys : sequence or None
        Keys to trust (``None``: the local trust store).
    allow_unsigned : bool
        Accept unsigned development bundles, with the runtime's ``UnsignedBundleWarning``.

    Returns
    -------
    Calibration
        ``epsilon`` is the chosen bundle's ε; ``domain`` names its file.

    Raises
    ------
    ParameterError
        On an empty list, a bad target, or bundles that are not one family.
    SignatureError
        An unsigned bundle (without ``allow_unsigned``) or one not signed by a trusted key.
    """
    from ldptext.santext import Sanitizer

    if metric not in METRICS:
        raise ParameterError(f"metric must be one of {', '.join(METRICS)}")
    if not 0 < target <= 1:
        raise ParameterError("the target must be in (0, 1]")
    if not paths:
        raise ParameterError("no bundle given")
    rows = []
    reference = None
    for path in paths:
        # verified like any runtime load: an unsigned bundle is refused unless allowed, and then warns
        # a family spans ε on purpose: a near-identity member is measured (and flagged), not refused
        san = Sanitizer.load(path, trusted_keys=trusted_keys, allow_unsigned=allow_unsigned,
                             allow_weak_privacy=True)
        domain = CalibrationDomain.from_bundle(san)
        signature = (domain.mechanism, domain.p, domain.embeddings.shape, domain.outputs.tobytes(),
                     domain.sensitive.tobytes(), domain.embeddings.tobytes())
        if reference is None:
            reference = signature
        elif signature != reference:
            raise ParameterError(f"{path} is not of the same family as {paths[0]} (mechanism, p, vocabulary, "
                                 f"embedding and split must agree; only epsilon may differ)")
        m = exact_metrics(domain, san.epsilon)
        if progress:
            print(f"[calibrate] {path}: eps={format_epsilon(san.epsilon)}, attack success {m.attack_success:.4f}, "
                  f"verbatim rate {m.verbatim_rate:.4f}", file=sys.stderr)
        rows.append((m, str(path)))
        san.close()
    rows.sort(key=lambda r: r[0].epsilon)
    result = Calibration(metric=metric, target=target, epsilon=None, achieved=None,
                         evaluated=[m for m, _ in rows], monotone=True, domain=domain.description,
                         family={m.epsilon: p for m, p in rows})
    values = [result.value(m) for m, _ in rows]
    result.monotone = all(b >= a - 1e-12 for a, b in zip(values, values[1:]))
    if not result.monotone:
        result.notes.append("non-monotone across the family: a larger epsilon has a smaller metric")
    ok = [(m, p) for (m, p), v in zip(rows, values) if v <= target]
    if not ok:
        best = min(rows, key=lambda r: result.value(r[0]))
        result.notes.append(f"no bundle meets {metric} <= {target:g}: the smallest value is "
                            f"{result.value(best[0]):.4f} ({best[1]})")
    else:
        m, path = ok[-1]
        result.epsilon, result.achieved, result.bundle = m.epsilon, m, path
        result.domain = f"{result.domain}: {path}"
    _verbatim_note(result)
    return result


# -- expected utility -------------------------------------------------------------------------------

def neighbouring_epsilons(result: Calibration) -> list[float]:
    """The ε of the accuracy interval: the nearest evaluated ε below the chosen one, the chosen one, and the
    nearest evaluated above it (the search's own points, so the bracket of its last step; either is missing
    at an end of the search). For a bundle family: the neighbouring bundles' ε."""
    chosen = result.epsilon
    evaluated = sorted({m.epsilon for m in result.evaluated})
    below = [e for e in evaluated if e < chosen]
    above = [e for e in evaluated if e > chosen]
    return below[-1:] + [chosen] + above[:1]


#: How the interval of the expected accuracy is computed (printed with it and stored in the JSON).
INTERVAL_RULE = ("from the lowest (mean - std) to the highest (mean + std) over the chosen epsilon and the "
                 "nearest epsilon evaluated below and above it (std: the sample std over seeds, 0 with one seed); "
                 "wide where accuracy changes fast with epsilon")


def _accuracy_interval(per_epsilon: dict[float, dict], chosen: float) -> dict:
    """One classifier's expected accuracy from its ``{ε: {"mean", "std", "original"}}``: the chosen ε's
    mean (trained and tested on sanitized text) and original-test accuracy, the interval
    (:data:`INTERVAL_RULE`) and the mean at each ε."""
    lo = min(v["mean"] - v["std"] for v in per_epsilon.values())
    hi = max(v["mean"] + v["std"] for v in per_epsilon.values())
    at = per_epsilon[chosen]
    return {"accuracy_sanitized_test": at["mean"], "accuracy_original_test": at["original"], "std": at["std"],
            "interval": [max(0.0, lo), min(1.0, hi)],
            "by_epsilon": {format_epsilon(e): v["mean"] for e, v in sorted(per_epsilon.items())}}


def _expected_utility_from_embeddings(args, result: Calibration) -> dict:
    """A short ``ldptext evaluate`` run at the chosen ε, its evaluated neighbours
    (:func:`neighbouring_epsilons`) and unsanitized: the accuracies, with an interval."""
    from .evaluation.rows import santext_row
    from .evaluation.runner import EvaluationConfig, command_line, evaluate

    epsilons = neighbouring_epsilons(result)
    cfg = EvaluationConfig(out=args.out, data=args.data, text_col=args.text_col, label_col=args.label_col,
                           test=args.test, mechanisms=[args.mechanism], embeddings=args.embeddings,
                           vocab_size=args.vocab_size or None, epsilons=epsilons, p=args.p, w=args.w,
                           baselines=["none"], classifiers=args.classifier, seeds=args.seeds,
                           max_train=args.max_train, max_test=args.max_test, cache_dir=args.cache_dir,
                           progress=not args.quiet, command=command_line())
    results = evaluate(cfg)
    out: dict[str, Any] = {"data": args.data, "out": args.out, "seeds": args.seeds, "unsanitized": {},
                           "sanitized": {}, "interval_rule": INTERVAL_RULE}
    calibrated = santext_row(args.mechanism, args.w).key
    per: dict[str, dict[float, dict]] = {}
    for e in results["entries"]:
        if e["mechanism"] == "none":
            out["unsanitized"] = {name: {"accuracy_sanitized_test": c["sanitized_test"]["accuracy"]["mean"],
                                         "accuracy_original_test": c["original_test"]["accuracy"]["mean"]}
                                  for name, c in e["utility"]["classifiers"].items()}
        elif e.get("row") == calibrated:
            for name, c in e["utility"]["classifiers"].items():
                acc = c["sanitized_test"]["accuracy"]
                per.setdefault(name, {})[e["epsilon"]] = {"mean": acc["mean"], "std": acc["std"],
                                                          "original": c["original_test"]["accuracy"]["mean"]}
            if e["epsilon"] == result.epsilon:
                out["attack_success_on_data"] = e["privacy"]["attack"]["exact_success_rate_dataset"]
    out["sanitized"] = {name: _accuracy_interval(by_eps, result.epsilon) for name, by_eps in per.items()}
    out["majority_rate"] = results["dataset"]["majority_rate_test"]
    return out


def _expected_utility_from_bundle(args, result: Calibration) -> dict:
    """Accuracy of the chosen bundle on the data: sanitize train and test text with it (seeded), train the
    classifier on the sanitized training text, score on sanitized and original test text; the same for the
    neighbouring bundles of the family (:func:`neighbouring_epsilons`), for the interval; and unsanitized.
    """
    from ldptext.santext import Sanitizer
    from .evaluation.datasets import load_dataset
    from .evaluation.sweep import Corpus
    from .evaluation.utility import classifier_settings, fit_and_score

    ds = load_dataset(args.data, text_col=args.text_col, label_col=args.label_col, test=args.test,
                      max_train=args.max_train, max_test=args.max_test)
    out: dict[str, Any] = {"data": args.data, "seeds": args.seeds, "sanitized": {}, "unsanitized": {},
                           "majority_rate": ds.majority_rate(), "interval_rule": INTERVAL_RULE}
    paths = {e: result.family[e] for e in neighbouring_epsilons(result)}
    for name in args.classifier:
        settings = classifier_settings(name)
        raw = fit_and_score(ds.train_texts, ds.train_labels, {"t": ds.test_texts}, ds.test_labels, settings=settings)
        out["unsanitized"][name] = {"accuracy_sanitized_test": raw.scores["t"]["accuracy"],
                                    "accuracy_original_test": raw.scores["t"]["accuracy"]}
        per_epsilon = {}
        for eps, path in paths.items():
            san_acc, orig_acc = [], []
            for seed in range(args.seeds):
                with warnings.catch_warnings():
                    # seeded on purpose (a reproducible estimate); the bundle was verified and any unsigned
                    # warning shown when calibrate_family loaded it
                    warnings.simplefilter("ignore")
                    san = Sanitizer.load(path, trusted_keys=args.trusted_key, allow_unsigned=args.allow_unsigned,
                                         seed=seed, allow_weak_privacy=True)
                corpus = Corpus(ds, san)
                train_txt, test_txt = corpus.decode(san.sample_ids(corpus.flat).astype(np.int64))
                run = fit_and_score(train_txt, ds.train_labels, {"s": test_txt, "o": ds.test_texts},
                                    ds.test_labels, seed=seed, settings=settings)
                san_acc.append(run.scores["s"]["accuracy"])
                orig_acc.append(run.scores["o"]["accuracy"])
                san.close()
            per_epsilon[eps] = {"mean": float(np.mean(san_acc)), "original": float(np.mean(orig_acc)),
                                "std": float(np.std(san_acc, ddof=1)) if len(san_acc) > 1 else 0.0}
        out["sanitized"][name] = _accuracy_interval(per_epsilon, result.epsilon)
    return out


# -- command line -----------------------------------------------------------------------------------

def _split_w(text: str) -> float | None:
    """``--non-sensitive``: the ``w`` of ``frequency:W``; None for ``function-words`` (the default split)."""
    from .evaluation.rows import split_w

    try:
        return split_w(text)
    except ParameterError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _range(text: str) -> tuple[float, float]:
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError("expected LO,HI") from None
    return lo, hi


def register(sub) -> None:
    """Add the ``calibrate`` sub-command.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        The ``ldptext`` parser's sub-command registry.
    """
    p = sub.add_parser(
        "calibrate", help="choose the SanText(+) epsilon that meets a privacy target",
        description="Search epsilon so that the exact Bayes inversion success (public wordfreq prior) or "
                    "the expected verbatim-release rate, both averaged over public word frequencies, stays "
                    "at or below a target; print the chosen epsilon, the metrics it achieves and, with "
                    "--data, the accuracy to expect. Exit status 9 when no epsilon meets the target.")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--embeddings", default="glove-6b-50d",
                     help="glove-6b-50d (default) | minilm-wordpiece | PATH: calibrate the bundles these "
                          "would give")
    src.add_argument("--bundles", nargs="+", metavar="BUNDLE",
                     help="an existing family of bundles (one vocabulary, split and p; several epsilon): "
                          "choose among them (verified: signed by a trusted key)")
    p.add_argument("--trusted-key", action="append", default=None, metavar="PUB",
                   help="with --bundles: public key to trust (repeatable); default: the local trust store")
    p.add_argument("--allow-unsigned", action="store_true",
                   help="with --bundles: accept unsigned development bundles (with a warning)")
    p.add_argument("--mechanism", choices=registry.names(family="santext"), default="santext+",
                   help="with --embeddings: santext or santext+ (default)")
    p.add_argument("--p", type=float, default=0.3, help="SanText+ p (default 0.3)")
    split = p.add_mutually_exclusive_group()
    split.add_argument("--w", type=float, default=None,
                       help="SanText+: calibrate the paper's frequency split instead (the fraction w of least "
                            "frequent words is sensitive; the paper uses 0.9). Default: the default split, what "
                            "ldptext precompute santext builds (function words non-sensitive)")
    split.add_argument("--non-sensitive", type=_split_w, default=None, dest="non_sensitive", metavar="SPLIT",
                       help="SanText+: 'function-words' (the default split) or 'frequency:W' (= --w W)")
    p.add_argument("--vocab-size", type=int, default=20_000,
                   help="word-level vocabulary size (default 20000, as ldptext evaluate; 0 = the embeddings' "
                        "default)")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--max-attack-success", type=float, metavar="T",
                        help="largest acceptable exact Bayes inversion success (e.g. 0.1)")
    target.add_argument("--max-verbatim-rate", type=float, metavar="R",
                        help="largest acceptable expected Pr[M(x)=x] over public word frequencies")
    p.add_argument("--epsilon-range", type=_range, default=EPSILON_RANGE, metavar="LO,HI",
                   help=f"epsilon searched (default {EPSILON_RANGE[0]:g},{EPSILON_RANGE[1]:g})")
    p.add_argument("--rtol", type=float, default=0.01, help="relative precision of the search (0.01)")
    p.add_argument("--data", default=None,
                   help="labelled data (FILE.csv | FILE.tsv | FILE.jsonl | rotten-tomatoes): report the accuracy "
                        "to expect at the chosen epsilon, with an interval over the nearest epsilon evaluated "
                        "below and above it and the seed spread (a short evaluate run, written to --out)")
    p.add_argument("--text-col", default="text", help="text column of --data (default text)")
    p.add_argument("--label-col", default="label", help="label column of --data (default label)")
    p.add_argument("--test", default=None, help="separate test file for --data")
    p.add_argument("--classifier", default=["tfidf"],
                   type=lambda t: ["tfidf", "minilm"] if t == "both" else [x for x in t.split(",") if x],
                   help="utility classifier for --data: tfidf (default), minilm, finetune (fine-tuned "
                        "all-MiniLM-L6-v2; minutes per run on a CPU), both (= tfidf,minilm) or a comma list")
    p.add_argument("--seeds", type=int, default=1, help="repetitions of the utility run (1)")
    p.add_argument("--max-train", type=int, default=None, help="use at most N training documents")
    p.add_argument("--max-test", type=int, default=None, help="use at most N test documents")
    p.add_argument("--out", default=None,
                   help="output directory of the evaluate run of --data (required with --data and --embeddings; "
                        "no default, so nothing is written into the current folder unasked)")
    p.add_argument("--cache-dir", default=None, help="bundle cache of the evaluate run")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the result as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=run)


def run(args) -> int:
    """Run the search described by the parsed options and print the outcome.

    Parameters
    ----------
    args : argparse.Namespace
        Options of :func:`register`'s parser.

    Returns
    -------
    int
        0 when an ε was chosen, 9 (``ldptext.cli.EXIT_TARGET_UNMET``) when none meets the target.

    Raises
    ------
    ParameterError
        On invalid options.
    """
    metric, target = (("attack", args.max_attack_success) if args.max_attack_success is not None
                      else ("verbatim", args.max_verbatim_rate))
    from .evaluation.utility import CLASSIFIERS
    if any(c not in CLASSIFIERS for c in args.classifier):
        raise ParameterError(f"--classifier: choose from {', '.join(CLASSIFIERS)} or both")
    if not args.bundles and (args.trusted_key or args.allow_unsigned):
        raise ParameterError("--trusted-key and --allow-unsigned apply to --bundles")
    if args.data and not args.bundles and not args.out:
        raise ParameterError("--data needs --out: the directory the evaluate run at the chosen epsilon writes to")
    if args.w is None:
        args.w = args.non_sensitive
    try:
        return _run(args, metric, target)
    except KeyboardInterrupt:   # Ctrl-C: say what is kept and how to resume, then exit 130 (ldptext.cli)
        print(_interrupted_message(args), file=sys.stderr)
        raise


def _interrupted_message(args) -> str:
    """What an interrupted calibration prints: the search keeps nothing; the utility run of ``--data`` keeps
    its finished stages in ``--out``; the exact command that resumes."""
    from .evaluation.console import kept_checkpoints, resume_command

    command = resume_command("calibrate")
    kept = kept_checkpoints(args.out) if args.out and args.data and not args.bundles else {}
    if not kept:
        return ("ldptext: interrupted: nothing is kept (the exact search is held in memory and takes seconds to "
                f"minutes); the same command starts again:\n  {command}")
    stages = ", ".join(f"{n} {stage}" for stage, n in sorted(kept.items()))
    return (f"ldptext: interrupted: the exact search keeps nothing (it is redone, seconds to minutes); the "
            f"evaluate run of --data keeps every finished stage in {args.out}/checkpoints ({stages} checkpoint "
            f"file(s)). To resume, run the same command again; it recomputes only what is missing:\n  {command}")


def _run(args, metric: str, target: float) -> int:
    """:func:`run` after the options are checked."""
    if args.bundles:
        result = calibrate_family(args.bundles, metric=metric, target=target, progress=not args.quiet,
                                  trusted_keys=args.trusted_key, allow_unsigned=args.allow_unsigned)
    else:
        domain = CalibrationDomain.from_embeddings(args.embeddings, mechanism=args.mechanism, p=args.p,
                                                   w=args.w, vocab_size=args.vocab_size or None)
        result = calibrate(domain, metric=metric, target=target, epsilon_range=args.epsilon_range,
                           rtol=args.rtol, progress=not args.quiet)
    if result.epsilon is not None and args.data:
        if args.bundles:
            result.expected_utility = _expected_utility_from_bundle(args, result)
        else:
            result.expected_utility = _expected_utility_from_embeddings(args, result)
    _print(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    return EXIT_OK if result.epsilon is not None else EXIT_TARGET_UNMET


def _print(result: Calibration) -> None:
    """The outcome, a few lines on stdout."""
    name = {"attack": "exact Bayes inversion success", "verbatim": "expected verbatim-release rate"}[result.metric]
    print(f"calibrated: {result.domain}")
    print(f"target: {name} <= {result.target:g} (averaged over public wordfreq word frequencies)")
    if result.epsilon is None:
        print("chosen epsilon: none")
    else:
        a = result.achieved
        print(f"chosen epsilon: {format_epsilon(result.epsilon)}")
        print(f"  attack success {a.attack_success:.4f}, verbatim rate {a.verbatim_rate:.4f} (exact)")
    u = result.expected_utility
    if u:
        for name, acc in u["sanitized"].items():
            raw = u["unsanitized"].get(name, {})
            lo, hi = acc.get("interval") or (acc["accuracy_sanitized_test"],) * 2
            print(f"  expected accuracy ({name}, {u['seeds']} seed(s)): {acc['accuracy_sanitized_test']:.4f} "
                  f"[{lo:.4f}, {hi:.4f}] trained and tested on sanitized text, {acc['accuracy_original_test']:.4f} "
                  f"tested on original text; unsanitized {raw.get('accuracy_sanitized_test', float('nan')):.4f}; "
                  f"majority class {u['majority_rate']:.4f}")
            if acc.get("by_epsilon"):
                print("    at eps=" + ", eps=".join(f"{e}: {v:.4f}" for e, v in acc["by_epsilon"].items()))
        if u.get("interval_rule"):
            print(f"  interval: {u['interval_rule']}")
        if u.get("attack_success_on_data") is not None:
            print(f"  exact attack success on the data's own tokens: {u['attack_success_on_data']:.4f}")
        if u.get("out"):
            print(f"  evaluation written to {u['out']}/report.md")
    for note in result.notes:
        print(f"note: {note}")
