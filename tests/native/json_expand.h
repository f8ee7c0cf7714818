/* The canonical form of a parsed JSON value with its lazy objects (ldp_json_parse_lazy) read back
 * by a cursor, as the full parse would write them: shared by the JSON unit test and its fuzz target.
 * A malformed cursor aborts. */
#ifndef LDPTEXT_TESTS_JSON_EXPAND_H
#define LDPTEXT_TESTS_JSON_EXPAND_H

#include <stdlib.h>
#include <string.h>

#include "json.h"

typedef struct {
    char *key;
    size_t key_len;
    ldp_buf value;
} member;

static int member_cmp(const void *x, const void *y) {
    const member *a = (const member *)x, *b = (const member *)y;
    int c = memcmp(a->key, b->key, a->key_len < b->key_len ? a->key_len : b->key_len);
    return c != 0 ? c : (a->key_len > b->key_len) - (a->key_len < b->key_len);
}

/* The canonical form of v with lazy objects read by a cursor; *dup = 1 where one repeats a key. */
static void write_expanded(ldp_buf *out, const ldp_json *v, int *dup) {
    size_t i;
    if (v->type == LDP_JSON_ARRAY) {
        ldp_buf_putc(out, '[');
        for (i = 0; i < v->n; i++) {
            if (i) ldp_buf_putc(out, ',');
            write_expanded(out, v->items[i], dup);
        }
        ldp_buf_putc(out, ']');
    } else if (v->type == LDP_JSON_OBJECT) {
        ldp_buf_putc(out, '{');
        for (i = 0; i < v->n; i++) {
            if (i) ldp_buf_putc(out, ',');
            ldp_json_write_string(out, v->sorted[i]->key, v->sorted[i]->key_len, 1);
            ldp_buf_putc(out, ':');
            write_expanded(out, v->sorted[i]->value, dup);
        }
        ldp_buf_putc(out, '}');
    } else if (v->type == LDP_JSON_LAZY) {
        member *m = (member *)calloc(v->n ? v->n : 1, sizeof *m);
        ldp_json_cursor *c = ldp_json_cursor_new(v);
        size_t n = 0, key_bytes = 0;
        const char *key;
        size_t key_len;
        const ldp_json *val;
        if (m == NULL || c == NULL) abort();
        for (;;) {
            if (ldp_json_cursor_next(c, &key, &key_len, &val) != LDP_JSON_OK) abort();
            if (val == NULL) break;
            if (n == v->n) abort();
            m[n].key = (char *)malloc(key_len ? key_len : 1);
            if (m[n].key == NULL) abort();
            memcpy(m[n].key, key, key_len);
            m[n].key_len = key_len;
            key_bytes += key_len;
            ldp_buf_init(&m[n].value);
            write_expanded(&m[n].value, val, dup);
            n++;
        }
        if (n != v->n || key_bytes != v->key_bytes) abort();
        ldp_json_cursor_free(c);
        qsort(m, n, sizeof *m, member_cmp);
        ldp_buf_putc(out, '{');
        for (i = 0; i < n; i++) {
            if (i && member_cmp(&m[i - 1], &m[i]) == 0) *dup = 1;
            if (i) ldp_buf_putc(out, ',');
            ldp_json_write_string(out, m[i].key, m[i].key_len, 1);
            ldp_buf_putc(out, ':');
            ldp_buf_put(out, m[i].value.data ? m[i].value.data : "", m[i].value.len);
        }
        ldp_buf_putc(out, '}');
        for (i = 0; i < n; i++) {
            free(m[i].key);
            ldp_buf_free(&m[i].value);
        }
        free(m);
    } else {
        ldp_json_write_canonical(out, v);
    }
}

#endif
