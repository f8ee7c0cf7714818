/* ChaCha20 stream used as the SDK's cryptographically secure random generator (RFC 8439 block
 * function, 256-bit key, 64-bit block counter, 64-bit stream id).
 *
 * The generator never reads the OS itself: Python passes 32 bytes from os.urandom() (or, in the
 * explicit seeded mode for tests, a key derived from the seed). Fork safety is handled by the
 * caller, which rekeys in the child (see sdk/ldptext/rng.py). */
#ifndef LDPTEXT_CHACHA20_H
#define LDPTEXT_CHACHA20_H

#include <stdint.h>
#include <stddef.h>

/* Keystream words buffered per refill: 16 blocks, one per 32-bit lane of an AVX-512 register (two
 * AVX2 passes of 8, four SSE2 or scalar passes of 4). The stream is the same whatever the buffer
 * size: consecutive blocks, consumed in order. */
#define LDP_CHACHA_WORDS 256

typedef struct {
    uint32_t key[8];
    uint64_t counter;   /* block counter */
    uint64_t stream;    /* nonce */
    uint32_t block[LDP_CHACHA_WORDS]; /* current keystream: 8 consecutive blocks */
    unsigned used;      /* words of block already consumed (LDP_CHACHA_WORDS = empty) */
    uint64_t bitbuf;    /* buffered random bits for single-bit draws */
    unsigned bits;      /* number of valid bits in bitbuf */
} ldp_chacha;

/* RFC 8439 §2.3 block function on an arbitrary 16-word input state. */
void ldp_chacha20_block(const uint32_t in[16], uint32_t out[16]);

void ldp_chacha_init(ldp_chacha *g, const uint8_t key[32], uint64_t stream);
uint32_t ldp_next_u32(ldp_chacha *g);
uint64_t ldp_next_u64(ldp_chacha *g);

/* Refills g->block with the next eight keystream blocks (what the inline draws below call). */
void ldp_chacha_refill(ldp_chacha *g);

/* The same draws as ldp_next_u32 / ldp_next_u64, inlined into the samplers: they take one word
 * at a time, and a call into this translation unit per word cost ~4 % of SanText sampling time. */
static inline uint32_t ldp_next_u32_inline(ldp_chacha *g) {
    if (g->used >= LDP_CHACHA_WORDS) ldp_chacha_refill(g);
    return g->block[g->used++];
}

static inline uint64_t ldp_next_u64_inline(ldp_chacha *g) {
    uint64_t lo = ldp_next_u32_inline(g);
    return lo | ((uint64_t)ldp_next_u32_inline(g) << 32);
}

unsigned ldp_next_bit(ldp_chacha *g);
void ldp_fill_bytes(ldp_chacha *g, uint8_t *out, size_t n);

#endif
