/* Opening a bundle: the checks of sdk/ldptext/bundle.py (_load: layout, manifest, signature,
 * trust, hashes, canonical header) and of the SanText runtime (santext.py Sanitizer.__init__,
 * santext_tables.py SanTextTables), in the same order, each failure with its own code. The file is
 * hostile until every check has passed. */
#define _GNU_SOURCE 1
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#if defined(__GLIBC__) && !defined(__EMSCRIPTEN__)
#include <malloc.h> /* malloc_trim */
#endif
#include <string.h>

#include <sodium.h>
#if defined(LDP_SHA256_OPENSSL)
#include <openssl/evp.h>
#endif

#include "host.h"
#include "ldp_internal.h"
#include "mechanisms.h"
#include "sha256.h"

#if defined(__unix__) || defined(__APPLE__)
#define LDP_HAVE_MMAP 1
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#else
#include <stdio.h>
#endif
/* Arrays are hashed on several threads where POSIX threads exist (define LDP_NO_THREADS to hash
 * on the calling thread only, e.g. for a WebAssembly build without threads). */
#if defined(__SSE2__) && !defined(LDP_PORTABLE)
#include <emmintrin.h>
#endif
#if defined(LDP_HAVE_MMAP) && !defined(LDP_NO_THREADS) && !defined(__wasm__)
#define LDP_THREADS 1
#include <pthread.h>
#endif

#define MAX_HEADER ((uint64_t)16 << 20)
#define MAX_FILE ((uint64_t)64 << 30)
#define MAX_DIM ((uint64_t)1 << 40)
#define FORMAT "ldptext-bundle"
#define META_MANIFEST "ldptext.manifest"
#define META_SIGNATURE "ldptext.signature"
#define META_PUBKEY "ldptext.public_key"
/* santext.py STATED_MAX_TOLERANCE */
#define STATED_MAX_TOLERANCE 1e-9

static const struct {
    const char *code;
    size_t size;
} DTYPES[LDP_DT_COUNT] = {{"U64", 8}, {"I64", 8}, {"F64", 8}, {"F32", 4}, {"U32", 4}, {"I32", 4},
                          {"F16", 2}, {"U16", 2}, {"I16", 2}, {"I8", 1},  {"U8", 1},  {"BOOL", 1}};

size_t ldp_dtype_size(int dtype) { return DTYPES[dtype].size; }
const char *ldp_dtype_code(int dtype) { return DTYPES[dtype].code; }

static int dtype_of(const ldp_json *v) {
    int i;
    if (v == NULL || v->type != LDP_JSON_STRING) return -1;
    for (i = 0; i < LDP_DT_COUNT; i++)
        if (strlen(DTYPES[i].code) == v->str_len && strcmp(DTYPES[i].code, v->str) == 0) return i;
    return -1;
}

static int str_is(const ldp_json *v, const char *s) {
    return v != NULL && v->type == LDP_JSON_STRING && v->str_len == strlen(s) &&
           memcmp(v->str, s, v->str_len) == 0;
}

static int key_is(const ldp_json_member *m, const char *s) {
    return m->key_len == strlen(s) && memcmp(m->key, s, m->key_len) == 0;
}

const ldp_array *ldp_bundle_array(const ldp_bundle *b, const char *name) {
    size_t i, n = strlen(name);
    for (i = 0; i < b->n_arrays; i++)
        if (b->arrays[i].name_len == n && memcmp(b->arrays[i].name, name, n) == 0)
            return &b->arrays[i];
    return NULL;
}

static uint64_t le64(const uint8_t *p) {
    uint64_t v = 0;
    int i;
    for (i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* a x b, or UINT64_MAX on overflow */
static uint64_t mul_sat(uint64_t a, uint64_t b) {
    if (a != 0 && b > UINT64_MAX / a) return UINT64_MAX;
    return a * b;
}

/* ---- SHA-256 of the arrays -------------------------------------------------------------------
 *
 * Almost all of ldp_bundle_open's time is hashing (46 MiB for a 30,522-token MiniLM bundle).
 * ldp_sha256 (sha256.c) runs on the CPU's SHA extensions where the CPU has them and is
 * libsodium's portable C elsewhere (about 0.2-0.3 GB/s); with -DLDP_SHA256_OPENSSL the hash is
 * OpenSSL's libcrypto (EVP) instead. Signatures stay with libsodium either way. The arrays are
 * independent, so they are hashed on up to LDP_HASH_THREADS threads (largest first, each to the
 * least loaded thread); the digests are compared afterwards in layout order, so the first
 * mismatching array (and the error) is the same as with one thread. */
#define LDP_HASH_THREADS 4
#define LDP_HASH_PARALLEL_MIN ((size_t)4 << 20) /* below this many bytes, one thread */

static int sha256(const uint8_t *data, size_t n, uint8_t out[32]) {
#if defined(LDP_SHA256_OPENSSL)
    unsigned int len = 0;
    return EVP_Digest(data, n, out, &len, EVP_sha256(), NULL) == 1 && len == 32 ? 0 : -1;
#else
    ldp_sha256(data, n, out);
    return 0;
#endif
}

typedef struct {
    const ldp_array *arrays;
    size_t n;
    const int *worker_of; /* worker index of each array */
    int worker;
    uint8_t (*digests)[32];
    int failed;
} hash_job;

static void *hash_worker(void *arg) {
    hash_job *job = (hash_job *)arg;
    size_t i;
    for (i = 0; i < job->n; i++)
        if (job->worker_of[i] == job->worker &&
            sha256(job->arrays[i].data, job->arrays[i].nbytes, job->digests[i]) != 0)
            job->failed = 1;
    return NULL;
}

#if defined(LDP_THREADS)
static int cmp_size_desc(const void *x, const void *y) {
    const size_t a = (*(const ldp_array *const *)x)->nbytes, b = (*(const ldp_array *const *)y)->nbytes;
    return a < b ? 1 : a > b ? -1 : 0;
}
#endif

/* digests[i] = SHA-256 of arrays[i]; LDP_OK or LDP_E_NOMEM */
static int hash_arrays(const ldp_array *arrays, size_t n, uint8_t (*digests)[32]) {
    hash_job jobs[LDP_HASH_THREADS];
    int workers = 1, w, rc = LDP_OK;
    int *worker_of = (int *)calloc(n ? n : 1, sizeof(int));
    if (worker_of == NULL) return LDP_E_NOMEM;
#if defined(LDP_THREADS)
    size_t i, total = 0;
    for (i = 0; i < n; i++) total += arrays[i].nbytes;
    if (total >= LDP_HASH_PARALLEL_MIN && n > 1) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        workers = cpus < 1 ? 1 : cpus > LDP_HASH_THREADS ? LDP_HASH_THREADS : (int)cpus;
        if ((size_t)workers > n) workers = (int)n;
    }
    if (workers > 1) { /* longest first, each to the least loaded worker */
        const ldp_array **order = (const ldp_array **)malloc(n * sizeof *order);
        size_t load[LDP_HASH_THREADS] = {0};
        if (order == NULL) {
            free(worker_of);
            return LDP_E_NOMEM;
        }
        for (i = 0; i < n; i++) order[i] = &arrays[i];
        qsort(order, n, sizeof *order, cmp_size_desc);
        for (i = 0; i < n; i++) {
            int best = 0;
            for (w = 1; w < workers; w++)
                if (load[w] < load[best]) best = w;
            worker_of[order[i] - arrays] = best;
            load[best] += order[i]->nbytes;
        }
        free(order);
    }
#endif
    for (w = 0; w < workers; w++) {
        jobs[w].arrays = arrays;
        jobs[w].n = n;
        jobs[w].worker_of = worker_of;
        jobs[w].worker = w;
        jobs[w].digests = digests;
        jobs[w].failed = 0;
    }
#if defined(LDP_THREADS)
    {
        pthread_t tid[LDP_HASH_THREADS];
        int started[LDP_HASH_THREADS] = {0};
        for (w = 1; w < workers; w++)
            started[w] = pthread_create(&tid[w], NULL, hash_worker, &jobs[w]) == 0;
        hash_worker(&jobs[0]);
        for (w = 1; w < workers; w++) {
            if (started[w]) pthread_join(tid[w], NULL);
            else hash_worker(&jobs[w]); /* no thread (resource limit): do its share here */
        }
    }
#else
    hash_worker(&jobs[0]);
#endif
    for (w = 0; w < workers; w++)
        if (jobs[w].failed) rc = LDP_E_NOMEM;
    free(worker_of);
    return rc;
}

/* ---- base64 (canonical spelling only) ------------------------------------------------------- */

/* Decodes standard padded base64 of exactly `want` bytes; 1 only if s is its one canonical
 * spelling (the re-encoding of the bytes), as bundle.py requires. */
static int b64_exact(const ldp_json *s, uint8_t *out, size_t want) {
    char again[128];
    size_t bin_len = 0;
    if (s->str_len >= sizeof again || strlen(s->str) != s->str_len) return 0;
    if (sodium_base642bin(out, want, s->str, s->str_len, NULL, &bin_len, NULL,
                          sodium_base64_VARIANT_ORIGINAL) != 0 ||
        bin_len != want)
        return 0;
    sodium_bin2base64(again, sizeof again, out, want, sodium_base64_VARIANT_ORIGINAL);
    return strlen(again) == s->str_len && memcmp(again, s->str, s->str_len) == 0;
}

/* ---- container ------------------------------------------------------------------------------ */

static int json_err(int rc, int syntax, int duplicate) {
    if (rc == LDP_JSON_E_NOMEM) return LDP_E_NOMEM;
    if (rc == LDP_JSON_E_DUPLICATE) return duplicate;
    return syntax;
}

static int cmp_layout(const void *x, const void *y) {
    const ldp_array *a = (const ldp_array *)x, *b = (const ldp_array *)y;
    int c;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    if (a->end != b->end) return a->end < b->end ? -1 : 1;
    c = memcmp(a->name, b->name, a->name_len < b->name_len ? a->name_len : b->name_len);
    if (c != 0) return c;
    return a->name_len < b->name_len ? -1 : (a->name_len > b->name_len);
}

typedef struct {
    const ldp_json_member *spec; /* manifest entry */
    int dtype;
    uint64_t nbytes;
} declared_array;

static int cmp_canonical(const void *x, const void *y) {
    const declared_array *a = (const declared_array *)x, *b = (const declared_array *)y;
    int c;
    if (a->dtype != b->dtype) return a->dtype < b->dtype ? -1 : 1;
    c = memcmp(a->spec->key, b->spec->key,
               a->spec->key_len < b->spec->key_len ? a->spec->key_len : b->spec->key_len);
    if (c != 0) return c;
    return a->spec->key_len < b->spec->key_len ? -1 : (a->spec->key_len > b->spec->key_len);
}

/* bundle.py canonical_header: the one header this metadata and these arrays may carry */
static int canonical_header(const ldp_json *meta, const ldp_json *declared, ldp_buf *out) {
    declared_array *order;
    size_t i, j;
    uint64_t offset = 0;
    order = (declared_array *)calloc(declared->n ? declared->n : 1, sizeof *order);
    if (order == NULL) return LDP_E_NOMEM;
    for (i = 0; i < declared->n; i++) {
        const ldp_json *spec = declared->members[i].value, *shape = ldp_json_get(spec, "shape");
        order[i].spec = &declared->members[i];
        order[i].dtype = dtype_of(ldp_json_get(spec, "dtype"));
        order[i].nbytes = ldp_dtype_size(order[i].dtype);
        for (j = 0; j < shape->n; j++)
            order[i].nbytes = mul_sat(order[i].nbytes, (uint64_t)shape->items[j]->int_value);
    }
    qsort(order, declared->n, sizeof *order, cmp_canonical);
    ldp_buf_puts(out, "{\"__metadata__\":{");
    for (i = 0; i < meta->n; i++) { /* in the file's order: the one documented freedom */
        if (i) ldp_buf_putc(out, ',');
        ldp_json_write_string(out, meta->members[i].key, meta->members[i].key_len, 0);
        ldp_buf_putc(out, ':');
        ldp_json_write_string(out, meta->members[i].value->str, meta->members[i].value->str_len, 0);
    }
    ldp_buf_putc(out, '}');
    for (i = 0; i < declared->n; i++) {
        const ldp_json *shape = ldp_json_get(order[i].spec->value, "shape");
        ldp_buf_putc(out, ',');
        ldp_json_write_string(out, order[i].spec->key, order[i].spec->key_len, 0);
        ldp_buf_puts(out, ":{\"dtype\":\"");
        ldp_buf_puts(out, ldp_dtype_code(order[i].dtype));
        ldp_buf_puts(out, "\",\"shape\":[");
        for (j = 0; j < shape->n; j++) {
            if (j) ldp_buf_putc(out, ',');
            ldp_buf_put_u64(out, (uint64_t)shape->items[j]->int_value);
        }
        ldp_buf_puts(out, "],\"data_offsets\":[");
        ldp_buf_put_u64(out, offset);
        ldp_buf_putc(out, ',');
        offset += order[i].nbytes; /* the layout check bounded every size by the file */
        ldp_buf_put_u64(out, offset);
        ldp_buf_puts(out, "]}");
    }
    ldp_buf_putc(out, '}');
    while (out->len % 8) ldp_buf_putc(out, ' ');
    free(order);
    return out->failed ? LDP_E_NOMEM : LDP_OK;
}

/* The manifest's declared entry must agree with the header entry: dtype and shape (integers). */
static int same_shape(const ldp_json *spec_shape, const ldp_array *a) {
    size_t j;
    if (spec_shape == NULL || spec_shape->type != LDP_JSON_ARRAY || spec_shape->n != (size_t)a->ndim)
        return 0;
    for (j = 0; j < spec_shape->n; j++) {
        const ldp_json *d = spec_shape->items[j];
        if (d->type != LDP_JSON_INT || !d->int_fits || d->int_value < 0 ||
            (uint64_t)d->int_value != a->shape[j])
            return 0;
    }
    return 1;
}

/* bundle.py _array_layout */
static int array_layout(ldp_bundle *b, const ldp_json *header, const ldp_json *declared,
                        uint64_t data_start) {
    const uint64_t data_len = b->size - data_start;
    size_t i, k = 0, n = header->n;
    uint64_t covered = 0;
    /* set(declared) == set(header without __metadata__) */
    if (ldp_json_get(header, "__metadata__") != NULL) n--;
    if (declared->n != n) return LDP_E_ARRAY_SET;
    for (i = 0; i < header->n; i++) {
        const ldp_json_member *m = &header->members[i];
        if (!key_is(m, "__metadata__") && ldp_json_get_n(declared, m->key, m->key_len) == NULL)
            return LDP_E_ARRAY_SET;
    }
    b->arrays = (ldp_array *)calloc(n ? n : 1, sizeof *b->arrays);
    if (b->arrays == NULL) return LDP_E_NOMEM;
    for (i = 0; i < header->n; i++) {
        const ldp_json_member *m = &header->members[i];
        const ldp_json *entry = m->value, *spec = ldp_json_get_n(declared, m->key, m->key_len), *dt,
                       *shape, *off, *digest;
        ldp_array *a = &b->arrays[k];
        uint64_t nbytes;
        size_t j;
        if (key_is(m, "__metadata__")) continue;
        if (entry->type != LDP_JSON_OBJECT || entry->n != 3 || spec == NULL ||
            spec->type != LDP_JSON_OBJECT)
            return LDP_E_ARRAY_ENTRY;
        dt = ldp_json_get(entry, "dtype");
        shape = ldp_json_get(entry, "shape");
        off = ldp_json_get(entry, "data_offsets");
        if (dt == NULL || shape == NULL || off == NULL) return LDP_E_ARRAY_ENTRY;
        a->dtype = dtype_of(dt);
        if (a->dtype < 0 || shape->type != LDP_JSON_ARRAY || shape->n > LDP_MAX_NDIM ||
            off->type != LDP_JSON_ARRAY || off->n != 2)
            return LDP_E_ARRAY_ENTRY;
        for (j = 0; j < shape->n; j++) {
            const ldp_json *d = shape->items[j];
            if (d->type != LDP_JSON_INT || !d->int_fits || d->int_value < 0 ||
                (uint64_t)d->int_value > MAX_DIM)
                return LDP_E_ARRAY_ENTRY;
            a->shape[j] = (uint64_t)d->int_value;
        }
        a->ndim = (int)shape->n;
        for (j = 0; j < 2; j++) {
            const ldp_json *o = off->items[j];
            if (o->type != LDP_JSON_INT || (o->int_fits && o->int_value < 0) ||
                (!o->int_fits && o->num_text[0] == '-'))
                return LDP_E_ARRAY_ENTRY;
        }
        if (dtype_of(ldp_json_get(spec, "dtype")) != a->dtype ||
            !same_shape(ldp_json_get(spec, "shape"), a))
            return LDP_E_ARRAY_DTYPE_SHAPE;
        digest = ldp_json_get(spec, "sha256");
        if (digest == NULL || digest->type != LDP_JSON_STRING || digest->str_len != 64)
            return LDP_E_ARRAY_HASH_MALFORMED;
        /* integers beyond int64 cannot be offsets of a file of at most 64 GiB */
        if (!off->items[0]->int_fits || !off->items[1]->int_fits) return LDP_E_ARRAY_OFFSETS;
        a->start = (uint64_t)off->items[0]->int_value;
        a->end = (uint64_t)off->items[1]->int_value;
        nbytes = ldp_dtype_size(a->dtype);
        for (j = 0; j < shape->n; j++) nbytes = mul_sat(nbytes, a->shape[j]);
        if (a->end < a->start || a->end - a->start != nbytes) return LDP_E_ARRAY_OFFSETS;
        if (a->end > data_len) return LDP_E_TRUNCATED;
        if ((data_start + a->start) % ldp_dtype_size(a->dtype) != 0) return LDP_E_ARRAY_ALIGNMENT;
        a->name = m->key;
        a->name_len = m->key_len;
        a->sha256 = digest->str;
        a->nbytes = (size_t)nbytes;
        a->data = b->data + data_start + a->start;
        k++;
    }
    b->n_arrays = k;
    qsort(b->arrays, k, sizeof *b->arrays, cmp_layout);
    for (i = 0; i < k; i++) { /* contiguous, no overlap, no gap */
        if (b->arrays[i].start != covered) return LDP_E_ARRAY_OVERLAP;
        covered = b->arrays[i].end;
    }
    if (covered != data_len) return covered > data_len ? LDP_E_TRUNCATED : LDP_E_TRAILING_DATA;
    return LDP_OK;
}

/* numpy bools must be 0 or 1 (bundle.py _load) */
static int check_bool_values(const ldp_array *a) {
    size_t j;
    if (a->dtype != LDP_DT_BOOL) return LDP_OK;
    for (j = 0; j < a->nbytes; j++)
        if (a->data[j] > 1) return LDP_E_BOOL_VALUES;
    return LDP_OK;
}

static int trusted(const uint8_t pub[32], const uint8_t (*keys)[32], size_t n_keys) {
    size_t i;
    for (i = 0; i < n_keys; i++)
        if (memcmp(keys[i], pub, 32) == 0) return 1;
    return 0;
}

/* bundle.py _check_manifest with expect_mechanism = the mechanisms on the SanText engine:
 * b->manifest, parsed from text[0..len), is the canonical manifest of an ldptext bundle of one of
 * them; *declared is its array table */
static int check_manifest(ldp_bundle *b, const char *text, size_t len, const ldp_json **declared) {
    const ldp_json *version, *mech;
    ldp_buf canon;
    int rc;
    if (b->manifest->type != LDP_JSON_OBJECT ||
        !str_is(ldp_json_get(b->manifest, "format"), FORMAT))
        return LDP_E_FORMAT_TAG;
    version = ldp_json_get(b->manifest, "format_version");
    if (version == NULL || version->type != LDP_JSON_INT || !version->int_fits ||
        version->int_value != 1)
        return LDP_E_FORMAT_VERSION;
    ldp_buf_init(&canon);
    rc = ldp_json_write_canonical(&canon, b->manifest);
    if (rc == LDP_JSON_OK && (canon.len != len || memcmp(canon.data, text, canon.len) != 0))
        rc = LDP_E_MANIFEST_NONCANONICAL;
    else if (rc != LDP_JSON_OK)
        rc = LDP_E_NOMEM;
    ldp_buf_free(&canon);
    if (rc != LDP_OK) return rc;
    mech = ldp_json_get(b->manifest, "mechanism");
    b->mechanism = 0;
    for (int m = 1; m < LDP_MECH_COUNT; m++) /* the generated table (mechanisms.h) */
        if (str_is(mech, LDP_MECHANISMS[m].name)) b->mechanism = m;
    if (b->mechanism == 0)
        return LDP_E_MECHANISM; /* unknown, or one the Python SDK alone runs (cmp, dpbart, ...) */
    *declared = ldp_json_get(b->manifest, "arrays");
    if (*declared == NULL || (*declared)->type != LDP_JSON_OBJECT) return LDP_E_NO_ARRAY_TABLE;
    return LDP_OK;
}

/* bundle.py _load + read_bundle with expect_mechanism = (santext, santext+) */
static int verify_container(ldp_bundle *b, const uint8_t (*keys)[32], size_t n_keys) {
    uint64_t hlen;
    const char *raw;
    const ldp_json *header, *meta, *man_str, *sig, *pub, *declared = NULL;
    int rc, valid = 0;
    size_t i;
    uint8_t pub_raw[32], sig_raw[64];
    ldp_buf canon;

    if (b->size == 0) return LDP_E_FILE_EMPTY;
    if ((uint64_t)b->size > MAX_FILE) return LDP_E_FILE_TOO_LARGE;
    if (b->size < 8) return LDP_E_TRUNCATED;
    hlen = le64(b->data);
    if (hlen < 2 || hlen > MAX_HEADER) return LDP_E_HEADER_LENGTH;
    if (8 + hlen > (uint64_t)b->size) return LDP_E_HEADER_INCOMPLETE;
    raw = (const char *)b->data + 8;
    if (raw[0] != '{') return LDP_E_HEADER_JSON;
    rc = ldp_json_parse(raw, (size_t)hlen, &b->header_doc, &header);
    if (rc != LDP_JSON_OK) return json_err(rc, LDP_E_HEADER_JSON, LDP_E_HEADER_DUPLICATE_KEY);
    if (header->type != LDP_JSON_OBJECT) return LDP_E_HEADER_JSON;

    /* _parse_manifest */
    meta = ldp_json_get(header, "__metadata__");
    man_str = ldp_json_get(meta, META_MANIFEST);
    if (meta == NULL || meta->type != LDP_JSON_OBJECT || man_str == NULL ||
        man_str->type != LDP_JSON_STRING)
        return LDP_E_NO_MANIFEST;
    for (i = 0; i < meta->n; i++)
        if (!key_is(&meta->members[i], META_MANIFEST) && !key_is(&meta->members[i], META_SIGNATURE) &&
            !key_is(&meta->members[i], META_PUBKEY))
            return LDP_E_METADATA_FIELDS;
    for (i = 0; i < meta->n; i++)
        if (meta->members[i].value->type != LDP_JSON_STRING) return LDP_E_METADATA_TYPE;
    rc = ldp_json_parse(man_str->str, man_str->str_len, &b->manifest_doc, &b->manifest);
    if (rc == LDP_JSON_E_UNICODE) return LDP_E_MANIFEST_UNICODE;
    if (rc != LDP_JSON_OK) return json_err(rc, LDP_E_MANIFEST_JSON, LDP_E_MANIFEST_DUPLICATE_KEY);

    /* _check_signature, then _enforce_trust: trust before validity */
    sig = ldp_json_get(meta, META_SIGNATURE);
    pub = ldp_json_get(meta, META_PUBKEY);
    if (sig == NULL && pub == NULL) return LDP_E_UNSIGNED;
    if (sig == NULL || pub == NULL) return LDP_E_SIGNATURE_INCOMPLETE;
    if (!b64_exact(pub, pub_raw, 32) || !b64_exact(sig, sig_raw, 64))
        return LDP_E_SIGNATURE_MALFORMED;
    valid = crypto_sign_verify_detached(sig_raw, (const unsigned char *)man_str->str,
                                        man_str->str_len, pub_raw) == 0;
    if (!trusted(pub_raw, keys, n_keys)) return LDP_E_UNTRUSTED_KEY;
    if (!valid) return LDP_E_BAD_SIGNATURE;
    memcpy(b->signer, pub_raw, 32);
    b->has_signer = 1;

    rc = check_manifest(b, man_str->str, man_str->str_len, &declared);
    if (rc != LDP_OK) return rc;

    /* _array_layout, hashes, boolean values */
    rc = array_layout(b, header, declared, 8 + hlen);
    if (rc != LDP_OK) return rc;
    {
        uint8_t (*digests)[32] = (uint8_t (*)[32])malloc((b->n_arrays ? b->n_arrays : 1) * 32);
        if (digests == NULL) return LDP_E_NOMEM;
        rc = hash_arrays(b->arrays, b->n_arrays, digests);
        for (i = 0; i < b->n_arrays && rc == LDP_OK; i++) {
            const ldp_array *a = &b->arrays[i];
            char hex[2 * 32 + 1];
            sodium_bin2hex(hex, sizeof hex, digests[i], 32);
            if (memcmp(hex, a->sha256, 64) != 0) rc = LDP_E_ARRAY_HASH;
            else rc = check_bool_values(a);
        }
        free(digests);
        if (rc != LDP_OK) return rc;
    }
    /* last, as in bundle.py: every other byte of the header is the one the writer produces */
    ldp_buf_init(&canon);
    rc = canonical_header(meta, declared, &canon);
    if (rc == LDP_OK && (canon.len != hlen || memcmp(canon.data, raw, canon.len) != 0))
        rc = LDP_E_HEADER_NONCANONICAL;
    ldp_buf_free(&canon);
    return rc;
}

/* ---- SanText schema and semantics ------------------------------------------------------------ */

/* santext_tables.py STORED_ARRAYS, in schema order, with their dtypes: the sampler's, and the
 * narrower one a compact bundle may store instead (widened exactly at load; -1: none), and whether
 * a bundle may lack it (OPTIONAL_ARRAYS: the tail clusters, absent from older bundles) */
static const struct {
    const char *name;
    int dtype, narrow, optional;
} SCHEMA[] = {{"emb_q", LDP_DT_I8, -1, 0},           {"emb_scale", LDP_DT_F32, -1, 0},
              {"outputs", LDP_DT_I32, -1, 0},         {"head_ids", LDP_DT_I32, LDP_DT_U16, 0},
              {"alias_threshold", LDP_DT_U32, -1, 0}, {"alias_index", LDP_DT_U16, LDP_DT_U8, 0},
              {"accept_gamma", LDP_DT_F64, LDP_DT_F32, 0}, {"tail_floor", LDP_DT_F64, -1, 0},
              {"keep_row", LDP_DT_U8, -1, 0},         {"sensitive", LDP_DT_BOOL, -1, 0},
              {"valid_input", LDP_DT_BOOL, -1, 0},    {"tail_cluster", LDP_DT_U8, -1, 1},
              {"cluster_gamma", LDP_DT_U8, -1, 1}};
enum { S_EMBQ, S_SCALE, S_OUT, S_HEAD, S_THR, S_ALIAS, S_GAMMA, S_FLOOR, S_KEEP, S_SENS, S_VALID,
       S_CLUSTER, S_CGAMMA, S_COUNT };

/* The sampler reads a compact bundle's narrow arrays where they are stored (santext_sampler.h):
 * each of head_ids, alias_index and accept_gamma is given to the table in its stored form. */
static void table_forms(ldp_santext_table *t, const ldp_array *head, const ldp_array *alias,
                        const ldp_array *gamma) {
    t->head_ids = head->dtype == LDP_DT_U16 ? NULL : (const int32_t *)head->data;
    t->head_ids_u16 = head->dtype == LDP_DT_U16 ? (const uint16_t *)head->data : NULL;
    t->alias_index = alias->dtype == LDP_DT_U8 ? NULL : (const uint16_t *)alias->data;
    t->alias_index_u8 = alias->dtype == LDP_DT_U8 ? alias->data : NULL;
    t->accept_gamma = gamma->dtype == LDP_DT_F32 ? NULL : (const double *)gamma->data;
    t->accept_gamma_f32 = gamma->dtype == LDP_DT_F32 ? (const float *)gamma->data : NULL;
}

/* What one pass over the table's rows found (check_tables reports them in the loader's order). */
typedef struct {
    int head, domain, alias, gamma, norm;
} row_findings;

/* Head ids in range and strictly increasing within a row (head), every head candidate an output
 * and every output a valid input (domain), alias slots <= K (alias), exponents finite and >= 0
 * (gamma), a row minimum of exactly 0, the tail slot counted when the tail exists (norm). Each
 * row is widened into a K + 1 scratch row first, whatever its stored form. LDP_OK or
 * LDP_E_NOMEM. */
static int scan_rows(const ldp_santext_table *t, const uint8_t *is_out, const uint8_t *valid,
                     row_findings *f) {
    const size_t v = (size_t)t->n_rows, k = (size_t)t->head_size, slots = k + 1;
    const int has_tail = t->n_outputs > t->head_size;
    int32_t *head = (int32_t *)malloc(k * sizeof(int32_t));
    uint16_t *al = (uint16_t *)malloc(slots * sizeof(uint16_t));
    double *g = (double *)malloc(slots * sizeof(double));
    size_t i, j;
    memset(f, 0, sizeof *f);
    if (head == NULL || al == NULL || g == NULL) {
        free(head);
        free(al);
        free(g);
        return LDP_E_NOMEM;
    }
    for (i = 0; i < v && !f->head; i++) {
        ldp_table_head_row(t, (int32_t)i, head);
        for (j = 0; j < k; j++) {
            if (head[j] < 0 || (size_t)head[j] >= v || (j > 0 && head[j] <= head[j - 1])) {
                f->head = 1;
                break;
            }
            f->domain |= !is_out[head[j]];
        }
    }
    for (i = 0; i < v && !f->head && !f->domain; i++)
        if (is_out[i] && !valid[i]) f->domain = 1;
    for (i = 0; i < v; i++) {
        double lo = INFINITY;
        ldp_table_alias_row(t, (int32_t)i, al);
        ldp_table_gamma_row(t, (int32_t)i, g);
        /* branch-free per slot (a conditional minimum mispredicts on every row) */
        for (j = 0; j < slots; j++) {
            f->alias |= al[j] > k;
            f->gamma |= !(isfinite(g[j]) && g[j] >= 0);
        }
        for (j = 0; j < k; j++) lo = g[j] < lo ? g[j] : lo;
        if (has_tail && g[k] < lo) lo = g[k]; /* the tail slot, when the tail exists */
        f->norm |= lo != 0.0;
    }
    free(head);
    free(al);
    free(g);
    return LDP_OK;
}

/* float(x) of a manifest value as santext.py reads it: a JSON number (Python would also take a
 * bool or a numeric string; a bundle writer never writes those, and this loader refuses them) */
static int number_at(const ldp_json *v, double *out) {
    if (!ldp_json_is_number(v)) return 0;
    *out = ldp_json_number(v);
    return 1;
}

static int is_custext(const ldp_bundle *b) {
    return b->mechanism == LDP_MECH_CUSTEXT || b->mechanism == LDP_MECH_CUSTEXT_PLUS;
}

/* An optional number: absent or null leaves NaN; anything else must be a number. */
static int optional_number(const ldp_json *v, double *out) {
    *out = NAN;
    return v == NULL || v->type == LDP_JSON_NULL || number_at(v, out);
}

/* A count: a JSON integer >= 0, or an integral float (verbatim.py _count). */
static int count_at(const ldp_json *v, double *out) {
    if (v != NULL && v->type == LDP_JSON_INT && v->int_fits && v->int_value >= 0) {
        *out = (double)v->int_value;
        return 1;
    }
    return number_at(v, out) && *out >= 0.0 && *out == floor(*out);
}

/* verbatim.py quantile_rank: the 1-based rank of the q quantile of n sorted values */
static double quantile_rank(double q, double n) {
    return fmin(n, fmax(1.0, ceil(q * n - 1e-9)));
}

/* verbatim.py VerbatimRate.from_manifest: the cap and the tail statistics of privacy.verbatim
 * (NaN where not stated; all four tail fields or none), and every consistency rule between them,
 * the largest rate and the median. LDP_OK or LDP_E_PARAMETER_MISMATCH. */
static int read_verbatim_tail(ldp_bundle *b, const ldp_json *verbatim) {
    static const char *const tail_keys[4] = {"p90", "p99", "above_0_5", "above_0_9"};
    const ldp_json *cap = ldp_json_get(verbatim, "cap"), *v;
    double *tail[4], inputs, level[2] = {0.5, 0.9}, q[2] = {0.9, 0.99}, *count[2], *pct[2];
    int stated = 0, i, j;
    tail[0] = &b->verbatim_p90, tail[1] = &b->verbatim_p99;
    tail[2] = &b->verbatim_above_0_5, tail[3] = &b->verbatim_above_0_9;
    if (!count_at(ldp_json_get(verbatim, "inputs"), &inputs)) return LDP_E_PARAMETER_MISMATCH;
    if (cap != NULL && cap->type != LDP_JSON_NULL) {
        if (!number_at(cap, &b->verbatim_cap) || !(b->verbatim_cap > 0.0 && b->verbatim_cap <= 1.0) ||
            b->verbatim_max > b->verbatim_cap)
            return LDP_E_PARAMETER_MISMATCH;
    }
    for (i = 0; i < 4; i++) {
        v = ldp_json_get(verbatim, tail_keys[i]);
        if (v == NULL || v->type == LDP_JSON_NULL) continue;
        stated++;
        if (!(i < 2 ? number_at(v, tail[i]) : count_at(v, tail[i]))) return LDP_E_PARAMETER_MISMATCH;
    }
    if (stated == 0) return LDP_OK;
    if (stated != 4) return LDP_E_PARAMETER_MISMATCH; /* a partial tail */
    if (!(b->verbatim_median <= b->verbatim_p90 && b->verbatim_p90 <= b->verbatim_p99 &&
          b->verbatim_p99 <= b->verbatim_max))
        return LDP_E_PARAMETER_MISMATCH;
    if (!(b->verbatim_above_0_9 <= b->verbatim_above_0_5 && b->verbatim_above_0_5 <= inputs))
        return LDP_E_PARAMETER_MISMATCH;
    if (inputs == 0.0)
        return b->verbatim_max != 0.0 || b->verbatim_p90 != 0.0 || b->verbatim_p99 != 0.0 ||
                       b->verbatim_above_0_5 != 0.0
                   ? LDP_E_PARAMETER_MISMATCH
                   : LDP_OK;
    count[0] = &b->verbatim_above_0_5, count[1] = &b->verbatim_above_0_9;
    pct[0] = &b->verbatim_p90, pct[1] = &b->verbatim_p99;
    for (i = 0; i < 2; i++) {
        /* the largest rate is one of the rates: a level at or below it has a count >= 1 */
        if ((*count[i] >= 1.0) != (b->verbatim_max >= level[i])) return LDP_E_PARAMETER_MISMATCH;
        for (j = 0; j < 2; j++) { /* p_q has rank r: >= n - r + 1 rates at or above it, <= n - r above */
            const double r = quantile_rank(q[j], inputs);
            if ((*pct[j] >= level[i] && *count[i] < inputs - r + 1.0) ||
                (*pct[j] < level[i] && *count[i] > inputs - r))
                return LDP_E_PARAMETER_MISMATCH;
        }
    }
    return LDP_OK;
}

/* A stated count (optional) equals the tables' one: 1, else 0 (a non-count or another number). */
static int stated_count_is(const ldp_json *x, double actual) {
    double stated;
    return x == NULL || (number_at(x, &stated) && stated == actual);
}

/* description.py check_description: the manifest's descriptive numbers are the tables' (each
 * optional; a stated one is checked, so that `bundle inspect` and a report never show a number the
 * tables contradict): vocab.size, outputs, sensitive, non_sensitive, kept_in_clear and dim; the
 * rows privacy.verbatim is taken over (valid inputs not kept in the clear); TEM's rows with a far
 * set; the source's word count (the rows, less the out-of-vocabulary row the builder adds where
 * sources.embeddings.oov_row names one); and a stated privacy.notion is the mechanism's
 * (mechanisms.h, or the spelling older bundles use). The fields that need the tokenizer are
 * check_rendering's. LDP_OK or LDP_E_PARAMETER_MISMATCH. */
static int check_description(const ldp_bundle *b, int64_t v, int64_t o, int64_t m) {
    static const char *const keys[6] = {"size",          "outputs",       "sensitive",
                                        "non_sensitive", "kept_in_clear", "dim"};
    const ldp_json *vocab = ldp_json_get(b->manifest, "vocab");
    const ldp_json *privacy = ldp_json_get(b->manifest, "privacy");
    const ldp_json *notion = privacy != NULL ? ldp_json_get(privacy, "notion") : NULL;
    const ldp_json *source = ldp_json_get(ldp_json_get(b->manifest, "sources"), "embeddings");
    const ldp_mechanism_statement *stmt = &LDP_MECHANISMS[b->mechanism];
    double actual[6];
    int64_t i, sensitive = 0, kept = 0, rated = 0, far = 0;
    int j;
    for (i = 0; i < v; i++) {
        sensitive += b->sensitive[i] != 0;
        kept += b->table.keep_row[i] != 0;
        rated += b->valid_input[i] && !b->table.keep_row[i];
        far += b->bot_count != NULL && b->valid_input[i] && b->bot_count[i] > 0;
    }
    actual[0] = (double)v, actual[1] = (double)o, actual[2] = (double)sensitive;
    actual[3] = actual[4] = (double)kept;
    actual[5] = (double)m; /* (the sampler's rows may be padded: table.dim is their stride) */
    if (vocab != NULL && vocab->type == LDP_JSON_OBJECT)
        for (j = 0; j < 6; j++)
            if (!stated_count_is(ldp_json_get(vocab, keys[j]), actual[j])) return LDP_E_PARAMETER_MISMATCH;
    if (!stated_count_is(ldp_json_get(ldp_json_get(privacy, "verbatim"), "inputs"), (double)rated))
        return LDP_E_PARAMETER_MISMATCH;
    if (b->mechanism == LDP_MECH_TEM &&
        !stated_count_is(ldp_json_get(privacy, "rows_with_far_outputs"), (double)far))
        return LDP_E_PARAMETER_MISMATCH;
    if (source != NULL && source->type == LDP_JSON_OBJECT) {
        const ldp_json *oov = ldp_json_get(source, "oov_row");
        const int added = oov != NULL && oov->type != LDP_JSON_NULL;
        if (!stated_count_is(ldp_json_get(source, "vocab_size"), (double)(v - added)))
            return LDP_E_PARAMETER_MISMATCH;
    }
    if (notion != NULL && !str_is(notion, stmt->notion) &&
        !(stmt->legacy_notion != NULL && str_is(notion, stmt->legacy_notion)))
        return LDP_E_PARAMETER_MISMATCH;
    return LDP_OK;
}

/* Sanitizer.__init__ / TEMSanitizer.__init__ / CusTextSanitizer.__init__: the manifest's numbers.
 * Values the tables must confirm (eps0 = ln(1/p), gamma against beta, the similarity's law) are
 * checked by ldp_check_realised. */
static int read_params(ldp_bundle *b) {
    const ldp_json *params = ldp_json_get(b->manifest, "params"), *w, *e0, *k;
    const ldp_json *privacy = ldp_json_get(b->manifest, "privacy");
    if (params == NULL || params->type != LDP_JSON_OBJECT) return LDP_E_PARAMS;
    if (!number_at(ldp_json_get(params, "epsilon"), &b->epsilon)) return LDP_E_PARAMS;
    w = ldp_json_get(params, "w");
    e0 = ldp_json_get(params, "epsilon0");
    k = ldp_json_get(params, "head_size");
    if (!optional_number(ldp_json_get(params, "p"), &b->p)) return LDP_E_PARAMS;
    if (w != NULL && w->type != LDP_JSON_NULL && !ldp_json_is_number(w)) return LDP_E_PARAMS;
    b->epsilon0 = 0.0;
    if (e0 != NULL && !number_at(e0, &b->epsilon0)) return LDP_E_PARAMS;
    if (k == NULL || k->type != LDP_JSON_INT || !k->int_fits) return LDP_E_PARAMS;
    b->head_size = k->int_value;
    if (!number_at(ldp_json_get(ldp_json_get(b->manifest, "numeric"), "max_relative_error"),
                   &b->tolerance))
        return LDP_E_PARAMS;
    /* D_max: stated by SanText and TEM (their worst case); CusText states none */
    if (is_custext(b)) {
        if (!optional_number(ldp_json_get(privacy, "d_max"), &b->d_max)) return LDP_E_PARAMS;
    } else if (!number_at(ldp_json_get(privacy, "d_max"), &b->d_max)) {
        return LDP_E_PARAMS;
    }
    /* the stated verbatim rate (SanText, TEM, CusText): the largest checked on every row before its
     * first draw, the median against random rows at open (check.c); NaN where a bundle older than
     * it states none */
    b->verbatim_max = b->verbatim_median = NAN;
    b->verbatim_cap = b->verbatim_p90 = b->verbatim_p99 = NAN;
    b->verbatim_above_0_5 = b->verbatim_above_0_9 = NAN;
    {
        const ldp_json *verbatim = ldp_json_get(privacy, "verbatim");
        if (verbatim != NULL && (!number_at(ldp_json_get(verbatim, "max"), &b->verbatim_max) ||
                                 !number_at(ldp_json_get(verbatim, "median"), &b->verbatim_median)))
            return LDP_E_PARAMS;
        /* verbatim.py VerbatimRate.from_manifest: a probability summary, its cap and its tail */
        if (verbatim != NULL && !(b->verbatim_median >= 0.0 && b->verbatim_median <= b->verbatim_max &&
                                  b->verbatim_max <= 1.0))
            return LDP_E_PARAMETER_MISMATCH;
        if (verbatim != NULL) {
            const int rc = read_verbatim_tail(b, verbatim);
            if (rc != LDP_OK) return rc;
        }
    }
    /* the stated median's verdict; the checks decide it in full (check.c ldp_near_identity) */
    b->weak_privacy = b->verbatim_median >= LDP_NEAR_IDENTITY_MEDIAN;
    b->gamma = b->beta = NAN;
    if (b->mechanism == LDP_MECH_TEM &&
        (!number_at(ldp_json_get(params, "gamma"), &b->gamma) ||
         !optional_number(ldp_json_get(params, "beta"), &b->beta)))
        return LDP_E_PARAMS;
    if (is_custext(b)) {
        const ldp_json *kk = ldp_json_get(params, "k"), *sim = ldp_json_get(params, "similarity");
        if (kk == NULL || kk->type != LDP_JSON_INT || !kk->int_fits || sim == NULL ||
            sim->type != LDP_JSON_STRING)
            return LDP_E_PARAMS;
        b->k = kk->int_value;
        /* an unknown similarity is a stated parameter no table realises (custext.py) */
        if (str_is(sim, "cosine")) b->cosine = 1;
        else if (str_is(sim, "euclidean")) b->cosine = 0;
        else return LDP_E_PARAMETER_MISMATCH;
    }
    /* Sanitizer._check_parameters and the runtimes' own */
    if (!(isfinite(b->epsilon) && b->epsilon > 0)) return LDP_E_EPSILON;
    if (b->mechanism == LDP_MECH_SANTEXT_PLUS && !(b->p > 0 && b->p <= 1)) return LDP_E_P;
    if (!(isfinite(b->tolerance) && b->tolerance >= 0 && b->tolerance <= STATED_MAX_TOLERANCE))
        return LDP_E_TOLERANCE;
    if (b->mechanism == LDP_MECH_TEM && !(isfinite(b->gamma) && b->gamma > 0 && isfinite(b->d_max)))
        return LDP_E_TEM_TABLES;
    return LDP_OK;
}

/* TEMSanitizer._check_tables: bot_gamma float64 (V,) finite and >= 0, bot_count int32 (V,) in
 * [0, |O|] (that TEM keeps no row is check_tables' keep rule). */
static int check_tem_arrays(ldp_bundle *b, uint64_t v, uint64_t o) {
    const ldp_array *g = ldp_bundle_array(b, "bot_gamma"), *c = ldp_bundle_array(b, "bot_count");
    size_t i;
    if (g == NULL || c == NULL) return LDP_E_MISSING_ARRAY;
    if (g->dtype != LDP_DT_F64 || c->dtype != LDP_DT_I32) return LDP_E_SCHEMA_DTYPE;
    if (g->ndim != 1 || g->shape[0] != v || c->ndim != 1 || c->shape[0] != v)
        return LDP_E_SCHEMA_SHAPE;
    b->bot_gamma = (const double *)g->data;
    b->bot_count = (const int32_t *)c->data;
    for (i = 0; i < v; i++)
        if (!(isfinite(b->bot_gamma[i]) && b->bot_gamma[i] >= 0) || b->bot_count[i] < 0 ||
            (uint64_t)b->bot_count[i] > o)
            return LDP_E_TEM_TABLES;
    return LDP_OK;
}

/* CusTextSanitizer._check_tables: group_id int32 (V,); a valid input is kept exactly when it lies
 * outside every group (CusText+ stop words; which rows may be kept at all is check_tables' keep
 * rule); every output is in a group; no row proposes the tail or an output of another group; every
 * group has at least K outputs. Sets b->group_size and b->n_groups (check.c reads them). */
static int check_custext_arrays(ldp_bundle *b, const ldp_santext_table *t, const uint8_t *valid) {
    const ldp_array *a = ldp_bundle_array(b, "group_id");
    const size_t v = (size_t)t->n_rows, k = (size_t)t->head_size;
    const uint8_t *keep = t->keep_row;
    size_t i, j;
    int32_t top = -1;
    if (a == NULL) return LDP_E_MISSING_ARRAY;
    if (a->dtype != LDP_DT_I32) return LDP_E_SCHEMA_DTYPE;
    if (a->ndim != 1 || a->shape[0] != (uint64_t)v) return LDP_E_SCHEMA_SHAPE;
    b->group_id = (const int32_t *)a->data;
    for (i = 0; i < v; i++) {
        if (valid[i] && (keep[i] != 0) != (b->group_id[i] < 0)) return LDP_E_CUSTEXT_TABLES;
    }
    for (i = 0; i < (size_t)t->n_outputs; i++)
        if (b->group_id[t->outputs[i]] < 0) return LDP_E_CUSTEXT_TABLES;
    for (i = 0; i < v; i++) {
        if (ldp_table_realised_mass(t, (int32_t)i, k) != 0) return LDP_E_CUSTEXT_TABLES;
        if (!valid[i] || keep[i]) continue;
        for (j = 0; j < k; j++)
            if (b->group_id[ldp_head_id(t, i * k + j)] != b->group_id[i] &&
                ldp_table_realised_mass(t, (int32_t)i, j) != 0)
                return LDP_E_CUSTEXT_TABLES;
    }
    if (b->k < 1) return LDP_E_CUSTEXT_TABLES;
    /* np.bincount over the outputs' groups: every id up to the largest is a group of >= K */
    for (i = 0; i < (size_t)t->n_outputs; i++)
        if (b->group_id[t->outputs[i]] > top) top = b->group_id[t->outputs[i]];
    b->n_groups = (size_t)(top + 1);
    b->group_size = (uint64_t *)calloc(b->n_groups ? b->n_groups : 1, sizeof *b->group_size);
    if (b->group_size == NULL) return LDP_E_NOMEM;
    for (i = 0; i < (size_t)t->n_outputs; i++) b->group_size[b->group_id[t->outputs[i]]]++;
    for (i = 0; i < b->n_groups; i++)
        if (b->group_size[i] < (uint64_t)b->k) return LDP_E_CUSTEXT_TABLES;
    return LDP_OK;
}

/* The sampler's copy of the rows goes on huge pages where the system gives them on request (Linux
 * THP "madvise" mode): tail candidates are rows at random, and with 4 KiB pages nearly every one
 * costs a TLB miss and a page walk on top of its cache misses (MiniLM's 11.7 MB of rows span 2,900
 * pages, more than the second-level TLB holds). From one huge page of rows on, so the copy is made
 * even where the stored rows already start on cache lines; only the whole 2 MiB pages of the copy,
 * so the resident size does not grow. Where the hint does not exist, plain malloc; freed with
 * free() either way. Interleaved A/B, 200,000 Lee ids, CPU time, best of 7, us/token, 4 KiB vs
 * 2 MiB pages: MiniLM default split eps = 10 0.255 vs 0.212, w = 0.9 eps = 10 0.175 vs 0.155,
 * eps = 15 0.182 vs 0.162; GloVe-50k (3.2 MB of rows) unchanged. */
#if defined(LDP_HAVE_MMAP) && defined(MADV_HUGEPAGE) && !defined(__EMSCRIPTEN__)
#define LDP_HAVE_HUGE_PAGES 1
#define LDP_HUGE_PAGE ((size_t)2 << 20)
#else
#define LDP_HUGE_PAGE ((size_t)0) /* none */
#endif

static int rows_on_huge_pages(size_t bytes) {
    return LDP_HUGE_PAGE != 0 && bytes >= LDP_HUGE_PAGE && bytes <= SIZE_MAX - LDP_HUGE_PAGE;
}

static void *alloc_rows(size_t bytes) {
#if defined(LDP_HAVE_HUGE_PAGES)
    if (rows_on_huge_pages(bytes)) {
        void *p = NULL;
        if (posix_memalign(&p, LDP_HUGE_PAGE, bytes) == 0) {
            /* a hint (refused, the pages stay small), for the whole huge pages only: the rest
             * stays on small pages, so the resident size does not grow */
            (void)madvise(p, bytes / LDP_HUGE_PAGE * LDP_HUGE_PAGE, MADV_HUGEPAGE);
            return p;
        }
    }
#endif
    return malloc(bytes);
}

/* The sampler reads a candidate's whole row of codes for each distance (six cache lines at
 * m = 384, one at m = 50), and the stored rows start wherever the safetensors layout put emb_q:
 * a 384-byte row then spans seven lines, a 50-byte one two out of three times. Where the stored
 * codes are a read-only file mapping (ldp_bundle_open's, or the Python runtime's, which releases
 * its pages after the adoption: host.h, library.py), the sampler gets a copy whose rows start on
 * a cache line, each padded with zero codes to a multiple of 64 (zeros add nothing to a dot
 * product or a squared norm, so every distance and draw is the same), and the mapping's pages of
 * the original are released: the resident size grows by the padding only. Private copies
 * (open_memory, the web wrapper's heap) are used in place: there the copy would be resident
 * twice. Interleaved A/B, 200,000 Lee ids, us/token, stored rows vs the copy: MiniLM default split
 * eps = 10 0.246 vs 0.229, eps = 15 0.187 vs 0.170; GloVe-50k (rows 50 -> 64) eps = 3 0.486 vs
 * 0.446, eps = 10 0.581 vs 0.535. Out of memory keeps the stored rows (same draws, slower). */
static void align_rows(ldp_bundle *b, const int8_t *q, uint64_t v, uint64_t m) {
    const size_t line = 64, stride = (size_t)((m + line - 1) / line * line);
    uint8_t *raw, *rows;
    size_t r;
    if (b->map == NULL && !b->adopted) return;
    if (v == 0 || stride > SIZE_MAX / (size_t)v - line) return;
    /* already on cache lines and too small for a huge page (an adopted bundle copies anyway: the
     * host releases its pages) */
    if (!b->adopted && (uintptr_t)q % line == 0 && stride == (size_t)m &&
        !rows_on_huge_pages((size_t)v * stride + line))
        return;
    raw = (uint8_t *)alloc_rows((size_t)v * stride + line);
    if (raw == NULL) return;
    rows = raw + (line - (uintptr_t)raw % line) % line;
    for (r = 0; r < (size_t)v; r++) {
        memcpy(rows + r * stride, q + r * (size_t)m, (size_t)m);
        memset(rows + r * stride + (size_t)m, 0, stride - (size_t)m);
    }
    b->emb_rows = raw;
    b->table.emb_q = (const int8_t *)rows;
    b->table.dim = (int32_t)stride;
#if defined(LDP_HAVE_MMAP) && defined(MADV_DONTNEED)
    if (b->map != NULL) { /* the whole pages of the original: re-read from the file if touched */
        const long page = sysconf(_SC_PAGESIZE);
        if (page > 0) {
            const uintptr_t p = (uintptr_t)page, end = (uintptr_t)q + (size_t)v * (size_t)m;
            const uintptr_t lo = ((uintptr_t)q + p - 1) / p * p, hi = end / p * p;
            if (hi > lo) (void)madvise((void *)lo, (size_t)(hi - lo), MADV_DONTNEED);
        }
    }
#endif
}

/* The checks after the tables' own: the mechanism's arrays, the description, and the signed
 * numbers against the tables. */
static int check_statements(ldp_bundle *b, uint64_t v, uint64_t o, uint64_t m, const uint8_t *valid) {
    int rc = LDP_OK;
    /* the mechanism's own arrays */
    if (b->mechanism == LDP_MECH_TEM) rc = check_tem_arrays(b, v, o);
    else if (is_custext(b)) rc = check_custext_arrays(b, &b->table, valid);
    if (rc != LDP_OK) return rc;
    rc = check_description(b, v, o, m);
    if (rc != LDP_OK) return rc;
    /* each row's verdict, made before its first draw (check.c ldp_check_rows_of) */
    b->row_state = (uint8_t *)calloc((size_t)v, 1);
    if (b->row_state == NULL) return LDP_E_NOMEM;
    /* the signed numbers against the tables (check.c): a trusted signer's wrong eps fails here */
    rc = ldp_check_realised(b);
    if (rc != LDP_OK) return rc;
    /* near identity (check.c): from the stated median, else from rows drawn now; and the
     * kept-in-clear share */
    return ldp_near_identity(b, &b->weak_privacy);
}

/* The cluster order's per-row part (ldp_santext_cluster_rows): on its own thread where one starts,
 * else at cluster_rows_finish. On GloVe-50k (C = 128) it is about a fifth of an open. */
typedef struct {
    ldp_bundle *b;
    int threaded;
#if defined(LDP_THREADS)
    pthread_t tid;
#endif
} cluster_rows_job;

static void *cluster_rows_worker(void *arg) {
    cluster_rows_job *job = (cluster_rows_job *)arg;
    ldp_santext_cluster_rows(&job->b->table, job->b->cluster_order, 0, job->b->table.n_rows);
    return NULL;
}

static void cluster_rows_start(cluster_rows_job *job, ldp_bundle *b) {
    job->b = b;
    job->threaded = 0;
#if defined(LDP_THREADS)
    job->threaded = pthread_create(&job->tid, NULL, cluster_rows_worker, job) == 0;
#endif
}

/* Waits for (or does) the rows' part, then points the table at it: no draw before this. */
static void cluster_rows_finish(cluster_rows_job *job) {
#if defined(LDP_THREADS)
    if (job->threaded) pthread_join(job->tid, NULL);
#endif
    if (!job->threaded) cluster_rows_worker(job);
    ldp_santext_cluster_rows_done(&job->b->table, job->b->cluster_order);
}

/* SanTextTables.__post_init__ / _check_values, Sanitizer._check_tables_match_parameters, and the
 * C sampler's own table check */
static int check_tables(ldp_bundle *b) {
    const ldp_array *arr[S_COUNT];
    uint64_t v, m, k, o;
    size_t i;
    uint8_t *is_out = NULL;
    int rc = LDP_OK;
    for (i = 0; i < S_COUNT; i++) {
        arr[i] = ldp_bundle_array(b, SCHEMA[i].name);
        if (arr[i] == NULL && !SCHEMA[i].optional)
            return LDP_E_MISSING_ARRAY; /* Sanitizer: bundle.array(name) */
    }
    /* the tail clusters come together or not at all (SanTextTables.__post_init__) */
    if ((arr[S_CLUSTER] == NULL) != (arr[S_CGAMMA] == NULL)) return LDP_E_MISSING_ARRAY;
    rc = read_params(b);
    if (rc != LDP_OK) return rc;
    /* metric_id: the metric's hashes, including the vocabulary blob */
    if (ldp_bundle_array(b, "blob/vocab.json") == NULL) return LDP_E_MISSING_ARRAY;
    for (i = 0; i < S_COUNT; i++)
        if (arr[i] != NULL && arr[i]->dtype != SCHEMA[i].dtype && arr[i]->dtype != SCHEMA[i].narrow)
            return LDP_E_SCHEMA_DTYPE;
    if (arr[S_EMBQ]->ndim != 2) return LDP_E_SCHEMA_SHAPE;
    v = arr[S_EMBQ]->shape[0];
    m = arr[S_EMBQ]->shape[1];
    k = arr[S_HEAD]->ndim == 2 ? arr[S_HEAD]->shape[1] : 0;
    o = arr[S_OUT]->shape[0];
    {
        /* expected shapes: V, m, O, K, K+1 */
        const struct {
            int idx, ndim;
            uint64_t d0, d1;
        } want[] = {{S_SCALE, 1, v, 0},     {S_OUT, 1, o, 0},      {S_HEAD, 2, v, k},
                    {S_THR, 2, v, k + 1},   {S_ALIAS, 2, v, k + 1}, {S_GAMMA, 2, v, k + 1},
                    {S_FLOOR, 1, v, 0},     {S_KEEP, 1, v, 0},     {S_SENS, 1, v, 0},
                    {S_VALID, 1, v, 0}};
        if (arr[S_OUT]->ndim != 1) return LDP_E_SCHEMA_SHAPE;
        for (i = 0; i < sizeof want / sizeof want[0]; i++) {
            const ldp_array *a = arr[want[i].idx];
            if (a->ndim != want[i].ndim || a->shape[0] != want[i].d0 ||
                (want[i].ndim == 2 && a->shape[1] != want[i].d1))
                return LDP_E_SCHEMA_SHAPE;
        }
        /* tail clusters: (V,) and (V, C); C itself is checked with their values below */
        if (arr[S_CLUSTER] != NULL &&
            (arr[S_CLUSTER]->ndim != 1 || arr[S_CLUSTER]->shape[0] != v ||
             arr[S_CGAMMA]->ndim != 2 || arr[S_CGAMMA]->shape[0] != v))
            return LDP_E_SCHEMA_SHAPE;
    }
    /* the sampler's limits (ldptext._native.SantextTable: Python raises ValueError there) */
    if (v == 0 || o < k) return LDP_E_TABLE_EMPTY;
    if (m == 0 || m > 130000 || k == 0 || k >= 65535 || v > INT32_MAX || o > INT32_MAX)
        return LDP_E_TABLE_DIMS;
    table_forms(&b->table, arr[S_HEAD], arr[S_ALIAS], arr[S_GAMMA]);
    if (arr[S_CLUSTER] == NULL) {
        /* an older bundle: one cluster, no bound (the plain tail); the zeros serve as both
         * tail_cluster (V) and cluster_gamma (V x 1) */
        b->zero_clusters = (uint8_t *)calloc((size_t)v, 1);
        if (b->zero_clusters == NULL) return LDP_E_NOMEM;
    }
    {
        const int8_t *q = (const int8_t *)arr[S_EMBQ]->data;
        const float *scale = (const float *)arr[S_SCALE]->data;
        const int32_t *out = (const int32_t *)arr[S_OUT]->data;
        const uint32_t *thr = (const uint32_t *)arr[S_THR]->data;
        const double *floor_ = (const double *)arr[S_FLOOR]->data;
        const uint8_t *keep = arr[S_KEEP]->data, *sens = arr[S_SENS]->data,
                      *valid = arr[S_VALID]->data;
        const uint8_t *cluster = arr[S_CLUSTER] ? arr[S_CLUSTER]->data : b->zero_clusters;
        const uint8_t *cgamma = arr[S_CGAMMA] ? arr[S_CGAMMA]->data : b->zero_clusters;
        const uint64_t n_clusters = arr[S_CGAMMA] ? arr[S_CGAMMA]->shape[1] : 1;
        /* Each check below covers every row before the next one starts reporting: a table with
         * several defects gives the code of the first check in this order (the Python loader's
         * order). Checks that share a pass over the rows record their findings and report them in
         * that order at the end of the pass. */
        row_findings found;
        for (i = 0; i < v; i++)
            if (!isfinite(scale[i]) || scale[i] < 0 || !isfinite(floor_[i]) || floor_[i] < 0)
                return LDP_E_TABLE_NONFINITE;
        for (i = 0; i < o; i++)
            if (out[i] < 0 || (uint64_t)out[i] >= v || (i > 0 && out[i] <= out[i - 1]))
                return LDP_E_TABLE_OUTPUTS;
        is_out = (uint8_t *)calloc((size_t)v, 1);
        if (is_out == NULL) return LDP_E_NOMEM;
        for (i = 0; i < o; i++) is_out[out[i]] = 1;
        b->table.n_rows = (int32_t)v;
        b->table.head_size = (int32_t)k;
        b->table.n_outputs = (int32_t)o;
        b->table.alias_threshold = thr;
        rc = scan_rows(&b->table, is_out, valid, &found);
        free(is_out);
        if (rc != LDP_OK) return rc;
        if (found.head) return LDP_E_TABLE_HEAD;
        if (found.domain) return LDP_E_TABLE_DOMAIN;
        if (found.alias) return LDP_E_TABLE_ALIAS;
        {
            int bad_cluster = n_clusters < 1 || n_clusters > LDP_MAX_CLUSTERS;
            for (i = 0; i < v; i++) bad_cluster |= cluster[i] >= n_clusters;
            if (bad_cluster) return LDP_E_TABLE_CLUSTER;
        }
        if (found.gamma) return LDP_E_TABLE_GAMMA;
        if (found.norm) return LDP_E_TABLE_GAMMA_NORM;
        if (o == k)
            for (i = 0; i < v; i++)
                if (ldp_table_realised_mass(&b->table, (int32_t)i, (size_t)k) != 0)
                    return LDP_E_TABLE_TAIL_MASS;
        /* _check_tables_match_parameters */
        if (b->head_size != (int64_t)k) return LDP_E_TABLE_HEAD_SIZE;
        /* SanText+ keeps non-sensitive valid rows, CusText+ valid rows (its stop words, checked
         * against its groups below); the others keep none */
        for (i = 0; i < v; i++) {
            if (!keep[i]) continue;
            if (b->mechanism == LDP_MECH_SANTEXT_PLUS    ? (sens[i] || !valid[i])
                : b->mechanism == LDP_MECH_CUSTEXT_PLUS ? !valid[i]
                                                        : 1)
                return b->mechanism == LDP_MECH_TEM ? LDP_E_TEM_TABLES
                       : is_custext(b)                  ? LDP_E_CUSTEXT_TABLES
                                                          : LDP_E_TABLE_KEEP;
        }
        /* the sampler's table (santext_sampler.h), its squared norms, and its own check */
        b->emb_sqnorm = (int32_t *)malloc((size_t)v * sizeof(int32_t));
        if (b->emb_sqnorm == NULL) return LDP_E_NOMEM;
        for (i = 0; i < v; i++) b->emb_sqnorm[i] = ldp_int8_sqnorm(q + i * m, (int32_t)m); /* m <= 130000 */
        b->table.n_rows = (int32_t)v;
        b->table.dim = (int32_t)m;
        b->table.head_size = (int32_t)k;
        b->table.n_outputs = (int32_t)o;
        b->table.emb_q = q;
        b->table.emb_scale = scale;
        b->table.emb_sqnorm = b->emb_sqnorm;
        b->table.outputs = out;
        b->table.alias_threshold = thr;
        b->table.tail_floor = floor_;
        b->table.keep_row = keep;
        b->table.n_clusters = (int32_t)n_clusters;
        b->table.tail_cluster = cluster;
        b->table.cluster_gamma = cgamma;
        b->table.half_epsilon = b->epsilon / 2.0;
        /* SanText+: kept rows sanitized w.p. p; CusText+: never (its stop words are released
         * unchanged); the others keep no row */
        b->table.p = b->mechanism == LDP_MECH_SANTEXT_PLUS  ? b->p
                     : b->mechanism == LDP_MECH_CUSTEXT_PLUS ? 0.0
                                                             : 1.0;
        b->valid_input = valid;
        b->sensitive = sens;
        if (ldp_santext_table_check(&b->table) != LDP_SAMPLE_OK) return LDP_E_TABLE_DIMS;
        align_rows(b, q, v, m);
        b->tail_mass = (uint64_t *)malloc((size_t)v * sizeof(uint64_t));
        if (b->tail_mass == NULL) return LDP_E_NOMEM;
        ldp_santext_tail_masses(&b->table, b->tail_mass);
        b->table.tail_mass = b->tail_mass;
        if (n_clusters > 1) { /* the cluster-order tail draw; a bundle without clusters keeps its draws */
            cluster_rows_job rows;
            b->cluster_order = malloc(ldp_santext_cluster_order_size(&b->table));
            if (b->cluster_order == NULL) return LDP_E_NOMEM;
            ldp_santext_cluster_sort(&b->table, b->cluster_order);
            /* refined bounds for the rows the check reads whole (santext_sampler.h); none out of
             * memory (the cluster bounds alone: the same law) */
            if (!is_custext(b)) b->table.refined = ldp_refine_store_new(&b->table, LDP_REFINE_MAX_BYTES);
            /* the rows' masks and skip thresholds on another thread while the statements are
             * checked: those checks read the order, never what the rows' part writes */
            cluster_rows_start(&rows, b);
            rc = check_statements(b, v, o, m, valid);
            cluster_rows_finish(&rows);
            return rc;
        }
        return check_statements(b, v, o, m, valid);
    }
    return LDP_OK;
}

static int load_tokenizer(ldp_bundle *b) {
    const ldp_array *blob = ldp_bundle_array(b, "blob/tokenizer.json");
    if (blob == NULL) return LDP_E_MISSING_ARRAY;
    /* Bundle.blob(): the array's bytes, whatever its dtype (the writer stores uint8) */
    return ldp_tokenizer_load((const char *)blob->data, blob->nbytes, &b->tokenizer);
}

/* The tokenizer's load, then its agreement with vocab.json and the outputs' read-back
 * (check_rendering's first two checks): a load and about half a million lookups that depend on
 * neither the tables' checks nor their fields, so the tokenizer's thread runs them while
 * check_tables runs. Nothing reads an array's elements before the container's hashes are verified
 * (finish_open), and read_back takes any id. vocab_rc and outputs_rc: their codes, which
 * check_rendering reports in its own order. */
typedef struct {
    ldp_bundle *b;
    int rc, vocab_rc, outputs_rc;
} tokenizer_job;

static void tokenizer_checks(tokenizer_job *job) {
    const ldp_bundle *b = job->b;
    const ldp_array *vocab_json = ldp_bundle_array(b, "blob/vocab.json");
    const ldp_array *emb = ldp_bundle_array(b, "emb_q"), *out = ldp_bundle_array(b, "outputs");
    /* arrays without the schema's form: check_tables refuses the bundle before these are read */
    if (vocab_json == NULL || emb == NULL || emb->ndim != 2 || out == NULL || out->ndim != 1 ||
        out->dtype != LDP_DT_I32) {
        job->vocab_rc = LDP_E_SCHEMA_SHAPE;
        return;
    }
    job->vocab_rc = ldp_tokenizer_check_vocab(b->tokenizer, (const char *)vocab_json->data,
                                              vocab_json->nbytes, (size_t)emb->shape[0]);
    if (job->vocab_rc == LDP_OK)
        job->outputs_rc = ldp_tokenizer_check_outputs(b->tokenizer, (const int32_t *)out->data,
                                                      (size_t)out->shape[0]);
}

static void *tokenizer_worker(void *arg) {
    tokenizer_job *job = (tokenizer_job *)arg;
    job->rc = load_tokenizer(job->b);
    if (job->rc == LDP_OK) tokenizer_checks(job);
    return NULL;
}

/* Hand the memory that opening freed (the tokenizer's parse tree, the checks' scratch) back to the
 * system: glibc keeps it resident otherwise, much of it in the arena of the tokenizer's thread,
 * which no later allocation of the caller's threads reuses (measured: 3 MiB of a 23.5 MiB MiniLM
 * bundle's open). Elsewhere a no-op. */
static void release_free_memory(void) {
#if defined(__GLIBC__) && !defined(__EMSCRIPTEN__)
    malloc_trim(0);
#endif
}

/* function_words.py is_function_word: s[0..n) lowercased (ASCII letters; a token with another
 * byte above 0x7f lowercases to no listed word) is one of LDP_FUNCTION_WORDS. */
static int is_function_word(const char *s, size_t n) {
    char low[16];
    size_t i, lo = 0, hi = LDP_N_FUNCTION_WORDS;
    if (n == 0 || n >= sizeof low) return 0; /* the longest listed word has 10 letters */
    for (i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) return 0;
        low[i] = (char)(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
    }
    low[n] = 0;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        const int c = strcmp(LDP_FUNCTION_WORDS[mid], low);
        if (c == 0) return 1;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return 0;
}

/* description.py check_rendering: what the tokenizer makes of the rows. Its tokens are vocab.json's
 * rows (LDP_E_TOKENIZER otherwise); every output reads back as itself (tokenizer.h); a stated
 * vocab.kind is the tokenizer's model ("wordpiece" for WordPiece, "word" for word level); the
 * stated counts of privacy.not_outputs (why a build left a row out of the outputs:
 * NOT_OUTPUT_COUNTS) sum to the sensitive rows that are not outputs, less the unknown-word row
 * (never an output, by rule); and a split labelled "function-words" (params.non_sensitive) keeps
 * exactly the valid inputs on that list. LDP_OK or LDP_E_PARAMETER_MISMATCH. */
static int check_rendering(const ldp_bundle *b, const tokenizer_job *job) {
    static const char *const counts[3] = {"identifiers", "above_verbatim_cap", "not_read_back"};
    const ldp_json *kind = ldp_json_get(ldp_json_get(b->manifest, "vocab"), "kind");
    const ldp_json *left = ldp_json_get(ldp_json_get(b->manifest, "privacy"), "not_outputs");
    const ldp_santext_table *t = &b->table;
    double stated = 0.0, c;
    int64_t i, actual = 0, any = 0, j = 0;
    const int32_t unk = ldp_tokenizer_unk_id(b->tokenizer);
    /* the tokenizer's tokens are vocab.json's rows; what an output id is released as reads back
     * as that id (no look-alike of another word): tokenizer_checks */
    int rc = job->vocab_rc != LDP_OK ? job->vocab_rc : job->outputs_rc;
    if (rc != LDP_OK) return rc;
    if (kind != NULL && !str_is(kind, ldp_tokenizer_is_wordpiece(b->tokenizer) ? "wordpiece" : "word"))
        return LDP_E_PARAMETER_MISMATCH;
    for (i = 0; i < 3; i++) {
        const ldp_json *x = ldp_json_get(left, counts[i]);
        if (x == NULL) continue;
        if (!count_at(x, &c)) return LDP_E_PARAMETER_MISMATCH;
        stated += c, any = 1;
    }
    const ldp_json *split = ldp_json_get(ldp_json_get(b->manifest, "params"), "non_sensitive");
    if (str_is(split, LDP_FUNCTION_WORDS_LABEL)) {
        /* a split labelled function words keeps exactly the valid inputs on the list (less the
         * unknown-word row, never kept) */
        for (i = 0; i < t->n_rows; i++) {
            size_t n = 0;
            const char *s = ldp_tokenizer_token(b->tokenizer, (int32_t)i, &n);
            if (b->valid_input[i] && i != unk &&
                (t->keep_row[i] != 0) != (s != NULL && is_function_word(s, n)))
                return LDP_E_PARAMETER_MISMATCH;
        }
    }
    if (!any) return LDP_OK;
    for (i = 0; i < t->n_rows; i++) { /* outputs are sorted (check_tables) */
        const int out = j < t->n_outputs && t->outputs[j] == i;
        j += out;
        actual += b->sensitive[i] && !out && i != unk;
    }
    return stated == (double)actual ? LDP_OK : LDP_E_PARAMETER_MISMATCH;
}

/* check_tables, then load_tokenizer and its checks (tokenizer_job). The two read different arrays
 * and set different fields of the bundle (the tables and parameters; the tokenizer), so where
 * threads exist the tokenizer is parsed and checked on a second thread while the tables are
 * checked; the result is the sequential one (a table error first). */
static int check_and_load(ldp_bundle *b) {
    tokenizer_job job;
    int rc, threaded = 0;
#if defined(LDP_THREADS)
    pthread_t tid;
#endif
    job.b = b;
    job.rc = LDP_OK;
    job.vocab_rc = job.outputs_rc = LDP_OK;
#if defined(LDP_THREADS)
    threaded = pthread_create(&tid, NULL, tokenizer_worker, &job) == 0;
#endif
    rc = check_tables(b);
#if defined(LDP_THREADS)
    if (threaded) pthread_join(tid, NULL);
#endif
    if (!threaded && rc == LDP_OK) tokenizer_worker(&job);
    release_free_memory();
    if (rc == LDP_OK) rc = job.rc;
    return rc != LDP_OK ? rc : check_rendering(b, &job);
}

/* Every check, then the weak-privacy rule (verbatim.py refuse_near_identity): a near-identity
 * bundle opens only where the application opted in. */
static int finish_open(ldp_bundle *b, const uint8_t (*keys)[32], size_t n_keys, int allow_weak) {
    int rc = verify_container(b, keys, n_keys);
    if (rc == LDP_OK) rc = check_and_load(b);
    if (rc == LDP_OK && b->weak_privacy && !allow_weak) rc = LDP_E_WEAK_PRIVACY;
    return rc;
}

void ldp_bundle_close(ldp_bundle *b) {
    if (b == NULL) return;
    ldp_tokenizer_free(b->tokenizer);
    free(b->emb_sqnorm);
    free(b->emb_rows);
    free(b->zero_clusters);
    free(b->tail_mass);
    free(b->row_state);
    ldp_refine_store_free(b->table.refined);
    free(b->cluster_order);
    free(b->group_size);
    free(b->arrays);
    ldp_json_free(b->manifest_doc);
    ldp_json_free(b->header_doc);
#ifdef LDP_HAVE_MMAP
    if (b->map != NULL) munmap(b->map, b->map_len);
#endif
    free(b->owned);
    free(b);
}

static int start(const uint8_t (*keys)[32], size_t n_keys, ldp_bundle **out, ldp_bundle **b) {
    const uint16_t one = 1;
    if (out == NULL) return LDP_E_ARG;
    *out = NULL;
    if (keys == NULL && n_keys > 0) return LDP_E_ARG;
    /* the arrays are used in place as little-endian values */
    if (*(const uint8_t *)&one != 1) return LDP_E_HOST;
    if (sodium_init() < 0) return LDP_E_RANDOM;
    *b = (ldp_bundle *)calloc(1, sizeof **b);
    return *b == NULL ? LDP_E_NOMEM : LDP_OK;
}

int ldp_bundle_open_memory(const uint8_t *data, size_t len, const uint8_t (*keys)[32],
                           size_t n_keys, ldp_bundle **out) {
    uint8_t *copy;
    if (out == NULL) return LDP_E_ARG;
    *out = NULL;
    if ((data == NULL && len > 0) || (keys == NULL && n_keys > 0)) return LDP_E_ARG;
    /* a private copy: verified bytes cannot change under us, and malloc aligns it */
    copy = (uint8_t *)malloc(len ? len : 1);
    if (copy == NULL) return LDP_E_NOMEM;
    if (len) memcpy(copy, data, len);
    return ldp_bundle_open_owned(copy, len, keys, n_keys, 0, out);
}

int ldp_bundle_open_owned(uint8_t *data, size_t len, const uint8_t (*keys)[32], size_t n_keys,
                          int allow_weak_privacy, ldp_bundle **out) {
    ldp_bundle *b = NULL;
    int rc = start(keys, n_keys, out, &b);
    if (rc == LDP_OK && data == NULL) {
        free(b);
        rc = LDP_E_ARG;
    }
    if (rc != LDP_OK) {
        free(data);
        return rc;
    }
    b->owned = data;
    b->data = b->owned;
    b->size = len;
    rc = finish_open(b, keys, n_keys, allow_weak_privacy);
    if (rc != LDP_OK) {
        ldp_bundle_close(b); /* frees data */
        return rc;
    }
    *out = b;
    return LDP_OK;
}

int ldp_bundle_open(const char *path, const uint8_t (*keys)[32], size_t n_keys, ldp_bundle **out) {
    return ldp_bundle_open_path(path, keys, n_keys, 0, out);
}

int ldp_bundle_open_path(const char *path, const uint8_t (*keys)[32], size_t n_keys,
                         int allow_weak_privacy, ldp_bundle **out) {
    ldp_bundle *b = NULL;
    int rc = start(keys, n_keys, out, &b);
    if (rc != LDP_OK) return rc;
    if (path == NULL) {
        free(b);
        return LDP_E_ARG;
    }
#ifdef LDP_HAVE_MMAP
    {
        struct stat st;
        /* O_NONBLOCK: opening a FIFO must not wait for a writer before we can refuse it */
        int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) {
            rc = errno == ENOENT ? LDP_E_FILE_NOT_FOUND
                 : errno == EISDIR ? LDP_E_NOT_REGULAR
                                   : LDP_E_FILE_OPEN;
            free(b);
            return rc;
        }
        if (fstat(fd, &st) != 0) rc = LDP_E_FILE_OPEN;
        else if (!S_ISREG(st.st_mode)) rc = LDP_E_NOT_REGULAR;
        else if (st.st_size == 0) rc = LDP_E_FILE_EMPTY;
        else if ((uint64_t)st.st_size > MAX_FILE || (uint64_t)st.st_size > (uint64_t)SIZE_MAX)
            rc = LDP_E_FILE_TOO_LARGE;
        if (rc == LDP_OK) {
            int flags = MAP_SHARED;
            void *map;
#ifdef MAP_POPULATE
            flags |= MAP_POPULATE; /* every page is hashed next: map them at once, not by faults */
#endif
            map = mmap(NULL, (size_t)st.st_size, PROT_READ, flags, fd, 0);
            if (map == MAP_FAILED) {
                rc = LDP_E_FILE_OPEN;
            } else {
                b->map = map;
                b->map_len = (size_t)st.st_size;
                b->data = (const uint8_t *)map;
                b->size = (size_t)st.st_size;
            }
        }
        close(fd);
        if (rc != LDP_OK) {
            free(b);
            return rc;
        }
    }
#else
    {
        FILE *f = fopen(path, "rb");
        long size;
        if (f == NULL) {
            free(b);
            return errno == ENOENT ? LDP_E_FILE_NOT_FOUND : LDP_E_FILE_OPEN;
        }
        if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
            fclose(f);
            free(b);
            return LDP_E_FILE_OPEN;
        }
        b->owned = (uint8_t *)malloc(size ? (size_t)size : 1);
        if (b->owned == NULL || fread(b->owned, 1, (size_t)size, f) != (size_t)size) {
            rc = b->owned == NULL ? LDP_E_NOMEM : LDP_E_FILE_OPEN;
            fclose(f);
            free(b->owned);
            free(b);
            return rc;
        }
        fclose(f);
        b->data = b->owned;
        b->size = (size_t)size;
    }
#endif
    rc = finish_open(b, keys, n_keys, allow_weak_privacy);
    if (rc != LDP_OK) {
        ldp_bundle_close(b);
        return rc;
    }
    *out = b;
    return LDP_OK;
}

/* ---- host bindings (host.h) ------------------------------------------------------------------ */

static int dtype_of_code(const char *code) {
    int i;
    for (i = 0; i < LDP_DT_COUNT; i++)
        if (code != NULL && strcmp(DTYPES[i].code, code) == 0) return i;
    return -1;
}

int ldp_host_bundle_adopt(const ldp_host_array *arrays, size_t n_arrays, const char *manifest_json,
                          size_t manifest_len, ldp_bundle **out) {
    ldp_bundle *b = NULL;
    const ldp_json *declared = NULL;
    size_t i, j, total;
    char *pool, *manifest_copy;
    uint8_t *given = NULL;
    int rc = start(NULL, 0, out, &b);
    if (rc != LDP_OK) return rc;
    b->adopted = 1;
    if ((arrays == NULL && n_arrays > 0) || manifest_json == NULL) {
        free(b);
        return LDP_E_ARG;
    }
    /* the manifest's text (its numbers point into it) and the array names, owned by the bundle */
    total = manifest_len + 1;
    for (i = 0; i < n_arrays; i++) total += arrays[i].name_len + 1;
    b->owned = (uint8_t *)malloc(total);
    b->arrays = (ldp_array *)calloc(n_arrays ? n_arrays : 1, sizeof *b->arrays);
    if (b->owned == NULL || b->arrays == NULL) {
        rc = LDP_E_NOMEM;
        goto done;
    }
    manifest_copy = (char *)b->owned;
    memcpy(manifest_copy, manifest_json, manifest_len);
    manifest_copy[manifest_len] = '\0';
    pool = manifest_copy + manifest_len + 1;
    rc = ldp_json_parse(manifest_copy, manifest_len, &b->manifest_doc, &b->manifest);
    if (rc == LDP_JSON_E_UNICODE) rc = LDP_E_MANIFEST_UNICODE;
    else if (rc != LDP_JSON_OK)
        rc = json_err(rc, LDP_E_MANIFEST_JSON, LDP_E_MANIFEST_DUPLICATE_KEY);
    if (rc == LDP_OK) rc = check_manifest(b, manifest_copy, manifest_len, &declared);
    if (rc != LDP_OK) goto done;
    /* exactly the declared arrays, each with its declared dtype and shape */
    if (declared->n != n_arrays) {
        rc = LDP_E_ARRAY_SET;
        goto done;
    }
    given = (uint8_t *)calloc(n_arrays ? n_arrays : 1, 1);
    if (given == NULL) {
        rc = LDP_E_NOMEM;
        goto done;
    }
    for (i = 0; i < n_arrays && rc == LDP_OK; i++) {
        const ldp_host_array *h = &arrays[i];
        ldp_array *a = &b->arrays[i];
        const ldp_json *spec = NULL;
        uint64_t nbytes;
        int d;
        for (j = 0; j < declared->n; j++)
            if (declared->members[j].key_len == h->name_len &&
                memcmp(declared->members[j].key, h->name, h->name_len) == 0)
                break;
        if (j == declared->n || given[j]) {
            rc = LDP_E_ARRAY_SET;
            break;
        }
        given[j] = 1;
        spec = declared->members[j].value;
        d = dtype_of_code(h->dtype);
        if (d < 0 || h->ndim < 0 || h->ndim > LDP_MAX_NDIM || (h->shape == NULL && h->ndim > 0)) {
            rc = LDP_E_ARRAY_ENTRY;
            break;
        }
        a->dtype = d;
        a->ndim = h->ndim;
        nbytes = ldp_dtype_size(d);
        for (j = 0; j < (size_t)h->ndim; j++) {
            a->shape[j] = h->shape[j];
            nbytes = mul_sat(nbytes, h->shape[j]);
        }
        if (spec->type != LDP_JSON_OBJECT || dtype_of(ldp_json_get(spec, "dtype")) != d ||
            !same_shape(ldp_json_get(spec, "shape"), a)) {
            rc = LDP_E_ARRAY_DTYPE_SHAPE;
            break;
        }
        if (nbytes != (uint64_t)h->nbytes || (h->data == NULL && h->nbytes > 0)) {
            rc = LDP_E_ARRAY_OFFSETS;
            break;
        }
        if ((uintptr_t)h->data % ldp_dtype_size(d) != 0) {
            rc = LDP_E_ARRAY_ALIGNMENT;
            break;
        }
        memcpy(pool, h->name, h->name_len);
        pool[h->name_len] = '\0';
        a->name = pool;
        a->name_len = h->name_len;
        pool += h->name_len + 1;
        a->data = (const uint8_t *)h->data;
        a->nbytes = h->nbytes;
        b->n_arrays = i + 1;
        rc = check_bool_values(a);
    }
    if (rc == LDP_OK) rc = check_and_load(b);
done:
    free(given);
    if (rc != LDP_OK) {
        ldp_bundle_close(b);
        return rc;
    }
    *out = b;
    return LDP_OK;
}

const ldp_santext_table *ldp_host_bundle_table(const ldp_bundle *b) { return &b->table; }

/* ---- the bundle's public facts (ldp_bundle_info) --------------------------------------------- */

/* The worst case over any two inputs, by the mechanism's generated rule (mechanisms.h): +inf where
 * none exists (words in the clear, or the output set revealed) */
double ldp_checked_tolerance(const ldp_bundle *b, double reach) {
    return b->tolerance + LDP_CHECK_RESOLUTION * (1.0 + b->epsilon * reach);
}

double ldp_report_tolerance(const ldp_bundle *b) {
    return ldp_checked_tolerance(b, is_custext(b) ? 1.0 : b->d_max);
}

double ldp_worst_case_epsilon(const ldp_bundle *b) {
    switch (LDP_MECHANISMS[b->mechanism].worst_case_rule) {
    case LDP_WORST_EPS: return b->epsilon;
    case LDP_WORST_EPS_DMAX: return b->epsilon * b->d_max;
    case LDP_WORST_EPS_MIN_GAMMA_DMAX: return b->epsilon * fmin(b->gamma, b->d_max);
    default: return INFINITY;
    }
}

/* the first n_hex (<= 64) lowercase hex digits of SHA-256(data), NUL-terminated. libsodium's
 * SHA-256 whatever the array hashing uses: these inputs are a few hundred bytes. */
static void sha256_hex(const void *data, size_t len, char *hex, size_t n_hex) {
    uint8_t digest[32];
    char full[2 * 32 + 1];
    crypto_hash_sha256(digest, (const unsigned char *)data, (unsigned long long)len);
    sodium_bin2hex(full, sizeof full, digest, 32);
    memcpy(hex, full, n_hex);
    hex[n_hex] = '\0';
}

/* the canonical manifest is the signed text (check_manifest compared them): its hash is
 * bundle.py's bundle_id */
int ldp_bundle_id(const ldp_bundle *b, char hex[65]) {
    ldp_buf manifest;
    ldp_buf_init(&manifest);
    if (ldp_json_write_canonical(&manifest, b->manifest) != LDP_JSON_OK) {
        ldp_buf_free(&manifest);
        return LDP_E_NOMEM;
    }
    sha256_hex(manifest.data, manifest.len, hex, 64);
    ldp_buf_free(&manifest);
    return LDP_OK;
}

/* An id from the manifest's hashes of the named arrays: the first 16 hex digits of
 * SHA-256(prefix + hash[0] + ":" + hash[1] ...); LDP_E_PARAMS if one is not a string (a verified
 * bundle has them all). santext.py metric_id (emb_q, emb_scale, blob/vocab.json) and custext.py
 * partition_id (group_id, blob/vocab.json). */
static int hashes_id(const ldp_json *manifest, const char *prefix, const char *const *names,
                     size_t n, char id[17]) {
    const ldp_json *arrays = ldp_json_get(manifest, "arrays");
    ldp_buf text;
    size_t i;
    int rc = LDP_OK;
    ldp_buf_init(&text);
    ldp_buf_puts(&text, prefix);
    for (i = 0; i < n && rc == LDP_OK; i++) {
        const ldp_json *hash = ldp_json_get(ldp_json_get(arrays, names[i]), "sha256");
        if (hash == NULL || hash->type != LDP_JSON_STRING) rc = LDP_E_PARAMS;
        else {
            if (i) ldp_buf_putc(&text, ':');
            ldp_buf_put(&text, hash->str, hash->str_len);
        }
    }
    if (rc == LDP_OK && text.failed) rc = LDP_E_NOMEM;
    if (rc == LDP_OK) sha256_hex(text.data, text.len, id, 16);
    ldp_buf_free(&text);
    return rc;
}

/* The ledger unit: "metric:<id>" (SanText, TEM) or "partition:<id>" (CusText). */
static int ledger_unit(const ldp_bundle *b, char unit[10 + 16 + 1]) {
    static const char *const metric[3] = {"emb_q", "emb_scale", "blob/vocab.json"};
    static const char *const partition[2] = {"group_id", "blob/vocab.json"};
    if (is_custext(b)) {
        strcpy(unit, "partition:");
        return hashes_id(b->manifest, "ldptext custext partition v1:", partition, 2, unit + 10);
    }
    strcpy(unit, "metric:");
    return hashes_id(b->manifest, "ldptext santext metric v1:", metric, 3, unit + 7);
}

/* ,"key": (keys are written in sorted order by the caller) */
static void put_key(ldp_buf *out, const char *key) {
    if (out->len > 1) ldp_buf_putc(out, ',');
    ldp_buf_putc(out, '"');
    ldp_buf_puts(out, key);
    ldp_buf_puts(out, "\":");
}

/* a double as Python's repr; null where JSON has no spelling (an infinite eps * d_max) */
static void put_number(ldp_buf *out, const char *key, double x) {
    put_key(out, key);
    if (isfinite(x)) ldp_json_write_double(out, x);
    else ldp_buf_puts(out, "null");
}

static void put_string(ldp_buf *out, const char *key, const char *s) {
    put_key(out, key);
    ldp_json_write_string(out, s, strlen(s), 1);
}

static void put_null(ldp_buf *out, const char *key) {
    put_key(out, key);
    ldp_buf_puts(out, "null");
}

/* a number, or null where it is NaN (not stated) */
static void put_optional(ldp_buf *out, const char *key, double x) {
    if (isnan(x)) put_null(out, key);
    else put_number(out, key, x);
}

/* a count as an integer, or null where it is NaN (not stated) */
static void put_optional_count(ldp_buf *out, const char *key, double x) {
    if (isnan(x)) {
        put_null(out, key);
    } else {
        put_key(out, key);
        ldp_buf_put_u64(out, (uint64_t)x);
    }
}

int ldp_bundle_info(const ldp_bundle *b, char **json_out) {
    char unit[10 + 16 + 1], bundle_id[65], key_id[17];
    const ldp_mechanism_statement *stmt;
    const ldp_json *version;
    ldp_buf out;
    int rc, custext;
    double worst;
    if (json_out != NULL) *json_out = NULL;
    if (b == NULL || json_out == NULL) return LDP_E_ARG;
    custext = is_custext(b);
    rc = ledger_unit(b, unit);
    if (rc == LDP_OK) rc = ldp_bundle_id(b, bundle_id);
    if (rc != LDP_OK) return rc;
    if (b->has_signer) sha256_hex(b->signer, 32, key_id, 16);
    version = ldp_json_get(b->manifest, "format_version");
    worst = ldp_worst_case_epsilon(b);
    stmt = &LDP_MECHANISMS[b->mechanism];
    /* members in sorted key order, as json.dumps(sort_keys=True) would write them */
    ldp_buf_init(&out);
    ldp_buf_putc(&out, '{');
    if (b->mechanism == LDP_MECH_TEM) put_optional(&out, "beta", b->beta);
    put_string(&out, "bundle_id", bundle_id);
    put_optional(&out, "d_max", b->d_max);
    put_number(&out, "epsilon", b->epsilon);
    if (b->mechanism == LDP_MECH_CUSTEXT_PLUS) put_null(&out, "epsilon0"); /* stop words in clear */
    else put_number(&out, "epsilon0", b->epsilon0);
    put_key(&out, "format_version");
    ldp_buf_put_u64(&out, (uint64_t)version->int_value); /* check_manifest: exactly 1 */
    if (b->mechanism == LDP_MECH_TEM) put_number(&out, "gamma", b->gamma);
    if (custext) {
        put_key(&out, "k");
        ldp_buf_put_u64(&out, (uint64_t)b->k); /* >= 1: checked at open */
    }
    if (b->has_signer) put_string(&out, "key_id", key_id);
    else put_null(&out, "key_id");
    put_string(&out, "ledger_unit", unit);
    /* the canonical manifest is the signed text (check_manifest compared them) */
    put_key(&out, "manifest");
    (void)ldp_json_write_canonical(&out, b->manifest); /* a failure sets out.failed */
    put_string(&out, "mechanism", stmt->name);
    /* the statement's prose, generated from the registry: the Python report's words */
    if (stmt->metric != NULL) put_string(&out, "metric", stmt->metric);
    else put_null(&out, "metric");
    put_string(&out, "neighbouring", stmt->neighbouring);
    put_string(&out, "notion", stmt->notion);
    put_string(&out, "numeric_note", stmt->numeric_note);
    put_optional(&out, "p", b->p); /* null where none is stated (SanText, TEM, CusText) */
    if (custext) put_string(&out, "similarity", b->cosine ? "cosine" : "euclidean");
    put_number(&out, "tolerance", ldp_report_tolerance(b));
    /* the stated verbatim rate (null where none is stated) and the near-identity flag */
    put_optional_count(&out, "verbatim_above_0_5", b->verbatim_above_0_5);
    put_optional_count(&out, "verbatim_above_0_9", b->verbatim_above_0_9);
    put_optional(&out, "verbatim_cap", b->verbatim_cap);
    put_optional(&out, "verbatim_max", b->verbatim_max);
    put_optional(&out, "verbatim_median", b->verbatim_median);
    put_optional(&out, "verbatim_p90", b->verbatim_p90);
    put_optional(&out, "verbatim_p99", b->verbatim_p99);
    put_key(&out, "weak_privacy");
    ldp_buf_puts(&out, b->weak_privacy ? "true" : "false");
    put_string(&out, "worst_case_note", stmt->worst_case_note);
    if (isinf(worst)) put_null(&out, "worst_case_token_epsilon");
    else put_number(&out, "worst_case_token_epsilon", worst);
    ldp_buf_putc(&out, '}');
    if (out.failed) {
        ldp_buf_free(&out);
        return LDP_E_NOMEM;
    }
    *json_out = out.data;
    return LDP_OK;
}
