"""libldptext (the C library, native/build/libldptext.so) against the Python runtime, through ctypes.

* it accepts the bundles the Python loader accepts (tiny SanText / SanText+ bundles of
  tests/conftest.py and a real GloVe one), and refuses what it refuses: bit flips at many offsets,
  truncations, a wrong key, an unsigned bundle, a stranger's signature, each with an error of the
  same kind as the Python exception;
* seeded C sanitizers give exactly the Python runtime's seeded output (same key derivation, same
  sampler, same tokenization and detokenization);
* OS-seeded C sampling follows the exact distribution ``Sanitizer.probabilities`` states
  (chi-square);
* the example program (examples/c/sanitize.c) sanitizes stdin line by line.

The C unit tests, the sanitizer builds and fuzzing are ``make -C native test``; tokenizer
conformance with Hugging Face ``tokenizers`` is tests/test_libldptext_conformance.py.
"""
from __future__ import annotations

import base64
import ctypes
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from conftest import build_lock, build_tiny_bundle, load_seeded

ROOT = Path(__file__).resolve().parents[1]
NATIVE = ROOT / "native"
LIB_PATH = NATIVE / "build" / "libldptext.so"
EXAMPLE = NATIVE / "build" / "sanitize"

# return codes (native/include/ldptext.h)
OK = 0
E_CAPACITY = -4
E_INVALID_UTF8 = -5
E_INPUT_ID = -6
E_TRUNCATED = -25
E_UNSIGNED = -42
E_UNTRUSTED_KEY = -43
E_BAD_SIGNATURE = -44
MECH = {1: "santext", 2: "santext+"}

# Python exception class -> the C codes of the same check (bundle.py / santext.py order)
CODES_OF = {
    "UnsignedBundleError": {-42},
    "UnknownKeyError": {-43},
    "SignatureError": {-40, -41, -44},
    "BundleFormatError": {-30, -32, -33, -34, -35, -36, -37, -38, -39, -50, -51, -52, -53, -54,
                          -80, -81, -110, -111, -112},
    "BundleIntegrityError": {-60, -61, -62, -63, -64, -65, -66, -67, -68, -69, -70, -82, -83, -84,
                             -85, -86, -87, -88, -89, -90, -91, -92, -93, -94, -95, -96, -97, -98,
                             -99},
    "ParameterMismatchError": {-100},
    "BundleExpectationError": {-101, -102, -103, -104},
    "BundleError": {-20, -21, -22, -23, -24, -25, -31},
}


class Report(ctypes.Structure):
    """ldp_report; the library reads `size` to know which fields this caller has."""
    _fields_ = [("size", ctypes.c_size_t),
                ("epsilon", ctypes.c_double), ("epsilon0", ctypes.c_double),
                ("p", ctypes.c_double), ("n_tokens", ctypes.c_size_t),
                ("mechanism", ctypes.c_int), ("seeded", ctypes.c_int),
                ("d_max", ctypes.c_double), ("tolerance", ctypes.c_double),
                ("worst_case_epsilon", ctypes.c_double),
                ("verbatim_median", ctypes.c_double), ("verbatim_max", ctypes.c_double),
                ("weak_privacy", ctypes.c_int)]

    def __init__(self) -> None:
        super().__init__(size=ctypes.sizeof(Report))


class Expect(ctypes.Structure):
    """ldp_expect (layout 2: the weak-privacy opt-in)."""
    _fields_ = [("size", ctypes.c_size_t), ("mechanisms", ctypes.c_uint),
                ("epsilon_min", ctypes.c_double), ("epsilon_max", ctypes.c_double),
                ("bundle_id", ctypes.c_char_p), ("min_format_version", ctypes.c_int64),
                ("allow_weak_privacy", ctypes.c_int)]


class LibLdptext:
    """A thin ctypes binding of include/ldptext.h for the tests."""

    def __init__(self, path: Path) -> None:
        lib = ctypes.CDLL(str(path))
        vp, sz, i32p = ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int32)
        lib.ldp_bundle_open.argtypes = [ctypes.c_char_p, ctypes.c_void_p, sz, ctypes.POINTER(vp)]
        lib.ldp_bundle_open_memory.argtypes = [ctypes.c_char_p, sz, ctypes.c_void_p, sz,
                                               ctypes.POINTER(vp)]
        lib.ldp_bundle_open_expect.argtypes = [ctypes.c_char_p, ctypes.c_void_p, sz, ctypes.POINTER(Expect),
                                               ctypes.POINTER(vp)]
        lib.ldp_bundle_open_memory_expect.argtypes = [ctypes.c_char_p, sz, ctypes.c_void_p, sz,
                                                      ctypes.POINTER(Expect), ctypes.POINTER(vp)]
        lib.ldp_bundle_close.argtypes = [vp]
        lib.ldp_sanitizer_new.argtypes = [vp, ctypes.POINTER(vp)]
        lib.ldp_sanitizer_new_seeded.argtypes = [vp, ctypes.c_uint64, ctypes.POINTER(vp)]
        lib.ldp_sanitizer_free.argtypes = [vp]
        lib.ldp_tokenize.argtypes = [vp, ctypes.c_char_p, sz, i32p, sz, ctypes.POINTER(sz)]
        lib.ldp_detokenize.argtypes = [vp, i32p, sz, ctypes.POINTER(ctypes.c_void_p),
                                       ctypes.POINTER(sz)]
        lib.ldp_sample_ids.argtypes = [vp, i32p, i32p, sz]
        lib.ldp_sanitize.argtypes = [vp, ctypes.c_char_p, sz, ctypes.POINTER(ctypes.c_void_p),
                                     ctypes.POINTER(sz), ctypes.POINTER(Report)]
        lib.ldp_free.argtypes = [vp]
        lib.ldp_strerror.argtypes = [ctypes.c_int]
        lib.ldp_strerror.restype = ctypes.c_char_p
        lib.ldp_version.restype = ctypes.c_char_p
        lib.ldp_abi_version.restype = ctypes.c_int
        lib.ldp_bundle_info.argtypes = [vp, ctypes.POINTER(ctypes.c_void_p)]
        self.lib = lib

    @staticmethod
    def _keys(keys: list[bytes]):
        buf = (ctypes.c_uint8 * (32 * max(1, len(keys))))()
        for i, k in enumerate(keys):
            assert len(k) == 32
            ctypes.memmove(ctypes.addressof(buf) + 32 * i, k, 32)
        return buf

    def strerror(self, rc: int) -> str:
        return self.lib.ldp_strerror(rc).decode()

    def open(self, source: Path | bytes, keys: list[bytes], *, allow_weak: bool = True) -> tuple[int, ctypes.c_void_p]:
        """(rc, bundle handle); source is a path or the bundle's bytes. ``allow_weak``: open a
        near-identity bundle (ldp_expect.allow_weak_privacy), as the Python tests' loads do
        (conftest.load_seeded); False: the plain ldp_bundle_open / _memory, which refuse it."""
        handle = ctypes.c_void_p()
        kb = self._keys(keys)
        memory = isinstance(source, (bytes, bytearray))
        if allow_weak:
            e = Expect(size=ctypes.sizeof(Expect), allow_weak_privacy=1)
            if memory:
                rc = self.lib.ldp_bundle_open_memory_expect(bytes(source), len(source), kb, len(keys),
                                                            ctypes.byref(e), ctypes.byref(handle))
            else:
                rc = self.lib.ldp_bundle_open_expect(str(source).encode(), kb, len(keys), ctypes.byref(e),
                                                     ctypes.byref(handle))
        elif memory:
            rc = self.lib.ldp_bundle_open_memory(bytes(source), len(source), kb, len(keys),
                                                 ctypes.byref(handle))
        else:
            rc = self.lib.ldp_bundle_open(str(source).encode(), kb, len(keys), ctypes.byref(handle))
        assert (rc == OK) == bool(handle.value), "a handle is returned exactly on success"
        return rc, handle

    def close(self, bundle) -> None:
        self.lib.ldp_bundle_close(bundle)

    def bundle_info(self, bundle) -> dict:
        """ldp_bundle_info, parsed."""
        out = ctypes.c_void_p()
        rc = self.lib.ldp_bundle_info(bundle, ctypes.byref(out))
        assert rc == OK, self.strerror(rc)
        try:
            return json.loads(ctypes.string_at(out.value).decode())
        finally:
            self.lib.ldp_free(out)

    def sanitizer(self, bundle, seed: int | None = None):
        handle = ctypes.c_void_p()
        if seed is None:
            rc = self.lib.ldp_sanitizer_new(bundle, ctypes.byref(handle))
        else:
            rc = self.lib.ldp_sanitizer_new_seeded(bundle, seed, ctypes.byref(handle))
        assert rc == OK, self.strerror(rc)
        return handle

    def free_sanitizer(self, s) -> None:
        self.lib.ldp_sanitizer_free(s)

    def tokenize(self, s, text: str | bytes) -> tuple[int, list[int]]:
        raw = text.encode() if isinstance(text, str) else text
        n = ctypes.c_size_t()
        cap = len(raw) + 16
        ids = (ctypes.c_int32 * cap)()
        rc = self.lib.ldp_tokenize(s, raw, len(raw), ids, cap, ctypes.byref(n))
        if rc == E_CAPACITY:
            cap = n.value
            ids = (ctypes.c_int32 * cap)()
            rc = self.lib.ldp_tokenize(s, raw, len(raw), ids, cap, ctypes.byref(n))
        return rc, list(ids[:n.value]) if rc == OK else []

    def detokenize(self, s, ids) -> tuple[int, str | None]:
        arr = np.ascontiguousarray(ids, dtype=np.int32)
        out, n = ctypes.c_void_p(), ctypes.c_size_t()
        rc = self.lib.ldp_detokenize(s, arr.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
                                     arr.size, ctypes.byref(out), ctypes.byref(n))
        if rc != OK:
            return rc, None
        text = ctypes.string_at(out.value, n.value).decode()
        self.lib.ldp_free(out)
        return rc, text

    def sample(self, s, ids) -> tuple[int, np.ndarray]:
        xs = np.ascontiguousarray(ids, dtype=np.int32)
        ys = np.empty_like(xs)
        p32 = ctypes.POINTER(ctypes.c_int32)
        rc = self.lib.ldp_sample_ids(s, xs.ctypes.data_as(p32), ys.ctypes.data_as(p32), xs.size)
        return rc, ys

    def sanitize(self, s, text: str | bytes) -> tuple[int, str | None, Report]:
        raw = text.encode() if isinstance(text, str) else text
        out, n, rep = ctypes.c_void_p(), ctypes.c_size_t(), Report()
        rc = self.lib.ldp_sanitize(s, raw, len(raw), ctypes.byref(out), ctypes.byref(n),
                                   ctypes.byref(rep))
        if rc != OK:
            assert not out.value, "nothing is returned on failure"
            return rc, None, rep
        text_out = ctypes.string_at(out.value, n.value).decode()
        self.lib.ldp_free(out)
        return rc, text_out, rep


def build_library() -> None:
    """make -C native (incremental; `make test` has built it already)."""
    with build_lock():
        subprocess.run(["make", "-s", "-C", str(NATIVE), "all"], check=True, capture_output=True)


@pytest.fixture(scope="session")
def clib() -> LibLdptext:
    try:
        build_library()
    except subprocess.CalledProcessError as e:
        pytest.fail("libldptext does not build (needs libsodium-dev and libutf8proc-dev): "
                    + e.stderr.decode(errors="replace")[-2000:])
    return LibLdptext(LIB_PATH)


@pytest.fixture(scope="session")
def dev_key(ldptext_home) -> bytes:
    """The test run's developer public key (tiny bundles are signed with it)."""
    from ldptext import keys
    return keys.public_bytes(keys.developer_key().public_key())


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("clib")
    return {"santext": build_tiny_bundle(d / "s.ldpb", mechanism="santext"),
            "santext+": build_tiny_bundle(d / "sp.ldpb", mechanism="santext+", p=0.3, w=0.7)}


@pytest.fixture(scope="module")
def glove(tmp_path_factory) -> Path:
    """A real GloVe SanText+ bundle (3,000 words; a few seconds)."""
    from ldptext_precompute.santext.build import build_santext_bundle
    path = tmp_path_factory.mktemp("cglove") / "glove.ldpb"
    return build_santext_bundle(path, embeddings="glove-6b-50d", vocab_size=3000, epsilon=3.0,
                                mechanism="santext+", p=0.3, w=0.9, head_size=32, progress=False)


@pytest.fixture(scope="module")
def minilm(tmp_path_factory) -> Path:
    """The real 30,522-token MiniLM WordPiece bundle: about 35 s to build on two cores, so only when
    LDPTEXT_TEST_REAL_MINILM=1 (the tokenizer itself is checked in full by the conformance test)."""
    if os.environ.get("LDPTEXT_TEST_REAL_MINILM") != "1":
        pytest.skip("set LDPTEXT_TEST_REAL_MINILM=1 to build the real MiniLM bundle (~35 s)")
    from ldptext_precompute.santext.build import build_santext_bundle
    path = tmp_path_factory.mktemp("cminilm") / "minilm.ldpb"
    return build_santext_bundle(path, embeddings="minilm-wordpiece", epsilon=3.0, mechanism="santext",
                                head_size=32, progress=False)


def python_error(source, key: bytes) -> str | None:
    """Name of the exception the Python runtime raises for this bundle (None if it loads)."""
    from ldptext.errors import BundleError
    from ldptext.santext import Sanitizer
    from ldptext import keys
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            Sanitizer.load(source, trusted_keys=[keys.load_public_key(key)], backend="fallback")
    except BundleError as e:
        return type(e).__name__
    return None


# ---- acceptance and refusal ------------------------------------------------------------------

def test_only_the_ldp_api_is_exported(clib):
    for name in ("ldp_bundle_open", "ldp_sanitize", "ldp_sample_ids", "ldp_tokenize",
                 "ldp_strerror", "ldp_version", "ldp_free", "ldp_sanitizer_new_seeded"):
        assert hasattr(clib.lib, name)
    for internal in ("ldp_json_parse", "ldp_tokenizer_load", "ldp_santext_sample_many",
                     "ldp_chacha_init", "ldp_os_random", "ldp_uc_normalize"):
        with pytest.raises(AttributeError):
            getattr(clib.lib, internal)
    assert clib.lib.ldp_version().decode() == "0.1.0"


@pytest.mark.parametrize("mechanism", ["santext", "santext+"])
def test_accepts_what_python_accepts(clib, tiny, dev_key, mechanism):
    path = tiny[mechanism]
    assert python_error(path, dev_key) is None
    for source in (path, path.read_bytes()):
        rc, b = clib.open(source, [dev_key])
        assert rc == OK, clib.strerror(rc)
        clib.close(b)


def test_accepts_a_real_glove_bundle(clib, glove, dev_key):
    assert python_error(glove, dev_key) is None
    rc, b = clib.open(glove, [dev_key])
    assert rc == OK, clib.strerror(rc)
    clib.close(b)


@pytest.mark.parametrize("mechanism", ["santext", "santext+"])
def test_refuses_tampered_bytes_as_python_does(clib, tiny, dev_key, mechanism):
    data = tiny[mechanism].read_bytes()
    hlen = int.from_bytes(data[:8], "little")
    rng = np.random.default_rng(0)
    offsets = sorted(set([0, 1, 3, 7, 8, 9, 8 + hlen - 1, 8 + hlen, len(data) - 1]
                         + [int(x) for x in rng.integers(8, 8 + hlen, 40)]
                         + [int(x) for x in rng.integers(8 + hlen, len(data), 24)]))
    seen = set()
    for off in offsets:
        for bit in (0, 5):
            bad = bytearray(data)
            bad[off] ^= 1 << bit
            expected = python_error(bytes(bad), dev_key)
            rc, _ = clib.open(bytes(bad), [dev_key])
            assert expected is not None
            assert rc != OK, f"C accepted a bundle with byte {off} bit {bit} flipped"
            assert rc in CODES_OF[expected], (off, bit, expected, rc, clib.strerror(rc))
            seen.add(rc)
    assert len(seen) >= 4  # the flips reach several different checks
    for cut in (0, 5, 8, 100, 8 + hlen - 1, 8 + hlen, len(data) - 1):
        rc, _ = clib.open(data[:cut], [dev_key])
        assert rc != OK
    rc, _ = clib.open(data + b"\0", [dev_key])
    assert rc == -67  # trailing data


def test_refuses_wrong_key_unsigned_and_stranger(clib, tiny, dev_key, tmp_path):
    from ldptext import keys
    from ldptext.bundle import read_bundle, write_bundle
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    path = tiny["santext"]
    stranger = Ed25519PrivateKey.generate()
    other = keys.public_bytes(stranger.public_key())
    rc, _ = clib.open(path, [other])
    assert rc == E_UNTRUSTED_KEY
    rc, _ = clib.open(path, [])
    assert rc == E_UNTRUSTED_KEY
    rc, b = clib.open(path, [other, dev_key])
    assert rc == OK
    clib.close(b)
    # the same content, unsigned, and signed by a stranger
    bundle = read_bundle(path, trusted_keys=[keys.load_public_key(dev_key)])
    manifest = {k: v for k, v in bundle.manifest.items()
                if k not in ("format", "format_version", "mechanism", "arrays")}
    arrays = {n: np.array(a) for n, a in bundle.arrays.items() if not n.startswith("blob/")}
    blobs = {n[5:]: bytes(a) for n, a in bundle.arrays.items() if n.startswith("blob/")}
    unsigned = write_bundle(tmp_path / "u.ldpb", mechanism="santext", arrays=arrays,
                            manifest=manifest, blobs=blobs, sign_key=None)
    assert python_error(unsigned, dev_key) == "UnsignedBundleError"
    assert clib.open(unsigned, [dev_key])[0] == E_UNSIGNED
    strange = write_bundle(tmp_path / "x.ldpb", mechanism="santext", arrays=arrays,
                           manifest=dict(manifest, params=dict(manifest["params"], epsilon=50.0)),
                           blobs=blobs, sign_key=stranger)
    assert python_error(strange, dev_key) == "UnknownKeyError"
    assert clib.open(strange, [dev_key])[0] == E_UNTRUSTED_KEY
    # re-signing an unchanged manifest with the trusted key reproduces the file byte for byte
    again = write_bundle(tmp_path / "again.ldpb", mechanism="santext", arrays=arrays,
                         manifest=manifest, blobs=blobs, sign_key=keys.developer_key())
    assert again.read_bytes() == path.read_bytes()


def test_missing_files(clib, tmp_path, dev_key):
    assert clib.open(tmp_path / "none.ldpb", [dev_key])[0] == -20
    assert clib.open(tmp_path, [dev_key])[0] == -22
    (tmp_path / "empty.ldpb").write_bytes(b"")
    assert clib.open(tmp_path / "empty.ldpb", [dev_key])[0] == -23
    assert python_error(tmp_path / "empty.ldpb", dev_key) == "BundleError"


# ---- the same outputs as Python ---------------------------------------------------------------

DOCS = ["w1 w2 hello W3, w4!", "w5 w6 w7 w8 w9 w10 w11 " * 7, "", "x", "W12\tw13\nw14  w15.",
        "Ünïcödé w16 ﬁ w17 東京 🤣 w18"]


@pytest.mark.parametrize("mechanism", ["santext", "santext+"])
@pytest.mark.parametrize("seed", [0, 1, 2**63 + 5])
def test_seeded_c_output_is_the_python_seeded_output(clib, tiny, dev_key, mechanism, seed):
    path = tiny[mechanism]
    san = load_seeded(path, seed=seed)
    rc, b = clib.open(path, [dev_key])
    assert rc == OK
    s = clib.sanitizer(b, seed=seed)
    try:
        for doc in DOCS:  # one call per document on both sides: the same stream
            rc, text, rep = clib.sanitize(s, doc)
            expected = san.sanitize(doc)
            assert rc == OK
            assert text == expected.text
            assert rep.n_tokens == expected.report.n_tokens
            assert rep.seeded == 1 and MECH[rep.mechanism] == mechanism
            assert rep.epsilon == expected.report.epsilon
            assert rep.p == (1.0 if expected.report.p is None else expected.report.p)
            assert rep.epsilon0 == expected.report.epsilon0
            assert rep.d_max == expected.report.d_max
            assert rep.tolerance == expected.report.numeric_tolerance
        ids = np.tile(np.arange(san.n_rows), 20)[:1000]
        ids = ids[san.valid_input[ids]]
        rc, ys = clib.sample(s, ids)
        assert rc == OK
        assert np.array_equal(ys, san.sample_ids(ids))
    finally:
        clib.free_sanitizer(s)
        clib.close(b)


def test_seeded_c_output_is_the_python_seeded_output_on_glove(clib, glove, dev_key):
    from ldptext import keys
    san = load_seeded(glove, seed=7, trusted_keys=[keys.load_public_key(dev_key)])
    rc, b = clib.open(glove, [dev_key])
    assert rc == OK
    s = clib.sanitizer(b, seed=7)
    docs = ["Emily was diagnosed with asthma at Mercy Hospital.",
            "The quick brown fox jumps over the lazy dog; it didn't care!",
            "Ünïcödé, ﬁnancial reports (2023) — 東京 and Zürich."]
    try:
        for doc in docs:
            assert clib.tokenize(s, doc) == (OK, san.tokenize(doc).tolist())
            rc, text, rep = clib.sanitize(s, doc)
            assert rc == OK and text == san.sanitize(doc).text
    finally:
        clib.free_sanitizer(s)
        clib.close(b)


HUGE_PROBE = """
import ctypes, sys
def advised_kib():
    # the memory of this process advised MADV_HUGEPAGE ("hg" among a mapping's VmFlags)
    total = size = 0
    for line in open("/proc/self/smaps"):
        if line.startswith("Size:"):
            size = int(line.split()[1])
        elif line.startswith("VmFlags:") and "hg" in line.split()[1:]:
            total += size
    return total
class Expect(ctypes.Structure):  # ldp_expect, with the weak-privacy opt-in (a test bundle at large eps)
    _fields_ = [("size", ctypes.c_size_t), ("mechanisms", ctypes.c_uint), ("epsilon_min", ctypes.c_double),
                ("epsilon_max", ctypes.c_double), ("bundle_id", ctypes.c_char_p),
                ("min_format_version", ctypes.c_int64), ("allow_weak_privacy", ctypes.c_int)]
lib = ctypes.CDLL(sys.argv[1])
lib.ldp_bundle_open_expect.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t,
                                       ctypes.POINTER(Expect), ctypes.POINTER(ctypes.c_void_p)]
key = (ctypes.c_uint8 * 32).from_buffer_copy(bytes.fromhex(sys.argv[3]))
before, b = advised_kib(), ctypes.c_void_p()
e = Expect(size=ctypes.sizeof(Expect), allow_weak_privacy=1)
assert lib.ldp_bundle_open_expect(sys.argv[2].encode(), key, 1, ctypes.byref(e), ctypes.byref(b)) == 0
print(advised_kib() - before)
"""


def kernel_has_huge_pages() -> bool:
    """Whether the kernel has transparent huge pages (then MADV_HUGEPAGE marks a range "hg" in
    /proc/self/smaps, whether or not it is given huge pages at that moment)."""
    return Path("/sys/kernel/mm/transparent_hugepage/enabled").exists() and Path("/proc/self/smaps").exists()


@pytest.fixture(scope="module")
def two_mib_rows(tmp_path_factory) -> Path:
    """A generated bundle whose embedding rows fill more than one 2 MiB page (4,100 x 512 codes)."""
    return build_tiny_bundle(tmp_path_factory.mktemp("chuge") / "h.ldpb", n=4100, dim=512,
                             mechanism="santext+", p=0.3, w=0.7, head_size=16, epsilon=8.0)


@pytest.mark.parametrize("which", ["tiny", "glove", "two_mib_rows"])
def test_cache_line_rows_draw_what_the_stored_rows_draw(clib, request, dev_key, which):
    """ldp_bundle_open samples from a copy of emb_q whose rows start on cache lines, padded with zero
    codes to a multiple of 64 (GloVe's 50 -> 64), advised as huge pages from 2 MiB of rows on;
    ldp_bundle_open_memory from the stored rows in place. Zero codes add nothing to a distance, so a
    seed draws the same ids from both."""
    path = request.getfixturevalue(which)
    path = path["santext+"] if which == "tiny" else path
    handles = [clib.open(path, [dev_key]), clib.open(path.read_bytes(), [dev_key])]
    assert [rc for rc, _ in handles] == [OK, OK]
    if which == "two_mib_rows" and kernel_has_huge_pages():
        # the copy asks for huge pages: at least one whole 2 MiB page of it is advised (checked in a
        # fresh process, so nothing else there advises memory; whether the kernel grants the pages
        # at once depends on its fragmentation, so that is not asserted)
        probe = subprocess.run([sys.executable, "-c", HUGE_PROBE, str(LIB_PATH), str(path), dev_key.hex()],
                               capture_output=True, text=True, timeout=120)
        assert probe.returncode == 0, probe.stderr[-2000:]
        assert int(probe.stdout) >= 2048
    sanitizers = [clib.sanitizer(b, seed=11) for _, b in handles]
    try:
        from ldptext import keys
        with load_seeded(path, trusted_keys=[keys.load_public_key(dev_key)]) as san:
            ids = np.tile(np.arange(san.n_rows, dtype=np.int32), 3)
            ids = ids[san.valid_input[ids]]
        (rc_a, a), (rc_b, b) = (clib.sample(s, ids) for s in sanitizers)
        assert rc_a == rc_b == OK
        assert np.array_equal(a, b) and not np.array_equal(a, ids)
    finally:
        for s in sanitizers:
            clib.free_sanitizer(s)
        for _, b in handles:
            clib.close(b)


def test_real_minilm_bundle(clib, minilm, dev_key):
    from ldptext import keys
    san = load_seeded(minilm, seed=3, trusted_keys=[keys.load_public_key(dev_key)])
    rc, b = clib.open(minilm, [dev_key])
    assert rc == OK, clib.strerror(rc)
    s = clib.sanitizer(b, seed=3)
    docs = ["Patient John Smith, born 1984, lives at 12 Elm Street; diagnosis: diabetes.",
            "Ünïcödé ﬁnance 東京 naïve café — don't", "unaffable tokenization!!"]
    try:
        for doc in docs:
            assert clib.tokenize(s, doc) == (OK, san.tokenize(doc).tolist())
            rc, text, _ = clib.sanitize(s, doc)
            assert rc == OK and text == san.sanitize(doc).text
        # a typed special token is ordinary text, in C as in Python: the same ids,
        # never the special id 103, and the same sanitized text
        rc, ids = clib.tokenize(s, "a [MASK] b")
        assert rc == OK and ids == san.tokenize("a [MASK] b").tolist() and 103 not in ids
        rc, text, _ = clib.sanitize(s, "a [MASK] b")
        assert rc == OK and text == san.sanitize("a [MASK] b").text
        row = int(san.tokenize("diabetes")[0])
        probs = san.probabilities([row])[0]
        s2 = clib.sanitizer(b)
        rc, ys = clib.sample(s2, np.full(300_000, row))
        clib.free_sanitizer(s2)
        assert rc == OK
        assert chi_square_p(np.bincount(ys, minlength=san.n_rows), probs) > 1e-6
    finally:
        clib.free_sanitizer(s)
        clib.close(b)


def test_detokenization_is_pythons(clib, glove, tiny, dev_key):
    from ldptext import keys
    rng = np.random.default_rng(1)
    for path in (tiny["santext"], glove):
        san = load_seeded(path, seed=0, trusted_keys=[keys.load_public_key(dev_key)])
        rc, b = clib.open(path, [dev_key])
        s = clib.sanitizer(b, seed=0)
        try:
            for _ in range(50):
                ids = rng.integers(0, san.n_rows, rng.integers(0, 30))
                assert clib.detokenize(s, ids) == (OK, san.detokenize(ids))
            assert clib.detokenize(s, [san.n_rows + 5])[0] == E_INPUT_ID
        finally:
            clib.free_sanitizer(s)
            clib.close(b)


def test_invalid_input_is_refused(clib, tiny, dev_key):
    rc, b = clib.open(tiny["santext"], [dev_key])
    s = clib.sanitizer(b)
    try:
        assert clib.sanitize(s, b"w1 \xff w2")[0] == E_INVALID_UTF8
        assert clib.tokenize(s, b"\xed\xa0\x80")[0] == E_INVALID_UTF8
        assert clib.sample(s, [0, 10_000])[0] == E_INPUT_ID
        assert clib.sample(s, [-1])[0] == E_INPUT_ID
    finally:
        clib.free_sanitizer(s)
        clib.close(b)


# ---- the exact distribution --------------------------------------------------------------------

def chi_square_p(counts: np.ndarray, probs: np.ndarray) -> float:
    """p-value of observed counts against probabilities (bins with expectation < 5 pooled)."""
    from scipy.stats import chisquare
    n = counts.sum()
    expected = probs * n
    big = expected >= 5
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    if exp[-1] == 0:
        assert obs[-1] == 0, "an output of probability 0 was drawn"
        obs, exp = obs[:-1], exp[:-1]
    return float(chisquare(obs, exp * obs.sum() / exp.sum()).pvalue)


@pytest.mark.parametrize("which,row", [("santext", 3), ("santext+", 0), ("santext+", 40),
                                       ("glove", 17), ("glove", 2999)])
def test_c_sampling_follows_sanitizer_probabilities(clib, tiny, glove, dev_key, which, row):
    from ldptext import keys
    path = glove if which == "glove" else tiny[which]
    san = load_seeded(path, seed=0, trusted_keys=[keys.load_public_key(dev_key)])
    probs = san.probabilities([row])[0]
    rc, b = clib.open(path, [dev_key])
    s = clib.sanitizer(b)  # OS-seeded: the private path
    try:
        n = 200_000
        rc, ys = clib.sample(s, np.full(n, row))
        assert rc == OK
        counts = np.bincount(ys, minlength=san.n_rows)
        assert (counts[probs == 0] == 0).all(), "an impossible output was drawn"
        assert chi_square_p(counts, probs) > 1e-6
    finally:
        clib.free_sanitizer(s)
        clib.close(b)


def test_os_seeded_sanitizers_differ(clib, tiny, dev_key):
    rc, b = clib.open(tiny["santext"], [dev_key])
    s1, s2 = clib.sanitizer(b), clib.sanitizer(b)
    try:
        ids = np.arange(60).repeat(20)
        assert not np.array_equal(clib.sample(s1, ids)[1], clib.sample(s2, ids)[1])
    finally:
        clib.free_sanitizer(s1)
        clib.free_sanitizer(s2)
        clib.close(b)


# ---- the ABI and the bundle's public facts ----------------------------------------------------

def test_abi_version_is_the_header_s_and_the_soname_s(clib):
    header = (NATIVE / "include" / "ldptext.h").read_text()
    abi = int(header.split("#define LDP_ABI_VERSION ")[1].split()[0])
    assert clib.lib.ldp_abi_version() == abi
    # build/libldptext.so -> libldptext.so.N.M.P, whose SONAME is libldptext.so.N
    assert LIB_PATH.resolve().name.startswith(f"libldptext.so.{abi}.")
    dynamic = subprocess.run(["readelf", "-d", str(LIB_PATH)], capture_output=True, text=True,
                             check=True).stdout
    assert f"Library soname: [libldptext.so.{abi}]" in dynamic


def python_bundle_facts(path: Path, key: bytes) -> dict:
    """What the Python runtime reports for a bundle, under ldp_bundle_info's names."""
    from ldptext import keys
    from ldptext.runtime import open_bundle
    from ldptext.santext import Sanitizer
    bundle = open_bundle(path, mechanisms=("santext", "santext+"),
                         trusted_keys=[keys.load_public_key(key)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        san = Sanitizer(bundle, backend="fallback")
    report = san.privacy_report(1)
    stated = san.manifest["privacy"].get("verbatim")  # what ldp_bundle_info states: the statement
    return {"verbatim_median": stated["median"] if stated else None,
            "verbatim_max": stated["max"] if stated else None,
            **{f"verbatim_{k}": stated.get(k) if stated else None
               for k in ("cap", "p90", "p99", "above_0_5", "above_0_9")},
            "weak_privacy": bool(stated) and report.weak_privacy,
            "format_version": san.manifest["format_version"], "mechanism": san.mechanism,
            "epsilon": san.epsilon, "epsilon0": san.epsilon0, "p": san.p, "d_max": san.d_max,
            "tolerance": report.numeric_tolerance, "ledger_unit": san.ledger_unit,
            "worst_case_token_epsilon": san.worst_case_token_epsilon,
            "worst_case_note": report.worst_case_note, "bundle_id": bundle.bundle_id,
            # the statement's prose: the unit's words, through the generated mechanisms.h
            "notion": report.notion, "neighbouring": report.neighbouring, "metric": report.metric,
            "numeric_note": report.numeric_note,
            "key_id": san.key_id, "manifest": san.manifest}


@pytest.mark.parametrize("which", ["santext", "santext+", "glove"])
def test_bundle_info_is_what_python_reports(clib, tiny, glove, dev_key, which):
    path = glove if which == "glove" else tiny[which]
    expected = python_bundle_facts(path, dev_key)
    rc, b = clib.open(path, [dev_key])
    assert rc == OK, clib.strerror(rc)
    try:
        info = clib.bundle_info(b)
    finally:
        clib.close(b)
    assert set(info) == set(expected)
    for name, value in expected.items():  # exact: the numbers are written as Python's repr
        assert info[name] == value, name
    assert info["ledger_unit"].startswith("metric:") and len(info["ledger_unit"]) == 7 + 16
    assert (info["worst_case_token_epsilon"] is None) == (info["mechanism"] == "santext+")


def test_bundle_info_refuses_null_arguments(clib, tiny, dev_key):
    out = ctypes.c_void_p(1)
    assert clib.lib.ldp_bundle_info(None, ctypes.byref(out)) == -1 and not out.value
    rc, b = clib.open(tiny["santext"], [dev_key])
    assert rc == OK
    assert clib.lib.ldp_bundle_info(b, None) == -1
    clib.close(b)


# ---- the example program ----------------------------------------------------------------------

def test_example_program_sanitizes_lines(clib, tiny, dev_key, tmp_path):
    pub = tmp_path / "dev.pub"
    pub.write_text(base64.b64encode(dev_key).decode() + "\n")
    lines = b"w1 w2 w3\n\nW4, w5!\nw6 w7"
    res = subprocess.run([str(EXAMPLE), "--report", str(tiny["santext+"]), str(pub)], input=lines,
                         capture_output=True, timeout=60)
    assert res.returncode == 0, res.stderr
    out = res.stdout.decode().split("\n")
    assert len(out) == 5 and out[-1] == "" and out[1] == ""
    assert [len(x.split()) for x in out[:4]] == [3, 0, 4, 2]
    assert res.stderr.decode().count("santext+ eps=2") == 4
    # a line that is not UTF-8: named by its number, never echoed; the others still come out
    res = subprocess.run([str(EXAMPLE), str(tiny["santext"]), str(pub)],
                         input=b"w1\nsecret \xff w2\nw3\n", capture_output=True, timeout=60)
    assert res.returncode == 2
    assert b"line 2" in res.stderr and b"secret" not in res.stderr
    assert res.stdout.decode().split("\n")[:3][1] == ""
    # an untrusted key: refused before anything is read
    other = tmp_path / "other.pub"
    other.write_text(base64.b64encode(bytes(32)).decode() + "\n")
    res = subprocess.run([str(EXAMPLE), str(tiny["santext"]), str(other)], input=b"w1\n",
                         capture_output=True, timeout=60)
    assert res.returncode == 1 and b"untrusted key" in res.stderr and res.stdout == b""
