"""DP-BART runtime: document-level LDP rewriting on the device.

Mechanism of Igamberdiev & Habernal 2023, *DP-BART for Privatized Text Rewriting under Local
Differential Privacy* (Findings of ACL), as presented in Igamberdiev 2023, *Differentially Private
Methods in NLP* (PhD thesis, TU Darmstadt), §6.3.3–6.3.5.

Guarantee
---------
Each released chunk (at most L tokens of one document) is (ε, 0)-LDP with ``mechanism="laplace"`` or
(ε, δ)-LDP with ``mechanism="gaussian"`` with respect to **any** two inputs (local DP: the neighbouring
relation is "replace the whole chunk"). The mechanism is: encoder (int8 ONNX) → clip every value to
[−C, C] → set the bundle's pruned hidden indices to exactly 0 → add discrete noise from the CSPRNG to
the other n = L·(d − |P|) coordinates (:mod:`ldptext.noise`; Δ₁ = 2Cn, Δ₂ = 2C√n) → decoder (ONNX) with
past key/values. Everything after the noise is post-processing. A document split into k chunks is
k releases: the report composes them to (k·ε, k·δ) (basic composition), and the number of chunks
itself (≈ length / L) is visible. With ``long="truncate"`` the tail beyond L is dropped and
``report.truncated`` is True.

Each chunk is encoded and decoded **on its own** (batch size 1), never together with another
document: the int8 graphs quantize activations dynamically with one scale per input tensor, so in a
shared batch another document would change this chunk's release (encoder) or its decoded text
(decoder), and this document's output would depend on someone else's private text.

Length does not leak through the model: the encoder always gets L positions (padded), the
cross-attention mask is all ones over those L positions (no mask input exists in the decoder graph), and
the maximum output length is fixed by the bundle, never derived from the input.

What is not protected: the number of chunks (with ``long="split"``), timing side channels of the
decoder (decoding of a chunk stops early when it has ended), and anything about the text that the
caller reveals by other means. ``epsilon=math.inf`` adds no noise: it is refused unless
``allow_infinite_epsilon=True`` (evaluation only; the report says ``private=False``,
``evaluation_only=True``).

The noise is sampled exactly (integer arithmetic, rational parameters rounded towards more noise; see
:mod:`ldptext.noise`): the report's ε and δ hold for the noise actually drawn, with no numerical slack
(``noise_exact=True``, ``epsilon_slack=0``).

Thread safety: a ``Rewriter`` is immutable after ``load``; ONNX Runtime sessions allow concurrent
``run`` calls, the tokenizer is read-only, and ``ldptext.rng.Generator`` serialises its draws with a
lock. Several threads may call ``rewrite`` / ``rewrite_batch`` on one ``Rewriter`` at once.

Runtime dependencies: numpy, onnxruntime, tokenizers and the project's own modules. No torch.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from . import decoding as _decoding
from . import noise as _noise
from . import runtime as _runtime
from .dpbart_check import onnx_session, open_checked
from .dpbart_schema import MECHANISM, DPBartConfig, encoder_row
from .errors import InputError, ParameterError, WeakPrivacyError
from .rng import Generator
from .tokenization import TextTokenizer

if TYPE_CHECKING:  # pragma: no cover
    from .bundle import Bundle, BundleSource
    from .ledger import Ledger

__all__ = ["Rewriter", "Rewritten", "DPBartReport", "LONG_POLICIES", "onnx_session", "iter_rewrite"]

LONG_POLICIES = ("split", "truncate", "refuse")
#: Noise below this many C (standard deviation per coordinate, C the clip bound) is near identity:
#: each clipped coordinate keeps ±10% of its range, and the decoder sees almost the clean encoding.
#: A finite ε that gives less is refused unless ``allow_weak_privacy=True``. The thesis' settings
#: (ε ≤ 10,000 with n in the thousands) give 0.28 and more.
NEAR_IDENTITY_NOISE = 0.1


def relative_noise(calib: _noise.NoiseCalibration) -> float:
    """The noise's standard deviation per coordinate over C (0 without noise)."""
    return math.sqrt(calib.variance) / calib.clip


@dataclass(frozen=True)
class DPBartReport:
    """What one DP-BART rewrite guarantees.

    Attributes
    ----------
    mechanism : str
        ``"gaussian"`` or ``"laplace"``.
    noise : str
        ``"discrete_gaussian"`` or ``"discrete_laplace"``.
    variant : str
        The bundle's variant (``"clv"``, ``"pr"``, ``"pr+"``).
    epsilon, delta : float
        The guarantee of *each* chunk: (ε, δ)-LDP, neighbouring relation "replace the whole chunk".
    n : int
        Released informative coordinates per chunk, L·(d − |P|).
    seq_len, hidden, n_pruned : int
        L, d and |P|.
    clip : float
        C.
    sensitivity : float
        Δ₁ = 2Cn (Laplace) or Δ₂ = 2C√n (Gaussian).
    scale : float
        b (Laplace) or σ (Gaussian) actually used, in the units of z.
    sigma_analytic : float or None
        The continuous analytic-Gaussian σ for reference (the discrete noise uses ≥ that).
    grid_unit : float
        The grid of the discrete noise.
    delta_bound : float or None
        The δ proved for the discrete noise (≤ ``delta``).
    chunks : int
        k, the number of releases of this document.
    truncated : bool
        The input was cut to one chunk (``long="truncate"``).
    total_epsilon, total_delta : float
        The composed guarantee of the whole document over k releases (k·ε, min(1, k·δ)).
    private : bool
        False at ε = ∞ (no noise: evaluation only) and for weak privacy (``weak_privacy``).
    beam : int
        Beam width used (1 = greedy).
    max_output_tokens : int
        The fixed decoding length limit.
    notes : tuple of str
        Caveats in words.
    seeded : bool
        True when the noise came from a seeded generator (``seed=``): reproducible and **not
        private** (tests and experiments only).
    backend : str
        What drew the noise: ``"native"`` (the C extension) or ``"fallback"`` (numpy, the same
        distribution, much slower).
    evaluation_only : bool
        True only at ε = ∞ (``allow_infinite_epsilon=True``): no noise, **no privacy**, evaluation only.
    noise_exact : bool
        True: the noise is sampled exactly from the stated pmf (integer arithmetic only, Canonne,
        Kamath & Steinke 2020 Alg. 1–3), so no numerical slack is added to ε.
    noise_parameter : str
        The exact parameter in grid units: ``t = num/den`` (Laplace) or ``sigma^2 = t*m`` (Gaussian).
    sampler_parameters : tuple of (int, int) or None
        The same integers as given to the sampler (``None`` at ε = ∞).
    epsilon_bound : float or None
        The ε proved for the realised parameter (Laplace: 2Kn/t ≤ ε exactly; Gaussian: ε, with δ
        ``delta_bound``).
    epsilon_slack : float
        What sampling adds to ε: 0.0 (exact sampling).
    relative_noise : float
        The noise's standard deviation per coordinate over C (0 at ε = ∞).
    weak_privacy : bool
        True when ``relative_noise`` is below :data:`NEAR_IDENTITY_NOISE`: the decoder sees almost the
        clean encoding, so the output is close to the non-private rewrite (only with
        ``allow_weak_privacy=True``).

    Notes
    -----
    Igamberdiev & Habernal 2023, *DP-BART for Privatized Text Rewriting under Local Differential
    Privacy* (Findings of ACL), as presented in Igamberdiev 2023, *Differentially Private Methods in
    NLP* (PhD thesis, TU Darmstadt), §6.3.3–6.3.5; discrete noise: :mod:`ldptext.noise`.
    """

    mechanism: str
    noise: str
    variant: str
    epsilon: float
    delta: float
    n: int
    seq_len: int
    hidden: int
    n_pruned: int
    clip: float
    sensitivity: float
    scale: float
    sigma_analytic: float | None
    grid_unit: float
    delta_bound: float | None
    chunks: int
    truncated: bool
    total_epsilon: float
    total_delta: float
    private: bool
    beam: int
    max_output_tokens: int
    backend: str
    notes: tuple[str, ...] = field(default_factory=tuple)
    seeded: bool = False
    evaluation_only: bool = False
    noise_exact: bool = True
    noise_parameter: str = ""
    sampler_parameters: tuple[int, int] | None = None
    epsilon_bound: float | None = None
    epsilon_slack: float = 0.0
    relative_noise: float = math.inf
    weak_privacy: bool = False

    @property
    def sigma(self) -> float | None:
        """σ of the Gaussian mechanism (``None`` for Laplace)."""
        return self.scale if self.mechanism == "gaussian" else None

    @property
    def b(self) -> float | None:
        """The Laplace scale b (``None`` for Gaussian)."""
        return self.scale if self.mechanism == "laplace" else None

    def to_dict(self) -> dict:
        """JSON-ready form: every field plus ``sigma`` and ``b``.

        Returns
        -------
        dict
            Strict JSON: an infinite ε (evaluation only) is the string ``"inf"``, never ``Infinity``.
        """
        d = asdict(self)
        d["notes"] = list(self.notes)
        d["sampler_parameters"] = None if self.sampler_parameters is None else list(self.sampler_parameters)
        d["sigma"], d["b"] = self.sigma, self.b
        for k, v in d.items():
            if isinstance(v, float) and math.isinf(v):
                d[k] = "inf" if v > 0 else "-inf"
        return d

    def summary(self) -> str:
        """One line for people: per-chunk and composed guarantee, n, C, Δ and the noise scale.

        Returns
        -------
        str
        """
        dl = f", δ={self.delta:g}" if self.mechanism == "gaussian" else ""
        flags = "".join([" (truncated)" if self.truncated else "",
                         "; ε=∞: NO PRIVACY, evaluation only" if self.evaluation_only else "",
                         f"; WEAK PRIVACY: noise sd {self.relative_noise:.2g}·C, the output is close to the "
                         "non-private rewrite (allowed explicitly)" if self.weak_privacy else "",
                         "; SEEDED: reproducible, NOT private" if self.seeded else "",
                         "; exact noise, no ε slack" if self.noise_exact and not self.evaluation_only else ""])
        return (f"dpbart-{self.variant} {self.mechanism}: ε={self.epsilon:g}{dl} per chunk, {self.chunks} "
                f"chunk(s) → ε={self.total_epsilon:g}, δ={self.total_delta:g}; n={self.n}, C={self.clip:g}, "
                f"Δ={self.sensitivity:.4g}, scale={self.scale:.4g}{flags}")


@dataclass(frozen=True)
class Rewritten:
    """A rewritten document.

    Attributes
    ----------
    text : str
        The rewritten text: may leave the device (post-processing of the noised releases).
    report : DPBartReport
        What it guarantees: (ε, δ)-LDP per chunk, composed over ``report.chunks`` chunks.
    """

    text: str
    report: DPBartReport


class Rewriter(_runtime.Closable):
    """DP-BART rewriter over a verified ``dpbart`` bundle; create one with :meth:`load`.

    Implements :class:`ldptext.runtime.Runtime`, including ``close()`` and ``with``
    (:class:`ldptext.runtime.Closable`): after ``close()`` the ONNX sessions and the tokenizer are
    released and rewriting any document raises ``ClosedError`` before anything is released or charged.

    Parameters
    ----------
    bundle : Bundle
        A verified ``dpbart`` bundle (:func:`ldptext.runtime.open_bundle`).
    seed : int or None
        ``None`` (default) for private randomness; an integer for reproducible, **not private**
        output (tests only; warns ``SeededModeWarning``).
    threads : int or None
        ONNX Runtime intra-op threads (default: its own choice).
    ledger : Ledger or None
        Charged through :func:`ldptext.runtime.charge` before any output is returned.

    Attributes
    ----------
    mechanism : str
        ``"dpbart"``.
    key_id : str or None
        Id of the key that signed the bundle (``None`` only for an allowed unsigned bundle).
    manifest : dict
        The verified manifest.
    config : DPBartConfig
        The bundle's DP-BART section and pruned indices.
    seq_len, hidden : int
        L and d.
    clip : float
        C.
    variant : str
        ``"clv"``, ``"pr"`` or ``"pr+"``.
    max_output_tokens : int
        The fixed decoding length limit.
    n : int
        Informative coordinates per release, L·(d − |P|).

    Notes
    -----
    Guarantee of every release (one chunk of at most L tokens): (ε, 0)-LDP (Laplace) or (ε, δ)-LDP
    (Gaussian), neighbouring relation "replace the whole chunk"; a document of k chunks is k releases
    (k·ε, k·δ). Each chunk is encoded and decoded alone, so another document in the same call never
    changes its output. Igamberdiev & Habernal 2023, *DP-BART for Privatized Text Rewriting under Local
    Differential Privacy* (Findings of ACL), as presented in Igamberdiev 2023, *Differentially Private
    Methods in NLP* (PhD thesis, TU Darmstadt), §6.3.3–6.3.5.
    """

    # what close() drops: the ONNX sessions, the tokenizer and the random generator
    _RELEASED = ("_enc", "_init", "_dec", "_tok", "_rng")

    def __init__(self, bundle: "Bundle", *, seed: int | None = None, threads: int | None = None,
                 ledger: "Ledger | None" = None) -> None:
        _runtime.check_ledger_unit(ledger, "ldp")  # at load, not at the first release
        self.ledger = ledger
        self.mechanism: str = bundle.mechanism
        self.manifest: dict = bundle.manifest
        self.key_id: str | None = bundle.key_id
        # the one DP-BART check (ldptext.dpbart_check), also what bundle verify and bundle sign run
        checked = open_checked(bundle, threads=threads)
        self.config: DPBartConfig = checked.config
        self._enc, self._init, self._dec = checked.encoder, checked.decoder_init, checked.decoder
        self._tok = checked.tokenizer
        self._rng = Generator(seed=seed) if seed is not None else Generator()
        cfg = self.config
        self._pruned = np.asarray(cfg.pruned, dtype=np.int64)
        self._pruned.setflags(write=False)
        self.seq_len = cfg.seq_len
        self.hidden = cfg.hidden
        self.clip = cfg.clip
        self.variant = cfg.variant
        self.max_output_tokens = cfg.max_output_tokens
        sp = cfg.special
        self._pad, self._bos, self._eos, self._start = sp.pad, sp.bos, sp.eos, sp.decoder_start
        self._capacity = cfg.capacity
        self._dec_inputs = list(checked.decoder_inputs)
        self.n = _noise.effective_dim(self.seq_len, self.hidden, len(self._pruned))

    # ------------------------------------------------------------------ loading
    @staticmethod
    def check_bundle(bundle: "Bundle", *, every_row: bool = False) -> None:
        """What ``bundle sign`` and ``bundle verify`` check (:func:`ldptext.bundle_check.check_parameters`):
        the one DP-BART check that every construction runs too (:func:`ldptext.dpbart_check.open_checked`:
        the section against the arrays, the graphs against the stated L, d, layers, heads, head size
        and output limit). ``every_row`` changes nothing (a DP-BART bundle has no rows).

        Raises
        ------
        BundleFormatError, ParameterMismatchError
            As :func:`ldptext.dpbart_check.open_checked`.
        """
        open_checked(bundle, threads=1)

    @classmethod
    def load(cls, path: "BundleSource", *, trusted_keys: Iterable[Any] | None = None,
             allow_unsigned: bool = False, seed: int | None = None, threads: int | None = None,
             ledger: "Ledger | None" = None, expect: Any = None) -> "Rewriter":
        """Verify and load a ``dpbart`` bundle (``with Rewriter.load(...) as rw:`` closes it after use).

        Parameters
        ----------
        path : str, os.PathLike, bytes, bytearray or memoryview
            The bundle file, or its content (verified exactly as a file is).
        trusted_keys : iterable or None
            Public keys the signer must be among; ``None`` means the local trust store.
        allow_unsigned : bool
            Accept an unsigned development bundle (warns ``UnsignedBundleWarning``).
        seed : int or None
            Reproducible noise for tests; **not private** (warns ``SeededModeWarning``).
        threads : int or None
            ONNX Runtime intra-op threads (default: its own choice).
        ledger : Ledger or None
            Charged before any output is returned: each ``rewrite_batch`` call is one release of
            Σ k·ε and Σ k·δ over its documents (k chunks each); a refused charge raises
            ``BudgetExceededError`` and nothing is returned.
        expect : BundleExpectation, mapping or None
            The application's pins (:class:`ldptext.runtime.BundleExpectation`: mechanism, bundle id,
            minimum format version), checked after verification.

        Returns
        -------
        Rewriter
            Ready to rewrite.

        Raises
        ------
        BundleError
            Missing file, bad signature, untrusted key, wrong mechanism, a corrupted bundle, or a
            malformed DP-BART section, graph or tokenizer (a ``BundleError`` subclass says which;
            ``BundleExpectationError`` for an unmet ``expect``).
        ParameterError
            ``expect`` itself is malformed.

        Notes
        -----
        Guarantee of every release: (ε, δ)-LDP per chunk, neighbouring relation "replace the whole
        chunk"; Igamberdiev & Habernal 2023, *DP-BART for Privatized Text Rewriting under Local
        Differential Privacy* (Findings of ACL), as presented in Igamberdiev 2023, *Differentially
        Private Methods in NLP* (PhD thesis, TU Darmstadt), §6.3.3–6.3.5.
        """
        bundle = _runtime.open_bundle(path, mechanisms=(MECHANISM,), trusted_keys=trusted_keys,
                                      allow_unsigned=allow_unsigned, expect=expect)
        return cls(bundle, seed=seed, threads=threads, ledger=ledger)

    @property
    def pruned(self) -> np.ndarray:
        """Pruned hidden indices P.

        Returns
        -------
        np.ndarray of int64, shape (|P|,), read-only
            Zero in every release, for every token of every document.
        """
        return self._pruned

    @property
    def tokenizer(self) -> TextTokenizer:
        """The bundle's tokenizer (read-only use)."""
        return self._tok

    # ------------------------------------------------------------------ public API
    def rewrite(self, text: str, *, epsilon: float, delta: float | None = None, mechanism: str = "gaussian",
                beam: int = 1, long: str = "split", allow_infinite_epsilon: bool = False,
                allow_weak_privacy: bool = False) -> Rewritten:
        """Rewrite one document with (ε, δ)-LDP per chunk.

        Parameters
        ----------
        text : str
            The private document.
        epsilon : float
            ε per release, finite and > 0. ``math.inf`` (or anything that overflows to it, e.g.
            ``float("1e400")``, ``10**400``) means no noise and no privacy: refused unless
            ``allow_infinite_epsilon=True``.
        delta : float or None
            δ per release, in (0, 1), for ``mechanism="gaussian"``; Laplace is pure ε.
        mechanism : str
            ``"gaussian"`` (discrete Gaussian) or ``"laplace"`` (discrete Laplace).
        beam : int
            Beam width, 1–64 (1 = greedy).
        long : str
            Documents longer than one chunk: ``"split"`` (k releases), ``"truncate"`` or ``"refuse"``.
        allow_infinite_epsilon : bool
            Evaluation only: accept ε = ∞ (no noise; the report says ``private=False``,
            ``evaluation_only=True``).
        allow_weak_privacy : bool
            Accept a finite ε whose noise is below :data:`NEAR_IDENTITY_NOISE`·C per coordinate (the
            output is close to the non-private rewrite; the report says ``weak_privacy=True``).

        Returns
        -------
        Rewritten
            The text and its :class:`DPBartReport` (with ``seeded``, ``evaluation_only``,
            ``noise_exact``, ``noise_parameter``, ``epsilon_slack``).

        Raises
        ------
        ParameterError
            A parameter is out of range; ε = ∞ without ``allow_infinite_epsilon=True``.
        WeakPrivacyError
            The noise is near identity without ``allow_weak_privacy=True``.
        InputError
            Not a string, or too long under ``long="refuse"`` (the text is never quoted).
        BudgetExceededError
            The ledger refused the charge; nothing is returned.

        Notes
        -----
        Guarantee: each chunk is (ε, 0)-LDP (Laplace) or (ε, δ)-LDP (Gaussian), neighbouring relation
        "replace the whole chunk"; k chunks compose to (k·ε, k·δ). Igamberdiev & Habernal 2023,
        *DP-BART for Privatized Text Rewriting under Local Differential Privacy* (Findings of ACL), as
        presented in Igamberdiev 2023, *Differentially Private Methods in NLP* (PhD thesis, TU
        Darmstadt), §6.3.3–6.3.5.

        The stated numbers are exact: the noise is an integer vector on the grid C/2^k, sampled in
        integer arithmetic only from the exact discrete Laplace with rational scale t = num/den
        (2Kn/t ≤ ε holds exactly) or the exact discrete Gaussian with integer σ² = t·m ≥ the
        calibrated σ² (Canonne, Kamath & Steinke 2020, *The Discrete Gaussian for Differential
        Privacy* (NeurIPS), Alg. 1–3, Thm 14 and Prop. 12); no floating-point rounding enters the
        noise, so the report's ``epsilon_slack`` is 0 and ``noise_exact`` is True.
        """
        return self.rewrite_batch([text], epsilon=epsilon, delta=delta, mechanism=mechanism, beam=beam,
                                  long=long, allow_infinite_epsilon=allow_infinite_epsilon,
                                  allow_weak_privacy=allow_weak_privacy)[0]

    def rewrite_batch(self, texts: Sequence[str], *, epsilon: float, delta: float | None = None,
                      mechanism: str = "gaussian", beam: int = 1, long: str = "split",
                      allow_infinite_epsilon: bool = False, allow_weak_privacy: bool = False) -> list[Rewritten]:
        """Rewrite several documents (same order); each chunk of each document is its own release.

        Parameters
        ----------
        texts : sequence of str
            The private documents (not one string).
        epsilon, delta, mechanism, beam, long, allow_infinite_epsilon, allow_weak_privacy
            As :meth:`rewrite`.

        Returns
        -------
        list of Rewritten, same length and order as ``texts``

        Raises
        ------
        ParameterError, InputError, BudgetExceededError
            As :meth:`rewrite`; the ledger is charged Σ k·ε, min(1, Σ k·δ) once for the call.

        Notes
        -----
        Guarantee: as :meth:`rewrite`, per chunk and per document. Every chunk is encoded, noised
        with independent draws and decoded on its own, so the output for one document is the same
        whatever the other documents of the call are (given the same random draws). Igamberdiev &
        Habernal 2023, *DP-BART for Privatized Text Rewriting under Local Differential Privacy*
        (Findings of ACL), as presented in Igamberdiev 2023, *Differentially Private Methods in NLP*
        (PhD thesis, TU Darmstadt), §6.3.3–6.3.5.
        """
        calib, beam, long = self._check(epsilon, delta, mechanism, beam, long, allow_infinite_epsilon,
                                        allow_weak_privacy)
        if isinstance(texts, str):
            raise InputError("rewrite_batch expects a sequence of strings, not one string")
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise InputError(f"document {i} is not a string ({type(t).__name__})", document=i)
        chunk_ids: list[list[int]] = []
        owners: list[int] = []
        truncated: list[bool] = []
        for i, t in enumerate(texts):
            chunks, trunc = self._chunks(t, long, i)
            chunk_ids += chunks
            owners += [i] * len(chunks)
            truncated.append(trunc)
        outputs = self._run_chunks(chunk_ids, calib, beam) if chunk_ids else []
        per_doc: list[list[str]] = [[] for _ in texts]
        for owner, out in zip(owners, outputs):
            per_doc[owner].append(out)
        results = [Rewritten(" ".join(s for s in parts if s),
                             self._report(calib, len(parts), truncated[i], beam))
                   for i, parts in enumerate(per_doc)]
        _runtime.charge(self.ledger, sum(r.report.total_epsilon for r in results),
                        min(1.0, sum(r.report.total_delta for r in results)),
                        f"dpbart batch of {len(results)} documents")
        return results

    def encoder_inputs(self, chunks: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
        """Fixed-shape encoder input ids and attention mask: ``[bos] content [eos] pad…`` per chunk.

        Parameters
        ----------
        chunks : sequence of sequence of int
            B chunks of content token ids, each at most L − 2 (L − 1 without bos) long.

        Returns
        -------
        ids : np.ndarray of int64, shape (B, L)
        mask : np.ndarray of int64, shape (B, L)
            1 over ``[bos] content [eos]``, 0 over the padding.

        Raises
        ------
        InputError
            A chunk does not fit in L positions.

        Notes
        -----
        The shape depends only on the number of chunks, never on their lengths: the encoder always
        sees L positions, so the length of a chunk does not reach the model (Igamberdiev & Habernal
        2023, *DP-BART for Privatized Text Rewriting under Local Differential Privacy* (Findings of
        ACL), as presented in Igamberdiev 2023, *Differentially Private Methods in NLP* (PhD thesis,
        TU Darmstadt), §6.3.3–6.3.5).
        """
        b = len(chunks)
        ids = np.full((b, self.seq_len), self._pad, dtype=np.int64)
        mask = np.zeros((b, self.seq_len), dtype=np.int64)
        for r, content in enumerate(chunks):
            try:
                ids[r], mask[r] = encoder_row(content, seq_len=self.seq_len, pad=self._pad, bos=self._bos,
                                              eos=self._eos)
            except ValueError:
                raise InputError("chunk longer than the sequence length") from None  # guarded by _chunks
        return ids, mask

    def decoder_settings(self) -> dict:
        """Everything the decoder is run with: identical for every input.

        Returns
        -------
        dict
            ``cross_attention_mask`` (``"all-ones"``), ``cross_positions`` (L), ``max_output_tokens``,
            ``decoder_start`` and ``graph_inputs`` (the decoder graph's input names: no mask).

        Notes
        -----
        The output length must not be derived from the input: the maximum is fixed by the bundle and
        cross-attention attends to all L positions (Igamberdiev & Habernal 2023, *DP-BART for
        Privatized Text Rewriting under Local Differential Privacy* (Findings of ACL), as presented
        in Igamberdiev 2023, *Differentially Private Methods in NLP* (PhD thesis, TU Darmstadt),
        §6.3.3–6.3.5).
        """
        return {"cross_attention_mask": "all-ones", "cross_positions": self.seq_len,
                "max_output_tokens": self.max_output_tokens, "decoder_start": self._start,
                "graph_inputs": list(self._dec_inputs)}

    def encode_noised(self, chunks: Sequence[Sequence[int]], calib: _noise.NoiseCalibration) -> np.ndarray:
        """The private releases z̃: encoder → clip → prune → discrete noise, each chunk on its own.

        Parameters
        ----------
        chunks : sequence of sequence of int
            B chunks of content token ids (see :meth:`encoder_inputs`).
        calib : NoiseCalibration
            From :func:`ldptext.noise.calibrate` with this rewriter's C and n.

        Returns
        -------
        z : np.ndarray of float32, shape (B, L, d)
            Values on the noise grid; pruned hidden indices exactly 0. Row i depends only on chunk i
            and on its own n independent draws (the draws of row i are the i-th block of n).

        Notes
        -----
        Guarantee: each row is (ε, 0)-LDP (Laplace) or (ε, δ)-LDP (Gaussian) for its chunk,
        neighbouring relation "replace the whole chunk" (Δ₁ = 2Cn, Δ₂ = 2C√n). Igamberdiev &
        Habernal 2023, *DP-BART for Privatized Text Rewriting under Local Differential Privacy*
        (Findings of ACL), as presented in Igamberdiev 2023, *Differentially Private Methods in NLP*
        (PhD thesis, TU Darmstadt), §6.3.3–6.3.5; discrete noise: :func:`ldptext.noise.privatize`.
        """
        return _noise.privatize(self.encoder_outputs(chunks), calib, self._rng, pruned=self._pruned)

    def encoder_outputs(self, chunks: Sequence[Sequence[int]]) -> np.ndarray:
        """Raw encoder outputs z (not private: never release them), one encoder run per chunk.

        Parameters
        ----------
        chunks : sequence of sequence of int
            B chunks of content token ids (see :meth:`encoder_inputs`).

        Returns
        -------
        z : np.ndarray of float32, shape (B, L, d)

        Notes
        -----
        Each chunk runs alone because the int8 graph quantizes activations dynamically
        (``DynamicQuantizeLinear`` takes one scale from the whole input tensor): in a shared batch,
        another document would change this chunk's z and so its release, breaking the per-document
        guarantee of Igamberdiev & Habernal 2023, *DP-BART for Privatized Text Rewriting under Local
        Differential Privacy* (Findings of ACL), as presented in Igamberdiev 2023, *Differentially
        Private Methods in NLP* (PhD thesis, TU Darmstadt), §6.3.3–6.3.5.
        """
        ids, mask = self.encoder_inputs(chunks)
        out = np.empty((len(chunks), self.seq_len, self.hidden), dtype=np.float32)
        for r in range(len(chunks)):
            out[r] = self._enc.run(None, {"input_ids": ids[r:r + 1], "attention_mask": mask[r:r + 1]})[0][0]
        return out

    def decode(self, z: np.ndarray, *, beam: int = 1) -> list[list[int]]:
        """Decode released encoder outputs to token ids, one chunk at a time.

        Parameters
        ----------
        z : np.ndarray of float, shape (B, L, d)
            Released (noised) encoder outputs, e.g. from :meth:`encode_noised`.
        beam : int
            Beam width (1 = greedy, :func:`ldptext.decoding.greedy`; otherwise
            :func:`ldptext.decoding.beam_search`).

        Returns
        -------
        list of list of int, length B
            Generated ids per chunk, without start and end tokens; at most ``max_output_tokens``.

        Notes
        -----
        Post-processing of the release: adds no privacy cost. Each chunk is decoded alone for the
        reason given in :meth:`encoder_outputs` (the int8 decoder graphs quantize activations with one
        scale per batch tensor too), so a chunk's text is a function of its own release only.
        Igamberdiev & Habernal 2023, *DP-BART for Privatized Text Rewriting under Local Differential
        Privacy* (Findings of ACL), as presented in Igamberdiev 2023, *Differentially Private Methods in
        NLP* (PhD thesis, TU Darmstadt), §6.3.3–6.3.5.
        """
        z = np.asarray(z, dtype=np.float32)
        seqs: list[list[int]] = []
        for i in range(z.shape[0]):
            if beam == 1:
                step, _ = self._decoder_state(z[i:i + 1], copies=1)
                seqs.append(_decoding.greedy(step, 1, self._start, self._eos, self.max_output_tokens)[0])
            else:
                step, reorder = self._decoder_state(z[i:i + 1], copies=beam)
                seqs.append(_decoding.beam_search(step, reorder, beams=beam, start=self._start, eos=self._eos,
                                                  max_len=self.max_output_tokens))
        return seqs

    # ------------------------------------------------------------------ internals
    def _check(self, epsilon: Any, delta: Any, mechanism: str, beam: Any, long: str,
               allow_infinite_epsilon: bool = False,
               allow_weak_privacy: bool = False) -> tuple[_noise.NoiseCalibration, int, str]:
        if long not in LONG_POLICIES:
            raise ParameterError(f"long must be one of {LONG_POLICIES}, got {long!r}")
        if isinstance(beam, bool) or not isinstance(beam, (int, np.integer)) or not 1 <= int(beam) <= 64:
            raise ParameterError("beam must be an integer between 1 and 64")
        eps, _ = _noise.validate_privacy_parameters(epsilon, delta, mechanism)
        _noise.require_finite_epsilon(eps, allow_infinite=bool(allow_infinite_epsilon),
                                      flag="allow_infinite_epsilon=True")
        calib = _noise.calibrate(mechanism, eps, delta, clip=self.clip, n=self.n)
        rel = relative_noise(calib)
        if calib.private and rel < NEAR_IDENTITY_NOISE and not allow_weak_privacy:
            raise WeakPrivacyError(
                f"epsilon {eps:g} adds noise of only {rel:.2g}·C per coordinate (below "
                f"{NEAR_IDENTITY_NOISE:g}·C): the output would be close to the non-private rewrite; use a "
                "smaller epsilon, or allow_weak_privacy=True (--allow-weak-privacy) to accept it (every "
                "report will say so)")
        return calib, int(beam), long

    def _chunks(self, text: str, long: str, index: int) -> tuple[list[list[int]], bool]:
        try:
            ids = self._tok.encode(text).tolist()
        except InputError:
            raise InputError(f"document {index} could not be tokenized", document=index) from None
        cap = self._capacity
        if len(ids) <= cap:
            return [ids], False
        if long == "refuse":
            raise InputError(f"document {index} has {len(ids)} tokens, more than the {cap} that fit in "
                             f"one release (L={self.seq_len}); use long='split' or 'truncate'", document=index)
        if long == "truncate":
            return [ids[:cap]], True
        return [ids[i:i + cap] for i in range(0, len(ids), cap)], False

    def _run_chunks(self, chunks: list[list[int]], calib: _noise.NoiseCalibration, beam: int) -> list[str]:
        z = self.encode_noised(chunks, calib)
        # the decoder also runs one chunk at a time (inside decode): the int8 decoder graphs quantize
        # their activations with one scale per batch tensor, so decoding chunks together would let one
        # document's release change another document's text
        return [self._tok.decode_generated(s) for s in self.decode(z, beam=beam)]

    def _decoder_state(self, z1: np.ndarray, copies: int
                       ) -> tuple[_decoding.StepFunction, Callable[[np.ndarray], None]]:
        """Step and reorder closures over the ONNX decoder for one chunk (``copies`` rows: beams)."""
        cross = self._init.run(None, {"z": z1.astype(np.float32)})
        if copies > 1:
            cross = [np.repeat(c, copies, axis=0) for c in cross]
        cfg = self.config
        past = [np.zeros((copies, cfg.heads, 0, cfg.head_dim), dtype=np.float32) for _ in range(2 * cfg.n_layers)]

        def step(tokens: np.ndarray) -> np.ndarray:
            nonlocal past
            feeds = dict(zip(self._dec_inputs, [tokens.reshape(-1, 1).astype(np.int64), *past, *cross]))
            out = self._dec.run(None, feeds)
            past = out[1:]
            return out[0]

        def reorder(parents: np.ndarray) -> None:
            nonlocal past
            past = [p[parents] for p in past]

        return step, reorder

    def _report(self, calib: _noise.NoiseCalibration, chunks: int, truncated: bool, beam: int) -> DPBartReport:
        notes = list(calib.notes)
        if chunks > 1:
            notes.append("document split into chunks: each chunk is a separate release (basic composition); "
                         "the number of chunks is not hidden")
        if truncated:
            notes.append(f"input truncated to the first {self._capacity} tokens")
        if self._rng.seeded:
            notes.append("seeded generator: reproducible and NOT private (tests and experiments only)")
        return DPBartReport(
            mechanism=calib.mechanism, noise=f"discrete_{calib.mechanism}", variant=self.variant,
            epsilon=calib.epsilon, delta=calib.delta, n=calib.n, seq_len=self.seq_len, hidden=self.hidden,
            n_pruned=len(self._pruned), clip=calib.clip, sensitivity=calib.sensitivity, scale=calib.scale,
            sigma_analytic=calib.sigma_analytic, grid_unit=calib.grid_unit, delta_bound=calib.delta_bound,
            chunks=chunks, truncated=truncated, total_epsilon=calib.epsilon * chunks,
            total_delta=min(1.0, calib.delta * chunks), beam=beam,
            private=calib.private and relative_noise(calib) >= NEAR_IDENTITY_NOISE,
            max_output_tokens=self.max_output_tokens, backend=self._rng.backend, notes=tuple(notes),
            seeded=bool(self._rng.seeded),
            evaluation_only=not calib.private, noise_exact=calib.noise_exact,
            noise_parameter=calib.noise_parameter, sampler_parameters=calib.sampler_parameters,
            epsilon_bound=calib.epsilon_bound, epsilon_slack=calib.epsilon_slack,
            relative_noise=relative_noise(calib),
            weak_privacy=calib.private and relative_noise(calib) < NEAR_IDENTITY_NOISE)


def iter_rewrite(rewriter: Rewriter, texts: Iterable[str], *, batch_size: int = 32,
                 **kwargs: Any) -> Iterator[Rewritten]:
    """Stream results for an iterable of documents, ``batch_size`` at a time, in order.

    Parameters
    ----------
    rewriter : Rewriter
    texts : iterable of str
    batch_size : int
        Documents per :meth:`Rewriter.rewrite_batch` call (one ledger charge each).
    **kwargs
        Passed to :meth:`Rewriter.rewrite_batch` (``epsilon``, ``delta``, ...).

    Yields
    ------
    Rewritten
        One per document, in input order; guarantee as :meth:`Rewriter.rewrite_batch`.
    """
    batch: list[str] = []
    for t in texts:
        batch.append(t)
        if len(batch) >= batch_size:
            yield from rewriter.rewrite_batch(batch, **kwargs)
            batch = []
    if batch:
        yield from rewriter.rewrite_batch(batch, **kwargs)
