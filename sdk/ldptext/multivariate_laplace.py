"""Multivariate Laplace noise from the SDK's CSPRNG: density ∝ exp(−ε‖z‖₂) on R^m.

The noise of CMP (Feyisetan et al. 2020, *Privacy- and Utility-Preserving Textual Analysis via
Calibrated Multivariate Perturbations*, WSDM) and, through a linear map, of the Mahalanobis mechanism
(Xu et al. 2020): in polar coordinates such a z is a uniformly random direction times a length with
density ∝ r^{m−1}·e^{−εr}, i.e. Gamma(m, 1/ε). Here

* every random bit comes from :class:`ldptext.rng.Generator` (ChaCha20 keyed by the OS; never numpy's,
  ``random``'s or torch's generators, which are not for releases);
* Exponential(1) draws are exact up to float64 rounding at every scale: a uniform U ∈ (0, 1) is
  written 2^−(G+1)·M with G ~ Geometric(1/2) (leading zero bits of an unbounded random bit string,
  64 at a time) and M uniform on [1, 2) (52 random bits, at the midpoint of its cell), and
  −ln U = (G + 1)·ln 2 − ln M. Unlike −ln(k/2^53), nothing is truncated (no largest value) and the
  coupling error against an exact uniform is ≤ 2^−53 in −ln U, at every U;
* Gamma(m, 1/ε) for the integer m is the sum of m exponentials, divided by ε (exact construction);
* the direction is m standard normals normalised, by Box–Muller (R = √(2E), E an exponential above;
  angle 2π·(k + ½)/2^53).

**Floating point (caveat and bound).** The noise is continuous and computed in float64, so its law is
not exactly the ideal density (Mironov 2012, *On Significance of the Least Significant Bits for
Differential Privacy*, CCS): a released noisy *vector* would leak through its low-order bits. These
mechanisms never release the vector: only the nearest vocabulary token to φ(x) + z is released, a
coarse function of it. Couple each draw with an ideal one (the exact uniforms whose cells our bits
name): every exponential is within 2^−52·(1 + E) of its ideal value and every angle within 2^−51·π;
unless one of the ⌈m/2⌉ Box–Muller exponentials falls below 2^−24 (probability ≤ ⌈m/2⌉·2^−24 per
token, :func:`small_exponential_probability`), each normal is within ~2^−38·(1 + E) of its ideal value
(R = √(2E) has slope 1/R ≤ 2^12 there), so the realised noise vector lies within
δ = :data:`COUPLING_DELTA`·(1 + r) (10^−9·(1 + r), with a wide margin over float64 rounding) of the
ideal one, r its length. The released token can differ from the ideal mechanism's only when the
ideal noisy point lies within δ of the boundary between two tokens' nearest-neighbour regions, or on
that rare event. So for every set S of outputs |P̂(S | x) − P(S | x)| ≤ ν(x) := ⌈m/2⌉·2^−24 +
Pr[ideal point within δ of a boundary], and the metric bound holds for the realised law as
P̂(S|x) ≤ e^{ε·d(x,x')}·P̂(S|x') + (1 + e^{ε·d(x,x')})·ν. The second term of ν has no closed form;
``tests/test_cmp.py`` estimates it by Monte Carlo (draws whose
nearest/second-nearest margin is below δ; a distance margin of 2δ is sufficient). The noisy vector
and its bits never leave :func:`laplace_noise`'s caller.
"""
from __future__ import annotations

import math

import numpy as np

from .rng import Generator

__all__ = ["exponential", "standard_normal", "gamma_integer_shape", "laplace_noise", "COUPLING_DELTA",
           "small_exponential_probability"]

_TWO52 = float(1 << 52)
_TWO53 = float(1 << 53)
_LN2 = math.log(2.0)
#: Coupling distance per unit of noise length (δ = COUPLING_DELTA·(1 + r)) outside an event of
#: probability :func:`small_exponential_probability` (module docstring); the tests and the benchmark
#: estimate ν with it.
COUPLING_DELTA = 1e-9


def small_exponential_probability(dim: int) -> float:
    """Probability that one of a vector's ⌈m/2⌉ Box–Muller exponentials is below 2^−24 (the event the
    coupling bound :data:`COUPLING_DELTA` excludes).

    Parameters
    ----------
    dim : int
        m.

    Returns
    -------
    float
        ⌈m/2⌉·2^−24 (union bound; P(E < t) = 1 − e^{−t} ≤ t).
    """
    return ((int(dim) + 1) // 2) * 2.0 ** -24


def _words(gen: Generator, n: int) -> np.ndarray:
    return np.frombuffer(gen.random_bytes(8 * int(n)), dtype="<u8").copy()


def _leading_zeros(w: np.ndarray) -> np.ndarray:
    """Leading zero bits of nonzero uint64 words (exact: frexp of a float of at most 32 bits)."""
    high = (w >> np.uint64(32)).astype(np.float64)
    low = (w & np.uint64(0xFFFFFFFF)).astype(np.float64)
    _, eh = np.frexp(high)
    _, el = np.frexp(low)
    return np.where(high > 0, 32 - eh, 64 - el).astype(np.int64)


def exponential(gen: Generator, size: int) -> np.ndarray:
    """``size`` Exponential(1) draws, −ln U for a uniform U with unbounded precision near 0.

    Parameters
    ----------
    gen : Generator
        The CSPRNG.
    size : int

    Returns
    -------
    np.ndarray of float64, shape (size,)
        Positive values; within 2^−52·(1 + E) of an exact exponential under the coupling of the
        module docstring.
    """
    size = int(size)
    zeros = np.zeros(size, dtype=np.int64)
    todo = np.arange(size)
    while todo.size:  # G = leading zeros of an unbounded bit string, 64 bits at a time
        w = _words(gen, todo.size)
        done = w != 0
        zeros[todo[done]] += _leading_zeros(w[done])
        zeros[todo[~done]] += 64
        todo = todo[~done]
    mant = (_words(gen, size) >> np.uint64(12)).astype(np.float64)  # 52 bits
    log_m = np.log1p((mant + 0.5) / _TWO52)  # M = 1 + (k + ½)/2^52 ∈ (1, 2)
    return (zeros + 1).astype(np.float64) * _LN2 - log_m


def standard_normal(gen: Generator, size: int) -> np.ndarray:
    """``size`` N(0, 1) draws by Box–Muller on :func:`exponential` and a 53-bit angle.

    Parameters
    ----------
    gen : Generator
    size : int

    Returns
    -------
    np.ndarray of float64, shape (size,)
    """
    size = int(size)
    pairs = (size + 1) // 2
    radius = np.sqrt(2.0 * exponential(gen, pairs))
    angle = (2.0 * math.pi) * (((_words(gen, pairs) >> np.uint64(11)).astype(np.float64) + 0.5) / _TWO53)
    return np.concatenate([radius * np.cos(angle), radius * np.sin(angle)])[:size]


def gamma_integer_shape(gen: Generator, shape: int, scale: float, size: int) -> np.ndarray:
    """Gamma(shape, scale) for an integer shape: the sum of ``shape`` exponentials, times ``scale``.

    Parameters
    ----------
    gen : Generator
    shape : int
        ≥ 1.
    scale : float
        > 0.
    size : int

    Returns
    -------
    np.ndarray of float64, shape (size,)
    """
    if int(shape) < 1 or not scale > 0:
        raise ValueError("shape must be an integer >= 1 and scale > 0")
    e = exponential(gen, int(shape) * int(size)).reshape(int(size), int(shape))
    return scale * e.sum(axis=1)


def laplace_noise(gen: Generator, dim: int, epsilon: float, n: int,
                  transform: np.ndarray | None = None) -> np.ndarray:
    """``n`` vectors with density ∝ exp(−ε‖z‖₂) in R^dim (or ∝ exp(−ε‖S⁻¹z‖₂) for ``transform`` S).

    Parameters
    ----------
    gen : Generator
        The CSPRNG (seeded only in tests: not private).
    dim : int
        m ≥ 1.
    epsilon : float
        ε > 0, finite.
    n : int
        Number of vectors.
    transform : np.ndarray of float64, shape (dim, dim), optional
        An invertible S: the result is S·z (Mahalanobis: S = Σ_λ^{1/2}).

    Returns
    -------
    np.ndarray of float64, shape (n, dim)
    """
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError("epsilon must be a finite number > 0")
    direction = standard_normal(gen, int(n) * int(dim)).reshape(int(n), int(dim))
    norms = np.linalg.norm(direction, axis=1, keepdims=True)
    norms[norms == 0] = 1.0  # probability 0
    z = direction / norms * gamma_integer_shape(gen, dim, 1.0 / epsilon, n)[:, None]
    if transform is not None:
        z = z @ np.asarray(transform, dtype=np.float64).T
    return z
