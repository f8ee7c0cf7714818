"""ADePT (corrected): the ℓ₂-norm-clipping baseline, run on DP-BART's encoder–decoder pipeline.

What ADePT is
-------------
Krishna et al. 2021, *ADePT: Auto-encoder based Differentially Private Text Transformation* (EACL):
an autoencoder whose latent vector z = ENC(x) ∈ Rⁿ is clipped in ℓ₂ norm and noised,
z' = z·min(1, C/‖z‖₂) + η, then decoded (Igamberdiev 2023, *Differentially Private Methods in NLP*,
PhD thesis, TU Darmstadt, §5.4.1, Eqns 5.1–5.2; §6.3.1 "Baseline (ADePT with adjustments)").

The flaw (stated, not reproduced)
---------------------------------
ADePT's Theorem 1 calibrates the Laplace noise with the ℓ₁ sensitivity Δ₁ = 2C, i.e. scale 2C/ε.
That is the ℓ₂ diameter of the clipping ball, not its ℓ₁ diameter: two vectors in the ball differ
by at most 2C in ℓ₂ norm, hence by at most √n·2C in ℓ₁ norm (Cauchy–Schwarz), with equality for
antipodal vectors ±(C/√n)(1, …, 1). The correct Δ₁ is 2C√n (Habernal 2021, *When differential
privacy meets NLP: The devil is in the detail*, EMNLP, Thm 5.1; thesis §5.4.1 and §6.3.1). With the
published scale b = 2C/ε the worst-case privacy loss is Δ₁/b = ε·√n: the mechanism is ε√n-LDP, not
ε-LDP (:func:`flawed_actual_epsilon`). (Read as scale C/ε — the radius itself taken as the
sensitivity — the loss would be ε·2√n: ``published_sensitivity=1.0``.) The thesis's alternative fix
is ℓ₁ clipping with Δ₁ = 2C (its Eqn 5.3); we keep ADePT's ℓ₂ clipping and correct the scale.

Our corrected version, on DP-BART's pipeline
-------------------------------------------
* **What is clipped.** The whole (L, d) encoder output of one chunk, flattened over its n = L·(d − |P|)
  unpruned coordinates (pruned hidden indices are constant 0, exactly as in DP-BART), clipped to the
  ℓ₂ ball of radius C. Not a single pooled vector as in ADePT's LSTM: DP-BART's decoder
  cross-attends to all L encoder positions and was trained on (L, d) outputs, so a pooled vector
  cannot be decoded without training a new decoder; clipping the full (L, d) block keeps the same
  decoder, the same fixed shapes (no length leak) and makes ADePT and DP-BART directly comparable at
  equal ε on the same bundle. The cost, which is the point of the comparison (thesis §6.3.2): n is
  large (15,360 for bart-base at L = 20), and Δ₁ = 2C√n grows with it.
* **Noise.** Laplace with ℓ₁ sensitivity 2C√n (pure ε), or the Gaussian with Δ₂ = 2C ((ε, δ);
  ADePT's classical Gaussian formula is valid only for ε < 1, thesis §6.3.1: we use the same
  discrete-Gaussian Rényi calibration as DP-BART). Both are the SDK's **exact discrete samplers on
  the CSPRNG** through :func:`ldptext.noise.privatize`: the clipped vector is put on the grid
  γ = C/2^k (k = 20) by truncation towards zero, and Σq² ≤ K² is checked in exact integer
  arithmetic, so the integer sensitivities are exactly 2K√n (ℓ₁) and 2K (ℓ₂): the grid changes no
  sensitivity, it moves each clipped value by less than γ (≈ 1e-6·C) towards zero before the noise,
  and the release (q + Y)·γ is post-processing of q + Y (:func:`.adept_noise.calibrate_l2_ball`).
* **Clip constant.** Default C = C_v·√n with C_v the bundle's value clip: the ball of that radius
  contains DP-BART's cube [−C_v, C_v]ⁿ and the Laplace scale 2C√n/ε = 2C_v·n/ε equals DP-BART's,
  so at equal ε both add the same noise and differ only in how the signal is bounded.

Guarantee: each chunk is (ε, 0)-LDP (Laplace) or (ε, δ)-LDP (Gaussian) with respect to any two
inputs; k chunks compose to (k·ε, k·δ). What is not protected is the same as for DP-BART
(:mod:`ldptext.dpbart`): the number of chunks, timing of decoding, and whatever was used to train the
model (public data only; ADePT's pre-training on the private data leaked it, thesis §5.4.4).

This is an evaluation baseline on the offline side; the runtime product is DP-BART. CLI (reads one
document per line on stdin, writes one JSON object per line)::

    python -m ldptext_precompute.dpbart.adept --bundle B.ldpb --epsilon 500 [--mechanism laplace]
        [--clip C] [--compare] [--allow-unsigned] [--seed S]
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np

from ldptext import noise as _noise
from ldptext import runtime as _runtime
from ldptext.errors import InputError, ParameterError
from ldptext.rng import Generator

from .adept_noise import calibrate_l2_ball, l2_ball_l1_sensitivity, privatize_l2_ball

__all__ = ["MECHANISM", "PUBLISHED_SENSITIVITY", "published_laplace_scale", "flawed_actual_epsilon",
           "corrected_l1_sensitivity", "corrected_laplace_scale", "corrected_calibration", "default_clip",
           "AdeptReport", "AdeptRewritten", "AdeptRewriter", "compare_rows", "main"]

MECHANISM = "adept-corrected"
#: ADePT's published ℓ₁ sensitivity, in units of C: Δ₁ = 2C (Krishna et al. 2021, Thm 1, as quoted
#: in Igamberdiev 2023, PhD thesis, §5.4.1 and §6.3.1)
PUBLISHED_SENSITIVITY = 2.0


def published_laplace_scale(epsilon: float, clip: float, *, published_sensitivity: float = PUBLISHED_SENSITIVITY
                            ) -> float:
    """ADePT's (flawed) Laplace scale b = s·C/ε, s = 2 as published (s = 1: the "C/ε" reading).

    For statements only; never used to add noise here.

    Parameters
    ----------
    epsilon : float
        The claimed ε > 0.
    clip : float
        The ℓ₂ radius C > 0.
    published_sensitivity : float
        s: the sensitivity the paper used, in units of C.

    Returns
    -------
    float
    """
    eps, _ = _noise.validate_privacy_parameters(epsilon, None, "laplace")
    if not (math.isfinite(clip) and clip > 0) or not published_sensitivity > 0:
        raise ParameterError("clip and published_sensitivity must be > 0")
    return published_sensitivity * float(clip) / eps


def flawed_actual_epsilon(epsilon_claimed: float, n: int, *,
                          published_sensitivity: float = PUBLISHED_SENSITIVITY) -> float:
    """The ε actually achieved by ADePT's published Laplace scale: ε_claimed·2√n/s (rounded up).

    With b = s·C/ε_claimed and the true ℓ₁ sensitivity 2C√n of the ℓ₂ ball, the worst-case privacy
    loss (attained by antipodal vectors with equal-magnitude coordinates) is 2C√n/b. As published
    (s = 2): ε_claimed·√n; read as scale C/ε (s = 1): ε_claimed·2√n. Habernal 2021, *When
    differential privacy meets NLP: The devil is in the detail* (EMNLP), Thm 5.1; Igamberdiev 2023,
    *Differentially Private Methods in NLP* (PhD thesis, TU Darmstadt), §5.4.1.

    Parameters
    ----------
    epsilon_claimed : float
        > 0.
    n : int
        Dimension of the clipped vector (> 0).
    published_sensitivity : float
        s, in units of C (default 2, as published).

    Returns
    -------
    float
        ≥ the exact value (one ulp up).
    """
    eps, _ = _noise.validate_privacy_parameters(epsilon_claimed, None, "laplace")
    if int(n) <= 0 or not published_sensitivity > 0:
        raise ParameterError("n and published_sensitivity must be > 0")
    return math.nextafter(eps * 2.0 * math.sqrt(int(n)) / published_sensitivity, math.inf)


def corrected_l1_sensitivity(clip: float, n: int) -> float:
    """Δ₁ = 2C√n of the ℓ₂ ball of radius C in n dimensions, rounded up.

    :func:`.adept_noise.l2_ball_l1_sensitivity`; Habernal 2021 (EMNLP), Thm 5.1.
    """
    return l2_ball_l1_sensitivity(clip, n)


def corrected_laplace_scale(epsilon: float, clip: float, n: int) -> float:
    """The corrected continuous Laplace scale 2C√n/ε (rounded up); the discrete noise uses ≥ this."""
    return _noise.laplace_scale(epsilon, corrected_l1_sensitivity(clip, n))


def corrected_calibration(epsilon: Any, *, clip: float, n: int, mechanism: str = "laplace", delta: Any = None,
                          grid_bits: int = _noise.DEFAULT_GRID_BITS,
                          allow_infinite_epsilon: bool = False) -> _noise.NoiseCalibration:
    """The corrected ADePT calibration: exact discrete noise for the ℓ₂ ball of radius C in n dimensions.

    Parameters
    ----------
    epsilon : float
        ε > 0 per release; ``math.inf`` is refused unless ``allow_infinite_epsilon=True``.
    clip : float
        The ℓ₂ radius C > 0.
    n : int
        Released coordinates per chunk, L·(d − |P|).
    mechanism : str
        ``"laplace"`` (Δ₁ = 2C√n, pure ε) or ``"gaussian"`` (Δ₂ = 2C, needs δ).
    delta : float or None
    grid_bits : int
    allow_infinite_epsilon : bool
        Evaluation only.

    Returns
    -------
    NoiseCalibration
        From :func:`.adept_noise.calibrate_l2_ball`; for Laplace ``scale`` ≥ 2C√n/ε and
        ``epsilon_bound`` ≤ ε exactly.

    Raises
    ------
    ParameterError
        C ≤ 0, ε ≤ 0 or NaN, ε = ∞ without the opt-in, bad δ, n ≤ 0.
    """
    eps, _ = _noise.validate_privacy_parameters(epsilon, delta, mechanism)
    _noise.require_finite_epsilon(eps, allow_infinite=bool(allow_infinite_epsilon), flag="allow_infinite_epsilon=True")
    return calibrate_l2_ball(mechanism, eps, delta, clip=clip, n=n, grid_bits=grid_bits)


def default_clip(value_clip: float, n: int) -> float:
    """C = C_v·√n: the ℓ₂ ball around DP-BART's cube [−C_v, C_v]ⁿ (same Laplace noise at equal ε)."""
    if not (math.isfinite(value_clip) and value_clip > 0) or int(n) <= 0:
        raise ParameterError("value clip and n must be > 0")
    return float(value_clip) * math.sqrt(int(n))


@dataclass(frozen=True)
class AdeptReport:
    """What one ADePT (corrected) rewrite guarantees, and what the published calibration would have.

    Attributes
    ----------
    mechanism : str
        ``"adept-corrected"``.
    noise : str
        ``"discrete_laplace"`` or ``"discrete_gaussian"``.
    epsilon, delta : float
        The corrected guarantee of each chunk.
    n, seq_len, hidden, n_pruned : int
    clip : float
        The ℓ₂ radius C.
    clip_norm : str
        ``"l2"``.
    sensitivity : float
        Δ₁ = 2C√n (Laplace) or Δ₂ = 2C (Gaussian).
    scale : float
        b or σ actually used.
    published_scale : float or None
        ADePT's Laplace scale 2C/ε at the same ε (Laplace only).
    published_epsilon_actual : float or None
        The ε that published scale really gives: ε·√n (Laplace only).
    epsilon_bound, delta_bound : float or None
    chunks : int
    truncated : bool
    total_epsilon, total_delta : float
    private, seeded, evaluation_only : bool
    notes : tuple of str
    """

    mechanism: str
    noise: str
    epsilon: float
    delta: float
    n: int
    seq_len: int
    hidden: int
    n_pruned: int
    clip: float
    clip_norm: str
    sensitivity: float
    scale: float
    published_scale: float | None
    published_epsilon_actual: float | None
    epsilon_bound: float | None
    delta_bound: float | None
    chunks: int
    truncated: bool
    total_epsilon: float
    total_delta: float
    private: bool
    seeded: bool
    evaluation_only: bool
    noise_parameter: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict:
        """Strict-JSON form (∞ as the string ``"inf"``)."""
        d = asdict(self)
        d["notes"] = list(self.notes)
        for k, v in d.items():
            if isinstance(v, float) and math.isinf(v):
                d[k] = "inf" if v > 0 else "-inf"
        return d

    def summary(self) -> str:
        """One line for people."""
        dl = f", δ={self.delta:g}" if self.noise == "discrete_gaussian" else ""
        flaw = ("" if self.published_epsilon_actual is None else
                f"; ADePT's published scale 2C/ε would give ε={self.published_epsilon_actual:.4g}, "
                f"not {self.epsilon:g}")
        return (f"{self.mechanism} ({self.noise}): ε={self.epsilon:g}{dl} per chunk, {self.chunks} chunk(s) → "
                f"ε={self.total_epsilon:g}; l2 clip C={self.clip:.4g}, n={self.n}, Δ={self.sensitivity:.4g}, "
                f"scale={self.scale:.4g}{flaw}" + ("; SEEDED: NOT private" if self.seeded else "")
                + ("; ε=∞: NO PRIVACY" if self.evaluation_only else ""))


@dataclass(frozen=True)
class AdeptRewritten:
    """A document rewritten by ADePT (corrected): ``text`` and its :class:`AdeptReport`."""

    text: str
    report: AdeptReport


class AdeptRewriter:
    """ADePT (corrected) over a loaded DP-BART :class:`ldptext.dpbart.Rewriter` (same encoder and decoder).

    Parameters
    ----------
    rewriter : ldptext.dpbart.Rewriter
        Supplies the encoder, decoder, tokenizer, L, d and the pruned indices; its own noise is not used.
    clip : float or None
        The ℓ₂ radius C; ``None``: :func:`default_clip` of the bundle's value clip.
    seed : int or None
        ``None``: private randomness (CSPRNG from the OS); an integer: reproducible, **not private**.
    ledger : ldptext.ledger.Ledger or None
        Charged k·ε (k chunks) per call before any output is returned.

    Notes
    -----
    Guarantee per chunk: (ε, 0)-LDP (Laplace, Δ₁ = 2C√n) or (ε, δ)-LDP (Gaussian, Δ₂ = 2C), any two
    inputs. Krishna et al. 2021 (EACL) corrected as in Habernal 2021 (EMNLP), Thm 5.1 and Igamberdiev
    2023, *Differentially Private Methods in NLP* (PhD thesis, TU Darmstadt), §6.3.1.
    """

    def __init__(self, rewriter: Any, *, clip: float | None = None, seed: int | None = None,
                 ledger: Any = None) -> None:
        self.rewriter = rewriter
        self.n = int(rewriter.n)
        self.clip = default_clip(rewriter.clip, self.n) if clip is None else float(clip)
        if not (math.isfinite(self.clip) and self.clip > 0):
            raise ParameterError("clip constant C must be a finite number > 0")
        self.ledger = ledger
        self._rng = Generator(seed=seed) if seed is not None else Generator()

    def calibration(self, epsilon: Any, delta: Any = None, mechanism: str = "laplace",
                    allow_infinite_epsilon: bool = False) -> _noise.NoiseCalibration:
        """:func:`corrected_calibration` for this rewriter's C and n."""
        return corrected_calibration(epsilon, clip=self.clip, n=self.n, mechanism=mechanism, delta=delta,
                                     allow_infinite_epsilon=allow_infinite_epsilon)

    def _chunks(self, text: str, long: str, index: int) -> tuple[list[list[int]], bool]:
        if not isinstance(text, str):
            raise InputError(f"document {index} is not a string ({type(text).__name__})")
        ids = self.rewriter.tokenizer.encode(text).tolist()
        cap = self.rewriter.config.capacity
        if len(ids) <= cap:
            return [ids], False
        if long == "refuse":
            raise InputError(f"document {index} has {len(ids)} tokens, more than the {cap} of one release")
        if long == "truncate":
            return [ids[:cap]], True
        return [ids[i:i + cap] for i in range(0, len(ids), cap)], False

    def encode_noised(self, chunks: Sequence[Sequence[int]], calib: _noise.NoiseCalibration) -> np.ndarray:
        """The releases: encoder (each chunk alone) → ℓ₂ clip → grid → exact discrete noise."""
        z = self.rewriter.encoder_outputs(chunks)
        return privatize_l2_ball(z, calib, self._rng, pruned=self.rewriter.pruned)

    def rewrite(self, text: str, **kwargs: Any) -> AdeptRewritten:
        """Rewrite one document; keyword arguments as :meth:`rewrite_batch`."""
        return self.rewrite_batch([text], **kwargs)[0]

    def rewrite_batch(self, texts: Sequence[str], *, epsilon: Any, delta: Any = None, mechanism: str = "laplace",
                      beam: int = 1, long: str = "split", allow_infinite_epsilon: bool = False
                      ) -> list[AdeptRewritten]:
        """Rewrite documents with ADePT (corrected); each chunk is one release.

        Parameters
        ----------
        texts : sequence of str
        epsilon, delta, mechanism
            Per release, as :func:`corrected_calibration`.
        beam : int
            1 (greedy) … 64.
        long : str
            ``"split"``, ``"truncate"`` or ``"refuse"`` (as :class:`ldptext.dpbart.Rewriter`).
        allow_infinite_epsilon : bool
            Evaluation only (no noise, the ℓ₂ clipping alone).

        Returns
        -------
        list of AdeptRewritten
        """
        if long not in ("split", "truncate", "refuse"):
            raise ParameterError(f"unknown long policy {long!r}")
        if isinstance(beam, bool) or not isinstance(beam, (int, np.integer)) or not 1 <= int(beam) <= 64:
            raise ParameterError("beam must be an integer between 1 and 64")
        if isinstance(texts, str):
            raise InputError("rewrite_batch expects a sequence of strings, not one string")
        calib = self.calibration(epsilon, delta, mechanism, allow_infinite_epsilon)
        per: list[tuple[list[list[int]], bool]] = [self._chunks(t, long, i) for i, t in enumerate(texts)]
        flat = [c for chunks, _ in per for c in chunks]
        texts_out = ([self.rewriter.tokenizer.decode_generated(s)
                      for s in self.rewriter.decode(self.encode_noised(flat, calib), beam=int(beam))]
                     if flat else [])
        results, pos = [], 0
        for chunks, trunc in per:
            parts = texts_out[pos:pos + len(chunks)]
            pos += len(chunks)
            results.append(AdeptRewritten(" ".join(p for p in parts if p), self._report(calib, len(chunks), trunc)))
        _runtime.charge(self.ledger, sum(r.report.total_epsilon for r in results),
                        min(1.0, sum(r.report.total_delta for r in results)),
                        f"adept-corrected batch of {len(results)} documents")
        return results

    def _report(self, calib: _noise.NoiseCalibration, chunks: int, truncated: bool) -> AdeptReport:
        lap = calib.mechanism == "laplace" and calib.private
        notes = list(calib.notes) + [
            "ADePT baseline with corrected sensitivity: l1 sensitivity of the l2 ball is 2C*sqrt(n), not the "
            "published 2C (Habernal 2021, Thm 5.1)"]
        if chunks > 1:
            notes.append("document split into chunks: each chunk is a separate release; the number of chunks is "
                         "not hidden")
        if self._rng.seeded:
            notes.append("seeded generator: reproducible and NOT private (tests and experiments only)")
        rw = self.rewriter
        return AdeptReport(
            mechanism=MECHANISM, noise=f"discrete_{calib.mechanism}", epsilon=calib.epsilon, delta=calib.delta,
            n=calib.n, seq_len=rw.seq_len, hidden=rw.hidden, n_pruned=len(rw.pruned), clip=calib.clip,
            clip_norm="l2", sensitivity=calib.sensitivity, scale=calib.scale,
            published_scale=published_laplace_scale(calib.epsilon, calib.clip) if lap else None,
            published_epsilon_actual=flawed_actual_epsilon(calib.epsilon, calib.n) if lap else None,
            epsilon_bound=calib.epsilon_bound, delta_bound=calib.delta_bound, chunks=chunks, truncated=truncated,
            total_epsilon=calib.epsilon * chunks, total_delta=min(1.0, calib.delta * chunks),
            private=calib.private, seeded=bool(self._rng.seeded), evaluation_only=not calib.private,
            noise_parameter=calib.noise_parameter, notes=tuple(notes))


def compare_rows(rewriter: Any, epsilon: float, *, delta: float | None = None, mechanism: str = "laplace",
                 clip: float | None = None) -> list[dict]:
    """Calibration side by side at one ε (no model run): DP-BART (bundle variant), ADePT corrected, ADePT as published.

    Parameters
    ----------
    rewriter : ldptext.dpbart.Rewriter
    epsilon : float
        Finite ε > 0 per release.
    delta : float or None
        For the Gaussian mechanism.
    mechanism : str
    clip : float or None
        ADePT's ℓ₂ radius (default :func:`default_clip`).

    Returns
    -------
    list of dict
        One row each: ``method``, ``clipping``, ``sensitivity``, ``noise_scale``, ``noise_std``,
        ``epsilon_claimed``, ``epsilon_actual``.
    """
    n = int(rewriter.n)
    c2 = default_clip(rewriter.clip, n) if clip is None else float(clip)
    dp = _noise.calibrate(mechanism, epsilon, delta, clip=rewriter.clip, n=n)
    ad = corrected_calibration(epsilon, clip=c2, n=n, mechanism=mechanism, delta=delta)
    rows = [
        {"method": f"dpbart-{rewriter.variant}", "clipping": f"value, C={rewriter.clip:g}",
         "sensitivity": dp.sensitivity, "noise_scale": dp.scale, "noise_std": math.sqrt(dp.variance),
         "epsilon_claimed": epsilon, "epsilon_actual": epsilon},
        {"method": MECHANISM, "clipping": f"l2 norm, C={c2:.4g}", "sensitivity": ad.sensitivity,
         "noise_scale": ad.scale, "noise_std": math.sqrt(ad.variance), "epsilon_claimed": epsilon,
         "epsilon_actual": epsilon},
    ]
    if mechanism == "laplace":
        b = published_laplace_scale(epsilon, c2)
        rows.append({"method": "adept-published (flawed, not runnable)", "clipping": f"l2 norm, C={c2:.4g}",
                     "sensitivity": PUBLISHED_SENSITIVITY * c2, "noise_scale": b, "noise_std": math.sqrt(2) * b,
                     "epsilon_claimed": epsilon, "epsilon_actual": flawed_actual_epsilon(epsilon, n)})
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: rewrite stdin lines with ADePT (corrected), or print the calibration comparison (``--compare``)."""
    ap = argparse.ArgumentParser(prog="python -m ldptext_precompute.dpbart.adept",
                                 description="ADePT (corrected sensitivity) baseline on a DP-BART bundle")
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--epsilon", type=float, required=True)
    ap.add_argument("--delta", type=float, default=None)
    ap.add_argument("--mechanism", choices=["laplace", "gaussian"], default="laplace")
    ap.add_argument("--clip", type=float, default=None, help="l2 radius C (default: value clip * sqrt(n))")
    ap.add_argument("--beam", type=int, default=1)
    ap.add_argument("--seed", type=int, default=None, help="reproducible, NOT private")
    ap.add_argument("--allow-unsigned", action="store_true")
    ap.add_argument("--allow-infinite-epsilon", action="store_true", help="no noise, NO privacy (evaluation only)")
    ap.add_argument("--compare", action="store_true", help="print DP-BART vs ADePT calibration rows and exit")
    args = ap.parse_args(argv)
    from ldptext.dpbart import Rewriter

    rw = Rewriter.load(args.bundle, allow_unsigned=args.allow_unsigned, threads=1)
    if args.compare:
        for row in compare_rows(rw, args.epsilon, delta=args.delta, mechanism=args.mechanism, clip=args.clip):
            print(json.dumps(row))
        return 0
    ad = AdeptRewriter(rw, clip=args.clip, seed=args.seed)
    lines = [ln.rstrip("\n") for ln in sys.stdin]
    for r in ad.rewrite_batch(lines, epsilon=args.epsilon, delta=args.delta, mechanism=args.mechanism,
                              beam=args.beam, allow_infinite_epsilon=args.allow_infinite_epsilon):
        print(json.dumps({"text": r.text, "report": r.report.to_dict()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
