/* Fuzz target: the strict JSON parser. Whatever parses must write a canonical form that parses
 * again to the same canonical form (the loader compares canonical bytes). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ldp_json_doc *doc = NULL, *doc2 = NULL;
    const ldp_json *root = NULL, *root2 = NULL;
    ldp_buf a, b;
    if (ldp_json_parse((const char *)data, size, &doc, &root) != LDP_JSON_OK) return 0;
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
        "1.7976931348623157e308", "\"\\u0000\"", "[[[[{}]]]]"};
    size_t i;
    for (i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
        add((const uint8_t *)seeds[i], strlen(seeds[i]));
}
