/* Fuzz target: ldp_bundle_open_memory on hostile bytes, then the sanitizer on whatever opens.
 *   first byte even: the rest is a bundle file (seeds: the tiny SanText and SanText+ bundles);
 *   first byte odd:  the rest patches the tiny tables (pairs of offset, value), which are then
 *                    signed with the trusted key, so the semantic checks and the sampler see
 *                    signed-but-hostile tables; bit 2 chooses SanText+, bit 3 the compact form
 *                    (uint16 head ids, uint8 alias slots, float32 exponents), bits 5-6 the number
 *                    of tail clusters (0: none, as an older bundle), whose arrays are patchable too.
 * Nothing may crash; an accepted bundle must sample only outputs (or the input for a kept row). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bundle_writer.h"
#include "ldp_internal.h"
#include "ldptext.h"

static uint8_t PK[32];

static void exercise(const uint8_t *data, size_t size) {
    ldp_bundle *b = NULL;
    ldp_sanitizer *s = NULL;
    int32_t xs[64], ys[64];
    char *out = NULL;
    size_t len, i;
    if (ldp_bundle_open_memory(data, size, (const uint8_t (*)[32])PK, 1, &b) != LDP_OK) return;
    if (ldp_sanitizer_new_seeded(b, 1, &s) != LDP_OK) abort();
    if (ldp_sanitize(s, "alpha Beta, gamma! zzz", 22, &out, &len, NULL) == LDP_OK) ldp_free(out);
    for (i = 0; i < 64; i++) xs[i] = (int32_t)(i % (size_t)b->table.n_rows);
    if (ldp_sample_ids(s, xs, ys, 64) == LDP_OK) {
        for (i = 0; i < 64; i++) {
            int32_t j, ok = ys[i] == xs[i] && b->table.keep_row[xs[i]];
            for (j = 0; j < b->table.n_outputs && !ok; j++) ok = ys[i] == b->table.outputs[j];
            if (!ok) abort();
        }
    }
    ldp_sanitizer_free(s);
    ldp_bundle_close(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (PK[0] == 0 && PK[1] == 0) {
        uint8_t sk[64];
        bw_test_keys(PK, sk, 0);
    }
    if (size == 0) return 0;
    if ((data[0] & 1) == 0) {
        exercise(data + 1, size - 1);
    } else {
        /* patchable: the arrays that keep sampling fast whatever their values (not the alias
         * thresholds, gammas, scales or floors: hostile values there can make a signed bundle
         * sample slowly, which the format does not forbid), and the tokenizer JSON */
        static const struct {
            size_t off, len;
        } regions[] = {
            {offsetof(bw_tables, emb_q), sizeof(((bw_tables *)0)->emb_q)},
            {offsetof(bw_tables, outputs), sizeof(((bw_tables *)0)->outputs)},
            {offsetof(bw_tables, head_ids), sizeof(((bw_tables *)0)->head_ids)},
            {offsetof(bw_tables, alias_index), sizeof(((bw_tables *)0)->alias_index)},
            {offsetof(bw_tables, keep_row), 3 * BW_V},
            {offsetof(bw_tables, tokenizer_json), 600},
            {offsetof(bw_tables, tail_cluster), sizeof(((bw_tables *)0)->tail_cluster)},
            {offsetof(bw_tables, cluster_gamma), sizeof(((bw_tables *)0)->cluster_gamma)},
        };
        bw_tables t;
        bw_spec spec;
        bw_compact_tables compact;
        uint8_t *bundle = NULL;
        size_t blen = 0, i;
        bw_tiny_tables(&t, (data[0] & 2) != 0);
        t.n_clusters = (data[0] >> 4) & 3; /* 0..3 */
        for (i = 0; i < BW_V; i++) t.tail_cluster[i] = (uint8_t)(t.n_clusters ? i % (size_t)t.n_clusters : 0);
        for (i = 1; i + 2 < size; i += 3) {
            size_t r = data[i] % (sizeof regions / sizeof regions[0]);
            size_t at = regions[r].off + data[i + 1] % regions[r].len;
            ((uint8_t *)&t)[at] = data[i + 2];
        }
        t.tokenizer_json[sizeof t.tokenizer_json - 1] = '\0';
        bw_tiny_spec(&spec, &t);
        if (data[0] & 4) bw_compact(&spec, &t, &compact); /* narrows the patched values too */
        if (bw_write(&spec, &bundle, &blen) == 0) exercise(bundle, blen);
        free(bundle);
    }
    return 0;
}

void ldp_fuzz_seeds(void (*add)(const uint8_t *, size_t)) {
    int plus;
    for (plus = 0; plus <= 1; plus++) {
        uint8_t *data = NULL, *seed;
        size_t len = 0;
        if (bw_tiny_bundle(plus, &data, &len) != 0) abort();
        seed = (uint8_t *)malloc(len + 1);
        if (seed == NULL) abort();
        seed[0] = 0;
        memcpy(seed + 1, data, len);
        add(seed, len + 1);
        free(seed);
        free(data);
    }
    {
        static const uint8_t patch[] = {1, 0, 3, 0x7F, 2, 5, 3, 3, 1, 1, 4, 9, 0};
        static const uint8_t patch_plus[] = {3, 2, 1, 0, 4, 2, 1, 5, 7, 0};
        static const uint8_t patch_compact[] = {7, 2, 1, 0, 3, 3, 1, 5, 7, 0};
        add(patch, sizeof patch);
        add(patch_plus, sizeof patch_plus);
        add(patch_compact, sizeof patch_compact);
    }
}
