"""Bounded fuzzing of the bundle loader and of the C extension's entry points.

    .venv/bin/python fuzz/fuzz_bundle.py --target all --seconds 60          # built-in fuzzer
    .venv/bin/python fuzz/fuzz_bundle.py --target bundle --engine atheris --seconds 60

Targets
-------
``bundle``  bytes of a bundle file -> ``read_bundle`` (trusted key; and ``allow_unsigned=True``)
            and ``open_unverified``. Contract: success or a ``BundleError`` subclass, nothing else.
            The built-in engine mutates real bundles structurally too (header entries, manifest
            fields, re-signing with the trusted key so the checks after the signature are reached).
``native``  bytes -> a sequence of calls into ``ldptext._native`` (``Generator`` methods and
            ``SantextTable``) with random arrays, dtypes, shapes, contiguity, alignment and
            parameters. Contract: a result or TypeError/ValueError/IndexError/RuntimeError/
            OverflowError; never a crash, a hang, or out-of-range output.

Engines: ``atheris`` (coverage-guided, when installed: ``pip install atheris``) or ``builtin`` (a
seeded mutation fuzzer, no dependency; what the test suite runs for a few seconds). A crash is a
signal (faulthandler prints where); a hang is caught by a watchdog (``--hang-seconds``) that dumps
the stack and exits. The input being executed is kept in ``--crash-dir`` so a finding can be
replayed with ``--replay FILE``. Prints the number of executions per target.
"""
from __future__ import annotations

import argparse
import base64
import faulthandler
import json
import os
import struct
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from ldptext import _native
from ldptext import bundle as B
from ldptext import keys
from ldptext.errors import BundleError

ALLOWED_NATIVE = (TypeError, ValueError, IndexError, RuntimeError, OverflowError, BufferError)
INTERESTING_FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, 1e-300, 5e-324, 2.2e-308, 1e-170, 1e-150, 1e15,
                      9.99e14, 3.9e18, 4e18, 1e300, 1.7976931348623157e308, float("inf"),
                      float("-inf"), float("nan"), 2.0 ** 53, 2.0 ** 64, 0.9999999999999999,
                      745.2, 1e-17, 3.0, 20.0]
INTERESTING_INTS = [0, 1, 2, 3, 7, 8, 255, 256, 65534, 65535, 65536, 2**31 - 1, 2**31, 2**32 - 1,
                    2**32, 2**32 + 1, 2**53, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 1, 2**64, -1,
                    -2**63]
DTYPES = ["i1", "u1", "?", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f2", "<f4", "<f8", ">i4",
          ">i8", ">f8", "<c8"]


class Provider:
    """Turns fuzzer bytes into typed choices (both engines feed the same code path)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            return 0
        self.pos += 1
        return self.data[self.pos - 1]

    def bytes(self, n: int) -> bytes:
        out = self.data[self.pos:self.pos + n]
        self.pos += len(out)
        return out.ljust(n, b"\0")

    def int(self, lo: int, hi: int) -> int:
        """Uniform-ish in [lo, hi]."""
        span = hi - lo + 1
        raw = int.from_bytes(self.bytes(4 if span > 255 else 1), "little")
        return lo + raw % span

    def u64(self) -> int:
        return int.from_bytes(self.bytes(8), "little")

    def choice(self, seq):
        return seq[self.int(0, len(seq) - 1)]

    def float(self) -> float:
        if self.byte() % 2:
            return self.choice(INTERESTING_FLOATS)
        return struct.unpack("<d", self.bytes(8))[0]

    def bigint(self) -> int:
        return self.choice(INTERESTING_INTS) if self.byte() % 2 else self.u64()


# ---- bundle target ----------------------------------------------------------------------------

class BundleTarget:
    """Holds the seed bundles, the trusted key and a scratch file on a fast filesystem."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        os.environ["LDPTEXT_HOME"] = str(workdir / "home")
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
        self.key = Ed25519PrivateKey.generate()
        self.trusted = [self.key.public_key()]
        self.seeds = [self._seed(signed=True), self._seed(signed=False), self._seed_small()]
        self.scratch = workdir / "case.ldpb"
        self.execs = 0

    def _arrays(self) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(0)
        return {"embeddings": rng.standard_normal((12, 4)).astype(np.float32),
                "head_ids": rng.integers(0, 12, (12, 3)).astype(np.int32),
                "alias_threshold": rng.integers(0, 2**32, (12, 4), dtype=np.uint64)
                .astype(np.uint32),
                "alias_index": rng.integers(0, 4, (12, 4)).astype(np.uint16),
                "accept_gamma": rng.random((12, 4)), "keep_row": np.ones(12, np.uint8),
                "sensitive": rng.random(12) < 0.5, "empty": np.zeros((0, 2), np.float64)}

    def _seed(self, signed: bool) -> bytes:
        path = B.write_bundle(self.workdir / f"seed{int(signed)}.ldpb", mechanism="santext+",
                              arrays=self._arrays(),
                              manifest={"params": {"epsilon": 3.0, "p": 0.3},
                                        "privacy": {"d_max": 4.5}},
                              blobs={"vocab.json": b'["a","b"]'},
                              sign_key=self.key if signed else None)
        return path.read_bytes()

    def _seed_small(self) -> bytes:
        path = B.write_bundle(self.workdir / "seed2.ldpb", mechanism="dpbart",
                              arrays={"x": np.arange(3, dtype=np.int64)}, manifest={},
                              sign_key=self.key)
        return path.read_bytes()

    def run_one(self, data: bytes) -> None:
        """Execute one input; raises AssertionError-like FuzzFinding on a contract breach."""
        self.execs += 1
        tmp = self.scratch.with_suffix(".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, self.scratch)  # a fresh inode: never rewrite a file a view still maps
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", B.UnsignedBundleWarning)
            for call in (lambda: B.read_bundle(self.scratch, trusted_keys=self.trusted),
                         lambda: B.read_bundle(self.scratch, trusted_keys=self.trusted,
                                               allow_unsigned=True),
                         lambda: B.open_unverified(self.scratch)):
                try:
                    result = call()
                except BundleError:
                    continue
                except Exception as e:  # noqa: BLE001 - exactly what we hunt for
                    raise FuzzFinding(f"bundle loader raised {type(e).__name__}: {e}") from e
                bundle = result[0] if isinstance(result, tuple) else result
                for a in bundle.arrays.values():  # touch every byte a caller could read
                    bytes(memoryview(np.ascontiguousarray(a)).cast("B")) if a.size else None

    # -- structure-aware mutations (built-in engine) ------------------------------------------
    def mutate(self, rng: np.random.Generator) -> bytes:
        data = bytearray(self.seeds[int(rng.integers(len(self.seeds)))])
        kind = int(rng.integers(9))
        if kind <= 2:  # bit flips
            for _ in range(1 + int(rng.integers(4))):
                data[int(rng.integers(len(data)))] ^= 1 << int(rng.integers(8))
        elif kind == 3:  # truncate or extend
            cut = int(rng.integers(len(data) + 1))
            data = data[:cut] if rng.random() < 0.7 else data + bytes(rng.integers(0, 256,
                                                                                   cut % 64,
                                                                                   dtype=np.uint8))
        elif kind == 4:  # overwrite a run with an interesting byte
            i = int(rng.integers(len(data)))
            n = int(rng.integers(1, 16))
            data[i:i + n] = bytes([int(rng.choice([0, 0x20, 0x22, 0x7B, 0x7D, 0xFF, 0x30]))]) * n
        elif kind == 5:  # the 8-byte header length
            data[:8] = struct.pack("<Q", int(rng.choice(
                [0, 1, 7, 8, len(data), len(data) - 8, 2**63, 2**64 - 1,
                 struct.unpack("<Q", bytes(data[:8]))[0] + int(rng.integers(-16, 17))]))
                % 2**64)
        else:  # edit the parsed header / manifest and (often) re-sign with the trusted key
            return self._structural(bytes(data), rng)
        return bytes(data)

    def _structural(self, data: bytes, rng: np.random.Generator) -> bytes:
        (hlen,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + hlen])
        body = data[8 + hlen:]
        meta = header.get("__metadata__", {})
        manifest = json.loads(meta["ldptext.manifest"])
        values = [None, True, -1, 0, 2**64, 1.5, "F32", "x", [], {}, [0], [2**40, 2**40],
                  [-1, 4], "\ud800", 1e308, [0, 2**63]]
        target = header if rng.random() < 0.5 else manifest
        names = [n for n in target if n != "__metadata__"]
        if names:
            name = names[int(rng.integers(len(names)))]
            node = target[name]
            if name == "arrays" and isinstance(node, dict) and node and rng.random() < 0.7:
                sub = list(node)
                node = node[sub[int(rng.integers(len(sub)))]]
            if isinstance(node, dict) and node and rng.random() < 0.8:
                field = list(node)[int(rng.integers(len(node)))]
                node[field] = values[int(rng.integers(len(values)))]
            else:
                target[name] = values[int(rng.integers(len(values)))]
        if rng.random() < 0.2:  # swap two header entries
            entries = [n for n in header if n != "__metadata__"]
            if len(entries) >= 2:
                a, b = rng.choice(len(entries), 2, replace=False)
                ea, eb = entries[int(a)], entries[int(b)]
                header[ea], header[eb] = header[eb], header[ea]
        try:
            mb = B.canonical_json(manifest)
        except (TypeError, ValueError):
            mb = json.dumps(manifest, allow_nan=True).encode("utf-8", "surrogatepass")
        meta["ldptext.manifest"] = mb.decode("utf-8", "surrogatepass")
        if rng.random() < 0.8:
            meta["ldptext.signature"] = base64.b64encode(self.key.sign(mb)).decode()
            meta["ldptext.public_key"] = base64.b64encode(
                keys.public_bytes(self.key.public_key())).decode()
        header["__metadata__"] = meta
        raw = json.dumps(header).encode()
        raw += b" " * (-len(raw) % 8)
        return struct.pack("<Q", len(raw)) + raw + body


class FuzzFinding(Exception):
    """A contract breach (wrong exception type, out-of-range output)."""


# ---- native target ----------------------------------------------------------------------------

def random_array(p: Provider, max_items: int = 64):
    """An array-like with a random dtype, shape, contiguity, alignment and writability (or a
    non-array object)."""
    kind = p.int(0, 15)
    if kind == 0:
        return p.choice([None, 3, 1.5, "text", b"bytes", [1, 2, 3], object()])
    if kind == 1:
        return bytearray(p.bytes(p.int(0, 32)))
    dtype = np.dtype(p.choice(DTYPES))
    n = p.int(0, max_items)
    a = np.frombuffer(p.bytes(n * dtype.itemsize), dtype=dtype).copy()
    if kind == 2 and a.size >= 2:
        a = a[::2]  # not contiguous
    elif kind == 3 and a.size >= 4:
        a = a[: a.size // 2 * 2].reshape(2, -1)
    elif kind == 4:  # misaligned view
        raw = bytearray(n * dtype.itemsize + 1)
        a = np.frombuffer(raw, dtype=dtype, count=n, offset=1)
    elif kind == 5:
        a.flags.writeable = False
    elif kind == 6:
        a = a.reshape(0, *a.shape) if a.size == 0 else a
    return a


def _quantized_tables() -> bool:
    """Whether this build's SantextTable takes int8-quantised embeddings (emb_q, emb_scale,
    emb_sqnorm) instead of float32 ``embeddings``: the fuzzer supports both layouts."""
    try:
        _native.SantextTable(embeddings=None)
    except TypeError as e:
        return "emb_q" in str(e)
    return False


QUANTIZED = _quantized_tables()
if hasattr(_native, "SANTEXT_TABLE_KEYWORDS"):  # the extension names its keywords: arrays, then 4 scalars
    TABLE_ARRAY_NAMES = tuple(_native.SANTEXT_TABLE_KEYWORDS[:-4])
else:  # older builds
    TABLE_ARRAY_NAMES = (("emb_q", "emb_scale", "emb_sqnorm") if QUANTIZED else ("embeddings",)) + (
        "outputs", "head_ids", "alias_threshold", "alias_index", "accept_gamma", "tail_floor",
        "keep_row")


def embedding_arrays(emb: np.ndarray) -> dict:
    """The embedding arguments of SantextTable for float embeddings, in this build's layout."""
    if not QUANTIZED:
        return {"embeddings": np.ascontiguousarray(emb, dtype=np.float32)}
    scale = np.abs(emb).max(axis=1) / 127.0
    q = np.round(emb / np.where(scale > 0, scale, 1.0)[:, None]).astype(np.int8)
    return {"emb_q": q, "emb_scale": scale.astype(np.float32),
            "emb_sqnorm": (q.astype(np.int64) ** 2).sum(axis=1).astype(np.int32)}


def sane_table_arrays(p: Provider, rows: int, k: int, dim: int) -> dict:
    """Arrays that pass SantextTable's checks (so sampling actually runs)."""
    rng = np.random.default_rng(p.u64() % 2**32)
    n_out = int(rng.integers(k + 1, rows + 1))  # k < rows: a non-empty tail
    return dict(
        **embedding_arrays(rng.standard_normal((rows, dim))),
        outputs=np.sort(rng.choice(rows, n_out, replace=False)).astype(np.int32),
        head_ids=np.sort(np.stack([rng.choice(rows, k, replace=False) for _ in range(rows)]),
                         axis=1).astype(np.int32),
        alias_threshold=rng.integers(0, 2**32, (rows, k + 1), dtype=np.uint64).astype(np.uint32),
        alias_index=rng.integers(0, k + 1, (rows, k + 1)).astype(np.uint16),
        # small gammas: acceptance stays likely, so sampling terminates quickly
        accept_gamma=rng.random((rows, k + 1)) * 3.0,
        tail_floor=np.zeros(rows),
        keep_row=(rng.random(rows) < 0.5).astype(np.uint8),
        **cluster_arrays(rng, rows),
        dim=dim, head_size=k, epsilon=float(rng.random() * 2 + 0.1), p=float(rng.random()))


def cluster_arrays(rng: np.random.Generator, rows: int) -> dict:
    """Tail clusters for this build's SantextTable (none before they existed): 1-4 clusters with
    zero bounds, which hold for any table."""
    if "cluster_gamma" not in TABLE_ARRAY_NAMES:
        return {}
    c = int(rng.integers(1, 5))
    return {"tail_cluster": rng.integers(0, c, rows).astype(np.uint8),
            "cluster_gamma": np.zeros((rows, c), np.uint8)}


def check_ids(ys: np.ndarray, rows: int) -> None:
    if ys.size and (ys.min() < 0 or ys.max() >= rows):
        raise FuzzFinding("santext_sample returned an id outside the table")


class NativeTarget:
    """``hostile=True`` also writes into a table's borrowed arrays after SantextTable validated
    them (op 9): memory safety then depends on per-draw bounds checks in santext_sampler.c."""

    def __init__(self, hostile: bool = False) -> None:
        self.execs = 0
        self.hostile = hostile
        self.gen = _native.Generator(bytes(32), 0)

    def run_one(self, data: bytes) -> None:
        self.execs += 1
        p = Provider(data)
        for _ in range(1 + p.int(0, 7)):
            try:
                self._op(p)
            except ALLOWED_NATIVE:
                pass
            except FuzzFinding:
                raise
            except Exception as e:  # noqa: BLE001
                raise FuzzFinding(f"native call raised {type(e).__name__}: {e}") from e

    def _op(self, p: Provider) -> None:
        g = self.gen
        op = p.int(0, 14)
        if op == 0:
            key = p.bytes(p.int(28, 36)) if p.byte() % 4 else p.choice([None, "x" * 32, 5])
            self.gen = _native.Generator(key, p.bigint() if p.byte() % 2 else 0)
        elif op == 1:
            n = p.int(-3, 4100)
            out = g.random_bytes(n)
            if len(out) != n:
                raise FuzzFinding("random_bytes length")
        elif op == 2:
            n = p.bigint()
            out = random_array(p)
            g.uniform_int(n, out)
            if isinstance(out, np.ndarray) and out.dtype == np.int64 and out.size and n >= 1:
                if out.min() < 0 or out.max() >= n:
                    raise FuzzFinding(f"uniform_int({n}) out of range")
        elif op == 3:
            g.bernoulli(p.float(), random_array(p))
        elif op == 4:
            gam = random_array(p)
            if isinstance(gam, np.ndarray) and gam.dtype.kind == "f":
                with np.errstate(all="ignore"):
                    gam = np.abs(gam) if p.byte() % 2 else gam
            g.bernoulli_exp(gam, random_array(p))
        elif op in (5, 6):
            param = p.float()
            out = random_array(p, max_items=8)
            (g.discrete_laplace if op == 5 else g.discrete_gaussian)(param, out)
        elif op == 7:  # random arrays for every table argument
            kw = {name: random_array(p) for name in TABLE_ARRAY_NAMES}
            t = _native.SantextTable(**kw, dim=p.int(-1, 5), head_size=p.int(-1, 5),
                                     epsilon=p.float(), p=p.float())
            g.santext_sample(t, random_array(p), random_array(p))
        elif op in (8, 9, 10):  # a valid table, then hostile use of it
            rows, dim = p.int(2, 12), p.int(1, 4)
            k = p.int(1, rows - 1)
            kw = sane_table_arrays(p, rows, k, dim)
            t = _native.SantextTable(**kw)
            if op == 9 and self.hostile:  # mutate the borrowed arrays after validation
                name = p.choice(["head_ids", "alias_index", "outputs", "accept_gamma",
                                 "tail_floor", TABLE_ARRAY_NAMES[0]]
                                + [n for n in ("tail_cluster", "cluster_gamma") if n in kw])
                arr = kw[name]
                if arr.dtype == np.uint8:  # a cluster id past C, or a bound that lies
                    value = p.choice([255, 4, 64])
                elif arr.dtype.kind in "iu":
                    value = p.choice([-1, 2**15, 65535, 10**9, -10**9])
                else:
                    value = p.float()
                arr.reshape(-1)[p.int(0, arr.size - 1)] = value
            if op == 10:  # a failed re-initialisation must not leave dangling views
                try:
                    t.__init__(**dict(kw, dim=-1))
                except ALLOWED_NATIVE:
                    pass
                del kw
            xs = np.frombuffer(p.bytes(4 * p.int(0, 16)), dtype="<i4").copy()
            if p.byte() % 2:
                xs = (np.abs(xs.astype(np.int64)) % rows).astype(np.int32)
            ys = np.empty_like(xs)
            g.santext_sample(t, xs, ys)
            if op == 8:
                check_ids(ys, rows)
        elif op == 11:
            if hasattr(_native, "distance"):  # module-level in older builds
                _native.distance(random_array(p), random_array(p))
            else:
                rows, dim = p.int(2, 6), p.int(1, 4)
                t = _native.SantextTable(**sane_table_arrays(p, rows, 1, dim))
                t.distance(p.int(-2, rows + 1), p.int(-2, rows + 1))
        elif op == 12:
            _native.chacha20_block(p.bytes(p.int(60, 68)))
        elif op == 14:  # the exact integer-parameter samplers: any int, or a valid Gaussian (t, m)
            a, b = p.bigint(), p.bigint()
            if p.byte() % 2 and 1 <= b <= 2**60:
                a = b + p.int(0, 3) * (b // 2)  # m <= t <= 4m
            out = random_array(p, max_items=8)
            (g.discrete_gaussian_exact if p.byte() % 2 else g.discrete_laplace_exact)(a, b, out)
        else:  # an uninitialised table object
            t = _native.SantextTable.__new__(_native.SantextTable)
            xs = np.zeros(p.int(0, 3), np.int32)
            g.santext_sample(t, xs, np.empty_like(xs))


# ---- engines ------------------------------------------------------------------------------------

def builtin_fuzz(target, seconds: float, seed: int, crash_file: Path, label: str,
                 mutate=None) -> int:
    rng = np.random.default_rng(seed)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for _ in range(20):
            if mutate is not None:
                data = mutate(rng)
            else:
                data = bytes(rng.integers(0, 256, int(rng.integers(1, 512)), dtype=np.uint8))
            crash_file.write_bytes(data)
            target.run_one(data)
    return target.execs


def _watchdog(hang_seconds: float) -> None:
    # reset before every chunk of work: a C loop that never returns cannot be interrupted from
    # Python, but faulthandler's watchdog thread needs no GIL; it dumps stacks and exits
    faulthandler.dump_traceback_later(hang_seconds, exit=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", choices=["bundle", "native", "all"], default="all")
    ap.add_argument("--seconds", type=float, default=30.0, help="time budget per target")
    ap.add_argument("--engine", choices=["auto", "builtin", "atheris"], default="auto")
    ap.add_argument("--seed", type=int, default=0, help="built-in engine seed")
    ap.add_argument("--hang-seconds", type=float, default=20.0)
    ap.add_argument("--crash-dir", default=None, help="where the current input is kept")
    ap.add_argument("--replay", default=None, help="run one saved input and exit")
    ap.add_argument("--hostile", action="store_true",
                    help="native: also mutate a SantextTable's arrays after validation")
    args, rest = ap.parse_known_args(argv)

    faulthandler.enable()
    workdir = Path(tempfile.mkdtemp(prefix="ldptext-fuzz-",
                                    dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    crash_dir = Path(args.crash_dir) if args.crash_dir else workdir
    crash_dir.mkdir(parents=True, exist_ok=True)
    targets = ["bundle", "native"] if args.target == "all" else [args.target]

    if args.replay:
        data = Path(args.replay).read_bytes()
        for name in targets:
            t = BundleTarget(workdir) if name == "bundle" else NativeTarget(args.hostile)
            t.run_one(data)
        print("replay: no finding")
        return 0

    engine = args.engine
    if engine == "auto":
        try:
            import atheris  # noqa: F401
            engine = "atheris" if len(targets) == 1 else "builtin"
        except ImportError:
            engine = "builtin"

    if engine == "atheris":
        import atheris
        name = targets[0]
        t = BundleTarget(workdir) if name == "bundle" else NativeTarget(args.hostile)
        corpus = workdir / "corpus"
        corpus.mkdir()
        if name == "bundle":
            for i, s in enumerate(t.seeds):
                (corpus / f"seed{i}").write_bytes(s)
        else:
            (corpus / "seed0").write_bytes(os.urandom(256))

        def one(data: bytes) -> None:
            t.run_one(data)
        # coverage feedback from our own Python code (the loader, the fuzz harness); the C
        # extension is not libFuzzer-instrumented, so native coverage comes from the harness only
        for module in (B, keys, sys.modules[__name__]):
            for obj in list(vars(module).values()):
                if callable(obj) and getattr(obj, "__module__", None) == module.__name__ \
                        and hasattr(obj, "__code__"):
                    try:
                        atheris.instrument_func(obj)
                    except Exception:  # noqa: BLE001 - best effort
                        pass
        print(f"atheris: target {name}, {args.seconds:.0f} s; libFuzzer prints 'Done N runs'")
        atheris.Setup([sys.argv[0], f"-max_total_time={int(args.seconds)}", "-max_len=65536",
                       f"-timeout={int(args.hang_seconds)}", "-print_final_stats=1",
                       str(corpus)] + rest, one)
        atheris.Fuzz()
        return 0

    total = 0
    for i, name in enumerate(targets):
        t = BundleTarget(workdir) if name == "bundle" else NativeTarget(args.hostile)
        crash_file = crash_dir / f"current-{name}.bin"
        _watchdog(args.seconds + args.hang_seconds)
        start = time.monotonic()
        try:
            n = builtin_fuzz(t, args.seconds, args.seed + i, crash_file, name,
                             mutate=t.mutate if name == "bundle" else None)
        except FuzzFinding as e:
            print(f"FINDING in {name} after {t.execs} executions: {e}\n"
                  f"input kept in {crash_file}; replay with --target {name} --replay {crash_file}")
            return 1
        finally:
            faulthandler.cancel_dump_traceback_later()
        crash_file.unlink(missing_ok=True)
        rate = n / max(1e-9, time.monotonic() - start)
        print(f"{name}: {n} executions in {args.seconds:g} s ({rate:.0f}/s), no finding")
        total += n
    print(f"total executions: {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
