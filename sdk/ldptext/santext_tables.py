"""The SanText(+) bundle schema, defined once: array names, dtypes, shapes and their invariants.

:class:`SanTextTables` is the record the builder (``ldptext_precompute.santext.build``) writes and
:class:`ldptext.santext.Sanitizer` reads back; the samplers take it too (the numpy fallback directly,
the C extension through :meth:`SanTextTables.sampler_arguments`, whose keys must equal the C keyword
list ``ldptext._native.SANTEXT_TABLE_KEYWORDS``; a test pins the two together).

Shape symbols: ``V`` rows (the vocabulary, every possible input), ``m`` embedding dimension, ``O``
outputs (the output domain: V minus special tokens for SanText, V_S for SanText+), ``K`` head size
(alias slots ``0..K-1`` are each row's K nearest outputs, slot ``K`` stands for the tail of the
``O - K`` others), ``C`` tail clusters (public groups of outputs with a per-row distance bound each,
which let the sampler refuse most far tail candidates before computing their distance).

The tables sample Pr[M(x) = y] ∝ exp(−ε·d(x, y)/2) exactly, as in Yue et al. 2021, *Differential
Privacy for Text Analytics via Natural Text Sanitization* (Findings of ACL), as presented in Yue 2023,
*Data Synthesis: Boosting Utility and Privacy in NLP* (PhD thesis, Ohio State), §2.4: an integer alias
proposal (:mod:`ldptext.alias`) corrected by an exact Bernoulli(exp(−γ)) acceptance, see
``ldptext_precompute.santext.build`` and ``native/santext_sampler.c``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from . import alias as _alias
from .errors import BundleFormatError, BundleIntegrityError

__all__ = ["SanTextTables", "STORED_ARRAYS", "OPTIONAL_ARRAYS", "SAMPLER_KEYWORDS", "MAX_CLUSTERS",
           "CLUSTER_GAMMA_UNIT", "row_sqnorms", "gamma_float32", "stored_arrays_of", "unique_rows"]

#: Most tail clusters a table may have (cluster ids are uint8), as ``LDP_MAX_CLUSTERS`` in C.
MAX_CLUSTERS = 256
#: The unit of ``cluster_gamma`` (a power of two: q · unit is exact); ``native/cluster_bounds.h``
#: tabulates the sampler's trial for each q = 0..255 in this unit.
CLUSTER_GAMMA_UNIT = 1.0 / 32.0


def _array(dtype: type, shape: tuple[str, ...], *, sampler: bool, stored: bool = True,
           narrow: type | None = None, optional: bool = False, doc: str) -> Any:
    """A schema field: its dtype, symbolic shape, whether the sampler reads it, whether the bundle
    stores it (a derived field is computed on construction instead), the narrower dtype a bundle
    may store it in instead (widened exactly on construction: the tables always hold ``dtype``),
    and whether a bundle may lack it (an older bundle; construction supplies the neutral value)."""
    meta = {"dtype": np.dtype(dtype), "shape": shape, "sampler": sampler, "stored": stored,
            "narrow": None if narrow is None else np.dtype(narrow), "optional": optional, "doc": doc}
    if optional:
        return field(default=None, repr=False, metadata=meta)
    return field(init=stored, repr=False, metadata=meta)


def row_sqnorms(emb_q: np.ndarray) -> np.ndarray:
    """Squared norms of the int8 codes, exactly (integers).

    Parameters
    ----------
    emb_q : np.ndarray of int8, shape (V, m)
        The int8 codes of the metric embedding.

    Returns
    -------
    np.ndarray of int32, shape (V,)
        ``sum_j emb_q[i, j]**2`` per row (at most 127² · m, exact in int32 for m < 133,000).
    """
    out = np.empty(emb_q.shape[0], dtype=np.int32)
    for start in range(0, emb_q.shape[0], _SQNORM_BLOCK):  # a block widened at a time
        q = emb_q[start:start + _SQNORM_BLOCK].astype(np.int32)
        out[start:start + q.shape[0]] = np.einsum("ij,ij->i", q, q)
    return out


#: Rows of int8 codes widened at a time by :func:`row_sqnorms` (bounds its temporary memory).
_SQNORM_BLOCK = 256


def unique_rows(rows: np.ndarray) -> np.ndarray:
    """The distinct ids of ``rows``, ascending (``np.unique`` of a 1-d integer array).

    The load-time checks use this instead of ``np.unique``, which imports ``numpy.ma`` (resident
    memory an app that sanitizes does not otherwise need).

    Parameters
    ----------
    rows : array_like of int

    Returns
    -------
    np.ndarray of int64, shape (n,)
    """
    a = np.sort(np.asarray(rows, dtype=np.int64).reshape(-1))
    if a.size < 2:
        return a
    return a[np.concatenate(([True], a[1:] != a[:-1]))]


def gamma_float32(gamma: np.ndarray) -> tuple[np.ndarray, float]:
    """Exponents rounded to float32, and the largest change that made.

    A realised log-probability moves by exactly the change of its exponent, so the change (twice,
    after normalisation) is what the stated tolerance must add when a bundle stores these. Each
    row's minimum stays exactly 0 (0 is a float32).

    Parameters
    ----------
    gamma : np.ndarray of float64, shape (V, K + 1)

    Returns
    -------
    rounded : np.ndarray of float32
    max_change : float
        ``max |float64(rounded) − gamma|`` (exact: a float32 widens to float64 exactly and the
        difference of two nearby float64 values is exact, Sterbenz).
    """
    rounded = gamma.astype(np.float32)
    change = np.abs(rounded.astype(np.float64) - gamma)
    return rounded, float(change.max(initial=0.0))


@dataclass(frozen=True, kw_only=True, eq=False)
class SanTextTables:
    """The arrays of a SanText / SanText+ bundle; constructing one validates them.

    Construct by keyword (every stored field below); ``emb_sqnorm`` is derived. Three arrays may
    come in a narrower dtype (a compact bundle: uint16 head ids, uint8 alias slots, float32
    exponents); the tables keep them as given (a bundle's memory map: no copy), the samplers and
    the load-time checks read them so (:meth:`stored`), and the attribute of the same name is the
    exact wide form, made on first use; :meth:`stored_arrays` gives the compact form. Construction checks
    dtypes and shapes against the schema, then the semantic invariants the sampler relies on (ids in
    range and sorted, head candidates inside the output domain, finite non-negative acceptance
    exponents normalised to a zero minimum per row, no proposal mass on an empty tail). A validly
    signed but inconsistent bundle is therefore still refused.

    Parameters
    ----------
    emb_q : np.ndarray of int8, shape (V, m)
        int8 codes of the metric embedding (the public embedding quantised per row).
    emb_scale : np.ndarray of float32, shape (V,)
        Per-row scale: the metric embedding of row i is exactly ``emb_scale[i] * emb_q[i]``.
    outputs : np.ndarray of int32, shape (O,)
        Output ids, strictly increasing, ``O >= K``.
    head_ids : np.ndarray of int32 or uint16, shape (V, K)
        Per row, the K nearest outputs, strictly increasing.
    alias_threshold : np.ndarray of uint32, shape (V, K + 1)
        Integer alias thresholds of the proposal (:mod:`ldptext.alias`).
    alias_index : np.ndarray of uint16 or uint8, shape (V, K + 1)
        Alias slots, each ``<= K``.
    accept_gamma : np.ndarray of float64 or float32, shape (V, K + 1)
        Acceptance exponents γ ≥ 0 (accept with probability exp(−γ)), minimum 0 per row. float32
        when precompute found every exponent's float32 rounding within its error budget: the
        sampler uses exactly the stored values, so the stated tolerance accounts for the rounding.
    tail_floor : np.ndarray of float64, shape (V,)
        A lower bound of d(x, y) over every tail output y of row x (finite, ≥ 0).
    keep_row : np.ndarray of uint8, shape (V,)
        1 for a SanText+ non-sensitive input (released unchanged with probability 1 − p).
    tail_cluster : np.ndarray of uint8, shape (V,), optional
        The tail cluster of each row (< C; only outputs' clusters are used). Absent in bundles made
        before tail clusters: all 0, C = 1.
    cluster_gamma : np.ndarray of uint8, shape (V, C), optional
        Per row x and cluster c, ``q = cluster_gamma[x, c]`` with ``q/32 ≤ ε/2 · (d(x, y) −
        tail_floor[x])`` for every tail output y of cluster c (y not in x's head). The sampler
        accepts a tail candidate in two trials, ⌈2³² e^(−q/32)⌉ / 2³² before the distance (one
        random word) and exp(−(γ_K + ε/2 · (d − tail_floor) − L_q)) after it, L_q = −ln of the first
        probability rounded down: the product is the single trial of the plain tail, so the
        distribution is unchanged, and a bound that fails makes sampling refuse
        (``native/santext_sampler.h``, ``native/cluster_bounds.h``). Absent: all 0 (the plain tail).
    sensitive : np.ndarray of bool, shape (V,)
        SanText+'s V_S (all valid inputs for SanText).
    valid_input : np.ndarray of bool, shape (V,)
        Rows that may appear as inputs; every output is one.

    Attributes
    ----------
    emb_sqnorm : np.ndarray of int32, shape (V,)
        Derived: :func:`row_sqnorms` of ``emb_q`` (the sampler's distance needs it).

    Raises
    ------
    BundleIntegrityError
        A dtype, shape or invariant of the schema does not hold.
    """

    emb_q: np.ndarray = _array(np.int8, ("V", "m"), sampler=True, doc="metric embedding codes")
    emb_scale: np.ndarray = _array(np.float32, ("V",), sampler=True, doc="per-row scale")
    emb_sqnorm: np.ndarray = _array(np.int32, ("V",), sampler=True, stored=False,
                                    doc="squared norms of the codes (derived)")
    outputs: np.ndarray = _array(np.int32, ("O",), sampler=True, doc="output ids")
    head_ids: np.ndarray = _array(np.int32, ("V", "K"), sampler=True, narrow=np.uint16, doc="nearest outputs")
    alias_threshold: np.ndarray = _array(np.uint32, ("V", "K+1"), sampler=True, doc="alias thresholds")
    alias_index: np.ndarray = _array(np.uint16, ("V", "K+1"), sampler=True, narrow=np.uint8, doc="alias slots")
    accept_gamma: np.ndarray = _array(np.float64, ("V", "K+1"), sampler=True, narrow=np.float32,
                                      doc="acceptance exponents")
    tail_floor: np.ndarray = _array(np.float64, ("V",), sampler=True, doc="tail distance lower bound")
    keep_row: np.ndarray = _array(np.uint8, ("V",), sampler=True, doc="SanText+ kept rows")
    sensitive: np.ndarray = _array(np.bool_, ("V",), sampler=False, doc="V_S")
    valid_input: np.ndarray = _array(np.bool_, ("V",), sampler=False, doc="valid input rows")
    tail_cluster: np.ndarray = _array(np.uint8, ("V",), sampler=True, optional=True,
                                      doc="tail cluster of each row")
    cluster_gamma: np.ndarray = _array(np.uint8, ("V", "C"), sampler=True, optional=True,
                                       doc="per-row tail exponent bound per cluster, in 1/32")

    def __post_init__(self) -> None:
        # accept_gamma's stored dtype is a property of the tables (precompute chose float32 only
        # within its error budget); the integer dtypes are narrowed whenever the values fit
        object.__setattr__(self, "_gamma32", False)
        object.__setattr__(self, "_stored", {})
        # a bundle without tail clusters: one cluster, no bound (the plain tail, exactly)
        rows = self.emb_q.shape[0] if isinstance(self.emb_q, np.ndarray) and self.emb_q.ndim == 2 else 0
        if self.tail_cluster is None and self.cluster_gamma is None:
            object.__setattr__(self, "tail_cluster", np.zeros(rows, dtype=np.uint8))
            object.__setattr__(self, "cluster_gamma", np.zeros((rows, 1), dtype=np.uint8))
        elif self.tail_cluster is None or self.cluster_gamma is None:
            # as a missing required array (libldptext: LDP_E_MISSING_ARRAY)
            raise BundleFormatError("bundle has one of tail_cluster and cluster_gamma without the other")
        for f in fields(self):
            if f.metadata["stored"]:
                a = getattr(self, f.name)
                if not isinstance(a, np.ndarray):
                    raise BundleIntegrityError(f"array {f.name!r} is not an array")
                narrow = f.metadata["narrow"]
                if narrow is not None and a.dtype == narrow:  # (np.dtype(None) is float64)
                    # kept as stored (a compact bundle's memory map, not copied); the wide
                    # attribute is made on first use (__getattr__), exactly: every uint16 fits
                    # int32, every uint8 uint16, every float32 float64
                    self._stored[f.name] = a
                    object.__delattr__(self, f.name)
                    if f.name == "accept_gamma":
                        object.__setattr__(self, "_gamma32", True)
                elif a.dtype != f.metadata["dtype"]:
                    allowed = " or ".join(str(d) for d in (f.metadata["dtype"], narrow) if d is not None)
                    raise BundleIntegrityError(f"array {f.name!r} has dtype {a.dtype}, expected {allowed}")
        if self.emb_q.ndim != 2:
            raise BundleIntegrityError(f"array 'emb_q' has shape {self.emb_q.shape}, expected (V, m)")
        dims = self._dims()
        for f in fields(self):
            if f.metadata["stored"]:
                shape = self.stored(f.name).shape
                expected = tuple(dims[s] for s in f.metadata["shape"])
                if shape != expected:
                    raise BundleIntegrityError(f"array {f.name!r} has shape {shape}, expected {expected}")
        # frozen: the derived field is set once, here
        object.__setattr__(self, "emb_sqnorm", row_sqnorms(self.emb_q))
        self._check_values()

    def __getattr__(self, name: str) -> Any:
        # only reached for a narrow array kept as stored: its wide form, made once (the sampler
        # and the checks of the runtime read the stored form, :meth:`stored`)
        stored = self.__dict__.get("_stored")
        if stored is None or name not in stored:
            raise AttributeError(name)
        wide = stored[name].astype(_WIDE[name])
        object.__setattr__(self, name, wide)
        return wide

    def stored(self, name: str) -> np.ndarray:
        """A schema array in the form the tables were given (for a compact bundle: uint16 head
        ids, uint8 alias slots, float32 exponents, read in place), without widening it.

        Every narrow value widens exactly, so any computation that widens what it reads (indexing
        then float64 or int64 arithmetic) gives the same result from either form. The attribute of
        the same name is the wide form (made on first use and kept).

        Parameters
        ----------
        name : str
            A name of :data:`STORED_ARRAYS` (or ``emb_sqnorm``).

        Returns
        -------
        np.ndarray
        """
        a = self._stored.get(name)
        return a if a is not None else getattr(self, name)

    def _dims(self) -> dict[str, int]:
        """Values of the shape symbols, from emb_q (V, m), outputs (O) and head_ids (K)."""
        v, m = self.emb_q.shape
        head = self.stored("head_ids")
        k = head.shape[1] if head.ndim == 2 else 0
        c = self.cluster_gamma.shape[1] if self.cluster_gamma.ndim == 2 else 0
        return {"V": v, "m": m, "O": self.outputs.shape[0] if self.outputs.ndim == 1 else -1,
                "K": k, "K+1": k + 1, "C": c}

    def _check_values(self) -> None:
        # on the stored arrays (no widened copy): comparisons of a uint16 / uint8 / float32 array
        # with a Python number, and of two of its slices, are exact in any of its dtypes
        v, k = self.n_rows, self.head_size
        out = self.outputs
        if v == 0 or out.size < k:
            raise BundleIntegrityError("bundle vocabulary or output domain is empty")
        if not np.isfinite(self.emb_scale).all() or (self.emb_scale < 0).any() \
                or not np.isfinite(self.tail_floor).all() or (self.tail_floor < 0).any():
            raise BundleIntegrityError("embeddings or tail bounds are not finite")
        if (out < 0).any() or (out >= v).any() or (out[1:] <= out[:-1]).any():
            raise BundleIntegrityError("output ids are out of range or not strictly increasing")
        head = self.stored("head_ids")
        if head.min(initial=0) < 0 or head.max(initial=0) >= v or (head[:, 1:] <= head[:, :-1]).any():
            raise BundleIntegrityError("head ids are out of range or not strictly increasing")
        is_out = np.zeros(v, dtype=bool)
        is_out[out] = True
        if not is_out[head].all() or (is_out & ~self.valid_input).any():
            raise BundleIntegrityError("a head candidate or an output is outside the output domain")
        if self.stored("alias_index").max(initial=0) > k:
            raise BundleIntegrityError("alias table values are out of range")
        clusters = self.cluster_gamma.shape[1]
        if not 1 <= clusters <= MAX_CLUSTERS or (self.tail_cluster >= clusters).any():
            raise BundleIntegrityError("tail cluster ids are out of range")
        gamma = self.stored("accept_gamma")
        # min over every exponent: NaN propagates, so one comparison tests finiteness too
        if not (np.isfinite(gamma.max(initial=0.0)) and gamma.min(initial=0.0) >= 0):
            raise BundleIntegrityError("acceptance exponents are negative or not finite")
        # precompute makes the smallest exponent of every row 0 (the best-fitting slot is always
        # accepted); a larger minimum only slows sampling down, exponentially: refuse it
        row_min = gamma[:, :-1].min(axis=1, initial=np.inf)
        if out.size > k:
            row_min = np.minimum(row_min, gamma[:, -1])
        if (row_min != 0).any():
            raise BundleIntegrityError("acceptance exponents are not normalised (min per row != 0)")
        # an empty tail must have zero proposal mass, or the sampler would loop
        if out.size == k:
            mass = _alias.realised_masses(self.alias_threshold, self.stored("alias_index"))
            if (mass[:, -1] != 0).any():
                raise BundleIntegrityError("tail slot has mass but the tail is empty")

    def __repr__(self) -> str:  # sizes only: the arrays are large
        return (f"SanTextTables(V={self.n_rows}, m={self.dim}, O={self.outputs.size}, "
                f"K={self.head_size})")

    # -- sizes -----------------------------------------------------------------------------------
    @property
    def n_rows(self) -> int:
        """V, the number of rows (vocabulary entries)."""
        return int(self.emb_q.shape[0])

    @property
    def dim(self) -> int:
        """m, the embedding dimension."""
        return int(self.emb_q.shape[1])

    @property
    def head_size(self) -> int:
        """K, the alias-table head size."""
        return int(self.stored("head_ids").shape[1])

    # -- views -----------------------------------------------------------------------------------
    def metric_embedding(self) -> np.ndarray:
        """The metric embedding, exactly (float32 scale × int8 code fits a float64 exactly).

        Returns
        -------
        np.ndarray of float64, shape (V, m)
            ``emb_scale[:, None] * emb_q``: the values every distance of the mechanism is defined by.
        """
        return self.emb_scale.astype(np.float64)[:, None] * self.emb_q.astype(np.float64)

    def stored_arrays(self) -> dict[str, np.ndarray]:
        """The arrays a bundle stores, by name (for ``ldptext.bundle.write_bundle``), compact.

        Head ids are stored as uint16 when every row id fits (V ≤ 65,536), alias slots as uint8
        when K + 1 ≤ 256, and the exponents as float32 when the tables were made from float32
        exponents (:func:`gamma_float32`); each narrowing is exact, so the bundle's tables equal these.

        Returns
        -------
        dict of str to np.ndarray
            One entry per name of :data:`STORED_ARRAYS`, in schema order.
        """
        out = {name: self.stored(name) for name in STORED_ARRAYS}
        if self.n_rows <= 1 << 16:
            out["head_ids"] = out["head_ids"].astype(np.uint16, copy=False)
        if self.head_size + 1 <= 1 << 8:
            out["alias_index"] = out["alias_index"].astype(np.uint8, copy=False)
        if self._gamma32:
            out["accept_gamma"] = out["accept_gamma"].astype(np.float32, copy=False)
        return out

    @property
    def gamma_is_float32(self) -> bool:
        """Whether the exponents are float32 values (stored as float32)."""
        return bool(self._gamma32)

    @classmethod
    def from_arrays(cls, arrays: Any) -> "SanTextTables":
        """Read the stored arrays from a mapping-like source and validate them.

        Parameters
        ----------
        arrays : object with ``array(name) -> np.ndarray``, or a mapping of str to np.ndarray
            A verified :class:`ldptext.bundle.Bundle` (whose ``array`` raises
            ``BundleFormatError`` for a missing name), or a plain dict.

        Returns
        -------
        SanTextTables
            The validated tables.
        """
        return cls(**stored_arrays_of(arrays))

    def sampler_arguments(self, *, epsilon: float, p: float) -> dict[str, Any]:
        """Keyword arguments of the C sampler's table (``ldptext._native.SantextTable``).

        Parameters
        ----------
        epsilon : float
            The metric ε (> 0).
        p : float
            SanText+'s probability of sanitizing a non-sensitive token (1.0 for SanText).

        Returns
        -------
        dict of str to object
            Keys :data:`SAMPLER_KEYWORDS` in order: the sampler's arrays as stored (borrowed, not
            copied: a compact bundle's narrow arrays, which the C sampler reads in place), then
            ``dim``, ``head_size``, ``epsilon`` and ``p``.
        """
        args: dict[str, Any] = {f.name: self.stored(f.name) for f in fields(self) if f.metadata["sampler"]}
        args.update(dim=self.dim, head_size=self.head_size, epsilon=float(epsilon), p=float(p))
        return args


def stored_arrays_of(arrays: Any) -> dict[str, np.ndarray]:
    """The schema's stored arrays of a source, by name: every required one, and the optional ones it has.

    Parameters
    ----------
    arrays : object with ``array(name)`` and ``arrays``, or a mapping of str to np.ndarray
        A verified :class:`ldptext.bundle.Bundle` (whose ``array`` raises ``BundleFormatError`` for
        a missing name), or a plain dict (``KeyError``).

    Returns
    -------
    dict of str to np.ndarray
        Keyword arguments of :class:`SanTextTables`.
    """
    if hasattr(arrays, "array"):
        get, present = arrays.array, (lambda name: name in arrays.arrays)
    else:
        get, present = arrays.__getitem__, arrays.__contains__
    return {name: get(name) for name in STORED_ARRAYS if name not in OPTIONAL_ARRAYS or present(name)}


#: The wide dtype of each array a bundle may store narrow (the attribute's dtype).
_WIDE: dict[str, np.dtype] = {f.name: f.metadata["dtype"] for f in fields(SanTextTables)
                              if f.metadata["narrow"] is not None}
#: Names of the arrays a SanText(+) bundle stores, in schema order.
STORED_ARRAYS: tuple[str, ...] = tuple(f.name for f in fields(SanTextTables) if f.metadata["stored"])
#: Those a bundle may lack (made before they existed); see :class:`SanTextTables`.
OPTIONAL_ARRAYS: tuple[str, ...] = tuple(f.name for f in fields(SanTextTables) if f.metadata["optional"])
#: Keyword list of the C sampler's table constructor; must equal ``_native.SANTEXT_TABLE_KEYWORDS``.
SAMPLER_KEYWORDS: tuple[str, ...] = tuple(
    f.name for f in fields(SanTextTables) if f.metadata["sampler"]) + ("dim", "head_size", "epsilon", "p")
