"""Comparison mechanisms for the evaluation.

The baselines of Yue et al. 2021, *Differential Privacy for Text Analytics via Natural Text
Sanitization* (Findings of ACL), as presented in Yue 2023, *Data Synthesis: Boosting Utility and
Privacy in NLP* (PhD thesis, Ohio State), §2.5.2 and Table 2.1:

* **none** — the unsanitized text (the utility ceiling, the attack's ceiling);
* **random** — every token replaced by a token drawn uniformly from the output domain (the floor);
* **CMP / FBDD** — the calibrated multivariate perturbation of Feyisetan et al. 2020, *Privacy- and
  Utility-Preserving Textual Analysis via Calibrated Multivariate Perturbations* (WSDM): release the
  vocabulary token nearest (Euclidean) to φ(x) + z, where z ∈ R^m has density ∝ exp(−ε‖z‖). Such a z is
  a uniformly random direction times a length distributed Gamma(m, 1/ε) (shape m, scale 1/ε): in polar
  coordinates the density of the length r is ∝ r^{m−1} e^{−εr}.

These are evaluation baselines, not release mechanisms, but their randomness still comes from
:class:`ldptext.rng.Generator` (the SDK's CSPRNG), never from numpy's generators:

* uniforms in (0, 1]: 53 random bits k from the CSPRNG, u = (k + 1) / 2⁵³ (never 0, so log u is finite);
* Gamma(m, θ) for the integer shape m (the embedding dimension): the sum of m independent
  Exponential(θ) variables, each −θ·log u by inversion of its CDF — an exact construction for integer
  shape, no rejection step;
* the uniform direction: m standard normals (Box–Muller on pairs of uniforms), normalised.
(They are float64 computations on CSPRNG uniforms, so the low-order-bit caveat of Mironov 2012, *On
Significance of the Least Significant Bits for Differential Privacy* (CCS), applies;
they are only used to measure utility, never to release text.)
"""
from __future__ import annotations

from typing import Callable, Iterable

import numpy as np

from ldptext.rng import Generator

__all__ = [
    "uniform_open_closed",
    "standard_normal",
    "gamma_integer_shape",
    "cmp_noise",
    "random_replacement",
    "CMPMechanism",
]

_TWO53 = float(1 << 53)


def uniform_open_closed(gen: Generator, size: int) -> np.ndarray:
    """``size`` float64 uniforms on (0, 1] with 53 random bits each, from the CSPRNG.

    Parameters
    ----------
    gen : ldptext.rng.Generator
        Source of random bytes (8 per draw).
    size : int
        Number of draws.

    Returns
    -------
    numpy.ndarray, float64, shape (size,)
        Values ``(k + 1) / 2**53`` for 53-bit integers k: never 0, at most 1.
    """
    size = int(size)
    words = np.frombuffer(gen.random_bytes(8 * size), dtype="<u8")
    return ((words >> np.uint64(11)).astype(np.float64) + 1.0) / _TWO53


def standard_normal(gen: Generator, size: int) -> np.ndarray:
    """``size`` standard normal draws by the Box–Muller transform of CSPRNG uniforms.

    Parameters
    ----------
    gen : ldptext.rng.Generator
        Source of the uniforms (two per pair of draws).
    size : int
        Number of draws.

    Returns
    -------
    numpy.ndarray, float64, shape (size,)
        Independent N(0, 1) draws.
    """
    size = int(size)
    pairs = (size + 1) // 2
    u = uniform_open_closed(gen, 2 * pairs)
    radius = np.sqrt(-2.0 * np.log(u[:pairs]))      # u ∈ (0, 1]: log is finite
    angle = 2.0 * np.pi * u[pairs:]
    return np.concatenate([radius * np.cos(angle), radius * np.sin(angle)])[:size]


def gamma_integer_shape(gen: Generator, shape: int, scale: float, size: int) -> np.ndarray:
    """Gamma(shape, scale) draws for an integer shape, as sums of Exponential(scale) draws.

    Each of the ``shape`` exponentials is ``-scale·log u`` (inverse CDF on CSPRNG uniforms); the sum is
    exactly Gamma-distributed for an integer shape, with no rejection step.

    Parameters
    ----------
    gen : ldptext.rng.Generator
        Source of the uniforms (``shape`` per draw).
    shape : int
        Gamma shape, a positive integer.
    scale : float
        Gamma scale θ > 0 (mean ``shape · scale``).
    size : int
        Number of draws.

    Returns
    -------
    numpy.ndarray, float64, shape (size,)

    Raises
    ------
    ValueError
        When ``shape < 1`` or ``scale <= 0``.
    """
    shape = int(shape)
    if shape < 1:
        raise ValueError("shape must be a positive integer")
    if not scale > 0:
        raise ValueError("scale must be > 0")
    u = uniform_open_closed(gen, shape * int(size)).reshape(int(size), shape)
    return -scale * np.log(u).sum(axis=1)


def cmp_noise(gen: Generator, dim: int, epsilon: float, n: int) -> np.ndarray:
    """``n`` vectors in R^dim with density ∝ exp(−ε‖z‖): uniform direction × Gamma(dim, 1/ε) length.

    Parameters
    ----------
    gen : ldptext.rng.Generator
        Source of randomness.
    dim : int
        Dimension m of the embedding space.
    epsilon : float
        ε > 0 of CMP.
    n : int
        Number of vectors.

    Returns
    -------
    numpy.ndarray, float64, shape (n, dim)

    Raises
    ------
    ValueError
        When ``epsilon <= 0``.
    """
    if not epsilon > 0:
        raise ValueError("epsilon must be > 0")
    direction = standard_normal(gen, n * dim).reshape(n, dim)
    norms = np.linalg.norm(direction, axis=1, keepdims=True)
    norms[norms == 0] = 1.0  # probability zero; avoids a division by zero
    length = gamma_integer_shape(gen, dim, 1.0 / epsilon, n)
    return direction / norms * length[:, None]


def random_replacement(ids: np.ndarray, outputs: np.ndarray, gen: Generator) -> np.ndarray:
    """Replace every token by one drawn uniformly from ``outputs`` (exactly: Lemire's method).

    Parameters
    ----------
    ids : numpy.ndarray, integer, any shape
        Input token ids (only their shape is used: the output does not depend on them).
    outputs : numpy.ndarray, integer, shape (k,)
        The output domain.
    gen : ldptext.rng.Generator
        Source of randomness.

    Returns
    -------
    numpy.ndarray, int32, shape of ``ids``
        Independent uniform draws from ``outputs``.
    """
    ids = np.asarray(ids)
    outputs = np.asarray(outputs, dtype=np.int64)
    return outputs[gen.uniform_int(outputs.size, ids.size)].astype(np.int32).reshape(ids.shape)


class CMPMechanism:
    """FBDD / CMP (Feyisetan et al. 2020, WSDM; see the module docstring) over a fixed embedding table.

    The nearest neighbour is searched among all ``outputs`` (the original token included, as in FBDD),
    by ``argmax 2 e·q − ‖e‖²`` in float32 chunks (ties between distinct embeddings are measure-zero).

    Parameters
    ----------
    embeddings : numpy.ndarray, float, shape (V, m)
        The embedding table (the same array SanText uses, ``Sanitizer.embeddings``); kept as float32.
    outputs : numpy.ndarray, integer, shape (k,)
        The ids that may be released (special tokens excluded).
    epsilon : float
        ε > 0.
    chunk_size : int, default 2048
        Query rows per matrix product in :meth:`nearest`.

    Raises
    ------
    ValueError
        When ``epsilon <= 0``.
    """

    name = "cmp"

    def __init__(self, embeddings: np.ndarray, outputs: np.ndarray, epsilon: float,
                 chunk_size: int = 2048) -> None:
        if not epsilon > 0:
            raise ValueError("epsilon must be > 0")
        self.embeddings = np.asarray(embeddings, dtype=np.float32)
        self.outputs = np.asarray(outputs, dtype=np.int64)
        self.epsilon = float(epsilon)
        self.chunk_size = int(chunk_size)
        out_emb = self.embeddings[self.outputs].astype(np.float64)
        # augmented matrix [2e, -|e|²]: one product [q, 1]·[2e, -|e|²] = 2q·e − |e|² per pair, whose
        # argmax is the nearest e (|q|² is common to the row); no elementwise pass over the scores
        self._augmented = np.ascontiguousarray(
            np.hstack([2.0 * out_emb, -(out_emb ** 2).sum(axis=1, keepdims=True)]).T,
            dtype=np.float32)

    def nearest(self, points: np.ndarray, track: Callable[[Iterable[int]], Iterable[int]] | None = None) -> np.ndarray:
        """Vocabulary ids (from ``outputs``) nearest to each row of ``points``.

        Parameters
        ----------
        points : numpy.ndarray, float, shape (n, m)
            Query points (computed in float32).
        track : callable, optional
            Wraps the iterable of chunk starts (progress, e.g. :func:`.console.progress_iter`).

        Returns
        -------
        numpy.ndarray, int64, shape (n,)
            The output id whose embedding is nearest (Euclidean) to each point.
        """
        points = np.asarray(points, dtype=np.float32)
        res = np.empty(points.shape[0], dtype=np.int64)
        starts = range(0, points.shape[0], self.chunk_size)
        for s in (track(starts) if track else starts):
            q = points[s:s + self.chunk_size]
            q_aug = np.hstack([q, np.ones((q.shape[0], 1), dtype=np.float32)])
            res[s:s + q.shape[0]] = self.outputs[(q_aug @ self._augmented).argmax(axis=1)]
        return res

    def sample_ids(self, ids: np.ndarray, gen: Generator,
                   track: Callable[[Iterable[int]], Iterable[int]] | None = None) -> np.ndarray:
        """One perturbed-and-projected output per input id.

        Parameters
        ----------
        ids : numpy.ndarray, integer, any shape
            Input token ids.
        gen : ldptext.rng.Generator
            Source of the noise (drawn at once, so progress does not change the draw).
        track : callable, optional
            Progress over the chunks of the nearest-output search (:meth:`nearest`).

        Returns
        -------
        numpy.ndarray, int32, shape of ``ids``
            The output id nearest to ``embeddings[id] + z`` for a fresh noise vector z per token.
        """
        ids = np.asarray(ids, dtype=np.int64)
        flat = ids.ravel()
        noisy = self.embeddings[flat].astype(np.float64) + cmp_noise(
            gen, self.embeddings.shape[1], self.epsilon, flat.size)
        return self.nearest(noisy, track).astype(np.int32).reshape(ids.shape)
