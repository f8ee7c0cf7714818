"""The SDK's only source of randomness for releases.

``Generator()`` is a ChaCha20 stream (C extension) keyed with 32 bytes from ``os.urandom``; where the
extension is unavailable it falls back to the same algorithms in numpy over ``os.urandom`` bytes.
Properties:

* **private by default**: there is no global state and no way to seed a release generator by
  accident; ``Generator(seed=...)`` exists for tests and reproducible experiments only and emits
  :class:`SeededModeWarning` every time one is created;
* **fork-safe**: a forked child never continues its parent's stream (rekeyed in the child by an
  ``os.register_at_fork`` hook, and by a pid check before every draw);
* **exact samplers**: uniform integers (Lemire 2019, *Fast Random Integer Generation in an
  Interval*), Bernoulli(p) and Bernoulli(exp(-γ)) for float64 parameters, and discrete Laplace and
  discrete Gaussian with integer parameters in integer arithmetic only
  (:meth:`Generator.discrete_laplace_exact`, :meth:`Generator.discrete_gaussian_exact`; Canonne,
  Kamath, Steinke 2020, *The Discrete Gaussian for Differential Privacy*), so that no release leaks
  through floating-point noise (Mironov 2012, *On Significance of the Least Significant Bits for
  Differential Privacy*). The float-parameter :meth:`Generator.discrete_laplace` /
  :meth:`Generator.discrete_gaussian` round their acceptance exponents in float64 (relative error
  ~1e-16 per pmf term): they are not what a release uses;
* **thread-safe**: every native call holds the GIL; the fallback takes a lock.
"""
from __future__ import annotations

import hashlib
import os
import threading
import warnings
import weakref
from typing import Any

import numpy as np

from . import _fallback
from .santext_tables import SanTextTables

try:
    from . import _native
except ImportError:  # pragma: no cover - exercised when the extension could not be built
    _native = None

__all__ = ["Generator", "SeededModeWarning", "FallbackBackendWarning", "native_available", "available_backend"]


class SeededModeWarning(UserWarning):
    """A seeded (deterministic, NOT private) generator was created."""


class FallbackBackendWarning(RuntimeWarning):
    """The C extension was expected (``backend="auto"``) but could not be imported: the numpy
    fallback runs instead, the same mechanism about 900x slower."""


_fallback_warned = False


def _warn_fallback_once() -> None:
    """Say once per process that ``backend="auto"`` found no C extension: nothing else shows that
    every sample is about 900 times slower than it should be."""
    global _fallback_warned
    if _fallback_warned:
        return
    _fallback_warned = True
    warnings.warn("the ldptext C extension (ldptext._native) could not be imported: the numpy fallback "
                  "runs instead, the same mechanism about 900x slower; reinstall with a C compiler and "
                  "libsodium + utf8proc headers (Debian: libsodium-dev libutf8proc-dev), or pass "
                  "backend='fallback' to choose it on purpose", FallbackBackendWarning, stacklevel=3)


def available_backend() -> str:
    """The fastest backend this installation offers, as ``Sanitizer.backend`` names them.

    Returns
    -------
    str
        ``"libldptext"`` (the C extension with the C library: tokenizer, sampler, detokenizer),
        ``"native"`` (the C extension's sampler only) or ``"fallback"`` (numpy).
    """
    if _native is None:
        return "fallback"
    return "libldptext" if hasattr(_native, "Bundle") else "native"


def native_available() -> bool:
    """Whether the C extension ``ldptext._native`` was built and imported.

    Returns
    -------
    bool
    """
    return _native is not None


_LIVE: "weakref.WeakSet[Generator]" = weakref.WeakSet()


def _rekey_all_after_fork() -> None:
    for g in list(_LIVE):
        g._rekey_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_rekey_all_after_fork)


def _exact_int(v: Any) -> int:
    """A Python int for the exact samplers (numpy integers converted; bools and floats refused)."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError("the exact samplers take integer parameters")
    return int(v)


def _seed_key(seed: int) -> bytes:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError("seed must be an integer")
    return hashlib.sha256(b"ldptext seeded mode v1:" + str(int(seed)).encode()).digest()


class Generator:
    """Cryptographically secure generator with exact samplers.

    Parameters
    ----------
    seed : int or None
        ``None`` (default) for a private generator keyed from the OS. An integer gives a
        reproducible stream for tests; such output is **not private** and a warning says so.
    backend : str
        ``"auto"`` (native when built), ``"native"`` or ``"fallback"``.

    Raises
    ------
    ValueError
        An unknown backend.
    RuntimeError
        ``backend="native"`` but the extension is not built.
    """

    def __init__(self, seed: int | None = None, *, backend: str = "auto") -> None:
        if backend not in ("auto", "native", "fallback"):
            raise ValueError("backend must be 'auto', 'native' or 'fallback'")
        if backend == "native" and _native is None:
            raise RuntimeError("the ldptext C extension is not built")
        self.seeded = seed is not None
        if self.seeded:
            self._key = _seed_key(seed)
            warnings.warn("seeded ldptext Generator: output is reproducible and NOT private; "
                          "use it for tests and experiments only", SeededModeWarning, stacklevel=2)
        else:
            self._key = os.urandom(32)
        self.backend = "native" if (backend != "fallback" and _native is not None) else "fallback"
        if backend == "auto" and _native is None:
            _warn_fallback_once()
        self._lock = threading.Lock()
        self._forks = 0
        self._make(self._key)
        _LIVE.add(self)

    def _make(self, key: bytes) -> None:
        self._pid = os.getpid()
        if self.backend == "native":
            self._g = _native.Generator(key, 0)
        else:
            self._g = _fallback.FallbackGenerator(key if self.seeded else None)

    def _rekey_child(self) -> None:
        """Give a forked child its own stream: fresh OS entropy, or for a seeded generator a key
        derived from the seed key, the child's pid and a fork counter (still reproducible)."""
        self._forks += 1
        if self.seeded:
            key = hashlib.sha256(self._key + f":fork:{os.getpid()}:{self._forks}".encode()).digest()
        else:
            key = os.urandom(32)
        self._lock = threading.Lock()
        self._make(key)

    def _gen(self):
        if self._pid != os.getpid():  # a fork the at-fork hook did not see
            self._rekey_child()
        return self._g

    # -- primitives --------------------------------------------------------------------------
    def random_bytes(self, n: int) -> bytes:
        """Uniformly random bytes from the stream.

        Parameters
        ----------
        n : int
            Number of bytes (≥ 0).

        Returns
        -------
        bytes
            Length ``n``.
        """
        with self._lock:
            return self._gen().random_bytes(int(n))

    def uniform_int(self, n: int, size: int) -> np.ndarray:
        """Uniform integers on {0, ..., n-1} (exact; Lemire's rejection, never ``x % n``).

        Parameters
        ----------
        n : int
            Number of values, in [1, 2^63].
        size : int
            Number of draws.

        Returns
        -------
        np.ndarray of int64, shape (size,)
        """
        if not 1 <= int(n) <= 2**63:
            raise ValueError("n must be in [1, 2^63] (results are int64)")
        out = np.empty(int(size), dtype=np.int64)
        with self._lock:
            self._gen().uniform_int(int(n), out)
        return out

    def bernoulli(self, p: float, size: int) -> np.ndarray:
        """Exact Bernoulli(p) draws for a float64 p in [0, 1].

        Parameters
        ----------
        p : float
            Success probability, in [0, 1].
        size : int
            Number of draws.

        Returns
        -------
        np.ndarray of bool, shape (size,)
        """
        p = float(p)
        if not 0.0 <= p <= 1.0:
            raise ValueError("p must be in [0, 1]")
        out = np.empty(int(size), dtype=np.uint8)
        with self._lock:
            self._gen().bernoulli(p, out)
        return out.view(np.bool_)

    def bernoulli_exp(self, gamma, size: int | None = None) -> np.ndarray:
        """Exact Bernoulli(exp(-γ)) draws, γ ≥ 0, for any float64 γ (no exp() that could underflow).

        Parameters
        ----------
        gamma : float or array_like of float
            Exponents, each ≥ 0 and not NaN.
        size : int, optional
            With a scalar ``gamma``: the number of draws.

        Returns
        -------
        np.ndarray of bool, shape (size,) or (gamma.size,)
            Flattened when ``gamma`` is an array.
        """
        g = np.asarray(gamma, dtype=np.float64)
        if size is not None:
            g = np.broadcast_to(g, (int(size),))
        g = np.ascontiguousarray(g.ravel())
        if np.isnan(g).any() or (g < 0).any():
            raise ValueError("gamma must be >= 0 and not NaN")
        out = np.empty(g.shape[0], dtype=np.uint8)
        with self._lock:
            self._gen().bernoulli_exp(g, out)
        return out.view(np.bool_)

    def discrete_laplace(self, scale: float, size: int) -> np.ndarray:
        """Integers with P(k) ∝ exp(-|k|/scale) (CKS 2020 Alg. 2 with a real scale).

        Not exact: the acceptance exponents u/scale are rounded float64 quotients, so each pmf term
        is off by a relative ~1e-16. Releases use :meth:`discrete_laplace_exact`.

        Parameters
        ----------
        scale : float
            Finite and > 0.
        size : int
            Number of draws.

        Returns
        -------
        np.ndarray of int64, shape (size,)
        """
        out = np.empty(int(size), dtype=np.int64)
        with self._lock:
            self._gen().discrete_laplace(float(scale), out)
        return out

    def discrete_gaussian(self, sigma: float, size: int) -> np.ndarray:
        """Integers with P(k) ∝ exp(-k²/(2σ²)) (CKS 2020 Alg. 3).

        Not exact: σ², σ²/t and the acceptance exponent are rounded in float64, so each pmf term is
        off by a relative ~1e-16 (more in the far tail). Releases use :meth:`discrete_gaussian_exact`.

        Parameters
        ----------
        sigma : float
            Finite and > 0.
        size : int
            Number of draws.

        Returns
        -------
        np.ndarray of int64, shape (size,)
        """
        out = np.empty(int(size), dtype=np.int64)
        with self._lock:
            self._gen().discrete_gaussian(float(sigma), out)
        return out

    def discrete_laplace_exact(self, num: int, den: int, size: int) -> np.ndarray:
        """Integers with P(k) ∝ exp(-|k|·den/num): the discrete Laplace of rational scale num/den, exactly.

        Canonne, Kamath & Steinke 2020, *The Discrete Gaussian for Differential Privacy* (NeurIPS),
        Alg. 2, in integer arithmetic only (no floating point anywhere): the pmf of the draws is
        exactly the formula.

        Parameters
        ----------
        num, den : int
            The scale num/den; each in [1, 2^62].
        size : int
            Number of draws.

        Returns
        -------
        np.ndarray of int64, shape (size,)

        Raises
        ------
        TypeError
            A parameter is not an int.
        ValueError
            A parameter out of range, or a draw beyond int64 (only for scales near 2^62).
        """
        out = np.empty(int(size), dtype=np.int64)
        with self._lock:
            self._gen().discrete_laplace_exact(_exact_int(num), _exact_int(den), out)
        return out

    def discrete_gaussian_exact(self, t: int, m: int, size: int) -> np.ndarray:
        """Integers with P(k) ∝ exp(-k²/(2·t·m)): the discrete Gaussian with σ² = t·m, exactly.

        Canonne, Kamath & Steinke 2020, *The Discrete Gaussian for Differential Privacy* (NeurIPS),
        Alg. 3 with the discrete-Laplace proposal of integer scale t, in integer arithmetic only:
        the acceptance probability is exp(-(|Y| − m)²/(2tm)), a ratio of integers, so the pmf of the
        draws is exactly the formula. t = ⌊σ⌋ + 1 and m = ⌈σ²/t⌉ (what :func:`ldptext.noise.calibrate`
        uses) give σ² = t·m ≥ σ².

        Parameters
        ----------
        t, m : int
            σ² = t·m with 1 ≤ m ≤ t ≤ min(4m, 2^62): the proposal scale t lies in [σ, 2σ], so every
            try is accepted with a probability bounded away from 0 (no unbounded running time).
        size : int
            Number of draws.

        Returns
        -------
        np.ndarray of int64, shape (size,)

        Raises
        ------
        TypeError
            A parameter is not an int.
        ValueError
            A parameter out of range (or m ≤ t ≤ 4m violated), or a draw beyond int64 (only for σ
            near 2^62).
        """
        out = np.empty(int(size), dtype=np.int64)
        with self._lock:
            self._gen().discrete_gaussian_exact(_exact_int(t), _exact_int(m), out)
        return out

    def santext_sample(self, table: Any, xs: np.ndarray) -> np.ndarray:
        """One SanText(+) draw per input id, from a table of :meth:`make_santext_table`.

        Parameters
        ----------
        table : object
            The backend's table (``ldptext._native.SantextTable`` or its numpy mirror).
        xs : np.ndarray of int, shape (n,)
            Input row ids, each in ``[0, V)``.

        Returns
        -------
        np.ndarray of int32, shape (n,)
            ``ys[i]`` drawn independently with Pr[y | xs[i]] as the table defines it (see
            :class:`ldptext.santext.Sanitizer` for the distribution and its guarantee).

        Raises
        ------
        IndexError
            An id is outside the table's rows (the message names its position, not its value).
        """
        xs = np.ascontiguousarray(xs, dtype=np.int32)
        ys = np.empty_like(xs)
        with self._lock:
            self._gen().santext_sample(table, xs, ys)
        return ys

    def make_santext_table(self, tables: SanTextTables, *, epsilon: float, p: float) -> Any:
        """Build this backend's sampler table over validated SanText(+) tables.

        Parameters
        ----------
        tables : SanTextTables
            The bundle's arrays (borrowed, not copied: keep them alive and unmodified).
        epsilon : float
            The metric ε (> 0).
        p : float
            SanText+'s probability of sanitizing a non-sensitive token; 1.0 for SanText.

        Returns
        -------
        object
            ``ldptext._native.SantextTable`` (constructed with the schema's keywords,
            :meth:`SanTextTables.sampler_arguments`) or ``ldptext._fallback.SantextTable``.

        Raises
        ------
        ValueError
            ε or p out of range, or (C extension) an array fails the extension's own checks.
        """
        if self.backend == "native":
            return _native.SantextTable(**tables.sampler_arguments(epsilon=epsilon, p=p))
        return _fallback.SantextTable(tables, epsilon=float(epsilon), p=float(p))
