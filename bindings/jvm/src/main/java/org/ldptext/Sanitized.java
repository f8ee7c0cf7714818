package org.ldptext;

/** The result of {@link LdpText#sanitize(String)}: the text that may leave the device and its report. */
public final class Sanitized {
    private final String text;
    private final Report report;

    Sanitized(String text, Report report) {
        this.text = text;
        this.report = report;
    }

    /** @return the sanitized text: the only thing that may leave the device */
    public String text() {
        return text;
    }

    /** @return what this call released and under which guarantee */
    public Report report() {
        return report;
    }

    /** The report only: the sanitized text is not logged by accident either. */
    @Override
    public String toString() {
        return "Sanitized(" + report + ")";
    }
}
