/* ldp_sha256 (the SHA extensions where the CPU has them) against FIPS 180-2's example digests and
 * against libsodium's portable SHA-256 at every length across the padding's block boundaries, from
 * unaligned starts, and over megabytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ldptext.h"
#include "sha256.h"
#include "testing.h"

static void hex(const uint8_t d[32], char out[65]) {
    int i;
    for (i = 0; i < 32; i++) sprintf(out + 2 * i, "%02x", d[i]);
}

static void test_known_answers(void) {
    static const struct {
        const char *msg, *digest;
    } cases[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    size_t i;
    printf("SHA-256 on the CPU's SHA extensions: %s\n", ldp_sha256_hardware() ? "yes" : "no");
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t d[32];
        char h[65];
        ldp_sha256((const uint8_t *)cases[i].msg, strlen(cases[i].msg), d);
        hex(d, h);
        CHECK(strcmp(h, cases[i].digest) == 0);
    }
}

/* a public pseudo-random fill (xorshift): reproducible inputs */
static void fill(uint8_t *p, size_t n, uint64_t seed) {
    size_t i;
    for (i = 0; i < n; i++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        p[i] = (uint8_t)(seed >> 24);
    }
}

static void test_every_length_as_libsodium(void) {
    enum { MAX = 1100 };
    uint8_t *buf = (uint8_t *)malloc(MAX + 16);
    size_t n, off;
    REQUIRE(buf != NULL);
    fill(buf, MAX + 16, 0x9e3779b97f4a7c15u);
    for (off = 0; off < 4; off++) /* unaligned starts as well */
        for (n = 0; n <= MAX; n++) {
            uint8_t a[32], b[32];
            ldp_sha256(buf + off, n, a);
            ldp_sha256_portable(buf + off, n, b);
            CHECK(memcmp(a, b, 32) == 0);
        }
    free(buf);
}

static void test_megabytes_as_libsodium(void) {
    static const size_t sizes[] = {(size_t)1 << 20, ((size_t)3 << 20) + 57, ((size_t)8 << 20) - 1};
    size_t i;
    for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint8_t *buf = (uint8_t *)malloc(sizes[i]), a[32], b[32];
        REQUIRE(buf != NULL);
        fill(buf, sizes[i], 12345u + i);
        ldp_sha256(buf, sizes[i], a);
        ldp_sha256_portable(buf, sizes[i], b);
        CHECK(memcmp(a, b, 32) == 0);
        buf[sizes[i] / 2] ^= 1; /* and a one-bit change changes it */
        ldp_sha256(buf, sizes[i], b);
        CHECK(memcmp(a, b, 32) != 0);
        free(buf);
    }
}

int main(void) {
    RUN(test_known_answers);
    RUN(test_every_length_as_libsodium);
    RUN(test_megabytes_as_libsodium);
    DONE();
}
