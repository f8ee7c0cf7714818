"""One ``Sanitizer`` shared by many threads (8 threads x 10,000 documents): valid output, no crash,
independent random streams; and big or odd input through the library and the ``ldptext sanitize``
CLI (empty, whitespace, control characters, mixed scripts and emoji, very long words, invalid
UTF-8, a 10 MB document): a clear result or a clear error, never a crash and never raw text passed
through."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from scipy import stats

from ldptext import keys
from ldptext.errors import InputError
from ldptext.santext import Sanitizer

WORDS = ("the of and to a in is it you that he was for on are with as i his they be at one have "
         "this from or had by hot word but what some we can out other were all there when up use "
         "your how said an each she apple banana zebra quantum nebula harpsichord xylophone "
         "obsidian zeppelin marmalade").split()
# text that must never appear in any output (not in the vocabulary)
SECRETS = ["hunter2", "Zürich", "東京", "Привет", "🙂", "x" * 5000, "4111111111111111"]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """A tiny signed SanText+ bundle built from generated 8-d embeddings (about 2 s)."""
    from ldptext_precompute.santext.build import build_santext_bundle
    d = tmp_path_factory.mktemp("concurrency")
    rng = np.random.default_rng(0)
    with open(d / "emb.txt", "w") as f:
        for w in WORDS:
            f.write(w + " " + " ".join(f"{x:.4f}" for x in rng.standard_normal(8)) + "\n")
    key = Ed25519PrivateKey.generate()
    path = build_santext_bundle(d / "tiny.ldpb", embeddings=str(d / "emb.txt"), epsilon=2.0,
                                mechanism="santext+", head_size=8, sign_key=key, progress=False,
                                device="cpu")
    pub = d / "tiny.pub"
    pub.write_text(__import__("base64").b64encode(keys.public_bytes(key.public_key())).decode())
    return path, pub


@pytest.fixture(scope="module")
def san(bundle):
    path, pub = bundle
    return Sanitizer.load(path, trusted_keys=[pub])


def _docs(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    pool = WORDS + SECRETS[:4]
    return [" ".join(rng.choice(pool, size=int(rng.integers(1, 12)))) for _ in range(n)]


def _check_output(san: Sanitizer, texts: list[str], results) -> None:
    vocab = set(san.vocab)
    assert len(results) == len(texts)
    for r in results:
        out_words = r.text.split()
        assert len(out_words) == r.n_tokens            # one output token per input token
        assert all(w in vocab for w in out_words)      # only vocabulary words come out
        assert r.report.document_epsilon == pytest.approx(r.n_tokens * r.report.per_token_epsilon)


def test_eight_threads_share_one_sanitizer(san):
    n_threads, n_docs, batch = 8, 10_000, 500
    docs = _docs(n_docs, seed=1)                       # every thread sanitizes the same documents
    outputs: dict[int, list[str]] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(n_threads)

    def worker(i: int) -> None:
        try:
            start.wait()
            out: list[str] = []
            for j in range(0, n_docs, batch):
                chunk = docs[j:j + batch]
                results = san.sanitize_batch(chunk)
                if j == 0:
                    _check_output(san, chunk, results)
                out.extend(r.text for r in results)
            outputs[i] = out
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert sorted(outputs) == list(range(n_threads))
    vocab = set(san.vocab)
    for out in outputs.values():
        assert len(out) == n_docs
        assert all(w in vocab for text in out for w in text.split())
        assert not any(s in text for text in out for s in SECRETS)
    # independent streams: two threads agree on a document only as often as chance allows
    # (a shared or repeated stream would make them agree on every document)
    for a, b in [(0, 1), (2, 7), (3, 5)]:
        same = sum(x == y for x, y in zip(outputs[a], outputs[b]))
        assert same < 0.5 * n_docs


def test_concurrent_draws_keep_the_exact_distribution(san):
    """Threads hammering sample_ids: the pooled samples of one token still fit the exact law."""
    x = san.vocab.index("apple")
    pooled: list[np.ndarray] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(20):
            ys = san.sample_ids(np.full(1000, x, dtype=np.int32))
            with lock:
                pooled.append(ys)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ys = np.concatenate(pooled)
    probs = san.probabilities([x])[0]
    counts = np.bincount(ys, minlength=probs.size)
    support = probs > 0
    assert counts[~support].sum() == 0
    expected = probs[support] * ys.size
    big = expected >= 5
    obs, exp = counts[support][big], expected[big]
    if (~big).any():  # merge the rare outputs into one cell
        obs = np.append(obs, counts[support][~big].sum())
        exp = np.append(exp, expected[~big].sum())
    # unseeded (private) streams interleaved by the scheduler: not reproducible, so a threshold
    # that a correct sampler fails only once in a million runs
    assert stats.chisquare(obs, exp).pvalue > 1e-6


# ---- odd input through the library ---------------------------------------------------------

@pytest.mark.parametrize("text", ["", " ", " \t\r\n  ", "\x00", "the\x00apple\x1b[31m\x07was",
                                  "\u202ethe apple\u202c", "naïve 東京 🙂 Привет the apple",
                                  "🙂" * 1000, "x" * 1_000_000, "the " * 50_000,
                                  "hunter2 4111111111111111 Zürich"])
def test_odd_documents_give_a_clear_result_and_no_raw_text(san, text):
    r = san.sanitize(text)
    vocab = set(san.vocab)
    assert all(w in vocab for w in r.text.split())
    for s in SECRETS:
        if s in text:
            assert s not in r.text
    if not text.strip() or text == "\x00" * len(text):
        assert r.n_tokens <= 1


def test_lone_surrogates_and_non_strings_are_input_errors(san):
    with pytest.raises(InputError) as e:
        san.sanitize("secret \ud800 text")
    assert "secret" not in str(e.value)
    for bad in (None, b"bytes", 5, ["list"]):
        with pytest.raises(InputError):
            san.sanitize(bad)
    with pytest.raises(InputError):
        san.sanitize_batch("a string, not a list")


def test_whitespace_only_10mb_document(san):
    r = san.sanitize(" \n\t" * (10_000_000 // 3))
    assert r.n_tokens == 0 and r.text.strip() == ""


@pytest.mark.skipif(not os.environ.get("LDPTEXT_SLOW_TESTS"),
                    reason="10 MB of words takes ~15 s and ~1.3 GB (set LDPTEXT_SLOW_TESTS=1)")
def test_10mb_document_of_words(san):
    text = "the apple was hot hunter2 " * (10_000_000 // 26)
    r = san.sanitize(text)
    assert r.n_tokens == 5 * (10_000_000 // 26)
    assert "hunter2" not in r.text


# ---- the CLI -----------------------------------------------------------------------------------

def _cli(bundle, *args, stdin: bytes | None = None, env_extra=None):
    path, pub = bundle
    env = dict(os.environ, **(env_extra or {}))
    return subprocess.run([sys.executable, "-m", "ldptext.cli", "sanitize", "--bundle", str(path),
                           "--trusted-key", str(pub), *args], input=stdin, capture_output=True,
                          env=env, timeout=120)


def test_cli_sanitizes_odd_lines_and_never_echoes_them(bundle, tmp_path):
    lines = ["the apple", "", "   ", "hunter2 was hot", "naïve 東京 🙂", "a\x00b\x1bc",
             "x" * 100_000, "Zürich said"]
    f = tmp_path / "in.txt"
    f.write_bytes(("\n".join(lines) + "\n").encode())
    r = _cli(bundle, str(f))
    assert r.returncode == 0, r.stderr[-500:]
    out = r.stdout.decode("utf-8").split("\n")
    assert len(out) == len(lines) + 1 and out[-1] == ""
    for s in SECRETS:
        assert s.encode() not in r.stdout


def test_cli_invalid_utf8_file_is_refused_before_any_output(bundle, tmp_path):
    f = tmp_path / "bad.txt"
    f.write_bytes(b"the apple\nhunter2 \xff\xfe secret\nthe\n")
    r = _cli(bundle, str(f))
    assert r.returncode == 3 and r.stdout == b""  # 3: input data
    err = r.stderr.decode()
    assert "line 2" in err and "UTF-8" in err and "hunter2" not in err and err.count("\n") == 1


def test_cli_invalid_utf8_on_stdin_stops_with_the_line_number(bundle):
    r = _cli(bundle, "-", stdin=b"the apple\n\xc3\x28 hunter2\n")
    assert r.returncode == 3
    assert b"hunter2" not in r.stdout and b"hunter2" not in r.stderr
    assert "line 2" in r.stderr.decode()


def test_cli_streams_a_large_input(bundle, tmp_path):
    f = tmp_path / "big.txt"
    line = "the apple was hot and she said hunter2\n"
    f.write_bytes((line * 20_000).encode())   # 780 kB, 20,000 documents
    r = _cli(bundle, str(f))
    assert r.returncode == 0
    out = r.stdout.decode().splitlines()
    assert len(out) == 20_000 and not any("hunter2" in o for o in out)
