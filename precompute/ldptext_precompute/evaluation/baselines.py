"""Comparison mechanisms for the evaluation (SPEC §6; seed 000 §2.5.2, Table 2.1).

* **none** — the unsanitized text (the utility ceiling, the attack's ceiling);
* **random** — every token replaced by a token drawn uniformly from the output domain (the floor);
* **CMP / FBDD** — the calibrated multivariate perturbation of Feyisetan et al. 2020: release the
  vocabulary token nearest (Euclidean) to φ(x) + z, where z ∈ R^m has density ∝ exp(−ε‖z‖). Such a z is
  a uniformly random direction times a length distributed Gamma(m, 1/ε) (shape m, scale 1/ε): in polar
  coordinates the density of the length r is ∝ r^{m−1} e^{−εr}.

These are evaluation baselines, not release mechanisms, but their randomness still comes from
:class:`ldptext.rng.Generator` (SPEC §4), never from numpy's generators:

* uniforms in (0, 1]: 53 random bits k from the CSPRNG, u = (k + 1) / 2⁵³ (never 0, so log u is finite);
* Gamma(m, θ) for the integer shape m (the embedding dimension): the sum of m independent
  Exponential(θ) variables, each −θ·log u by inversion of its CDF — an exact construction for integer
  shape, no rejection step;
* the uniform direction: m standard normals (Box–Muller on pairs of uniforms), normalised.
(They are float64 computations on CSPRNG uniforms, so the low-order-bit caveat of Mironov 2012 applies;
they are only used to measure utility, never to release text.)
"""
from __future__ import annotations

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
    """``size`` float64 uniforms on (0, 1] with 53 random bits each, from the CSPRNG."""
    size = int(size)
    words = np.frombuffer(gen.random_bytes(8 * size), dtype="<u8")
    return ((words >> np.uint64(11)).astype(np.float64) + 1.0) / _TWO53


def standard_normal(gen: Generator, size: int) -> np.ndarray:
    """``size`` standard normal draws by the Box–Muller transform of CSPRNG uniforms."""
    size = int(size)
    pairs = (size + 1) // 2
    u = uniform_open_closed(gen, 2 * pairs)
    radius = np.sqrt(-2.0 * np.log(u[:pairs]))      # u ∈ (0, 1]: log is finite
    angle = 2.0 * np.pi * u[pairs:]
    return np.concatenate([radius * np.cos(angle), radius * np.sin(angle)])[:size]


def gamma_integer_shape(gen: Generator, shape: int, scale: float, size: int) -> np.ndarray:
    """Gamma(shape, scale) draws for an integer shape: Σ of ``shape`` Exponential(scale) draws,
    each ``-scale·log u`` (inverse CDF on CSPRNG uniforms)."""
    shape = int(shape)
    if shape < 1:
        raise ValueError("shape must be a positive integer")
    if not scale > 0:
        raise ValueError("scale must be > 0")
    u = uniform_open_closed(gen, shape * int(size)).reshape(int(size), shape)
    return -scale * np.log(u).sum(axis=1)


def cmp_noise(gen: Generator, dim: int, epsilon: float, n: int) -> np.ndarray:
    """``n`` vectors in R^dim with density ∝ exp(−ε‖z‖): uniform direction × Gamma(dim, 1/ε) length."""
    if not epsilon > 0:
        raise ValueError("epsilon must be > 0")
    direction = standard_normal(gen, n * dim).reshape(n, dim)
    norms = np.linalg.norm(direction, axis=1, keepdims=True)
    norms[norms == 0] = 1.0  # probability zero; avoids a division by zero
    length = gamma_integer_shape(gen, dim, 1.0 / epsilon, n)
    return direction / norms * length[:, None]


def random_replacement(ids: np.ndarray, outputs: np.ndarray, gen: Generator) -> np.ndarray:
    """Replace every token by one drawn uniformly (exactly: Lemire) from ``outputs``."""
    ids = np.asarray(ids)
    outputs = np.asarray(outputs, dtype=np.int64)
    return outputs[gen.uniform_int(outputs.size, ids.size)].astype(np.int32).reshape(ids.shape)


class CMPMechanism:
    """FBDD / CMP (Feyisetan et al. 2020) over a fixed embedding table.

    ``embeddings``: ``[V, m]`` (the same array SanText uses, ``Sanitizer.embeddings``);
    ``outputs``: the ids that may be released (special tokens excluded). The nearest neighbour is
    searched among all ``outputs`` (the original token included, as in FBDD), by
    ``argmax 2 e·q − ‖e‖²`` in float32 chunks (ties between distinct embeddings are measure-zero).
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

    def nearest(self, points: np.ndarray) -> np.ndarray:
        """Vocabulary ids (from ``outputs``) nearest to each row of ``points``."""
        points = np.asarray(points, dtype=np.float32)
        res = np.empty(points.shape[0], dtype=np.int64)
        for s in range(0, points.shape[0], self.chunk_size):
            q = points[s:s + self.chunk_size]
            q_aug = np.hstack([q, np.ones((q.shape[0], 1), dtype=np.float32)])
            res[s:s + q.shape[0]] = self.outputs[(q_aug @ self._augmented).argmax(axis=1)]
        return res

    def sample_ids(self, ids: np.ndarray, gen: Generator) -> np.ndarray:
        """One perturbed-and-projected output per input id."""
        ids = np.asarray(ids, dtype=np.int64)
        flat = ids.ravel()
        noisy = self.embeddings[flat].astype(np.float64) + cmp_noise(
            gen, self.embeddings.shape[1], self.epsilon, flat.size)
        return self.nearest(noisy).astype(np.int32).reshape(ids.shape)
