"""Baselines (random replacement, CMP/FBDD) and the utility metrics (BLEU, classifier)."""
import math
import warnings

import numpy as np
import pytest

from ldptext_precompute.evaluation.baselines import (CMPMechanism, cmp_noise, gamma_integer_shape,
                                          random_replacement, standard_normal,
                                          uniform_open_closed)
from ldptext_precompute.bleu import bleu_tokenize, corpus_bleu
from ldptext_precompute.evaluation.utility import train_and_score
from ldptext.rng import Generator, SeededModeWarning


@pytest.fixture
def gen():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        return Generator(seed=11)


def test_uniforms_are_in_the_half_open_unit_interval(gen):
    u = uniform_open_closed(gen, 100_000)
    assert u.min() > 0 and u.max() <= 1 and abs(u.mean() - 0.5) < 0.01


def test_standard_normal_moments(gen):
    z = standard_normal(gen, 200_001)
    assert z.size == 200_001
    assert abs(z.mean()) < 0.01 and abs(z.var() - 1) < 0.02


def test_gamma_integer_shape_moments(gen):
    g = gamma_integer_shape(gen, 5, 0.5, 100_000)   # mean kθ = 2.5, var kθ² = 1.25
    assert abs(g.mean() - 2.5) < 0.02 and abs(g.var() - 1.25) < 0.05


def test_cmp_noise_length_is_gamma_and_direction_isotropic(gen):
    z = cmp_noise(gen, 4, 2.0, 50_000)              # ‖z‖ ~ Gamma(4, 1/2): mean 2
    assert abs(np.linalg.norm(z, axis=1).mean() - 2.0) < 0.03
    unit = z / np.linalg.norm(z, axis=1, keepdims=True)
    assert np.abs(unit.mean(axis=0)).max() < 0.02


def test_random_replacement_stays_in_outputs(gen):
    out = random_replacement(np.zeros(10_000, np.int32), np.array([3, 5, 9]), gen)
    counts = np.bincount(out, minlength=10)
    assert set(np.nonzero(counts)[0]) == {3, 5, 9}
    assert np.abs(counts[[3, 5, 9]] / 10_000 - 1 / 3).max() < 0.02


def test_cmp_is_the_identity_at_huge_epsilon_and_random_at_tiny(gen):
    emb = np.array([[0, 0], [10, 0], [0, 10], [10, 10]], np.float32)
    ids = np.array([0, 1, 2, 3] * 50)
    assert (CMPMechanism(emb, np.arange(4), 1e6).sample_ids(ids, gen) == ids).all()
    out = CMPMechanism(emb, np.array([1, 2, 3]), 1e-4).sample_ids(ids, gen)
    assert set(out.tolist()) <= {1, 2, 3} and len(set(out.tolist())) == 3


def test_bleu_hand_computed():
    ref = bleu_tokenize("The cat sat on the mat")
    assert corpus_bleu([ref], [ref]) == pytest.approx(1.0)
    hyp = bleu_tokenize("the cat sat on a mat")
    # p1 = 5/6, p2 = 3/5, p3 = 2/4, p4 = 1/3, same length
    assert corpus_bleu([hyp], [ref]) == pytest.approx((5 / 6 * 3 / 5 * 1 / 2 * 1 / 3) ** 0.25)
    # brevity penalty: c = 2, r = 4 -> exp(1 - 2); both bigram and unigram precisions are 1
    assert corpus_bleu([["the", "cat"]], [["the", "cat", "sat", "on"]], max_n=2) == \
        pytest.approx(math.exp(-1))
    assert corpus_bleu([["dog"]], [["cat"]]) == 0.0
    # pooled over the corpus, not averaged per sentence
    two = corpus_bleu([["a", "b"], ["c", "d"]], [["a", "b"], ["c", "x"]], max_n=1)
    assert two == pytest.approx(3 / 4)


def test_classifier_learns_a_separable_toy_task():
    pos = [f"good great fine movie {i}" for i in range(20)]
    neg = [f"bad awful poor movie {i}" for i in range(20)]
    texts, labels = pos + neg, [1] * 20 + [0] * 20
    scores = train_and_score(texts, labels, {"same": texts, "flipped": neg + pos}, labels)
    assert scores["same"]["accuracy"] == 1.0 and scores["same"]["macro_f1"] == 1.0
    assert scores["flipped"]["accuracy"] == 0.0


def test_cmp_nearest_matches_brute_force():
    rng = np.random.default_rng(2)
    emb = rng.normal(size=(40, 5)).astype(np.float32)
    outputs = np.arange(3, 40)
    pts = rng.normal(size=(300, 5)) * 3
    cmp = CMPMechanism(emb, outputs, 1.0, chunk_size=64)
    brute = outputs[np.argmin(((pts[:, None, :] - emb[outputs][None]) ** 2).sum(-1), axis=1)]
    assert (cmp.nearest(pts) == brute).mean() > 0.99   # float32 rounding may flip near-ties
