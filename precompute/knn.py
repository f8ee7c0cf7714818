"""Nearest-neighbour structure of SanText's sampling tables (ε-independent, cached).

For every row x (every vocabulary entry) and the output domain O:

* ``head_ids``: K outputs nearest to x, ascending by id, with ``head_dist`` their exact distances
  (float64 from the float32 embeddings, the same formula the C sampler uses);
* ``tail_floor``: a *rigorous lower bound* of d(x, y) over every other output y. The exactness of the
  sampler depends only on this bound being valid, not on the head being the true top-K: candidates
  are found with the fast ``|a|²+|b|²−2a·b`` formula, whose rounding error is bounded explicitly;
* ``d_max``: an upper bound of the largest distance between two valid inputs (privacy report).

The heavy part (a |V|×|V| distance product, in row blocks, never materialised whole) runs with torch
on a GPU when one is present, torch on the CPU otherwise, or numpy when torch is not installed: the
same code path on every device.
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

U = 2.0 ** -53  # unit roundoff of float64


@dataclass
class Neighbours:
    head_ids: np.ndarray    # int32 [V, K]
    head_dist: np.ndarray   # float64 [V, K]
    tail_floor: np.ndarray  # float64 [V]
    d_max: float
    backend: str
    seconds: float


def exact_distances(vectors: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """d(rows[i], cols[i, j]) with float64 differences of float32 values, as the C sampler does."""
    a = vectors[rows].astype(np.float64)[:, None, :]
    b = vectors[cols].astype(np.float64)
    diff = a - b
    return np.sqrt(np.einsum("ijk,ijk->ij", diff, diff))


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
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(device), f"torch-{device}"


def compute_neighbours(vectors: np.ndarray, outputs: np.ndarray, valid_input: np.ndarray,
                       head_size: int, *, device: str = "auto", block: int = 1024,
                       progress: bool = False) -> Neighbours:
    """Compute the neighbour structure of every row against the output ids ``outputs``."""
    t0 = time.perf_counter()
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    n_rows, dim = vectors.shape
    outputs = np.asarray(outputs, dtype=np.int64)
    k = int(head_size)
    if not 1 <= k <= outputs.size:
        raise ValueError("head size must be between 1 and the number of outputs")
    take = min(k + 1, outputs.size)  # the (K+1)-th nearest gives the tail bound
    vec64 = vectors.astype(np.float64)
    sq = np.einsum("ij,ij->i", vec64, vec64)
    valid_ids = np.flatnonzero(valid_input)
    # Error of the expanded formula (Higham, Accuracy and Stability, §3.1): each of |a|², |b|², a·b
    # is within (m+2)u of its magnitude, and 3 more roundings combine them; doubled for margin.
    err_coef = 4.0 * (dim + 8) * U
    max_sq_out = float(sq[outputs].max())
    max_sq_valid = float(sq[valid_ids].max())

    torch_device, backend = _pick_backend(device)
    head_ids = np.empty((n_rows, k), dtype=np.int32)
    tail_d2 = np.full(n_rows, np.inf)
    d2_max = 0.0
    if torch_device is not None:
        import torch
        out_t = torch.from_numpy(vec64[outputs]).to(torch_device)
        sq_out_t = torch.from_numpy(sq[outputs]).to(torch_device)
        val_t = torch.from_numpy(vec64[valid_ids]).to(torch_device)
        sq_val_t = torch.from_numpy(sq[valid_ids]).to(torch_device)

    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=n_rows, desc="neighbours", unit="row", leave=False)
    for start in range(0, n_rows, block):
        stop = min(start + block, n_rows)
        a = vec64[start:stop]
        sq_a = sq[start:stop]
        if torch_device is not None:
            a_t = torch.from_numpy(a).to(torch_device)
            sq_a_t = torch.from_numpy(sq_a).to(torch_device)
            d2 = sq_a_t[:, None] + sq_out_t[None, :] - 2.0 * (a_t @ out_t.T)
            vals, idx = torch.topk(d2, take, dim=1, largest=False, sorted=True)
            vals, idx = vals.cpu().numpy(), idx.cpu().numpy()
            dv = sq_a_t[:, None] + sq_val_t[None, :] - 2.0 * (a_t @ val_t.T)
            row_max = dv[torch.from_numpy(valid_input[start:stop]).to(torch_device)].max()
            d2_max = max(d2_max, float(row_max.cpu()) if valid_input[start:stop].any() else 0.0)
        else:
            d2 = sq_a[:, None] + sq[outputs][None, :] - 2.0 * (a @ vec64[outputs].T)
            part = np.argpartition(d2, take - 1, axis=1)[:, :take]
            pv = np.take_along_axis(d2, part, axis=1)
            order = np.argsort(pv, axis=1, kind="stable")
            idx = np.take_along_axis(part, order, axis=1)
            vals = np.take_along_axis(pv, order, axis=1)
            rows_valid = valid_input[start:stop]
            if rows_valid.any():
                dv = sq_a[rows_valid][:, None] + sq[valid_ids][None, :] - \
                    2.0 * (a[rows_valid] @ vec64[valid_ids].T)
                d2_max = max(d2_max, float(dv.max()))
        head_ids[start:stop] = np.sort(outputs[idx[:, :k]], axis=1)
        if take > k:
            err = err_coef * (sq_a + max_sq_out)
            tail_d2[start:stop] = vals[:, k] - err
        if bar is not None:
            bar.update(stop - start)
    if bar is not None:
        bar.close()

    # the runtime's own distance may be low by (m+2)u relatively: shrink the bound by more than that
    shrink = 1.0 - 4.0 * (dim + 8) * U
    tail_floor = np.where(np.isfinite(tail_d2), np.sqrt(np.maximum(tail_d2, 0.0)) * shrink, 0.0)
    head_dist = exact_distances(vectors, np.arange(n_rows), head_ids)
    d_max = math.sqrt(d2_max + err_coef * 2 * max_sq_valid) * (1.0 + 4.0 * (dim + 8) * U)
    return Neighbours(head_ids=head_ids, head_dist=head_dist, tail_floor=tail_floor,
                      d_max=float(np.nextafter(d_max, np.inf)), backend=backend,
                      seconds=time.perf_counter() - t0)


def cache_key(vectors: np.ndarray, outputs: np.ndarray, valid_input: np.ndarray,
              head_size: int) -> str:
    h = hashlib.sha256()
    for a in (vectors, outputs.astype(np.int64), valid_input.astype(np.uint8)):
        h.update(np.ascontiguousarray(a).tobytes())
    h.update(f"K={head_size};v1".encode())
    return h.hexdigest()[:32]


def cached_neighbours(cache_dir: str | Path | None, vectors, outputs, valid_input, head_size,
                      **kwargs) -> Neighbours:
    """:func:`compute_neighbours`, reusing a result saved in ``cache_dir`` (public data only)."""
    if cache_dir is None:
        return compute_neighbours(vectors, outputs, valid_input, head_size, **kwargs)
    cache = Path(cache_dir)
    path = cache / f"neighbours-{cache_key(vectors, outputs, valid_input, head_size)}.npz"
    if path.exists():
        try:
            z = np.load(path)
            meta = json.loads(str(z["meta"]))
            return Neighbours(head_ids=z["head_ids"], head_dist=z["head_dist"],
                              tail_floor=z["tail_floor"], d_max=meta["d_max"],
                              backend=meta["backend"] + " (cached)", seconds=0.0)
        except (OSError, KeyError, ValueError):
            path.unlink(missing_ok=True)  # unreadable cache: recompute
    nb = compute_neighbours(vectors, outputs, valid_input, head_size, **kwargs)
    cache.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, head_ids=nb.head_ids, head_dist=nb.head_dist, tail_floor=nb.tail_floor,
             meta=json.dumps({"d_max": nb.d_max, "backend": nb.backend}))
    tmp.replace(path)
    return nb
