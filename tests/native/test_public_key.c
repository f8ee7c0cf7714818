/* ldp_public_key_parse: the .pub text `ldptext keys generate` writes (base64 of 32 bytes, one line)
 * and PEM Ed25519 public keys give the key; every malformed text gets its own code and leaves the
 * output untouched. (tests/test_libldptext_keys.py compares it with keys.py on many more texts.) */
#include <stdint.h>
#include <string.h>

#include "ldptext.h"
#include "testing.h"

/* bytes 0, 1, ..., 31 */
#define B64 "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
#define PEM_ED25519 \
    "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n" \
    "-----END PUBLIC KEY-----\n"
#define PEM_X25519 \
    "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VuAyEAAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n" \
    "-----END PUBLIC KEY-----\n"
#define PEM_P256                                                        \
    "-----BEGIN PUBLIC KEY-----\n"                                      \
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEt66pSaSUxNaIMmNdW0tjHoywxQZ0\n" \
    "+lL7ZXiK3AgHFyf2yYJotuMdA6u6ncsWeG/GEZmmqK1TnW+iMw/caXr30Q==\n"     \
    "-----END PUBLIC KEY-----\n"
#define PEM_RSA                                                         \
    "-----BEGIN PUBLIC KEY-----\n"                                      \
    "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA7ZuHBX0Heic4SgaCXpsm\n" \
    "QoYFfX/lPZhnMUe8v7ZDjrIk4PLiuAZK9kmryxVcCcRHIFCo1yWia7xJIyBIMuFq\n" \
    "Lfzfb8ghRY2msm/aoBAEjmZgDNMokAILXCsPsipV7R5SgJ+SbAtNXAjHEd5t29FZ\n" \
    "LZo806KiE657MktT1gGHRpWBStbdJls40kOrwssmwkJcXqwBgXCIlx8hThTPnHkq\n" \
    "xVInuCU15fwXFnpBW3D8/Gy7hZzoNW7qHaroqQwdWJXPmgzvHnf6RXfXA/GKPylc\n" \
    "CPZf597pfJ48JeX3X1JSsA554GREEU0fVtjTYyj+h7zs/bWn1X2E6odM4O+BZ0LA\n" \
    "CwIDAQAB\n"                                                        \
    "-----END PUBLIC KEY-----\n"

static int parse(const char *text, uint8_t key[32]) { return ldp_public_key_parse(text, strlen(text), key); }

static int is_0_to_31(const uint8_t key[32]) {
    int i;
    for (i = 0; i < 32; i++)
        if (key[i] != i) return 0;
    return 1;
}

/* rc of text, and that a refused text leaves the key as it was */
static void refused(const char *text, int want) {
    uint8_t key[32];
    memset(key, 0xAB, sizeof key);
    CHECK_RC(parse(text, key), want);
    CHECK(key[0] == 0xAB && key[31] == 0xAB);
}

static void test_pub_file_text(void) {
    uint8_t key[32];
    memset(key, 0, sizeof key);
    CHECK_RC(parse(B64 "\n", key), LDP_OK); /* as keys generate writes it */
    CHECK(is_0_to_31(key));
    memset(key, 0, sizeof key);
    CHECK_RC(parse(B64, key), LDP_OK);
    CHECK(is_0_to_31(key));
    memset(key, 0, sizeof key);
    CHECK_RC(parse(" \t" B64 "\r\n\n", key), LDP_OK); /* whitespace around it, CRLF */
    CHECK(is_0_to_31(key));
}

static void test_not_nul_terminated(void) {
    char text[64];
    uint8_t key[32];
    memcpy(text, B64 "XXXXXXXX", 52);
    CHECK_RC(ldp_public_key_parse(text, 44, key), LDP_OK); /* only len bytes are read */
    CHECK(is_0_to_31(key));
    CHECK_RC(ldp_public_key_parse(text, 52, key), LDP_E_KEY_FORMAT);
}

static void test_pem(void) {
    uint8_t key[32];
    memset(key, 0, sizeof key);
    CHECK_RC(parse(PEM_ED25519, key), LDP_OK);
    CHECK(is_0_to_31(key));
    refused(PEM_X25519, LDP_E_KEY_TYPE);
    refused(PEM_P256, LDP_E_KEY_TYPE);
    refused(PEM_RSA, LDP_E_KEY_TYPE);
    refused("-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAAAECAw==\n-----END PUBLIC KEY-----\n",
            LDP_E_KEY_FORMAT); /* Ed25519's OID, a short key */
    refused("-----BEGIN PUBLIC KEY-----\n" B64 "\n", LDP_E_KEY_FORMAT);      /* no END line */
    refused("-----BEGIN PUBLIC KEY-----\n!!!!\n-----END PUBLIC KEY-----", LDP_E_KEY_FORMAT);
    refused("-----BEGIN CERTIFICATE-----\n" B64 "\n-----END CERTIFICATE-----\n", LDP_E_KEY_FORMAT);
}

static void test_private_keys_are_named(void) {
    refused("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n",
            LDP_E_KEY_PRIVATE);
    refused("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n",
            LDP_E_KEY_PRIVATE);
}

static void test_wrong_lengths(void) {
    refused("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHg==", LDP_E_KEY_LENGTH);     /* 31 bytes */
    refused("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8g", LDP_E_KEY_LENGTH);     /* 33 bytes */
    refused("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+Pw==",
            LDP_E_KEY_LENGTH); /* 64 bytes: a private key's seed and public half */
    refused("QUJD", LDP_E_KEY_LENGTH);
}

static void test_malformed_text(void) {
    refused("", LDP_E_KEY_FORMAT);
    refused(" \n\t", LDP_E_KEY_FORMAT);
    refused("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8", LDP_E_KEY_FORMAT);   /* padding missing */
    refused(B64 "=", LDP_E_KEY_FORMAT);                                          /* excess padding */
    refused("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdH=h8", LDP_E_KEY_FORMAT);  /* data after it */
    refused("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8-", LDP_E_KEY_FORMAT);  /* url-safe alphabet */
    refused("AAECAwQFBgcICQoLDA0ODxAREhMU\nFRYXGBkaGxwdHh8=", LDP_E_KEY_FORMAT); /* two lines */
    refused(B64 "\n" B64 "\n", LDP_E_KEY_FORMAT);                                /* two keys */
    refused("/home/user/keys/signing.pub", LDP_E_KEY_FORMAT);                   /* a path, not its text */
    {
        uint8_t key[32];
        static const char nul[] = B64 "\0";
        CHECK_RC(ldp_public_key_parse(nul, sizeof nul - 1, key), LDP_E_KEY_FORMAT); /* a NUL byte */
    }
}

static void test_arguments(void) {
    uint8_t key[32];
    CHECK_RC(ldp_public_key_parse(NULL, 0, key), LDP_E_ARG);
    CHECK_RC(ldp_public_key_parse(B64, 44, NULL), LDP_E_ARG);
    CHECK(strstr(ldp_strerror(LDP_E_KEY_FORMAT), "base64") != NULL);
    CHECK(strstr(ldp_strerror(LDP_E_KEY_PRIVATE), "PRIVATE") != NULL);
}

int main(void) {
    RUN(test_pub_file_text);
    RUN(test_not_nul_terminated);
    RUN(test_pem);
    RUN(test_private_keys_are_named);
    RUN(test_wrong_lengths);
    RUN(test_malformed_text);
    RUN(test_arguments);
    DONE();
}
