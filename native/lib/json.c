/* Strict JSON parser and canonical writers; see json.h. */
#include "json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena ---------------------------------------------------------------------------------- */

typedef struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    /* data follows, aligned for any scalar */
} arena_block;

#define BLOCK_HEADER ((sizeof(arena_block) + 15u) & ~(size_t)15u)

struct ldp_json_doc {
    arena_block *blocks;
};

static void *arena_alloc(ldp_json_doc *doc, size_t n) {
    arena_block *b = doc->blocks;
    n = (n + 15u) & ~(size_t)15u;
    if (n == 0) n = 16;
    if (b == NULL || b->cap - b->used < n) {
        size_t cap = n > 65536u ? n : 65536u;
        b = (arena_block *)malloc(BLOCK_HEADER + cap);
        if (b == NULL) return NULL;
        b->cap = cap;
        b->used = 0;
        b->next = doc->blocks;
        doc->blocks = b;
    }
    {
        void *p = (char *)b + BLOCK_HEADER + b->used;
        b->used += n;
        return p;
    }
}

/* Where the arena stands; arena_release frees everything allocated since. */
typedef struct {
    arena_block *block;
    size_t used;
} arena_mark;

static arena_mark arena_get_mark(const ldp_json_doc *doc) {
    arena_mark m;
    m.block = doc->blocks;
    m.used = m.block != NULL ? m.block->used : 0;
    return m;
}

static void arena_release(ldp_json_doc *doc, arena_mark m) {
    while (doc->blocks != m.block) {
        arena_block *b = doc->blocks;
        doc->blocks = b->next;
        free(b);
    }
    if (m.block != NULL) m.block->used = m.used;
}

void ldp_json_free(ldp_json_doc *doc) {
    arena_block *b;
    if (doc == NULL) return;
    b = doc->blocks;
    while (b != NULL) {
        arena_block *next = b->next;
        free(b);
        b = next;
    }
    free(doc);
}

/* ---- byte buffer ---------------------------------------------------------------------------- */

void ldp_buf_init(ldp_buf *b) { memset(b, 0, sizeof *b); }

void ldp_buf_free(ldp_buf *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

static int buf_reserve(ldp_buf *b, size_t extra) {
    size_t need, cap;
    char *p;
    if (b->failed) return 0;
    if (extra > (size_t)-1 - b->len - 1) {
        b->failed = 1;
        return 0;
    }
    need = b->len + extra + 1;
    if (need <= b->cap) return 1;
    cap = b->cap ? b->cap : 256;
    while (cap < need) cap = cap > ((size_t)-1) / 2 ? need : cap * 2;
    p = (char *)realloc(b->data, cap);
    if (p == NULL) {
        b->failed = 1;
        return 0;
    }
    b->data = p;
    b->cap = cap;
    return 1;
}

void ldp_buf_put(ldp_buf *b, const void *data, size_t n) {
    if (!buf_reserve(b, n)) return;
    if (n) memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void ldp_buf_putc(ldp_buf *b, char c) { ldp_buf_put(b, &c, 1); }

void ldp_buf_puts(ldp_buf *b, const char *s) { ldp_buf_put(b, s, strlen(s)); }

void ldp_buf_put_u64(ldp_buf *b, uint64_t v) {
    char tmp[24];
    int i = 23;
    tmp[i] = '\0';
    do {
        tmp[--i] = (char)('0' + (int)(v % 10u));
        v /= 10u;
    } while (v != 0);
    ldp_buf_put(b, tmp + i, (size_t)(23 - i));
}

/* ---- UTF-8 ---------------------------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s (at most n bytes available), or 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        if (n < 2 || (s[1] & 0xC0) != 0x80) return 0;
        *cp = ((c & 0x1Fu) << 6) | (s[1] & 0x3Fu);
        return 2;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        uint32_t v;
        if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
        v = ((c & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
        if (v < 0x800 || (v >= 0xD800 && v <= 0xDFFF)) return 0; /* overlong or surrogate */
        *cp = v;
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        uint32_t v;
        if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
            return 0;
        v = ((c & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) | (s[3] & 0x3Fu);
        if (v < 0x10000 || v > 0x10FFFF) return 0;
        *cp = v;
        return 4;
    }
    return 0;
}

int ldp_utf8_valid(const char *s, size_t len) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        uint32_t cp;
        size_t k;
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        k = utf8_seq(p + i, len - i, &cp);
        if (k == 0) return 0;
        i += k;
    }
    return 1;
}

static size_t utf8_put(char *out, uint32_t cp) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- numbers -------------------------------------------------------------------------------- */

/* Correctly rounded, locale-independent: the digits are handed to strtod as "DIGITSe<exp>" (no
 * decimal point, which is the one locale-dependent character). At most KEEP significant digits
 * are kept; any further non-zero digit becomes a sticky final '1', which preserves correct
 * rounding (a double's halfway points need at most 767 significant digits). */
#define KEEP_DIGITS 780

double ldp_json_parse_double(const char *text, size_t len) {
    char digits[KEEP_DIGITS + 2 + 32];
    size_t nd = 0, i = 0;
    long long exp10 = 0, e = 0;
    int neg = 0, sticky = 0, seen_nonzero = 0, in_frac = 0, eneg = 0;
    double v;
    if (i < len && text[i] == '-') {
        neg = 1;
        i++;
    }
    for (; i < len && text[i] != 'e' && text[i] != 'E'; i++) {
        char c = text[i];
        if (c == '.') {
            in_frac = 1;
            continue;
        }
        if (c == '0' && !seen_nonzero) { /* leading zero: only moves the exponent if fractional */
            if (in_frac) exp10--;
            continue;
        }
        seen_nonzero = 1;
        if (nd < KEEP_DIGITS) {
            digits[nd++] = c;
            if (in_frac) exp10--;
        } else {
            if (c != '0') sticky = 1;
            if (!in_frac) exp10++;
        }
    }
    if (i < len) { /* exponent */
        i++;
        if (i < len && (text[i] == '+' || text[i] == '-')) {
            eneg = text[i] == '-';
            i++;
        }
        for (; i < len; i++) {
            if (e < 100000000LL) e = e * 10 + (text[i] - '0');
        }
        if (eneg) e = -e;
    }
    if (nd == 0) return neg ? -0.0 : 0.0;
    if (sticky) digits[nd++] = '1', exp10--;
    exp10 += e;
    snprintf(digits + nd, 32, "e%lld", exp10);
    v = strtod(digits, NULL);
    return neg ? -v : v;
}

/* Digits and decimal exponent of |x| printed with p significant digits (%e), locale-independent:
 * writes p digits to d, returns the exponent E (x ~ d[0].d[1..] x 10^E). */
static int sci_digits(double ax, int p, char *d) {
    char tmp[64];
    const char *s;
    int n = 0;
    snprintf(tmp, sizeof tmp, "%.*e", p - 1, ax);
    for (s = tmp; *s && *s != 'e' && *s != 'E'; s++)
        if (*s >= '0' && *s <= '9') d[n++] = *s;
    d[n] = '\0';
    return (*s) ? atoi(s + 1) : 0;
}

static int reads_back(const char *d, int p, int exp_last, double ax) {
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%.*se%d", p, d, exp_last);
    return strtod(tmp, NULL) == ax;
}

/* d (p digits) plus delta (+1 or -1) in place; 0 if the digit count would change */
static int bump(char *d, int p, int delta) {
    int i;
    if (delta > 0) {
        for (i = p - 1; i >= 0; i--) {
            if (d[i] != '9') {
                d[i]++;
                return 1;
            }
            d[i] = '0';
        }
        return 0;
    }
    for (i = p - 1; i >= 0; i--) {
        if (d[i] != '0') {
            d[i]--;
            return d[0] != '0';
        }
        d[i] = '9';
    }
    return 0;
}

void ldp_json_write_double(ldp_buf *out, double x) {
    char d[32], best[32];
    int p, e = 0, found = 0, nd, decpt, i;
    double ax = fabs(x);
    if (signbit(x)) ldp_buf_putc(out, '-');
    if (ax == 0.0) {
        ldp_buf_puts(out, "0.0");
        return;
    }
    for (p = 1; p <= 17 && !found; p++) {
        e = sci_digits(ax, p, d);
        if (reads_back(d, p, e - (p - 1), ax)) {
            memcpy(best, d, (size_t)p + 1);
            found = 1;
            break;
        }
        /* the nearest p-digit decimal may fall outside the rounding interval when the interval
         * is lopsided (x a power of two): its neighbour on the wide side may not */
        {
            char up[32], down[32];
            memcpy(up, d, (size_t)p + 1);
            memcpy(down, d, (size_t)p + 1);
            if (bump(up, p, +1) && reads_back(up, p, e - (p - 1), ax)) {
                memcpy(best, up, (size_t)p + 1);
                found = 1;
                break;
            }
            if (bump(down, p, -1) && reads_back(down, p, e - (p - 1), ax)) {
                memcpy(best, down, (size_t)p + 1);
                found = 1;
                break;
            }
        }
    }
    if (!found) { /* 17 digits always read back; kept for safety */
        e = sci_digits(ax, 17, best);
    }
    nd = (int)strlen(best);
    while (nd > 1 && best[nd - 1] == '0') nd--;
    best[nd] = '\0';
    decpt = e + 1; /* x = 0.best x 10^decpt */
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            ldp_buf_puts(out, "0.");
            for (i = 0; i < -decpt; i++) ldp_buf_putc(out, '0');
            ldp_buf_put(out, best, (size_t)nd);
        } else if (decpt < nd) {
            ldp_buf_put(out, best, (size_t)decpt);
            ldp_buf_putc(out, '.');
            ldp_buf_put(out, best + decpt, (size_t)(nd - decpt));
        } else {
            ldp_buf_put(out, best, (size_t)nd);
            for (i = nd; i < decpt; i++) ldp_buf_putc(out, '0');
            ldp_buf_puts(out, ".0");
        }
    } else {
        char tmp[16];
        int ex = decpt - 1;
        ldp_buf_putc(out, best[0]);
        if (nd > 1) {
            ldp_buf_putc(out, '.');
            ldp_buf_put(out, best + 1, (size_t)(nd - 1));
        }
        snprintf(tmp, sizeof tmp, "e%c%02d", ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
        ldp_buf_puts(out, tmp);
    }
}

/* ---- parser --------------------------------------------------------------------------------- */

typedef struct {
    const char *p, *end;
    ldp_json_doc *doc;
    int err;
    int depth;
    /* ldp_json_parse_lazy: the object at this path of keys is left unbuilt (path_len 0: none) */
    const char *const *path;
    size_t path_len;
    /* children of the arrays / objects being parsed (LIFO across nesting levels) */
    const ldp_json **items;
    size_t n_items, cap_items;
    ldp_json_member *members;
    size_t n_members, cap_members;
} parser;

static void skip_ws(parser *ps) {
    while (ps->p < ps->end &&
           (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static ldp_json *new_node(parser *ps, ldp_json_type t) {
    ldp_json *v = (ldp_json *)arena_alloc(ps->doc, sizeof *v);
    if (v == NULL) {
        ps->err = LDP_JSON_E_NOMEM;
        return NULL;
    }
    memset(v, 0, sizeof *v);
    v->type = t;
    return v;
}

static int hex4(const char *s, uint32_t *out) {
    uint32_t v = 0;
    int i;
    for (i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else return 0;
    }
    *out = v;
    return 1;
}

/* Parses a string starting at the opening quote; decoded into the arena. */
static int parse_string(parser *ps, const char **out, size_t *out_len) {
    const char *start = ++ps->p, *s;
    size_t raw = 0;
    char *buf, *w;
    /* find the closing quote (skipping escaped characters) */
    for (s = start; s < ps->end && *s != '"'; s++) {
        if (*s == '\\') {
            s++;
            if (s >= ps->end) break;
        }
    }
    if (s >= ps->end) {
        ps->err = LDP_JSON_E_SYNTAX;
        return 0;
    }
    raw = (size_t)(s - start);
    buf = (char *)arena_alloc(ps->doc, raw + 1);
    if (buf == NULL) {
        ps->err = LDP_JSON_E_NOMEM;
        return 0;
    }
    w = buf;
    s = start;
    while (s < start + raw) {
        unsigned char c = (unsigned char)*s;
        if (c == '\\') {
            char e = s[1];
            s += 2;
            switch (e) {
            case '"': *w++ = '"'; break;
            case '\\': *w++ = '\\'; break;
            case '/': *w++ = '/'; break;
            case 'b': *w++ = '\b'; break;
            case 'f': *w++ = '\f'; break;
            case 'n': *w++ = '\n'; break;
            case 'r': *w++ = '\r'; break;
            case 't': *w++ = '\t'; break;
            case 'u': {
                uint32_t cp, lo;
                if (start + raw - s < 4 || !hex4(s, &cp)) {
                    ps->err = LDP_JSON_E_SYNTAX;
                    return 0;
                }
                s += 4;
                if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    ps->err = LDP_JSON_E_UNICODE; /* lone low surrogate */
                    return 0;
                }
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (start + raw - s < 6 || s[0] != '\\' || s[1] != 'u' || !hex4(s + 2, &lo) ||
                        lo < 0xDC00 || lo > 0xDFFF) {
                        ps->err = LDP_JSON_E_UNICODE; /* lone high surrogate */
                        return 0;
                    }
                    s += 6;
                    cp = 0x10000u + ((cp - 0xD800u) << 10) + (lo - 0xDC00u);
                }
                /* the escape is at least 6 bytes, its UTF-8 at most 4: fits the buffer */
                w += utf8_put(w, cp);
                break;
            }
            default:
                ps->err = LDP_JSON_E_SYNTAX;
                return 0;
            }
        } else if (c < 0x20) {
            ps->err = LDP_JSON_E_UNICODE; /* raw control character */
            return 0;
        } else if (c < 0x80) {
            *w++ = (char)c;
            s++;
        } else {
            uint32_t cp;
            size_t k = utf8_seq((const unsigned char *)s, (size_t)(start + raw - s), &cp);
            if (k == 0) {
                ps->err = LDP_JSON_E_UNICODE;
                return 0;
            }
            memcpy(w, s, k);
            w += k;
            s += k;
        }
    }
    *w = '\0';
    ps->p = start + raw + 1;
    *out = buf;
    *out_len = (size_t)(w - buf);
    return 1;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* level: how many keys of ps->path lead to this value (-1: it is off the path) */
static const ldp_json *parse_value(parser *ps, int level);

static const ldp_json *parse_number(parser *ps) {
    const char *s = ps->p, *t = s;
    int is_float = 0;
    size_t int_digits;
    ldp_json *v;
    if (t < ps->end && *t == '-') t++;
    if (t >= ps->end || !is_digit(*t)) goto bad;
    if (*t == '0') t++;
    else
        while (t < ps->end && is_digit(*t)) t++;
    int_digits = (size_t)(t - s) - (*s == '-');
    if (t < ps->end && *t == '.') {
        is_float = 1;
        t++;
        if (t >= ps->end || !is_digit(*t)) goto bad;
        while (t < ps->end && is_digit(*t)) t++;
    }
    if (t < ps->end && (*t == 'e' || *t == 'E')) {
        is_float = 1;
        t++;
        if (t < ps->end && (*t == '+' || *t == '-')) t++;
        if (t >= ps->end || !is_digit(*t)) goto bad;
        while (t < ps->end && is_digit(*t)) t++;
    }
    v = new_node(ps, is_float ? LDP_JSON_FLOAT : LDP_JSON_INT);
    if (v == NULL) return NULL;
    v->num_text = s;
    v->num_len = (size_t)(t - s);
    if (is_float) {
        v->float_value = ldp_json_parse_double(s, v->num_len);
        if (!isfinite(v->float_value)) {
            ps->err = LDP_JSON_E_NUMBER;
            return NULL;
        }
    } else {
        const char *q = s + (*s == '-');
        uint64_t mag = 0;
        int fits = 1;
        if (int_digits > LDP_JSON_MAX_INT_DIGITS) {
            ps->err = LDP_JSON_E_NUMBER;
            return NULL;
        }
        for (; q < t; q++) {
            unsigned dgt = (unsigned)(*q - '0');
            if (mag > (UINT64_MAX - dgt) / 10u) {
                fits = 0;
                break;
            }
            mag = mag * 10u + dgt;
        }
        if (fits && *s == '-') {
            if (mag > (uint64_t)INT64_MAX + 1u) fits = 0;
            else v->int_value = mag == (uint64_t)INT64_MAX + 1u ? INT64_MIN : -(int64_t)mag;
        } else if (fits) {
            if (mag > (uint64_t)INT64_MAX) fits = 0;
            else v->int_value = (int64_t)mag;
        }
        v->int_fits = fits;
        /* an integer a double holds exactly is its own nearest double (-0 included) */
        if (fits && mag <= (1ull << 53))
            v->float_value = *s == '-' ? -(double)mag : (double)mag;
        else
            v->float_value = ldp_json_parse_double(s, v->num_len);
    }
    ps->p = t;
    return v;
bad:
    ps->err = LDP_JSON_E_SYNTAX;
    return NULL;
}

/* A member's key and the colon after it: 1, or 0 with ps->err set (objects, built or lazy). */
static int parse_key(parser *ps, const char **key, size_t *key_len) {
    skip_ws(ps);
    if (ps->p >= ps->end || *ps->p != '"') {
        ps->err = LDP_JSON_E_SYNTAX;
        return 0;
    }
    if (!parse_string(ps, key, key_len)) return 0;
    skip_ws(ps);
    if (ps->p >= ps->end || *ps->p != ':') {
        ps->err = LDP_JSON_E_SYNTAX;
        return 0;
    }
    ps->p++;
    return 1;
}

/* After an item or a member: 1 past a ',' (another follows), 0 past the closing byte, -1 with
 * ps->err set on anything else. */
static int next_or_close(parser *ps, char close) {
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ',') {
        ps->p++;
        return 1;
    }
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        return 0;
    }
    ps->err = LDP_JSON_E_SYNTAX;
    return -1;
}

static int push_item(parser *ps, const ldp_json *v) {
    if (ps->n_items == ps->cap_items) {
        size_t cap = ps->cap_items ? ps->cap_items * 2 : 64;
        const ldp_json **p = (const ldp_json **)realloc((void *)ps->items, cap * sizeof *p);
        if (p == NULL) {
            ps->err = LDP_JSON_E_NOMEM;
            return 0;
        }
        ps->items = p;
        ps->cap_items = cap;
    }
    ps->items[ps->n_items++] = v;
    return 1;
}

static int push_member(parser *ps, const char *key, size_t key_len, const ldp_json *v) {
    if (ps->n_members == ps->cap_members) {
        size_t cap = ps->cap_members ? ps->cap_members * 2 : 64;
        ldp_json_member *p = (ldp_json_member *)realloc(ps->members, cap * sizeof *p);
        if (p == NULL) {
            ps->err = LDP_JSON_E_NOMEM;
            return 0;
        }
        ps->members = p;
        ps->cap_members = cap;
    }
    ps->members[ps->n_members].key = key;
    ps->members[ps->n_members].key_len = key_len;
    ps->members[ps->n_members].value = v;
    ps->n_members++;
    return 1;
}

static int key_cmp(const char *a, size_t na, const char *b, size_t nb) {
    int c = memcmp(a, b, na < nb ? na : nb);
    if (c != 0) return c;
    return na < nb ? -1 : (na > nb);
}

static int member_cmp(const void *x, const void *y) {
    const ldp_json_member *a = *(const ldp_json_member *const *)x;
    const ldp_json_member *b = *(const ldp_json_member *const *)y;
    return key_cmp(a->key, a->key_len, b->key, b->key_len);
}

/* The level of a member `key` of an object at `level` (see parse_value). */
static int on_path(const parser *ps, int level, const char *key, size_t key_len) {
    const char *want;
    if (level < 0 || (size_t)level >= ps->path_len) return -1;
    want = ps->path[level];
    return strlen(want) == key_len && memcmp(want, key, key_len) == 0 ? level + 1 : -1;
}

static const ldp_json *parse_array(parser *ps) {
    size_t base = ps->n_items, n, i;
    ldp_json *v;
    const ldp_json **items;
    int more;
    ps->p++; /* [ */
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ']') {
        ps->p++;
    } else {
        for (;;) {
            const ldp_json *item = parse_value(ps, -1);
            if (item == NULL || !push_item(ps, item)) return NULL;
            more = next_or_close(ps, ']');
            if (more < 0) return NULL;
            if (!more) break;
        }
    }
    n = ps->n_items - base;
    v = new_node(ps, LDP_JSON_ARRAY);
    if (v == NULL) return NULL;
    items = (const ldp_json **)arena_alloc(ps->doc, (n ? n : 1) * sizeof *items);
    if (items == NULL) {
        ps->err = LDP_JSON_E_NOMEM;
        return NULL;
    }
    for (i = 0; i < n; i++) items[i] = ps->items[base + i];
    ps->n_items = base;
    v->n = n;
    v->items = items;
    return v;
}

static const ldp_json *parse_object(parser *ps, int level) {
    size_t base = ps->n_members, n, i;
    ldp_json *v;
    ldp_json_member *members;
    const ldp_json_member **sorted;
    int more;
    ps->p++; /* { */
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
    } else {
        for (;;) {
            const char *key;
            size_t key_len;
            const ldp_json *val;
            if (!parse_key(ps, &key, &key_len)) return NULL;
            val = parse_value(ps, on_path(ps, level, key, key_len));
            if (val == NULL || !push_member(ps, key, key_len, val)) return NULL;
            more = next_or_close(ps, '}');
            if (more < 0) return NULL;
            if (!more) break;
        }
    }
    n = ps->n_members - base;
    v = new_node(ps, LDP_JSON_OBJECT);
    if (v == NULL) return NULL;
    members = (ldp_json_member *)arena_alloc(ps->doc, (n ? n : 1) * sizeof *members);
    sorted = (const ldp_json_member **)arena_alloc(ps->doc, (n ? n : 1) * sizeof *sorted);
    if (members == NULL || sorted == NULL) {
        ps->err = LDP_JSON_E_NOMEM;
        return NULL;
    }
    for (i = 0; i < n; i++) {
        members[i] = ps->members[base + i];
        sorted[i] = &members[i];
    }
    ps->n_members = base;
    qsort((void *)sorted, n, sizeof *sorted, member_cmp);
    for (i = 1; i < n; i++) {
        if (key_cmp(sorted[i - 1]->key, sorted[i - 1]->key_len, sorted[i]->key,
                    sorted[i]->key_len) == 0) {
            ps->err = LDP_JSON_E_DUPLICATE;
            return NULL;
        }
    }
    v->n = n;
    v->members = members;
    v->sorted = sorted;
    return v;
}

/* An object left unbuilt (ldp_json_parse_lazy): each member is parsed as parse_object parses it,
 * then its memory is handed back; what is kept is the text, the number of members and the bytes
 * of their decoded keys. Repeated keys are not looked for (the caller does). */
static const ldp_json *parse_lazy_object(parser *ps) {
    const char *start = ps->p;
    size_t n = 0, key_bytes = 0;
    ldp_json *v;
    int more;
    ps->p++; /* { */
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
    } else {
        for (;;) {
            arena_mark mark = arena_get_mark(ps->doc);
            const char *key;
            size_t key_len;
            if (!parse_key(ps, &key, &key_len)) return NULL;
            if (parse_value(ps, -1) == NULL) return NULL;
            arena_release(ps->doc, mark);
            n++;
            key_bytes += key_len;
            more = next_or_close(ps, '}');
            if (more < 0) return NULL;
            if (!more) break;
        }
    }
    v = new_node(ps, LDP_JSON_LAZY);
    if (v == NULL) return NULL;
    v->str = start;
    v->str_len = (size_t)(ps->p - start);
    v->n = n;
    v->key_bytes = key_bytes;
    return v;
}

static const ldp_json *parse_value(parser *ps, int level) {
    const ldp_json *r = NULL;
    skip_ws(ps);
    if (ps->p >= ps->end) {
        ps->err = LDP_JSON_E_SYNTAX;
        return NULL;
    }
    if (++ps->depth > LDP_JSON_MAX_DEPTH) {
        ps->err = LDP_JSON_E_DEPTH;
        return NULL;
    }
    switch (*ps->p) {
    case '{':
        r = ps->path_len > 0 && level == (int)ps->path_len ? parse_lazy_object(ps)
                                                            : parse_object(ps, level);
        break;
    case '[': r = parse_array(ps); break;
    case '"': {
        const char *s;
        size_t n;
        ldp_json *v;
        if (!parse_string(ps, &s, &n)) break;
        v = new_node(ps, LDP_JSON_STRING);
        if (v == NULL) break;
        v->str = s;
        v->str_len = n;
        r = v;
        break;
    }
    case 't':
    case 'f':
    case 'n': {
        static const char *const words[3] = {"true", "false", "null"};
        static const ldp_json_type types[3] = {LDP_JSON_TRUE, LDP_JSON_FALSE, LDP_JSON_NULL};
        int k = *ps->p == 't' ? 0 : (*ps->p == 'f' ? 1 : 2);
        size_t wl = strlen(words[k]);
        if ((size_t)(ps->end - ps->p) < wl || memcmp(ps->p, words[k], wl) != 0) {
            ps->err = LDP_JSON_E_SYNTAX;
            break;
        }
        ps->p += wl;
        r = new_node(ps, types[k]);
        break;
    }
    default:
        if (*ps->p == '-' || is_digit(*ps->p)) r = parse_number(ps);
        else ps->err = LDP_JSON_E_SYNTAX;
    }
    ps->depth--;
    return r;
}

static int parse_document(const char *text, size_t len, const char *const *path,
                          size_t path_len, ldp_json_doc **doc, const ldp_json **root) {
    parser ps;
    const ldp_json *v;
    *doc = NULL;
    *root = NULL;
    memset(&ps, 0, sizeof ps);
    ps.doc = (ldp_json_doc *)calloc(1, sizeof *ps.doc);
    if (ps.doc == NULL) return LDP_JSON_E_NOMEM;
    ps.p = text;
    ps.end = text + len;
    ps.path = path;
    ps.path_len = path_len;
    v = parse_value(&ps, 0);
    if (v != NULL) {
        skip_ws(&ps);
        if (ps.p != ps.end) ps.err = LDP_JSON_E_SYNTAX;
    } else if (ps.err == LDP_JSON_OK) {
        ps.err = LDP_JSON_E_SYNTAX;
    }
    free((void *)ps.items);
    free(ps.members);
    if (ps.err != LDP_JSON_OK) {
        ldp_json_free(ps.doc);
        return ps.err;
    }
    *doc = ps.doc;
    *root = v;
    return LDP_JSON_OK;
}

int ldp_json_parse(const char *text, size_t len, ldp_json_doc **doc, const ldp_json **root) {
    return parse_document(text, len, NULL, 0, doc, root);
}

int ldp_json_parse_lazy(const char *text, size_t len, const char *const *path, size_t path_len,
                        ldp_json_doc **doc, const ldp_json **root) {
    /* the levels are ints */
    if (path_len > LDP_JSON_MAX_DEPTH) path_len = LDP_JSON_MAX_DEPTH + 1;
    return parse_document(text, len, path, path_len, doc, root);
}

/* ---- cursor over a lazy object -------------------------------------------------------------- */

struct ldp_json_cursor {
    parser ps; /* on the object's text, after its '{' */
    int first;
};

ldp_json_cursor *ldp_json_cursor_new(const ldp_json *lazy) {
    ldp_json_cursor *c;
    if (lazy == NULL || lazy->type != LDP_JSON_LAZY || lazy->str_len < 2) return NULL;
    c = (ldp_json_cursor *)calloc(1, sizeof *c);
    if (c == NULL) return NULL;
    c->ps.doc = (ldp_json_doc *)calloc(1, sizeof *c->ps.doc);
    if (c->ps.doc == NULL) {
        free(c);
        return NULL;
    }
    c->ps.p = lazy->str + 1;
    c->ps.end = lazy->str + lazy->str_len;
    c->first = 1;
    return c;
}

int ldp_json_cursor_next(ldp_json_cursor *c, const char **key, size_t *key_len,
                         const ldp_json **value) {
    parser *ps = &c->ps;
    const ldp_json *v;
    arena_block *b = ps->doc->blocks;
    *key = NULL;
    *key_len = 0;
    *value = NULL;
    /* the previous member's memory: all blocks but the first, which is reused */
    if (b != NULL) {
        while (b->next != NULL) b = b->next;
        arena_release(ps->doc, (arena_mark){b, 0});
    }
    ps->err = LDP_JSON_OK;
    skip_ws(ps);
    if (ps->p >= ps->end) return LDP_JSON_E_SYNTAX;
    if (*ps->p == '}') return LDP_JSON_OK; /* the end (and again on every later call) */
    if (!c->first) {
        if (*ps->p != ',') return LDP_JSON_E_SYNTAX;
        ps->p++;
        skip_ws(ps);
    }
    c->first = 0;
    if (ps->p >= ps->end || *ps->p != '"') return LDP_JSON_E_SYNTAX;
    if (!parse_string(ps, key, key_len)) return ps->err;
    skip_ws(ps);
    if (ps->p >= ps->end || *ps->p != ':') return LDP_JSON_E_SYNTAX;
    ps->p++;
    v = parse_value(ps, -1);
    if (v == NULL) return ps->err != LDP_JSON_OK ? ps->err : LDP_JSON_E_SYNTAX;
    *value = v;
    return LDP_JSON_OK;
}

void ldp_json_cursor_free(ldp_json_cursor *c) {
    if (c == NULL) return;
    free((void *)c->ps.items);
    free(c->ps.members);
    ldp_json_free(c->ps.doc);
    free(c);
}

const ldp_json *ldp_json_get(const ldp_json *v, const char *key) {
    return ldp_json_get_n(v, key, strlen(key));
}

const ldp_json *ldp_json_get_n(const ldp_json *v, const char *key, size_t klen) {
    size_t lo = 0, hi;
    if (v == NULL || v->type != LDP_JSON_OBJECT) return NULL;
    hi = v->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = key_cmp(v->sorted[mid]->key, v->sorted[mid]->key_len, key, klen);
        if (c == 0) return v->sorted[mid]->value;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

int ldp_json_is_number(const ldp_json *v) {
    return v != NULL && (v->type == LDP_JSON_INT || v->type == LDP_JSON_FLOAT);
}

double ldp_json_number(const ldp_json *v) { return v->float_value; }

/* ---- writers -------------------------------------------------------------------------------- */

static const char HEX[] = "0123456789abcdef";

static void put_u_escape(ldp_buf *out, uint32_t u) {
    char e[6] = {'\\', 'u', HEX[(u >> 12) & 15], HEX[(u >> 8) & 15], HEX[(u >> 4) & 15],
                 HEX[u & 15]};
    ldp_buf_put(out, e, 6);
}

void ldp_json_write_string(ldp_buf *out, const char *s, size_t len, int ensure_ascii) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    ldp_buf_putc(out, '"');
    while (i < len) {
        unsigned c = p[i];
        if (c == '"' || c == '\\') {
            ldp_buf_putc(out, '\\');
            ldp_buf_putc(out, (char)c);
            i++;
        } else if (c < 0x20) {
            switch (c) {
            case '\b': ldp_buf_puts(out, "\\b"); break;
            case '\f': ldp_buf_puts(out, "\\f"); break;
            case '\n': ldp_buf_puts(out, "\\n"); break;
            case '\r': ldp_buf_puts(out, "\\r"); break;
            case '\t': ldp_buf_puts(out, "\\t"); break;
            default: put_u_escape(out, c);
            }
            i++;
        } else if (c < 0x7F) {
            ldp_buf_putc(out, (char)c);
            i++;
        } else if (!ensure_ascii) {
            ldp_buf_putc(out, (char)c);
            i++;
        } else {
            uint32_t cp;
            size_t k = c == 0x7F ? 1 : utf8_seq(p + i, len - i, &cp);
            if (c == 0x7F) cp = 0x7F;
            if (k == 0) { /* callers pass valid UTF-8; refuse to write garbage */
                out->failed = 1;
                return;
            }
            if (cp >= 0x10000) {
                uint32_t v = cp - 0x10000u;
                put_u_escape(out, 0xD800u + (v >> 10));
                put_u_escape(out, 0xDC00u + (v & 0x3FFu));
            } else {
                put_u_escape(out, cp);
            }
            i += k;
        }
    }
    ldp_buf_putc(out, '"');
}

static void write_canonical(ldp_buf *out, const ldp_json *v) {
    size_t i;
    switch (v->type) {
    case LDP_JSON_NULL: ldp_buf_puts(out, "null"); break;
    case LDP_JSON_TRUE: ldp_buf_puts(out, "true"); break;
    case LDP_JSON_FALSE: ldp_buf_puts(out, "false"); break;
    case LDP_JSON_INT:
        /* Python reads an integer exactly and writes its decimal digits: only "-0" changes */
        if (v->num_len == 2 && v->num_text[0] == '-' && v->num_text[1] == '0')
            ldp_buf_putc(out, '0');
        else
            ldp_buf_put(out, v->num_text, v->num_len);
        break;
    case LDP_JSON_FLOAT: ldp_json_write_double(out, v->float_value); break;
    case LDP_JSON_STRING: ldp_json_write_string(out, v->str, v->str_len, 1); break;
    case LDP_JSON_ARRAY:
        ldp_buf_putc(out, '[');
        for (i = 0; i < v->n; i++) {
            if (i) ldp_buf_putc(out, ',');
            write_canonical(out, v->items[i]);
        }
        ldp_buf_putc(out, ']');
        break;
    case LDP_JSON_OBJECT:
        ldp_buf_putc(out, '{');
        for (i = 0; i < v->n; i++) {
            if (i) ldp_buf_putc(out, ',');
            ldp_json_write_string(out, v->sorted[i]->key, v->sorted[i]->key_len, 1);
            ldp_buf_putc(out, ':');
            write_canonical(out, v->sorted[i]->value);
        }
        ldp_buf_putc(out, '}');
        break;
    case LDP_JSON_LAZY: out->failed = 1; break; /* not built: nothing to write */
    }
}

int ldp_json_write_canonical(ldp_buf *out, const ldp_json *v) {
    write_canonical(out, v);
    return out->failed ? LDP_JSON_E_NOMEM : LDP_JSON_OK;
}
