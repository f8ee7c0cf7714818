/* Conformance tool for tests/test_libldptext_conformance.py: reads lines
 *   FORM <tab> input (hex of its UTF-8) <tab> expected output (hex of its UTF-8)
 * where the expectation is what Hugging Face tokenizers' normalizer FORM returns (NFC, NFD, NFKC,
 * NFKD, Lowercase, StripAccents, BertNormalizer with its defaults, or with the options below),
 * normalizes the input with
 * the C tokenizer's normalizer and prints every mismatch (the first 50) and a summary line:
 *   checked N mismatches M */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ldptext.h"
#include "tokenizer.h"

/* name, normalizer type, its options (BertNormalizer's are each on or off somewhere) */
static const char *const FORMS[][3] = {
    {"NFC", "NFC", ""}, {"NFD", "NFD", ""}, {"NFKC", "NFKC", ""}, {"NFKD", "NFKD", ""},
    {"Lowercase", "Lowercase", ""}, {"StripAccents", "StripAccents", ""},
    {"BertNormalizer", "BertNormalizer",
     ",\"clean_text\":true,\"handle_chinese_chars\":true,\"strip_accents\":null,\"lowercase\":true"},
    {"BertNormalizer-cased", "BertNormalizer",
     ",\"clean_text\":true,\"handle_chinese_chars\":true,\"strip_accents\":true,\"lowercase\":false"},
    {"BertNormalizer-accents", "BertNormalizer",
     ",\"clean_text\":false,\"handle_chinese_chars\":false,\"strip_accents\":false,"
     "\"lowercase\":true"}};
#define N_FORMS (sizeof FORMS / sizeof FORMS[0])

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* hex of UTF-8 -> code points; (size_t)-1 if malformed */
static size_t parse_cps(const char *s, uint32_t *out, size_t cap) {
    static char bytes[1 << 19];
    size_t n = 0, i;
    ldp_u32vec v;
    while (hexval(s[0]) >= 0 && hexval(s[1]) >= 0 && n < sizeof bytes) {
        bytes[n++] = (char)(hexval(s[0]) * 16 + hexval(s[1]));
        s += 2;
    }
    if (!ldp_utf8_valid(bytes, n)) return (size_t)-1;
    memset(&v, 0, sizeof v);
    ldp_utf8_decode(bytes, n, &v);
    if (v.n > cap) {
        ldp_u32_free(&v);
        return (size_t)-1;
    }
    for (i = 0; i < v.n; i++) out[i] = v.v[i];
    n = v.n;
    ldp_u32_free(&v);
    return n;
}

int main(void) {
    ldp_tokenizer *tok[N_FORMS];
    ldp_tok_work work;
    static char line[1 << 20];
    static uint32_t in[1 << 17], want[1 << 17];
    unsigned long long checked = 0, bad = 0, lineno = 0;
    size_t f;
    memset(&work, 0, sizeof work);
    for (f = 0; f < N_FORMS; f++) {
        char json[512];
        snprintf(json, sizeof json,
                 "{\"normalizer\":{\"type\":\"%s\"%s},\"model\":{\"type\":\"WordLevel\","
                 "\"vocab\":{\"<unk>\":0},\"unk_token\":\"<unk>\"}}",
                 FORMS[f][1], FORMS[f][2]);
        if (ldp_tokenizer_load(json, strlen(json), &tok[f]) != LDP_OK) {
            fprintf(stderr, "cannot load normalizer %s\n", FORMS[f][0]);
            return 2;
        }
    }
    while (fgets(line, sizeof line, stdin) != NULL) {
        char *tab1 = strchr(line, '\t'), *tab2;
        size_t n_in, n_want, i;
        lineno++;
        if (tab1 == NULL || (tab2 = strchr(tab1 + 1, '\t')) == NULL) {
            fprintf(stderr, "line %llu: malformed\n", lineno);
            return 2;
        }
        *tab1 = *tab2 = '\0';
        for (f = 0; f < N_FORMS && strcmp(FORMS[f][0], line) != 0; f++) {
        }
        if (f == N_FORMS) {
            fprintf(stderr, "line %llu: unknown form %s\n", lineno, line);
            return 2;
        }
        n_in = parse_cps(tab1 + 1, in, sizeof in / sizeof in[0]);
        n_want = parse_cps(tab2 + 1, want, sizeof want / sizeof want[0]);
        if (n_in == (size_t)-1 || n_want == (size_t)-1) {
            fprintf(stderr, "line %llu: malformed hex or UTF-8\n", lineno);
            return 2;
        }
        if (ldp_tokenizer_normalize(tok[f], &work, in, n_in) != LDP_OK) return 2;
        checked++;
        if (work.text.n != n_want || (n_want && memcmp(work.text.v, want, n_want * 4) != 0)) {
            if (bad++ < 50) {
                printf("MISMATCH %s in:", FORMS[f][0]);
                for (i = 0; i < n_in && i < 24; i++) printf(" %X", in[i]);
                printf(" | got:");
                for (i = 0; i < work.text.n && i < 24; i++) printf(" %X", work.text.v[i]);
                printf(" | want:");
                for (i = 0; i < n_want && i < 24; i++) printf(" %X", want[i]);
                printf("\n");
            }
        }
    }
    printf("checked %llu mismatches %llu\n", checked, bad);
    for (f = 0; f < N_FORMS; f++) ldp_tokenizer_free(tok[f]);
    ldp_tok_work_free(&work);
    return 0;
}
