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

int ldp_uc_is_other(uint32_t cp);   /* removed by BertNormalizer's clean_text */
int ldp_uc_is_space(uint32_t cp);   /* Rust char::is_whitespace */
int ldp_uc_is_mn(uint32_t cp);      /* removed by BertNormalizer's strip_accents (after NFD) */
int ldp_uc_is_mark(uint32_t cp);    /* removed by the StripAccents normalizer (any mark) */
int ldp_uc_is_punct(uint32_t cp);   /* BertPreTokenizer punctuation */
int ldp_uc_is_chinese(uint32_t cp); /* BertNormalizer's CJK ranges */
/* Rust char::to_lowercase: writes 1..3 code points, returns how many. */
size_t ldp_uc_lower(uint32_t cp, uint32_t out[3]);

enum { LDP_NF_NFD, LDP_NF_NFC, LDP_NF_NFKD, LDP_NF_NFKC };
/* out = normalization form `form` of in[0..n) as tokenizers computes it. out is cleared first and
 * must not alias in. Returns 0, or -1 on allocation failure. */
int ldp_uc_normalize(const uint32_t *in, size_t n, int form, ldp_u32vec *out);

/* "tokenizers X.Y.Z": the version the tables were generated from. */
const char *ldp_uc_tables_source(void);

#endif
