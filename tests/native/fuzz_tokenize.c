/* Fuzz target: tokenization of arbitrary bytes with a WordPiece / BertNormalizer tokenizer and a
 * word-level NFKC + Lowercase tokenizer. Invalid UTF-8 must be refused exactly when the input is
 * invalid; valid input gives ids of the vocabulary, the same count with or without room for
 * them, and ids that decode. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bundle_writer.h"
#include "ldptext.h"
#include "tokenizer.h"

static ldp_tokenizer *tok[2];
static ldp_tok_work work;

static void setup(void) {
    static bw_tables t;
    if (tok[0] != NULL) return;
    bw_tiny_tables(&t, 0);
    if (ldp_tokenizer_load(BW_WORDPIECE_JSON, strlen(BW_WORDPIECE_JSON), &tok[0]) != LDP_OK ||
        ldp_tokenizer_load(t.tokenizer_json, strlen(t.tokenizer_json), &tok[1]) != LDP_OK)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int32_t ids[512];
    int k;
    int valid = ldp_utf8_valid((const char *)data, size);
    setup();
    for (k = 0; k < 2; k++) {
        size_t n = 0, n2 = 0, i;
        int rc = ldp_tokenizer_encode(tok[k], &work, (const char *)data, size, ids, 512, &n);
        int rc2 = ldp_tokenizer_encode(tok[k], &work, (const char *)data, size, NULL, 0, &n2);
        if (!valid) {
            if (rc != LDP_E_INVALID_UTF8 || rc2 != LDP_E_INVALID_UTF8) abort();
            continue;
        }
        if ((rc != LDP_OK && rc != LDP_E_CAPACITY) || n != n2 ||
            (n2 > 0 && rc2 != LDP_E_CAPACITY) || (rc == LDP_E_CAPACITY) != (n > 512))
            abort();
        if (rc == LDP_OK) {
            ldp_buf out;
            for (i = 0; i < n; i++)
                if (ids[i] < 0 || ids[i] > 27) abort();
            ldp_buf_init(&out);
            if (ldp_tokenizer_decode(tok[k], ids, n, &out) != LDP_OK) abort();
            if (!ldp_utf8_valid(out.data ? out.data : "", out.len)) abort();
            ldp_buf_free(&out);
        }
    }
    return 0;
}

void ldp_fuzz_seeds(void (*add)(const uint8_t *, size_t)) {
    static const char *const seeds[] = {
        "Hello, World! unaffable don't",
        "Caf\xc3\xa9 na\xc3\xafve \xe4\xb8\x9c\xe4\xba\xac \xef\xac\x81 \xc4\xb0stanbul",
        "x[MASK]y [CLS][SEP] [mask",
        "e\xcc\x81\xcc\x96 \xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8 \xea\xb0\x80 \xef\xb7\xba",
        "\xf0\x9f\x98\x80\xe2\x80\x8b\xe2\x80\x8d\x7f\x01\t\r\n\xc2\x85\xe3\x80\x80",
        "ALPHA beta, gamma! \xef\xbc\xa1LPHA"};
    size_t i;
    for (i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
        add((const uint8_t *)seeds[i], strlen(seeds[i]));
}
