/* SHA-256 of a bundle's arrays (FIPS 180-4), on the CPU's SHA extensions where it has them.
 *
 * Almost all of ldp_bundle_open's time is hashing the arrays against the signed manifest.
 * libsodium's SHA-256 is portable C; CPUs with SHA extensions run the compression function in
 * hardware, several times faster: x86-64 with the SHA extensions (Intel since Goldmont and Ice
 * Lake, AMD since Zen), chosen at run time, and ARMv8 with the SHA2 crypto extension (most phones),
 * where the compiler targets it (__ARM_FEATURE_SHA2, as Apple's arm64 targets do) or, with GCC on
 * Linux and Android, where the kernel reports it. This file holds only those compression
 * functions and the padding around them; every other build (LDP_PORTABLE, wasm, other CPUs and
 * compilers) hashes with libsodium. Every path gives the same digest (tests/native/test_sha256.c
 * compares them with libsodium's). */
#include "sha256.h"

#include <sodium.h>
#include <string.h>

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__) && !defined(LDP_PORTABLE) && \
    !defined(__EMSCRIPTEN__)
#define LDP_SHA_NI 1
#include <cpuid.h>
#include <immintrin.h>
#elif defined(__aarch64__) && !defined(LDP_PORTABLE) && \
    (defined(__ARM_FEATURE_SHA2) ||                                                               \
     (defined(__GNUC__) && !defined(__clang__) && defined(__linux__)))
#define LDP_SHA_ARM 1
#include <arm_neon.h>
#if !defined(__ARM_FEATURE_SHA2)
#include <sys/auxv.h>
#define LDP_SHA_ARM_TARGET __attribute__((target("+crypto")))
#define LDP_HWCAP_SHA2 (1UL << 6) /* HWCAP_SHA2 of the arm64 Linux ABI */
#else
#define LDP_SHA_ARM_TARGET
#endif
#endif

#if defined(LDP_SHA_NI) || defined(LDP_SHA_ARM)
static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
#endif

#if defined(LDP_SHA_NI)
/* The compression function over n 64-byte blocks (x86 SHA extensions). The instructions keep the
 * eight working variables as two vectors, (A, B, E, F) and (C, D, G, H) from the high lane down;
 * sha256rnds2 runs two rounds on the low two words of the message-plus-constant vector;
 * sha256msg1/msg2 with the word-aligned shift extend the message schedule four words at a time:
 * W[t] = sigma1(W[t-2]) + W[t-7] + sigma0(W[t-15]) + W[t-16]. */
__attribute__((target("sha,sse4.1"))) static void compress_hw(uint32_t state[8], const uint8_t *p,
                                                              size_t n) {
    /* the message is big-endian: reverse the bytes of each 32-bit word */
    const __m128i swap = _mm_set_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3);
    __m128i abcd = _mm_loadu_si128((const __m128i *)&state[0]);
    __m128i efgh = _mm_loadu_si128((const __m128i *)&state[4]);
    __m128i badc = _mm_shuffle_epi32(abcd, 0xB1);
    __m128i hgfe = _mm_shuffle_epi32(efgh, 0x1B);
    __m128i abef = _mm_alignr_epi8(badc, hgfe, 8);  /* lanes (F, E, B, A) */
    __m128i cdgh = _mm_blend_epi16(hgfe, badc, 0xF0); /* lanes (H, G, D, C) */
    for (; n > 0; n--, p += 64) {
        const __m128i abef0 = abef, cdgh0 = cdgh;
        __m128i w[4];
        int g;
        /* unrolled, so that w[] stays in registers (its index is then a constant) */
#pragma GCC unroll 16
        for (g = 0; g < 16; g++) { /* four rounds per group */
            __m128i wk;
            if (g < 4) {
                w[g] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * g)), swap);
            } else { /* w[g % 4] still holds the group g - 4 */
                const __m128i m1 = _mm_sha256msg1_epu32(w[g % 4], w[(g + 1) % 4]);
                const __m128i w7 = _mm_alignr_epi8(w[(g + 3) % 4], w[(g + 2) % 4], 4);
                w[g % 4] = _mm_sha256msg2_epu32(_mm_add_epi32(m1, w7), w[(g + 3) % 4]);
            }
            wk = _mm_add_epi32(w[g % 4], _mm_loadu_si128((const __m128i *)&K[4 * g]));
            /* rounds 4g and 4g+1 write the new (A, B, E, F) into cdgh (the old one is now the
             * (C, D, G, H)); rounds 4g+2 and 4g+3 with the roles back */
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(wk, 0x0E));
        }
        abef = _mm_add_epi32(abef, abef0);
        cdgh = _mm_add_epi32(cdgh, cdgh0);
    }
    {
        const __m128i a_to_f = _mm_shuffle_epi32(abef, 0x1B); /* lanes (A, B, E, F) */
        const __m128i g_to_d = _mm_shuffle_epi32(cdgh, 0xB1); /* lanes (G, H, C, D) */
        _mm_storeu_si128((__m128i *)&state[0], _mm_blend_epi16(a_to_f, g_to_d, 0xF0));
        _mm_storeu_si128((__m128i *)&state[4], _mm_alignr_epi8(g_to_d, a_to_f, 8));
    }
}

/* CPUID itself, not __builtin_cpu_supports("sha"), which older clang does not know: leaf 1 ECX bit
 * 19 (SSE4.1), leaf 7 EBX bit 29 (SHA). Asked on every hash: a few per bundle open. */
static int has_hw(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 19))) return 0;
    if (__get_cpuid_max(0, NULL) < 7) return 0;
    __cpuid_count(7, 0, a, b, c, d);
    return (b & (1u << 29)) != 0;
}
#endif /* LDP_SHA_NI */

#if defined(LDP_SHA_ARM)
/* The compression function with the ARMv8 SHA2 instructions: the state as (A, B, C, D) and
 * (E, F, G, H); sha256h/sha256h2 run four rounds, sha256su0/su1 extend the schedule. */
LDP_SHA_ARM_TARGET static void compress_hw(uint32_t state[8], const uint8_t *p, size_t n) {
    uint32x4_t abcd = vld1q_u32(&state[0]), efgh = vld1q_u32(&state[4]);
    for (; n > 0; n--, p += 64) {
        const uint32x4_t abcd0 = abcd, efgh0 = efgh;
        uint32x4_t w[4];
        int g;
#pragma GCC unroll 16
        for (g = 0; g < 16; g++) {
            uint32x4_t wk, prev;
            if (g < 4) /* big-endian words */
                w[g] = vreinterpretq_u32_u8(vrev32q_u8(vld1q_u8(p + 16 * g)));
            else /* w[g % 4] still holds the group g - 4 */
                w[g % 4] = vsha256su1q_u32(vsha256su0q_u32(w[g % 4], w[(g + 1) % 4]),
                                           w[(g + 2) % 4], w[(g + 3) % 4]);
            wk = vaddq_u32(w[g % 4], vld1q_u32(&K[4 * g]));
            prev = abcd;
            abcd = vsha256hq_u32(abcd, efgh, wk);
            efgh = vsha256h2q_u32(efgh, prev, wk);
        }
        abcd = vaddq_u32(abcd, abcd0);
        efgh = vaddq_u32(efgh, efgh0);
    }
    vst1q_u32(&state[0], abcd);
    vst1q_u32(&state[4], efgh);
}

static int has_hw(void) {
#if defined(__ARM_FEATURE_SHA2)
    return 1;
#else
    return (getauxval(AT_HWCAP) & LDP_HWCAP_SHA2) != 0;
#endif
}
#endif /* LDP_SHA_ARM */

#if defined(LDP_SHA_NI) || defined(LDP_SHA_ARM)
/* The whole message through compress_hw: its full blocks in place, then the padding (0x80, zeros,
 * the bit length big-endian) in one or two blocks. */
static void sha256_hw(const uint8_t *data, size_t n, uint8_t out[32]) {
    uint32_t state[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                         0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    uint8_t last[128];
    const size_t full = n / 64, rest = n % 64;
    const uint64_t bits = (uint64_t)n * 8u; /* n < 2^61 on any machine that holds the input */
    size_t tail, i;
    compress_hw(state, data, full);
    memset(last, 0, sizeof last);
    if (rest > 0) memcpy(last, data + full * 64, rest);
    last[rest] = 0x80;
    tail = rest < 56 ? 64 : 128;
    for (i = 0; i < 8; i++) last[tail - 1 - i] = (uint8_t)(bits >> (8 * i));
    compress_hw(state, last, tail / 64);
    for (i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(state[i] >> 24);
        out[4 * i + 1] = (uint8_t)(state[i] >> 16);
        out[4 * i + 2] = (uint8_t)(state[i] >> 8);
        out[4 * i + 3] = (uint8_t)state[i];
    }
}
#endif

int ldp_sha256_hardware(void) {
#if defined(LDP_SHA_NI) || defined(LDP_SHA_ARM)
    return has_hw();
#else
    return 0;
#endif
}

void ldp_sha256(const uint8_t *data, size_t n, uint8_t out[32]) {
#if defined(LDP_SHA_NI) || defined(LDP_SHA_ARM)
    if (has_hw()) {
        sha256_hw(data, n, out);
        return;
    }
#endif
    crypto_hash_sha256(out, data, (unsigned long long)n);
}

void ldp_sha256_portable(const uint8_t *data, size_t n, uint8_t out[32]) {
    crypto_hash_sha256(out, data, (unsigned long long)n);
}
