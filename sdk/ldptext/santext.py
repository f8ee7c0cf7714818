"""SanText and SanText+ at runtime: token-level metric LDP (seed 000 §2.4; SPEC §2).

Guarantee (per token, neighbouring relation = any two tokens x, x' of the bundle's input domain):

* **SanText** — ε·d(x, x')-MLDP: Pr[M(x)=y] ≤ exp(ε·d(x,x'))·Pr[M(x')=y] for every output y, with
  d the Euclidean distance of the bundle's metric embedding (seed 000 Theorem 1): the public
  embedding rounded to int8 codes with a per-row scale, exposed exactly as ``Sanitizer.embeddings``.
* **SanText+** — (V_S, V_P, ε, ε₀)-UMLDP with ε₀ = ln(1/p) (seed 000 Theorem 2): for every protected
  output y ∈ V_P = V_S the bound above holds with an extra ε₀ when x and x' lie on different sides
  of the split; a non-sensitive token (V_N, the most frequent words by a public list) is released
  **in the clear with probability 1 − p**.

Documents: tokens are sanitized independently, so two documents of the same length n are
ε·Σᵢ d(xᵢ, x'ᵢ)-indistinguishable (+ε₀ per token pair across the split); the report states the worst
case n·(ε·D_max + ε₀). The number of tokens is not hidden. Out-of-vocabulary words map to the
bundle's ``<unk>`` / ``[UNK]`` input row and are sanitized from it; special tokens are never output.

Sampling is exact (see ``precompute/ldptext_precompute/santext/build.py`` and ``native/santext_sampler.c``): the realised
probabilities equal the formula up to the float64 tolerance stated in the report, with every output
keeping a positive probability at any ε. Randomness comes from :class:`ldptext.rng.Generator`.

Thread safety: a ``Sanitizer`` may be shared by threads; draws are serialised on its generator.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from . import alias as _alias
from ._fallback import distance_from_dot, row_sqnorms
from .bundle import read_bundle
from .errors import BundleFormatError, BundleIntegrityError, InputError
from .report import PrivacyReport, Sanitized
from .rng import Generator
from .tokenization import TextTokenizer

_ARRAYS = ("emb_q", "emb_scale", "outputs", "head_ids", "alias_threshold", "alias_index",
           "accept_gamma", "tail_floor", "keep_row", "sensitive", "valid_input")


class Sanitizer:
    """Sanitize text with SanText / SanText+ from a verified bundle. Use :meth:`load`."""

    def __init__(self, bundle, *, seed: int | None = None, backend: str = "auto",
                 ledger=None) -> None:
        self._bundle = bundle
        self.ledger = ledger
        self.manifest: dict = bundle.manifest
        a = {name: bundle.array(name) for name in _ARRAYS}
        self.mechanism: str = bundle.mechanism
        try:
            params = self.manifest["params"]
            self.epsilon: float = float(params["epsilon"])
            self.p: float | None = None if params.get("p") is None else float(params["p"])
            self.w: float | None = None if params.get("w") is None else float(params["w"])
            self.epsilon0: float = float(params.get("epsilon0", 0.0))
            self.head_size: int = int(params["head_size"])
            self.d_max: float = float(self.manifest["privacy"]["d_max"])
            self.tolerance: float = float(self.manifest["numeric"]["max_relative_error"])
        except (KeyError, TypeError, ValueError):
            raise BundleFormatError("SanText manifest lacks or malforms a required field") from None
        self._validate(a)
        self.outputs: np.ndarray = a["outputs"]
        self.sensitive: np.ndarray = a["sensitive"]
        self.valid_input: np.ndarray = a["valid_input"]
        a["emb_sqnorm"] = row_sqnorms(a["emb_q"])
        self._a = a
        self.n_rows: int = int(a["emb_q"].shape[0])
        self._embeddings: np.ndarray | None = None
        self._rng = Generator(seed=seed, backend=backend)
        self._table = self._rng.make_santext_table(
            emb_q=a["emb_q"], emb_scale=a["emb_scale"], emb_sqnorm=a["emb_sqnorm"],
            outputs=a["outputs"], head_ids=a["head_ids"],
            alias_threshold=a["alias_threshold"], alias_index=a["alias_index"],
            accept_gamma=a["accept_gamma"], tail_floor=a["tail_floor"],
            keep_row=a["keep_row"], dim=int(a["emb_q"].shape[1]), head_size=self.head_size,
            epsilon=self.epsilon, p=float(self.p) if self.p is not None else 1.0)
        self._vocab: list[str] | None = None
        self._tokenizer: TextTokenizer | None = None

    @classmethod
    def load(cls, path: str | Path, *, trusted_keys=None, allow_unsigned: bool = False,
             seed: int | None = None, backend: str = "auto", ledger=None) -> "Sanitizer":
        """Verify (signature, key, hashes) and memory-map a SanText(+) bundle.

        ``seed`` makes the output reproducible for tests and is **not private** (warns).
        ``ledger`` (an :class:`ldptext.ledger.Ledger`) is charged before any output is returned:
        each ``sanitize_batch`` call is one release of the sum of its documents' worst-case ε
        (``report.document_epsilon``), each ``sample_ids`` call one of n_ids·(ε·D_max + ε₀); a
        refused charge raises ``BudgetExceededError`` and nothing is returned.
        """
        bundle = read_bundle(path, trusted_keys=trusted_keys, allow_unsigned=allow_unsigned,
                             expect_mechanism=("santext", "santext+"))
        return cls(bundle, seed=seed, backend=backend, ledger=ledger)

    def _validate(self, a: dict) -> None:
        """Semantic checks beyond the signed hashes (a validly signed but inconsistent bundle is
        still refused)."""
        if not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise BundleIntegrityError("bundle epsilon is not a positive number")
        if self.mechanism == "santext+" and not (self.p is not None and 0 < self.p <= 1):
            raise BundleIntegrityError("bundle p is not in (0, 1]")
        v, dim = a["emb_q"].shape if a["emb_q"].ndim == 2 else (0, 0)
        shapes = {"emb_scale": (v,), "outputs": (a["outputs"].shape[0],),
                  "head_ids": (v, self.head_size), "alias_threshold": (v, self.head_size + 1),
                  "alias_index": (v, self.head_size + 1), "accept_gamma": (v, self.head_size + 1),
                  "tail_floor": (v,), "keep_row": (v,), "sensitive": (v,), "valid_input": (v,)}
        dtypes = {"emb_q": np.int8, "emb_scale": np.float32, "outputs": np.int32,
                  "head_ids": np.int32, "alias_threshold": np.uint32, "alias_index": np.uint16,
                  "accept_gamma": np.float64, "tail_floor": np.float64, "keep_row": np.uint8,
                  "sensitive": np.bool_, "valid_input": np.bool_}
        for name, dt in dtypes.items():
            if a[name].dtype != dt:
                raise BundleIntegrityError(f"array {name!r} has dtype {a[name].dtype}, expected "
                                           f"{np.dtype(dt)}")
        for name, shape in shapes.items():
            if a[name].shape != shape:
                raise BundleIntegrityError(f"array {name!r} has shape {a[name].shape}, expected "
                                           f"{shape}")
        if v == 0 or a["outputs"].size < self.head_size:
            raise BundleIntegrityError("bundle vocabulary or output domain is empty")
        if not np.isfinite(a["emb_scale"]).all() or (a["emb_scale"] < 0).any() \
                or not np.isfinite(a["tail_floor"]).all() or (a["tail_floor"] < 0).any():
            raise BundleIntegrityError("embeddings or tail bounds are not finite")
        out = a["outputs"]
        if (out < 0).any() or (out >= v).any() or (np.diff(out) <= 0).any():
            raise BundleIntegrityError("output ids are out of range or not strictly increasing")
        if (a["head_ids"] < 0).any() or (a["head_ids"] >= v).any() \
                or (np.diff(a["head_ids"], axis=1) <= 0).any():
            raise BundleIntegrityError("head ids are out of range or not strictly increasing")
        is_out = np.zeros(v, dtype=bool)
        is_out[out] = True
        if not is_out[a["head_ids"]].all() or (is_out & ~a["valid_input"]).any():
            raise BundleIntegrityError("a head candidate or an output is outside the output domain")
        if (a["alias_index"] > self.head_size).any():
            raise BundleIntegrityError("alias table values are out of range")
        gamma = a["accept_gamma"]
        if not (np.isfinite(gamma).all() and (gamma >= 0).all()):
            raise BundleIntegrityError("acceptance exponents are negative or not finite")
        # precompute makes the smallest exponent of every row 0 (the best-fitting slot is always
        # accepted); a larger minimum only slows sampling down, exponentially: refuse it
        tail_slot = gamma[:, -1] if out.size > self.head_size else np.inf
        if (np.minimum(gamma[:, :-1].min(axis=1), tail_slot) != 0).any():
            raise BundleIntegrityError("acceptance exponents are not normalised (min per row != 0)")
        if self.mechanism == "santext" and a["keep_row"].any():
            raise BundleIntegrityError("a SanText bundle cannot keep tokens in the clear")
        # an empty tail must have zero proposal mass, or the sampler would loop
        if out.size == self.head_size:
            mass = _alias.realised_masses(a["alias_threshold"], a["alias_index"])
            if (mass[:, -1] != 0).any():
                raise BundleIntegrityError("tail slot has mass but the tail is empty")

    @property
    def embeddings(self) -> np.ndarray:
        """The metric embedding, float64 [V, m]: exactly the values distances are computed from
        (per-row float32 scale × int8 code, see ``ldptext_precompute.santext.build.quantize_int8``)."""
        if self._embeddings is None:
            a = self._a
            e = a["emb_scale"].astype(np.float64)[:, None] * a["emb_q"].astype(np.float64)
            e.flags.writeable = False
            self._embeddings = e
        return self._embeddings

    # -- vocabulary and tokenization ---------------------------------------------------------
    @property
    def vocab(self) -> list[str]:
        if self._vocab is None:
            self._vocab = json.loads(self._bundle.blob("vocab.json").decode("utf-8"))
            if len(self._vocab) != self.n_rows:
                raise BundleIntegrityError("vocabulary length differs from the embeddings")
        return self._vocab

    @property
    def tokenizer(self) -> TextTokenizer:
        if self._tokenizer is None:
            self._tokenizer = TextTokenizer(self._bundle.blob("tokenizer.json").decode("utf-8"))
        return self._tokenizer

    def tokenize(self, text: str) -> np.ndarray:
        return self.tokenizer.encode(text)

    def detokenize(self, ids: np.ndarray) -> str:
        return self.tokenizer.decode(ids)

    # -- sampling ----------------------------------------------------------------------------
    def sample_ids(self, ids) -> np.ndarray:
        """Sanitize token ids (the primitive): one independent draw per id."""
        out = self._sample(ids)
        self._charge(out.size * (self.epsilon * self.d_max + self.epsilon0), f"santext ids x{out.size}")
        return out

    def _charge(self, epsilon: float, label: str) -> None:
        if self.ledger is not None and epsilon > 0:
            self.ledger.charge(epsilon, 0.0, label=label)

    def _sample(self, ids) -> np.ndarray:
        ids = np.asarray(ids)
        if ids.size and not np.issubdtype(ids.dtype, np.integer):
            raise InputError("token ids must be integers")
        flat = ids.reshape(-1).astype(np.int64)
        bad = (flat < 0) | (flat >= self.n_rows)
        if not bad.any():
            bad = ~self.valid_input[flat]
        if bad.any():
            raise InputError(f"token id at position {int(np.flatnonzero(bad)[0])} is not a valid "
                             f"input of this bundle (out of range or a special token)")
        return self._rng.santext_sample(self._table, flat.astype(np.int32)).reshape(ids.shape)

    def privacy_report(self, n_tokens: int) -> PrivacyReport:
        per_token = self.epsilon * self.d_max + self.epsilon0
        return PrivacyReport(
            mechanism=self.mechanism, notion="UMLDP" if self.mechanism == "santext+" else "MLDP",
            epsilon=self.epsilon, p=self.p, epsilon0=self.epsilon0, d_max=self.d_max,
            per_token_epsilon=per_token, n_tokens=int(n_tokens),
            document_epsilon=per_token * int(n_tokens), numeric_tolerance=self.tolerance,
            kept_in_clear_probability=(1.0 - self.p) if self.p is not None else None)

    def sanitize(self, text: str) -> Sanitized:
        """Sanitize one document. The result's text may leave the device."""
        return self.sanitize_batch([text])[0]

    def sanitize_batch(self, texts) -> list[Sanitized]:
        """Sanitize many documents with one sampler call (same order as the input)."""
        if isinstance(texts, str):
            raise InputError("sanitize_batch takes a list of documents, not one string")
        texts = list(texts)
        encoded = self.tokenizer.encode_batch(texts)
        lengths = [e.size for e in encoded]
        flat = np.concatenate(encoded) if encoded else np.empty(0, dtype=np.int32)
        out = self._sample(flat)
        pieces = np.split(out, np.cumsum(lengths)[:-1]) if encoded else []
        decoded = self.tokenizer.decode_batch(pieces) if pieces else []
        results = [Sanitized(text=t, report=self.privacy_report(n))
                   for t, n in zip(decoded, lengths)]
        self._charge(sum(r.report.document_epsilon for r in results),
                     f"santext batch of {len(results)} documents")
        return results

    # -- exact realised distribution ---------------------------------------------------------
    def log_probabilities(self, xs, *, chunk: int = 256) -> np.ndarray:
        """log Pr[M(x) = y] for every y of the vocabulary, as the sampler realises it: computed from
        the bundle's integer alias tables, acceptance exponents and metric embedding (float64),
        with the tail distances evaluated by the sampler's own formula."""
        xs = np.atleast_1d(np.asarray(xs, dtype=np.int64))
        out = np.empty((xs.size, self.n_rows))
        for start in range(0, xs.size, chunk):
            out[start:start + chunk] = self._log_probabilities(xs[start:start + chunk])
        return out

    def _log_probabilities(self, xs: np.ndarray) -> np.ndarray:
        a, k, outs = self._a, self.head_size, self.outputs
        mass = _alias.realised_masses(a["alias_threshold"][xs], a["alias_index"][xs])
        with np.errstate(divide="ignore"):
            log_q = np.log(mass.astype(np.float64))
        rows = np.arange(xs.size)
        lp = np.full((xs.size, self.n_rows), -np.inf)
        tail_count = outs.size - k
        if tail_count > 0:
            # <q_x, q_y> is an integer below 2^24 for dim < 1040, so a float32 product is exact
            # in any summation order (float64 beyond that); then the sampler's float64 formula
            dt = np.float32 if a["emb_q"].shape[1] < 1040 else np.float64
            dot = (a["emb_q"][xs].astype(dt) @ a["emb_q"][outs].astype(dt).T).astype(np.float64)
            d = distance_from_dot(a["emb_scale"][xs][:, None], a["emb_sqnorm"][xs][:, None],
                                  a["emb_scale"][outs][None, :], a["emb_sqnorm"][outs][None, :], dot)
            with np.errstate(invalid="ignore"):  # rows whose tail slot has mass 0: -inf
                lp[:, outs] = (log_q[:, k] - math.log(tail_count) - a["accept_gamma"][xs, k]
                               + self.epsilon / 2 * a["tail_floor"][xs])[:, None] \
                    - self.epsilon / 2 * d
        lp[rows[:, None], a["head_ids"][xs]] = log_q[:, :k] - a["accept_gamma"][xs, :k]
        m = lp.max(axis=1, keepdims=True)
        lp -= m + np.log(np.exp(lp - m).sum(axis=1, keepdims=True))
        keep = a["keep_row"][xs].astype(bool)
        if keep.any():  # SanText+ non-sensitive input: sanitized w.p. p, kept w.p. 1 - p
            kr = rows[keep]
            lp[kr] += math.log(self.p)
            if self.p < 1:
                lp[kr, xs[kr]] = np.logaddexp(lp[kr, xs[kr]], math.log1p(-self.p))
        return lp

    def probabilities(self, xs) -> np.ndarray:
        return np.exp(self.log_probabilities(xs))
