package org.ldptext;

import java.util.Map;

/**
 * The verified bundle's public facts, as {@code ldp_bundle_info} states them (the same values the
 * Python runtime reports). Fields a mechanism does not state are null (boxed types).
 */
public final class BundleInfo {
    private final String json;
    private final long formatVersion;
    private final String mechanism;
    private final double epsilon;
    private final Double epsilon0;
    private final Double p;
    private final Double dMax;
    private final double tolerance;
    private final Double gamma;
    private final Double beta;
    private final Long k;
    private final String similarity;
    private final String ledgerUnit;
    private final Double worstCaseTokenEpsilon;
    private final String worstCaseNote;
    private final String bundleId;
    private final String keyId;
    private final Double verbatimMedian;
    private final Double verbatimMax;
    private final Double verbatimCap;
    private final Double verbatimP90;
    private final Double verbatimP99;
    private final Long verbatimAbove05;
    private final Long verbatimAbove09;
    private final String notion;
    private final String neighbouring;
    private final boolean weakPrivacy;

    BundleInfo(String json) {
        this.json = json;
        Object parsed = Json.parse(json);
        if (!(parsed instanceof Map)) throw new IllegalArgumentException("bundle info is not a JSON object");
        @SuppressWarnings("unchecked")
        Map<String, Object> m = (Map<String, Object>) parsed;
        formatVersion = ((Number) m.get("format_version")).longValue();
        mechanism = (String) m.get("mechanism");
        epsilon = ((Number) m.get("epsilon")).doubleValue();
        epsilon0 = dbl(m.get("epsilon0"));
        p = dbl(m.get("p"));
        dMax = dbl(m.get("d_max"));
        tolerance = ((Number) m.get("tolerance")).doubleValue();
        gamma = dbl(m.get("gamma"));
        beta = dbl(m.get("beta"));
        Object kv = m.get("k");
        k = kv == null ? null : Long.valueOf(((Number) kv).longValue());
        similarity = (String) m.get("similarity");
        ledgerUnit = (String) m.get("ledger_unit");
        worstCaseTokenEpsilon = dbl(m.get("worst_case_token_epsilon"));
        worstCaseNote = (String) m.get("worst_case_note");
        bundleId = (String) m.get("bundle_id");
        keyId = (String) m.get("key_id");
        verbatimMedian = dbl(m.get("verbatim_median"));
        verbatimMax = dbl(m.get("verbatim_max"));
        verbatimCap = dbl(m.get("verbatim_cap"));
        verbatimP90 = dbl(m.get("verbatim_p90"));
        verbatimP99 = dbl(m.get("verbatim_p99"));
        verbatimAbove05 = lng(m.get("verbatim_above_0_5"));
        verbatimAbove09 = lng(m.get("verbatim_above_0_9"));
        notion = (String) m.get("notion");
        neighbouring = (String) m.get("neighbouring");
        weakPrivacy = Boolean.TRUE.equals(m.get("weak_privacy"));
    }

    private static Double dbl(Object o) {
        return o == null ? null : Double.valueOf(((Number) o).doubleValue());
    }

    private static Long lng(Object o) {
        return o == null ? null : Long.valueOf(((Number) o).longValue());
    }

    /** @return the notion of the guarantee ("metric-LDP", "UMLDP", ...), as the Python report states it */
    public String notion() { return notion; }

    /** @return the pairs of inputs the guarantee's bound holds for, as the Python report states them */
    public String neighbouring() { return neighbouring; }

    /** @return the cap on every sensitive input's P(M(x) = x) the build enforced (checked), or null */
    public Double verbatimCap() { return verbatimCap; }

    /** @return the stated 90th percentile of P(M(x) = x) over the sensitive inputs, or null */
    public Double verbatimP90() { return verbatimP90; }

    /** @return the stated 99th percentile of P(M(x) = x) over the sensitive inputs, or null */
    public Double verbatimP99() { return verbatimP99; }

    /** @return how many sensitive inputs are released unchanged with probability >= 0.5, or null */
    public Long verbatimAbove05() { return verbatimAbove05; }

    /** @return how many sensitive inputs are released unchanged with probability >= 0.9, or null */
    public Long verbatimAbove09() { return verbatimAbove09; }

    /** @return the stated median of P(M(x) = x) over the sensitive inputs (checked), or null */
    public Double verbatimMedian() { return verbatimMedian; }

    /** @return the stated largest P(M(x) = x) over the sensitive inputs (checked on every row), or null */
    public Double verbatimMax() { return verbatimMax; }

    /**
     * @return true for a near-identity bundle (the median sensitive word released unchanged with
     *     probability at least 0.9): opened only through {@link LdpText#openAllowingWeakPrivacy}
     */
    public boolean weakPrivacy() { return weakPrivacy; }

    /** @return the whole ldp_bundle_info JSON object (with the verified manifest under "manifest") */
    public String json() { return json; }

    /** @return the manifest's format version */
    public long formatVersion() { return formatVersion; }

    /** @return the bundle's mechanism, as the registry names it (a name of the generated Mechanisms.NAMES) */
    public String mechanism() { return mechanism; }

    /** @return the stated per-token epsilon (metric for SanText and TEM) */
    public double epsilon() { return epsilon; }

    /** @return SanText+'s eps0 = ln(1/p); 0 for SanText, TEM, CusText; null for CusText+ */
    public Double epsilon0() { return epsilon0; }

    /** @return SanText+'s p (CusText+: 0); null where the manifest states none (SanText, TEM) */
    public Double p() { return p; }

    /** @return the bound on distances the bundle states; null for CusText */
    public Double dMax() { return dMax; }

    /** @return the bound on |log P^ - log P| of every realised probability */
    public double tolerance() { return tolerance; }

    /** @return TEM's truncation threshold gamma (else null) */
    public Double gamma() { return gamma; }

    /** @return the beta that chose TEM's gamma (else null) */
    public Double beta() { return beta; }

    /** @return CusText's smallest output set K (else null) */
    public Long k() { return k; }

    /** @return CusText's similarity, "euclidean" or "cosine" (else null) */
    public String similarity() { return similarity; }

    /** @return the unit ledger charges are made in ("metric:..." or "partition:...") */
    public String ledgerUnit() { return ledgerUnit; }

    /** @return the per-token LDP level over any two inputs; null where none exists */
    public Double worstCaseTokenEpsilon() { return worstCaseTokenEpsilon; }

    /** @return what the worst case is, or why there is none */
    public String worstCaseNote() { return worstCaseNote; }

    /** @return SHA-256 (64 hex) of the signed manifest: pin it to accept exactly this bundle */
    public String bundleId() { return bundleId; }

    /** @return 16 hex digits naming the signer's key */
    public String keyId() { return keyId; }

    @Override
    public String toString() {
        return "BundleInfo(" + mechanism + ", epsilon=" + epsilon + ", bundle " + bundleId + ", key " + keyId + ")";
    }
}
