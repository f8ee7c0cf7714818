package org.ldptext;

import java.util.Arrays;
import java.util.regex.Pattern;

/**
 * What an application requires of the bundles it opens, beyond a trusted signature: the Python
 * runtime's {@code BundleExpectation} (and {@code allow_weak_privacy}), checked by the C library's
 * {@code ldp_bundle_open_expect} right after verification. A validly signed bundle of the same
 * publisher may still be another mechanism, a larger epsilon or an older format: pin what the app
 * promises its users. Immutable; every method returns a new expectation.
 *
 * <pre>{@code
 * BundleExpectation pins = BundleExpectation.any().mechanism("santext+").epsilonMax(3.0);
 * try (LdpText ldp = LdpText.open(path, pins, publisherKey)) { ... }
 * }</pre>
 *
 * <p>An unmet pin refuses the bundle with {@link LdpTextException}: -101 (mechanism), -102 (format
 * version), -103 (bundle id), -104 (epsilon), checked in that order. A value outside its domain is
 * refused here, with {@link IllegalArgumentException}.
 */
public final class BundleExpectation {
    private static final Pattern HEX64 = Pattern.compile("[0-9a-f]{64}");
    private static final BundleExpectation ANY = new BundleExpectation(0, 0.0, 0.0, null, 0, false);

    private final int mechanisms; // bit set of 1 << ldp_report.mechanism; 0: any
    private final double epsilonMin, epsilonMax; // 0: no bound
    private final String bundleId; // null: any
    private final long minFormatVersion; // 0: any
    private final boolean allowWeakPrivacy;

    private BundleExpectation(int mechanisms, double epsilonMin, double epsilonMax, String bundleId,
                              long minFormatVersion, boolean allowWeakPrivacy) {
        this.mechanisms = mechanisms;
        this.epsilonMin = epsilonMin;
        this.epsilonMax = epsilonMax;
        this.bundleId = bundleId;
        this.minFormatVersion = minFormatVersion;
        this.allowWeakPrivacy = allowWeakPrivacy;
    }

    /** @return no pins: every bundle that verifies (what {@link LdpText#open(java.nio.file.Path, byte[]...)} accepts) */
    public static BundleExpectation any() {
        return ANY;
    }

    /**
     * @param names the accepted mechanisms ({@code santext}, {@code santext+}, {@code tem},
     *     {@code custext}, {@code custext+}); at least one
     * @return this expectation, accepting only those mechanisms
     */
    public BundleExpectation mechanism(String... names) {
        if (names == null || names.length == 0) throw new IllegalArgumentException("mechanism: name at least one");
        int bits = 0;
        for (String name : names) {
            int index = name == null ? -1 : Arrays.asList(Mechanisms.NAMES).indexOf(name);
            if (index <= 0) {
                throw new IllegalArgumentException("expected mechanism must be among "
                        + Arrays.asList(Mechanisms.NAMES).subList(1, Mechanisms.NAMES.length) + ", not " + name);
            }
            bits |= 1 << index;
        }
        return new BundleExpectation(bits, epsilonMin, epsilonMax, bundleId, minFormatVersion, allowWeakPrivacy);
    }

    /** @return this expectation, refusing a bundle whose stated per-token epsilon is below {@code min} */
    public BundleExpectation epsilonMin(double min) {
        positive("epsilonMin", min);
        if (epsilonMax != 0.0 && min > epsilonMax) throw new IllegalArgumentException("epsilonMin is larger than epsilonMax");
        return new BundleExpectation(mechanisms, min, epsilonMax, bundleId, minFormatVersion, allowWeakPrivacy);
    }

    /** @return this expectation, refusing a bundle whose stated per-token epsilon is above {@code max} */
    public BundleExpectation epsilonMax(double max) {
        positive("epsilonMax", max);
        if (epsilonMin != 0.0 && epsilonMin > max) throw new IllegalArgumentException("epsilonMin is larger than epsilonMax");
        return new BundleExpectation(mechanisms, epsilonMin, max, bundleId, minFormatVersion, allowWeakPrivacy);
    }

    /**
     * @param id exactly this bundle: {@link BundleInfo#bundleId()}, 64 lowercase hex digits
     * @return this expectation, accepting only that bundle
     */
    public BundleExpectation bundleId(String id) {
        if (id == null || !HEX64.matcher(id).matches()) {
            throw new IllegalArgumentException("bundleId must be 64 lowercase hex digits (see `ldptext bundle verify`)");
        }
        return new BundleExpectation(mechanisms, epsilonMin, epsilonMax, id, minFormatVersion, allowWeakPrivacy);
    }

    /** @return this expectation, refusing bundles of a format version below {@code version} (at least 1) */
    public BundleExpectation minFormatVersion(long version) {
        if (version < 1) throw new IllegalArgumentException("minFormatVersion must be an integer >= 1");
        return new BundleExpectation(mechanisms, epsilonMin, epsilonMax, bundleId, version, allowWeakPrivacy);
    }

    /**
     * @param allow true accepts a near-identity bundle (its median sensitive word released unchanged
     *     with probability at least 0.9; the Python SDK's {@code allow_weak_privacy=True}), which is
     *     otherwise refused with -105 (LDP_E_WEAK_PRIVACY); its reports then say {@link Report#weakPrivacy()}
     * @return this expectation with that choice
     */
    public BundleExpectation allowWeakPrivacy(boolean allow) {
        return new BundleExpectation(mechanisms, epsilonMin, epsilonMax, bundleId, minFormatVersion, allow);
    }

    private static void positive(String name, double v) {
        if (!(v > 0.0) || Double.isInfinite(v)) throw new IllegalArgumentException(name + " must be a positive finite number");
    }

    int mechanismBits() { return mechanisms; }
    double epsilonMinOr0() { return epsilonMin; }
    double epsilonMaxOr0() { return epsilonMax; }
    long minFormatVersionOr0() { return minFormatVersion; }
    boolean weakAllowed() { return allowWeakPrivacy; }

    /** The pinned bundle id, NUL-terminated for C; null when any. */
    byte[] bundleIdNul() {
        if (bundleId == null) return null;
        byte[] z = new byte[bundleId.length() + 1];
        for (int i = 0; i < bundleId.length(); i++) z[i] = (byte) bundleId.charAt(i); // ASCII hex
        return z;
    }

    @Override
    public String toString() {
        StringBuilder b = new StringBuilder("BundleExpectation{");
        String sep = "";
        if (mechanisms != 0) {
            b.append("mechanism=");
            String m = "";
            for (int i = 1; i < Mechanisms.NAMES.length; i++) {
                if ((mechanisms & (1 << i)) != 0) {
                    b.append(m).append(Mechanisms.NAMES[i]);
                    m = "|";
                }
            }
            sep = ", ";
        }
        if (epsilonMin != 0.0) { b.append(sep).append("epsilonMin=").append(epsilonMin); sep = ", "; }
        if (epsilonMax != 0.0) { b.append(sep).append("epsilonMax=").append(epsilonMax); sep = ", "; }
        if (bundleId != null) { b.append(sep).append("bundleId=").append(bundleId); sep = ", "; }
        if (minFormatVersion != 0) { b.append(sep).append("minFormatVersion=").append(minFormatVersion); sep = ", "; }
        if (allowWeakPrivacy) b.append(sep).append("allowWeakPrivacy");
        return b.append('}').toString();
    }
}
