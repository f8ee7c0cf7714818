"""Pure-numpy versions of the C extension's entry points (``native/``), used when it cannot be
built. Same algorithms and the same output distributions; randomness from ``os.urandom`` (or, in
seeded test mode only, a SHA-256 counter stream). Vectorised by rejection: every round draws for
all pending positions at once.
"""
from __future__ import annotations

import hashlib
import os

import numpy as np

from .santext_tables import SanTextTables

_TWO32 = np.uint64(1 << 32)


class _Bits:
    """Random 64-bit words: os.urandom, or a deterministic SHA-256 counter stream for tests."""

    def __init__(self, key: bytes | None) -> None:
        self._key, self._counter = key, 0

    def bytes(self, n: int) -> bytes:
        if self._key is None:
            return os.urandom(n)
        out = bytearray()
        while len(out) < n:
            out += hashlib.sha256(self._key + self._counter.to_bytes(8, "little")).digest()
            self._counter += 1
        return bytes(out[:n])

    def u64(self, n: int) -> np.ndarray:
        return np.frombuffer(self.bytes(8 * n), dtype="<u8").astype(np.uint64)

    def u32(self, n: int) -> np.ndarray:
        return np.frombuffer(self.bytes(4 * n), dtype="<u4").astype(np.uint64)


class FallbackGenerator:
    """Implements the methods of ``ldptext._native.Generator`` (same signatures)."""

    def __init__(self, key: bytes | None) -> None:
        self._bits = _Bits(key)

    # -- primitives (array in, array out) ----------------------------------------------------
    def random_bytes(self, n: int) -> bytes:
        return self._bits.bytes(n)

    def uniform(self, n, size: int) -> np.ndarray:
        """Uniform on {0..n-1} (n scalar or per-element array, each < 2^32) by Lemire's method."""
        n = np.broadcast_to(np.asarray(n, dtype=np.uint64), (size,))
        out = np.empty(size, dtype=np.uint64)
        todo = np.arange(size)
        threshold = ((_TWO32 - n) % n)  # (2^32 - n) mod n, as in the C code
        while todo.size:
            m = self._bits.u32(todo.size) * n[todo]
            low = m & np.uint64(0xFFFFFFFF)
            ok = low >= threshold[todo]
            out[todo[ok]] = m[ok] >> np.uint64(32)
            todo = todo[~ok]
        return out

    def uniform_int(self, n: int, out: np.ndarray) -> None:
        if n < (1 << 32):
            out[:] = self.uniform(n, out.shape[0]).astype(np.int64)
            return
        mask = (1 << int(n - 1).bit_length()) - 1
        for i in range(out.shape[0]):
            while True:
                x = int(self._bits.u64(1)[0]) & mask
                if x < n:
                    out[i] = x
                    break

    def bern(self, p: np.ndarray) -> np.ndarray:
        """Exact Bernoulli(p) per element: the first 64 bits of a uniform real are compared with
        floor(p·2^64); the rare ties continue with p's next 64 bits."""
        p = np.asarray(p, dtype=np.float64)
        result = np.zeros(p.shape, dtype=bool)
        rest = p.copy()
        result[p >= 1.0] = True
        todo = np.flatnonzero((p > 0.0) & (p < 1.0))
        while todo.size:
            scaled = np.ldexp(rest[todo], 64)
            chunk = np.floor(scaled)
            c = chunk.astype(np.uint64)
            rest[todo] = scaled - chunk
            u = self._bits.u64(todo.size)
            result[todo[u < c]] = True
            tie = (u == c) & (rest[todo] > 0.0)
            todo = todo[tie]
        return result

    def bernoulli(self, p: float, out: np.ndarray) -> None:
        out[:] = self.bern(np.full(out.shape[0], p))

    def _bern_exp_unit(self, gamma: np.ndarray) -> np.ndarray:
        """CKS Alg. 1 for γ in [0, 1]: K=1; while Bernoulli(γ/K): K += 1; return K odd."""
        k = np.ones(gamma.shape, dtype=np.int64)
        alive = np.arange(gamma.size)
        while alive.size:
            kk = k[alive]
            one_in_k = (kk == 1) | (self.uniform(kk.astype(np.uint64), alive.size) == 0)
            a = one_in_k & self.bern(gamma[alive])
            k[alive[a]] += 1
            alive = alive[a]
        return (k % 2) == 1

    def bern_exp(self, gamma: np.ndarray) -> np.ndarray:
        gamma = np.asarray(gamma, dtype=np.float64)
        whole = np.floor(gamma)
        result = np.ones(gamma.shape, dtype=bool)
        alive = np.flatnonzero(whole > 0)
        step = 0.0
        while alive.size:  # exp(-1)^floor(γ), stopping each position at its first failure
            ok = self._bern_exp_unit(np.ones(alive.size))
            result[alive[~ok]] = False
            step += 1.0
            alive = alive[ok & (whole[alive] > step)]
        rem = np.flatnonzero(result)
        result[rem] = self._bern_exp_unit(gamma[rem] - whole[rem])
        return result

    def bernoulli_exp(self, gamma: np.ndarray, out: np.ndarray) -> None:
        if np.isnan(gamma).any() or (gamma < 0).any():
            raise ValueError("gamma must be >= 0 and not NaN")
        out[:] = self.bern_exp(gamma)

    def _geometric_exp(self, rate: float, size: int) -> np.ndarray:
        v = np.zeros(size, dtype=np.int64)
        alive = np.arange(size)
        while alive.size:
            ok = self.bern_exp(np.full(alive.size, rate))
            v[alive[ok]] += 1
            alive = alive[ok]
        return v

    def discrete_laplace(self, scale: float, out: np.ndarray) -> None:
        if not (scale > 0 and np.isfinite(scale) and scale < 4e18):
            raise ValueError("scale must be finite and > 0")
        t = max(1, int(np.floor(scale)))
        todo = np.arange(out.shape[0])
        while todo.size:
            u = self.uniform(t, todo.size).astype(np.int64) if t < (1 << 32) else \
                np.array([self._uniform_big(t) for _ in range(todo.size)], dtype=np.int64)
            acc = self.bern_exp(u / scale)
            idx, u = todo[acc], u[acc]
            v = self._geometric_exp(t / scale, idx.size)
            if (v > (np.iinfo(np.int64).max - u) // t).any():  # as in the C code: no wrap-around
                raise ValueError("discrete Laplace draw overflows int64 at this scale")
            x = u + t * v
            neg = (self._bits.u64(idx.size) & np.uint64(1)).astype(bool)
            good = ~(neg & (x == 0))
            out[idx[good]] = np.where(neg[good], -x[good], x[good])
            todo = np.concatenate([todo[~acc], idx[~good]])

    def _uniform_big(self, n: int) -> int:
        tmp = np.empty(1, dtype=np.int64)
        self.uniform_int(n, tmp)
        return int(tmp[0])

    def discrete_gaussian(self, sigma: float, out: np.ndarray) -> None:
        if not (sigma > 0 and np.isfinite(sigma) and sigma < 1e15):
            raise ValueError("sigma must be finite and > 0")
        t = np.floor(sigma) + 1.0
        s2 = sigma * sigma
        if s2 == 0.0:  # σ² underflowed: P(Y ≠ 0) < 2·exp(-1e323), see native/samplers.c
            out[:] = 0
            return
        todo = np.arange(out.shape[0])
        while todo.size:
            y = np.empty(todo.size, dtype=np.int64)
            self.discrete_laplace(t, y)
            a = np.abs(y).astype(np.float64) - s2 / t
            ok = self.bern_exp(a * a / (2.0 * s2))
            out[todo[ok]] = y[ok]
            todo = todo[~ok]

    # -- exact samplers with integer parameters (native/samplers.c, *_exact) -----------------
    def _below(self, n: int, size: int) -> np.ndarray:
        """Uniform on {0..n-1} for an integer n ≥ 1: int64 when n ≤ 2^63, else Python ints."""
        if n == 1:
            return np.zeros(size, dtype=np.int64)
        if n <= (1 << 32):
            return self.uniform(n, size).astype(np.int64)
        bits = (n - 1).bit_length()
        if n <= (1 << 63):
            mask, out, todo = np.uint64((1 << bits) - 1), np.empty(size, dtype=np.int64), np.arange(size)
            while todo.size:  # masked rejection, acceptance > 1/2
                x = self._bits.u64(todo.size) & mask
                ok = x < np.uint64(n)
                out[todo[ok]] = x[ok].astype(np.int64)
                todo = todo[~ok]
            return out
        nbytes, mask, big = (bits + 7) // 8, (1 << bits) - 1, np.empty(size, dtype=object)
        for i in range(size):
            while True:
                x = int.from_bytes(self._bits.bytes(nbytes), "little") & mask
                if x < n:
                    big[i] = x
                    break
        return big

    def _bern_exp_unit_q(self, num: np.ndarray, den: int) -> np.ndarray:
        """CKS Alg. 1 for γ = num_i/den ∈ [0, 1]: Bernoulli(γ/K) = a 1-in-K event and U < num_i."""
        k = np.ones(num.shape[0], dtype=np.int64)
        alive = np.arange(num.shape[0])
        while alive.size:
            kk = k[alive]
            one_in_k = (kk == 1) | (self.uniform(kk.astype(np.uint64), alive.size) == 0)
            below = np.asarray(self._below(den, alive.size) < num[alive], dtype=bool)
            a = one_in_k & below
            k[alive[a]] += 1
            alive = alive[a]
        return (k % 2) == 1

    def _bern_exp_q(self, num: np.ndarray, den: int) -> np.ndarray:
        """Bernoulli(exp(-num_i/den)) for integers num_i ≥ 0 (Python ints allowed), den ≥ 1."""
        q, r = num // den, num % den
        result = np.ones(num.shape[0], dtype=bool)
        alive = np.flatnonzero(np.asarray(q > 0, dtype=bool))
        step = 0
        while alive.size:  # exp(-1)^q, stopping each position at its first failure
            ok = self._bern_exp_unit_q(np.ones(alive.size, dtype=np.int64), 1)
            result[alive[~ok]] = False
            step += 1
            alive = alive[ok]
            alive = alive[np.asarray(q[alive] > step, dtype=bool)]
        rem = np.flatnonzero(result)
        result[rem] = self._bern_exp_unit_q(r[rem], den)
        return result

    @staticmethod
    def _check_exact(a: int, b: int, names: tuple[str, str]) -> tuple[int, int]:
        for v, name in zip((a, b), names):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise TypeError(f"{name} must be an int")
            if not 1 <= int(v) <= (1 << 62):
                raise ValueError(f"{name} must be an integer in [1, 2**62]")
        return int(a), int(b)

    def discrete_laplace_exact(self, num: int, den: int, out: np.ndarray) -> None:
        """P(k) ∝ exp(-|k|·den/num): CKS Alg. 2 in integer arithmetic (as native/samplers.c)."""
        num, den = self._check_exact(num, den, ("num", "den"))
        todo = np.arange(out.shape[0])
        while todo.size:
            u = self._below(num, todo.size)
            acc = self._bern_exp_unit_q(u, num)
            idx, u = todo[acc], u[acc]
            v = np.zeros(idx.size, dtype=np.int64)
            alive = np.arange(idx.size)
            while alive.size:  # geometric: successes of Bernoulli(exp(-1))
                ok = self._bern_exp_unit_q(np.ones(alive.size, dtype=np.int64), 1)
                v[alive[ok]] += 1
                alive = alive[ok]
            if (v > (np.iinfo(np.int64).max - u) // num).any():
                raise ValueError("a draw overflowed int64")
            y = (u + num * v) // den
            neg = (self._bits.u64(idx.size) & np.uint64(1)).astype(bool)
            good = ~(neg & (y == 0))
            out[idx[good]] = np.where(neg[good], -y[good], y[good])
            todo = np.concatenate([todo[~acc], idx[~good]])

    def discrete_gaussian_exact(self, t: int, m: int, out: np.ndarray) -> None:
        """P(k) ∝ exp(-k²/(2tm)): CKS Alg. 3 with σ² = t·m in integer arithmetic (as the C code)."""
        t, m = self._check_exact(t, m, ("t", "m"))
        if not m <= t <= 4 * m:
            raise ValueError("need m <= t <= 4m (proposal scale t within [sigma, 2 sigma])")
        todo = np.arange(out.shape[0])
        while todo.size:
            y = np.empty(todo.size, dtype=np.int64)
            self.discrete_laplace_exact(t, 1, y)
            a = np.abs(y.astype(object)) - m
            ok = self._bern_exp_q(a * a, 2 * t * m)
            out[todo[ok]] = y[ok]
            todo = todo[~ok]

    # -- SanText -----------------------------------------------------------------------------
    def santext_sample(self, table: "SantextTable", xs: np.ndarray, ys: np.ndarray) -> None:
        a = table.tables
        bad = np.flatnonzero((xs < 0) | (xs >= table.n_rows))
        if bad.size:
            raise IndexError(f"token id at position {int(bad[0])} is outside the domain")
        ys[:] = -1
        todo = np.arange(xs.size)
        keep_rows = a.keep_row[xs].astype(bool)
        if keep_rows.any():  # SanText+: V_N inputs are kept with probability 1 - p
            kr = np.flatnonzero(keep_rows)
            sanitize = self.bern(np.full(kr.size, table.p))
            ys[kr[~sanitize]] = xs[kr[~sanitize]]
            todo = np.setdiff1d(todo, kr[~sanitize], assume_unique=True)
        k, slots = table.head_size, table.head_size + 1
        while todo.size:
            x = xs[todo].astype(np.int64)
            slot = self.uniform(slots, todo.size).astype(np.int64)
            u = self._bits.u32(todo.size)
            flat = x * slots + slot
            slot = np.where(u >= a.alias_threshold.reshape(-1)[flat].astype(np.uint64),
                            a.alias_index.reshape(-1)[flat].astype(np.int64), slot)
            is_head = slot < k
            gamma = np.empty(todo.size, dtype=np.float64)
            cand = np.empty(todo.size, dtype=np.int64)
            h = np.flatnonzero(is_head)
            gamma[h] = a.accept_gamma[x[h], slot[h]]
            cand[h] = a.head_ids[x[h], slot[h]]
            tl = np.flatnonzero(~is_head)
            if tl.size:
                if a.outputs.size <= k:
                    raise RuntimeError("sampler invariant violated (corrupted tables)")
                cand[tl] = self._tail_candidates(a, x[tl])
                d = metric_distances(a.emb_q, a.emb_scale, a.emb_sqnorm, x[tl], cand[tl])
                gamma[tl] = a.accept_gamma[x[tl], k] + table.half_epsilon * (d - a.tail_floor[x[tl]])
                if (gamma[tl] < 0).any() or np.isnan(gamma[tl]).any():
                    raise RuntimeError("sampler invariant violated (corrupted tables)")
            acc = self.bern_exp(gamma)
            ys[todo[acc]] = cand[acc]
            todo = todo[~acc]

    def _tail_candidates(self, a: SanTextTables, x: np.ndarray) -> np.ndarray:
        """Uniform over outputs minus the row's head, by rejecting head members."""
        cand = np.empty(x.size, dtype=np.int64)
        todo = np.arange(x.size)
        while todo.size:
            c = a.outputs[self.uniform(a.outputs.size, todo.size).astype(np.int64)]
            member = (a.head_ids[x[todo]] == c[:, None]).any(axis=1)
            cand[todo[~member]] = c[~member]
            todo = todo[member]
        return cand


def distance_from_dot(sa, na, sb, nb, dot) -> np.ndarray:
    """sqrt(max(0, s_a²·|q_a|² + s_b²·|q_b|² − 2·s_a·s_b·<q_a, q_b>)) with the float64 operations of
    ``ldp_distance`` (native/santext_sampler.c) in the same order, so results agree bit for bit.
    Arguments broadcast (pairs, or rows × outputs); integer arguments must be exact."""
    sa = np.asarray(sa, dtype=np.float64)
    sb = np.asarray(sb, dtype=np.float64)
    d2 = (sa * sa) * np.asarray(na, dtype=np.float64) + (sb * sb) * np.asarray(nb, dtype=np.float64) \
        - 2.0 * (sa * sb) * np.asarray(dot, dtype=np.float64)
    return np.sqrt(np.maximum(d2, 0.0))


def metric_distances(emb_q: np.ndarray, scale: np.ndarray, sqnorm: np.ndarray, a: np.ndarray,
                     b: np.ndarray) -> np.ndarray:
    """Distances of rows a[i], b[i] exactly as the C sampler computes them."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    dot = np.einsum("ij,ij->i", emb_q[a].astype(np.int32), emb_q[b].astype(np.int32))
    return distance_from_dot(scale[a], sqnorm[a], scale[b], sqnorm[b], dot)


class SantextTable:
    """Mirror of ``ldptext._native.SantextTable`` over a validated :class:`SanTextTables`.

    The C constructor re-checks every array it borrows because its memory safety depends on it;
    here the record's own validation (dtypes, shapes, id ranges, exponents) already holds, and numpy
    indexing is bounds-checked, so only the scalars are checked (same error as the C code).
    """

    def __init__(self, tables: SanTextTables, *, epsilon: float, p: float) -> None:
        k = tables.head_size
        if tables.dim <= 0 or k <= 0 or k >= 65535 or not epsilon > 0 or not 0 <= p <= 1:
            raise ValueError("invalid dim, head_size, epsilon or p")
        self.tables = tables
        self.n_rows, self.head_size = tables.n_rows, k
        self.half_epsilon, self.p = epsilon / 2.0, p

    def distance(self, a: int, b: int) -> float:
        """Euclidean distance of rows a and b, as the sampler computes it."""
        t = self.tables
        return float(metric_distances(t.emb_q, t.emb_scale, t.emb_sqnorm, [a], [b])[0])
