/* Test helper: writes SanText bundles in C, byte for byte as sdk/ldptext/bundle.py writes them
 * (canonical manifest, Ed25519 signature, canonical safetensors header, layout order), so that the
 * C tests can build valid bundles and signed-but-broken ones without Python. An independent
 * implementation of the writer: a mismatch with the loader's canonical header fails the tests. */
#ifndef LDP_BUNDLE_WRITER_H
#define LDP_BUNDLE_WRITER_H

#include <stddef.h>
#include <stdint.h>

#define BW_MAX_ARRAYS 32

typedef struct {
    const char *name;
    const char *dtype; /* safetensors code: "F64", "I8", "BOOL", ... */
    int ndim;
    uint64_t shape[4];
    const void *data;
    size_t nbytes;
} bw_array;

typedef struct {
    bw_array arrays[BW_MAX_ARRAYS];
    size_t n_arrays;
    const char *mechanism;      /* "santext" / "santext+" (written into the manifest) */
    const char *manifest_extra; /* JSON members (no braces) added to the manifest, e.g. params */
    int sign;                   /* 0: unsigned bundle */
    uint8_t sk[64];             /* libsodium Ed25519 secret key (sign == 1) */
    int reverse_metadata;       /* write __metadata__ entries in reverse order (allowed) */
    /* hooks for broken bundles */
    const char *format_fields;  /* replaces "format":"ldptext-bundle","format_version":1 */
    int raw_manifest;           /* sign the manifest as written (keys unsorted), not canonical */
    int extra_metadata;         /* add an unknown __metadata__ field */
    int signature_only;         /* write the signature without the public key */
} bw_spec;

/* The tiny SanText(+) tables the tests use: V = 8 words ("alpha" .. "eta", "<unk>"), m = 4,
 * K = 2; santext+ makes rows 0 and 1 non-sensitive. Tests may change any field, then call
 * bw_tiny_spec + bw_write. */
#define BW_V 8
#define BW_M 4
#define BW_K 2
typedef struct {
    int plus;
    int8_t emb_q[BW_V][BW_M];
    float emb_scale[BW_V];
    int32_t outputs[BW_V];
    int n_outputs;
    int32_t head_ids[BW_V][BW_K];
    uint32_t alias_threshold[BW_V][BW_K + 1];
    uint16_t alias_index[BW_V][BW_K + 1];
    double accept_gamma[BW_V][BW_K + 1];
    double tail_floor[BW_V];
    uint8_t keep_row[BW_V];
    uint8_t sensitive[BW_V];
    uint8_t valid_input[BW_V];
    char tokenizer_json[2048];
    char vocab_json[512];
    char manifest_extra[1024];
    double epsilon, p;
    /* tail clusters: none (0, the default: no arrays, as an older bundle) or 1..BW_MAX_CLUSTERS;
     * cluster_gamma is [BW_V][n_clusters], row-major */
    int n_clusters;
    uint8_t tail_cluster[BW_V];
    uint8_t cluster_gamma[BW_V * 4];
} bw_tables;
#define BW_MAX_CLUSTERS 4

/* The fixed test key pair (from a constant seed) and a second, untrusted one. */
void bw_test_keys(uint8_t pk[32], uint8_t sk[64], int which);
void bw_tiny_tables(bw_tables *t, int plus);
/* Rebuilds manifest_extra from epsilon / p (call after changing them). */
void bw_tiny_manifest(bw_tables *t);
/* A spec over t's arrays and blobs, signed with test key 0. */
void bw_tiny_spec(bw_spec *spec, bw_tables *t);
/* The compact form precompute writes when the values fit: uint16 head ids, uint8 alias slots and
 * float32 exponents (the tiny tables' exponents are exact in float32). bw_compact fills c from t
 * and points spec's three arrays at it; change c afterwards to break a narrow array. */
typedef struct {
    uint16_t head_ids[BW_V][BW_K];
    uint8_t alias_index[BW_V][BW_K + 1];
    float accept_gamma[BW_V][BW_K + 1];
} bw_compact_tables;
void bw_compact(bw_spec *spec, const bw_tables *t, bw_compact_tables *c);
/* Points spec's array `name` at data of another dtype (item bytes per value, same shape). */
void bw_retype(bw_spec *spec, const char *name, const char *dtype, const void *data, size_t item);
/* Serialises spec; *out is malloc'd. 0 on success. */
int bw_write(const bw_spec *spec, uint8_t **out, size_t *len);
/* bw_tiny_tables + bw_tiny_spec + bw_write */
int bw_tiny_bundle(int plus, uint8_t **out, size_t *len);
/* Writes len bytes to path; 0 on success. */
int bw_save(const char *path, const uint8_t *data, size_t len);

/* A WordPiece / BertNormalizer tokenizer JSON over a small vocabulary (for tokenizer tests). */
extern const char BW_WORDPIECE_JSON[];

#endif
