/* Sanitizers: the exact SanText sampler (native/santext_sampler.c, shared with the Python
 * extension) on a ChaCha20 stream keyed from the OS, with fork detection; tokenize / sample /
 * detokenize. */
#define _GNU_SOURCE 1
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "chacha20.h"
#include "host.h"
#include "ldp_internal.h"

#if defined(__unix__) || defined(__APPLE__)
#define LDP_POSIX 1
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>
#endif
/* Linux and Android: the getrandom system call through syscall(2), not the libc wrapper: bionic
 * declares getrandom() only from API 28, while the system call is in every kernel since 3.17 and
 * syscall() in every bionic, so the same object runs from Android 5 (API 21) up; a kernel without it
 * (ENOSYS) falls back to /dev/urandom. */
#if defined(__linux__)
#include <sys/syscall.h>
#if defined(SYS_getrandom)
#define LDP_HAVE_GETRANDOM 1
#endif
#endif
#if (defined(__APPLE__) || defined(__OpenBSD__) || defined(__FreeBSD__) || defined(__wasi__)) && \
    !defined(LDP_HAVE_GETRANDOM)
#include <sys/random.h>
#define LDP_HAVE_GETENTROPY 1
#endif

/* ---- OS randomness -------------------------------------------------------------------------- */

#if defined(LDP_POSIX)
/* n bytes from /dev/urandom: 0, or -1 if it cannot be opened or read */
int ldp_os_random_urandom(uint8_t *out, size_t n) {
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    size_t got = 0;
    if (fd < 0) return -1;
    while (got < n) {
        ssize_t r = read(fd, out + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            close(fd);
            return -1;
        }
        got += (size_t)r;
    }
    close(fd);
    return 0;
}
#endif

#if defined(LDP_HAVE_GETRANDOM)
/* n bytes from the getrandom system call: 0; 1 if the kernel lacks it (ENOSYS) or a sandbox
 * forbids it (EPERM), so that the caller falls back; -1 on any other failure */
int ldp_os_random_syscall(uint8_t *out, size_t n) {
    size_t got = 0;
    while (got < n) {
        long r = syscall(SYS_getrandom, out + got, n - got, 0u);
        if (r < 0) {
            if (errno == EINTR) continue;
            if (errno == ENOSYS || errno == EPERM) return 1;
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}
#endif

int ldp_os_random(uint8_t *out, size_t n) {
#if defined(LDP_HAVE_GETRANDOM)
    int rc = ldp_os_random_syscall(out, n);
    if (rc <= 0) return rc;
    return ldp_os_random_urandom(out, n); /* kernel before 3.17 */
#elif defined(LDP_HAVE_GETENTROPY)
    size_t got = 0;
    while (got < n) {
        size_t chunk = n - got > 256 ? 256 : n - got; /* getentropy's limit */
        if (getentropy(out + got, chunk) != 0) return -1;
        got += chunk;
    }
    return 0;
#elif defined(LDP_POSIX)
    return ldp_os_random_urandom(out, n);
#else
    (void)out;
    (void)n;
    return -1; /* no known source: refuse rather than guess */
#endif
}

/* ---- the random stream and fork detection ----------------------------------------------------- */

#define ARMED 0x4C445054u /* "LDPT" */

/* The generator state lives on its own page, which on Linux is marked MADV_WIPEONFORK: a forked
 * child sees it zeroed (armed == 0) even if its pid equals the parent's old one. Everywhere, the
 * pid recorded at keying is compared with getpid() before every draw (rng.py does the same), even
 * where madvise accepted the advice: qemu-user accepts it and does not wipe the page (the aarch64
 * fork test under qemu fails without the pid check), and a system call per call is the price of
 * not trusting the advice. */
typedef struct {
    ldp_chacha state;
    uint32_t armed;
    long pid;
} rng_page;

struct ldp_sanitizer {
    const ldp_bundle *bundle;
    rng_page *rng;
    size_t rng_len;
    int mapped; /* rng came from mmap */
    int seeded;
    uint8_t seed_key[32]; /* seeded mode: SHA-256("ldptext seeded mode v1:" + seed) */
    uint64_t forks;
    ldp_tok_work work;
    int32_t *ids, *ys;
    size_t ids_cap;
};

static long current_pid(void) {
#if defined(LDP_POSIX)
    return (long)getpid();
#else
    return 0;
#endif
}

static rng_page *alloc_rng(size_t *len, int *mapped) {
#if defined(LDP_POSIX) && defined(MAP_ANONYMOUS)
    long page = sysconf(_SC_PAGESIZE);
    size_t n = page > 0 && (size_t)page >= sizeof(rng_page) ? (size_t)page : 4096;
    void *p;
    while (n < sizeof(rng_page)) n *= 2;
    p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) {
#if defined(MADV_WIPEONFORK) && !defined(LDP_NO_WIPEONFORK) /* the test of the pid check alone */
        (void)madvise(p, n, MADV_WIPEONFORK); /* Linux >= 4.14; the pid check covers older */
#endif
#ifdef MADV_DONTDUMP
        (void)madvise(p, n, MADV_DONTDUMP); /* keep the key out of core dumps */
#endif
        *len = n;
        *mapped = 1;
        return (rng_page *)p;
    }
#endif
    *len = sizeof(rng_page);
    *mapped = 0;
    return (rng_page *)calloc(1, sizeof(rng_page));
}

static void free_rng(ldp_sanitizer *s) {
    if (s->rng == NULL) return;
    sodium_memzero(s->rng, sizeof *s->rng);
#if defined(LDP_POSIX) && defined(MAP_ANONYMOUS)
    if (s->mapped) {
        munmap(s->rng, s->rng_len);
        s->rng = NULL;
        return;
    }
#endif
    free(s->rng);
    s->rng = NULL;
}

static int key_stream(ldp_sanitizer *s, const uint8_t key[32]) {
    ldp_chacha_init(&s->rng->state, key, 0);
    s->rng->pid = current_pid();
    s->rng->armed = ARMED;
    return LDP_OK;
}

/* A forked child must not continue its parent's stream: fresh OS entropy, or for a seeded
 * sanitizer SHA-256(seed key + ":fork:<pid>:<n>") (rng.py Generator._rekey_child). */
static int rekey_child(ldp_sanitizer *s) {
    uint8_t key[32];
    int rc;
    s->forks++;
    if (s->seeded) {
        char suffix[64];
        crypto_hash_sha256_state h;
        int n = snprintf(suffix, sizeof suffix, ":fork:%ld:%llu", current_pid(),
                         (unsigned long long)s->forks);
        crypto_hash_sha256_init(&h);
        crypto_hash_sha256_update(&h, s->seed_key, 32);
        crypto_hash_sha256_update(&h, (const unsigned char *)suffix, (unsigned long long)n);
        crypto_hash_sha256_final(&h, key);
    } else if (ldp_os_random(key, sizeof key) != 0) {
        s->rng->armed = 0;
        return LDP_E_RANDOM;
    }
    rc = key_stream(s, key);
    sodium_memzero(key, sizeof key);
    return rc;
}

static int stream(ldp_sanitizer *s, ldp_chacha **g) {
    if (s->rng->armed != ARMED || s->rng->pid != current_pid()) {
        int rc = rekey_child(s);
        if (rc != LDP_OK) return rc;
    }
    *g = &s->rng->state;
    return LDP_OK;
}

static int new_sanitizer(const ldp_bundle *bundle, ldp_sanitizer **out, ldp_sanitizer **s) {
    if (out == NULL) return LDP_E_ARG;
    *out = NULL;
    if (bundle == NULL) return LDP_E_ARG;
    *s = (ldp_sanitizer *)calloc(1, sizeof **s);
    if (*s == NULL) return LDP_E_NOMEM;
    (*s)->bundle = bundle;
    (*s)->rng = alloc_rng(&(*s)->rng_len, &(*s)->mapped);
    if ((*s)->rng == NULL) {
        free(*s);
        return LDP_E_NOMEM;
    }
    return LDP_OK;
}

int ldp_sanitizer_new(const ldp_bundle *bundle, ldp_sanitizer **out) {
    ldp_sanitizer *s = NULL;
    uint8_t key[32];
    int rc = new_sanitizer(bundle, out, &s);
    if (rc != LDP_OK) return rc;
    if (ldp_os_random(key, sizeof key) != 0) {
        ldp_sanitizer_free(s);
        return LDP_E_RANDOM;
    }
    key_stream(s, key);
    sodium_memzero(key, sizeof key);
    *out = s;
    return LDP_OK;
}

int ldp_sanitizer_new_seeded(const ldp_bundle *bundle, uint64_t seed, ldp_sanitizer **out) {
    ldp_sanitizer *s = NULL;
    char text[64];
    int n, rc = new_sanitizer(bundle, out, &s);
    if (rc != LDP_OK) return rc;
    /* rng.py _seed_key: sha256(b"ldptext seeded mode v1:" + str(seed)) */
    n = snprintf(text, sizeof text, "ldptext seeded mode v1:%llu", (unsigned long long)seed);
    crypto_hash_sha256(s->seed_key, (const unsigned char *)text, (unsigned long long)n);
    s->seeded = 1;
    key_stream(s, s->seed_key);
    *out = s;
    return LDP_OK;
}

void ldp_sanitizer_free(ldp_sanitizer *s) {
    if (s == NULL) return;
    free_rng(s);
    ldp_tok_work_free(&s->work);
    free(s->ids);
    free(s->ys);
    sodium_memzero(s->seed_key, sizeof s->seed_key);
    free(s);
}

/* ---- operations ------------------------------------------------------------------------------ */

static int scratch(ldp_sanitizer *s, size_t n) {
    if (n <= s->ids_cap) return 1;
    {
        size_t cap = s->ids_cap ? s->ids_cap : 256;
        int32_t *a, *b;
        while (cap < n) {
            if (cap > ((size_t)-1) / (2 * sizeof(int32_t))) return 0;
            cap *= 2;
        }
        a = (int32_t *)realloc(s->ids, cap * sizeof(int32_t));
        if (a == NULL) return 0;
        s->ids = a;
        b = (int32_t *)realloc(s->ys, cap * sizeof(int32_t));
        if (b == NULL) return 0;
        s->ys = b;
        s->ids_cap = cap;
    }
    return 1;
}

int ldp_tokenize(ldp_sanitizer *s, const char *utf8, size_t len, int32_t *ids, size_t cap,
                 size_t *n) {
    if (n != NULL) *n = 0;
    if (s == NULL || n == NULL || (utf8 == NULL && len > 0) || (ids == NULL && cap > 0))
        return LDP_E_ARG;
    return ldp_tokenizer_encode(s->bundle->tokenizer, &s->work, utf8, len, ids, cap, n);
}

int ldp_detokenize(ldp_sanitizer *s, const int32_t *ids, size_t n, char **out, size_t *out_len) {
    ldp_buf buf;
    int rc;
    if (out != NULL) *out = NULL;
    if (out_len != NULL) *out_len = 0;
    if (s == NULL || out == NULL || (ids == NULL && n > 0)) return LDP_E_ARG;
    ldp_buf_init(&buf);
    rc = ldp_tokenizer_decode(s->bundle->tokenizer, ids, n, &buf);
    if (rc != LDP_OK) {
        ldp_buf_free(&buf);
        return rc;
    }
    *out = buf.data;
    if (out_len != NULL) *out_len = buf.len;
    return LDP_OK;
}

/* Every id a valid input (santext.py Sanitizer._sample): in range and not a special token. */
static int check_inputs(const ldp_bundle *b, const int32_t *ids, size_t n) {
    size_t i;
    for (i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= b->table.n_rows || !b->valid_input[ids[i]])
            return LDP_E_INPUT_ID;
    return LDP_OK;
}

static int sample(ldp_sanitizer *s, const int32_t *xs, int32_t *ys, size_t n) {
    ldp_chacha *g;
    size_t failed_at = 0;
    int rc = stream(s, &g);
    if (rc != LDP_OK) return rc;
    /* nothing is drawn from a row whose whole law was not checked: a bad row refuses the call
     * before any draw, so a document that needs it releases nothing */
    rc = ldp_check_rows_of(s->bundle, xs, n);
    if (rc != LDP_OK) return rc;
    /* TEM draws on the engine with its own branches; CusText(+) is the engine itself */
    if (s->bundle->mechanism == LDP_MECH_TEM) return ldp_tem_sample_many(g, s->bundle, xs, ys, n);
    rc = ldp_santext_sample_many(g, &s->bundle->table, xs, ys, n, &failed_at);
    if (rc == LDP_SAMPLE_ERR_ROW) return LDP_E_INPUT_ID;
    return rc == LDP_SAMPLE_OK ? LDP_OK : LDP_E_SAMPLER;
}

int ldp_sample_ids(ldp_sanitizer *s, const int32_t *ids, int32_t *out, size_t n) {
    const int32_t *xs = ids;
    int rc;
    if (s == NULL || ((ids == NULL || out == NULL) && n > 0)) return LDP_E_ARG;
    if (n == 0) return LDP_OK;
    rc = check_inputs(s->bundle, ids, n);
    if (rc != LDP_OK) return rc;
    /* the sampler reads xs[i] after writing ys[i]: inputs that overlap the output are copied */
    if ((const char *)ids < (const char *)(out + n) && (const char *)out < (const char *)(ids + n)) {
        if (!scratch(s, n)) return LDP_E_NOMEM;
        memcpy(s->ids, ids, n * sizeof *ids);
        xs = s->ids;
    }
    return sample(s, xs, out, n);
}

/* 1 if the caller's report, rep->size bytes long, holds the field at offset off of n bytes */
static int report_has(const ldp_report *rep, size_t off, size_t n) { return off + n <= rep->size; }
#define REPORT_HAS(rep, field) report_has(rep, offsetof(ldp_report, field), sizeof (rep)->field)

/* The fields of layout 1 always fit (ldp_sanitize refused a smaller size); later fields are
 * written only into callers compiled with them: an older caller's struct ends before them. */
static void fill_report(ldp_report *rep, const ldp_bundle *b, size_t n, int seeded) {
    rep->epsilon = b->epsilon;
    /* SanText+: ln(1/p) across its split; CusText+: stop words in the clear, no bound */
    rep->epsilon0 = b->mechanism == LDP_MECH_SANTEXT_PLUS    ? b->epsilon0
                    : b->mechanism == LDP_MECH_CUSTEXT_PLUS ? INFINITY
                                                            : 0.0;
    rep->p = b->table.p; /* the engine's: 1, SanText+'s p, or 0 for CusText+'s kept words */
    rep->n_tokens = n;
    rep->mechanism = b->mechanism;
    rep->seeded = seeded;
    if (REPORT_HAS(rep, d_max)) rep->d_max = b->d_max;
    if (REPORT_HAS(rep, tolerance)) rep->tolerance = ldp_report_tolerance(b);
    if (REPORT_HAS(rep, worst_case_epsilon)) rep->worst_case_epsilon = ldp_worst_case_epsilon(b);
    if (REPORT_HAS(rep, verbatim_median)) rep->verbatim_median = b->verbatim_median;
    if (REPORT_HAS(rep, verbatim_max)) rep->verbatim_max = b->verbatim_max;
    if (REPORT_HAS(rep, weak_privacy)) rep->weak_privacy = b->weak_privacy;
}

int ldp_sanitize(ldp_sanitizer *s, const char *utf8, size_t len, char **out, size_t *out_len,
                 ldp_report *rep) {
    const ldp_bundle *b;
    size_t n = 0;
    int rc;
    ldp_buf buf;
    if (out != NULL) *out = NULL;
    if (out_len != NULL) *out_len = 0;
    if (s == NULL || out == NULL || (utf8 == NULL && len > 0)) return LDP_E_ARG;
    if (rep != NULL && rep->size < LDP_REPORT_V1_SIZE) return LDP_E_ARG; /* size not set */
    b = s->bundle;
    /* tokens: usually fewer than bytes; grow once if not */
    if (!scratch(s, len + 16)) return LDP_E_NOMEM;
    rc = ldp_tokenizer_encode(b->tokenizer, &s->work, utf8, len, s->ids, s->ids_cap, &n);
    if (rc == LDP_E_CAPACITY) {
        if (!scratch(s, n)) return LDP_E_NOMEM;
        rc = ldp_tokenizer_encode(b->tokenizer, &s->work, utf8, len, s->ids, s->ids_cap, &n);
    }
    if (rc != LDP_OK) return rc;
    if (n > (size_t)INT32_MAX) return LDP_E_TOO_LONG;
    rc = check_inputs(b, s->ids, n);
    if (rc == LDP_OK) rc = sample(s, s->ids, s->ys, n);
    if (rc != LDP_OK) return rc;
    ldp_buf_init(&buf);
    rc = ldp_tokenizer_decode(b->tokenizer, s->ys, n, &buf);
    if (rc == LDP_OK && buf.data == NULL) ldp_buf_put(&buf, "", 0);
    if (rc == LDP_OK && buf.failed) rc = LDP_E_NOMEM;
    if (rc != LDP_OK) {
        ldp_buf_free(&buf);
        return rc;
    }
    *out = buf.data;
    if (out_len != NULL) *out_len = buf.len;
    if (rep != NULL) fill_report(rep, b, n, s->seeded);
    return LDP_OK;
}

void ldp_free(void *p) { free(p); }

/* ---- host bindings (host.h) ------------------------------------------------------------------ */

int ldp_host_sanitizer_new(const ldp_bundle *bundle, const uint8_t key[32], int seeded,
                           ldp_sanitizer **out) {
    ldp_sanitizer *s = NULL;
    int rc;
    if (key == NULL) {
        if (out != NULL) *out = NULL;
        return LDP_E_ARG;
    }
    rc = new_sanitizer(bundle, out, &s);
    if (rc != LDP_OK) return rc;
    if (seeded) { /* a forked child derives its stream from this key (rekey_child) */
        memcpy(s->seed_key, key, 32);
        s->seeded = 1;
    }
    key_stream(s, key);
    *out = s;
    return LDP_OK;
}

int ldp_host_sanitizer_seeded(const ldp_sanitizer *s) { return s != NULL && s->seeded; }

void ldp_host_batch_free(ldp_host_batch *result) {
    if (result == NULL) return;
    free(result->text);
    free(result->offsets);
    free(result->n_tokens);
    memset(result, 0, sizeof *result);
}

/* Scratch above this many ids is released after a batch (one huge document must not pin its
 * buffers for the sanitizer's lifetime). */
#define KEEP_SCRATCH ((size_t)1 << 20)

int ldp_host_sanitize_batch(ldp_sanitizer *s, const char *const *texts, const size_t *lens,
                            size_t n_docs, ldp_host_batch *result, ldp_host_batch_error *err) {
    const ldp_tokenizer *tok;
    size_t d, total = 0, n, pos;
    int rc = LDP_OK;
    ldp_buf buf;
    if (result != NULL) memset(result, 0, sizeof *result);
    if (err != NULL) err->doc = err->token = 0;
    if (s == NULL || result == NULL || err == NULL ||
        ((texts == NULL || lens == NULL) && n_docs > 0))
        return LDP_E_ARG;
    tok = s->bundle->tokenizer;
    result->offsets = (size_t *)malloc((n_docs + 1) * sizeof(size_t));
    result->n_tokens = (size_t *)malloc((n_docs ? n_docs : 1) * sizeof(size_t));
    if (result->offsets == NULL || result->n_tokens == NULL) {
        ldp_host_batch_free(result);
        return LDP_E_NOMEM;
    }
    /* every document's ids, one after another in s->ids */
    for (d = 0; d < n_docs && rc == LDP_OK; d++) {
        err->doc = d;
        if (texts[d] == NULL && lens[d] > 0) rc = LDP_E_ARG;
        else if (!scratch(s, total + lens[d] + 16)) rc = LDP_E_NOMEM;
        if (rc != LDP_OK) break;
        rc = ldp_tokenizer_encode(tok, &s->work, texts[d], lens[d], s->ids + total,
                                  s->ids_cap - total, &n);
        if (rc == LDP_E_CAPACITY) {
            if (!scratch(s, total + n)) rc = LDP_E_NOMEM;
            else rc = ldp_tokenizer_encode(tok, &s->work, texts[d], lens[d], s->ids + total,
                                           s->ids_cap - total, &n);
        }
        if (rc != LDP_OK) break;
        result->n_tokens[d] = n;
        total += n;
        if (total > (size_t)INT32_MAX) rc = LDP_E_TOO_LONG;
    }
    /* every id a valid input; the first one that is not names its document and position */
    if (rc == LDP_OK && check_inputs(s->bundle, s->ids, total) != LDP_OK) {
        size_t first = 0, start = 0;
        while (s->ids[first] >= 0 && s->ids[first] < s->bundle->table.n_rows &&
               s->bundle->valid_input[s->ids[first]])
            first++;
        for (d = 0; d < n_docs; d++) {
            if (first < start + result->n_tokens[d]) break;
            start += result->n_tokens[d];
        }
        err->doc = d;
        err->token = first - start;
        rc = LDP_E_INPUT_ID;
    }
    /* one sampler call over the whole batch: the Python runtime's draws, in its order */
    if (rc == LDP_OK && total > 0) rc = sample(s, s->ids, s->ys, total);
    ldp_buf_init(&buf);
    for (d = 0, pos = 0; d < n_docs && rc == LDP_OK; d++) {
        err->doc = d;
        result->offsets[d] = buf.len;
        rc = ldp_tokenizer_decode(tok, s->ys + pos, result->n_tokens[d], &buf);
        pos += result->n_tokens[d];
    }
    if (rc == LDP_OK && buf.data == NULL) ldp_buf_put(&buf, "", 0);
    if (rc == LDP_OK && buf.failed) rc = LDP_E_NOMEM;
    if (s->ids_cap > KEEP_SCRATCH) {
        free(s->ids);
        free(s->ys);
        s->ids = s->ys = NULL;
        s->ids_cap = 0;
    }
    if (rc != LDP_OK) {
        ldp_buf_free(&buf);
        ldp_host_batch_free(result);
        return rc;
    }
    result->offsets[n_docs] = buf.len;
    result->text = buf.data;
    err->doc = 0;
    return LDP_OK;
}
