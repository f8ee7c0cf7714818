"""Shared fixtures. Every test session gets its own LDPTEXT_HOME (developer key, trust store), so
tests never touch the user's configuration, and sets LDPTEXT_DEV=1: the explicit opt-in under which
bundles signed by that session's developer key are trusted (tests/test_keys.py checks the refusal
without it).

``make test`` runs pytest on two workers (pytest-xdist, ``--dist loadfile``: a file's tests, so its
module fixtures, stay on one worker). Each worker is a session of its own, with its own
LDPTEXT_HOME; what is expensive or written outside pytest's temporary folders is shared between
them here: the real bundles are built once, by whichever worker asks first (:func:`shared_tmp`, a
file lock), and signed with one developer key that every worker's home holds a copy of; every
``make`` a test runs in the checkout holds :func:`build_lock`."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from filelock import FileLock

ROOT = Path(__file__).resolve().parents[1]

#: one lock for every ``make`` the tests run in the checkout (native/build/, native/build/wasm/,
#: build/jvm/, build/maven/, build/npm/, build/extension/): two workers, or two test runs, never
#: build into the same folder at once. Created once, so that a holder may take it again (a fixture
#: holding it calls ``build_library``): a second FileLock on the same file would wait for the first.
_BUILD_LOCK = FileLock(str(ROOT / "build" / ".tests-make.lock"))


def build_lock() -> FileLock:
    """The lock every ``make`` a test runs in the checkout holds (``with build_lock(): ...``)."""
    (ROOT / "build").mkdir(exist_ok=True)
    return _BUILD_LOCK


def shared_tmp(tmp_path_factory) -> Path:
    """A folder every pytest-xdist worker of this run sees (the run's base temporary folder, which
    holds each worker's own); the session's base temporary folder without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _share_developer_key(shared: Path, home: Path) -> None:
    """Give ``home`` the developer key of this run, created once for every worker: a bundle one
    worker builds and signs (``real_bundles``) then loads in every worker, as in a serial run."""
    src = shared / "developer-key"
    with FileLock(str(shared / "developer-key.lock")):
        if not (src / "developer.key").exists():
            from ldptext import keys
            keys.generate_keypair(src, name="developer")
    (home / "keys").mkdir(parents=True)
    for name in ("developer.key", "developer.pub"):
        shutil.copy2(src / name, home / "keys" / name)  # the key keeps its mode 0600


@pytest.fixture(scope="session", autouse=True)
def ldptext_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("ldptext_home")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        _share_developer_key(shared_tmp(tmp_path_factory), home)
    mp = pytest.MonkeyPatch()
    mp.setenv("LDPTEXT_HOME", str(home))
    mp.setenv("LDPTEXT_DEV", "1")
    yield home
    mp.undo()


class RealBundles:
    """SanText(+) bundles over the packaged embeddings (GloVe 6B-50d, MiniLM WordPiece), each built
    once per test run and shared by every test that asks for the same build arguments, on every
    xdist worker: the file is named by those arguments, and built under a file lock by the first
    worker that asks while any other waits (the MiniLM build takes minutes). They share one
    neighbour cache too: the ε-independent neighbour search (most of a build) runs once per
    embedding, vocabulary, output set and head size. Tests only read these files; a test that edits
    a bundle writes its own copy (``edited_bundle``, ``rewrite_bundle``)."""

    def __init__(self, root):
        self.root = root
        self.cache = root / "neighbours"
        self.built: dict[tuple, object] = {}

    def santext(self, embeddings: str, **kwargs):
        """The path of ``build_santext_bundle(..., embeddings=embeddings, **kwargs)``, built on first use."""
        from ldptext_precompute.santext.build import build_santext_bundle

        key = (embeddings, tuple(sorted(kwargs.items())))
        if key not in self.built:
            path = self.root / f"{embeddings}-{hashlib.sha256(repr(key).encode()).hexdigest()[:16]}.ldpb"
            # one build of an embedding at a time (its builds share the cache entries): one lock each
            with FileLock(str(self.root / f"{embeddings}.lock")):
                if not path.exists():  # written atomically: present means complete
                    build_santext_bundle(path, embeddings=embeddings, cache_dir=self.cache,
                                         progress=False, **kwargs)
            self.built[key] = path
        return self.built[key]


@pytest.fixture(scope="session")
def real_bundles(tmp_path_factory) -> RealBundles:
    root = shared_tmp(tmp_path_factory) / "real-bundles"
    root.mkdir(exist_ok=True)
    return RealBundles(root)


@pytest.fixture(scope="session")
def minilm_bundle(real_bundles):
    """The real 30,522-token MiniLM WordPiece SanText+ bundle under the paper's frequency split
    (w = 0.9, p = 0.3) at ε = 20, where most tokens become near neighbours or themselves (so the build
    and every load must allow weak privacy): the one MiniLM build of a test run (~35 s on two cores)."""
    return real_bundles.santext("minilm-wordpiece", epsilon=20.0, mechanism="santext+", p=0.3, w=0.9,
                                head_size=32, allow_weak_privacy=True)


#: A tiny two-class word list for the evaluation tests: positive and negative words, and a word that
#: must never appear in a log line or an exception message.
WORDS = ("the a and of is it this film movie good great fine bad awful poor plot actor story "
         "love hate boring funny dull superb").split()
POS, NEG = ["good", "great", "fine", "superb", "funny", "love"], ["bad", "awful", "poor", "boring", "dull", "hate"]
SECRET = "zzzsecretword"


def write_sentiment_embeddings(path, seed: int) -> None:
    """Random 6-d GloVe-format vectors for :data:`WORDS`, the positive words shifted up and the negative
    ones down (a classifier can learn them)."""
    rng = np.random.default_rng(seed)
    vecs = rng.normal(size=(len(WORDS), 6))
    vecs[[WORDS.index(w) for w in POS]] += 3.0
    vecs[[WORDS.index(w) for w in NEG]] -= 3.0
    path.write_text("".join(w + " " + " ".join(f"{x:.5f}" for x in v) + "\n" for w, v in zip(WORDS, vecs)))


def random_word_embeddings(n: int, dim: int, seed: int, scale: float = 1.0):
    """Generated word-level embeddings: words w0..w{n-1} with Gaussian vectors."""
    from ldptext_precompute.santext.embeddings import from_word_vectors

    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(n)]
    vectors = (rng.normal(size=(n, dim)) * scale).astype(np.float32)
    return from_word_vectors(words, vectors, f"random-{n}x{dim}-seed{seed}")


def build_tiny_bundle(path, *, n=60, dim=8, seed=0, epsilon=2.0, mechanism="santext",
                      p=0.3, w=0.7, head_size=8, scale=1.0, allow_weak_privacy=True, **kwargs):
    """A small signed bundle over generated embeddings (frequencies: earlier words more frequent).
    Near-identity ε is allowed: the tests of exactness run at large ε on purpose (the refusal has its
    own tests, tests/test_verbatim.py)."""
    from ldptext_precompute.santext.build import build_santext_bundle

    emb = random_word_embeddings(n, dim, seed, scale)
    freqs = np.linspace(1.0, 0.0, len(emb.vocab))
    return build_santext_bundle(path, embeddings="unused", loaded=emb, epsilon=epsilon,
                                mechanism=mechanism, p=p, w=w, head_size=head_size,
                                progress=False, frequencies=freqs, allow_weak_privacy=allow_weak_privacy,
                                **kwargs)


def bundle_manifest(san) -> dict:
    """A loaded bundle's manifest without the fields ``write_bundle`` adds itself."""
    return {k: v for k, v in san.manifest.items() if k not in ("arrays", "format", "format_version", "mechanism")}


def rewrite_bundle(san, path, arrays, manifest=None):
    """A loaded SanText bundle's blobs and manifest (or ``manifest``) with other arrays, signed with the
    build key: a test's own variant of real tables."""
    from ldptext import bundle as B
    from ldptext import keys
    blobs = {n: san._bundle.blob(n) for n in ("tokenizer.json", "vocab.json")}
    return B.write_bundle(path, mechanism=san.mechanism, arrays=arrays,
                          manifest=bundle_manifest(san) if manifest is None else manifest, blobs=blobs,
                          sign_key=keys.build_signing_key(None))


def edited_bundle(src, dst, edit, arrays_edit=None, sign_key=None):
    """``src`` with its manifest (``edit``) and arrays (``arrays_edit``) changed in place, unsigned, or
    signed with ``sign_key`` without ``sign_bundle``'s parameter check: what a relabeller hands to
    ``bundle sign``, or what a misused trusted key produces."""
    from ldptext import bundle as B
    b, _ = B.open_unverified(src)
    manifest = json.loads(json.dumps({k: v for k, v in b.manifest.items()
                                      if k not in ("format", "format_version", "mechanism", "arrays")}))
    edit(manifest)
    arrays = {n: np.array(a) for n, a in b.arrays.items() if not n.startswith(B.BLOB_PREFIX)}
    if arrays_edit:
        arrays_edit(arrays)
    blobs = {n[len(B.BLOB_PREFIX):]: bytes(a) for n, a in b.arrays.items() if n.startswith(B.BLOB_PREFIX)}
    return B.write_bundle(dst, mechanism=b.mechanism, arrays=arrays, manifest=manifest, blobs=blobs,
                          sign_key=sign_key)


def load_seeded(path, seed=0, allow_weak_privacy=True, **kwargs):
    from ldptext.rng import SeededModeWarning
    from ldptext.santext import Sanitizer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        return Sanitizer.load(path, seed=seed, allow_weak_privacy=allow_weak_privacy, **kwargs)


class CallCounter:
    """Wraps a callable, counting (and recording) calls; raises from call ``fail_at`` on (an injected
    failure, for resume tests)."""

    def __init__(self, fn, fail_at=None):
        self.fn, self.fail_at, self.calls, self.args = fn, fail_at, 0, []

    def __call__(self, *a, **kw):
        self.calls += 1
        self.args.append((a, kw))
        if self.fail_at is not None and self.calls >= self.fail_at:
            raise RuntimeError("injected failure")
        return self.fn(*a, **kw)


def require_tool(names: list[str], why: str, flag: str) -> str:
    """The first of ``names`` on PATH. Missing: the test is skipped, or fails where the environment
    sets ``flag`` (an ``LDPTEXT_REQUIRE_*`` variable: CI must run these tests, never skip them)."""
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    message = f"{names[0]} not found: {why}"
    if os.environ.get(flag) == "1":
        pytest.fail(f"{message} ({flag}=1)")
    pytest.skip(message)


@pytest.fixture()
def refusing(monkeypatch):
    """The runtime refuses any document containing REFUSE (as it would a bad special token): the
    CLI's file formats (test_cli_formats.py, test_parquet.py) must then leave no output."""
    from ldptext.errors import InputError
    from ldptext.santext import Sanitizer

    real = Sanitizer.sanitize_batch

    def sanitize_batch(self, texts):
        texts = list(texts)
        for k, t in enumerate(texts):
            if "REFUSE" in t:
                raise InputError(f"document {k} could not be tokenized", document=k)
        return real(self, texts)

    monkeypatch.setattr(Sanitizer, "sanitize_batch", sanitize_batch)
