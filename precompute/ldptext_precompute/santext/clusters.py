"""Tail clusters: a public partition of the output domain that lets the sampler skip far candidates.

The sampler draws a tail candidate y uniformly from the outputs outside row x's head and accepts it
with probability exp(−(γ_K + ε/2·(d(x, y) − tail_floor[x]))). At ε ≥ 10 most candidates are refused,
and each refusal cost a distance (the candidate's whole embedding row read from memory). With the
outputs grouped into C clusters and, per row and cluster, a lower bound of d(x, ·) over the cluster's
tail members (:func:`ldptext_precompute.santext.knn.compute_neighbours`), the acceptance splits into
a trial before the distance and one after it, with the same product (``native/santext_sampler.h``).
The clusters only decide how much work is saved; any partition keeps the distribution exact.

Grouping: Lloyd's k-means on the metric embedding of the outputs, from a seeded choice of starting
centres, for a fixed number of iterations: deterministic for given public vectors, and computed in
well under a second for 30,000 outputs. Nothing here reads private text.
"""
from __future__ import annotations

import numpy as np

from ldptext.santext_tables import MAX_CLUSTERS

#: Tail clusters of a new bundle per 32,768 outputs (:func:`default_clusters`). The per-row bounds
#: cost V·C bytes (+1.4 MiB on MiniLM's 30,522 rows, +2.3 MiB on 50,000 GloVe words against C = 16)
#: and pay at large ε, where most tail candidates are refused (why: docs/sampler.md, "Head size and
#: tail-cluster count"): sampling time C = 64 against C = 16 (the tables in docs/performance.md)
#: GloVe-50k ε = 3 0.87×, ε = 10 0.78×, MiniLM frequency split ε = 15 0.90×, MiniLM default split
#: ε = 10 1.00×. ``make web-bundle`` keeps 16 (its download).
DEFAULT_CLUSTERS = 64

#: Outputs per :data:`DEFAULT_CLUSTERS` clusters: a larger output domain gets more clusters.
OUTPUTS_PER_DEFAULT = 32_768


def default_clusters(n_outputs: int) -> int:
    """C for a new bundle: :data:`DEFAULT_CLUSTERS` for every 32,768 outputs begun, at most 256.

    MiniLM's 26,571–29,355 outputs get 64 clusters, 45,000 GloVe words 128. Finer clusters tighten the
    bounds where clusters of the same number of outputs would be wide (docs/sampler.md, "Head size
    and tail-cluster count"): sampling time of the ``make bench`` GloVe-50k bundles, 128 against 64
    clusters (the tables in docs/performance.md), ε = 3 0.87–0.90×,
    ε = 10 0.69–0.74×, ε = 15 0.90–0.92×, ε = 1 0.99–1.02×; on MiniLM 128 clusters gain nothing, so its bundles
    keep 64 (V·C bytes: 128 clusters add 3.1 MiB to a GloVe-50k bundle).

    Parameters
    ----------
    n_outputs : int
        |O|, the outputs the clusters partition.

    Returns
    -------
    int
        C in [DEFAULT_CLUSTERS, 256].
    """
    per = -(-max(int(n_outputs), 1) // OUTPUTS_PER_DEFAULT)
    return min(MAX_CLUSTERS, DEFAULT_CLUSTERS * per)


def tail_clusters(vectors: np.ndarray, outputs: np.ndarray, n_clusters: int,
                  iterations: int = 12, seed: int = 0) -> np.ndarray:
    """The cluster of every row: k-means over the outputs' vectors.

    Parameters
    ----------
    vectors : np.ndarray of float, shape (V, m)
        The metric embedding.
    outputs : np.ndarray of int, shape (O,)
        Output ids (only they are grouped; other rows get cluster 0, which the sampler never reads).
    n_clusters : int
        C, in [1, 256] (capped at O).
    iterations : int
        Lloyd iterations.
    seed : int
        Seed of the choice of starting centres (public; the result is deterministic).

    Returns
    -------
    np.ndarray of uint8, shape (V,)
        The cluster of each row, ``< min(C, O)``.

    Raises
    ------
    ValueError
        C outside [1, 256].
    """
    if not 1 <= n_clusters <= 256:
        raise ValueError("the number of tail clusters must be between 1 and 256")
    outputs = np.asarray(outputs, dtype=np.int64)
    labels = np.zeros(vectors.shape[0], dtype=np.uint8)
    c = min(int(n_clusters), int(outputs.size))
    if c <= 1:
        return labels
    x = np.asarray(vectors[outputs], dtype=np.float64)
    rng = np.random.default_rng(seed)
    centres = x[rng.choice(x.shape[0], size=c, replace=False)].copy()
    x_sq = np.einsum("ij,ij->i", x, x)
    assign = np.zeros(x.shape[0], dtype=np.int64)
    for _ in range(iterations):
        d2 = x_sq[:, None] - 2.0 * (x @ centres.T) + np.einsum("ij,ij->i", centres, centres)[None, :]
        assign = np.argmin(d2, axis=1)
        onehot = (assign[None, :] == np.arange(c)[:, None]).astype(np.float64)
        counts = onehot.sum(axis=1)
        sums = onehot @ x
        filled = counts > 0
        centres[filled] = sums[filled] / counts[filled, None]  # an empty cluster keeps its centre
    labels[outputs] = assign.astype(np.uint8)
    return labels
