"""Integration tests on the real packaged embeddings (docs/assets.md): GloVe 6B-50d and the MiniLM
WordPiece vocabulary."""

import numpy as np
import pytest
from scipy.special import logsumexp

from conftest import load_seeded


def glove_bundle(real_bundles, epsilon, mechanism="santext", vocab=3000):
    # ε = 30 and 1e4: underflow tests, so near-identity is allowed
    return real_bundles.santext("glove-6b-50d", vocab_size=vocab, epsilon=epsilon, mechanism=mechanism,
                                head_size=32, allow_weak_privacy=True)


@pytest.mark.parametrize("epsilon", [30.0, 1e4])
def test_no_underflow_every_output_keeps_positive_probability(real_bundles, epsilon):
    san = load_seeded(glove_bundle(real_bundles, epsilon))
    rows = np.array([0, 1, 17, 500, 2999])
    logp = san.log_probabilities(rows)
    outputs = san.outputs
    assert np.isfinite(logp[:, outputs]).all(), "an output lost its probability"
    # float32 or even float64 exp() would have underflowed here: the log-space path is needed
    emb = np.asarray(san.embeddings, dtype=np.float64)
    for r, x in enumerate(rows):
        d = np.linalg.norm(emb[outputs] - emb[x], axis=1)
        ref = -epsilon * d / 2 - logsumexp(-epsilon * d / 2)
        assert np.max(np.abs(logp[r, outputs] - ref)) < 1e-9 * max(1.0, np.abs(ref).max())
        if epsilon >= 1e4:
            assert np.exp(ref).min() == 0.0  # would underflow in float64
    # the sampler runs at this ε (log-space acceptance), in both backends
    for backend in ("native", "fallback"):
        y = load_seeded(san._bundle.path, backend=backend).sample_ids(np.repeat(rows, 200))
        assert set(np.unique(y)) <= set(outputs.tolist())


def test_santext_plus_on_glove_keeps_frequent_words_with_probability_1_minus_p(real_bundles):
    san = load_seeded(glove_bundle(real_bundles, 2.0, "santext+"))
    the = san.vocab.index("the")
    assert not san.sensitive[the]  # the most frequent word is public (wordfreq)
    rare = san.vocab.index(san.vocab[2999])
    assert san.sensitive[rare]
    y = san.sample_ids(np.full(100000, the))
    assert abs((y == the).mean() - (1 - san.p)) < 0.01
    assert set(np.unique(y[y != the])) <= set(np.flatnonzero(san.sensitive).tolist())


@pytest.mark.slow
def test_minilm_wordpiece_bundle_sanitizes_english(minilm_bundle):
    san = load_seeded(minilm_bundle)
    assert len(san.vocab) == 30522
    special = [i for i, t in enumerate(san.vocab) if t.startswith("[") and t.endswith("]")]
    assert len(special) > 900
    text = "Patient John Smith, born 1984, lives at 12 Elm Street; diagnosis: diabetes. ☃"
    res = san.sanitize_batch([text] * 50)
    ids = san.tokenize(text)
    assert san.vocab[ids[-1]] == "[UNK]" or "☃" not in san.vocab
    all_out = np.concatenate([san.sample_ids(ids) for _ in range(200)])
    assert not set(all_out.tolist()) & set(special), "a special token was output"
    assert all(r.n_tokens == ids.size for r in res)
    assert any(r.text != res[0].text for r in res)  # it is random
    # special tokens typed by a user are ordinary text: never a special id, never an
    # error, never a lost batch (the C tokenizer is held to the same by the conformance tests)
    typed = "see [MASK] and [CLS] then [SEP] [PAD] [UNK] x[MASK]y"
    typed_ids = san.tokenize(typed)
    assert not set(typed_ids.tolist()) & set(special)
    assert [san.vocab[i] for i in typed_ids[:4]] == ["see", "[", "mask", "]"]
    out = san.sanitize_batch([typed, text, typed])
    assert [r.n_tokens for r in out] == [typed_ids.size, ids.size, typed_ids.size]
    # at ε = 20 in MiniLM space most tokens are replaced by near neighbours or themselves
    same = (all_out.reshape(200, -1) == ids).mean()
    assert 0.05 < same < 1.0
    # exactness on real rows, against an independent reference: a sensitive row samples from
    # exp(−ε·d/2) over the sensitive outputs; a non-sensitive row keeps itself w.p. 1 − p and
    # otherwise samples the same way
    emb = np.asarray(san.embeddings, dtype=np.float64)
    out = san.outputs
    assert san.sensitive[out].all()
    sensitive = next(int(x) for x in ids if san.sensitive[x])
    kept = next(int(x) for x in ids if san.valid_input[x] and not san.sensitive[x])
    for x in (sensitive, kept):
        d = np.linalg.norm(emb[out] - emb[x], axis=1)
        ref = -san.epsilon * d / 2 - logsumexp(-san.epsilon * d / 2)
        logp = san.log_probabilities([x])[0]
        if x == kept:
            ref = ref + np.log(san.p)
            assert abs(np.expm1(logp[x] - np.log1p(-san.p))) < 1e-9
        assert np.max(np.abs(np.expm1(logp[out] - ref))) < 1e-9
