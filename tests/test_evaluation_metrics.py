"""Exact privacy metrics and the Bayes attack against hand-computed values and brute force."""
import math

import numpy as np
import pytest

from ldptext_precompute.evaluation.attacks import empirical_attack_success
from ldptext_precompute.evaluation.metrics import (dense_log_prob_rows, effective_support_size,
                                        profile_identity, profile_mechanism, profile_uniform,
                                        renyi_entropy_bits, summarize)

# a 3-token mechanism small enough to do by hand
P3 = np.array([[0.70, 0.20, 0.10],
               [0.25, 0.50, 0.25],
               [0.10, 0.30, 0.60]])


def test_n_x_is_the_diagonal_of_the_3_token_mechanism():
    prof = profile_mechanism(dense_log_prob_rows(P3), [0, 1, 2], 3)
    np.testing.assert_allclose(prof.n_x, [0.7, 0.5, 0.6], rtol=1e-15)


def test_s_x_counts_outputs_until_the_threshold_despite_rounding():
    # 0.7 + 0.2 = 0.8999999999999999 in float64: the row still reaches 0.9 with 2 outputs
    prof = profile_mechanism(dense_log_prob_rows(P3), [0, 1, 2], 3, threshold=0.9)
    assert prof.s_x.tolist() == [2, 3, 2]
    prof = profile_mechanism(dense_log_prob_rows(P3), [0, 1, 2], 3, threshold=0.5)
    assert prof.s_x.tolist() == [1, 1, 1]
    assert effective_support_size(P3, 1.0).tolist() == [3, 3, 3]


def test_renyi_entropies_match_hand_values():
    lp = np.log(P3)
    np.testing.assert_allclose(renyi_entropy_bits(lp, 0), [math.log2(3)] * 3)
    np.testing.assert_allclose(renyi_entropy_bits(lp, np.inf),
                               [-math.log2(0.7), 1.0, -math.log2(0.6)])
    assert renyi_entropy_bits(lp, 1)[1] == pytest.approx(1.5)          # ¼,½,¼ -> 1.5 bits
    assert renyi_entropy_bits(lp, 2)[1] == pytest.approx(-math.log2(0.375))
    # zero probabilities leave the support (H0) and contribute nothing to H1
    with np.errstate(divide="ignore"):
        lz = np.log(np.array([[0.5, 0.5, 0.0]]))
    assert renyi_entropy_bits(lz, 0)[0] == pytest.approx(1.0)
    assert renyi_entropy_bits(lz, 1)[0] == pytest.approx(1.0)
    # ordering H0 >= H1 >= H2 >= H_inf holds for every row
    h = [renyi_entropy_bits(lp, a) for a in (0, 1, 2, np.inf)]
    assert all((h[i] >= h[i + 1] - 1e-12).all() for i in range(3))


def test_s_y_star_uses_the_uniform_prior_posterior():
    # column 0: (.7,.25,.1)/1.05 -> .667,.238 reaches .9 with 2; column 1 needs 3; column 2:
    # (.1,.25,.6)/.95 -> .632+.263 = .895 < .9 -> 3
    prof = profile_mechanism(dense_log_prob_rows(P3), [0, 1, 2], 3, threshold=0.9,
                             columns=[0, 1, 2])
    assert prof.s_y.tolist() == [2, 3, 3]


def test_bayes_attack_hand_values():
    prof = profile_mechanism(dense_log_prob_rows(P3), [0, 1, 2], 3, prior=np.array([.5, .3, .2]))
    assert prof.decoder.tolist() == [0, 1, 2]
    np.testing.assert_allclose(prof.attack_success, [0.7, 0.5, 0.6])
    # a prior concentrated on token 0 makes the attacker always guess 0
    prof = profile_mechanism(dense_log_prob_rows(P3), [0, 1, 2], 3, prior=np.array([.8, .1, .1]))
    assert prof.decoder.tolist() == [0, 0, 0]
    np.testing.assert_allclose(prof.attack_success, [1.0, 0.0, 0.0])
    data = np.array([0, 0, 1, 2])
    assert prof.attack_success[prof.row_index(data)].mean() == pytest.approx(0.5)


def _brute_force_success(p, prior, inputs):
    v = p.shape[1]
    succ = {}
    for x in inputs:
        total = 0.0
        for y in range(v):
            best = max(inputs, key=lambda c: (p[c, y] * prior[c], -c))  # earliest on ties
            if p[:, y][inputs].max() > 0 and best == x:
                total += p[x, y]
        succ[x] = total
    return np.array([succ[x] for x in inputs])


@pytest.mark.parametrize("chunk", [1, 2, 3, 50])
def test_bayes_attack_equals_brute_force_with_zeros_and_chunks(chunk):
    rng = np.random.default_rng(7)
    v = 9
    p = rng.random((v, v)) ** 3
    p[rng.random((v, v)) < 0.3] = 0.0          # exact zeros, as SanText+ rows have
    p[np.arange(v), np.arange(v)] += 0.05
    p /= p.sum(axis=1, keepdims=True)
    prior = rng.random(v)
    inputs = np.array([0, 2, 3, 5, 6, 8])
    prof = profile_mechanism(dense_log_prob_rows(p), inputs, v, prior=prior, chunk_size=chunk,
                             columns=np.arange(v))
    np.testing.assert_allclose(prof.attack_success, _brute_force_success(p, prior, inputs),
                               rtol=1e-12, atol=1e-15)
    # the exact success rate is what a very long empirical run converges to
    for y in range(v):
        if p[inputs, y].max() > 0:
            scores = p[inputs, y] * prior[inputs]
            assert prof.decoder[y] == inputs[np.argmax(scores)]


def test_uniform_closed_form_equals_the_generic_pass():
    v = 6
    outputs = np.array([1, 2, 3, 4])
    inputs = np.array([0, 1, 2, 3, 4])
    p = np.zeros((v, v))
    p[:, outputs] = 1 / outputs.size
    prior = np.array([0.1, 0.2, 0.4, 0.1, 0.15, 0.05])
    generic = profile_mechanism(dense_log_prob_rows(p), inputs, v, prior=prior, columns=outputs,
                                threshold=0.7)
    closed = profile_uniform(inputs, outputs, v, prior=prior, columns=outputs, threshold=0.7)
    for name in ("n_x", "s_x", "h0", "h1", "h2", "h_inf", "attack_success", "s_y"):
        np.testing.assert_allclose(getattr(closed, name), getattr(generic, name), err_msg=name)
    np.testing.assert_array_equal(closed.decoder[outputs], generic.decoder[outputs])


def test_identity_is_the_attack_ceiling():
    prof = profile_identity(np.array([0, 1, 2]), 4, columns=np.array([0, 3]))
    assert prof.attack_success.tolist() == [1, 1, 1]
    assert prof.n_x.tolist() == [1, 1, 1] and prof.s_y.tolist() == [1, 0]
    generic = profile_mechanism(dense_log_prob_rows(np.eye(3)), [0, 1, 2], 3)
    np.testing.assert_allclose(generic.attack_success, 1.0)
    np.testing.assert_allclose(generic.h1, 0.0)


def test_empirical_attack_success_counts_matches():
    assert empirical_attack_success(np.array([0, 0, 2]), [0, 1, 2, 2], [0, 1, 2, 1]) == 0.5


def test_summarize_weighted_quantiles():
    s = summarize(np.array([1.0, 2.0, 3.0, 4.0]))
    assert (s["q25"], s["median"], s["q75"], s["mean"]) == (1.0, 2.0, 3.0, 2.5)
    # weights as token counts: value 4 occurs 7 times out of 10
    s = summarize(np.array([1.0, 2.0, 4.0]), np.array([2, 1, 7]))
    assert (s["q25"], s["median"], s["mean"]) == (2.0, 4.0, pytest.approx(3.2))
    assert summarize(np.array([]))["n"] == 0


def test_profile_entropies_equal_the_reference_function():
    rng = np.random.default_rng(3)
    p = rng.random((5, 5)) ** 4
    p[0, 3] = 0.0
    p /= p.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore"):
        lp = np.log(p)
    prof = profile_mechanism(lp, np.arange(5), chunk_size=2)
    for name, alpha in (("h0", 0), ("h1", 1), ("h2", 2), ("h_inf", np.inf)):
        np.testing.assert_allclose(getattr(prof, name), renyi_entropy_bits(lp, alpha), rtol=1e-12)
