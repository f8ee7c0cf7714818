/* ldp_bundle_open / ldp_bundle_open_memory: a valid bundle opens; every corruption, every
 * signature or trust problem and every broken SanText invariant is refused with its own code. */
#define _GNU_SOURCE 1
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "bundle_writer.h"
#include "ldp_internal.h"
#include "ldptext.h"
#include "testing.h"

static uint8_t PK[32], SK[64], PK2[32], SK2[64];
static char tmpdir[256];

static int open_mem(const uint8_t *data, size_t len) {
    ldp_bundle *b = NULL;
    int rc = ldp_bundle_open_memory(data, len, (const uint8_t (*)[32])PK, 1, &b);
    if ((rc == LDP_OK) != (b != NULL)) return 12345; /* *out set exactly on success */
    ldp_bundle_close(b);
    return rc;
}

static long find(const uint8_t *data, size_t len, const char *needle) {
    size_t n = strlen(needle), i;
    for (i = 0; i + n <= len; i++)
        if (memcmp(data + i, needle, n) == 0) return (long)i;
    return -1;
}

static uint64_t header_len(const uint8_t *data) {
    uint64_t v = 0;
    int i;
    for (i = 7; i >= 0; i--) v = (v << 8) | data[i];
    return v;
}

/* a tiny bundle with one change to its tables / manifest, re-signed with the trusted key */
typedef void (*mutator)(bw_tables *t, bw_spec *s);

static int open_mutated(int plus, mutator f) {
    bw_tables t;
    bw_spec s;
    uint8_t *data = NULL;
    size_t len = 0;
    int rc;
    bw_tiny_tables(&t, plus);
    bw_tiny_spec(&s, &t);
    f(&t, &s);
    if (bw_write(&s, &data, &len) != 0) return 54321;
    rc = open_mem(data, len);
    free(data);
    return rc;
}

static void test_valid_bundles_open(void) {
    int plus;
    for (plus = 0; plus <= 1; plus++) {
        uint8_t *data;
        size_t len;
        ldp_bundle *b = NULL;
        REQUIRE(bw_tiny_bundle(plus, &data, &len) == 0);
        CHECK_RC(ldp_bundle_open_memory(data, len, (const uint8_t (*)[32])PK, 1, &b), LDP_OK);
        REQUIRE(b != NULL);
        CHECK(b->mechanism == (plus ? LDP_MECH_SANTEXT_PLUS : LDP_MECH_SANTEXT));
        CHECK(b->epsilon == 2.0 && b->table.n_rows == BW_V && b->table.head_size == BW_K);
        ldp_bundle_close(b);
        free(data);
    }
}

static void test_metadata_order_is_the_one_freedom(void) {
    bw_tables t;
    bw_spec s;
    uint8_t *data;
    size_t len;
    bw_tiny_tables(&t, 0);
    bw_tiny_spec(&s, &t);
    s.reverse_metadata = 1;
    REQUIRE(bw_write(&s, &data, &len) == 0);
    CHECK_RC(open_mem(data, len), LDP_OK);
    free(data);
}

static void test_trust(void) {
    uint8_t *data;
    size_t len;
    ldp_bundle *b = NULL;
    const uint8_t keys2[2][32] = {{0}, {0}};
    uint8_t two[2][32];
    REQUIRE(bw_tiny_bundle(0, &data, &len) == 0);
    CHECK_RC(ldp_bundle_open_memory(data, len, NULL, 0, &b), LDP_E_UNTRUSTED_KEY);
    CHECK_RC(ldp_bundle_open_memory(data, len, (const uint8_t (*)[32])PK2, 1, &b),
             LDP_E_UNTRUSTED_KEY);
    CHECK_RC(ldp_bundle_open_memory(data, len, keys2, 2, &b), LDP_E_UNTRUSTED_KEY);
    memcpy(two[0], PK2, 32);
    memcpy(two[1], PK, 32);
    CHECK_RC(ldp_bundle_open_memory(data, len, (const uint8_t (*)[32])two, 2, &b), LDP_OK);
    ldp_bundle_close(b);
    CHECK_RC(ldp_bundle_open_memory(data, len, NULL, 1, &b), LDP_E_ARG);
    CHECK_RC(ldp_bundle_open_memory(data, len, (const uint8_t (*)[32])PK, 1, NULL), LDP_E_ARG);
    free(data);
}

static void unsigned_bundle(bw_tables *t, bw_spec *s) { (void)t; s->sign = 0; }
static void stranger_signs(bw_tables *t, bw_spec *s) { (void)t; memcpy(s->sk, SK2, 64); }
static void signature_only(bw_tables *t, bw_spec *s) { (void)t; s->signature_only = 1; }
static void extra_metadata(bw_tables *t, bw_spec *s) { (void)t; s->extra_metadata = 1; }
static void raw_manifest(bw_tables *t, bw_spec *s) { (void)t; s->raw_manifest = 1; }
static void format_tag(bw_tables *t, bw_spec *s) {
    (void)t;
    s->format_fields = "\"format\":\"safetensors\",\"format_version\":1";
}
static void format_version(bw_tables *t, bw_spec *s) {
    (void)t;
    s->format_fields = "\"format\":\"ldptext-bundle\",\"format_version\":2";
}
static void format_version_float(bw_tables *t, bw_spec *s) {
    (void)t;
    s->format_fields = "\"format\":\"ldptext-bundle\",\"format_version\":1.0";
}
static void mechanism_dpbart(bw_tables *t, bw_spec *s) { (void)t; s->mechanism = "dpbart"; }
static void mechanism_unknown(bw_tables *t, bw_spec *s) { (void)t; s->mechanism = "rappor"; }

static void test_signature_and_manifest_checks(void) {
    CHECK_RC(open_mutated(0, unsigned_bundle), LDP_E_UNSIGNED);
    CHECK_RC(open_mutated(0, stranger_signs), LDP_E_UNTRUSTED_KEY);
    CHECK_RC(open_mutated(0, signature_only), LDP_E_SIGNATURE_INCOMPLETE);
    CHECK_RC(open_mutated(0, extra_metadata), LDP_E_METADATA_FIELDS);
    CHECK_RC(open_mutated(0, raw_manifest), LDP_E_MANIFEST_NONCANONICAL);
    CHECK_RC(open_mutated(0, format_tag), LDP_E_FORMAT_TAG);
    CHECK_RC(open_mutated(0, format_version), LDP_E_FORMAT_VERSION);
    CHECK_RC(open_mutated(0, format_version_float), LDP_E_FORMAT_VERSION);
    CHECK_RC(open_mutated(0, mechanism_dpbart), LDP_E_MECHANISM);
    CHECK_RC(open_mutated(0, mechanism_unknown), LDP_E_MECHANISM);
}

static void test_edits_of_the_file(void) {
    uint8_t *data, *copy;
    size_t len;
    long at;
    uint64_t hlen;
    REQUIRE(bw_tiny_bundle(0, &data, &len) == 0);
    copy = (uint8_t *)malloc(len + 1);
    REQUIRE(copy != NULL);
    hlen = header_len(data);
#define FRESH() memcpy(copy, data, len)
    /* header length */
    FRESH();
    copy[0] = 1;
    memset(copy + 1, 0, 7);
    CHECK_RC(open_mem(copy, len), LDP_E_HEADER_LENGTH);
    FRESH();
    copy[3] = 0x01; /* 16 MiB + ... */
    CHECK_RC(open_mem(copy, len), LDP_E_HEADER_LENGTH);
    FRESH();
    copy[0] = (uint8_t)((hlen + len) & 0xFF);
    copy[1] = (uint8_t)(((hlen + len) >> 8) & 0xFF);
    CHECK_RC(open_mem(copy, len), LDP_E_HEADER_INCOMPLETE);
    FRESH();
    copy[8] = '[';
    CHECK_RC(open_mem(copy, len), LDP_E_HEADER_JSON);
    /* signature: a changed character (still canonical base64) no longer verifies */
    FRESH();
    at = find(copy, len, "\"ldptext.signature\":\"");
    REQUIRE(at > 0);
    at += (long)strlen("\"ldptext.signature\":\"") + 5;
    copy[at] = copy[at] == 'A' ? 'B' : 'A';
    CHECK_RC(open_mem(copy, len), LDP_E_BAD_SIGNATURE);
    /* public key: the unused low bits of its last base64 digit set -> not canonical */
    FRESH();
    at = find(copy, len, "\"ldptext.public_key\":\"");
    REQUIRE(at > 0);
    at += (long)strlen("\"ldptext.public_key\":\"") + 42;
    copy[at] = (uint8_t)(copy[at] == 'B' ? 'C' : (copy[at] ^ 1));
    CHECK_RC(open_mem(copy, len), LDP_E_SIGNATURE_MALFORMED);
    /* the manifest: epsilon changed -> the signature no longer covers it */
    FRESH();
    at = find(copy, len, "\\\"epsilon\\\":2.0");
    REQUIRE(at > 0);
    copy[at + (long)strlen("\\\"epsilon\\\":")] = '3';
    CHECK_RC(open_mem(copy, len), LDP_E_BAD_SIGNATURE);
    /* a header dtype edit */
    FRESH();
    at = find(copy, len, "\"alias_index\":{\"dtype\":\"U16\"");
    REQUIRE(at > 0);
    copy[at + (long)strlen("\"alias_index\":{\"dtype\":\"")] = 'I';
    CHECK_RC(open_mem(copy, len), LDP_E_ARRAY_DTYPE_SHAPE);
    /* padding: JSON whitespace, but not the writer's */
    FRESH();
    if (copy[8 + hlen - 1] == ' ') {
        copy[8 + hlen - 1] = '\n';
        CHECK_RC(open_mem(copy, len), LDP_E_HEADER_NONCANONICAL);
    }
    /* array data: a flipped bit in the last array, then swapped equal-size arrays */
    FRESH();
    copy[len - 1] ^= 0x40;
    CHECK_RC(open_mem(copy, len), LDP_E_ARRAY_HASH);
    /* a trailing byte, a missing byte */
    FRESH();
    copy[len] = 0;
    CHECK_RC(open_mem(copy, len + 1), LDP_E_TRAILING_DATA);
    CHECK_RC(open_mem(copy, len - 1), LDP_E_TRUNCATED);
    CHECK_RC(open_mem(copy, 7), LDP_E_TRUNCATED);
    CHECK_RC(open_mem(copy, 0), LDP_E_FILE_EMPTY);
#undef FRESH
    free(copy);
    free(data);
}

static void test_every_single_bit_flip_and_truncation_is_refused(void) {
    int plus;
    for (plus = 0; plus <= 1; plus++) {
        uint8_t *data;
        size_t len, i;
        int accepted = 0, bit;
        REQUIRE(bw_tiny_bundle(plus, &data, &len) == 0);
        for (i = 0; i < len; i++) {
            /* header: three bits of every byte; data (hashed): one bit of every byte */
            for (bit = (int)(i % 8); bit < 8; bit += (i < 8 + header_len(data)) ? 3 : 8) {
                int rc;
                data[i] ^= (uint8_t)(1u << bit);
                rc = open_mem(data, len);
                data[i] ^= (uint8_t)(1u << bit);
                if (rc == LDP_OK) {
                    fprintf(stderr, "  accepted: byte %zu bit %d flipped\n", i, bit);
                    accepted++;
                }
            }
        }
        CHECK(accepted == 0);
        for (i = 0; i < len; i++)
            if (open_mem(data, i) == LDP_OK) accepted++;
        CHECK(accepted == 0);
        free(data);
    }
}

static void test_random_multi_byte_corruptions_are_refused(void) {
    uint8_t *data, *copy;
    size_t len, i;
    uint64_t s = 42;
    int accepted = 0;
    REQUIRE(bw_tiny_bundle(1, &data, &len) == 0);
    copy = (uint8_t *)malloc(len);
    REQUIRE(copy != NULL);
    for (i = 0; i < 3000; i++) {
        int k, changes;
        memcpy(copy, data, len);
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        changes = 1 + (int)((s >> 60) & 7);
        for (k = 0; k < changes; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            copy[(s >> 33) % len] = (uint8_t)(s >> 17);
        }
        if (memcmp(copy, data, len) != 0 && open_mem(copy, len) == LDP_OK) accepted++;
    }
    CHECK(accepted == 0);
    free(copy);
    free(data);
}

/* ---- signed but broken SanText tables ---------------------------------------------------------- */

static void gamma_negative(bw_tables *t, bw_spec *s) { (void)s; t->accept_gamma[3][1] = -0.5; }
static void gamma_nan(bw_tables *t, bw_spec *s) { (void)s; t->accept_gamma[3][1] = NAN; }
static void gamma_not_normalised(bw_tables *t, bw_spec *s) {
    (void)s;
    t->accept_gamma[2][0] = 0.1;
}
static void head_unsorted(bw_tables *t, bw_spec *s) {
    int32_t x = t->head_ids[4][0];
    (void)s;
    t->head_ids[4][0] = t->head_ids[4][1];
    t->head_ids[4][1] = x;
}
static void head_out_of_range(bw_tables *t, bw_spec *s) { (void)s; t->head_ids[4][1] = BW_V; }
static void head_outside_outputs(bw_tables *t, bw_spec *s) { (void)s; t->head_ids[5][0] = 0; }
static void outputs_unsorted(bw_tables *t, bw_spec *s) {
    (void)s;
    t->outputs[1] = t->outputs[0];
}
static void output_not_valid(bw_tables *t, bw_spec *s) { (void)s; t->valid_input[2] = 0; }
static void alias_out_of_range(bw_tables *t, bw_spec *s) { (void)s; t->alias_index[1][0] = 3; }
static void scale_negative(bw_tables *t, bw_spec *s) { (void)s; t->emb_scale[6] = -1.0f; }
static void floor_infinite(bw_tables *t, bw_spec *s) { (void)s; t->tail_floor[0] = INFINITY; }
static void keep_in_santext(bw_tables *t, bw_spec *s) { (void)s; t->keep_row[3] = 1; }
static void keep_sensitive(bw_tables *t, bw_spec *s) { (void)s; t->keep_row[4] = 1; }
static void bool_two(bw_tables *t, bw_spec *s) { (void)s; t->sensitive[1] = 2; }
static void epsilon_zero(bw_tables *t, bw_spec *s) {
    (void)s;
    t->epsilon = 0.0;
    bw_tiny_manifest(t);
}
static void p_above_one(bw_tables *t, bw_spec *s) {
    (void)s;
    t->p = 1.5;
    bw_tiny_manifest(t);
}
static void tolerance_too_large(bw_tables *t, bw_spec *s) {
    char *at = strstr(t->manifest_extra, "1e-13");
    (void)s;
    memcpy(at, "1e-08", 5);
}
static void head_size_mismatch(bw_tables *t, bw_spec *s) {
    char *at = strstr(t->manifest_extra, "\"head_size\":2");
    (void)s;
    at[strlen("\"head_size\":")] = '3';
}
static void no_params(bw_tables *t, bw_spec *s) {
    char *at = strstr(t->manifest_extra, "\"params\"");
    (void)s;
    memcpy(at, "\"parans\"", 8);
}
static void head_size_float(bw_tables *t, bw_spec *s) {
    char *at = strstr(t->manifest_extra, "\"head_size\":2,");
    size_t n = strlen("\"head_size\":2");
    (void)s;
    memmove(at + n + 2, at + n, strlen(at + n) + 1); /* 2 -> 2.0: a float */
    memcpy(at + n, ".0", 2);
}
static void drop_array(bw_spec *s, const char *name) {
    size_t i;
    for (i = 0; i < s->n_arrays; i++)
        if (strcmp(s->arrays[i].name, name) == 0) {
            s->arrays[i] = s->arrays[--s->n_arrays];
            return;
        }
}
static void no_keep_row(bw_tables *t, bw_spec *s) { (void)t; drop_array(s, "keep_row"); }
static void no_vocab(bw_tables *t, bw_spec *s) { (void)t; drop_array(s, "blob/vocab.json"); }
static void no_tokenizer(bw_tables *t, bw_spec *s) { (void)t; drop_array(s, "blob/tokenizer.json"); }
static void scale_f64(bw_tables *t, bw_spec *s) {
    static double scale[BW_V];
    size_t i;
    (void)t;
    for (i = 0; i < s->n_arrays; i++)
        if (strcmp(s->arrays[i].name, "emb_scale") == 0) {
            s->arrays[i].dtype = "F64";
            s->arrays[i].data = scale;
            s->arrays[i].nbytes = sizeof scale;
        }
}
static void floor_short(bw_tables *t, bw_spec *s) {
    size_t i;
    (void)t;
    for (i = 0; i < s->n_arrays; i++)
        if (strcmp(s->arrays[i].name, "tail_floor") == 0) {
            s->arrays[i].shape[0] = BW_V - 1;
            s->arrays[i].nbytes -= 8;
        }
}
static void empty_tail_with_mass(bw_tables *t, bw_spec *s) {
    size_t i, x;
    t->n_outputs = BW_K; /* outputs = {0, 1}: the tail is empty but its slot keeps mass */
    t->outputs[0] = 0;
    t->outputs[1] = 1;
    for (x = 0; x < BW_V; x++) {
        t->head_ids[x][0] = 0;
        t->head_ids[x][1] = 1;
        t->accept_gamma[x][0] = t->accept_gamma[x][1] = 0.0; /* still normalised */
    }
    for (i = 0; i < s->n_arrays; i++)
        if (strcmp(s->arrays[i].name, "outputs") == 0) {
            s->arrays[i].shape[0] = BW_K;
            s->arrays[i].nbytes = 4 * BW_K;
        }
}
static void bpe_tokenizer(bw_tables *t, bw_spec *s) {
    size_t i;
    static const char bpe[] = "{\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]}}";
    (void)t;
    for (i = 0; i < s->n_arrays; i++)
        if (strcmp(s->arrays[i].name, "blob/tokenizer.json") == 0) {
            s->arrays[i].data = bpe;
            s->arrays[i].nbytes = s->arrays[i].shape[0] = sizeof bpe - 1;
        }
}

/* a trusted signer's wrong numbers over honest tables (the tables realise eps = 2, p = 0.3) */
static void epsilon_relabelled(bw_tables *t, bw_spec *s) {
    (void)s;
    t->epsilon = 3.0; /* the exponents stay those of eps = 2 */
    bw_tiny_manifest(t);
}
static void epsilon_nudged(bw_tables *t, bw_spec *s) {
    (void)s;
    t->epsilon = 2.0 * (1 + 1e-6);
    bw_tiny_manifest(t);
}
static void d_max_understated(bw_tables *t, bw_spec *s) {
    char *at = strstr(t->manifest_extra, "\"d_max\":10.0");
    (void)s;
    memcpy(at + strlen("\"d_max\":"), "1.00", 4); /* 10.0 -> 1.00 (the distances reach 2.5) */
}
static void epsilon0_wrong(bw_tables *t, bw_spec *s) {
    char *at = strstr(t->manifest_extra, "\"epsilon0\":");
    (void)s;
    at[strlen("\"epsilon0\":")] = '2'; /* ln(1/0.3) = 1.20... -> 2.20... */
}
static void p_stated_on_santext(bw_tables *t, bw_spec *s) {
    char *at = strstr(t->manifest_extra, "\"p\":null");
    (void)s;
    memcpy(at, "\"p\":0.50", 8); /* "p":null -> "p":0.50, the same length */
}

static void test_stated_parameters_must_be_what_the_tables_realise(void) {
    CHECK_RC(open_mutated(0, epsilon_relabelled), LDP_E_PARAMETER_MISMATCH);
    CHECK_RC(open_mutated(1, epsilon_relabelled), LDP_E_PARAMETER_MISMATCH);
    CHECK_RC(open_mutated(0, epsilon_nudged), LDP_E_PARAMETER_MISMATCH);
    CHECK_RC(open_mutated(0, d_max_understated), LDP_E_PARAMETER_MISMATCH);
    CHECK_RC(open_mutated(1, epsilon0_wrong), LDP_E_PARAMETER_MISMATCH);
    CHECK_RC(open_mutated(0, p_stated_on_santext), LDP_E_PARAMETER_MISMATCH);
}

static void test_signed_but_inconsistent_tables_are_refused(void) {
    CHECK_RC(open_mutated(0, gamma_negative), LDP_E_TABLE_GAMMA);
    CHECK_RC(open_mutated(0, gamma_nan), LDP_E_TABLE_GAMMA);
    CHECK_RC(open_mutated(0, gamma_not_normalised), LDP_E_TABLE_GAMMA_NORM);
    CHECK_RC(open_mutated(0, head_unsorted), LDP_E_TABLE_HEAD);
    CHECK_RC(open_mutated(0, head_out_of_range), LDP_E_TABLE_HEAD);
    CHECK_RC(open_mutated(1, head_outside_outputs), LDP_E_TABLE_DOMAIN);
    CHECK_RC(open_mutated(0, outputs_unsorted), LDP_E_TABLE_OUTPUTS);
    CHECK_RC(open_mutated(0, output_not_valid), LDP_E_TABLE_DOMAIN);
    CHECK_RC(open_mutated(0, alias_out_of_range), LDP_E_TABLE_ALIAS);
    CHECK_RC(open_mutated(0, scale_negative), LDP_E_TABLE_NONFINITE);
    CHECK_RC(open_mutated(0, floor_infinite), LDP_E_TABLE_NONFINITE);
    CHECK_RC(open_mutated(0, keep_in_santext), LDP_E_TABLE_KEEP);
    CHECK_RC(open_mutated(1, keep_sensitive), LDP_E_TABLE_KEEP);
    CHECK_RC(open_mutated(0, bool_two), LDP_E_BOOL_VALUES);
    CHECK_RC(open_mutated(0, epsilon_zero), LDP_E_EPSILON);
    CHECK_RC(open_mutated(1, p_above_one), LDP_E_P);
    CHECK_RC(open_mutated(0, tolerance_too_large), LDP_E_TOLERANCE);
    CHECK_RC(open_mutated(0, head_size_mismatch), LDP_E_TABLE_HEAD_SIZE);
    CHECK_RC(open_mutated(0, head_size_float), LDP_E_PARAMS);
    CHECK_RC(open_mutated(0, no_params), LDP_E_PARAMS);
    CHECK_RC(open_mutated(0, no_keep_row), LDP_E_MISSING_ARRAY);
    CHECK_RC(open_mutated(0, no_vocab), LDP_E_MISSING_ARRAY);
    CHECK_RC(open_mutated(0, no_tokenizer), LDP_E_MISSING_ARRAY);
    CHECK_RC(open_mutated(0, scale_f64), LDP_E_SCHEMA_DTYPE);
    CHECK_RC(open_mutated(0, floor_short), LDP_E_SCHEMA_SHAPE);
    CHECK_RC(open_mutated(0, empty_tail_with_mass), LDP_E_TABLE_TAIL_MASS);
    CHECK_RC(open_mutated(0, bpe_tokenizer), LDP_E_TOKENIZER_UNSUPPORTED);
}


/* A compact bundle (uint16 head ids, uint8 alias slots, float32 exponents, as precompute writes
 * them when they fit) opens to the same sampler tables as the wide one, and samples the same ids
 * from the same seed; narrow arrays keep every table check. */
static bw_compact_tables C;

/* Two bundles give the same seeded draws for rows 0..6 (7 is <unk>): checked, then the bundles closed. */
static void check_same_draws(ldp_bundle *a, ldp_bundle *b) {
    ldp_sanitizer *sa = NULL, *sb = NULL;
    int32_t xs[400], ya[400], yb[400];
    size_t i;
    for (i = 0; i < 400; i++) xs[i] = (int32_t)(i % (BW_V - 1));
    CHECK_RC(ldp_sanitizer_new_seeded(a, 7, &sa), LDP_OK);
    CHECK_RC(ldp_sanitizer_new_seeded(b, 7, &sb), LDP_OK);
    CHECK_RC(ldp_sample_ids(sa, xs, ya, 400), LDP_OK);
    CHECK_RC(ldp_sample_ids(sb, xs, yb, 400), LDP_OK);
    CHECK(memcmp(ya, yb, sizeof ya) == 0);
    ldp_sanitizer_free(sa);
    ldp_sanitizer_free(sb);
    ldp_bundle_close(a);
    ldp_bundle_close(b);
}

static void test_compact_bundle_equals_wide(void) {
    int plus;
    for (plus = 0; plus <= 1; plus++) {
        bw_tables t;
        bw_spec s;
        uint8_t *wide = NULL, *compact = NULL;
        size_t wide_len = 0, compact_len = 0, i;
        ldp_bundle *bw = NULL, *bc = NULL;
        bw_tiny_tables(&t, plus);
        bw_tiny_spec(&s, &t);
        REQUIRE(bw_write(&s, &wide, &wide_len) == 0);
        bw_compact(&s, &t, &C);
        REQUIRE(bw_write(&s, &compact, &compact_len) == 0);
        CHECK(compact_len < wide_len);
        CHECK_RC(ldp_bundle_open_memory(wide, wide_len, (const uint8_t (*)[32])PK, 1, &bw), LDP_OK);
        CHECK_RC(ldp_bundle_open_memory(compact, compact_len, (const uint8_t (*)[32])PK, 1, &bc), LDP_OK);
        REQUIRE(bw != NULL && bc != NULL);
        /* the compact tables are read where they are stored: no widened copy */
        CHECK(bw->table.head_ids != NULL && bw->table.head_ids_u16 == NULL);
        CHECK(bc->table.head_ids == NULL && bc->table.alias_index == NULL &&
              bc->table.accept_gamma == NULL);
        CHECK(bc->table.head_ids_u16 == (const uint16_t *)ldp_bundle_array(bc, "head_ids")->data);
        CHECK(bc->table.alias_index_u8 == ldp_bundle_array(bc, "alias_index")->data);
        CHECK(bc->table.accept_gamma_f32 == (const float *)ldp_bundle_array(bc, "accept_gamma")->data);
        for (i = 0; i < (size_t)BW_V * BW_K; i++)
            CHECK(ldp_head_id(&bw->table, i) == ldp_head_id(&bc->table, i));
        for (i = 0; i < (size_t)BW_V * (BW_K + 1); i++) {
            CHECK(ldp_alias_slot(&bw->table, i) == ldp_alias_slot(&bc->table, i));
            CHECK(ldp_accept_gamma(&bw->table, i) == ldp_accept_gamma(&bc->table, i));
        }
        check_same_draws(bw, bc);
        free(wide);
        free(compact);
    }
}

static void compact_alias_out_of_range(bw_tables *t, bw_spec *s) {
    bw_compact(s, t, &C);
    C.alias_index[1][0] = BW_K + 1;
}
static void compact_head_out_of_range(bw_tables *t, bw_spec *s) {
    bw_compact(s, t, &C);
    C.head_ids[4][1] = BW_V;
}
static void compact_gamma_negative(bw_tables *t, bw_spec *s) {
    bw_compact(s, t, &C);
    C.accept_gamma[3][1] = -0.5f;
}
static void compact_gamma_as_f16(bw_tables *t, bw_spec *s) { /* a dtype neither wide nor narrow */
    bw_compact(s, t, &C);
    bw_retype(s, "accept_gamma", "F16", C.accept_gamma, 2);
}

static void test_compact_tables_keep_every_check(void) {
    CHECK_RC(open_mutated(0, compact_alias_out_of_range), LDP_E_TABLE_ALIAS);
    CHECK_RC(open_mutated(0, compact_head_out_of_range), LDP_E_TABLE_HEAD);
    CHECK_RC(open_mutated(0, compact_gamma_negative), LDP_E_TABLE_GAMMA);
    CHECK_RC(open_mutated(0, compact_gamma_as_f16), LDP_E_SCHEMA_DTYPE);
}

/* tail clusters (santext_sampler.h): two clusters, bounds 0 (valid for any table) */
static void with_clusters(bw_tables *t, bw_spec *s) {
    int x;
    t->n_clusters = 2;
    for (x = 0; x < BW_V; x++) t->tail_cluster[x] = (uint8_t)(x % 2);
    bw_tiny_spec(s, t);
}
static void cluster_id_too_big(bw_tables *t, bw_spec *s) {
    with_clusters(t, s);
    t->tail_cluster[5] = 2;
}
static bw_array *array_named(bw_spec *s, const char *name) {
    size_t i;
    for (i = 0; i < s->n_arrays; i++)
        if (strcmp(s->arrays[i].name, name) == 0) return &s->arrays[i];
    return &s->arrays[0]; /* not reached: every name asked for is in the spec */
}
static void cluster_count_zero(bw_tables *t, bw_spec *s) {
    t->n_clusters = 1;
    bw_tiny_spec(s, t);
    array_named(s, "cluster_gamma")->shape[1] = 0; /* (V, 0) */
    array_named(s, "cluster_gamma")->nbytes = 0;
}
static void cluster_gamma_missing(bw_tables *t, bw_spec *s) {
    with_clusters(t, s);
    drop_array(s, "cluster_gamma"); /* tail_cluster stays */
}
static void cluster_gamma_wrong_dtype(bw_tables *t, bw_spec *s) {
    with_clusters(t, s);
    bw_retype(s, "cluster_gamma", "I8", t->cluster_gamma, 1);
}
static void tail_cluster_wrong_shape(bw_tables *t, bw_spec *s) {
    with_clusters(t, s);
    array_named(s, "tail_cluster")->shape[0] = BW_V - 1;
    array_named(s, "tail_cluster")->nbytes = BW_V - 1;
}

static void test_tail_clusters_are_optional_and_checked(void) {
    int plus;
    CHECK_RC(open_mutated(0, with_clusters), LDP_OK);
    CHECK_RC(open_mutated(1, cluster_id_too_big), LDP_E_TABLE_CLUSTER);
    CHECK_RC(open_mutated(0, cluster_count_zero), LDP_E_TABLE_CLUSTER);
    CHECK_RC(open_mutated(0, cluster_gamma_missing), LDP_E_MISSING_ARRAY);
    CHECK_RC(open_mutated(0, cluster_gamma_wrong_dtype), LDP_E_SCHEMA_DTYPE);
    CHECK_RC(open_mutated(0, tail_cluster_wrong_shape), LDP_E_SCHEMA_SHAPE);
    /* explicit one-cluster arrays (zero bounds) are the plain tail, draw for draw: the same seeded
     * outputs as without the arrays (an older bundle) */
    for (plus = 0; plus <= 1; plus++) {
        bw_tables t;
        bw_spec s;
        uint8_t *plain = NULL, *clustered = NULL;
        size_t plain_len = 0, clustered_len = 0;
        ldp_bundle *bp = NULL, *bc = NULL;
        bw_tiny_tables(&t, plus);
        bw_tiny_spec(&s, &t);
        REQUIRE(bw_write(&s, &plain, &plain_len) == 0);
        t.n_clusters = 1;
        bw_tiny_spec(&s, &t);
        REQUIRE(bw_write(&s, &clustered, &clustered_len) == 0);
        CHECK_RC(ldp_bundle_open_memory(plain, plain_len, (const uint8_t (*)[32])PK, 1, &bp), LDP_OK);
        CHECK_RC(ldp_bundle_open_memory(clustered, clustered_len, (const uint8_t (*)[32])PK, 1, &bc),
                 LDP_OK);
        REQUIRE(bp != NULL && bc != NULL);
        CHECK(bp->table.n_clusters == 1 && bc->table.n_clusters == 1);
        check_same_draws(bp, bc);
        free(plain);
        free(clustered);
    }
}

static void test_files(void) {
    char path[512], link[512];
    uint8_t *data;
    size_t len;
    ldp_bundle *b = NULL;
    REQUIRE(bw_tiny_bundle(0, &data, &len) == 0);
    snprintf(path, sizeof path, "%s/tiny.ldpb", tmpdir);
    REQUIRE(bw_save(path, data, len) == 0);
    CHECK_RC(ldp_bundle_open(path, (const uint8_t (*)[32])PK, 1, &b), LDP_OK);
    ldp_bundle_close(b);
    snprintf(link, sizeof link, "%s/link.ldpb", tmpdir);
    CHECK(symlink(path, link) == 0);
    CHECK_RC(ldp_bundle_open(link, (const uint8_t (*)[32])PK, 1, &b), LDP_OK);
    ldp_bundle_close(b);
    snprintf(path, sizeof path, "%s/missing.ldpb", tmpdir);
    CHECK_RC(ldp_bundle_open(path, (const uint8_t (*)[32])PK, 1, &b), LDP_E_FILE_NOT_FOUND);
    CHECK_RC(ldp_bundle_open(tmpdir, (const uint8_t (*)[32])PK, 1, &b), LDP_E_NOT_REGULAR);
    snprintf(path, sizeof path, "%s/fifo", tmpdir);
    CHECK(mkfifo(path, 0600) == 0);
    CHECK_RC(ldp_bundle_open(path, (const uint8_t (*)[32])PK, 1, &b), LDP_E_NOT_REGULAR);
    CHECK_RC(ldp_bundle_open("/dev/null", (const uint8_t (*)[32])PK, 1, &b), LDP_E_NOT_REGULAR);
    snprintf(path, sizeof path, "%s/empty.ldpb", tmpdir);
    CHECK(bw_save(path, data, 0) == 0);
    CHECK_RC(ldp_bundle_open(path, (const uint8_t (*)[32])PK, 1, &b), LDP_E_FILE_EMPTY);
    CHECK_RC(ldp_bundle_open(NULL, (const uint8_t (*)[32])PK, 1, &b), LDP_E_ARG);
    CHECK(b == NULL);
    free(data);
}

/* ldp_expect: each pin refuses with its own code, in the Python order; malformed pins are LDP_E_ARG */
static void test_pins(void) {
    char path[512], id[65];
    uint8_t *data;
    size_t len;
    ldp_bundle *b = NULL;
    ldp_expect e = LDP_EXPECT_INIT, bad;
    REQUIRE(bw_tiny_bundle(1, &data, &len) == 0); /* SanText+, eps = 2, format version 1 */
    snprintf(path, sizeof path, "%s/pins.ldpb", tmpdir);
    REQUIRE(bw_save(path, data, len) == 0);
    free(data);
    CHECK_RC(ldp_bundle_open_expect(path, (const uint8_t (*)[32])PK, 1, &e, &b), LDP_OK);
    REQUIRE(b != NULL);
    REQUIRE(ldp_bundle_id(b, id) == LDP_OK);
    e.mechanisms = LDP_EXPECT_SANTEXT_PLUS;
    e.epsilon_min = 2.0;
    e.epsilon_max = 2.0;
    e.bundle_id = id;
    e.min_format_version = 1;
    CHECK_RC(ldp_bundle_expect(b, &e), LDP_OK);
    e.mechanisms = LDP_EXPECT_SANTEXT;
    CHECK_RC(ldp_bundle_expect(b, &e), LDP_E_EXPECT_MECHANISM);
    e.mechanisms = LDP_EXPECT_SANTEXT | LDP_EXPECT_SANTEXT_PLUS;
    e.min_format_version = 2;
    CHECK_RC(ldp_bundle_expect(b, &e), LDP_E_EXPECT_FORMAT);
    e.min_format_version = 0;
    e.bundle_id = "0000000000000000000000000000000000000000000000000000000000000000";
    CHECK_RC(ldp_bundle_expect(b, &e), LDP_E_EXPECT_BUNDLE_ID);
    e.bundle_id = NULL;
    e.epsilon_max = 1.5;
    e.epsilon_min = 0.0;
    CHECK_RC(ldp_bundle_expect(b, &e), LDP_E_EXPECT_EPSILON);
    e.epsilon_max = 0.0;
    e.epsilon_min = 2.5;
    CHECK_RC(ldp_bundle_expect(b, &e), LDP_E_EXPECT_EPSILON);
    /* malformed pins */
    bad = e; bad.epsilon_min = 3.0; bad.epsilon_max = 2.0;
    CHECK_RC(ldp_bundle_expect(b, &bad), LDP_E_ARG);
    bad = e; bad.epsilon_min = NAN;
    CHECK_RC(ldp_bundle_expect(b, &bad), LDP_E_ARG);
    bad = e; bad.epsilon_max = -1.0;
    CHECK_RC(ldp_bundle_expect(b, &bad), LDP_E_ARG);
    bad = e; bad.mechanisms = 1u << 7;
    CHECK_RC(ldp_bundle_expect(b, &bad), LDP_E_ARG);
    bad = e; bad.bundle_id = "ABCDEF";
    CHECK_RC(ldp_bundle_expect(b, &bad), LDP_E_ARG);
    bad = e; bad.min_format_version = -1;
    CHECK_RC(ldp_bundle_expect(b, &bad), LDP_E_ARG);
    bad = e; bad.size = 0;
    CHECK_RC(ldp_bundle_expect(b, &bad), LDP_E_ARG);
    CHECK_RC(ldp_bundle_expect(NULL, &e), LDP_E_ARG);
    ldp_bundle_close(b);
    /* open_expect: nothing is returned for an unmet pin or a malformed one */
    b = (ldp_bundle *)&e;
    e.epsilon_min = 0.0;
    e.epsilon_max = 1.0;
    CHECK_RC(ldp_bundle_open_expect(path, (const uint8_t (*)[32])PK, 1, &e, &b), LDP_E_EXPECT_EPSILON);
    CHECK(b == NULL);
    bad.size = 0;
    b = (ldp_bundle *)&e;
    CHECK_RC(ldp_bundle_open_expect(path, (const uint8_t (*)[32])PK, 1, &bad, &b), LDP_E_ARG);
    CHECK(b == NULL);
    CHECK_RC(ldp_bundle_open_expect(path, (const uint8_t (*)[32])PK, 1, NULL, &b), LDP_OK);
    ldp_bundle_close(b);
}

static void test_memory_bundle_is_a_private_copy(void) {
    uint8_t *data;
    size_t len;
    ldp_bundle *b = NULL;
    ldp_sanitizer *s = NULL;
    int32_t ids[4] = {0, 1, 2, 3}, out[4];
    REQUIRE(bw_tiny_bundle(0, &data, &len) == 0);
    REQUIRE(ldp_bundle_open_memory(data, len, (const uint8_t (*)[32])PK, 1, &b) == LDP_OK);
    memset(data, 0xFF, len); /* the caller's buffer may go away */
    free(data);
    REQUIRE(ldp_sanitizer_new(b, &s) == LDP_OK);
    CHECK_RC(ldp_sample_ids(s, ids, out, 4), LDP_OK);
    ldp_sanitizer_free(s);
    ldp_bundle_close(b);
}

/* ldp_bundle_open_owned takes the buffer: the bundle reads it in place and frees it at close, or
 * frees it on a refusal (the ASan build checks both). */
static void test_owned_bundle_is_read_in_place(void) {
    uint8_t *data, *copy;
    size_t len;
    ldp_bundle *b = NULL, *m = NULL;
    REQUIRE(bw_tiny_bundle(1, &data, &len) == 0);
    copy = (uint8_t *)malloc(len);
    REQUIRE(copy != NULL);
    memcpy(copy, data, len);
    CHECK_RC(ldp_bundle_open_owned(copy, len, (const uint8_t (*)[32])PK, 1, 0, &b), LDP_OK);
    REQUIRE(b != NULL);
    CHECK(b->data == copy && b->owned == copy);
    CHECK_RC(ldp_bundle_open_memory(data, len, (const uint8_t (*)[32])PK, 1, &m), LDP_OK);
    REQUIRE(m != NULL);
    check_same_draws(b, m); /* closes both */
    copy = (uint8_t *)malloc(len);
    REQUIRE(copy != NULL);
    memcpy(copy, data, len);
    copy[len - 1] ^= 1; /* an array's bytes no longer match its hash */
    b = (ldp_bundle *)1;
    CHECK(ldp_bundle_open_owned(copy, len, (const uint8_t (*)[32])PK, 1, 0, &b) != LDP_OK);
    CHECK(b == NULL);
    CHECK_RC(ldp_bundle_open_owned(NULL, 0, (const uint8_t (*)[32])PK, 1, 0, &b), LDP_E_ARG);
    free(data);
}

static void test_every_code_has_a_message(void) {
    int rc;
    for (rc = -120; rc <= 0; rc++) CHECK(ldp_strerror(rc) != NULL);
    CHECK(strcmp(ldp_strerror(LDP_E_UNTRUSTED_KEY), "unknown error code") != 0);
    CHECK(strcmp(ldp_strerror(7), "unknown error code") == 0);
    CHECK(strcmp(ldp_version(), LDP_VERSION) == 0);
}

/* first n hex digits of SHA-256(data) */
static void hex_digest(const void *data, size_t len, char *hex, size_t n) {
    uint8_t d[32];
    char full[65];
    crypto_hash_sha256(d, (const unsigned char *)data, (unsigned long long)len);
    sodium_bin2hex(full, sizeof full, d, 32);
    memcpy(hex, full, n);
    hex[n] = '\0';
}

/* ldp_bundle_info: one JSON object of the facts (tests/test_libldptext.py compares every value
 * with the Python runtime's); here its shape, the ids, the manifest, and no leak under ASan */
static void test_bundle_info(void) {
    int plus;
    char *json = (char *)&plus;
    CHECK_RC(ldp_bundle_info(NULL, &json), LDP_E_ARG);
    CHECK(json == NULL);
    for (plus = 0; plus <= 1; plus++) {
        uint8_t *data;
        size_t len;
        ldp_bundle *b = NULL;
        ldp_json_doc *doc = NULL;
        const ldp_json *info = NULL, *v;
        ldp_buf manifest, member;
        char key_id[17], bundle_id[65];
        REQUIRE(bw_tiny_bundle(plus, &data, &len) == 0);
        CHECK_RC(ldp_bundle_open_memory(data, len, (const uint8_t (*)[32])PK, 1, &b), LDP_OK);
        free(data);
        REQUIRE(b != NULL);
        CHECK_RC(ldp_bundle_info(b, NULL), LDP_E_ARG);
        CHECK_RC(ldp_bundle_info(b, &json), LDP_OK);
        REQUIRE(json != NULL);
        CHECK(ldp_json_parse(json, strlen(json), &doc, &info) == LDP_JSON_OK);
        REQUIRE(info != NULL && info->type == LDP_JSON_OBJECT && info->n == 25);
        v = ldp_json_get(info, "mechanism");
        CHECK(v != NULL && strcmp(v->str, plus ? "santext+" : "santext") == 0);
        /* the statement's prose is the generated table's (the Python unit's words) */
        v = ldp_json_get(info, "notion");
        CHECK(v != NULL && strcmp(v->str, plus ? "UMLDP" : "metric-LDP") == 0);
        v = ldp_json_get(info, "neighbouring");
        CHECK(v != NULL && strncmp(v->str, "any two tokens", 14) == 0);
        v = ldp_json_get(info, "worst_case_note");
        CHECK(v != NULL && strncmp(v->str, plus ? "SanText+ releases" : "eps*D_max: ", plus ? 17 : 11) == 0);
        v = ldp_json_get(info, "epsilon");
        CHECK(v != NULL && ldp_json_number(v) == 2.0);
        v = ldp_json_get(info, "format_version");
        CHECK(v != NULL && v->type == LDP_JSON_INT && v->int_value == 1);
        CHECK(ldp_json_get(info, "p")->type == (plus ? LDP_JSON_FLOAT : LDP_JSON_NULL));
        CHECK(ldp_json_get(info, "worst_case_token_epsilon")->type ==
              (plus ? LDP_JSON_NULL : LDP_JSON_FLOAT));
        hex_digest(PK, 32, key_id, 16); /* keys.py key_id */
        /* the tiny bundles state no verbatim rate: nulls, and not near identity */
        CHECK(ldp_json_get(info, "verbatim_median")->type == LDP_JSON_NULL);
        CHECK(ldp_json_get(info, "verbatim_max")->type == LDP_JSON_NULL);
        CHECK(ldp_json_get(info, "weak_privacy")->type == LDP_JSON_FALSE);
        v = ldp_json_get(info, "key_id");
        CHECK(v != NULL && v->type == LDP_JSON_STRING && strcmp(v->str, key_id) == 0);
        v = ldp_json_get(info, "ledger_unit");
        CHECK(v != NULL && v->str_len == 7 + 16 && strncmp(v->str, "metric:", 7) == 0);
        /* the manifest member is the signed manifest, and bundle_id its SHA-256 */
        ldp_buf_init(&manifest);
        ldp_buf_init(&member);
        CHECK(ldp_json_write_canonical(&manifest, b->manifest) == LDP_JSON_OK);
        CHECK(ldp_json_write_canonical(&member, ldp_json_get(info, "manifest")) == LDP_JSON_OK);
        CHECK(manifest.len == member.len && memcmp(manifest.data, member.data, member.len) == 0);
        hex_digest(manifest.data, manifest.len, bundle_id, 64);
        v = ldp_json_get(info, "bundle_id");
        CHECK(v != NULL && strcmp(v->str, bundle_id) == 0);
        ldp_buf_free(&manifest);
        ldp_buf_free(&member);
        ldp_json_free(doc);
        ldp_free(json);
        json = NULL;
        ldp_bundle_close(b);
    }
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ldp_test_bundle_XXXXXX");
    if (mkdtemp(tmpdir) == NULL) return 1;
    bw_test_keys(PK, SK, 0);
    bw_test_keys(PK2, SK2, 1);
    RUN(test_valid_bundles_open);
    RUN(test_metadata_order_is_the_one_freedom);
    RUN(test_trust);
    RUN(test_signature_and_manifest_checks);
    RUN(test_edits_of_the_file);
    RUN(test_every_single_bit_flip_and_truncation_is_refused);
    RUN(test_random_multi_byte_corruptions_are_refused);
    RUN(test_signed_but_inconsistent_tables_are_refused);
    RUN(test_stated_parameters_must_be_what_the_tables_realise);
    RUN(test_pins);
    RUN(test_compact_bundle_equals_wide);
    RUN(test_compact_tables_keep_every_check);
    RUN(test_tail_clusters_are_optional_and_checked);
    RUN(test_files);
    RUN(test_memory_bundle_is_a_private_copy);
    RUN(test_owned_bundle_is_read_in_place);
    RUN(test_every_code_has_a_message);
    RUN(test_bundle_info);
    {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    }
    DONE();
}
