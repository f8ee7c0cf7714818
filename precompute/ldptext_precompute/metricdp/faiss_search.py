"""Neighbour search with faiss: the index a CMP / Mahalanobis bundle stores, and k-NN for the builders.

faiss (the ``faiss-cpu`` package; a GPU build is used when present, ``faiss.get_num_gpus() > 0``)
answers the nearest-neighbour queries of precompute (CusText's output sets) and of the noise-then-
nearest-neighbour runtimes (:mod:`ldptext.cmp`). Its results are a deterministic function of public
vectors (and, at run time, of the already-noised point), i.e. post-processing: an exact or an
approximate index gives the same privacy guarantee, only utility differs.

Indexes: ``"flat"`` (``IndexFlatL2``: exact, brute force in float32 with BLAS) and ``"hnsw"``
(``IndexHNSWFlat``, M = 32, ``efSearch`` stored in the index: approximate, logarithmic per query).
"""
from __future__ import annotations

import time

import numpy as np

from ldptext.errors import ParameterError

__all__ = ["INDEX_KINDS", "require_faiss", "build_index", "serialize_index", "knn", "gpu_available"]

INDEX_KINDS = ("flat", "hnsw")
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 80
HNSW_EF_SEARCH = 128


def require_faiss():
    """The ``faiss`` module, or ModuleNotFoundError naming the extra that provides it.

    Returns
    -------
    module
    """
    from ldptext.cmp import load_faiss
    return load_faiss()


def gpu_available() -> bool:
    """Whether the installed faiss has a GPU it can use.

    Returns
    -------
    bool
    """
    faiss = require_faiss()
    return bool(getattr(faiss, "get_num_gpus", lambda: 0)() > 0)


def build_index(vectors: np.ndarray, kind: str = "flat"):
    """A faiss L2 index over ``vectors`` (row i has label i).

    Parameters
    ----------
    vectors : np.ndarray of float, shape (n, m)
        Stored as float32.
    kind : str
        ``"flat"`` (exact) or ``"hnsw"`` (approximate).

    Returns
    -------
    faiss.Index
        On the CPU (what a bundle stores).
    """
    faiss = require_faiss()
    if kind not in INDEX_KINDS:
        raise ParameterError(f"index must be one of {INDEX_KINDS}")
    x = np.ascontiguousarray(vectors, dtype=np.float32)
    if kind == "flat":
        index = faiss.IndexFlatL2(x.shape[1])
    else:
        index = faiss.IndexHNSWFlat(x.shape[1], HNSW_M)
        index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        index.hnsw.efSearch = HNSW_EF_SEARCH
    index.add(x)
    return index


def serialize_index(index) -> bytes:
    """The index as bytes (``faiss.serialize_index``), for a bundle blob.

    Parameters
    ----------
    index : faiss.Index

    Returns
    -------
    bytes
    """
    faiss = require_faiss()
    return bytes(faiss.serialize_index(index).tobytes())


def knn(queries: np.ndarray, base: np.ndarray, k: int, *, device: str = "auto"
        ) -> tuple[np.ndarray, np.ndarray, str, float]:
    """Exact k nearest neighbours (squared L2) of every query among ``base``, with faiss.

    Parameters
    ----------
    queries : np.ndarray of float, shape (n, m)
    base : np.ndarray of float, shape (b, m)
    k : int
        Neighbours per query, ≤ b.
    device : str
        ``"auto"`` (GPU when faiss has one), ``"cpu"`` or ``"cuda"``.

    Returns
    -------
    distances2 : np.ndarray of float32, shape (n, k)
        Squared distances, ascending.
    labels : np.ndarray of int64, shape (n, k)
        Rows of ``base``.
    backend : str
        ``"faiss-cpu"`` or ``"faiss-gpu"``.
    seconds : float
    """
    faiss = require_faiss()
    t0 = time.perf_counter()
    xb = np.ascontiguousarray(base, dtype=np.float32)
    xq = np.ascontiguousarray(queries, dtype=np.float32)
    use_gpu = device == "cuda" or (device == "auto" and gpu_available())
    index = faiss.IndexFlatL2(xb.shape[1])
    backend = "faiss-cpu"
    if use_gpu:
        res = faiss.StandardGpuResources()
        index = faiss.index_cpu_to_gpu(res, 0, index)
        backend = "faiss-gpu"
    index.add(xb)
    d2, labels = index.search(xq, int(k))
    return d2, labels.astype(np.int64), backend, time.perf_counter() - t0
