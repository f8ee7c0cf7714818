/* Fuzz target: the strict JSON parser. Whatever parses must write a canonical form that parses
 * again to the same canonical form (the loader compares canonical bytes). ldp_json_parse_lazy
 * must agree with ldp_json_parse: its lazy objects, read with a cursor, are the objects the full
 * parse builds, and it refuses what the full parse refuses but for a lazy object's repeated key.
 * The tokenizer loader reads the same input: it loads or refuses, and a loaded one encodes and
 * decodes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bundle_writer.h"
#include "json.h"
#include "json_expand.h"
#include "ldptext.h"
#include "tokenizer.h"

static void check_lazy(const uint8_t *data, size_t size, const ldp_json *full, int full_rc) {
    static const char *const path[2] = {"a", "b"};
    size_t depth;
    for (depth = 1; depth <= 2; depth++) {
        ldp_json_doc *doc = NULL;
        const ldp_json *root = NULL;
        int rc = ldp_json_parse_lazy((const char *)data, size, path + 2 - depth, depth, &doc, &root);
        if (rc != LDP_JSON_OK) {
            if (full_rc == LDP_JSON_OK) abort();
            continue;
        }
        {
            ldp_buf a, b;
            int dup = 0;
            ldp_buf_init(&a);
            ldp_buf_init(&b);
            write_expanded(&a, root, &dup);
            if (full_rc == LDP_JSON_OK) {
                ldp_json_write_canonical(&b, full);
                if (dup || a.len != b.len || memcmp(a.data, b.data, a.len) != 0) abort();
            } else if (full_rc != LDP_JSON_E_DUPLICATE || !dup) {
                abort();
            }
            ldp_buf_free(&a);
            ldp_buf_free(&b);
        }
        ldp_json_free(doc);
    }
}

static void check_tokenizer(const uint8_t *data, size_t size) {
    static ldp_tok_work work;
    ldp_tokenizer *t = NULL;
    int rc = ldp_tokenizer_load((const char *)data, size, &t);
    if (rc != LDP_OK) {
        if (t != NULL || (rc != LDP_E_TOKENIZER_JSON && rc != LDP_E_TOKENIZER &&
                          rc != LDP_E_TOKENIZER_UNSUPPORTED && rc != LDP_E_NOMEM))
            abort();
        return;
    }
    {
        static const char text[] = "Hello, [MASK] world!! a ab ##b x\xc3\xa9 unaffable";
        int32_t ids[64];
        size_t n = 0;
        ldp_buf out;
        rc = ldp_tokenizer_encode(t, &work, text, sizeof text - 1, ids, 64, &n);
        if (rc != LDP_OK && rc != LDP_E_NOMEM) abort();
        ldp_buf_init(&out);
        if (rc == LDP_OK && ldp_tokenizer_decode(t, ids, n, &out) != LDP_OK) abort();
        ldp_buf_free(&out);
    }
    ldp_tokenizer_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ldp_json_doc *doc = NULL, *doc2 = NULL;
    const ldp_json *root = NULL, *root2 = NULL;
    ldp_buf a, b;
    int rc = ldp_json_parse((const char *)data, size, &doc, &root);
    check_lazy(data, size, root, rc);
    check_tokenizer(data, size);
    if (rc != LDP_JSON_OK) return 0;
    ldp_buf_init(&a);
    ldp_buf_init(&b);
    if (ldp_json_write_canonical(&a, root) != LDP_JSON_OK) abort();
    if (ldp_json_parse(a.data, a.len, &doc2, &root2) != LDP_JSON_OK) abort();
    if (ldp_json_write_canonical(&b, root2) != LDP_JSON_OK) abort();
    if (a.len != b.len || memcmp(a.data, b.data, a.len) != 0) abort();
    if (!ldp_utf8_valid(a.data, a.len)) abort();
    ldp_buf_free(&a);
    ldp_buf_free(&b);
    ldp_json_free(doc);
    ldp_json_free(doc2);
    return 0;
}

void ldp_fuzz_seeds(void (*add)(const uint8_t *, size_t)) {
    static const char *const seeds[] = {
        "{\"a\":[1,2.5,-0,1e-7,true,false,null],\"b\":{\"c\":\"\\u00e9\\ud83d\\ude00\"}}",
        "[\"\xc3\xa9\",\"\\n\\t\\\\\\\"\",12345678901234567890123,0.1e2]",
        "{\"format\":\"ldptext-bundle\",\"format_version\":1,\"params\":{\"epsilon\":3.0}}",
        "1.7976931348623157e308", "\"\\u0000\"", "[[[[{}]]]]",
        "{\"a\":{\"b\":{\"x\":1,\"\\u0078y\":[{\"k\":2}],\"\":null},\"c\":{}},\"b\":{\"b\":0}}",
        "{\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFKC\"},"
        "{\"type\":\"Lowercase\"}]},\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},"
        "\"model\":{\"type\":\"WordLevel\",\"unk_token\":\"<unk>\",\"vocab\":{\"<unk>\":0,"
        "\"hello\":1,\",\":2,\"world\":3,\"!\":5,\"x\\u00e9\":7}}}"};
    size_t i;
    for (i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
        add((const uint8_t *)seeds[i], strlen(seeds[i]));
    add((const uint8_t *)BW_WORDPIECE_JSON, strlen(BW_WORDPIECE_JSON));
}
