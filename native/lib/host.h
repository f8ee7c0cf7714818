/* Entry points for a host binding that embeds libldptext's sources and verifies bundles itself:
 * the Python extension ldptext._native (native/module.c). NOT part of the public ABI
 * (include/ldptext.h): not exported from libldptext.so (-fvisibility=hidden, no LDP_API), and no C
 * application should call them.
 *
 * Why they exist: the Python runtime verifies a bundle with its own loader (sdk/ldptext/bundle.py:
 * signature, key trust, the SHA-256 of every array, the canonical header) before it builds a
 * Sanitizer, and then hands the C library the verified arrays. Hashing 46 MiB a second time would
 * double the load cost for nothing, so ldp_host_bundle_adopt skips exactly the checks that loader
 * has done (signature, trust, hashes) and runs every other check ldp_bundle_open runs on the
 * arrays (manifest format and mechanism, dtypes and shapes against the manifest, boolean values,
 * the SanText tables' invariants, the tokenizer). A C host always goes through ldp_bundle_open,
 * where nothing is skipped. */
#ifndef LDP_HOST_H
#define LDP_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "ldptext.h"
#include "santext_sampler.h"

/* One verified array, borrowed from the host (the host keeps its memory alive and unmodified for
 * the bundle's lifetime). dtype: the safetensors code ("I8", "F32", "BOOL", ...). */
typedef struct {
    const char *name;
    size_t name_len;
    const char *dtype;
    int ndim;
    const uint64_t *shape;
    const void *data;
    size_t nbytes;
} ldp_host_array;

/* A bundle over arrays the host has verified against the signed manifest `manifest_json` (its
 * exact canonical bytes, copied). Every array the manifest declares must be given, with the
 * declared dtype and shape, and no other. Returns LDP_OK or the same codes ldp_bundle_open would
 * return for the checks it runs. The data is borrowed: close the bundle before releasing it.
 * The sampler reads its own copy of emb_q (rows on cache lines, bundle.c align_rows; kept in place
 * only if that copy cannot be allocated), so a host whose emb_q is a read-only file mapping may
 * release that range's resident pages afterwards (the Python runtime does: library.py). */
int ldp_host_bundle_adopt(const ldp_host_array *arrays, size_t n_arrays,
                          const char *manifest_json, size_t manifest_len, ldp_bundle **out);

/* A sanitizer keyed with `key` (32 bytes from the host's CSPRNG, or for seeded = 1 the host's
 * seeded-mode key: SHA-256("ldptext seeded mode v1:" + decimal seed), which a forked child derives
 * its own stream from, as ldp_sanitizer_new_seeded does). */
int ldp_host_sanitizer_new(const ldp_bundle *bundle, const uint8_t key[32], int seeded,
                           ldp_sanitizer **out);

/* Where a batch failed: the document and, for LDP_E_INPUT_ID, the token position inside it. */
typedef struct {
    size_t doc;
    size_t token;
} ldp_host_batch_error;

/* The output of one batch: the sanitized texts one after another in `text` (offsets[i] ..
 * offsets[i + 1] is document i, no separators, no NUL), n_tokens[i] the tokens of document i.
 * Owned by the caller: ldp_host_batch_free. */
typedef struct {
    char *text;
    size_t *offsets;  /* n_docs + 1 */
    size_t *n_tokens; /* n_docs */
} ldp_host_batch;

/* Tokenize every document, check every id, sample all tokens of the batch in ONE sampler call
 * (over the concatenated ids, in document order: the same draws as the Python runtime's batch),
 * detokenize each document. Nothing is returned on failure: *err says where it failed (the
 * document and, for LDP_E_INPUT_ID, the token). Touches no host object: a host may call it without
 * its interpreter lock. */
int ldp_host_sanitize_batch(ldp_sanitizer *s, const char *const *texts, const size_t *lens,
                            size_t n_docs, ldp_host_batch *result, ldp_host_batch_error *err);
void ldp_host_batch_free(ldp_host_batch *result);

/* Whether the sanitizer was created seeded (its output is reproducible, not private). */
int ldp_host_sanitizer_seeded(const ldp_sanitizer *s);
/* The bundle's sampler table (for the host's distance helper). */
const ldp_santext_table *ldp_host_bundle_table(const ldp_bundle *b);

#endif
