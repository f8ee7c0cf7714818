/* See bundle_writer.h. */
#include "bundle_writer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "json.h"

static const char *const RANK[] = {"U64", "I64", "F64", "F32", "U32", "I32",
                                   "F16", "U16", "I16", "I8",  "U8",  "BOOL"};

static int rank_of(const char *code) {
    int i;
    for (i = 0; i < 12; i++)
        if (strcmp(RANK[i], code) == 0) return i;
    return 99;
}

void bw_test_keys(uint8_t pk[32], uint8_t sk[64], int which) {
    uint8_t seed[32];
    memset(seed, which ? 0x5A : 0x17, sizeof seed);
    if (sodium_init() < 0) abort();
    crypto_sign_seed_keypair(pk, sk, seed);
}

static const char *const WORDS[BW_V] = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta",
                                        "eta", "<unk>"};

/* Python's repr of x (floats stay floats in the manifest, as Python writes them) */
static const char *pyfloat(double x, char *buf, size_t cap) {
    ldp_buf b;
    ldp_buf_init(&b);
    ldp_json_write_double(&b, x);
    snprintf(buf, cap, "%s", b.data ? b.data : "0.0");
    ldp_buf_free(&b);
    return buf;
}

void bw_tiny_manifest(bw_tables *t) {
    char eps[40], eps0[40], p[40];
    pyfloat(t->epsilon, eps, sizeof eps);
    if (t->plus)
        snprintf(t->manifest_extra, sizeof t->manifest_extra,
                 "\"params\":{\"epsilon\":%s,\"epsilon0\":%s,\"head_size\":%d,\"p\":%s,"
                 "\"w\":0.5},\"privacy\":{\"d_max\":10.0,\"notion\":\"UMLDP\"},"
                 "\"numeric\":{\"max_relative_error\":1e-13},\"vocab\":{\"kind\":\"word\"}",
                 eps, pyfloat(log(1.0 / t->p), eps0, sizeof eps0), BW_K,
                 pyfloat(t->p, p, sizeof p));
    else
        snprintf(t->manifest_extra, sizeof t->manifest_extra,
                 "\"params\":{\"epsilon\":%s,\"epsilon0\":0.0,\"head_size\":%d,\"p\":null,"
                 "\"w\":null},\"privacy\":{\"d_max\":10.0,\"notion\":\"MLDP\"},"
                 "\"numeric\":{\"max_relative_error\":1e-13},\"vocab\":{\"kind\":\"word\"}",
                 eps, BW_K);
}

void bw_tiny_tables(bw_tables *t, int plus) {
    /* the rows lie on one axis, so every distance is a multiple of the scale 1/8, exactly, and so
     * is eps/2 * d for eps = 2: the head exponents below realise eps exactly (libldptext checks the
     * stated eps against them at open) and are float32 values (the compact bundle is the same) */
    static const int8_t codes[BW_V][BW_M] = {{10, 0, 0, 0},  {9, 0, 0, 0},  {0, 0, 0, 0},
                                             {-4, 0, 0, 0},  {6, 0, 0, 0},  {-7, 0, 0, 0},
                                             {-10, 0, 0, 0}, {3, 0, 0, 0}};
    int x, j, n = 0;
    size_t off;
    memset(t, 0, sizeof *t);
    t->plus = plus;
    t->epsilon = 2.0;
    t->p = 0.3;
    memcpy(t->emb_q, codes, sizeof codes);
    for (x = 0; x < BW_V; x++) {
        t->emb_scale[x] = 0.125f;
        t->valid_input[x] = 1;
        /* <unk> (row 7) is input only; SanText+: rows 0, 1 are non-sensitive */
        t->sensitive[x] = plus ? x >= 2 : 1;
        t->keep_row[x] = plus && x < 2;
        if (x < BW_V - 1 && (!plus || x >= 2)) t->outputs[n++] = x;
    }
    t->n_outputs = n;
    /* The whole law of every row is SanText's, as libldptext checks before a row's first draw:
     * each head slot proposes M_h = 2^29 (its column's rest goes to the tail slot, which holds
     * M_T = 3 2^32 - 2 M_h), each tail output M_T / T. Head exponents eps/2 d(x, y) - c (c their
     * least, so the row minimum is 0), the tail's exponent 4 (float32 values: the compact bundle is
     * the same), and the floor chosen so that the tail's constant is the head's:
     * eps/2 floor = c + 4 - ln(M_T / (T M_h)). Every tail output's trial exponent
     * eps/2 d - c + ln(M_T / (T M_h)) is then >= 0 (the nearest tail output is at most eps/2 0.75
     * nearer than the nearer head output, ln(M_T / (T M_h)) >= ln(22 / 5)); the
     * head holds 1/12 of the proposal mass, so the lookahead's rule finds head-likely rows. */
    for (x = 0; x < BW_V; x++) {
        const uint32_t head_mass = 1u << 29;
        const double tail_mass = 3.0 * 4294967296.0 - 2.0 * (double)head_mass, tail_n = n - BW_K;
        int a = t->outputs[x % n], b = t->outputs[(x + 1) % n];
        double c = INFINITY;
        t->head_ids[x][0] = a < b ? a : b;
        t->head_ids[x][1] = a < b ? b : a;
        for (j = 0; j < BW_K; j++) {
            t->alias_threshold[x][j] = head_mass;
            t->alias_index[x][j] = BW_K;
        }
        t->alias_threshold[x][BW_K] = 0xFFFFFFFFu; /* full column */
        t->alias_index[x][BW_K] = BW_K;
        for (j = 0; j < BW_K; j++) {
            t->accept_gamma[x][j] = t->epsilon / 2 * 0.125 *
                                    fabs((double)codes[x][0] - codes[t->head_ids[x][j]][0]);
            c = fmin(c, t->accept_gamma[x][j]);
        }
        for (j = 0; j < BW_K; j++) t->accept_gamma[x][j] -= c;
        t->accept_gamma[x][BW_K] = 4.0;
        t->tail_floor[x] = (c + 4.0 - log(tail_mass / (tail_n * (double)head_mass))) / (t->epsilon / 2);
    }
    off = (size_t)snprintf(t->tokenizer_json, sizeof t->tokenizer_json,
                           "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,"
                           "\"added_tokens\":[],\"normalizer\":{\"type\":\"Sequence\","
                           "\"normalizers\":[{\"type\":\"NFKC\"},{\"type\":\"Lowercase\"}]},"
                           "\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},"
                           "\"post_processor\":null,\"decoder\":null,\"model\":{\"type\":"
                           "\"WordLevel\",\"vocab\":{");
    for (x = 0; x < BW_V; x++)
        off += (size_t)snprintf(t->tokenizer_json + off, sizeof t->tokenizer_json - off,
                                "%s\"%s\":%d", x ? "," : "", WORDS[x], x);
    snprintf(t->tokenizer_json + off, sizeof t->tokenizer_json - off,
             "},\"unk_token\":\"<unk>\"}}");
    off = (size_t)snprintf(t->vocab_json, sizeof t->vocab_json, "[");
    for (x = 0; x < BW_V; x++)
        off += (size_t)snprintf(t->vocab_json + off, sizeof t->vocab_json - off, "%s\"%s\"",
                                x ? ", " : "", WORDS[x]);
    snprintf(t->vocab_json + off, sizeof t->vocab_json - off, "]");
    bw_tiny_manifest(t);
}

static void add(bw_spec *s, const char *name, const char *dtype, int ndim, uint64_t d0, uint64_t d1,
                const void *data, size_t item) {
    bw_array *a = &s->arrays[s->n_arrays++];
    a->name = name;
    a->dtype = dtype;
    a->ndim = ndim;
    a->shape[0] = d0;
    a->shape[1] = d1;
    a->data = data;
    a->nbytes = item * (size_t)d0 * (ndim == 2 ? (size_t)d1 : 1);
}

void bw_tiny_spec(bw_spec *s, bw_tables *t) {
    uint8_t pk[32];
    memset(s, 0, sizeof *s);
    add(s, "emb_q", "I8", 2, BW_V, BW_M, t->emb_q, 1);
    add(s, "emb_scale", "F32", 1, BW_V, 0, t->emb_scale, 4);
    add(s, "outputs", "I32", 1, (uint64_t)t->n_outputs, 0, t->outputs, 4);
    add(s, "head_ids", "I32", 2, BW_V, BW_K, t->head_ids, 4);
    add(s, "alias_threshold", "U32", 2, BW_V, BW_K + 1, t->alias_threshold, 4);
    add(s, "alias_index", "U16", 2, BW_V, BW_K + 1, t->alias_index, 2);
    add(s, "accept_gamma", "F64", 2, BW_V, BW_K + 1, t->accept_gamma, 8);
    add(s, "tail_floor", "F64", 1, BW_V, 0, t->tail_floor, 8);
    add(s, "keep_row", "U8", 1, BW_V, 0, t->keep_row, 1);
    add(s, "sensitive", "BOOL", 1, BW_V, 0, t->sensitive, 1);
    add(s, "valid_input", "BOOL", 1, BW_V, 0, t->valid_input, 1);
    if (t->n_clusters > 0) {
        add(s, "tail_cluster", "U8", 1, BW_V, 0, t->tail_cluster, 1);
        add(s, "cluster_gamma", "U8", 2, BW_V, (uint64_t)t->n_clusters, t->cluster_gamma, 1);
    }
    add(s, "blob/tokenizer.json", "U8", 1, strlen(t->tokenizer_json), 0, t->tokenizer_json, 1);
    add(s, "blob/vocab.json", "U8", 1, strlen(t->vocab_json), 0, t->vocab_json, 1);
    s->mechanism = t->plus ? "santext+" : "santext";
    s->manifest_extra = t->manifest_extra;
    s->sign = 1;
    bw_test_keys(pk, s->sk, 0);
}

void bw_retype(bw_spec *s, const char *name, const char *dtype, const void *data, size_t item) {
    size_t i;
    for (i = 0; i < s->n_arrays; i++) {
        bw_array *a = &s->arrays[i];
        if (strcmp(a->name, name) != 0) continue;
        a->dtype = dtype;
        a->data = data;
        a->nbytes = item * (size_t)a->shape[0] * (a->ndim == 2 ? (size_t)a->shape[1] : 1);
    }
}

void bw_compact(bw_spec *s, const bw_tables *t, bw_compact_tables *c) {
    int x, j;
    for (x = 0; x < BW_V; x++) {
        for (j = 0; j < BW_K; j++) c->head_ids[x][j] = (uint16_t)t->head_ids[x][j];
        for (j = 0; j <= BW_K; j++) {
            c->alias_index[x][j] = (uint8_t)t->alias_index[x][j];
            c->accept_gamma[x][j] = (float)t->accept_gamma[x][j];
        }
    }
    bw_retype(s, "head_ids", "U16", c->head_ids, 2);
    bw_retype(s, "alias_index", "U8", c->alias_index, 1);
    bw_retype(s, "accept_gamma", "F32", c->accept_gamma, 4);
}

static int cmp_layout(const void *x, const void *y) {
    const bw_array *a = *(const bw_array *const *)x, *b = *(const bw_array *const *)y;
    int ra = rank_of(a->dtype), rb = rank_of(b->dtype);
    if (ra != rb) return ra < rb ? -1 : 1;
    return strcmp(a->name, b->name);
}

static void put_shape(ldp_buf *b, const bw_array *a) {
    int j;
    ldp_buf_putc(b, '[');
    for (j = 0; j < a->ndim; j++) {
        if (j) ldp_buf_putc(b, ',');
        ldp_buf_put_u64(b, a->shape[j]);
    }
    ldp_buf_putc(b, ']');
}

int bw_write(const bw_spec *s, uint8_t **out, size_t *len) {
    ldp_buf man, canon, hdr, file;
    ldp_json_doc *doc = NULL;
    const ldp_json *root = NULL;
    const bw_array *order[BW_MAX_ARRAYS];
    uint8_t sig[64];
    char pk_b64[64], sig_b64[100];
    size_t i;
    uint64_t offset = 0, hlen;
    int rc;
    if (sodium_init() < 0) return -1;
    ldp_buf_init(&man);
    ldp_buf_init(&canon);
    ldp_buf_init(&hdr);
    ldp_buf_init(&file);
    /* manifest: the caller's members + format fields + the array table, then canonical */
    ldp_buf_putc(&man, '{');
    if (s->manifest_extra && s->manifest_extra[0]) {
        ldp_buf_puts(&man, s->manifest_extra);
        ldp_buf_putc(&man, ',');
    }
    ldp_buf_puts(&man, s->format_fields ? s->format_fields
                                        : "\"format\":\"ldptext-bundle\",\"format_version\":1");
    ldp_buf_puts(&man, ",\"mechanism\":");
    ldp_json_write_string(&man, s->mechanism, strlen(s->mechanism), 1);
    ldp_buf_puts(&man, ",\"arrays\":{");
    for (i = 0; i < s->n_arrays; i++) {
        const bw_array *a = &s->arrays[i];
        unsigned char d[32];
        char hex[65];
        crypto_hash_sha256(d, (const unsigned char *)a->data, a->nbytes);
        sodium_bin2hex(hex, sizeof hex, d, sizeof d);
        if (i) ldp_buf_putc(&man, ',');
        ldp_json_write_string(&man, a->name, strlen(a->name), 1);
        ldp_buf_puts(&man, ":{\"dtype\":\"");
        ldp_buf_puts(&man, a->dtype);
        ldp_buf_puts(&man, "\",\"shape\":");
        put_shape(&man, a);
        ldp_buf_puts(&man, ",\"sha256\":\"");
        ldp_buf_puts(&man, hex);
        ldp_buf_puts(&man, "\"}");
    }
    ldp_buf_puts(&man, "}}");
    rc = ldp_json_parse(man.data, man.len, &doc, &root);
    if (rc != 0) goto fail;
    if (s->raw_manifest) ldp_buf_put(&canon, man.data, man.len);
    else ldp_json_write_canonical(&canon, root);
    /* header */
    ldp_buf_puts(&hdr, "{\"__metadata__\":{");
    if (s->sign) {
        uint8_t pk[32];
        memcpy(pk, s->sk + 32, 32);
        crypto_sign_detached(sig, NULL, (const unsigned char *)canon.data, canon.len, s->sk);
        sodium_bin2base64(pk_b64, sizeof pk_b64, pk, 32, sodium_base64_VARIANT_ORIGINAL);
        sodium_bin2base64(sig_b64, sizeof sig_b64, sig, 64, sodium_base64_VARIANT_ORIGINAL);
    }
    if (!s->reverse_metadata) {
        ldp_buf_puts(&hdr, "\"ldptext.manifest\":");
        ldp_json_write_string(&hdr, canon.data, canon.len, 0);
        if (s->sign && !s->signature_only) {
            ldp_buf_puts(&hdr, ",\"ldptext.public_key\":\"");
            ldp_buf_puts(&hdr, pk_b64);
            ldp_buf_putc(&hdr, '"');
        }
        if (s->sign) {
            ldp_buf_puts(&hdr, ",\"ldptext.signature\":\"");
            ldp_buf_puts(&hdr, sig_b64);
            ldp_buf_putc(&hdr, '"');
        }
        if (s->extra_metadata) ldp_buf_puts(&hdr, ",\"ldptext.comment\":\"hi\"");
    } else {
        if (s->sign) {
            ldp_buf_puts(&hdr, "\"ldptext.signature\":\"");
            ldp_buf_puts(&hdr, sig_b64);
            ldp_buf_puts(&hdr, "\",\"ldptext.public_key\":\"");
            ldp_buf_puts(&hdr, pk_b64);
            ldp_buf_puts(&hdr, "\",");
        }
        ldp_buf_puts(&hdr, "\"ldptext.manifest\":");
        ldp_json_write_string(&hdr, canon.data, canon.len, 0);
    }
    ldp_buf_putc(&hdr, '}');
    for (i = 0; i < s->n_arrays; i++) order[i] = &s->arrays[i];
    qsort(order, s->n_arrays, sizeof order[0], cmp_layout);
    for (i = 0; i < s->n_arrays; i++) {
        const bw_array *a = order[i];
        ldp_buf_putc(&hdr, ',');
        ldp_json_write_string(&hdr, a->name, strlen(a->name), 0);
        ldp_buf_puts(&hdr, ":{\"dtype\":\"");
        ldp_buf_puts(&hdr, a->dtype);
        ldp_buf_puts(&hdr, "\",\"shape\":");
        put_shape(&hdr, a);
        ldp_buf_puts(&hdr, ",\"data_offsets\":[");
        ldp_buf_put_u64(&hdr, offset);
        ldp_buf_putc(&hdr, ',');
        offset += a->nbytes;
        ldp_buf_put_u64(&hdr, offset);
        ldp_buf_puts(&hdr, "]}");
    }
    ldp_buf_putc(&hdr, '}');
    while (hdr.len % 8) ldp_buf_putc(&hdr, ' ');
    hlen = hdr.len;
    for (i = 0; i < 8; i++) ldp_buf_putc(&file, (char)(uint8_t)(hlen >> (8 * i)));
    ldp_buf_put(&file, hdr.data, hdr.len);
    for (i = 0; i < s->n_arrays; i++) ldp_buf_put(&file, order[i]->data, order[i]->nbytes);
    if (file.failed) goto fail;
    *out = (uint8_t *)file.data;
    *len = file.len;
    ldp_json_free(doc);
    ldp_buf_free(&man);
    ldp_buf_free(&canon);
    ldp_buf_free(&hdr);
    return 0;
fail:
    ldp_json_free(doc);
    ldp_buf_free(&man);
    ldp_buf_free(&canon);
    ldp_buf_free(&hdr);
    ldp_buf_free(&file);
    return -1;
}

int bw_tiny_bundle(int plus, uint8_t **out, size_t *len) {
    bw_tables t;
    bw_spec s;
    bw_tiny_tables(&t, plus);
    bw_tiny_spec(&s, &t);
    return bw_write(&s, out, len);
}

int bw_save(const char *path, const uint8_t *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (f == NULL) return -1;
    if (len && fwrite(data, 1, len, f) != len) {
        fclose(f);
        return -1;
    }
    return fclose(f) == 0 ? 0 : -1;
}

const char BW_WORDPIECE_JSON[] =
    "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":["
    "{\"id\":0,\"content\":\"[PAD]\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
    "\"normalized\":false,\"special\":true},"
    "{\"id\":1,\"content\":\"[UNK]\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
    "\"normalized\":false,\"special\":true},"
    "{\"id\":2,\"content\":\"[CLS]\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
    "\"normalized\":false,\"special\":true},"
    "{\"id\":3,\"content\":\"[SEP]\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
    "\"normalized\":false,\"special\":true},"
    "{\"id\":4,\"content\":\"[MASK]\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
    "\"normalized\":false,\"special\":true}],"
    "\"normalizer\":{\"type\":\"BertNormalizer\",\"clean_text\":true,\"handle_chinese_chars\":true,"
    "\"strip_accents\":null,\"lowercase\":true},"
    "\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},\"post_processor\":null,"
    "\"decoder\":{\"type\":\"WordPiece\",\"prefix\":\"##\",\"cleanup\":true},"
    "\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"continuing_subword_prefix\":\"##\","
    "\"max_input_chars_per_word\":100,\"vocab\":{\"[PAD]\":0,\"[UNK]\":1,\"[CLS]\":2,\"[SEP]\":3,"
    "\"[MASK]\":4,\"hello\":5,\"world\":6,\"un\":7,\"##aff\":8,\"##able\":9,\",\":10,\"!\":11,"
    "\"cafe\":12,\"\\u4e1c\":13,\"\\u4eac\":14,\"i\":15,\"##s\":16,\"a\":17,\"##a\":18,\"'\":19,"
    "\"t\":20,\"don\":21,\".\":22,\"naive\":23,\"##\":24,\"[\":25,\"]\":26,\"mask\":27}}}";
