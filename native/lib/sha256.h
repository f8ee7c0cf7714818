/* SHA-256 for the bundle's array digests: the CPU's SHA extensions where present, libsodium
 * elsewhere; the same digest either way (sha256.c). Internal, not exported. */
#ifndef LDP_SHA256_H
#define LDP_SHA256_H

#include <stddef.h>
#include <stdint.h>

/* SHA-256 of data[0..n) into out. Thread-safe. */
void ldp_sha256(const uint8_t *data, size_t n, uint8_t out[32]);

/* libsodium's SHA-256 always (the reference the tests compare ldp_sha256 with). */
void ldp_sha256_portable(const uint8_t *data, size_t n, uint8_t out[32]);

/* 1 if ldp_sha256 runs on the CPU's SHA extensions in this build on this CPU, else 0. */
int ldp_sha256_hardware(void);

#endif
