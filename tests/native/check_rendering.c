/* Tool for tests/test_token_rendering.py: what a released id renders as, in the C tokenizer.
 *
 *   check_rendering TOKENIZER_JSON VOCAB_JSON N_ROWS < ids
 *
 * reads the ids (decimal, whitespace-separated) and prints
 *   vocab RC          ldp_tokenizer_check_vocab (VOCAB_JSON "-": not run, RC 0)
 *   context ID        ldp_tokenizer_context_word (-1: none)
 *   outputs RC        ldp_tokenizer_check_outputs of the ids
 *   ok BITS           ldp_tokenizer_read_back, one 0/1 per id
 *   ms VOCAB OUTPUTS  wall time of the two checks (milliseconds)
 * or "load RC" alone when the tokenizer does not load. */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ldptext.h"
#include "tokenizer.h"

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0, n = 0, got;
    if (f == NULL) return NULL;
    do {
        if (n == cap) {
            char *p = (char *)realloc(buf, cap = cap ? 2 * cap : 1 << 16);
            if (p == NULL) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = p;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got > 0);
    fclose(f);
    *len = n;
    return buf;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    size_t tlen, vlen = 0, n = 0, cap = 1024, k;
    char *tjson, *vjson = NULL;
    int32_t *ids = (int32_t *)malloc(cap * sizeof *ids), ctx;
    unsigned char *ok;
    ldp_tokenizer *t;
    long v;
    int rc_vocab = 0, rc_out, rc;
    double t0, t1, t2;
    if (argc != 4 || ids == NULL) {
        fprintf(stderr, "usage: check_rendering TOKENIZER_JSON VOCAB_JSON|- N_ROWS < ids\n");
        return 2;
    }
    tjson = slurp(argv[1], &tlen);
    if (strcmp(argv[2], "-") != 0) vjson = slurp(argv[2], &vlen);
    if (tjson == NULL || (strcmp(argv[2], "-") != 0 && vjson == NULL)) return 2;
    while (scanf("%ld", &v) == 1) {
        if (n == cap) {
            int32_t *p = (int32_t *)realloc(ids, (cap *= 2) * sizeof *ids);
            if (p == NULL) return 2;
            ids = p;
        }
        ids[n++] = (int32_t)v;
    }
    rc = ldp_tokenizer_load(tjson, tlen, &t);
    if (rc != LDP_OK) {
        printf("load %d\n", rc);
        return 0;
    }
    t0 = now_ms();
    if (vjson != NULL) rc_vocab = ldp_tokenizer_check_vocab(t, vjson, vlen, (size_t)atol(argv[3]));
    t1 = now_ms();
    rc_out = ldp_tokenizer_check_outputs(t, ids, n);
    t2 = now_ms();
    ok = (unsigned char *)malloc(n ? n : 1);
    if (ok == NULL || ldp_tokenizer_read_back(t, ids, n, ok) != LDP_OK ||
        ldp_tokenizer_context_word(t, &ctx) != LDP_OK)
        return 2;
    printf("vocab %d\ncontext %d\noutputs %d\nok ", rc_vocab, (int)ctx, rc_out);
    for (k = 0; k < n; k++) putchar('0' + ok[k]);
    printf("\nms %.3f %.3f\n", t1 - t0, t2 - t1);
    ldp_tokenizer_free(t);
    free(ok);
    free(ids);
    free(tjson);
    free(vjson);
    return 0;
}
