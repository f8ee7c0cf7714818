"""Every privacy number that README.md and docs/*.md state, recomputed here and compared with the text
as written: editing a number (or the code behind it) so that the two disagree fails a test.

The SanText(+) numbers are about the demo bundle (the defaults of ``ldptext demo``): GloVe 6B-50d,
50,000 words, default split. They are recomputed in float64 from the packaged embeddings, not read
from a bundle or a runtime: the metric embedding is the int8 rounding the builder applies (checked
equal to it), distances are Euclidean over it, and P(M(x) = x) is SanText+'s exact formula (x ∈ V_S:
1 / Σ_{y ∈ V_S outputs} exp(−ε·d(x, y)/2); x ∈ V_N: 1 − p). The DP-BART figures are recomputed from
their definitions (exact rationals; the analytic and the Rényi Gaussian bounds with scipy).
"""
from __future__ import annotations

import math
import re
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------------------------------
# reading the documents
# --------------------------------------------------------------------------------------------------
def doc(name: str) -> str:
    """A document's text with every run of white space made one space (sentences span lines)."""
    path = ROOT / name
    return " ".join(path.read_text(encoding="utf-8").split())


def find(text: str, pattern: str, what: str) -> re.Match:
    m = re.search(pattern, text)
    assert m is not None, f"the statement of {what} is no longer where this test looks ({pattern!r})"
    return m


def num(written: str) -> float:
    return float(written.replace(",", "").replace("−", "-"))


def shown_as(value: float, written: str) -> bool:
    """Whether ``value`` rounds to ``written`` at the precision it is written with (2.19, 0.066, 333)."""
    written = written.replace(",", "")
    decimals = len(written.split(".")[1]) if "." in written else 0
    return f"{value:.{decimals}f}" == written


def table_rows(text: str, header: str) -> list[list[str]]:
    """The body rows of the Markdown table whose header row starts with ``header`` (raw text)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def raw(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


# --------------------------------------------------------------------------------------------------
# the independent reference: the demo bundle's metric embedding and split, in float64
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def demo_args():
    from ldptext.cli import build_parser
    return build_parser().parse_args(["demo"])


@pytest.fixture(scope="module")
def glove(demo_args):
    from ldptext_precompute.santext.build import quantize_int8, split_domain
    from ldptext_precompute.santext.embeddings import load_embeddings

    emb = load_embeddings(demo_args.embeddings, demo_args.vocab_size)
    v = np.asarray(emb.vectors, dtype=np.float64)
    top = np.abs(v).max(axis=1)
    scale = np.where(top > 0, top / 127.0, 1.0).astype(np.float32)
    codes = np.clip(np.rint(v / scale.astype(np.float64)[:, None]), -127, 127).astype(np.int8)
    q, s = quantize_int8(emb.vectors)  # the builder's metric embedding is this rounding
    assert np.array_equal(q, codes) and np.array_equal(s, scale)
    domain = split_domain(emb, mechanism=demo_args.mechanism, non_sensitive=demo_args.non_sensitive)
    keep = domain.keep_row.astype(bool)  # V_N
    # V_S without special rows, less the tokens whose released text the tokenizer (the `tokenizers`
    # library itself here) does not read back as themselves
    from tokenizers import Tokenizer
    tok = Tokenizer.from_str(emb.tokenizer_json)
    read_back = np.array([w.isprintable() and not any(c.isspace() for c in w)
                          and tok.encode(w, add_special_tokens=False).ids == [i] for i, w in enumerate(emb.vocab)])
    outputs = np.flatnonzero(emb.valid_input & ~emb.special & ~keep & read_back)
    assert np.array_equal(outputs, domain.outputs)
    return SimpleNamespace(emb=emb, vocab=list(emb.vocab), index={w: i for i, w in enumerate(emb.vocab)},
                           phi=scale.astype(np.float64)[:, None] * codes, codes=codes,
                           scale=scale.astype(np.float64), valid=np.flatnonzero(emb.valid_input),
                           keep=keep, outputs=outputs, epsilon=float(demo_args.epsilon), p=float(demo_args.p))


def distance(g, a: str, b: str) -> float:
    return float(np.linalg.norm(g.phi[g.index[a]] - g.phi[g.index[b]]))


def verbatim(g, word: str) -> float:
    """P(M(x) = x) of SanText+ at the demo's ε and p, exactly (float64)."""
    x = g.index[word]
    if g.keep[x]:
        return 1.0 - g.p
    d = np.linalg.norm(g.phi[g.outputs] - g.phi[x], axis=1)
    assert np.isin(x, g.outputs) and d.min() == 0.0
    return float(1.0 / np.exp(-g.epsilon * d / 2.0).sum())


def exact_d_max(g) -> float:
    """The largest distance between two valid inputs: a lower bound from the longest vectors, then
    every row that could beat it (‖a − b‖ ≤ ‖a‖ + ‖b‖) against all rows."""
    P = g.phi[g.valid]
    norms = np.linalg.norm(P, axis=1)
    sq = norms ** 2

    def farthest(rows):
        d2 = sq[rows, None] + sq[None, :] - 2.0 * (P[rows] @ P.T)
        far = np.argmax(d2, axis=1)
        return max(float(np.linalg.norm(P[r] - P[f])) for r, f in zip(rows, far))

    best = farthest(np.argsort(-norms)[:64])
    candidates = np.flatnonzero(norms + norms.max() >= best - 1e-6)
    for start in range(0, candidates.size, 256):
        best = max(best, farthest(candidates[start:start + 256]))
    return best


@pytest.fixture(scope="module")
def nearest(glove):
    """Distance from every valid input to its nearest other valid input, in float64. The nearest is
    found in float32 as the argmax of a·b − ‖b‖²/2 (one matrix product with one extra coordinate);
    rounding can only swap near ties, which moves a distance by far less than the doc's precision."""
    P = glove.phi[glove.valid]
    left = np.hstack([P, np.ones((P.shape[0], 1))]).astype(np.float32)
    right = np.hstack([P, -0.5 * (P * P).sum(axis=1, keepdims=True)]).astype(np.float32)
    out = np.empty(P.shape[0])
    step = 512
    for a in range(0, P.shape[0], step):
        score = left[a:a + step] @ right.T
        idx = np.arange(score.shape[0])
        score[idx, a + idx] = -np.inf
        out[a:a + step] = np.linalg.norm(P[a:a + step] - P[score.argmax(axis=1)], axis=1)
    return out


# --------------------------------------------------------------------------------------------------
# SanText(+) on the demo bundle
# --------------------------------------------------------------------------------------------------
def test_the_demo_bundle_is_what_ldptext_demo_builds(demo_args):
    m = find(doc("README.md"), r"builds a ([\d,]+)-word GloVe SanText\+ bundle \(ε = ([\d.]+), p = ([\d.]+); "
                               r"non-sensitive = \d+ closed-class function words", "the demo bundle")
    assert num(m[1]) == demo_args.vocab_size and demo_args.embeddings == "glove-6b-50d"
    assert num(m[2]) == demo_args.epsilon and num(m[3]) == demo_args.p
    assert demo_args.mechanism == "santext+" and demo_args.non_sensitive == "function-words"
    pb = doc("docs/privacy-budgets.md")
    m = find(pb, r"At the default ε = ([\d.]+) with p = ([\d.]+), on the demo bundle \(`make demo`: GloVe "
                 r"6B-50d, ([\d,]+) words\)", "the demo bundle")
    assert (num(m[1]), num(m[2]), num(m[3])) == (demo_args.epsilon, demo_args.p, demo_args.vocab_size)


def test_size_of_the_default_non_sensitive_set(glove):
    n = int(glove.keep.sum())
    readme = doc("README.md")
    assert int(find(readme, r"non-sensitive = (\d+) closed-class", "|V_N|")[1]) == n
    assert int(find(readme, r"\((\d+) in the 50,000-word GloVe vocabulary\)", "|V_N|")[1]) == n
    assert int(find(doc("docs/privacy-budgets.md"), r"punctuation marks: (\d+) words in the 50,000-word GloVe",
                    "|V_N|")[1]) == n
    kept = {glove.vocab[i] for i in np.flatnonzero(glove.keep)}
    # privacy-budgets.md names these as V_N members
    assert {"the", "of", "and", "is", ",", "."} <= kept


def test_d_max_and_the_worst_case_per_token(glove):
    d_max = exact_d_max(glove)
    eps = glove.epsilon
    readme = doc("README.md")
    m = find(readme, r"On the demo bundle D_max = ([\d.]+), so at ε = ([\d.]+) that worst case is "
                     r"([\d.]+) × ([\d.]+) = ([\d.]+) per token", "D_max")
    assert shown_as(d_max, m[1]) and m[4] == m[1] and num(m[2]) == num(m[3]) == eps
    assert shown_as(eps * d_max, m[5])
    pb = doc("docs/privacy-budgets.md")
    assert shown_as(d_max, find(pb, r"\| D_max \| ([\d.]+) \|", "D_max")[1])
    m = find(pb, r"worst case over the whole vocabulary is exp\((\d+) · ([\d.]+)\) = exp\(([\d.]+)\)", "exp(ε·D_max)")
    assert num(m[1]) == eps and shown_as(d_max, m[2]) and shown_as(eps * d_max, m[3])
    m = find(pb, r"worst-case LDP level ε·D_max = ([\d.]+) per token instead, the same ([\d,]+) would last "
                 r"(\d+) tokens", "the budget at the worst case")
    assert shown_as(eps * d_max, m[1])
    assert int(m[3]) == math.floor(num(m[2]) / (eps * d_max))


def test_distances_between_named_words(glove):
    readme = re.findall(r"d\((\w+), (\w+)\) = ([\d.]+)", doc("README.md"))
    table = re.findall(r"\| d\((\w+), (\w+)\) \| ([\d.]+) \|", doc("docs/privacy-budgets.md"))
    assert len(readme) >= 2 and len(table) >= 4
    for a, b, written in readme + table:
        assert shown_as(distance(glove, a, b), written), (a, b, written, distance(glove, a, b))


def test_the_ratio_bounds_between_near_neighbours(glove):
    pb = doc("docs/privacy-budgets.md")
    m = find(pb, r"\"john\", the output distribution changes by at most a factor of exp\((\d+) · ([\d.]+)\) = "
                 r"exp\(([\d.]+)\) ≈ (\d+) relative to \"james\", and by at most exp\((\d+) · ([\d.]+)\) = "
                 r"exp\(([\d.]+)\) between \"cancer\" and \"diabetes\"", "the neighbour ratios")
    eps = glove.epsilon
    d1, d2 = distance(glove, "john", "james"), distance(glove, "cancer", "diabetes")
    assert num(m[1]) == num(m[5]) == eps
    assert shown_as(d1, m[2]) and shown_as(eps * d1, m[3]) and shown_as(d2, m[6]) and shown_as(eps * d2, m[7])
    ratio, written = math.exp(eps * d1), int(m[4])
    assert abs(ratio - written) <= 0.1 * written, (ratio, written)  # "≈": one significant digit


def test_median_distances(glove, nearest):
    pb = doc("docs/privacy-budgets.md")
    written = find(pb, r"\| median distance from a word to its nearest word in the vocabulary \| ([\d.]+) \|",
                   "the nearest-word median")[1]
    assert shown_as(float(np.median(nearest)), written), np.median(nearest)
    m = find(pb, r"\| median distance between two random words \(([\d,]+)-word sample\) \| ([\d.]+) \|",
             "the random-pair median")
    n = int(num(m[1]))
    sample = np.random.default_rng(0).choice(glove.valid, n, replace=False)
    P = glove.phi[sample]
    iu = np.triu_indices(n, 1)
    sq = (P * P).sum(axis=1)
    d = np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2.0 * (P @ P.T), 0.0)[iu])
    assert shown_as(float(np.median(d)), m[2]), np.median(d)


def _words(cell: str) -> list[str]:
    cell = cell.replace("(V_N)", "").replace("the digit ", "")
    return [w.strip() for w in cell.split(",") if w.strip()]


def test_readme_verbatim_rates(glove):
    rows = table_rows(raw("README.md"), "| word |")
    header = [c.strip() for c in next(line for line in raw("README.md").splitlines()
                                       if line.startswith("| word |")).strip().strip("|").split("|")]
    assert rows and rows[0][0] == "P(released unchanged)"
    checked = 0
    for cell, written in zip(header[1:], rows[0][1:]):
        for w in _words(cell):
            assert shown_as(verbatim(glove, w), written), (w, written, verbatim(glove, w))
            checked += 1
    assert checked >= 10


def test_privacy_budgets_verbatim_rates_and_their_range(glove):
    rows = table_rows(raw("docs/privacy-budgets.md"), "| input word | P(released unchanged) |")
    rates = {}
    for cell, written in rows:
        for w in _words(cell):
            rates[w] = verbatim(glove, w)
            assert shown_as(rates[w], written), (w, written, rates[w])
            assert glove.keep[glove.index[w]] == ("(V_N)" in cell), w
    assert len(rates) >= 15
    pb = doc("docs/privacy-budgets.md")
    from test_santext_split import SENSITIVE_WORDS
    listed = {w: verbatim(glove, w) for w in SENSITIVE_WORDS}
    m = find(pb, r"Over the (\d+) words of that test list the range is ([\d.]+) \((\w+)\) to ([\d.]+) \(the digit "
                 r"(\w+)\); the names and health words in the table lie between ([\d.]+) \((\w+)\) and ([\d.]+) "
                 r"\((\w+)\)", "the range of the verbatim rates")
    assert int(m[1]) == len(SENSITIVE_WORDS)
    lo, hi = min(listed, key=listed.get), max(listed, key=listed.get)
    assert (m[3], m[5]) == (lo, hi) and shown_as(listed[lo], m[2]) and shown_as(listed[hi], m[4])
    # the table's names and health words: every row that is neither V_N nor a number
    words = {w: r for w, r in rates.items() if not glove.keep[glove.index[w]] and not w.isdigit()}
    lo, hi = min(words, key=words.get), max(words, key=words.get)
    assert (m[7], m[9]) == (lo, hi) and shown_as(words[lo], m[6]) and shown_as(words[hi], m[8])


def test_gendered_pronouns_are_in_v_n_and_released_with_probability_1_minus_p(glove):
    readme = doc("README.md")
    m = find(readme, r"the gendered pronouns are in V_N: each is released unchanged with probability ([\d.]+)",
             "the pronoun caveat")
    assert shown_as(1 - glove.p, m[1])
    m = find(doc("docs/privacy-budgets.md"), r"The gendered pronouns are in V_N: each is released unchanged with "
                                             r"probability 1 − p = ([\d.]+)", "the pronoun caveat")
    assert shown_as(1 - glove.p, m[1])
    for w in ("he", "she", "his", "her", "him", "himself", "herself"):
        assert glove.keep[glove.index[w]], w


def _split_list(text: str) -> list[str]:
    words = []
    for part in re.split(r",| and ", text):
        part = part.strip().removeprefix("and ").removeprefix("also ").strip()
        if part:
            words.append(part)
    return words


def test_what_the_frequency_split_makes_non_sensitive(glove):
    from ldptext_precompute.santext.build import split_domain
    from ldptext_precompute.santext.embeddings import load_embeddings

    splits = {}

    def non_sensitive(emb, w):
        if (id(emb), w) not in splits:
            keep = split_domain(emb, mechanism="santext+", w=w).keep_row.astype(bool)
            index = {t: i for i, t in enumerate(emb.vocab)}
            splits[id(emb), w] = lambda word: bool(keep[index[word]])
        return splits[id(emb), w]

    minilm_emb = load_embeddings("minilm-wordpiece")

    digits = list("0123456789")
    m = find(doc("README.md"), r"at W = ([\d.]+) on ([\d,]+) GloVe words that includes ([\w ,]+) and the digits\.",
             "the frequency split")
    assert int(num(m[2])) == len(glove.vocab) - 1  # the words, without <unk>
    in_vn = non_sensitive(glove.emb, float(m[1]))
    for w in _split_list(m[3]) + digits:
        assert in_vn(w), w
    m = find(doc("docs/privacy-budgets.md"),
             r"At W = ([\d.]+) on ([\d,]+) GloVe words that includes ([\w ,]+) and the digits \(not (\w+)\); at W = "
             r"([\d.]+) on MiniLM WordPiece also ([\w ,]+)\.", "the frequency split")
    in_vn = non_sensitive(glove.emb, float(m[1]))
    for w in _split_list(m[3]) + digits:
        assert in_vn(w), w
    assert not in_vn(m[4])
    minilm = non_sensitive(minilm_emb, float(m[5]))
    for w in _split_list(m[6]) + _split_list(m[3]) + digits + [m[4]]:
        assert minilm(w), w
    # the comment above the word list in tests/test_santext_split.py
    comment = " ".join(raw("tests/test_santext_split.py").replace("\n#", "\n").split())
    m = find(comment, r"at w = ([\d.]+) on GloVe 50k the ([\w ,]+) and the digits \(not ([\w ,]+) or (\w+)\); at w = "
                      r"([\d.]+) on MiniLM all but (\w+)", "the split comment")
    from test_santext_split import SENSITIVE_WORDS
    in_vn = non_sensitive(glove.emb, float(m[1]))
    kept = [w for w in SENSITIVE_WORDS if in_vn(w)]
    named = {"names": ["john", "james", "david", "michael"], "places": ["london", "washington", "india"]}
    said = [x for part in _split_list(m[2]) for x in named.get(part, [part])]
    assert sorted(kept) == sorted(said + digits)
    assert sorted(set(SENSITIVE_WORDS) - set(kept)) == sorted(_split_list(m[3]) + [m[4]])
    minilm = non_sensitive(minilm_emb, float(m[5]))
    assert [w for w in SENSITIVE_WORDS if not minilm(w)] == [m[6]]


def test_budget_arithmetic(glove):
    eps = glove.epsilon
    m = find(doc("README.md"), r"at ε = (\d+) a budget of ([\d,]+) buys ([\d,]+) tokens", "tokens per budget")
    assert num(m[1]) == eps and int(num(m[3])) == math.floor(num(m[2]) / eps)
    pb = doc("docs/privacy-budgets.md")
    m = find(pb, r"\*\*Per token:\*\* the charge is (\d+)\.", "the charge per token")
    assert num(m[1]) == eps
    m = find(pb, r"buys (\d+) / (\d+) = (\d+) tokens, for example (\d+) messages of (\d+) tokens", "tokens per budget")
    assert num(m[2]) == eps and int(m[3]) == math.floor(num(m[1]) / eps) and int(m[4]) == int(m[3]) // int(m[5])
    m = find(pb, r"L = (\d+) at d_ref = (\d+) \(near neighbours in GloVe\) gives B = ([\d.]+), which at ε = (\d+) is "
                 r"one token", "the budget from a goal")
    b = num(m[1]) / num(m[2])
    assert shown_as(b, m[3]) and math.floor(b / num(m[4])) == 1
    m = find(pb, r"ε = (\d+) makes B = ([\d,]+) worth ([\d,]+) tokens", "tokens at ε = 1")
    assert math.floor(num(m[2]) / num(m[1])) == int(num(m[3]))


# --------------------------------------------------------------------------------------------------
# DP-BART and ADePT
# --------------------------------------------------------------------------------------------------
def ref_analytic_gaussian_sigma(epsilon: float, delta: float, l2: float) -> float:
    """Balle & Wang 2018, Thm 8: the smallest σ with Φ(Δ/2σ − εσ/Δ) − e^ε·Φ(−Δ/2σ − εσ/Δ) ≤ δ."""
    from scipy.optimize import brentq
    from scipy.special import log_ndtr

    def log_delta(s):
        a, b = log_ndtr(l2 / (2 * s) - epsilon * s / l2), log_ndtr(-l2 / (2 * s) - epsilon * s / l2)
        return a + np.log(-np.expm1(epsilon + b - a)) if epsilon + b < a else -np.inf

    return brentq(lambda s: log_delta(s) - math.log(delta), 1e-6 * l2, 1e3 * l2, xtol=1e-15, rtol=1e-13)


def ref_discrete_gaussian_sigma(epsilon: float, delta: float, l2: float) -> float:
    """Canonne, Kamath & Steinke 2020: the discrete Gaussian is ρ = Δ²/(2σ²)-zCDP (Thm 14) and then
    (ε, δ)-DP with δ = inf_α exp((α−1)(αρ−ε))/α · (1 − 1/α)^(α−1) (Prop. 12)."""
    from scipy.optimize import brentq, minimize_scalar

    def log_delta(s):
        rho = l2 * l2 / (2 * s * s)

        def f(t):  # α = 1 + e^t
            a = 1.0 + math.exp(t)
            return (a - 1) * (a * rho - epsilon) - math.log(a) + (a - 1) * math.log1p(-1 / a)
        grid = np.linspace(-30.0, 30.0, 1201)
        best = grid[int(np.argmin([f(t) for t in grid]))]
        return minimize_scalar(f, bounds=(best - 0.1, best + 0.1), method="bounded",
                               options={"xatol": 1e-12}).fun

    return brentq(lambda s: log_delta(s) - math.log(delta), 1e-3 * l2, 1e3 * l2, xtol=1e-15, rtol=1e-13)


def test_dpbart_laplace_scale_and_gaussian_sigmas():
    from ldptext import noise

    text = doc("docs/dpbart.md")
    m = find(text, r"\(C = ([\d.]+), n = ([\d,]+), k = (\d+), ε = (\d+): t = (\d+)/(\d+) grid units, exactly ε\)",
             "the Laplace scale")
    clip, n, k, eps = num(m[1]), int(num(m[2])), int(m[3]), int(m[4])
    t = Fraction(2 * 2 ** k * n, eps)  # ℓ₁ sensitivity 2Kn in grid units, K = 2^k
    assert t == Fraction(int(m[5]), int(m[6])) and 2 * 2 ** k * n / t == eps
    cal = noise.calibrate("laplace", eps, None, clip=clip, n=n, grid_bits=k)
    assert cal.sampler_parameters == (int(m[5]), int(m[6]))
    m = find(text, r"needs a few per cent more noise \(σ = ([\d.]+) instead of ([\d.]+) at Δ₂ = ([\d.]+), ε = (\d+), "
                   r"δ = ([\de-]+)\)", "the discrete Gaussian's σ")
    l2 = 2 * clip * math.sqrt(n)
    e2, delta = float(m[4]), float(m[5])
    assert shown_as(l2, m[3]) and e2 == eps
    sigma_d, sigma_a = ref_discrete_gaussian_sigma(e2, delta, l2), ref_analytic_gaussian_sigma(e2, delta, l2)
    assert shown_as(sigma_d, m[1]) and shown_as(sigma_a, m[2]), (sigma_d, sigma_a)
    # σ² = t·m in grid units, rounded up from the calibrated σ² by about the stated relative amount
    rel = find(text, r"rounded up by a relative ~([\de.-]+)\)", "the rounding of σ²")[1]
    cal = noise.calibrate("gaussian", e2, delta, clip=clip, n=n, grid_bits=k)
    t_int, m_int = cal.sampler_parameters
    sigma_grid = ref_discrete_gaussian_sigma(e2, delta, 2 * 2 ** k * math.sqrt(n))
    up = t_int * m_int / sigma_grid ** 2 - 1
    assert 0 <= up and f"{up:.0e}".replace("e-0", "e-") == rel, up


def test_dpbart_training_sigmas_at_large_epsilon():
    text = doc("docs/dpbart-training.md")
    m = find(text, r"with values clipped to ±([\d.]+) the discrete Gaussian's σ at ε = ([\d,]+) is ([\d.]+) for CLV "
                   r"\(Δ₂ = ([\d.]+)\) and ([\d.]+) for PR \(Δ₂ = ([\d.]+)\), and still ([\d.]+) / ([\d.]+) at ε = "
                   r"([\d,]+)", "the σ of the DP-BART table")
    delta = num(find(text, r"discrete Gaussian, δ = ([\de-]+) per release", "δ of the DP-BART table")[1])
    clip = num(m[1])
    # CLV: no neuron pruned, n = L·d = 20 · 384 (MiniLM's hidden size)
    assert shown_as(2 * clip * math.sqrt(20 * 384), m[4])
    for eps, written, l2 in ((m[2], m[3], m[4]), (m[2], m[5], m[6]), (m[9], m[7], m[4]), (m[9], m[8], m[6])):
        # Δ₂ is written to 3 digits: the σ at both ends of its rounding interval
        half = 0.5 * 10.0 ** -len(l2.split(".")[1])
        lo, hi = (ref_discrete_gaussian_sigma(num(eps), delta, num(l2) + s) for s in (-half, half))
        shown = 0.5 * 10.0 ** -len(written.split(".")[1])
        assert lo < num(written) + shown and num(written) - shown <= hi, (eps, l2, written, lo, hi)


def test_adept_published_epsilon_is_epsilon_times_root_n():
    text = doc("docs/dpbart-baselines.md")
    m = find(text, r"at n = ([\d,]+) and claimed ε = (\d+) the true value is ([\d,]+)\. On DP-BART's pipeline "
                   r"\(n = ([\d,]+)\) claimed ε = (\d+) is really about ([\d,]+)\.", "ADePT's true ε")
    assert shown_as(num(m[2]) * math.sqrt(num(m[1])), m[3])
    assert shown_as(num(m[5]) * math.sqrt(num(m[4])), m[6])
    assert num(m[4]) == num(find(doc("docs/dpbart.md"), r"n = ([\d,]+), k = \d+", "DP-BART's n")[1])


# --------------------------------------------------------------------------------------------------
# CMP's floating-point coupling
# --------------------------------------------------------------------------------------------------
def test_cmp_monte_carlo_bound_is_the_95_percent_bound_of_what_the_test_allows():
    from scipy.stats import beta

    m = find(doc("docs/mechanisms.md"),
             r"by Monte Carlo \(([\d,]+) draws, counting those whose nearest/second-nearest margin is below δ: "
             r"at most (one|none), i\.e\. ν ≲ ([\d.]+)·10⁻([⁰¹²³⁴⁵⁶⁷⁸⁹]) at 95 %", "the CMP coupling estimate")
    n, allowed = int(num(m[1])), {"none": 0, "one": 1}[m[2]]
    # the test asserts exactly that count over that many draws
    cmp_test = raw("tests/test_cmp.py")
    assert f"np.full({n:_}," in cmp_test and f"assert ambiguous <= {allowed}" in cmp_test
    upper = beta.ppf(0.95, allowed + 1, n - allowed)  # one-sided Clopper–Pearson
    power = "⁰¹²³⁴⁵⁶⁷⁸⁹".index(m[4])
    assert shown_as(upper * 10 ** power, m[3]), upper


# --------------------------------------------------------------------------------------------------
# ldptext calibrate's example (docs/evaluation.md)
# --------------------------------------------------------------------------------------------------
def exact_attack_and_verbatim(configs, step: int = 512):
    """For each (domain, ε): the Bayes-optimal inversion success A = Σ_y max_x π(x)·Pr[M(x) = y] and
    the verbatim rate R = Σ_x π(x)·Pr[M(x) = x], exactly (float64), over one shared distance pass.
    Every domain has the same metric embedding and inputs; SanText+'s kept words (V_N) are released
    as themselves w.p. 1 − p (by no other input) and otherwise sampled like a sensitive word."""
    base = configs[0][0]
    E, X = base.embeddings, np.flatnonzero(base.valid_input)
    outputs = np.unique(np.concatenate([dom.outputs for dom, _ in configs]))
    col = np.full(E.shape[0], -1)
    col[outputs] = np.arange(outputs.size)
    plans = []
    for dom, eps in configs:
        assert np.array_equal(dom.embeddings, E) and np.array_equal(dom.valid_input, base.valid_input)
        assert np.all(np.diff(dom.outputs) > 0)  # sorted: searched below
        plus = dom.mechanism == "santext+"
        kept = dom.valid_input & ~dom.sensitive if plus else np.zeros(E.shape[0], bool)
        p = dom.p if plus else 1.0
        mass = float((dom.weights[kept] * (1 - p)).sum())  # V_N words released as themselves
        plans.append(SimpleNamespace(dom=dom, eps=eps, cols=col[dom.outputs], kept=kept, p=p,
                                     best=np.zeros(dom.outputs.size), a=mass, r=mass))
    sq = (E * E).sum(axis=1)
    for start in range(0, X.size, step):
        xs = X[start:start + step]
        d = np.sqrt(np.maximum(sq[xs, None] + sq[None, outputs] - 2.0 * (E[xs] @ E[outputs].T), 0.0))
        mine = col[xs] >= 0
        d[np.flatnonzero(mine), col[xs][mine]] = 0.0
        for plan in plans:
            dx = d if plan.cols.size == outputs.size else d[:, plan.cols]
            shift = dx.min(axis=1)  # 0 on the rows of outputs: exp(0) = 1 there, no underflow anywhere
            P = np.multiply(dx - shift[:, None] if shift.any() else dx, -plan.eps / 2)
            np.exp(P, out=P)
            weight = plan.dom.weights[xs] * np.where(plan.kept[xs], plan.p, 1.0)
            P *= (weight / P.sum(axis=1))[:, None]  # π(x)·Pr[M(x) = y]
            np.maximum(plan.best, P.max(axis=0), out=plan.best)
            own = np.flatnonzero(np.isin(xs, plan.dom.outputs))
            plan.r += float(P[own, np.searchsorted(plan.dom.outputs, xs[own])].sum())
    return [(plan.a + float(plan.best.sum()), plan.r) for plan in plans]


@pytest.mark.slow
def test_calibrate_example_attack_success_and_verbatim_rates():
    from ldptext_precompute.calibrate import CalibrationDomain

    text = doc("docs/evaluation.md")
    target = num(find(text, r"ldptext calibrate --mechanism santext --max-attack-success ([\d.]+)", "the target")[1])
    m = find(text, r"Example \(GloVe 6B-50d, ([\d,]+) words; [^)]*\): chosen ε = ([\d.]+), attack success "
                   r"([\d.]+), verbatim rate ([\d.]+) \(at ε = ([\d.]+) the attack already recovers (\d+)%, at "
                   r"([\d.]+) (\d+)%\)\. With SanText\+ at p = ([\d.]+), w = ([\d.]+) no ε reaches ([\d.]+): the "
                   r"attack's floor is ([\d.]+) at ε = ([\d.]+)", "the calibrate example")
    vocab, chosen = int(num(m[1])), num(m[2])
    plain = CalibrationDomain.from_embeddings("glove-6b-50d", mechanism="santext", vocab_size=vocab)
    plus = CalibrationDomain.from_embeddings("glove-6b-50d", mechanism="santext+", p=num(m[9]), w=num(m[10]),
                                             vocab_size=vocab)
    above = chosen + 10.0 ** (math.floor(math.log10(chosen)) - 2)  # the next value of three digits
    (a, r), (a_above, _), (a1, _), (a2, _), (floor, _) = exact_attack_and_verbatim(
        [(plain, chosen), (plain, above), (plain, num(m[5])), (plain, num(m[7])), (plus, num(m[13]))])
    assert a <= target < a_above, (a, a_above)  # the largest three-digit ε that meets the target
    assert shown_as(a, m[3]) and shown_as(r, m[4]), (a, r)
    assert shown_as(100 * a1, m[6]) and shown_as(100 * a2, m[8]), (a1, a2)
    assert num(m[11]) == target and floor > target and shown_as(floor, m[12]), floor


# --------------------------------------------------------------------------------------------------
# the near-identity thresholds
# --------------------------------------------------------------------------------------------------
def test_near_identity_thresholds_are_the_codes():
    from ldptext.dpbart import NEAR_IDENTITY_NOISE
    from ldptext.verbatim import NEAR_IDENTITY_MEDIAN

    median = [find(doc("README.md"), r"releases the median sensitive word unchanged with probability ([\d.]+) or more",
                   "the verbatim threshold")[1],
              find(doc("docs/privacy-budgets.md"), r"\*\*median verbatim rate is ([\d.]+) or more\*\*",
                   "the verbatim threshold")[1],
              find(doc("docs/cli.md"), r"median sensitive word is released unchanged with probability ([\d.]+) or more",
                   "the verbatim threshold")[1]]
    assert [num(x) for x in median] == [NEAR_IDENTITY_MEDIAN] * 3
    noise = [find(doc("README.md"), r"a DP-BART ε with noise below ([\d.]+)·C", "the noise threshold")[1],
             find(doc("docs/privacy-budgets.md"), r"standard deviation is below \*\*([\d.]+)·C per coordinate\*\*",
                  "the noise threshold")[1],
             find(doc("docs/cli.md"), r"DP-BART ε whose noise is below ([\d.]+)·C", "the noise threshold")[1],
             find(doc("docs/dpbart.md"), r"below ([\d.]+)·C it is refused", "the noise threshold")[1]]
    assert [num(x) for x in noise] == [NEAR_IDENTITY_NOISE] * 4


def test_the_thesis_settings_stay_above_the_noise_threshold():
    """Per coordinate, the noise's standard deviation over C at the smallest n and largest ε stated:
    Laplace (the discrete Laplace of scale t = 2Kn/ε grid units, variance 2q/(1 − q)², q = e^(−1/t))
    and the discrete Gaussian at DP-BART's δ; both grow with n and shrink with ε."""
    from ldptext.dpbart import NEAR_IDENTITY_NOISE

    text = doc("docs/privacy-budgets.md")
    m = find(text, r"The thesis' settings \(n in the (thousands), ε up to ([\d,]+)\) stay above the threshold: "
                   r"([\d.]+)·C and more", "the thesis' relative noise")
    n, eps = 1000, num(m[2])
    delta = num(find(doc("docs/dpbart-training.md"), r"discrete Gaussian, δ = ([\de-]+) per release", "δ")[1])
    grid = 2 ** 20
    t = 2 * grid * n / eps
    q = math.exp(-1 / t)
    laplace = math.sqrt(2 * q) / -math.expm1(-1 / t) / grid
    gaussian = ref_discrete_gaussian_sigma(eps, delta, 2 * math.sqrt(n))  # in units of C
    assert shown_as(min(laplace, gaussian), m[3]) and min(laplace, gaussian) >= NEAR_IDENTITY_NOISE, (laplace, gaussian)
