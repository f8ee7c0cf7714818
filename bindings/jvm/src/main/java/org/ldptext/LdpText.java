package org.ldptext;

import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetEncoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * A verified ldptext bundle and its sanitizers (libldptext through JNI): text in, locally
 * differentially private text out. The bundle is opened and checked by the C library exactly as the
 * Python runtime checks it (Ed25519 signature by one of the trusted keys, every array hash, the
 * tables and the stated parameters); nothing is used before every check passed.
 *
 * <pre>{@code
 * try (LdpText ldp = LdpText.open(Paths.get("santext.ldpb"), publisherKey)) {
 *     Sanitized s = ldp.sanitize(typed);
 *     upload(s.text());            // only the sanitized text leaves the device
 * }
 * }</pre>
 *
 * <p>Threads: one instance may be used by any number of threads at once. The bundle is immutable
 * and shared; each concurrent {@link #sanitize} call borrows its own C sanitizer (its own
 * OS-seeded ChaCha20 stream) from a pool that grows to the number of calls that ever ran at the
 * same time, so calls never wait on each other. {@link #close()} waits for calls in flight, then
 * frees everything; a call after close throws {@link IllegalStateException}. A seeded instance
 * ({@link #openSeededForTests}) has one stream and serialises its calls in call order.
 *
 * <p>Memory: {@link #open(Path, byte[]...)} memory-maps the file (shared, paged in by the OS);
 * {@link #open(byte[], byte[]...)} copies the bytes into native memory. Native memory is released by
 * {@link #close()} only (there is no finalizer): use try-with-resources or close it yourself.
 */
public final class LdpText implements AutoCloseable {
    static {
        // -Dldptext.jni.library, then java.library.path, then the jar's own copy (NativeLoader)
        NativeLoader.load();
    }

    /** LDP_E_ARG: a null or invalid argument. */
    static final int LDP_E_ARG = -1;
    /** LDP_E_INVALID_UTF8: input that is not well-formed text. */
    static final int LDP_E_INVALID_UTF8 = -5;

    private final ReentrantReadWriteLock lifecycle = new ReentrantReadWriteLock();
    private final ArrayDeque<Long> idle = new ArrayDeque<Long>(); // guarded by itself
    private final BundleInfo info;
    private final boolean seeded;
    private final Object seededLock = new Object();
    private long bundle; // 0 once closed; guarded by lifecycle
    private long seededSanitizer; // the one stream of a seeded instance (else 0)

    private LdpText(long bundle, Long seed) throws LdpTextException {
        this.bundle = bundle;
        try {
            this.info = new BundleInfo(new String(info0(bundle), StandardCharsets.UTF_8));
            this.seeded = seed != null;
            if (seed != null) {
                seededSanitizer = sanitizerNewSeeded0(bundle, seed.longValue());
            } else {
                idle.push(Long.valueOf(sanitizerNew0(bundle))); // fail here, not at the first call
            }
        } catch (LdpTextException | RuntimeException e) {
            closeBundle0(bundle);
            throw e;
        }
    }

    /**
     * Open and verify a bundle file (memory-mapped; keep the file unmodified while open).
     *
     * @param bundle the .ldpb file
     * @param trustedKeys the publisher's raw Ed25519 public keys (32 bytes each); the bundle must be
     *     signed by one of them (none refuses every bundle)
     * @return an open instance; close it
     * @throws LdpTextException the check that failed, e.g. code -43 (LDP_E_UNTRUSTED_KEY), -44
     *     (LDP_E_BAD_SIGNATURE), -68 (LDP_E_ARRAY_HASH), -20 (LDP_E_FILE_NOT_FOUND)
     */
    public static LdpText open(Path bundle, byte[]... trustedKeys) throws LdpTextException {
        return open(bundle, BundleExpectation.any(), trustedKeys);
    }

    /**
     * {@link #open(Path, byte[]...)}, then the application's pins: the bundle is refused unless it
     * meets every one (the Python runtime's {@code Sanitizer.load(..., expect=...)}).
     *
     * @param bundle the .ldpb file
     * @param expect the pins (mechanism, epsilon range, bundle id, minimum format version) and the
     *     weak-privacy opt-in
     * @param trustedKeys the publisher's raw Ed25519 public keys (32 bytes each)
     * @return an open instance; close it
     * @throws LdpTextException the check that failed: a verification code, or -101 (mechanism), -102
     *     (format version), -103 (bundle id), -104 (epsilon), -105 (weak privacy without the opt-in)
     */
    public static LdpText open(Path bundle, BundleExpectation expect, byte[]... trustedKeys) throws LdpTextException {
        if (expect == null) throw new NullPointerException("expect");
        byte[] path = pathBytes(bundle);
        byte[] keys = keyBytes(trustedKeys);
        return new LdpText(openPath0(path, keys, trustedKeys.length, expect.mechanismBits(), expect.epsilonMinOr0(),
                expect.epsilonMaxOr0(), expect.bundleIdNul(), expect.minFormatVersionOr0(), expect.weakAllowed()), null);
    }

    /**
     * {@link #open(Path, byte[]...)} that also accepts a near-identity bundle (its median sensitive
     * word released unchanged with probability at least 0.9; the Python SDK's
     * {@code allow_weak_privacy=True}), which {@code open} refuses with code -105
     * (LDP_E_WEAK_PRIVACY). Every report of it says {@link Report#weakPrivacy()}.
     */
    public static LdpText openAllowingWeakPrivacy(Path bundle, byte[]... trustedKeys) throws LdpTextException {
        return open(bundle, BundleExpectation.any().allowWeakPrivacy(true), trustedKeys);
    }

    /**
     * Open and verify a bundle held in memory (copied into native memory: {@code bundle} may be
     * reused after the call). Prefer {@link #open(Path, byte[]...)} for large bundles.
     *
     * @param bundle the .ldpb bytes
     * @param trustedKeys the publisher's raw Ed25519 public keys (32 bytes each)
     * @return an open instance; close it
     * @throws LdpTextException the check that failed
     */
    public static LdpText open(byte[] bundle, byte[]... trustedKeys) throws LdpTextException {
        return open(bundle, BundleExpectation.any(), trustedKeys);
    }

    /**
     * {@link #open(byte[], byte[]...)}, then the application's pins (see
     * {@link #open(Path, BundleExpectation, byte[]...)}).
     */
    public static LdpText open(byte[] bundle, BundleExpectation expect, byte[]... trustedKeys) throws LdpTextException {
        if (bundle == null) throw new NullPointerException("bundle");
        if (expect == null) throw new NullPointerException("expect");
        byte[] keys = keyBytes(trustedKeys);
        return new LdpText(openMemory0(bundle, keys, trustedKeys.length, expect.mechanismBits(), expect.epsilonMinOr0(),
                expect.epsilonMaxOr0(), expect.bundleIdNul(), expect.minFormatVersionOr0(), expect.weakAllowed()), null);
    }

    /**
     * TESTS ONLY: an instance whose output is reproducible from {@code seed} and therefore NOT
     * PRIVATE (every report says {@link Report#seeded()}). The stream is the Python runtime's
     * {@code Sanitizer.load(..., seed=seed)}: equal seeds give equal outputs, call by call. The
     * seed is read as an unsigned 64-bit integer. Prints a warning on stderr.
     */
    public static LdpText openSeededForTests(Path bundle, long seed, byte[]... trustedKeys) throws LdpTextException {
        warnSeeded();
        return new LdpText(openPath0(pathBytes(bundle), keyBytes(trustedKeys), trustedKeys.length, 0, 0.0, 0.0, null, 0,
                false), Long.valueOf(seed));
    }

    /** TESTS ONLY: {@link #openSeededForTests(Path, long, byte[]...)} on a bundle in memory. */
    public static LdpText openSeededForTests(byte[] bundle, long seed, byte[]... trustedKeys) throws LdpTextException {
        if (bundle == null) throw new NullPointerException("bundle");
        warnSeeded();
        return new LdpText(openMemory0(bundle, keyBytes(trustedKeys), trustedKeys.length, 0, 0.0, 0.0, null, 0, false),
                Long.valueOf(seed));
    }

    private static void warnSeeded() {
        System.err.println("ldptext WARNING: seeded sanitizer: the output is reproducible and NOT PRIVATE"
                + " (tests only; never sanitize real user text with it)");
    }

    /** @return the C library's version (LDP_VERSION) */
    public static String version() {
        return version0();
    }

    /**
     * @return where the JNI library was loaded from: its file (named by {@code -Dldptext.jni.library}
     *     or found on {@code java.library.path}), or {@code bundled:linux-x86_64} /
     *     {@code bundled:linux-aarch64} for the jar's own copy
     */
    public static String nativeLibrary() {
        return NativeLoader.origin();
    }

    /** @return the verified bundle's public facts */
    public BundleInfo info() {
        return info;
    }

    /** @return whether this is a seeded, test-only instance (NOT private) */
    public boolean isSeeded() {
        return seeded;
    }

    /**
     * Sanitize one document. Safe to call from many threads at once.
     *
     * @param text the private text (never logged, never in an exception message)
     * @return the sanitized text (the only thing that may leave the device) and its report
     * @throws LdpTextException e.g. -5 (LDP_E_INVALID_UTF8) for a string with a lone surrogate,
     *     -8 (LDP_E_TOO_LONG), -2 (LDP_E_NOMEM)
     * @throws IllegalStateException after {@link #close()}
     */
    public Sanitized sanitize(String text) throws LdpTextException {
        if (text == null) throw new NullPointerException("text");
        byte[] utf8 = utf8(text);
        double[] r = new double[9];
        byte[] out;
        ReentrantReadWriteLock.ReadLock open = lifecycle.readLock();
        open.lock();
        try {
            if (bundle == 0) throw new IllegalStateException("this LdpText is closed");
            if (seeded) {
                synchronized (seededLock) {
                    out = sanitize0(seededSanitizer, utf8, r);
                }
            } else {
                long s = borrow();
                try {
                    out = sanitize0(s, utf8, r);
                } finally {
                    synchronized (idle) {
                        idle.push(Long.valueOf(s));
                    }
                }
            }
        } finally {
            open.unlock();
            java.util.Arrays.fill(utf8, (byte) 0);
        }
        return new Sanitized(new String(out, StandardCharsets.UTF_8), new Report(r, info));
    }

    private long borrow() throws LdpTextException {
        synchronized (idle) {
            Long s = idle.poll();
            if (s != null) return s.longValue();
        }
        return sanitizerNew0(bundle); // every other one is busy: a new OS-keyed stream
    }

    /** Waits for calls in flight, then frees the sanitizers and the bundle. Idempotent. */
    @Override
    public void close() {
        ReentrantReadWriteLock.WriteLock w = lifecycle.writeLock();
        w.lock();
        try {
            if (bundle == 0) return;
            synchronized (idle) {
                for (Long s : idle) sanitizerFree0(s.longValue());
                idle.clear();
            }
            if (seededSanitizer != 0) sanitizerFree0(seededSanitizer);
            seededSanitizer = 0;
            closeBundle0(bundle);
            bundle = 0;
        } finally {
            w.unlock();
        }
    }

    private static byte[] utf8(String text) throws LdpTextException {
        CharsetEncoder enc = StandardCharsets.UTF_8.newEncoder()
                .onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT);
        try {
            ByteBuffer b = enc.encode(CharBuffer.wrap(text));
            byte[] out = new byte[b.remaining()];
            b.get(out);
            if (b.hasArray()) java.util.Arrays.fill(b.array(), (byte) 0);
            return out;
        } catch (CharacterCodingException e) { // a lone surrogate: refused, never altered
            throw new LdpTextException(LDP_E_INVALID_UTF8, strerror0(LDP_E_INVALID_UTF8));
        }
    }

    private static byte[] pathBytes(Path bundle) {
        if (bundle == null) throw new NullPointerException("bundle");
        byte[] p = bundle.toString().getBytes(StandardCharsets.UTF_8);
        byte[] z = new byte[p.length + 1]; // NUL-terminated for C
        System.arraycopy(p, 0, z, 0, p.length);
        return z;
    }

    private static byte[] keyBytes(byte[][] keys) throws LdpTextException {
        if (keys == null) throw new NullPointerException("trustedKeys");
        byte[] out = new byte[32 * keys.length];
        for (int i = 0; i < keys.length; i++) {
            if (keys[i] == null || keys[i].length != 32) {
                throw new LdpTextException(LDP_E_ARG, "a trusted key must be 32 bytes (raw Ed25519)");
            }
            System.arraycopy(keys[i], 0, out, 32 * i, 32);
        }
        return out;
    }

    // ---- libldptext_jni.so (bindings/jvm/jni/ldptext_jni.c) ----
    private static native String version0();

    static native String strerror0(int code);

    // the pins are ldp_expect's fields (0 / null: no pin)
    private static native long openPath0(byte[] pathNul, byte[] keys, int nKeys, int mechanisms, double epsilonMin,
                                         double epsilonMax, byte[] bundleIdNul, long minFormatVersion,
                                         boolean allowWeak) throws LdpTextException;

    private static native long openMemory0(byte[] data, byte[] keys, int nKeys, int mechanisms, double epsilonMin,
                                           double epsilonMax, byte[] bundleIdNul, long minFormatVersion,
                                           boolean allowWeak) throws LdpTextException;

    private static native void closeBundle0(long bundle);

    private static native byte[] info0(long bundle) throws LdpTextException;

    private static native long sanitizerNew0(long bundle) throws LdpTextException;

    private static native long sanitizerNewSeeded0(long bundle, long seed) throws LdpTextException;

    private static native void sanitizerFree0(long sanitizer);

    private static native byte[] sanitize0(long sanitizer, byte[] utf8, double[] report) throws LdpTextException;
}
