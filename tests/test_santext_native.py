"""``ldptext.Sanitizer`` on libldptext: with the C extension, the C library tokenizes,
samples and detokenizes (``Sanitizer.backend == "libldptext"``).

* Seeded output is byte for byte the output of the C sampler with the Hugging Face tokenizer (the
  path before the library, still used for a tokenizer the library lacks): ``sanitize_batch``,
  ``sample_ids``, interleaved calls, ``tokenize``, ``detokenize``; on tiny word-level bundles, a
  real GloVe bundle and a WordPiece bundle (the first 6,000 MiniLM tokens, special tokens included).
* The numpy fallback tokenizes and detokenizes identically and raises the same errors.
* Batch errors name the document (and token), never the text: a lone surrogate, a special token
  the tokenizer emits.
* The batch call runs without the GIL: another thread makes progress during it, counted (not
  timed) against a call that holds the GIL, where it makes none. Threads sharing a private
  ``Sanitizer`` get their own streams; a seeded one stays one stream, serialised.
* The library re-checks the arrays it adopts (``native/lib/host.h``) and a tokenizer it lacks
  falls back to the Hugging Face one.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
import sysconfig
import threading
from pathlib import Path

import numpy as np
import pytest

from conftest import build_tiny_bundle, load_seeded

_native = pytest.importorskip("ldptext._native")
if not hasattr(_native, "TextSanitizer"):  # pragma: no cover - a stale build
    pytest.skip("the C extension was built without libldptext", allow_module_level=True)

LEE = Path(sysconfig.get_paths()["purelib"]) / "gensim/test/test_data/lee_background.cor"
WORDPIECE_ROWS = 6000


def lee_documents(n: int) -> list[str]:
    return [line.strip() for line in LEE.read_text(encoding="utf-8").splitlines() if line.strip()][:n]


@contextlib.contextmanager
def sampler_path():
    """Sanitizers built inside use the C sampler with the Hugging Face tokenizer (what a bundle
    whose tokenizer the library lacks gets, and what the native backend was before the library)."""
    mp = pytest.MonkeyPatch()
    mp.setattr("ldptext.library.library_bundle", lambda bundle, **_: None)
    try:
        yield
    finally:
        mp.undo()


def load_sampler_path(path, seed=0, **kwargs):
    with sampler_path():
        san = load_seeded(path, seed=seed, **kwargs)
    assert san.backend == "native"
    return san


def wordpiece_embeddings(rows: int = WORDPIECE_ROWS):
    """The MiniLM WordPiece pipeline over its first ``rows`` tokens ([PAD], [unusedN], [UNK],
    [CLS], [SEP], [MASK], characters, frequent words): a real WordPiece bundle in seconds."""
    from ldptext_precompute.santext.embeddings import load_minilm_wordpiece
    full = load_minilm_wordpiece()
    spec = json.loads(full.tokenizer_json)
    spec["model"]["vocab"] = {t: i for t, i in spec["model"]["vocab"].items() if i < rows}
    assert all(a["id"] < rows for a in spec["added_tokens"])
    return dataclasses.replace(
        full, vocab=full.vocab[:rows], vectors=np.ascontiguousarray(full.vectors[:rows]),
        tokenizer_json=json.dumps(spec), special=full.special[:rows],
        valid_input=full.valid_input[:rows],
        source=dict(full.source, name=f"minilm-first-{rows}", vocab_size=rows))


@pytest.fixture(scope="module")
def bundles(tmp_path_factory, real_bundles) -> dict[str, Path]:
    from ldptext_precompute.santext.build import build_santext_bundle
    d = tmp_path_factory.mktemp("native")
    return {
        "tiny-santext": build_tiny_bundle(d / "s.ldpb", mechanism="santext"),
        "tiny-santext+": build_tiny_bundle(d / "sp.ldpb", mechanism="santext+", p=0.3, w=0.7),
        "glove-santext+": real_bundles.santext("glove-6b-50d", vocab_size=3000, epsilon=3.0,
                                               mechanism="santext+", p=0.3, head_size=32),
        "wordpiece-santext+": build_santext_bundle(
            d / "w.ldpb", embeddings="unused", loaded=wordpiece_embeddings(), epsilon=10.0,
            mechanism="santext+", p=0.3, head_size=16, progress=False, device="cpu"),
    }


def documents_for(name: str) -> list[str]:
    if name.startswith("tiny"):
        rng = np.random.default_rng(4)
        words = [f"w{i}" for i in range(60)] + ["zorblax", "Ünïcödé", "東京", "!", "?"]
        return [" ".join(rng.choice(words, size=int(rng.integers(0, 15)))) for _ in range(60)] + ["", "  "]
    return lee_documents(60) + ["", "Ünïcödé ﬁnance 東京 naïve café — don't", "[MASK] [CLS] typed"]


@pytest.mark.parametrize("name", ["tiny-santext", "tiny-santext+", "glove-santext+", "wordpiece-santext+"])
def test_seeded_output_is_the_sampler_paths_byte_for_byte(bundles, name):
    path, docs = bundles[name], documents_for(name)
    lib, ref = load_seeded(path, seed=9), load_sampler_path(path, seed=9)
    assert lib.backend == "libldptext"
    a, b = lib.sanitize_batch(docs), ref.sanitize_batch(docs)
    assert [r.text for r in a] == [r.text for r in b]
    # the same report but for the backend that sampled
    assert {r.report.backend for r in a} == {"libldptext"} and {r.report.backend for r in b} == {"native"}
    assert [dict(r.report.to_dict(), backend=None) for r in a] == \
        [dict(r.report.to_dict(), backend=None) for r in b]
    # one stream across calls of every kind, in call order
    ids = np.concatenate([lib.tokenize(d) for d in docs[:20]])
    assert np.array_equal(lib.sample_ids(ids), ref.sample_ids(ids))
    assert lib.sanitize(docs[3]).text == ref.sanitize(docs[3]).text
    assert np.array_equal(lib.sample_ids(ids[:7].reshape(7, 1)), ref.sample_ids(ids[:7].reshape(7, 1)))
    assert [r.text for r in lib.sanitize_batch(docs[::-1])] == [r.text for r in ref.sanitize_batch(docs[::-1])]
    # the C tokenizer is the Hugging Face one (the conformance oracle), the C detokenizer Python's
    for d in docs:
        got = lib.tokenize(d)
        assert got.dtype == np.int32 and np.array_equal(got, lib.tokenizer.encode(d))
    rng = np.random.default_rng(0)
    for _ in range(30):
        out = rng.choice(lib.outputs, size=int(rng.integers(0, 25)))
        assert lib.detokenize(out) == lib.tokenizer.decode(out)


def test_adoption_releases_the_mapped_rows_and_their_values_stay(bundles):
    """The library samples from its own copy of emb_q (rows on cache lines), so the runtime drops the
    mapping's resident pages of it (MADV_DONTNEED): read again, they come back from the file with the
    same values. A bundle read from bytes has no mapping and keeps its pages."""
    from ldptext.bundle import read_bundle
    path = bundles["glove-santext+"]
    before = read_bundle(path).arrays["emb_q"].copy()
    with load_seeded(path, seed=3) as san:
        assert san.backend == "libldptext"
        mapped = san._bundle
        assert not mapped.release_resident("no such array")
        assert mapped.release_resident("emb_q") == hasattr(__import__("mmap"), "MADV_DONTNEED")
        assert np.array_equal(mapped.arrays["emb_q"], before)
        assert np.array_equal(san.embeddings, before.astype(np.float64) * san.tables.emb_scale[:, None])
        ids = np.arange(50, dtype=np.int64)
        assert np.array_equal(san.sample_ids(ids), load_seeded(path, seed=3).sample_ids(ids))
    from_bytes = read_bundle(path.read_bytes())
    assert not from_bytes.release_resident("emb_q")
    assert np.array_equal(from_bytes.arrays["emb_q"], before)


@pytest.mark.parametrize("name", ["tiny-santext+", "wordpiece-santext+"])
def test_numpy_fallback_tokenizes_and_detokenizes_identically(bundles, name):
    path, docs = bundles[name], documents_for(name)
    lib, fb = load_seeded(path, seed=1), load_seeded(path, seed=1, backend="fallback")
    assert fb.backend == "fallback"
    for d in docs:
        assert np.array_equal(lib.tokenize(d), fb.tokenize(d))
    assert [r.n_tokens for r in lib.sanitize_batch(docs)] == [r.n_tokens for r in fb.sanitize_batch(docs)]
    ids = np.concatenate([lib.tokenize(d) for d in docs])
    assert lib.detokenize(ids) == fb.detokenize(ids)


@pytest.fixture(scope="module")
def mask_is_text_bundle(bundles, tmp_path_factory):
    """The WordPiece bundle with [MASK] declared an ordinary (non-special) added token: a typed
    "[MASK]" then becomes its id, which the bundle refuses as input (a special row)."""
    from ldptext import keys
    from ldptext.bundle import BLOB_PREFIX, read_bundle, write_bundle
    b = read_bundle(bundles["wordpiece-santext+"])
    spec = json.loads(b.blob("tokenizer.json"))
    for tok in spec["added_tokens"]:
        if tok["content"] == "[MASK]":
            tok["special"] = False
    manifest = {k: v for k, v in b.manifest.items() if k not in ("format", "format_version", "mechanism", "arrays")}
    arrays = {n: np.array(a) for n, a in b.arrays.items() if not n.startswith(BLOB_PREFIX)}
    return write_bundle(tmp_path_factory.mktemp("mask") / "m.ldpb", mechanism=b.mechanism, arrays=arrays,
                        manifest=manifest, sign_key=keys.developer_key(),
                        blobs={"tokenizer.json": json.dumps(spec).encode(), "vocab.json": b.blob("vocab.json")})


@pytest.mark.parametrize("path_kind", ["libldptext", "native", "fallback"])
def test_batch_errors_name_document_and_token_never_the_text(bundles, mask_is_text_bundle, path_kind):
    from ldptext.errors import InputError

    def load(path):
        if path_kind == "native":
            return load_sampler_path(path)
        return load_seeded(path, backend="native" if path_kind == "libldptext" else "fallback")

    san = load(bundles["tiny-santext+"])
    assert san.backend == path_kind
    secret = "SECRETMARKER7f3a"
    with pytest.raises(InputError) as e:
        san.sanitize_batch(["w1", "w2 w3", 3, "w4"])
    assert str(e.value) == "document 2 is int, not str"
    with pytest.raises(InputError) as e:  # a lone surrogate: not UTF-8 text
        san.sanitize_batch(["w1", "w2", f"w3 {secret}\ud800", "w4"])
    assert str(e.value) == "document 2 could not be tokenized" and secret not in repr(e.value)
    with pytest.raises(InputError) as e:
        san.tokenize(f"{secret}\ud800")
    assert secret not in repr(e.value)
    masked = load(mask_is_text_bundle)
    assert int(masked.tokenize("a [MASK] b")[1]) == 103
    with pytest.raises(InputError) as e:
        masked.sanitize_batch(["the cat", f"my {secret} [MASK] here", "ok"])
    assert secret not in repr(e.value)
    n_before = len(masked.tokenize(f"my {secret}"))
    assert str(e.value).startswith(f"document 1: token {n_before} is not a valid input")
    with pytest.raises(InputError) as e:
        masked.sanitize("[MASK]")
    assert str(e.value).startswith("document 0: token 0 is not a valid input")


class Spinner:
    """A thread that counts as fast as it can while it holds the GIL."""

    def __init__(self):
        self.count = 0
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop:
            self.count += 1

    def __enter__(self):
        self._old = sys.getswitchinterval()
        # the GIL changes hands only when released (or after 0.5 s): calls below last far less
        sys.setswitchinterval(0.5)
        self._thread.start()
        while self.count == 0:
            threading.Event().wait(0.001)  # releases the GIL until the spinner runs
        return self

    def __exit__(self, *exc):
        self._stop = True
        self._thread.join()
        sys.setswitchinterval(self._old)

    def progress_during(self, call) -> int:
        before = self.count
        call()
        return self.count - before


def test_batch_releases_the_gil_while_a_gil_holding_call_does_not(bundles):
    """Counted, not timed: with a long switch interval another thread runs during a call only if
    the call releases the GIL. The entry points are called directly (numpy around them may release
    the GIL on its own)."""
    path = bundles["wordpiece-santext+"]
    san = load_seeded(path, seed=2)
    docs = lee_documents(300) * 2  # about 140,000 tokens: tens of milliseconds
    xs = np.concatenate([san.tokenize(d) for d in docs])
    ys = np.empty_like(xs)
    holding = load_sampler_path(path, seed=2)
    generator = holding._rng._gen()  # ldptext._native.Generator: holds the GIL by design

    def held():
        generator.santext_sample(holding._table, xs, ys)

    san.sanitize_batch(docs[:5])
    held()  # the rows' first use (refined bounds for each, as libldptext's row check) before the count
    with Spinner() as spinner:
        assert spinner.progress_during(held) == 0
        assert spinner.progress_during(lambda: san.sanitize_batch(docs)) > 0
        assert spinner.progress_during(lambda: san._sanitizers.stream.sample(xs, ys)) > 0
        assert spinner.progress_during(lambda: san._sanitizers.stream.tokenize(" ".join(docs))) > 0
        assert spinner.progress_during(held) == 0


def test_threads_sharing_a_private_sanitizer_get_their_own_streams(bundles):
    from ldptext.santext import Sanitizer
    san = Sanitizer.load(bundles["glove-santext+"])
    docs = lee_documents(100)
    expected = [r.n_tokens for r in san.sanitize_batch(docs)]
    start, results, errors = threading.Barrier(2), {}, []

    def work(i):
        try:
            start.wait()
            results[i] = [san.sanitize_batch(docs) for _ in range(4)]
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert not errors
    for runs in results.values():
        for res in runs:
            assert [r.n_tokens for r in res] == expected
            assert all(len(r.text.split()) >= 0 for r in res)
    texts = [tuple(r.text for r in res) for runs in results.values() for res in runs]
    assert len(set(texts)) == len(texts)  # eight independent private draws of the same batch
    assert 1 <= len(san._sanitizers._idle) <= 2       # at most one C sanitizer per concurrent call


def test_a_seeded_sanitizer_stays_one_stream_under_threads(bundles):
    path = bundles["tiny-santext+"]
    docs = documents_for("tiny-santext+")
    sequential = load_seeded(path, seed=5)
    expected = [tuple(r.text for r in sequential.sanitize_batch(docs)) for _ in range(6)]
    shared = load_seeded(path, seed=5)
    got, start = [], threading.Barrier(2)

    def work():
        start.wait()
        for _ in range(3):
            got.append(tuple(r.text for r in shared.sanitize_batch(docs)))
    threads = [threading.Thread(target=work) for _ in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    # calls are serialised on the one stream: the k-th call to take it draws the k-th batch
    assert sorted(got) == sorted(expected)


def test_a_forked_child_does_not_wait_on_a_lock_the_parent_holds(bundles):
    """A seeded stream's lock, held by a parent thread mid-call at fork(), belongs to no thread of
    the child: the child's call takes a fresh lock (the extension counts forks with pthread_atfork)
    and rekeys, where waiting on the copied lock would never return (SIGALRM ends the child then)."""
    import os
    import signal
    import time
    import warnings
    san = load_seeded(bundles["wordpiece-santext+"], seed=3)
    stream = san._sanitizers.stream
    xs = np.concatenate([san.tokenize(d) for d in lee_documents(300)] * 6).astype(np.int32)
    ys = np.empty_like(xs)
    stream.sample(xs[:2000], ys[:2000])  # the rows' first use, before the timed call
    started = threading.Event()

    def hold():
        started.set()
        stream.sample(xs, ys)  # a few hundred milliseconds with the lock held, the GIL released
    holder = threading.Thread(target=hold)
    holder.start()
    started.wait()
    time.sleep(0.05)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() with a thread running
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        signal.alarm(30)
        small = np.empty(100, dtype=np.int32)
        stream.sample(xs[:100], small)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    holder.join()
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


def test_library_rechecks_the_arrays_it_adopts(bundles):
    from ldptext.bundle import canonical_json, read_bundle
    b = read_bundle(bundles["tiny-santext+"])
    arrays, manifest = dict(b.arrays), canonical_json(b.manifest)
    _native.Bundle(arrays, manifest)  # as given: accepted

    def code(arrays, manifest) -> int:
        with pytest.raises(_native.LibraryError) as e:
            _native.Bundle(arrays, manifest)
        return e.value.args[0]
    def frozen(a: np.ndarray) -> np.ndarray:
        a.flags.writeable = False
        return a
    missing = {k: v for k, v in arrays.items() if k != "tail_floor"}
    assert code(missing, manifest) == -60                                   # LDP_E_ARRAY_SET
    as_float32 = frozen(arrays["tail_floor"].astype(np.float32))
    assert code(dict(arrays, tail_floor=as_float32), manifest) == -62       # dtype differs
    assert code(arrays, json.dumps(b.manifest, indent=1).encode()) == -52   # not canonical
    heads = arrays["head_ids"].copy()
    heads[0, [0, 1]] = heads[0, [1, 0]]                                     # a row out of order
    assert code(dict(arrays, head_ids=frozen(heads)), manifest) == -90      # LDP_E_TABLE_HEAD
    with pytest.raises(ValueError, match="read-only"):                      # tables cannot change later
        _native.Bundle(dict(arrays, head_ids=arrays["head_ids"].copy()), manifest)
    dpbart = dict(json.loads(manifest), mechanism="dpbart")
    assert code(arrays, canonical_json(dpbart)) == -53                      # LDP_E_MECHANISM


def test_a_tokenizer_the_library_lacks_keeps_the_hugging_face_one(bundles, tmp_path):
    """A pre-tokenizer libldptext does not implement (``Whitespace``): the bundle still loads, on
    the C sampler with the Hugging Face tokenizer."""
    from ldptext import keys
    from ldptext.bundle import BLOB_PREFIX, read_bundle, write_bundle
    b = read_bundle(bundles["tiny-santext"])
    spec = json.loads(b.blob("tokenizer.json"))
    spec["pre_tokenizer"] = {"type": "Whitespace"}
    manifest = {k: v for k, v in b.manifest.items() if k not in ("format", "format_version", "mechanism", "arrays")}
    arrays = {n: np.array(a) for n, a in b.arrays.items() if not n.startswith(BLOB_PREFIX)}
    path = write_bundle(tmp_path / "ws.ldpb", mechanism=b.mechanism, arrays=arrays, manifest=manifest,
                        sign_key=keys.developer_key(),
                        blobs={"tokenizer.json": json.dumps(spec).encode(), "vocab.json": b.blob("vocab.json")})
    san = load_seeded(path)
    assert san.backend == "native"
    assert [r.n_tokens for r in san.sanitize_batch(["w1 w2", "w3"])] == [2, 1]


@pytest.mark.parametrize("kw", [dict(mechanism="santext", epsilon=2.0),
                                dict(mechanism="santext+", epsilon=25.0, head_size=16, p=0.05, w=0.5, n=120)])
def test_compact_arrays_stay_as_stored_and_sample_like_wide_ones(tmp_path, kw):
    """A compact bundle's narrow arrays (uint16 head ids, uint8 alias slots, float32 exponents when
    stored so) are what the runtime keeps: loading and sanitizing (libldptext, or the extension's
    own sampler) make no widened copy; the extension's sampler table reads them in place and draws
    exactly what it draws from the widened arrays."""
    path = build_tiny_bundle(tmp_path / "c.ldpb", **kw)
    docs = ["the river bank was quiet", "a quiet bank"]
    for san in (load_seeded(path, seed=3), load_sampler_path(path, seed=3)):
        t = san.tables
        assert t.stored("head_ids").dtype == np.uint16 and t.stored("alias_index").dtype == np.uint8
        assert t.stored("head_ids").base is not None  # a view of the bundle, not a copy
        san.sanitize_batch(docs)
        san.sample_ids(np.flatnonzero(san.valid_input)[:50])
        san.check_parameters()
        for name in ("head_ids", "alias_index", "accept_gamma"):  # no widened copy beside the stored one
            assert vars(t).get(name, t.stored(name)) is t.stored(name), name
    # on first use the attribute is the exact wide form
    assert t.head_ids.dtype == np.int32 and np.array_equal(t.head_ids, t.stored("head_ids"))
    assert t.alias_index.dtype == np.uint16 and t.accept_gamma.dtype == np.float64
    assert np.array_equal(t.accept_gamma, t.stored("accept_gamma"))
    compact = t.sampler_arguments(epsilon=san.epsilon, p=san.p if san.p is not None else 1.0)
    wide = dict(compact, head_ids=t.head_ids, alias_index=t.alias_index, accept_gamma=t.accept_gamma)
    assert compact["head_ids"].dtype == np.uint16
    xs = np.resize(np.flatnonzero(san.valid_input), 4000).astype(np.int32)
    draws = []
    for args in (compact, wide):
        g = _native.Generator(bytes(range(32)), 0)
        ys = np.empty_like(xs)
        g.santext_sample(_native.SantextTable(**args), xs, ys)
        draws.append(ys)
    assert np.array_equal(draws[0], draws[1])
    with pytest.raises(TypeError):  # a narrow array of the wrong kind is still refused
        _native.SantextTable(**dict(compact, head_ids=compact["head_ids"].astype(np.int16)))
