package org.ldptext;

/**
 * A refusal or failure of libldptext: {@link #code()} is the C library's return code (negative, one
 * per check: {@code LDP_E_UNTRUSTED_KEY} is -43, {@code LDP_E_BAD_SIGNATURE} -44, ... as in
 * {@code ldptext.h}) and {@link #getMessage()} its {@code ldp_strerror} text. A few refusals are made
 * by the binding itself before the library is called (a trusted key that is not 32 bytes, input
 * that is not well-formed UTF-16); they carry the C code the library would give ({@code LDP_E_ARG},
 * {@code LDP_E_INVALID_UTF8}). Messages never contain input text.
 */
public final class LdpTextException extends Exception {
    private static final long serialVersionUID = 1L;

    private final int code;

    /**
     * @param code the C library's return code (negative)
     * @param message what failed, without input text
     */
    public LdpTextException(int code, String message) {
        super(message);
        this.code = code;
    }

    /** @return the C library's return code (negative), e.g. -43 for LDP_E_UNTRUSTED_KEY */
    public int code() {
        return code;
    }

    @Override
    public String toString() {
        return "LdpTextException(" + code + "): " + getMessage();
    }
}
