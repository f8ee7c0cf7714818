"""The JVM binding (bindings/jvm: ``make jvm`` builds build/jvm/ldptext.jar and libldptext_jni.so),
used the way an app uses it: Java programs written outside the project tree (pytest's tmp_path),
compiled with javac against the jar alone and run with the JNI library on java.library.path, under
``-Xcheck:jni`` (the JVM checks every JNI call the glue makes).

* A runner (RUNNER below; it prints "N passed, N failed" and exits non-zero on a failure) opens
  tiny SanText and SanText+ bundles signed with the test run's developer key, from a path and from
  bytes; reads the bundle facts (ldp_bundle_info: the C library's bundle id, key id, epsilon, ...);
  refuses a stranger's key, no key, a key that is not 32 bytes, a missing file and bit flips all
  over the file with the negative code the C library gives for the same bytes (ctypes on
  native/build/libldptext.so; the Python runtime refuses every one of them too) and ldp_strerror's
  message; sanitizes from 4 threads through one LdpText at once (private streams: many distinct
  outputs); a seeded instance gives, text for text and seed for seed (a 64-bit seed too), the
  Python runtime's ``Sanitizer.load(..., seed=S)`` output and report numbers, and called from 4
  threads it serialises whole calls on its one stream; a lone surrogate is refused with
  LDP_E_INVALID_UTF8 (never altered); close is idempotent and a call after it is refused.
* The quick-start snippet of docs/jvm.md, extracted from the page, compiled and run: against the
  bundle and its key it prints the sanitized text and the report; against a stranger's key it exits
  with the refusal and code -43.
* BundleExpectation's pins (ldp_bundle_open_expect): a bundle meeting them all opens from a path and
  from bytes; each unmet pin refuses it with its LDP_E_EXPECT_* code; values outside their domain
  throw IllegalArgumentException; a stranger's key is refused whatever the pins.

Skipped, with the reason, when javac, jar or java is absent; with LDPTEXT_REQUIRE_JVM=1 (CI) their
absence fails instead.
"""
from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import build_lock, build_tiny_bundle, load_seeded, require_tool
from test_libldptext import CODES_OF, LibLdptext, build_library, python_error

from ldptext import ldp_codes

ROOT = Path(__file__).resolve().parents[1]
JVM_BUILD = ROOT / "build" / "jvm"
DOC = ROOT / "docs" / "jvm.md"
SEED = 20240611
BIG_SEED = 2**64 - 5  # a Java long of -5: the seed is unsigned 64-bit in both
TEXTS = ["w1 w2 w3 w4 w5 w6 w7 w8", "W12, w13! w14?", "w40 unknownword w41", "", "  w2\tw3\n",
         "wé ü 漢字 🙂 w5"]


def _tool(name: str) -> str:
    return require_tool([name], "the JVM binding needs OpenJDK (Debian: openjdk-17-jdk-headless; "
                        "scripts/system-deps.sh jvm)", "LDPTEXT_REQUIRE_JVM")


@pytest.fixture(scope="module")
def jdk() -> dict[str, str]:
    return {name: _tool(name) for name in ("javac", "jar", "java")}


@pytest.fixture(scope="module")
def jvm_build(jdk) -> Path:
    """make jvm: the jar and the JNI library in build/jvm/."""
    with build_lock():
        done = subprocess.run(["make", "-s", "jvm"], cwd=ROOT, capture_output=True, text=True,
                              env={**os.environ, "LDPTEXT_SKIP_SYSTEM_DEPS": "1"})
    if done.returncode != 0:
        pytest.fail("make jvm failed:\n" + (done.stdout + done.stderr)[-3000:])
    for name in ("ldptext.jar", "libldptext_jni.so"):
        assert (JVM_BUILD / name).is_file(), name
    return JVM_BUILD


@pytest.fixture(scope="module")
def clib() -> LibLdptext:
    build_library()
    return LibLdptext(ROOT / "native" / "build" / "libldptext.so")


@pytest.fixture(scope="module")
def dev_key(ldptext_home) -> bytes:
    from ldptext import keys
    return keys.public_bytes(keys.developer_key().public_key())


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("jvm_bundles")
    return {"santext": build_tiny_bundle(d / "s.ldpb", mechanism="santext"),
            "santext+": build_tiny_bundle(d / "sp.ldpb", mechanism="santext+", p=0.3, w=0.7)}


def compile_and_run(jdk: dict, build: Path, work: Path, cls: str, source: str, args: list[str],
                    timeout: float = 60) -> subprocess.CompletedProcess:
    """javac the class against the jar alone (in `work`, outside the project), then run it."""
    (work / f"{cls}.java").write_text(source, encoding="utf-8")
    jar = str(build / "ldptext.jar")
    done = subprocess.run([jdk["javac"], "-encoding", "UTF-8", "-Werror", "-Xlint:all", "-cp", jar,
                           "-d", str(work), str(work / f"{cls}.java")], capture_output=True, text=True)
    assert done.returncode == 0, "javac failed:\n" + done.stdout + done.stderr
    # -Xcheck:jni: the JVM checks every JNI call of the glue (it warns, or aborts, on a misuse)
    done = subprocess.run([jdk["java"], "-Xcheck:jni", f"-Djava.library.path={build}", "-cp",
                           f"{jar}{os.pathsep}{work}", cls, *args], capture_output=True, text=True,
                          timeout=timeout, cwd=work)
    assert "WARNING in native method" not in done.stdout + done.stderr, (done.stdout + done.stderr)[-3000:]
    return done


def _h(value) -> str:
    """A spec value: hex of the bytes (of the UTF-8 of a string; of repr for numbers)."""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, float):
        value = repr(value)
    return str(value).encode("utf-8").hex()


def _flip(data: bytes, offset: int, bit: int) -> bytes:
    out = bytearray(data)
    out[offset] ^= 1 << bit
    return bytes(out)


def build_spec(work: Path, clib: LibLdptext, dev_key: bytes, bundles: dict[str, Path]) -> tuple[Path, int]:
    """What the runner checks, every expectation computed here by the C library or Python; and the
    number of checks the runner must report."""
    spec: dict[str, object] = {"version": clib.lib.ldp_version().decode(), "key": dev_key}
    stranger = bytes(range(32))
    rc, _ = clib.open(bundles["santext+"], [stranger])
    assert rc == ldp_codes.LDP_E_UNTRUSTED_KEY == -43
    spec.update({"stranger": stranger, "untrusted.code": rc, "untrusted.message": clib.strerror(rc)})
    rc, _ = clib.open(bundles["santext+"], [])
    assert rc < 0
    spec.update({"nokeys.code": rc, "nokeys.message": clib.strerror(rc)})
    spec.update({"missing.code": ldp_codes.LDP_E_FILE_NOT_FOUND,
                 "arg.code": ldp_codes.LDP_E_ARG,
                 "utf8.code": ldp_codes.LDP_E_INVALID_UTF8,
                 "utf8.message": clib.strerror(ldp_codes.LDP_E_INVALID_UTF8)})
    n_checks = 0
    # bit flips over the header, the signature and the arrays: Java's code is the C library's
    for mech, path in bundles.items():
        spec[f"bundle.{mech}"] = str(path)
        rc, b = clib.open(path, [dev_key])
        assert rc == 0, clib.strerror(rc)
        info = clib.bundle_info(b)
        clib.close(b)
        for field in ("bundle_id", "key_id", "mechanism", "epsilon", "ledger_unit", "format_version",
                      "tolerance", "d_max"):
            spec[f"info.{mech}.{field}"] = info[field]
        data = path.read_bytes()
        hlen = int.from_bytes(data[:8], "little")
        rng = np.random.default_rng(1)
        offsets = sorted({0, 3, 8, 8 + hlen - 1, 8 + hlen, len(data) - 1,
                          *(int(x) for x in rng.integers(8, 8 + hlen, 6)),
                          *(int(x) for x in rng.integers(8 + hlen, len(data), 4))})
        codes = set()
        for i, off in enumerate(offsets):
            bad = _flip(data, off, i % 8)
            rc, _ = clib.open(bad, [dev_key])
            assert rc < 0
            expected = python_error(bad, dev_key)
            assert expected is not None, "the Python runtime refuses the flipped byte too"
            if expected in CODES_OF:
                assert rc in CODES_OF[expected], (off, expected, rc)
            codes.add(rc)
            f = work / f"flip-{mech}-{i}.ldpb"
            f.write_bytes(bad)
            spec[f"flip.{mech}.{i}.path"] = str(f)
            spec[f"flip.{mech}.{i}.code"] = rc
            spec[f"flip.{mech}.{i}.message"] = clib.strerror(rc)
        assert len(codes) >= 3, codes  # the flips reach several different checks
        spec[f"flip.{mech}.count"] = len(offsets)
        n_checks += 3 * len(offsets)
        # seeded: the Python runtime's outputs for the texts in order, per seed
        for sname, seed in (("s", SEED), ("big", BIG_SEED)):
            san = load_seeded(path, seed=seed)
            for i, t in enumerate(TEXTS):
                r = san.sanitize(t)
                rep = r.report.to_dict()
                key = f"seeded.{mech}.{sname}.{i}"
                spec[f"{key}.text"] = r.text
                spec[f"{key}.tokens"] = rep["n_tokens"]
                spec[f"{key}.epsilon"] = float(rep["epsilon"])
                spec[f"{key}.epsilon0"] = float(rep["parameters"]["epsilon0"])
                spec[f"{key}.d_max"] = float(rep["parameters"]["d_max"])
                n_checks += 1
            san.close()
            spec[f"seed.{sname}"] = str(seed)
        # the same text on one stream, 40 calls in a row: what 4 threads x 10 calls must give
        san = load_seeded(path, seed=SEED)
        for j in range(40):
            spec[f"serial.{mech}.{j}"] = san.sanitize(TEXTS[0]).text
        san.close()
    for i, t in enumerate(TEXTS):
        spec[f"text.{i}"] = t
    spec["texts"] = len(TEXTS)
    lines = [f"{k}={_h(v)}" for k, v in spec.items()]
    out = work / "spec.txt"
    out.write_text("\n".join(lines) + "\n", encoding="ascii")
    # the fixed checks of RUNNER besides those counted above (one per check(...) call site)
    return out, n_checks + FIXED_CHECKS


FIXED_CHECKS = 2 * 14 + 15  # per mechanism (14 checks) + the rest


RUNNER = r"""
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.AtomicInteger;
import org.ldptext.*;

public final class JvmBindingTest {
    static final Map<String, byte[]> spec = new HashMap<>();
    static int passed, failed;

    static byte[] bytes(String k) {
        byte[] v = spec.get(k);
        if (v == null) throw new IllegalArgumentException("spec lacks " + k);
        return v;
    }
    static String str(String k) { return new String(bytes(k), StandardCharsets.UTF_8); }
    static int integer(String k) { return Integer.parseInt(str(k)); }
    static double dbl(String k) { return Double.parseDouble(str(k)); }

    static void check(String name, boolean ok, Object detail) {
        if (ok) passed++;
        else { failed++; System.out.println("FAIL " + name + ": " + detail); }
    }

    interface Call { void run() throws Exception; }

    /** The LdpTextException of the call: code and message as expected. */
    static void refused(String name, int code, String message, Call c) {
        try {
            c.run();
            check(name, false, "not refused");
        } catch (LdpTextException e) {
            check(name, e.code() == code && (message == null || message.equals(e.getMessage())),
                  "code " + e.code() + " message '" + e.getMessage() + "', expected " + code + " '" + message + "'");
        } catch (Exception e) {
            check(name, false, e.toString());
        }
    }

    public static void main(String[] args) throws Exception {
        for (String line : Files.readAllLines(Paths.get(args[0]), StandardCharsets.US_ASCII)) {
            int eq = line.indexOf('=');
            String hex = line.substring(eq + 1);
            byte[] v = new byte[hex.length() / 2];
            for (int i = 0; i < v.length; i++) v[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
            spec.put(line.substring(0, eq), v);
        }
        byte[] key = bytes("key");
        int nTexts = integer("texts");
        check("version", LdpText.version().equals(str("version")), LdpText.version());

        for (String mech : new String[] {"santext", "santext+"}) {
            Path path = Paths.get(str("bundle." + mech));
            byte[] data = Files.readAllBytes(path);
            // open from a path and from bytes: the C library's facts
            try (LdpText a = LdpText.open(path, key); LdpText b = LdpText.open(data, new byte[32], key)) {
                for (LdpText l : new LdpText[] {a, b}) {
                    BundleInfo i = l.info();
                    check(mech + " info", i.bundleId().equals(str("info." + mech + ".bundle_id"))
                          && i.keyId().equals(str("info." + mech + ".key_id"))
                          && i.mechanism().equals(mech)
                          && i.epsilon() == dbl("info." + mech + ".epsilon")
                          && i.tolerance() == dbl("info." + mech + ".tolerance")
                          && i.dMax() == dbl("info." + mech + ".d_max")
                          && i.ledgerUnit().equals(str("info." + mech + ".ledger_unit"))
                          && i.formatVersion() == integer("info." + mech + ".format_version")
                          && i.json().contains("\"manifest\""), i);
                }
                Sanitized s = a.sanitize(str("text.0"));
                Report r = s.report();
                check(mech + " unseeded report", !r.seeded() && r.tokens() == 8 && r.mechanism().equals(mech)
                      && r.bundleId().equals(str("info." + mech + ".bundle_id")) && !a.isSeeded(), r);
                check(mech + " unseeded text", s.text().split(" ").length == 8, s.text().length());
                check(mech + " toString hides text", !s.toString().contains(s.text()), s);
            }
            // refusals: the C library's code and message
            refused(mech + " stranger's key", integer("untrusted.code"), str("untrusted.message"),
                    () -> LdpText.open(path, bytes("stranger")));
            refused(mech + " stranger's key (bytes)", integer("untrusted.code"), str("untrusted.message"),
                    () -> LdpText.open(data, bytes("stranger")));
            refused(mech + " no key", integer("nokeys.code"), str("nokeys.message"), () -> LdpText.open(path));
            refused(mech + " 31-byte key", integer("arg.code"), null,
                    () -> LdpText.open(path, Arrays.copyOf(key, 31)));
            refused(mech + " missing file", integer("missing.code"), null,
                    () -> LdpText.open(path.resolveSibling("no-such.ldpb"), key));
            int flips = integer("flip." + mech + ".count");
            for (int i = 0; i < flips; i++) {
                String f = "flip." + mech + "." + i;
                Path fp = Paths.get(str(f + ".path"));
                int code = integer(f + ".code");
                check(f + " negative", code < 0, code);
                refused(f + " path", code, str(f + ".message"), () -> LdpText.open(fp, key));
                refused(f + " bytes", code, str(f + ".message"), () -> LdpText.open(Files.readAllBytes(fp), key));
            }

            // seeded: the Python runtime's outputs, call by call
            for (String sname : new String[] {"s", "big"}) {
                long seed = Long.parseUnsignedLong(str("seed." + sname));
                try (LdpText t = LdpText.openSeededForTests(path, seed, key)) {
                    for (int i = 0; i < nTexts; i++) {
                        String k = "seeded." + mech + "." + sname + "." + i;
                        Sanitized s = t.sanitize(str("text." + i));
                        Report r = s.report();
                        check(k, s.text().equals(str(k + ".text")) && r.seeded() && t.isSeeded()
                              && r.tokens() == integer(k + ".tokens") && r.epsilon() == dbl(k + ".epsilon")
                              && r.epsilon0() == dbl(k + ".epsilon0") && r.dMax() == dbl(k + ".d_max"),
                              "got '" + s.text() + "' " + r + ", expected '" + str(k + ".text") + "'");
                    }
                }
            }

            // 4 threads through one unseeded LdpText, all at once
            StringBuilder lt = new StringBuilder();
            for (int j = 0; j < 500; j++) lt.append(str("text.0")).append(' ');
            String longText = lt.toString();
            try (LdpText shared = LdpText.open(path, key)) {
                ExecutorService pool = Executors.newFixedThreadPool(4);
                CyclicBarrier start = new CyclicBarrier(4);
                AtomicInteger inFlight = new AtomicInteger(), most = new AtomicInteger();
                List<Future<List<String>>> futures = new ArrayList<>();
                for (int t = 0; t < 4; t++) {
                    futures.add(pool.submit(() -> {
                        start.await();
                        List<String> outs = new ArrayList<>();
                        for (int j = 0; j < 50; j++) {
                            // a long document (4,000 tokens, some ms) between short ones: calls overlap
                            Sanitized big = shared.sanitize(longText);
                            most.accumulateAndGet(inFlight.incrementAndGet(), Math::max);
                            Sanitized s = shared.sanitize(str("text.0"));
                            Sanitized big2 = shared.sanitize(longText);
                            inFlight.decrementAndGet();
                            if (s.report().tokens() != 8 || s.text().split(" ").length != 8 || s.report().seeded()
                                || big.report().tokens() != 4000 || big2.text().split(" ").length != 4000)
                                throw new AssertionError("bad result " + s.report());
                            outs.add(s.text());
                        }
                        return outs;
                    }));
                }
                Set<String> distinct = new HashSet<>();
                int results = 0;
                String error = null;
                for (Future<List<String>> f : futures) {
                    try {
                        List<String> outs = f.get(60, TimeUnit.SECONDS);
                        results += outs.size();
                        distinct.addAll(outs);
                    } catch (ExecutionException e) {
                        error = e.getCause().toString();
                    }
                }
                pool.shutdown();
                check(mech + " 4 threads", error == null && results == 200, error);
                check(mech + " 4 threads: private streams", distinct.size() >= 100, distinct.size());
                check(mech + " 4 threads overlapped", most.get() >= 2, most.get());
            }
            // 4 threads on one seeded LdpText: whole calls, one after another, on its one stream
            try (LdpText seeded = LdpText.openSeededForTests(path, Long.parseUnsignedLong(str("seed.s")), key)) {
                ExecutorService pool = Executors.newFixedThreadPool(4);
                List<Future<List<String>>> futures = new ArrayList<>();
                for (int t = 0; t < 4; t++) {
                    futures.add(pool.submit(() -> {
                        List<String> outs = new ArrayList<>();
                        for (int j = 0; j < 10; j++) outs.add(seeded.sanitize(str("text.0")).text());
                        return outs;
                    }));
                }
                List<String> got = new ArrayList<>(), want = new ArrayList<>();
                for (Future<List<String>> f : futures) got.addAll(f.get(60, TimeUnit.SECONDS));
                pool.shutdown();
                for (int j = 0; j < 40; j++) want.add(str("serial." + mech + "." + j));
                Collections.sort(got);
                Collections.sort(want);
                check(mech + " seeded from 4 threads", got.equals(want), got.size());
            }
        }

        // a lone surrogate is refused, never replaced; the message holds no text
        Path plus = Paths.get(str("bundle.santext+"));
        LdpText l = LdpText.open(plus, key);
        refused("lone surrogate", integer("utf8.code"), str("utf8.message"), () -> l.sanitize("w1 \uD800 w2"));
        Sanitized empty = l.sanitize("");
        check("empty text", empty.text().isEmpty() && empty.report().tokens() == 0, empty.report());
        Sanitized emoji = l.sanitize("wé ü 漢字 🙂 w5");
        check("non-BMP text", emoji.report().tokens() > 0, emoji.report());
        check("report facts", emoji.report().keyId().equals(str("info.santext+.key_id"))
              && emoji.report().formatVersion() == integer("info.santext+.format_version")
              && emoji.report().worstCaseNote() != null && Double.isInfinite(emoji.report().worstCaseEpsilon())
              && emoji.report().p() == 0.3, emoji.report());
        try {
            l.sanitize(null);
            check("null text", false, "accepted");
        } catch (NullPointerException e) {
            check("null text", true, null);
        }
        l.close();
        l.close();
        check("close twice", true, null);
        try {
            l.sanitize("w1");
            check("closed", false, "sanitized after close");
        } catch (IllegalStateException e) {
            check("closed", true, null);
        }
        // a seeded instance says so: the report, and the warning on stderr (checked by pytest)
        try (LdpText t = LdpText.openSeededForTests(Files.readAllBytes(plus), 7, key)) {
            check("seeded from bytes", t.sanitize(str("text.0")).report().seeded(), null);
        }
        // many instances opened and closed: nothing left behind that breaks the next one
        for (int i = 0; i < 200; i++) {
            try (LdpText t = LdpText.open(plus, key)) { t.sanitize("w1 w2"); }
        }
        check("open/close 200 times", true, null);
        refused("null-free: a key list with null", integer("arg.code"), null,
                () -> LdpText.open(plus, key, null));
        LdpText s1 = LdpText.open(plus, key), s2 = LdpText.open(plus, key);
        StringBuilder o1 = new StringBuilder(), o2 = new StringBuilder();
        for (int i = 0; i < 5; i++) {
            o1.append(s1.sanitize(str("text.0")).text()).append('|');
            o2.append(s2.sanitize(str("text.0")).text()).append('|');
        }
        check("two instances, two streams", !o1.toString().equals(o2.toString()), null);
        s1.close();
        s2.close();
        check("isSeeded false", !s1.isSeeded(), null);
        check("BundleInfo toString", s1.info().toString().contains(str("info.santext+.bundle_id")), s1.info());
        check("exception toString", new LdpTextException(-43, "m").toString().contains("-43"), null);

        System.out.println(passed + " passed, " + failed + " failed");
        System.exit(failed == 0 ? 0 : 1);
    }
}
"""


def test_java_program_against_the_jar(jdk, jvm_build, clib, dev_key, bundles, tmp_path):
    assert not tmp_path.resolve().is_relative_to(ROOT), "the Java program is written outside the project"
    spec, n_checks = build_spec(tmp_path, clib, dev_key, bundles)
    done = compile_and_run(jdk, jvm_build, tmp_path, "JvmBindingTest", RUNNER, [str(spec)])
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    m = re.search(r"^(\d+) passed, (\d+) failed$", done.stdout, re.M)
    assert m, out[-2000:]
    assert (int(m.group(1)), int(m.group(2))) == (n_checks, 0), out[-2000:]
    # every seeded instance is announced on stderr: reproducible, NOT private
    assert done.stderr.count("NOT PRIVATE") == 2 * 2 + 2 + 1, done.stderr[-2000:]


def doc_snippet() -> str:
    """The Java block of docs/jvm.md that follows its 'tested' marker."""
    text = DOC.read_text(encoding="utf-8")
    m = re.search(r"<!-- tested: tests/test_jvm\.py compiles and runs this block -->\s*```java\n(.*?)```",
                  text, re.S)
    assert m, "docs/jvm.md lacks the tested quick-start block"
    return m.group(1)


def test_doc_quickstart_compiles_and_runs(jdk, jvm_build, clib, dev_key, bundles, tmp_path):
    source = doc_snippet()
    cls = re.search(r"public final class (\w+)", source).group(1)
    path = bundles["santext+"]
    rc, b = clib.open(path, [dev_key])
    info = clib.bundle_info(b)
    clib.close(b)
    key64 = base64.b64encode(dev_key).decode()
    done = compile_and_run(jdk, jvm_build, tmp_path, cls, source, [str(path), key64])
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len([ln for ln in lines if ln.startswith("upload: ")]) == 5, done.stdout
    assert any(ln.startswith("santext+: eps=2.0 per token, ") for ln in lines), done.stdout
    assert f"bundle {info['bundle_id']} signed by key {info['key_id']}" in lines, done.stdout
    assert "worst case: " + info["worst_case_note"] in lines
    # the same program refuses a stranger's key with the C library's code and message
    stranger = base64.b64encode(bytes(range(32))).decode()
    done = compile_and_run(jdk, jvm_build, tmp_path, cls, source, [str(path), stranger])
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"ldptext refused (-43): {clib.strerror(-43)}" in done.stderr
    assert "upload: " not in done.stdout


def test_jni_library_exports_only_jni_symbols(jvm_build):
    """libldptext is linked in whole but hidden: an app may load another copy of it next to this one."""
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm not found")
    out = subprocess.run([nm, "-D", "--defined-only", str(jvm_build / "libldptext_jni.so")],
                         capture_output=True, text=True, check=True).stdout
    names = [ln.split()[-1] for ln in out.splitlines() if ln.split()[-2:-1] == ["T"]]
    assert names and all(n.startswith(("Java_org_ldptext_", "JNI_On")) for n in names), names


PINS = r"""
import java.nio.file.*;
import java.util.Base64;
import org.ldptext.*;

public final class Pins {
    interface Open { LdpText open() throws Exception; }

    /** "ok" when it opens, the LdpTextException's code, or the IllegalArgumentException's class name. */
    static String attempt(Open o) {
        try (LdpText l = o.open()) {
            return "ok " + l.info().mechanism();
        } catch (LdpTextException e) {
            return Integer.toString(e.code());
        } catch (Exception e) {
            return e.getClass().getSimpleName();
        }
    }

    public static void main(String[] args) throws Exception {
        Path path = Paths.get(args[0]);
        byte[] data = Files.readAllBytes(path), key = Base64.getDecoder().decode(args[1]);
        String id = args[2];
        String other = id.replace(id.charAt(0), id.charAt(0) == 'a' ? 'b' : 'a');
        BundleExpectation all = BundleExpectation.any().mechanism("santext", "santext+").epsilonMin(1.0)
                .epsilonMax(2.0).bundleId(id).minFormatVersion(1);
        BundleExpectation[] cases = {all, all.mechanism("tem"), all.minFormatVersion(1000), all.bundleId(other),
                                     all.epsilonMax(1.5).epsilonMin(1.0), BundleExpectation.any().epsilonMin(2.5)};
        for (BundleExpectation e : cases) {
            System.out.println(attempt(() -> LdpText.open(path, e, key)) + " | "
                    + attempt(() -> LdpText.open(data, e, key)));
        }
        System.out.println(all);
        System.out.println(attempt(() -> LdpText.open(path, BundleExpectation.any().mechanism("dpbart"), key)) + " "
                + attempt(() -> LdpText.open(path, BundleExpectation.any().epsilonMin(0.0), key)) + " "
                + attempt(() -> LdpText.open(path, BundleExpectation.any().epsilonMax(1.0 / 0.0), key)) + " "
                + attempt(() -> LdpText.open(path, BundleExpectation.any().epsilonMin(3).epsilonMax(2), key)) + " "
                + attempt(() -> LdpText.open(path, BundleExpectation.any().bundleId(id.toUpperCase()), key)) + " "
                + attempt(() -> LdpText.open(path, BundleExpectation.any().minFormatVersion(0), key)));
        // pins do not replace the signature: a stranger's key is refused whatever they say
        System.out.println(attempt(() -> LdpText.open(path, all, new byte[32])));
    }
}
"""


def test_pins_refuse_a_bundle_the_app_did_not_expect(jdk, jvm_build, clib, dev_key, bundles, tmp_path):
    """BundleExpectation: ldp_bundle_open_expect's pins, with the Python runtime's BundleExpectation codes
    and domain checks."""
    path = bundles["santext+"]
    rc, b = clib.open(path, [dev_key])
    info = clib.bundle_info(b)
    clib.close(b)
    assert info["epsilon"] == 2.0 and info["format_version"] < 1000
    done = compile_and_run(jdk, jvm_build, tmp_path, "Pins", PINS,
                           [str(path), base64.b64encode(dev_key).decode(), info["bundle_id"]])
    assert done.returncode == 0, done.stdout + done.stderr
    codes = (ldp_codes.LDP_E_EXPECT_MECHANISM, ldp_codes.LDP_E_EXPECT_FORMAT, ldp_codes.LDP_E_EXPECT_BUNDLE_ID,
             ldp_codes.LDP_E_EXPECT_EPSILON)
    assert codes == (-101, -102, -103, -104)
    assert done.stdout.splitlines() == [
        "ok santext+ | ok santext+",
        *[f"{c} | {c}" for c in codes], f"{codes[3]} | {codes[3]}",
        f"BundleExpectation{{mechanism=santext|santext+, epsilonMin=1.0, epsilonMax=2.0, bundleId={info['bundle_id']}, "
        "minFormatVersion=1}",
        " ".join(["IllegalArgumentException"] * 6),
        str(ldp_codes.LDP_E_UNTRUSTED_KEY)], done.stdout
