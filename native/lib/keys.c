/* ldp_public_key_parse: the text of a public key file (`ldptext keys generate`'s .pub: the base64 of
 * the raw 32-byte Ed25519 key on one line; or a PEM "PUBLIC KEY") -> the 32 bytes ldp_bundle_open
 * takes. Accepts exactly the keys sdk/ldptext/keys.py load_public_key accepts from such a file. */
#include <string.h>

#include "ldptext.h"

/* the DER SubjectPublicKeyInfo of an Ed25519 key (RFC 8410) up to the key: SEQUENCE (42 bytes) {
 * SEQUENCE { OID 1.3.101.112 }, BIT STRING (33 bytes, 0 unused bits) } */
static const uint8_t ED25519_SPKI[12] = {0x30, 0x2a, 0x30, 0x05, 0x06, 0x03,
                                         0x2b, 0x65, 0x70, 0x03, 0x21, 0x00};
static const uint8_t ED25519_OID[5] = {0x06, 0x03, 0x2b, 0x65, 0x70};

static int is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* the value of a base64 digit (standard alphabet), or -1 */
static int b64_value(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

static const char *find(const char *s, size_t len, const char *needle) {
    size_t n = strlen(needle), i;
    for (i = 0; n <= len && i <= len - n; i++)
        if (memcmp(s + i, needle, n) == 0) return s + i;
    return NULL;
}

/* Decodes padded base64 (standard alphabet; '=' only as the last one or two characters; length a
 * multiple of 4) of s[0..len), skipping whitespace when skip_space, into out: at most cap bytes
 * are written. Returns the decoded length (which may exceed cap), or -1 if s is not such base64.
 * The unused low bits of the last digit are ignored, as Python's base64.b64decode ignores them. */
static long b64_decode(const char *s, size_t len, int skip_space, uint8_t *out, size_t cap) {
    uint32_t acc = 0;
    size_t i, digits = 0, pad = 0, n = 0;
    int bits = 0;
    for (i = 0; i < len; i++) {
        int v;
        if (skip_space && is_space(s[i])) continue;
        if (s[i] == '=') {
            pad++;
            continue;
        }
        v = b64_value(s[i]);
        if (v < 0 || pad > 0) return -1; /* not base64, or data after the padding */
        digits++;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n < cap) out[n] = (uint8_t)(acc >> bits);
            n++;
        }
    }
    if (digits == 0 || pad != (4 - digits % 4) % 4) return -1; /* missing or excess padding */
    return (long)n;
}

/* The key of a DER SubjectPublicKeyInfo: LDP_OK for Ed25519, LDP_E_KEY_TYPE for a well-formed one
 * of another algorithm, LDP_E_KEY_FORMAT for anything else. */
static int spki_key(const uint8_t *der, size_t len, uint8_t key[32]) {
    size_t outer, at;
    if (len == 44 && memcmp(der, ED25519_SPKI, sizeof ED25519_SPKI) == 0) {
        memcpy(key, der + 12, 32);
        return LDP_OK;
    }
    /* SEQUENCE { SEQUENCE { OID ... } ... } with DER lengths (short or long form) */
    if (len < 2 || der[0] != 0x30) return LDP_E_KEY_FORMAT;
    if (der[1] < 0x80) {
        outer = der[1];
        at = 2;
    } else if (der[1] == 0x81 && len >= 3) {
        outer = der[2];
        at = 3;
    } else if (der[1] == 0x82 && len >= 4) {
        outer = ((size_t)der[2] << 8) | der[3];
        at = 4;
    } else {
        return LDP_E_KEY_FORMAT;
    }
    if (at + outer != len || len - at < 4 || der[at] != 0x30) return LDP_E_KEY_FORMAT;
    at += der[at + 1] < 0x80 ? 2 : 2 + (size_t)(der[at + 1] & 0x7f);
    if (at + 2 > len || der[at] != 0x06 || der[at + 1] == 0 || at + 2 + der[at + 1] > len)
        return LDP_E_KEY_FORMAT;
    if (der[at + 1] == 3 && memcmp(der + at, ED25519_OID, sizeof ED25519_OID) == 0)
        return LDP_E_KEY_FORMAT; /* Ed25519, but not its one encoding */
    return LDP_E_KEY_TYPE;
}

#define PEM_BEGIN "-----BEGIN PUBLIC KEY-----"
#define PEM_END "-----END PUBLIC KEY-----"

int ldp_public_key_parse(const char *text, size_t len, uint8_t key[32]) {
    uint8_t buf[4096];
    const char *s = text, *end;
    long n;
    if (text == NULL || key == NULL) return LDP_E_ARG;
    if (find(text, len, "PRIVATE KEY-----") != NULL) return LDP_E_KEY_PRIVATE;
    end = text + len;
    while (s < end && is_space(*s)) s++;
    while (end > s && is_space(end[-1])) end--;
    if (s == end) return LDP_E_KEY_FORMAT;
    if ((size_t)(end - s) >= 10 && memcmp(s, "-----BEGIN", 10) == 0) {
        const char *body = s + strlen(PEM_BEGIN), *stop;
        if ((size_t)(end - s) < strlen(PEM_BEGIN) || memcmp(s, PEM_BEGIN, strlen(PEM_BEGIN)) != 0)
            return LDP_E_KEY_FORMAT; /* a certificate or another PEM type */
        stop = find(body, (size_t)(end - body), PEM_END);
        if (stop == NULL || stop + strlen(PEM_END) != end) return LDP_E_KEY_FORMAT;
        n = b64_decode(body, (size_t)(stop - body), 1, buf, sizeof buf);
        if (n < 0 || (size_t)n > sizeof buf) return LDP_E_KEY_FORMAT;
        return spki_key(buf, (size_t)n, key);
    }
    n = b64_decode(s, (size_t)(end - s), 0, buf, sizeof buf);
    if (n == -1) return LDP_E_KEY_FORMAT;
    if (n != 32) return LDP_E_KEY_LENGTH;
    memcpy(key, buf, 32);
    return LDP_OK;
}
