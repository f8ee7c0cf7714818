"""Nearest-neighbour structure of SanText's sampling tables (ε-independent, cached).

For every row x (every vocabulary entry) and the output domain O:

* ``head_ids``: K outputs nearest to x, ascending by id, with ``head_dist`` their distances by the
  direct float64 formula (relative error ≤ (m+2)u);
* ``tail_floor``: a *rigorous lower bound* of d(x, y) over every other output y. The exactness of the
  sampler depends only on this bound being valid, not on the head being the true top-K: candidates
  are found with the fast ``|a|²+|b|²−2a·b`` formula, whose rounding error is bounded explicitly;
* ``tail_cluster`` / ``cluster_floor``: the outputs' tail clusters
  (:mod:`ldptext_precompute.santext.clusters`) and, per row and cluster, a rigorous lower bound of
  d(x, y) over the cluster's tail members (the same bound as ``tail_floor``, cluster by cluster);
* ``d_max``: an upper bound of the largest distance between two valid inputs (privacy report).

The heavy part (a |V|×|V| distance product, in row blocks, never materialised whole) runs with torch
on a GPU when one is present (``device="auto"``), with numpy on a CPU (faster there than torch), or
with torch on the CPU when asked (``device="cpu"``): one code path, tested on the CPU with both.
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..progress import Progress
from .clusters import DEFAULT_CLUSTERS, tail_clusters

#: Alias-table head size K of a new bundle. 32: on MiniLM WordPiece (30,522 tokens) both smaller and
#: faster than 64 at every ε (23.5 vs 33.7 MiB, 0.89–0.95× the sampling time, 2026-11-25); on GloVe
#: 50k it halves the bundle (22.6 / 28.9 MiB vs 60.2 before the compact tables) at 1.0–1.15× the time
#: of K = 64 at ε ≤ 3 and about 2× at ε = 10–15, where peaked rows put more probability just beyond
#: 32 neighbours (README, "Performance"). Any K gives the same exact distribution.
DEFAULT_HEAD_SIZE = 32

U = 2.0 ** -53  # unit roundoff of float64


@dataclass
class Neighbours:
    """The ε-independent neighbour structure of every row.

    Attributes
    ----------
    head_ids : np.ndarray of int32, shape (V, K)
        The K nearest outputs per row, ascending by id.
    head_dist : np.ndarray of float64, shape (V, K)
        Their distances (direct float64 formula).
    tail_floor : np.ndarray of float64, shape (V,)
        A rigorous lower bound of the distance to every other output (0 when none).
    tail_cluster : np.ndarray of uint8, shape (V,)
        The tail cluster of every output (0 for other rows).
    cluster_floor : np.ndarray of float64, shape (V, C)
        Per row x and cluster c, a rigorous lower bound of the distance to every output of c outside
        x's head (+inf when there is none).
    d_max : float
        Upper bound of the largest distance between two valid inputs.
    backend : str
        ``"numpy"``, ``"torch-cpu"``, ``"torch-cuda"`` (``" (cached)"`` when reused).
    seconds : float
        Time the search took.
    """

    head_ids: np.ndarray    # int32 [V, K]
    head_dist: np.ndarray   # float64 [V, K]
    tail_floor: np.ndarray  # float64 [V]
    tail_cluster: np.ndarray  # uint8 [V]
    cluster_floor: np.ndarray  # float64 [V, C]
    d_max: float
    backend: str
    seconds: float


def exact_distances(vectors: np.ndarray, rows: np.ndarray, cols: np.ndarray,
                    block: int = 1024) -> np.ndarray:
    """Distances d(rows[i], cols[i, j]) by the direct float64 formula (error ≤ (m+2)u relative).

    Computed in row blocks so that the differences never take more than block·K·m doubles.

    Parameters
    ----------
    vectors : np.ndarray of float64, shape (V, m)
        The metric embedding.
    rows : np.ndarray of int, shape (n,)
        Row ids.
    cols : np.ndarray of int, shape (n, K)
        Column ids per row.
    block : int
        Rows per block.

    Returns
    -------
    np.ndarray of float64, shape (n, K)
    """
    out = np.empty(cols.shape, dtype=np.float64)
    for start in range(0, len(rows), block):
        a = vectors[rows[start:start + block]][:, None, :]
        diff = a - vectors[cols[start:start + block]]
        out[start:start + block] = np.sqrt(np.einsum("ijk,ijk->ij", diff, diff))
    return out


def _pick_backend(device: str):
    if device == "numpy":
        return None, "numpy"
    try:
        import torch
    except ImportError:
        if device not in ("auto", "cpu"):
            raise
        return None, "numpy"
    if device == "auto":
        if not torch.cuda.is_available():
            return None, "numpy"  # on a CPU numpy's argpartition beats torch.topk (measured 2.3x)
        device = "cuda"
    return torch.device(device), f"torch-{device}"


class _ArrayOps:
    """The few array operations of the neighbour search, on torch (any device) or numpy."""

    def __init__(self, torch_device) -> None:
        self.device = torch_device
        if torch_device is not None:
            import torch
            self.torch = torch

    def asarray(self, a: np.ndarray):
        return self.torch.from_numpy(np.ascontiguousarray(a)).to(self.device) \
            if self.device is not None else a

    def numpy(self, a) -> np.ndarray:
        return a.cpu().numpy() if self.device is not None else a

    def matmul_t(self, a, b):
        return a @ b.T

    def max_over_rows(self, d2, rows: np.ndarray) -> float:
        if self.device is not None:
            return float(d2[self.asarray(rows)].max().cpu())
        return float(d2[rows].max())

    def mask_columns(self, d2, mask) -> None:
        d2[:, mask] = np.inf

    def mask_positions(self, d2, idx) -> None:
        """Set ``d2[i, idx[i, j]]`` to +inf."""
        if self.device is not None:
            d2.scatter_(1, idx, float("inf"))
        else:
            np.put_along_axis(d2, idx, np.inf, axis=1)

    def slice_min(self, d2, start: int, stop: int) -> np.ndarray:
        """Per row, the smallest value of columns ``start:stop`` (non-empty), as numpy."""
        if self.device is not None:
            return d2[:, start:stop].min(dim=1).values.cpu().numpy()
        return d2[:, start:stop].min(axis=1)

    def smallest(self, d2, take: int):
        """The ``take`` smallest values per row, ascending, and their column positions."""
        if self.device is not None:
            return self.torch.topk(d2, take, dim=1, largest=False, sorted=True)
        part = np.argpartition(d2, take - 1, axis=1)[:, :take]
        pv = np.take_along_axis(d2, part, axis=1)
        order = np.argsort(pv, axis=1, kind="stable")
        return np.take_along_axis(pv, order, axis=1), np.take_along_axis(part, order, axis=1)


def compute_neighbours(vectors: np.ndarray, outputs: np.ndarray, valid_input: np.ndarray,
                       head_size: int, *, n_clusters: int = DEFAULT_CLUSTERS, device: str = "auto",
                       block: int = 1024, progress: bool = False) -> Neighbours:
    """Compute the neighbour structure of every row against the output ids ``outputs``.

    Parameters
    ----------
    vectors : np.ndarray of float, shape (V, m)
        The metric embedding (exact values; the builder's dequantized codes).
    outputs : np.ndarray of int, shape (O,)
        Output ids; each must be a valid input.
    valid_input : np.ndarray of bool, shape (V,)
        Valid inputs (they define D_max).
    head_size : int
        K, in [1, O].
    n_clusters : int
        Tail clusters C, in [1, 256] (:func:`ldptext_precompute.santext.clusters.tail_clusters`).
    device : str
        ``"auto"`` (CUDA if present, else numpy), ``"cpu"`` (torch), ``"cuda"`` or ``"numpy"``.
    block : int
        Rows per distance product.
    progress : bool
        Show progress on stderr (:mod:`ldptext_precompute.progress`: a bar on a terminal, else status lines).

    Returns
    -------
    Neighbours

    Raises
    ------
    ValueError
        K out of range, or an output that is not a valid input.
    """
    t0 = time.perf_counter()
    vectors = np.ascontiguousarray(vectors, dtype=np.float64)
    n_rows, dim = vectors.shape
    outputs = np.asarray(outputs, dtype=np.int64)
    k = int(head_size)
    if not 1 <= k <= outputs.size:
        raise ValueError("head size must be between 1 and the number of outputs")
    take = min(k + 1, outputs.size)  # the (K+1)-th nearest gives the tail bound
    vec64 = vectors
    sq = np.einsum("ij,ij->i", vec64, vec64)
    valid_ids = np.flatnonzero(valid_input)
    # Error of the expanded formula (Higham, Accuracy and Stability, §3.1): each of |a|², |b|², a·b
    # is within (m+2)u of its magnitude, and 3 more roundings combine them; doubled for margin.
    err_coef = 4.0 * (dim + 8) * U
    # the runtime's distance (native/santext_sampler.c, integer dot product) is within
    # 8u(|a|²+|b|²) of the true d²; the floor leaves that margin too (doubled)
    runtime_coef = 16.0 * U
    max_sq_out = float(sq[outputs].max())
    max_sq_valid = float(sq[valid_ids].max())

    torch_device, backend = _pick_backend(device)
    head_ids = np.empty((n_rows, k), dtype=np.int32)
    tail_d2 = np.full(n_rows, np.inf)
    d2_max = 0.0
    # one product per row block against every valid input; columns that are not outputs are
    # masked to +inf for the neighbour search and still count for d_max
    cols = valid_ids
    col_is_out = np.isin(cols, outputs)
    col_pos_out = cols[col_is_out]  # output ids in column order
    if not np.array_equal(np.sort(col_pos_out), np.sort(outputs)):
        raise ValueError("every output must be a valid input")
    # columns ordered by tail cluster (non-outputs last), so that each cluster is one column slice
    labels = tail_clusters(vec64, outputs, n_clusters)
    n_groups = int(labels[outputs].max(initial=0)) + 1
    order = np.lexsort((cols, labels[cols], ~col_is_out))
    cols, col_is_out = cols[order], col_is_out[order]
    bounds = np.searchsorted(labels[cols[col_is_out]], np.arange(n_groups + 1))
    cluster_d2 = np.full((n_rows, n_groups), np.inf)
    xp = _ArrayOps(torch_device)
    cols_t = xp.asarray(vec64[cols])
    sq_cols_t = xp.asarray(sq[cols])
    not_out_t = xp.asarray(~col_is_out)
    out_ids_t = xp.asarray(cols.astype(np.int64))

    bar = Progress(n_rows, "santext neighbours", unit="row", enabled=progress, leave=False)
    for start in range(0, n_rows, block):
        stop = min(start + block, n_rows)
        sq_a = sq[start:stop]
        a_t = xp.asarray(vec64[start:stop])
        d2 = xp.asarray(sq_a)[:, None] + sq_cols_t[None, :] - 2.0 * xp.matmul_t(a_t, cols_t)
        rows_valid = valid_input[start:stop]
        if rows_valid.any():
            d2_max = max(d2_max, xp.max_over_rows(d2, rows_valid))
        xp.mask_columns(d2, not_out_t)
        vals, idx = xp.smallest(d2, take)
        ids = xp.numpy(out_ids_t[idx] if torch_device is not None else cols[idx])
        head_ids[start:stop] = np.sort(ids[:, :k], axis=1)
        if take > k:
            err = (err_coef + runtime_coef) * (sq_a + max_sq_out)
            tail_d2[start:stop] = xp.numpy(vals)[:, k] - err
            xp.mask_positions(d2, idx[:, :k])  # the tail: outputs outside the head
            for c in range(n_groups):
                if bounds[c + 1] > bounds[c]:
                    cluster_d2[start:stop, c] = xp.slice_min(d2, int(bounds[c]), int(bounds[c + 1])) - err
        bar.update(stop - start)
    bar.close()

    tail_floor = np.where(np.isfinite(tail_d2), _root_below(tail_d2), 0.0)
    cluster_floor = _root_below(cluster_d2)  # the same bound per cluster
    head_dist = exact_distances(vectors, np.arange(n_rows), head_ids)
    d_max = math.sqrt(d2_max + err_coef * 2 * max_sq_valid) * (1.0 + 4 * U)
    return Neighbours(head_ids=head_ids, head_dist=head_dist, tail_floor=tail_floor,
                      tail_cluster=labels, cluster_floor=cluster_floor,
                      d_max=float(np.nextafter(d_max, np.inf)), backend=backend,
                      seconds=time.perf_counter() - t0)


def _root_below(d2: np.ndarray) -> np.ndarray:
    """A value at most √d2 (0 for d2 ≤ 0; +inf stays +inf): sqrt is correctly rounded, so two
    steps toward 0 keep the bound below the exact root."""
    root = np.sqrt(np.maximum(d2, 0.0))
    with np.errstate(invalid="ignore"):
        below = np.maximum(np.nextafter(np.nextafter(root, 0.0), 0.0), 0.0)
    return np.where(np.isfinite(root), below, root)


def cache_key(vectors: np.ndarray, outputs: np.ndarray, valid_input: np.ndarray,
              head_size: int, n_clusters: int = DEFAULT_CLUSTERS) -> str:
    """Content key of a neighbour structure: a hash of everything it depends on.

    Parameters
    ----------
    vectors : np.ndarray of float, shape (V, m)
    outputs : np.ndarray of int, shape (O,)
    valid_input : np.ndarray of bool, shape (V,)
    head_size : int
    n_clusters : int

    Returns
    -------
    str
        32 hex digits.
    """
    h = hashlib.sha256()
    for a in (np.asarray(vectors, dtype=np.float64), outputs.astype(np.int64),
              valid_input.astype(np.uint8)):
        h.update(np.ascontiguousarray(a).tobytes())
    h.update(f"K={head_size};C={n_clusters};v3".encode())
    return h.hexdigest()[:32]


def cached_neighbours(cache_dir: str | Path | None, vectors, outputs, valid_input, head_size,
                      n_clusters: int = DEFAULT_CLUSTERS, **kwargs) -> Neighbours:
    """:func:`compute_neighbours`, reusing a result saved in ``cache_dir`` (public data only).

    Parameters
    ----------
    cache_dir : str or Path or None
        Where results are saved by :func:`cache_key`; ``None`` computes without caching.
    vectors, outputs, valid_input, head_size, n_clusters
        As :func:`compute_neighbours`.
    **kwargs
        Passed on to :func:`compute_neighbours` (``device``, ``block``, ``progress``).

    Returns
    -------
    Neighbours
        An unreadable cache entry is recomputed and replaced.
    """
    if cache_dir is None:
        return compute_neighbours(vectors, outputs, valid_input, head_size, n_clusters=n_clusters,
                                  **kwargs)
    cache = Path(cache_dir)
    path = cache / f"neighbours-{cache_key(vectors, outputs, valid_input, head_size, n_clusters)}.npz"
    if path.exists():
        try:
            z = np.load(path)
            meta = json.loads(str(z["meta"]))
            return Neighbours(head_ids=z["head_ids"], head_dist=z["head_dist"],
                              tail_floor=z["tail_floor"], tail_cluster=z["tail_cluster"],
                              cluster_floor=z["cluster_floor"], d_max=meta["d_max"],
                              backend=meta["backend"] + " (cached)", seconds=0.0)
        except (OSError, KeyError, ValueError):
            path.unlink(missing_ok=True)  # unreadable cache: recompute
    nb = compute_neighbours(vectors, outputs, valid_input, head_size, n_clusters=n_clusters, **kwargs)
    cache.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, head_ids=nb.head_ids, head_dist=nb.head_dist, tail_floor=nb.tail_floor,
             tail_cluster=nb.tail_cluster, cluster_floor=nb.cluster_floor,
             meta=json.dumps({"d_max": nb.d_max, "backend": nb.backend}))
    tmp.replace(path)
    return nb
