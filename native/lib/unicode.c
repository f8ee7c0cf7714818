/* See unicode.h. */
#include "unicode.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "unicode_tables.h"

void ldp_u32_free(ldp_u32vec *a) {
    free(a->v);
    memset(a, 0, sizeof *a);
}

int ldp_u32_reserve(ldp_u32vec *a, size_t extra) {
    size_t need, cap;
    uint32_t *p;
    if (a->failed) return 0;
    if (extra > ((size_t)-1) / 8 - a->n) {
        a->failed = 1;
        return 0;
    }
    need = a->n + extra;
    if (need <= a->cap) return 1;
    cap = a->cap ? a->cap : 64;
    while (cap < need) cap *= 2;
    p = (uint32_t *)realloc(a->v, cap * sizeof *p);
    if (p == NULL) {
        a->failed = 1;
        return 0;
    }
    a->v = p;
    a->cap = cap;
    return 1;
}

void ldp_u32_push(ldp_u32vec *a, uint32_t cp) {
    if (a->n < a->cap || ldp_u32_reserve(a, 1)) a->v[a->n++] = cp;
}

void ldp_utf8_decode(const char *s, size_t len, ldp_u32vec *out) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    out->n = 0;
    if (!ldp_u32_reserve(out, len)) return;
    while (i < len) {
        unsigned c = p[i];
        uint32_t cp;
        if (c < 0x80) {
            cp = c;
            i += 1;
        } else if (c < 0xE0) {
            cp = ((c & 0x1Fu) << 6) | (p[i + 1] & 0x3Fu);
            i += 2;
        } else if (c < 0xF0) {
            cp = ((c & 0x0Fu) << 12) | ((p[i + 1] & 0x3Fu) << 6) | (p[i + 2] & 0x3Fu);
            i += 3;
        } else {
            cp = ((c & 0x07u) << 18) | ((p[i + 1] & 0x3Fu) << 12) | ((p[i + 2] & 0x3Fu) << 6) |
                 (p[i + 3] & 0x3Fu);
            i += 4;
        }
        out->v[out->n++] = cp;
    }
}

size_t ldp_utf8_encode(const uint32_t *cps, size_t n, char *out) {
    size_t i, k = 0;
    for (i = 0; i < n; i++) {
        uint32_t cp = cps[i];
        if (cp < 0x80) {
            out[k++] = (char)cp;
        } else if (cp < 0x800) {
            out[k++] = (char)(0xC0 | (cp >> 6));
            out[k++] = (char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out[k++] = (char)(0xE0 | (cp >> 12));
            out[k++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            out[k++] = (char)(0x80 | (cp & 0x3F));
        } else {
            out[k++] = (char)(0xF0 | (cp >> 18));
            out[k++] = (char)(0x80 | ((cp >> 12) & 0x3F));
            out[k++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            out[k++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    return k;
}

static int in_ranges(const uint32_t (*r)[2], size_t n, uint32_t cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < r[mid][0]) hi = mid;
        else if (cp > r[mid][1]) lo = mid + 1;
        else return 1;
    }
    return 0;
}

#define N_OF(t) (sizeof(t) / sizeof((t)[0]))

int ldp_uc_search(int cls, uint32_t cp) {
    switch (cls) {
    case LDP_UC_OTHER:
        if (cp < 0x80) return (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') || cp == 0x7F;
        return in_ranges(hf_other, N_OF(hf_other), cp);
    case LDP_UC_SPACE:
        if (cp < 0x80) return cp == ' ' || (cp >= '\t' && cp <= '\r');
        return in_ranges(hf_space, N_OF(hf_space), cp);
    case LDP_UC_PUNCT:
        if (cp < 0x80)
            return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
                   (cp >= 123 && cp <= 126);
        return in_ranges(hf_punct, N_OF(hf_punct), cp);
    case LDP_UC_MN:
        return cp >= 0x300 && in_ranges(hf_mn, N_OF(hf_mn), cp);
    case LDP_UC_MARK:
        return cp >= 0x300 && in_ranges(hf_mark, N_OF(hf_mark), cp);
    }
    return 0;
}

/* O: other, S: space (0x0B and 0x0C are both: clean_text removes them), P: punctuation */
#define O LDP_UC_OTHER
#define S LDP_UC_SPACE
#define P LDP_UC_PUNCT
const unsigned char ldp_uc_ascii[128] = {
    O, O, O, O, O, O, O, O, O, S, S, O | S, O | S, S, O, O, /* 0x00 */
    O, O, O, O, O, O, O, O, O, O, O, O,     O,     O, O, O, /* 0x10 */
    S, P, P, P, P, P, P, P, P, P, P, P,     P,     P, P, P, /* 0x20  !"#$%&'()*+,-./ */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, P, P,     P,     P, P, P, /* 0x30 0-9 :;<=>? */
    P, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,     0,     0, 0, 0, /* 0x40 @A-O */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, P,     P,     P, P, P, /* 0x50 P-Z [\]^_ */
    P, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,     0,     0, 0, 0, /* 0x60 `a-o */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, P,     P,     P, P, O, /* 0x70 p-z {|}~ DEL */
};
#undef O
#undef S
#undef P

size_t ldp_uc_lower(uint32_t cp, uint32_t out[3]) {
    size_t lo = 0, hi = N_OF(hf_lower);
    if (cp < 0x80) {
        out[0] = ldp_uc_ascii_lower(cp);
        return 1;
    }
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (hf_lower[mid].cp == cp) {
            size_t k = 1;
            out[0] = hf_lower[mid].lower[0];
            if (hf_lower[mid].lower[1]) out[k++] = hf_lower[mid].lower[1];
            if (hf_lower[mid].lower[2]) out[k++] = hf_lower[mid].lower[2];
            return k;
        }
        if (hf_lower[mid].cp < cp) lo = mid + 1;
        else hi = mid;
    }
    out[0] = cp;
    return 1;
}

const char *ldp_uc_tables_source(void) { return LDP_UNICODE_TABLES_SOURCE; }

/* Active: the code point takes part in normalization as tokenizers' tables know it. Everything
 * else passes through unchanged and separates normalization runs (an inert starter). */
static int norm_active(uint32_t cp) { return in_ranges(hf_norm_active, N_OF(hf_norm_active), cp); }

static int ccc(uint32_t cp) { return utf8proc_get_property((utf8proc_int32_t)cp)->combining_class; }

/* Normalizes the run in[0..n) of active code points (possibly led by one ASCII starter) onto
 * out: full decomposition, canonical reordering, then composition for the C / KC forms. */
static int normalize_run(const uint32_t *in, size_t n, int form, ldp_u32vec *out) {
    utf8proc_option_t opt = UTF8PROC_STABLE;
    size_t i, start = out->n;
    if (form == LDP_NF_NFD) opt |= UTF8PROC_DECOMPOSE;
    else if (form == LDP_NF_NFC) opt |= UTF8PROC_COMPOSE;
    else if (form == LDP_NF_NFKD) opt |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
    else opt |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
    for (i = 0; i < n; i++) {
        int boundclass = 0;
        utf8proc_ssize_t k;
        /* no decomposition is longer than 18 code points (U+FDFA under NFKD) */
        if (!ldp_u32_reserve(out, 32)) return -1;
        k = utf8proc_decompose_char((utf8proc_int32_t)in[i], (utf8proc_int32_t *)(out->v + out->n),
                                    32, opt, &boundclass);
        if (k < 0 || k > 32) return -1;
        out->n += (size_t)k;
    }
    /* canonical ordering: stable sort of every run of non-starters by combining class */
    for (i = start + 1; i < out->n; i++) {
        uint32_t cp = out->v[i];
        int c = ccc(cp);
        size_t j = i;
        if (c == 0) continue;
        while (j > start && ccc(out->v[j - 1]) > c) {
            out->v[j] = out->v[j - 1];
            j--;
        }
        out->v[j] = cp;
    }
    if (form == LDP_NF_NFC || form == LDP_NF_NFKC) {
        utf8proc_ssize_t m = utf8proc_normalize_utf32((utf8proc_int32_t *)(out->v + start),
                                                      (utf8proc_ssize_t)(out->n - start), opt);
        if (m < 0) return -1;
        out->n = start + (size_t)m;
    }
    return 0;
}

int ldp_uc_normalize(const uint32_t *in, size_t n, int form, ldp_u32vec *out) {
    size_t i = 0;
    out->n = 0;
    if (!ldp_u32_reserve(out, n)) return -1;
    while (i < n) {
        uint32_t c = in[i];
        size_t j;
        if (c < 0x80) {
            /* ASCII never changes and never composes as a second code point; it leads a run
             * only when the next code point is active (e + U+0301, < + U+0338). So a run of
             * ASCII is copied whole, but for its last code point when an active one follows. */
            for (j = i + 1; j < n && in[j] < 0x80; j++) {
            }
            if (j < n && norm_active(in[j])) j--;
            if (j > i) {
                if (!ldp_u32_reserve(out, j - i)) return -1;
                memcpy(out->v + out->n, in + i, (j - i) * sizeof *in);
                out->n += j - i;
                i = j;
                continue;
            }
        } else if (!norm_active(c)) {
            ldp_u32_push(out, c);
            i++;
            continue;
        }
        for (j = i + 1; j < n && in[j] >= 0x80 && norm_active(in[j]); j++) {
        }
        if (normalize_run(in + i, j - i, form, out) != 0) return -1;
        i = j;
    }
    return out->failed ? -1 : 0;
}
