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

typedef struct {
    uint32_t key[8];
    uint64_t counter;   /* block counter */
    uint64_t stream;    /* nonce */
    uint32_t block[64]; /* current keystream: 4 consecutive blocks */
    unsigned used;      /* 32-bit words of block already consumed (64 = empty) */
    uint64_t bitbuf;    /* buffered random bits for single-bit draws */
    unsigned bits;      /* number of valid bits in bitbuf */
} ldp_chacha;

/* RFC 8439 §2.3 block function on an arbitrary 16-word input state. */
void ldp_chacha20_block(const uint32_t in[16], uint32_t out[16]);

void ldp_chacha_init(ldp_chacha *g, const uint8_t key[32], uint64_t stream);
uint32_t ldp_next_u32(ldp_chacha *g);
uint64_t ldp_next_u64(ldp_chacha *g);
unsigned ldp_next_bit(ldp_chacha *g);
void ldp_fill_bytes(ldp_chacha *g, uint8_t *out, size_t n);

#endif
