/* ChaCha20 keystream generator (RFC 8439). Plain C99, no platform calls. */
#include "chacha20.h"
#include <string.h>
#if defined(__SSE2__) && !defined(LDP_PORTABLE)
#include <emmintrin.h>
#endif

#define ROTL(v, n) (((v) << (n)) | ((v) >> (32 - (n))))
#define QR(a, b, c, d)                      \
    a += b; d ^= a; d = ROTL(d, 16);        \
    c += d; b ^= c; b = ROTL(b, 12);        \
    a += b; d ^= a; d = ROTL(d, 8);         \
    c += d; b ^= c; b = ROTL(b, 7)

void ldp_chacha20_block(const uint32_t in[16], uint32_t out[16]) {
    uint32_t x[16];
    int i;
    memcpy(x, in, sizeof x);
    for (i = 0; i < 10; i++) {
        QR(x[0], x[4], x[8], x[12]);
        QR(x[1], x[5], x[9], x[13]);
        QR(x[2], x[6], x[10], x[14]);
        QR(x[3], x[7], x[11], x[15]);
        QR(x[0], x[5], x[10], x[15]);
        QR(x[1], x[6], x[11], x[12]);
        QR(x[2], x[7], x[8], x[13]);
        QR(x[3], x[4], x[9], x[14]);
    }
    for (i = 0; i < 16; i++) out[i] = x[i] + in[i];
}

static uint32_t load32_le(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

void ldp_chacha_init(ldp_chacha *g, const uint8_t key[32], uint64_t stream) {
    int i;
    for (i = 0; i < 8; i++) g->key[i] = load32_le(key + 4 * i);
    g->counter = 0;
    g->stream = stream;
    g->used = LDP_CHACHA_WORDS;
    g->bitbuf = 0;
    g->bits = 0;
}

static void block_input(const ldp_chacha *g, uint64_t counter, uint32_t in[16]) {
    in[0] = 0x61707865u; in[1] = 0x3320646eu; in[2] = 0x79622d32u; in[3] = 0x6b206574u;
    memcpy(in + 4, g->key, sizeof g->key);
    in[12] = (uint32_t)counter;
    in[13] = (uint32_t)(counter >> 32);
    in[14] = (uint32_t)g->stream;
    in[15] = (uint32_t)(g->stream >> 32);
}

#if defined(__SSE2__) && !defined(LDP_PORTABLE)
/* Four consecutive blocks at once, one block per 32-bit SIMD lane: the same arithmetic as
 * ldp_chacha20_block (tests compare the two), about three times fewer instructions. */
#define ROTV(v, n) _mm_or_si128(_mm_slli_epi32((v), (n)), _mm_srli_epi32((v), 32 - (n)))
#define QRV(a, b, c, d)                                                                    \
    x[a] = _mm_add_epi32(x[a], x[b]); x[d] = _mm_xor_si128(x[d], x[a]); x[d] = ROTV(x[d], 16); \
    x[c] = _mm_add_epi32(x[c], x[d]); x[b] = _mm_xor_si128(x[b], x[c]); x[b] = ROTV(x[b], 12); \
    x[a] = _mm_add_epi32(x[a], x[b]); x[d] = _mm_xor_si128(x[d], x[a]); x[d] = ROTV(x[d], 8);  \
    x[c] = _mm_add_epi32(x[c], x[d]); x[b] = _mm_xor_si128(x[b], x[c]); x[b] = ROTV(x[b], 7)

static void blocks4(const ldp_chacha *g, uint64_t counter, uint32_t *out) {
    uint32_t in[4][16], lanes[4];
    __m128i s[16], x[16];
    int i, l;
    for (l = 0; l < 4; l++) block_input(g, counter + (uint64_t)l, in[l]);
    for (i = 0; i < 16; i++)
        s[i] = x[i] = _mm_set_epi32((int)in[3][i], (int)in[2][i], (int)in[1][i], (int)in[0][i]);
    for (i = 0; i < 10; i++) {
        QRV(0, 4, 8, 12); QRV(1, 5, 9, 13); QRV(2, 6, 10, 14); QRV(3, 7, 11, 15);
        QRV(0, 5, 10, 15); QRV(1, 6, 11, 12); QRV(2, 7, 8, 13); QRV(3, 4, 9, 14);
    }
    for (i = 0; i < 16; i++) {
        _mm_storeu_si128((__m128i *)lanes, _mm_add_epi32(x[i], s[i]));
        for (l = 0; l < 4; l++) out[16 * l + i] = lanes[l];
    }
}
#else
static void blocks4(const ldp_chacha *g, uint64_t counter, uint32_t *out) {
    uint32_t in[16];
    int l;
    for (l = 0; l < 4; l++) {
        block_input(g, counter + (uint64_t)l, in);
        ldp_chacha20_block(in, out + 16 * l);
    }
}
#endif

/* Sixteen blocks with AVX-512F, or eight with AVX2, where the CPU has them (chosen at run time: the
 * build targets plain x86-64): one block per 32-bit lane. AVX2 does the 16- and 8-bit rotations as
 * byte shuffles and writes the lanes back by an 8 x 8 transpose in registers. Keystream generation
 * was a quarter of SanText sampling's time at large eps with eight blocks on AVX-512VL (0.42 ns per
 * byte); sixteen in 512-bit registers take 0.26 (one core, 800 MB of words). GCC and clang on x86
 * only; not with LDP_NO_AVX2 (the SSE2 build that native/Makefile test-portable compares) nor
 * LDP_NO_AVX512. */
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__)) && \
    !defined(LDP_PORTABLE) && !defined(LDP_NO_AVX2)
#define LDP_CHACHA_AVX2 1
#if !defined(LDP_NO_AVX512)
#define LDP_CHACHA_AVX512 1
#endif
#include <immintrin.h>
#define ROTV8(v, n) _mm256_or_si256(_mm256_slli_epi32((v), (n)), _mm256_srli_epi32((v), 32 - (n)))
/* The counter words (12: low, 13: high) of n consecutive blocks from counter: the only input words
 * that differ between the blocks of one refill. */
static void counter_words(uint64_t counter, int n, uint32_t *lo, uint32_t *hi) {
    int i;
    for (i = 0; i < n; i++) {
        const uint64_t c = counter + (uint64_t)i;
        lo[i] = (uint32_t)c;
        hi[i] = (uint32_t)(c >> 32);
    }
}

/* The eight blocks' input states, word i of every block in s[i] (lane l: block counter + l): only
 * the counter words differ between blocks. */
__attribute__((target("avx2"))) static void blocks8_input(const ldp_chacha *g, uint64_t counter,
                                                          __m256i s[16]) {
    uint32_t in[16], lo[8], hi[8];
    int i;
    block_input(g, counter, in);
    counter_words(counter, 8, lo, hi);
    for (i = 0; i < 16; i++) s[i] = _mm256_set1_epi32((int)in[i]);
    s[12] = _mm256_loadu_si256((const __m256i *)lo);
    s[13] = _mm256_loadu_si256((const __m256i *)hi);
}

/* Words 0..7 (or 8..15) of the eight blocks, x[0..7] lane l = block l, stored as each block's eight
 * consecutive words: out[16 l + j] = x[j] lane l. */
__attribute__((target("avx2"))) static void store8_transposed(const __m256i *x, uint32_t *out) {
    const __m256i t0 = _mm256_unpacklo_epi32(x[0], x[1]), t1 = _mm256_unpackhi_epi32(x[0], x[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(x[2], x[3]), t3 = _mm256_unpackhi_epi32(x[2], x[3]);
    const __m256i t4 = _mm256_unpacklo_epi32(x[4], x[5]), t5 = _mm256_unpackhi_epi32(x[4], x[5]);
    const __m256i t6 = _mm256_unpacklo_epi32(x[6], x[7]), t7 = _mm256_unpackhi_epi32(x[6], x[7]);
    /* u0: blocks 0 | 4, words 0-3 (or 4-7 for u4); u1: blocks 1 | 5; u2: 2 | 6; u3: 3 | 7 */
    const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    const __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
    const __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
    _mm256_storeu_si256((__m256i *)(out + 0 * 16), _mm256_permute2x128_si256(u0, u4, 0x20));
    _mm256_storeu_si256((__m256i *)(out + 1 * 16), _mm256_permute2x128_si256(u1, u5, 0x20));
    _mm256_storeu_si256((__m256i *)(out + 2 * 16), _mm256_permute2x128_si256(u2, u6, 0x20));
    _mm256_storeu_si256((__m256i *)(out + 3 * 16), _mm256_permute2x128_si256(u3, u7, 0x20));
    _mm256_storeu_si256((__m256i *)(out + 4 * 16), _mm256_permute2x128_si256(u0, u4, 0x31));
    _mm256_storeu_si256((__m256i *)(out + 5 * 16), _mm256_permute2x128_si256(u1, u5, 0x31));
    _mm256_storeu_si256((__m256i *)(out + 6 * 16), _mm256_permute2x128_si256(u2, u6, 0x31));
    _mm256_storeu_si256((__m256i *)(out + 7 * 16), _mm256_permute2x128_si256(u3, u7, 0x31));
}

/* Eight blocks from counter into out: their input states (x[i] = word i of blocks 0..7, lane l =
 * block l), twenty rounds, the final addition, the transposed store. */
#define QRV8(a, b, c, d)                                                                           \
    x[a] = _mm256_add_epi32(x[a], x[b]);                                                           \
    x[d] = _mm256_shuffle_epi8(_mm256_xor_si256(x[d], x[a]), rot16);                               \
    x[c] = _mm256_add_epi32(x[c], x[d]); x[b] = ROTV8(_mm256_xor_si256(x[b], x[c]), 12);           \
    x[a] = _mm256_add_epi32(x[a], x[b]);                                                           \
    x[d] = _mm256_shuffle_epi8(_mm256_xor_si256(x[d], x[a]), rot8);                                \
    x[c] = _mm256_add_epi32(x[c], x[d]); x[b] = ROTV8(_mm256_xor_si256(x[b], x[c]), 7)
__attribute__((target("avx2"))) static void blocks8_avx2(const ldp_chacha *g, uint64_t counter,
                                                         uint32_t *out) {
    /* rotate each 32-bit lane left by 16 / by 8: byte permutations within the lane */
    const __m256i rot16 = _mm256_set_epi8(13, 12, 15, 14, 9, 8, 11, 10, 5, 4, 7, 6, 1, 0, 3, 2,
                                          13, 12, 15, 14, 9, 8, 11, 10, 5, 4, 7, 6, 1, 0, 3, 2);
    const __m256i rot8 = _mm256_set_epi8(14, 13, 12, 15, 10, 9, 8, 11, 6, 5, 4, 7, 2, 1, 0, 3,
                                         14, 13, 12, 15, 10, 9, 8, 11, 6, 5, 4, 7, 2, 1, 0, 3);
    __m256i s[16], x[16];
    int i;
    blocks8_input(g, counter, s);
    for (i = 0; i < 16; i++) x[i] = s[i];
    for (i = 0; i < 10; i++) {
        QRV8(0, 4, 8, 12); QRV8(1, 5, 9, 13); QRV8(2, 6, 10, 14); QRV8(3, 7, 11, 15);
        QRV8(0, 5, 10, 15); QRV8(1, 6, 11, 12); QRV8(2, 7, 8, 13); QRV8(3, 4, 9, 14);
    }
    for (i = 0; i < 16; i++) x[i] = _mm256_add_epi32(x[i], s[i]);
    store8_transposed(x, out);
    store8_transposed(x + 8, out + 8);
}

#if defined(LDP_CHACHA_AVX512)
#define QRV16(a, b, c, d)                                                                          \
    x[a] = _mm512_add_epi32(x[a], x[b]); x[d] = _mm512_rol_epi32(_mm512_xor_si512(x[d], x[a]), 16); \
    x[c] = _mm512_add_epi32(x[c], x[d]); x[b] = _mm512_rol_epi32(_mm512_xor_si512(x[b], x[c]), 12); \
    x[a] = _mm512_add_epi32(x[a], x[b]); x[d] = _mm512_rol_epi32(_mm512_xor_si512(x[d], x[a]), 8);  \
    x[c] = _mm512_add_epi32(x[c], x[d]); x[b] = _mm512_rol_epi32(_mm512_xor_si512(x[b], x[c]), 7)

/* Sixteen blocks with AVX-512F: one block per 32-bit lane of a 512-bit register, every rotation one
 * instruction (vprold), so each instruction does twice the AVX2 path's work. The input states are
 * built directly (only the counter words differ between blocks), and the lanes are written back
 * by a 16 x 16 transpose in registers: 32-bit and 64-bit unpacks give, per 128-bit lane j, four
 * consecutive words of block 4j + r; two rounds of 128-bit shuffles gather each block's four. */
__attribute__((target("avx512f"))) static void blocks16_avx512(const ldp_chacha *g, uint64_t counter,
                                                              uint32_t *out) {
    uint32_t in[16], lo[16], hi[16];
    __m512i s[16], x[16], t[16], v[16];
    int i, r, j;
    block_input(g, counter, in);
    counter_words(counter, 16, lo, hi);
    for (i = 0; i < 16; i++) s[i] = _mm512_set1_epi32((int)in[i]);
    s[12] = _mm512_loadu_si512((const void *)lo);
    s[13] = _mm512_loadu_si512((const void *)hi);
    for (i = 0; i < 16; i++) x[i] = s[i];
    for (i = 0; i < 10; i++) {
        QRV16(0, 4, 8, 12); QRV16(1, 5, 9, 13); QRV16(2, 6, 10, 14); QRV16(3, 7, 11, 15);
        QRV16(0, 5, 10, 15); QRV16(1, 6, 11, 12); QRV16(2, 7, 8, 13); QRV16(3, 4, 9, 14);
    }
    for (i = 0; i < 16; i++) x[i] = _mm512_add_epi32(x[i], s[i]);
    for (i = 0; i < 16; i += 2) { /* per 128-bit lane: [a0 b0 a1 b1], [a2 b2 a3 b3] */
        t[i] = _mm512_unpacklo_epi32(x[i], x[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(x[i], x[i + 1]);
    }
    for (i = 0; i < 16; i += 4) { /* v[i + r], 128-bit lane j: words i..i+3 of block 4j + r */
        v[i + 0] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        v[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        v[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        v[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (r = 0; r < 4; r++) {
        /* p: lanes 0-1 of words 0-3 and 4-7; q: the same of words 8-11 and 12-15; then 2-3 */
        const __m512i p = _mm512_shuffle_i32x4(v[r], v[4 + r], 0x44);
        const __m512i q = _mm512_shuffle_i32x4(v[8 + r], v[12 + r], 0x44);
        const __m512i p2 = _mm512_shuffle_i32x4(v[r], v[4 + r], 0xEE);
        const __m512i q2 = _mm512_shuffle_i32x4(v[8 + r], v[12 + r], 0xEE);
        const __m512i blk[4] = {_mm512_shuffle_i32x4(p, q, 0x88), _mm512_shuffle_i32x4(p, q, 0xDD),
                                _mm512_shuffle_i32x4(p2, q2, 0x88), _mm512_shuffle_i32x4(p2, q2, 0xDD)};
        for (j = 0; j < 4; j++) _mm512_storeu_si512((void *)(out + 16 * (4 * j + r)), blk[j]);
    }
}
#endif
#endif

void ldp_chacha_refill(ldp_chacha *g) {
    int i;
#if defined(LDP_CHACHA_AVX512)
    if (__builtin_cpu_supports("avx512f")) {
        blocks16_avx512(g, g->counter, g->block);
    } else
#endif
#if defined(LDP_CHACHA_AVX2)
    if (__builtin_cpu_supports("avx2")) {
        for (i = 0; i < LDP_CHACHA_WORDS / 128; i++)
            blocks8_avx2(g, g->counter + 8u * (uint64_t)i, g->block + 128 * i);
    } else
#endif
    {
        for (i = 0; i < LDP_CHACHA_WORDS / 64; i++)
            blocks4(g, g->counter + 4u * (uint64_t)i, g->block + 64 * i);
    }
    g->counter += LDP_CHACHA_WORDS / 16;
    g->used = 0;
}

uint32_t ldp_next_u32(ldp_chacha *g) { return ldp_next_u32_inline(g); }

uint64_t ldp_next_u64(ldp_chacha *g) { return ldp_next_u64_inline(g); }

unsigned ldp_next_bit(ldp_chacha *g) {
    unsigned b;
    if (g->bits == 0) {
        g->bitbuf = ldp_next_u64(g);
        g->bits = 64;
    }
    b = (unsigned)(g->bitbuf & 1u);
    g->bitbuf >>= 1;
    g->bits--;
    return b;
}

void ldp_fill_bytes(ldp_chacha *g, uint8_t *out, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint32_t w = ldp_next_u32(g);
        int k;
        for (k = 0; k < 4 && i < n; k++, i++) out[i] = (uint8_t)(w >> (8 * k));
    }
}
