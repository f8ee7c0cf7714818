/* Unicode for the tokenizer: Hugging Face tokenizers' character classes and lowercasing (tables
 * generated from the installed tokenizers, unicode_tables.h) and Unicode normalization (utf8proc,
 * restricted to the code points tokenizers' own normalization tables know, see
 * gen_unicode_tables.py). Code points are uint32_t; text is a ldp_u32vec. */
#ifndef LDP_UNICODE_H
#define LDP_UNICODE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t *v;
    size_t n, cap;
    int failed; /* an allocation failed: contents are incomplete */
} ldp_u32vec;

void ldp_u32_free(ldp_u32vec *a);
int ldp_u32_reserve(ldp_u32vec *a, size_t extra);
void ldp_u32_push(ldp_u32vec *a, uint32_t cp);

/* Decodes valid UTF-8 (check with ldp_utf8_valid first) into out (cleared first). */
void ldp_utf8_decode(const char *s, size_t len, ldp_u32vec *out);
/* Appends the UTF-8 of cps[0..n) to out (a byte buffer of at least 4 n bytes); returns bytes. */
size_t ldp_utf8_encode(const uint32_t *cps, size_t n, char *out);

/* Character classes (tokenizers' own, see unicode_tables.h). */
enum {
    LDP_UC_OTHER = 1, /* removed by BertNormalizer's clean_text */
    LDP_UC_SPACE = 2, /* Rust char::is_whitespace */
    LDP_UC_PUNCT = 4, /* BertPreTokenizer punctuation */
    LDP_UC_MN = 8,    /* removed by BertNormalizer's strip_accents (after NFD); none is ASCII */
    LDP_UC_MARK = 16  /* removed by the StripAccents normalizer (any mark); none is ASCII */
};
/* Whether cp is in class cls (one LDP_UC_ bit): the definition, searching the tables. */
int ldp_uc_search(int cls, uint32_t cp);
/* The classes of each ASCII code point (ldp_uc_search's answers, tested to agree): the predicates
 * below read it inline, since the tokenizer sees mostly ASCII and an out-of-line call per code
 * point and class was a fifth of its time. */
extern const unsigned char ldp_uc_ascii[128];

static inline int ldp_uc_is(int cls, uint32_t cp) {
    return cp < 0x80 ? (ldp_uc_ascii[cp] & cls) != 0 : ldp_uc_search(cls, cp);
}
static inline int ldp_uc_is_other(uint32_t cp) { return ldp_uc_is(LDP_UC_OTHER, cp); }
static inline int ldp_uc_is_space(uint32_t cp) { return ldp_uc_is(LDP_UC_SPACE, cp); }
static inline int ldp_uc_is_punct(uint32_t cp) { return ldp_uc_is(LDP_UC_PUNCT, cp); }
static inline int ldp_uc_is_mn(uint32_t cp) { return cp >= 0x300 && ldp_uc_search(LDP_UC_MN, cp); }
static inline int ldp_uc_is_mark(uint32_t cp) { return cp >= 0x300 && ldp_uc_search(LDP_UC_MARK, cp); }
/* BertNormalizer's CJK ranges (tokenizers/src/normalizers/bert.rs, is_chinese_char); one compare
 * for the code points below them */
static inline int ldp_uc_is_chinese(uint32_t cp) {
    return cp >= 0x3400 &&
           ((cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
            (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
            (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
            (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F));
}
static inline uint32_t ldp_uc_ascii_lower(uint32_t cp) { return cp - 'A' < 26u ? cp + 32u : cp; }
/* Rust char::to_lowercase: writes 1..3 code points, returns how many. */
size_t ldp_uc_lower(uint32_t cp, uint32_t out[3]);

enum { LDP_NF_NFD, LDP_NF_NFC, LDP_NF_NFKD, LDP_NF_NFKC };
/* out = normalization form `form` of in[0..n) as tokenizers computes it. out is cleared first and
 * must not alias in. Returns 0, or -1 on allocation failure. */
int ldp_uc_normalize(const uint32_t *in, size_t n, int form, ldp_u32vec *out);

/* "tokenizers X.Y.Z": the version the tables were generated from. */
const char *ldp_uc_tables_source(void);

#endif
