/* The strict JSON parser and the canonical writers (json.h): what Python's json accepts in a
 * bundle and what it refuses, and byte-exact canonical output (expected values from CPython). */
#include <math.h>
#include <stdint.h>

#include "json.h"
#include "json_expand.h"
#include "ldptext.h"
#include "testing.h"

static int parse_rc(const char *s) {
    ldp_json_doc *doc = NULL;
    const ldp_json *root = NULL;
    int rc = ldp_json_parse(s, strlen(s), &doc, &root);
    ldp_json_free(doc);
    return rc;
}

/* canonical form of s, or NULL if it does not parse (static buffer) */
static const char *canonical(const char *s) {
    static char out[4096];
    ldp_json_doc *doc = NULL;
    const ldp_json *root = NULL;
    ldp_buf b;
    if (ldp_json_parse(s, strlen(s), &doc, &root) != LDP_JSON_OK) return NULL;
    ldp_buf_init(&b);
    ldp_json_write_canonical(&b, root);
    snprintf(out, sizeof out, "%s", b.data ? b.data : "");
    ldp_buf_free(&b);
    ldp_json_free(doc);
    return out;
}

static void test_accepts_json(void) {
    static const char *const ok[] = {
        "{}", "[]", "0", "-0", "1.5", "-1e-3", "1E+2", "true", "false", "null", "\"\"",
        " {\"a\" : [1, 2.0, \"x\", null, {}] } ", "\"\\u00e9\\ud83d\\ude00\\/\\b\\f\\n\\r\\t\"",
        "\"\xc3\xa9\xf0\x9f\x98\x80\"", "[[[[[[[[[[1]]]]]]]]]]", "{\"a\":1,\"b\":{\"a\":2}}",
        "\"\x7f\""};
    size_t i;
    for (i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int rc = parse_rc(ok[i]);
        if (rc != LDP_JSON_OK) fprintf(stderr, "  refused: %s\n", ok[i]);
        CHECK(rc == LDP_JSON_OK);
    }
}

static void test_refuses_what_python_refuses(void) {
    static const struct {
        const char *s;
        int rc;
    } bad[] = {
        {"", LDP_JSON_E_SYNTAX},
        {"{", LDP_JSON_E_SYNTAX},
        {"{\"a\":1,}", LDP_JSON_E_SYNTAX},
        {"[1,]", LDP_JSON_E_SYNTAX},
        {"01", LDP_JSON_E_SYNTAX},
        {"1.", LDP_JSON_E_SYNTAX},
        {".5", LDP_JSON_E_SYNTAX},
        {"+1", LDP_JSON_E_SYNTAX},
        {"1e", LDP_JSON_E_SYNTAX},
        {"NaN", LDP_JSON_E_SYNTAX},
        {"Infinity", LDP_JSON_E_SYNTAX},
        {"-Infinity", LDP_JSON_E_SYNTAX},
        {"1e999", LDP_JSON_E_NUMBER},
        {"-1e400", LDP_JSON_E_NUMBER},
        {"{\"a\":1,\"a\":2}", LDP_JSON_E_DUPLICATE},
        {"{\"a\":1,\"\\u0061\":2}", LDP_JSON_E_DUPLICATE},
        {"\"\\ud800\"", LDP_JSON_E_UNICODE},
        {"\"\\udc00\"", LDP_JSON_E_UNICODE},
        {"\"\\ud800\\u0041\"", LDP_JSON_E_UNICODE},
        {"\"\xff\"", LDP_JSON_E_UNICODE},
        {"\"\xc0\xaf\"", LDP_JSON_E_UNICODE},
        {"\"\xed\xa0\x80\"", LDP_JSON_E_UNICODE},
        {"\"a\nb\"", LDP_JSON_E_UNICODE},
        {"\"\\x41\"", LDP_JSON_E_SYNTAX},
        {"\"\\u12\"", LDP_JSON_E_SYNTAX},
        {"[1] x", LDP_JSON_E_SYNTAX},
        {"tru", LDP_JSON_E_SYNTAX},
        {"{1:2}", LDP_JSON_E_SYNTAX},
        {"\v1", LDP_JSON_E_SYNTAX},
        {"\"abc", LDP_JSON_E_SYNTAX},
    };
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse_rc(bad[i].s);
        if (rc != bad[i].rc) fprintf(stderr, "  case %zu: got %d want %d\n", i, rc, bad[i].rc);
        CHECK(rc == bad[i].rc);
    }
}

static void test_depth_limit(void) {
    char deep[2 * LDP_JSON_MAX_DEPTH + 8];
    int d;
    for (d = LDP_JSON_MAX_DEPTH; d <= LDP_JSON_MAX_DEPTH + 1; d++) {
        memset(deep, '[', (size_t)d);
        memset(deep + d, ']', (size_t)d);
        deep[2 * d] = '\0';
        CHECK(parse_rc(deep) == (d <= LDP_JSON_MAX_DEPTH ? LDP_JSON_OK : LDP_JSON_E_DEPTH));
    }
}

static void test_huge_integers(void) {
    char s[LDP_JSON_MAX_INT_DIGITS + 3];
    memset(s, '7', sizeof s);
    s[LDP_JSON_MAX_INT_DIGITS] = '\0';
    CHECK(parse_rc(s) == LDP_JSON_OK); /* Python reads 4300 digits */
    s[LDP_JSON_MAX_INT_DIGITS] = '7';
    s[LDP_JSON_MAX_INT_DIGITS + 1] = '\0';
    CHECK(parse_rc(s) == LDP_JSON_E_NUMBER); /* and refuses 4301 */
}

static void test_canonical_form_is_pythons(void) {
    /* json.dumps(json.loads(s), sort_keys=True, separators=(",", ":"), ensure_ascii=True) */
    static const char *const pairs[][2] = {
        {"{\"b\": 1, \"a\": [true, false, null]}", "{\"a\":[true,false,null],\"b\":1}"},
        {"-0", "0"},
        {"1E2", "100.0"},
        {"1.50", "1.5"},
        {"\"\\u00e9\xc3\xa9/\\/\x7f\"", "\"\\u00e9\\u00e9//\\u007f\""},
        {"\"\xf0\x9f\x98\x80\"", "\"\\ud83d\\ude00\""},
        {"\"\\u0001\\b\\f\\n\\r\\t\\\"\\\\\"", "\"\\u0001\\b\\f\\n\\r\\t\\\"\\\\\""},
        {"{\"\xc3\xa9\":1,\"z\":2,\"a\":3}", "{\"a\":3,\"z\":2,\"\\u00e9\":1}"},
        {"123456789012345678901234567890", "123456789012345678901234567890"},
        {"0.1e1", "1.0"},
    };
    size_t i;
    for (i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        const char *got = canonical(pairs[i][0]);
        if (got == NULL || strcmp(got, pairs[i][1]) != 0)
            fprintf(stderr, "  %s -> %s (want %s)\n", pairs[i][0], got ? got : "(refused)",
                    pairs[i][1]);
        CHECK(got != NULL && strcmp(got, pairs[i][1]) == 0);
    }
}

static void test_header_strings_escape_only_controls(void) {
    /* json.dumps(s, ensure_ascii=False) */
    ldp_buf b;
    ldp_buf_init(&b);
    ldp_json_write_string(&b, "a\"\\\x01\n\x7f\xc3\xa9", 8, 0);
    CHECK(b.data != NULL && strcmp(b.data, "\"a\\\"\\\\\\u0001\\n\x7f\xc3\xa9\"") == 0);
    ldp_buf_free(&b);
}

static void test_float_repr_is_pythons(void) {
    /* repr(float) from CPython 3.11 */
    static const struct {
        uint64_t bits;
        const char *repr;
    } cases[] = {
        {0x0000000000000001ull, "5e-324"},
        {0x7fefffffffffffffull, "1.7976931348623157e+308"},
        {0x0010000000000000ull, "2.2250738585072014e-308"},
        {0x3fb999999999999aull, "0.1"},
        {0x4341c37937e08000ull, "1e+16"},
        {0x430c6bf526340000ull, "1000000000000000.0"},
        {0x437b69b4ba630f35ull, "1.2345678901234568e+17"},
        {0x3ee4f8b588e368f1ull, "1e-05"},
        {0x3f1a36e2eb1c432dull, "0.0001"},
        {0x8000000000000000ull, "-0.0"},
        {0x0000000000000000ull, "0.0"},
        {0x4340000000000000ull, "9007199254740992.0"},
        {0x7e41eb2d66005835ull, "1.5e+300"},
        {0x0000000000000003ull, "1.5e-323"},
        {0x43e0000000000000ull, "9.223372036854776e+18"},
        {0x3ff0000000000000ull, "1.0"},
        {0xc004000000000000ull, "-2.5"},
        {0x4480f0cf064dd592ull, "1e+22"},
        {0x44b52d02c7e14af6ull, "1e+23"},
        {0x3fd3333333333333ull, "0.3"},
        {0x3fe5555555555555ull, "0.6666666666666666"},
        {0x3e7ad7f29abcaf48ull, "1e-07"},
        {0x40c81cd6c8b43958ull, "12345.678"},
        {0x3d45ad3c0523597eull, "1.540221964802231e-13"},
        {0x401d5d6ae572f83aull, "7.341228089468183"},
        {0x3ff34378fcbda721ull, "1.2039728043259361"},
        {0x4059000000000000ull, "100.0"},
        {0x54b249ad2594c37dull, "1e+100"},
        {0x4011666666666666ull, "4.35"},
        {0x43b0000000000000ull, "1.152921504606847e+18"},
        {0x3e10000000000000ull, "9.313225746154785e-10"},
        {0x430c6bf52633ffffull, "999999999999999.9"},
        {0x4341c37937e07fffull, "9999999999999998.0"},
        {0x3f201f31f46ed246ull, "0.000123"},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double x;
        ldp_buf b;
        memcpy(&x, &cases[i].bits, sizeof x);
        ldp_buf_init(&b);
        ldp_json_write_double(&b, x);
        if (b.data == NULL || strcmp(b.data, cases[i].repr) != 0)
            fprintf(stderr, "  %s written as %s\n", cases[i].repr, b.data ? b.data : "");
        CHECK(b.data != NULL && strcmp(b.data, cases[i].repr) == 0);
        /* and the text reads back to the same double */
        CHECK(ldp_json_parse_double(cases[i].repr, strlen(cases[i].repr)) == x);
        ldp_buf_free(&b);
    }
}

static void test_float_repr_round_trips(void) {
    /* random bit patterns: the shortest repr reads back exactly */
    uint64_t s = 0x9E3779B97F4A7C15ull;
    int i, bad = 0;
    for (i = 0; i < 20000; i++) {
        double x;
        ldp_buf b;
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        memcpy(&x, &s, sizeof x);
        if (!isfinite(x)) continue;
        ldp_buf_init(&b);
        ldp_json_write_double(&b, x);
        if (b.data == NULL || ldp_json_parse_double(b.data, b.len) != x ||
            (!signbit(x) && b.data[0] == '-'))
            bad++;
        ldp_buf_free(&b);
    }
    CHECK(bad == 0);
}

static void test_parse_double_is_correctly_rounded(void) {
    /* halfway cases and long inputs (sticky digit beyond the kept 780) */
    char longnum[1200];
    CHECK(ldp_json_parse_double("9007199254740993", 16) == 9007199254740992.0);
    CHECK(ldp_json_parse_double("9007199254740995", 16) == 9007199254740996.0);
    memset(longnum, '0', sizeof longnum);
    memcpy(longnum, "9007199254740993", 16);
    longnum[1100] = '1'; /* just above the halfway point: rounds up */
    memcpy(longnum + 1101, "e-1085", 6);
    CHECK(ldp_json_parse_double(longnum, 1107) == 9007199254740994.0);
    CHECK(ldp_json_parse_double("0.000000000000000000001e21", 26) == 1.0);
    CHECK(ldp_json_parse_double("-0.0", 4) == 0.0 && signbit(ldp_json_parse_double("-0.0", 4)));
}

static void test_lookup_by_key(void) {
    ldp_json_doc *doc = NULL;
    const ldp_json *root = NULL;
    const char *s = "{\"z\":1,\"a\\u0000b\":2,\"m\":{\"k\":3.5}}";
    REQUIRE(ldp_json_parse(s, strlen(s), &doc, &root) == LDP_JSON_OK);
    CHECK(ldp_json_get(root, "z")->int_value == 1);
    CHECK(ldp_json_get_n(root, "a\0b", 3)->int_value == 2);
    CHECK(ldp_json_get(root, "a") == NULL);
    CHECK(ldp_json_number(ldp_json_get(ldp_json_get(root, "m"), "k")) == 3.5);
    CHECK(root->members[0].key[0] == 'z'); /* document order kept */
    ldp_json_free(doc);
}

static void test_lazy_object_reads_as_the_full_parse(void) {
    static const char *const path[2] = {"m", "v"};
    static const struct {
        const char *s;
        int full, lazy; /* parse results */
        int lazy_values;  /* lazy objects in the result */
    } cases[] = {
        {"{\"m\":{\"v\":{\"b\":1,\"a\\u00e9\":[2,{\"x\":null}],\"\":\"s\",\"c\":{}}}}", 0, 0, 1},
        {"{\"m\":{\"v\":{}},\"v\":{\"a\":1}}", 0, 0, 1},
        {"{\"v\":{\"a\":1},\"m\":[{\"v\":{}}]}", 0, 0, 0},   /* off the path */
        {"{\"m\":{\"v\":[1,2]}}", 0, 0, 0},                  /* not an object: built */
        {"{\"m\":{\"v\":{\"a\":1,\"a\":2}}}", LDP_JSON_E_DUPLICATE, 0, 1}, /* the caller's check */
        {"{\"m\":{\"v\":{\"a\":1,\"\\u0061\":2}}}", LDP_JSON_E_DUPLICATE, 0, 1},
        {"{\"m\":{\"v\":{\"a\":{\"k\":1,\"k\":2}}}}", LDP_JSON_E_DUPLICATE, LDP_JSON_E_DUPLICATE, 0},
        {"{\"m\":{\"v\":{},\"v\":{}}}", LDP_JSON_E_DUPLICATE, LDP_JSON_E_DUPLICATE, 0},
        {"{\"m\":{\"v\":{\"a\":1,}}}", LDP_JSON_E_SYNTAX, LDP_JSON_E_SYNTAX, 0},
        {"{\"m\":{\"v\":{\"a\" 1}}}", LDP_JSON_E_SYNTAX, LDP_JSON_E_SYNTAX, 0},
        {"{\"m\":{\"v\":{\"a\":1e999}}}", LDP_JSON_E_NUMBER, LDP_JSON_E_NUMBER, 0},
        {"{\"m\":{\"v\":{\"\\ud800\":1}}}", LDP_JSON_E_UNICODE, LDP_JSON_E_UNICODE, 0},
        {"{\"m\":{\"v\":{\"a\":\"\\u12\"}}}", LDP_JSON_E_SYNTAX, LDP_JSON_E_SYNTAX, 0},
        {"{\"m\":{\"v\":{\"a\":1}", LDP_JSON_E_SYNTAX, LDP_JSON_E_SYNTAX, 0},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ldp_json_doc *doc = NULL, *lazy_doc = NULL;
        const ldp_json *root = NULL, *lazy_root = NULL;
        const char *s = cases[i].s;
        int rc = ldp_json_parse(s, strlen(s), &doc, &root);
        int lrc = ldp_json_parse_lazy(s, strlen(s), path, 2, &lazy_doc, &lazy_root);
        if (rc != cases[i].full || lrc != cases[i].lazy)
            fprintf(stderr, "  case %zu: %d / %d\n", i, rc, lrc);
        CHECK(rc == cases[i].full && lrc == cases[i].lazy);
        if (lrc == LDP_JSON_OK) {
            ldp_buf a, b;
            int dup = 0;
            const ldp_json *v = ldp_json_get(ldp_json_get(lazy_root, "m"), "v");
            CHECK((v != NULL && v->type == LDP_JSON_LAZY) == cases[i].lazy_values);
            ldp_buf_init(&a);
            ldp_buf_init(&b);
            write_expanded(&a, lazy_root, &dup);
            CHECK(dup == (rc == LDP_JSON_E_DUPLICATE));
            if (rc == LDP_JSON_OK) {
                ldp_json_write_canonical(&b, root);
                CHECK(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
            }
            /* a document with a lazy value is not written */
            ldp_buf_free(&b);
            ldp_buf_init(&b);
            CHECK((ldp_json_write_canonical(&b, lazy_root) != LDP_JSON_OK) == cases[i].lazy_values);
            ldp_buf_free(&a);
            ldp_buf_free(&b);
        }
        ldp_json_free(doc);
        ldp_json_free(lazy_doc);
    }
}

static void test_lazy_object_in_constant_memory(void) {
    /* 3000 members, a key of 100 KB (its own arena block) and deep values: the cursor reads them
     * all, one at a time */
    static const char *const path[1] = {"v"};
    ldp_buf s;
    ldp_json_doc *doc = NULL;
    const ldp_json *root = NULL, *v, *val;
    ldp_json_cursor *c;
    const char *key;
    size_t key_len, i, n = 0;
    int ok = 1;
    ldp_buf_init(&s);
    ldp_buf_puts(&s, "{\"v\":{");
    for (i = 0; i < 3000; i++) {
        char m[64];
        snprintf(m, sizeof m, "%s\"k%zu\":%s", i ? "," : "", i,
                 i % 7 == 0 ? "[[[{\"x\":[1,2,3]}]]]" : "-0");
        ldp_buf_puts(&s, m);
        if (i == 1500) {
            ldp_buf_puts(&s, ",\"");
            for (n = 0; n < 100000; n++) ldp_buf_putc(&s, 'z');
            ldp_buf_puts(&s, "\":17");
        }
    }
    ldp_buf_puts(&s, "}}");
    REQUIRE(!s.failed);
    REQUIRE(ldp_json_parse_lazy(s.data, s.len, path, 1, &doc, &root) == LDP_JSON_OK);
    v = ldp_json_get(root, "v");
    REQUIRE(v != NULL && v->type == LDP_JSON_LAZY && v->n == 3001);
    c = ldp_json_cursor_new(v);
    REQUIRE(c != NULL);
    for (i = 0, n = 0; ldp_json_cursor_next(c, &key, &key_len, &val) == LDP_JSON_OK && val; n++) {
        if (key_len == 100000) {
            ok &= val->type == LDP_JSON_INT && val->int_value == 17;
            continue;
        }
        {
            char want[32];
            snprintf(want, sizeof want, "k%zu", i);
            ok &= key_len == strlen(want) && memcmp(key, want, key_len) == 0;
            ok &= i % 7 == 0 ? val->type == LDP_JSON_ARRAY
                             : val->type == LDP_JSON_INT && signbit(val->float_value);
        }
        i++;
    }
    CHECK(ok && n == 3001 && val == NULL);
    /* the end stays the end */
    CHECK(ldp_json_cursor_next(c, &key, &key_len, &val) == LDP_JSON_OK && val == NULL);
    ldp_json_cursor_free(c);
    ldp_json_free(doc);
    ldp_buf_free(&s);
}

static void test_lazy_object_keeps_the_depth_limit(void) {
    /* the root, m and v are 3 levels: values of v's members may nest 197 more */
    static const char *const path[2] = {"m", "v"};
    char text[16 + 2 * LDP_JSON_MAX_DEPTH + 16];
    int extra;
    for (extra = LDP_JSON_MAX_DEPTH - 3; extra <= LDP_JSON_MAX_DEPTH - 2; extra++) {
        ldp_json_doc *doc = NULL;
        const ldp_json *root = NULL;
        int want = extra <= LDP_JSON_MAX_DEPTH - 3 ? LDP_JSON_OK : LDP_JSON_E_DEPTH;
        size_t k;
        strcpy(text, "{\"m\":{\"v\":{\"a\":");
        k = strlen(text);
        memset(text + k, '[', (size_t)extra);
        memset(text + k + extra, ']', (size_t)extra);
        strcpy(text + k + 2 * extra, "}}}");
        CHECK(parse_rc(text) == want);
        CHECK(ldp_json_parse_lazy(text, strlen(text), path, 2, &doc, &root) == want);
        ldp_json_free(doc);
    }
}

static void test_integer_values_as_doubles(void) {
    /* exact below 2^53 (-0 keeps its sign), correctly rounded above */
    static const struct {
        const char *s;
        double want;
    } cases[] = {{"0", 0.0},
                 {"-0", -0.0},
                 {"123", 123.0},
                 {"9007199254740992", 9007199254740992.0},
                 {"-9007199254740992", -9007199254740992.0},
                 {"9007199254740993", 9007199254740992.0},
                 {"9007199254740995", 9007199254740996.0},
                 {"18446744073709551616", 18446744073709551616.0}};
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ldp_json_doc *doc = NULL;
        const ldp_json *root = NULL;
        REQUIRE(ldp_json_parse(cases[i].s, strlen(cases[i].s), &doc, &root) == LDP_JSON_OK);
        CHECK(root->type == LDP_JSON_INT && root->float_value == cases[i].want &&
              !signbit(root->float_value) == !signbit(cases[i].want));
        CHECK(root->float_value == ldp_json_parse_double(cases[i].s, strlen(cases[i].s)));
        ldp_json_free(doc);
    }
}

int main(void) {
    RUN(test_accepts_json);
    RUN(test_refuses_what_python_refuses);
    RUN(test_depth_limit);
    RUN(test_huge_integers);
    RUN(test_canonical_form_is_pythons);
    RUN(test_header_strings_escape_only_controls);
    RUN(test_float_repr_is_pythons);
    RUN(test_float_repr_round_trips);
    RUN(test_parse_double_is_correctly_rounded);
    RUN(test_lookup_by_key);
    RUN(test_lazy_object_reads_as_the_full_parse);
    RUN(test_lazy_object_in_constant_memory);
    RUN(test_lazy_object_keeps_the_depth_limit);
    RUN(test_integer_values_as_doubles);
    DONE();
}
