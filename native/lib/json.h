/* A strict JSON parser (RFC 8259) and the canonical writers the bundle format needs.
 *
 * Strict: one value, whitespace only around tokens; strings must be valid UTF-8 with no raw
 * control characters; \u escapes must not leave a lone surrogate; numbers must be finite doubles
 * (or integers of at most 4300 digits, the limit CPython's json applies); objects must not repeat
 * a key (after escapes are decoded); nesting is at most LDP_JSON_MAX_DEPTH. Everything a parser
 * could interpret in two ways is refused, because two parsers reading one signed header
 * differently would be an attack (sdk/ldptext/bundle.py refuses the same inputs).
 *
 * Canonical writers reproduce, byte for byte, what Python's json.dumps writes for the bundle
 * format: ldp_json_write_canonical is `json.dumps(v, sort_keys=True, separators=(",", ":"),
 * ensure_ascii=True, allow_nan=False)` (the signed manifest), ldp_json_write_string with
 * ensure_ascii = 0 is the string form of `json.dumps(..., ensure_ascii=False)` (the safetensors
 * header), ldp_json_write_double is Python's float repr. A document is canonical exactly when
 * writing it back gives the same bytes; the loader checks that by comparison. */
#ifndef LDP_JSON_H
#define LDP_JSON_H

#include <stddef.h>
#include <stdint.h>

#define LDP_JSON_MAX_DEPTH 200
#define LDP_JSON_MAX_INT_DIGITS 4300

typedef enum {
    LDP_JSON_NULL,
    LDP_JSON_FALSE,
    LDP_JSON_TRUE,
    LDP_JSON_INT,    /* no fraction, no exponent; int_value valid when int_fits */
    LDP_JSON_FLOAT,  /* fraction or exponent; float_value finite */
    LDP_JSON_STRING,
    LDP_JSON_ARRAY,
    LDP_JSON_OBJECT,
    LDP_JSON_LAZY /* an object left unbuilt by ldp_json_parse_lazy: read it with a cursor */
} ldp_json_type;

enum {
    LDP_JSON_OK = 0,
    LDP_JSON_E_SYNTAX = 1,    /* not JSON, or trailing content */
    LDP_JSON_E_DUPLICATE = 2, /* an object repeats a key */
    LDP_JSON_E_DEPTH = 3,     /* nested deeper than LDP_JSON_MAX_DEPTH */
    LDP_JSON_E_NUMBER = 4,    /* a number overflows a double, or an integer is too long */
    LDP_JSON_E_UNICODE = 5,   /* invalid UTF-8, raw control character, or a lone surrogate */
    LDP_JSON_E_NOMEM = 6
};

typedef struct ldp_json ldp_json;
typedef struct ldp_json_doc ldp_json_doc;

typedef struct {
    const char *key; /* decoded, NUL-terminated (a key may also hold NUL: use key_len) */
    size_t key_len;
    const ldp_json *value;
} ldp_json_member;

struct ldp_json {
    ldp_json_type type;
    /* numbers: the exact source text (not NUL-terminated) */
    const char *num_text;
    size_t num_len;
    int64_t int_value;
    int int_fits;
    double float_value;
    /* strings: decoded, NUL-terminated; may hold NUL, use str_len. Lazy objects: their source
     * text, from '{' to '}' (not NUL-terminated) */
    const char *str;
    size_t str_len;
    /* lazy objects: the bytes of their keys, decoded, all together */
    size_t key_bytes;
    /* arrays: items; objects: members in document order and sorted by key (bytewise, which
     * is code point order for UTF-8); lazy objects: the number of members */
    size_t n;
    const ldp_json *const *items;
    const ldp_json_member *members;
    const ldp_json_member *const *sorted;
};

/* Parses text[0..len). On success *doc owns everything (free with ldp_json_free) and *root is the
 * value; the source text must stay alive as long as *doc (numbers point into it). Returns
 * LDP_JSON_OK or an LDP_JSON_E_* code. */
int ldp_json_parse(const char *text, size_t len, ldp_json_doc **doc, const ldp_json **root);
void ldp_json_free(ldp_json_doc *doc);

/* ldp_json_parse, but an object found at `path` (path_len keys from the root, each through an
 * object) is not built: it becomes an LDP_JSON_LAZY value (its text, the number of members and
 * their key bytes), so a large object costs no memory per member. It is checked as strictly as
 * the rest (syntax, UTF-8, escapes, numbers, depth, repeated keys inside its members' values)
 * but for one thing: whether its own keys repeat. The caller must check that while reading the
 * members with a cursor, and refuse the document when one does. A document with a lazy value
 * cannot be written by ldp_json_write_canonical. */
int ldp_json_parse_lazy(const char *text, size_t len, const char *const *path, size_t path_len,
                        ldp_json_doc **doc, const ldp_json **root);

/* The members of a lazy object, one at a time, in document order, in constant memory. */
typedef struct ldp_json_cursor ldp_json_cursor;
/* A cursor on `lazy` (an LDP_JSON_LAZY value, whose document must stay alive), or NULL when out
 * of memory. */
ldp_json_cursor *ldp_json_cursor_new(const ldp_json *lazy);
/* The next member: its decoded key (NUL-terminated; may hold NUL, use key_len) and its value,
 * both valid until the next call; *value is NULL after the last member. LDP_JSON_OK, or
 * LDP_JSON_E_NOMEM (or another LDP_JSON_E_* code for a value that did not come from
 * ldp_json_parse_lazy). */
int ldp_json_cursor_next(ldp_json_cursor *c, const char **key, size_t *key_len,
                         const ldp_json **value);
void ldp_json_cursor_free(ldp_json_cursor *c);

/* Member `key` (NUL-terminated) of an object, or NULL (also when v is not an object). */
const ldp_json *ldp_json_get(const ldp_json *v, const char *key);
/* The same for a key of key_len bytes (which may contain NUL). */
const ldp_json *ldp_json_get_n(const ldp_json *v, const char *key, size_t key_len);
int ldp_json_is_number(const ldp_json *v);
/* The value of a number as a double (integers converted, rounding to nearest). */
double ldp_json_number(const ldp_json *v);

/* A growable byte buffer. */
typedef struct {
    char *data;
    size_t len, cap;
    int failed; /* an allocation failed: contents are incomplete */
} ldp_buf;

void ldp_buf_init(ldp_buf *b);
void ldp_buf_free(ldp_buf *b);
void ldp_buf_put(ldp_buf *b, const void *data, size_t n);
void ldp_buf_putc(ldp_buf *b, char c);
void ldp_buf_puts(ldp_buf *b, const char *s);
void ldp_buf_put_u64(ldp_buf *b, uint64_t v);

/* The canonical form of v (see top); returns 0, or LDP_JSON_E_NOMEM. */
int ldp_json_write_canonical(ldp_buf *out, const ldp_json *v);
/* A JSON string literal of s[0..len) (valid UTF-8) in Python's spelling: ensure_ascii = 1 escapes
 * every code point outside ' '..'~' (\uXXXX, surrogate pairs above U+FFFF, lowercase hex),
 * ensure_ascii = 0 escapes only '"', '\\' and code points below U+0020. */
void ldp_json_write_string(ldp_buf *out, const char *s, size_t len, int ensure_ascii);
/* Python's repr() of a finite double: the shortest digits that read back to x, fixed notation
 * for decimal exponents in (-4, 16], else d.ddde+XX. Locale-independent. */
void ldp_json_write_double(ldp_buf *out, double x);
/* Parses a JSON number's text (already validated) to the nearest double, independent of the C
 * locale. */
double ldp_json_parse_double(const char *text, size_t len);

/* 1 if s[0..len) is valid UTF-8 (no surrogates, no overlong forms, at most U+10FFFF). */
int ldp_utf8_valid(const char *s, size_t len);

#endif
