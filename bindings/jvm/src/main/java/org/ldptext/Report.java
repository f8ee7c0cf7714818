package org.ldptext;

/**
 * What one {@link LdpText#sanitize(String)} call released ({@code ldp_report}) and the facts of
 * the bundle it ran on ({@link #bundle()}, {@code ldp_bundle_info}). Contains no text.
 */
public final class Report {
    private final double epsilon;
    private final double epsilon0;
    private final double p;
    private final long tokens;
    private final int mechanismCode;
    private final String mechanism;
    private final boolean seeded;
    private final double dMax;
    private final double tolerance;
    private final double worstCaseEpsilon;
    private final BundleInfo bundle;

    /** r: epsilon, epsilon0, p, n_tokens, mechanism, seeded, d_max, tolerance, worst_case_epsilon */
    Report(double[] r, BundleInfo bundle) {
        this.epsilon = r[0];
        this.epsilon0 = r[1];
        this.p = r[2];
        this.tokens = (long) r[3];
        int m = (int) r[4];
        this.mechanismCode = m;
        String name = Mechanisms.get(Mechanisms.NAMES, m); // the generated table (Mechanisms.java)
        this.mechanism = name != null ? name : "unknown(" + m + ")";
        this.seeded = r[5] != 0.0;
        this.dMax = r[6];
        this.tolerance = r[7];
        this.worstCaseEpsilon = r[8];
        this.bundle = bundle;
    }

    /** @return the epsilon per token (metric for SanText and TEM) */
    public double epsilon() { return epsilon; }

    /** @return ln(1/p) for SanText+, 0 for SanText, TEM and CusText, +infinity for CusText+ */
    public double epsilon0() { return epsilon0; }

    /** @return the probability of sanitizing a token the mechanism may keep (1 where every token is) */
    public double p() { return p; }

    /** @return the number of tokens released (not hidden by the mechanism) */
    public long tokens() { return tokens; }

    /** @return the bundle's mechanism, as the registry names it ("santext+", for example) */
    public String mechanism() { return mechanism; }

    /** @return the notion of the guarantee ("metric-LDP", "UMLDP", ...), as the Python report states it */
    public String notion() { return Mechanisms.get(Mechanisms.NOTIONS, mechanismCode); }

    /** @return the pairs of inputs the guarantee's bound holds for, as the Python report states them */
    public String neighbouring() { return Mechanisms.get(Mechanisms.NEIGHBOURING, mechanismCode); }

    /** @return true for a seeded (test-only) instance: the output is reproducible and NOT private */
    public boolean seeded() { return seeded; }

    /** @return the bound on distances the bundle states (NaN for CusText) */
    public double dMax() { return dMax; }

    /** @return the bound on |log P^ - log P| of every realised probability */
    public double tolerance() { return tolerance; }

    /**
     * @return the per-token LDP level over any two inputs (SanText: eps * d_max; TEM: eps * min(gamma,
     *     d_max)); +infinity where none exists (SanText+, CusText(+))
     */
    public double worstCaseEpsilon() { return worstCaseEpsilon; }

    /** @return the ledger charge of this document: epsilon * tokens (in {@link #ledgerUnit()}) */
    public double documentEpsilon() { return epsilon * tokens; }

    /** @return the bundle's public facts (ldp_bundle_info) */
    public BundleInfo bundle() { return bundle; }

    /** @return the bundle's id (SHA-256 of its signed manifest, 64 hex) */
    public String bundleId() { return bundle.bundleId(); }

    /** @return the signer's key id (16 hex) */
    public String keyId() { return bundle.keyId(); }

    /** @return the bundle's format version */
    public long formatVersion() { return bundle.formatVersion(); }

    /** @return the unit ledger charges are made in */
    public String ledgerUnit() { return bundle.ledgerUnit(); }

    /** @return what the worst case is, or why there is none */
    public String worstCaseNote() { return bundle.worstCaseNote(); }

    /** @return true when the bundle is near identity (see {@link BundleInfo#weakPrivacy()}) */
    public boolean weakPrivacy() { return bundle.weakPrivacy(); }

    @Override
    public String toString() {
        return mechanism + ": " + notion() + " epsilon=" + epsilon + " per token, epsilon0=" + epsilon0 + ", p=" + p + ", "
                + tokens + " tokens, worst case " + (Double.isInfinite(worstCaseEpsilon) ? "none" : worstCaseEpsilon)
                + (seeded ? "; SEEDED: reproducible, NOT private" : "")
                + (bundle.weakPrivacy() ? "; WEAK PRIVACY: the output is close to the input" : "");
    }
}
