"""Meaning preservation: BERTScore per pair and the Fréchet distance of sentence embeddings per corpus.

Chim, Ive & Liakata, *Evaluating Synthetic Data Generation from User Generated Text* (Computational
Linguistics, 2025), §4 (Meaning preservation), with the packaged all-MiniLM-L6-v2 encoder in place of BERT
(the paper notes the metrics extend to other encoders):

* **BERTScore** (Zhang et al. 2020, *BERTScore: Evaluating Text Generation with BERT* (ICLR), §3): the
  contextual token vectors of the reference x (the original) and of the candidate x̂ (the sanitized
  text), L2-normalised; R = mean over x's tokens of the best cosine with a token of x̂, P = mean over x̂'s
  tokens of the best cosine with a token of x, F1 = 2PR / (P + R). Without idf weighting or baseline
  rescaling; the last layer of MiniLM; [CLS] and [SEP] excluded; at most 256 WordPiece tokens.
* **Fréchet distance** (Heusel et al. 2017, *GANs Trained by a Two Time-Scale Update Rule Converge to a
  Local Nash Equilibrium* (NeurIPS), §3; on sentence embeddings as Xiang et al. 2021, *Assessing Dialogue
  Systems with Distribution Distances* (Findings of ACL)): each corpus's sentence embeddings (mean-pooled,
  normalised MiniLM, :class:`..utility.SentenceEncoder`) fitted as a Gaussian N(μ, Σ);
  FD = ‖μ₁ − μ₂‖² + Tr(Σ₁ + Σ₂ − 2 (Σ₁ Σ₂)^{1/2}).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..utility import MINILM_DIM, SentenceEncoder

__all__ = ["bertscore", "frechet_distance", "TokenEncoder"]


def bertscore(reference: np.ndarray, candidate: np.ndarray) -> tuple[float, float, float]:
    """(precision, recall, F1) of greedy cosine matching between two token-vector matrices.

    Parameters
    ----------
    reference, candidate : numpy.ndarray, shape (n, d) and (m, d)
        Token vectors (normalised here).

    Returns
    -------
    tuple of float
        P, R, F1; all 0.0 when either side has no token.
    """
    if len(reference) == 0 or len(candidate) == 0:
        return 0.0, 0.0, 0.0
    ref = reference / np.maximum(np.linalg.norm(reference, axis=1, keepdims=True), 1e-12)
    cand = candidate / np.maximum(np.linalg.norm(candidate, axis=1, keepdims=True), 1e-12)
    sim = ref @ cand.T
    recall = float(sim.max(axis=1).mean())
    precision = float(sim.max(axis=0).mean())
    f1 = 0.0 if precision + recall <= 0 else 2 * precision * recall / (precision + recall)
    return precision, recall, f1


def frechet_distance(x: np.ndarray, y: np.ndarray) -> float:
    """Fréchet distance between Gaussians fitted to two samples of vectors (rows).

    Covariances are the unbiased sample covariances (ddof = 1); the matrix square root is scipy's
    ``sqrtm`` (its real part: imaginary round-off is dropped). Clipped at 0 from below.
    """
    from scipy.linalg import sqrtm

    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    mu = x.mean(axis=0) - y.mean(axis=0)
    sx, sy = np.atleast_2d(np.cov(x, rowvar=False)), np.atleast_2d(np.cov(y, rowvar=False))
    root = np.real(sqrtm(sx @ sy))
    return max(float(mu @ mu + np.trace(sx) + np.trace(sy) - 2.0 * np.trace(root)), 0.0)


class TokenEncoder(SentenceEncoder):
    """The MiniLM encoder of :class:`..utility.SentenceEncoder`, giving the last layer's token vectors and,
    from the same pass, the sentence embeddings ``SentenceEncoder.encode`` returns (mean over every token,
    [CLS] and [SEP] included, L2-normalised, rounded to float16)."""

    def token_states(self, texts: Sequence[str]) -> tuple[list[np.ndarray], np.ndarray]:
        """Per text, its WordPiece tokens' last-layer vectors without [CLS] / [SEP] (float32, (n_i, 384)),
        and the sentence embeddings (float32, (n, 384))."""
        encodings = self._tokenizer.encode_batch(list(texts))
        states: list[np.ndarray] = [np.zeros((0, MINILM_DIM), np.float32)] * len(encodings)
        pooled = np.zeros((len(encodings), MINILM_DIM), np.float32)
        lengths = np.array([len(e.ids) for e in encodings], dtype=np.int64)
        order = np.argsort(lengths, kind="stable")
        for start in range(0, len(order), self.batch_size):
            rows = order[start:start + self.batch_size]
            width = max(int(lengths[rows].max()), 1)
            ids = np.zeros((rows.size, width), dtype=np.int64)
            mask = np.zeros((rows.size, width), dtype=np.int64)
            for r, i in enumerate(rows):
                ids[r, :lengths[i]] = encodings[i].ids
                mask[r, :lengths[i]] = 1
            hidden = self._session.run(None, {"input_ids": ids, "attention_mask": mask,
                                              "token_type_ids": np.zeros_like(ids)})[0].astype(np.float64)
            for r, i in enumerate(rows):
                n = int(lengths[i])
                specials = np.asarray(encodings[i].special_tokens_mask, bool)
                states[i] = hidden[r, :n][~specials].astype(np.float32)
                mean = hidden[r, :n].mean(axis=0) if n else np.zeros(MINILM_DIM)
                mean /= max(float(np.linalg.norm(mean)), 1e-12)
                pooled[i] = mean.astype(np.float16).astype(np.float32)
        return states, pooled
