/* The tokenizer against ids Hugging Face tokenizers 0.23 gives for the same JSON (expected values
 * recorded from it), odd input, capacity handling and decoding. The large conformance run against
 * the real tokenizers is tests/test_libldptext_conformance.py. */
#include <stdint.h>

#include "bundle_writer.h"
#include "ldptext.h"
#include "testing.h"
#include "tokenizer.h"
#include "unicode.h"

static ldp_tokenizer *wp, *wl;
static ldp_tok_work work;

static int ids_equal(ldp_tokenizer *t, const char *text, size_t len, const int32_t *want,
                     size_t n_want) {
    int32_t got[256];
    size_t n = 0, i;
    int rc = ldp_tokenizer_encode(t, &work, text, len, got, 256, &n);
    if (rc != LDP_OK || n != n_want) {
        fprintf(stderr, "  '%.20s': rc %d, %zu ids (want %zu)\n", text, rc, n, n_want);
        return 0;
    }
    for (i = 0; i < n; i++)
        if (got[i] != want[i]) {
            fprintf(stderr, "  '%.20s': id %zu is %d, want %d\n", text, i, got[i], want[i]);
            return 0;
        }
    return 1;
}

#define IDS(t, text, ...)                                                                 \
    do {                                                                                  \
        static const int32_t want_[] = {__VA_ARGS__};                                     \
        CHECK(ids_equal(t, text, sizeof(text) - 1, want_, sizeof want_ / sizeof want_[0])); \
    } while (0)
#define NO_IDS(t, text) CHECK(ids_equal(t, text, sizeof(text) - 1, NULL, 0))

static void test_wordpiece_matches_tokenizers(void) {
    IDS(wp, "Hello, World!", 5, 10, 6, 11);
    IDS(wp, "unaffable", 7, 8, 9);
    IDS(wp, "Caf\xc3\xa9 na\xc3\xafve", 12, 23); /* accents stripped */
    IDS(wp, "\xe4\xb8\x9c\xe4\xba\xac", 13, 14);  /* CJK characters split */
    IDS(wp, "hello[MASK]world", 5, 25, 27, 26, 6); /* a typed special token is text */
    IDS(wp, "[mask]", 25, 27, 26);                /* not an added token once lowercase */
    IDS(wp, "don't", 21, 19, 20);
    IDS(wp, "aaaa", 17, 18, 18, 18);
    IDS(wp, "xyz hello", 1, 5);
    NO_IDS(wp, "");
    NO_IDS(wp, "  \t\n");
    IDS(wp, "HELLO\xe2\x80\x8bWORLD", 1);         /* zero-width space removed: one unknown word */
    IDS(wp, "\xc4\xb0s", 15, 16);                 /* U+0130 -> i + U+0307 (stripped) */
    IDS(wp, "hello\0world", 1);                   /* NUL removed */
    IDS(wp, "##", 1, 1);
    IDS(wp, "a##a", 17, 1, 1, 17);
}

static void test_wordpiece_max_input_chars(void) {
    char word[102];
    int32_t ids[128];
    size_t n;
    memset(word, 'a', sizeof word);
    CHECK_RC(ldp_tokenizer_encode(wp, &work, word, 100, ids, 128, &n), LDP_OK);
    CHECK(n == 100 && ids[0] == 17 && ids[99] == 18);
    CHECK_RC(ldp_tokenizer_encode(wp, &work, word, 101, ids, 128, &n), LDP_OK);
    CHECK(n == 1 && ids[0] == 1);
}

static void test_word_level(void) {
    IDS(wl, "Alpha BETA, gamma!", 0, 1, 7, 2, 7);
    IDS(wl, "\xef\xbc\xa1LPHA", 0); /* fullwidth A: NFKC then lowercase */
    IDS(wl, "unknownword", 7);
    NO_IDS(wl, "");
}

static void test_one_megabyte_word_is_one_unknown_token(void) {
    size_t len = 1 << 20, n = 0;
    char *big = (char *)malloc(len);
    int32_t ids[4];
    REQUIRE(big != NULL);
    memset(big, 'x', len);
    CHECK_RC(ldp_tokenizer_encode(wp, &work, big, len, ids, 4, &n), LDP_OK);
    CHECK(n == 1 && ids[0] == 1);
    CHECK_RC(ldp_tokenizer_encode(wl, &work, big, len, ids, 4, &n), LDP_OK);
    CHECK(n == 1 && ids[0] == 7);
    free(big);
}

static void test_invalid_utf8_is_refused(void) {
    static const char *const bad[] = {"\xff", "a\x80", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                                      "\xe2\x82", "\xf0\x9f\x98"};
    size_t i, n = 99;
    int32_t ids[8];
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_RC(ldp_tokenizer_encode(wp, &work, bad[i], strlen(bad[i]), ids, 8, &n),
                 LDP_E_INVALID_UTF8);
        CHECK(n == 0);
    }
}

static void test_capacity_reports_the_count(void) {
    int32_t ids[2];
    size_t n = 0;
    CHECK_RC(ldp_tokenizer_encode(wp, &work, "hello, world!", 13, ids, 2, &n), LDP_E_CAPACITY);
    CHECK(n == 4 && ids[0] == 5 && ids[1] == 10);
    CHECK_RC(ldp_tokenizer_encode(wp, &work, "hello, world!", 13, NULL, 0, &n), LDP_E_CAPACITY);
    CHECK(n == 4);
}

static void test_decode_joins_like_python(void) {
    /* tokenization.py TextTokenizer.decode: '##' pieces attach, BERT clean-up */
    static const int32_t a[] = {7, 8, 9, 10, 5, 11, 21, 19, 20};
    static const int32_t b[] = {0, 1, 2};
    ldp_buf out;
    ldp_buf_init(&out);
    CHECK_RC(ldp_tokenizer_decode(wp, a, 9, &out), LDP_OK);
    CHECK(out.data != NULL && strcmp(out.data, "unaffable, hello! don't") == 0);
    ldp_buf_free(&out);
    {
        /* the clean-up rules one after another, each over the previous one's result (Python's
         * chain of str.replace): "hello . . ' i ' t ' ' , ! i ' don ' t ." */
        static const int32_t c[] = {5, 22, 22, 19, 15, 19, 20, 19, 19, 10, 11, 15, 19, 21, 19, 20, 22};
        ldp_buf_init(&out);
        CHECK_RC(ldp_tokenizer_decode(wp, c, sizeof c / sizeof c[0], &out), LDP_OK);
        CHECK(out.data != NULL && strcmp(out.data, "hello..'i't'',! i'don't.") == 0);
        ldp_buf_free(&out);
    }
    ldp_buf_init(&out);
    CHECK_RC(ldp_tokenizer_decode(wl, b, 3, &out), LDP_OK);
    CHECK(out.data != NULL && strcmp(out.data, "alpha beta gamma") == 0);
    ldp_buf_free(&out);
    ldp_buf_init(&out);
    CHECK_RC(ldp_tokenizer_decode(wl, b, 0, &out), LDP_OK);
    CHECK(out.data != NULL && out.len == 0);
    ldp_buf_free(&out);
    ldp_buf_init(&out);
    {
        static const int32_t bad[] = {0, 8};
        CHECK_RC(ldp_tokenizer_decode(wl, bad, 2, &out), LDP_E_INPUT_ID);
    }
    ldp_buf_free(&out);
}

static void test_unsupported_and_malformed_tokenizers_are_refused(void) {
    static const struct {
        const char *json;
        int rc;
    } cases[] = {
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]}}", LDP_E_TOKENIZER_UNSUPPORTED},
        {"{\"normalizer\":{\"type\":\"Replace\"},\"model\":{\"type\":\"WordLevel\","
         "\"vocab\":{\"<unk>\":0},\"unk_token\":\"<unk>\"}}",
         LDP_E_TOKENIZER_UNSUPPORTED},
        {"{\"pre_tokenizer\":{\"type\":\"Whitespace\"},\"model\":{\"type\":\"WordLevel\","
         "\"vocab\":{\"<unk>\":0},\"unk_token\":\"<unk>\"}}",
         LDP_E_TOKENIZER_UNSUPPORTED},
        {"{\"model\":{\"type\":\"WordLevel\",\"vocab\":{\"a\":0},\"unk_token\":\"<unk>\"}}",
         LDP_E_TOKENIZER}, /* unknown token missing from the vocabulary */
        {"{\"model\":{\"type\":\"WordLevel\",\"vocab\":{\"a\":-1},\"unk_token\":\"a\"}}",
         LDP_E_TOKENIZER},
        {"{\"model\":{\"type\":\"WordLevel\",\"vocab\":{\"a\":0,\"a\":1},\"unk_token\":\"a\"}}",
         LDP_E_TOKENIZER_JSON},
        {"{\"added_tokens\":[{\"id\":0,\"content\":\"x\",\"normalized\":false,\"lstrip\":true}],"
         "\"model\":{\"type\":\"WordLevel\",\"vocab\":{\"x\":0},\"unk_token\":\"x\"}}",
         LDP_E_TOKENIZER_UNSUPPORTED},
        {"[1,2]", LDP_E_TOKENIZER},
        {"{", LDP_E_TOKENIZER_JSON},
        /* the vocabulary is read from its text: malformed JSON there is still malformed JSON,
         * refused before anything else is looked at */
        {"{\"normalizer\":{\"type\":\"Replace\"},\"model\":{\"type\":\"WordLevel\","
         "\"vocab\":{\"a\":0,\"a\":1},\"unk_token\":\"a\"}}",
         LDP_E_TOKENIZER_JSON},
        {"{\"model\":{\"type\":\"WordLevel\",\"vocab\":{\"a\":\"x\",\"b\":0,\"b\":1},"
         "\"unk_token\":\"b\"}}",
         LDP_E_TOKENIZER_JSON},
        {"{\"model\":{\"type\":\"WordLevel\",\"vocab\":{\"a\":0,\"\\u0061\":1},"
         "\"unk_token\":\"a\"}}",
         LDP_E_TOKENIZER_JSON},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"a\":1},\"merges\":[]}}",
         LDP_E_TOKENIZER_JSON},
        {"{\"model\":{\"type\":\"WordLevel\",\"vocab\":{\"a\":{\"k\":1,\"k\":2}},"
         "\"unk_token\":\"a\"}}",
         LDP_E_TOKENIZER_JSON},
        {"{\"model\":{\"type\":\"WordLevel\",\"vocab\":{\"a\":0},\"vocab\":{\"b\":0},"
         "\"unk_token\":\"a\"}}",
         LDP_E_TOKENIZER_JSON},
        {"{\"model\":{\"type\":\"WordLevel\",\"vocab\":{\"a\":[0,]},\"unk_token\":\"a\"}}",
         LDP_E_TOKENIZER_JSON},
        {"{\"model\":{\"type\":\"WordLevel\",\"vocab\":{\"a\":0}},\"x\":{\"k\":1,\"k\":1}}",
         LDP_E_TOKENIZER_JSON},
        {"[{\"model\":{\"vocab\":{\"a\":0,\"a\":1}}}]", LDP_E_TOKENIZER_JSON},
        /* ... and ids that are not ids where they were refused before */
        {"{\"model\":{\"type\":\"WordLevel\",\"vocab\":{\"a\":1.0},\"unk_token\":\"a\"}}",
         LDP_E_TOKENIZER},
        {"{\"model\":{\"type\":\"WordLevel\",\"vocab\":{\"a\":2147483648},"
         "\"unk_token\":\"a\"}}",
         LDP_E_TOKENIZER},
        {"{\"model\":{\"type\":\"WordLevel\",\"vocab\":{\"a\":0,\"b\":null},"
         "\"unk_token\":\"a\"}}",
         LDP_E_TOKENIZER},
        {"{\"model\":{\"type\":\"WordLevel\",\"vocab\":[\"a\"],\"unk_token\":\"a\"}}",
         LDP_E_TOKENIZER},
        {"{\"model\":{\"type\":\"WordLevel\",\"vocab\":{},\"unk_token\":\"a\"}}",
         LDP_E_TOKENIZER},
        {"{\"normalizer\":{\"type\":\"Replace\"},\"model\":{\"type\":\"WordLevel\","
         "\"vocab\":{\"a\":\"x\"},\"unk_token\":\"a\"}}",
         LDP_E_TOKENIZER_UNSUPPORTED},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":\"x\"}}}", LDP_E_TOKENIZER_UNSUPPORTED},
        {"{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"a\":-1},\"unk_token\":\"a\","
         "\"continuing_subword_prefix\":\"##\",\"max_input_chars_per_word\":100}}",
         LDP_E_TOKENIZER},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ldp_tokenizer *t = NULL;
        CHECK_RC(ldp_tokenizer_load(cases[i].json, strlen(cases[i].json), &t), cases[i].rc);
        CHECK(t == NULL);
    }
}

/* A word-level tokenizer of n words "w<i>" (ids 2i: odd ids have no token), and <unk> = 1. */
static ldp_tokenizer *many_words(size_t n) {
    ldp_buf j;
    ldp_tokenizer *t = NULL;
    size_t i;
    ldp_buf_init(&j);
    ldp_buf_puts(&j, "{\"pre_tokenizer\":{\"type\":\"WhitespaceSplit\"},\"model\":{\"type\":"
                     "\"WordLevel\",\"unk_token\":\"<unk>\",\"vocab\":{\"<unk>\":1");
    for (i = 0; i < n; i++) {
        char m[48];
        snprintf(m, sizeof m, ",\"w%zu\":%zu", i, 2 * i);
        ldp_buf_puts(&j, m);
    }
    ldp_buf_puts(&j, "}}}");
    if (!j.failed && ldp_tokenizer_load(j.data, j.len, &t) != LDP_OK) t = NULL;
    ldp_buf_free(&j);
    return t;
}

static void test_large_vocabulary(void) {
    /* every word of 50,000 found, near misses not: the table at full load */
    size_t n = 50000, i, got = 0;
    ldp_tokenizer *t = many_words(n);
    int ok = 1;
    REQUIRE(t != NULL);
    for (i = 0; i < n + 100; i++) {
        char w[32];
        int32_t id = -1;
        snprintf(w, sizeof w, "w%zu", i);
        ok &= ldp_tokenizer_encode(t, &work, w, strlen(w), &id, 1, &got) == LDP_OK && got == 1 &&
              id == (i < n ? (int32_t)(2 * i) : 1);
        snprintf(w, sizeof w, "w%zux", i);
        ok &= ldp_tokenizer_encode(t, &work, w, strlen(w), &id, 1, &got) == LDP_OK && id == 1;
    }
    CHECK(ok);
    {
        /* an id between two words has no token: its piece is " " (the Python table's "") */
        static const int32_t ids[] = {0, 3, 4, 99998, 1};
        ldp_buf out;
        ldp_buf_init(&out);
        CHECK_RC(ldp_tokenizer_decode(t, ids, 5, &out), LDP_OK);
        CHECK(out.data != NULL && strcmp(out.data, "w0  w2 w49999 <unk>") == 0);
        CHECK_RC(ldp_tokenizer_decode(t, ids + 3, 1, &out), LDP_OK);
        ldp_buf_free(&out);
        ldp_buf_init(&out);
        {
            static const int32_t past[] = {99999};
            CHECK_RC(ldp_tokenizer_decode(t, past, 1, &out), LDP_E_INPUT_ID);
        }
        ldp_buf_free(&out);
    }
    ldp_tokenizer_free(t);
}

static void test_odd_vocabularies(void) {
    /* keys with NUL and escapes, two keys of one id, an added token over a vocabulary id, the
     * continuation prefix as a whole token */
    static const char json[] =
        "{\"added_tokens\":[{\"id\":4,\"content\":\"[X]\",\"normalized\":false,\"special\":false}],"
        "\"pre_tokenizer\":{\"type\":\"WhitespaceSplit\"},\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[U]\",\"continuing_subword_prefix\":\"##\","
        "\"max_input_chars_per_word\":100,\"vocab\":{\"[U]\":0,\"a\\u0000b\":1,\"a\":2,\"##\":3,"
        "\"x\":4,\"\\u00e9t\\u00e9\":5,\"y\":6,\"z\":6,\"##b\":7}}}";
    ldp_tokenizer *t = NULL;
    REQUIRE(ldp_tokenizer_load(json, sizeof json - 1, &t) == LDP_OK);
    IDS(t, "a", 2);
    IDS(t, "ab", 2, 7);
    IDS(t, "a\0b", 1);
    IDS(t, "\xc3\xa9t\xc3\xa9", 5);
    IDS(t, "y z", 6, 6);
    IDS(t, "x[X]x", 4, 4, 4);
    IDS(t, "##", 3);
    {
        static const int32_t ids[] = {2, 7, 3, 4, 1};
        ldp_buf out;
        ldp_buf_init(&out);
        CHECK_RC(ldp_tokenizer_decode(t, ids, 5, &out), LDP_OK);
        /* "##" decodes as "" (prefix stripped), id 4 as the added token */
        CHECK(out.len == 10 && memcmp(out.data, "ab [X] a\0b", 10) == 0);
        ldp_buf_free(&out);
    }
    ldp_tokenizer_free(t);
}

static void test_unicode_classes_on_ascii(void) {
    static const int classes[] = {LDP_UC_OTHER, LDP_UC_SPACE, LDP_UC_PUNCT, LDP_UC_MN, LDP_UC_MARK};
    /* CJK range edges: each first and last code point in, its neighbours out */
    static const uint32_t cjk_in[] = {0x3400, 0x4DBF, 0x4E00, 0x9FFF, 0x20000, 0x2A6DF, 0x2A700,
                                      0x2B81F, 0x2B920, 0x2CEAF, 0xF900, 0xFAFF, 0x2F800, 0x2FA1F};
    static const uint32_t cjk_out[] = {0, 'a', 0x33FF, 0x4DC0, 0x4DFF, 0xA000, 0x1FFFF, 0x2A6E0,
                                       0x2A6FF, 0x2B820, 0x2B91F, 0x2CEB0, 0xF8FF, 0xFB00,
                                       0x2F7FF, 0x2FA20, 0x10FFFF};
    uint32_t c, low[3];
    size_t k;
    for (c = 0; c < 128; c++) {
        CHECK(ldp_uc_lower(c, low) == 1);
        CHECK(low[0] == ((c >= 'A' && c <= 'Z') ? c + 32 : c));
        CHECK(ldp_uc_ascii_lower(c) == low[0]);
        /* the inline table says what the definitions say */
        for (k = 0; k < sizeof classes / sizeof classes[0]; k++)
            CHECK(((ldp_uc_ascii[c] & classes[k]) != 0) == ldp_uc_search(classes[k], c));
        CHECK(ldp_uc_is_other(c) == ldp_uc_search(LDP_UC_OTHER, c));
        CHECK(ldp_uc_is_space(c) == ldp_uc_search(LDP_UC_SPACE, c));
        CHECK(ldp_uc_is_punct(c) == ldp_uc_search(LDP_UC_PUNCT, c));
        CHECK(!ldp_uc_is_mn(c) && !ldp_uc_is_mark(c) && !ldp_uc_is_chinese(c));
    }
    CHECK(ldp_uc_is_other(0x0B) && ldp_uc_is_space(0x0B) && ldp_uc_is_space(' ') &&
          !ldp_uc_is_space(0x1C) && ldp_uc_is_other(0x7F) && !ldp_uc_is_other('\t') &&
          ldp_uc_is_punct('`') && ldp_uc_is_punct('~') && !ldp_uc_is_punct(' '));
    for (k = 0; k < sizeof cjk_in / sizeof cjk_in[0]; k++) CHECK(ldp_uc_is_chinese(cjk_in[k]));
    for (k = 0; k < sizeof cjk_out / sizeof cjk_out[0]; k++) CHECK(!ldp_uc_is_chinese(cjk_out[k]));
    CHECK(ldp_uc_is_space(0x3000) && ldp_uc_is_space(0x85) && !ldp_uc_is_space(0x200B));
    CHECK(ldp_uc_is_other(0x200B) && ldp_uc_is_other(0xFFFD) && ldp_uc_is_other(0));
    CHECK(ldp_uc_is_mn(0x301) && !ldp_uc_is_mn('a'));
    CHECK(ldp_uc_is_punct(0x3002) && ldp_uc_is_punct('$') && !ldp_uc_is_punct('a'));
    CHECK(ldp_uc_lower(0x130, low) == 2 && low[0] == 'i' && low[1] == 0x307);
}

static void test_normalization_forms(void) {
    /* e + combining acute <-> U+00E9; U+FB01 (fi ligature) only under compatibility forms;
     * a combining-class reordering (U+0301 above, U+0316 below) */
    static const uint32_t in[] = {'e', 0x301, 0xFB01, 'a', 0x301, 0x316};
    ldp_u32vec out;
    memset(&out, 0, sizeof out);
    CHECK(ldp_uc_normalize(in, 6, LDP_NF_NFC, &out) == 0);
    CHECK(out.n == 4 && out.v[0] == 0xE9 && out.v[1] == 0xFB01 && out.v[2] == 0xE1 &&
          out.v[3] == 0x316);
    CHECK(ldp_uc_normalize(in, 6, LDP_NF_NFKD, &out) == 0);
    CHECK(out.n == 7 && out.v[0] == 'e' && out.v[1] == 0x301 && out.v[2] == 'f' &&
          out.v[3] == 'i' && out.v[4] == 'a' && out.v[5] == 0x316 && out.v[6] == 0x301);
    CHECK(ldp_uc_normalize(in, 6, LDP_NF_NFKC, &out) == 0);
    CHECK(out.n == 5 && out.v[0] == 0xE9 && out.v[1] == 'f' && out.v[2] == 'i' &&
          out.v[3] == 0xE1 && out.v[4] == 0x316);
    ldp_u32_free(&out);
}

static void test_normalization_of_ascii_runs(void) {
    /* a run of ASCII is copied, but for its last code point when an active one follows: it may
     * compose with it (e + U+0301), also past a mark of lower class (y + U+0316 U+0301 -> U+00FD
     * U+0316), and leads the reordering of the marks after it (z + U+0301 U+0316) */
    static const uint32_t in[] = {'a', 'b', 'e', 0x301, 'x', 'y', 0x316, 0x301, 'z', 0x301, 0x316,
                                  0xE9, 'q'};
    static const uint32_t nfc[] = {'a', 'b', 0xE9, 'x', 0xFD, 0x316, 0x17A, 0x316, 0xE9, 'q'};
    static const uint32_t nfd[] = {'a', 'b', 'e', 0x301, 'x', 'y', 0x316, 0x301, 'z', 0x316, 0x301,
                                   'e', 0x301, 'q'};
    ldp_u32vec out;
    memset(&out, 0, sizeof out);
    CHECK(ldp_uc_normalize(in, 13, LDP_NF_NFC, &out) == 0);
    CHECK(out.n == 10 && memcmp(out.v, nfc, sizeof nfc) == 0);
    CHECK(ldp_uc_normalize(in, 13, LDP_NF_NFD, &out) == 0);
    CHECK(out.n == 14 && memcmp(out.v, nfd, sizeof nfd) == 0);
    CHECK(ldp_uc_normalize(in, 2, LDP_NF_NFC, &out) == 0 && out.n == 2 && out.v[1] == 'b');
    CHECK(ldp_uc_normalize(in, 0, LDP_NF_NFC, &out) == 0 && out.n == 0);
    ldp_u32_free(&out);
}

int main(void) {
    bw_tables t;
    bw_tiny_tables(&t, 0);
    if (ldp_tokenizer_load(BW_WORDPIECE_JSON, strlen(BW_WORDPIECE_JSON), &wp) != LDP_OK ||
        ldp_tokenizer_load(t.tokenizer_json, strlen(t.tokenizer_json), &wl) != LDP_OK) {
        fprintf(stderr, "cannot load the test tokenizers\n");
        return 1;
    }
    RUN(test_wordpiece_matches_tokenizers);
    RUN(test_wordpiece_max_input_chars);
    RUN(test_word_level);
    RUN(test_one_megabyte_word_is_one_unknown_token);
    RUN(test_invalid_utf8_is_refused);
    RUN(test_capacity_reports_the_count);
    RUN(test_decode_joins_like_python);
    RUN(test_unsupported_and_malformed_tokenizers_are_refused);
    RUN(test_large_vocabulary);
    RUN(test_odd_vocabularies);
    RUN(test_unicode_classes_on_ascii);
    RUN(test_normalization_forms);
    RUN(test_normalization_of_ascii_runs);
    ldp_tokenizer_free(wp);
    ldp_tokenizer_free(wl);
    ldp_tok_work_free(&work);
    DONE();
}
