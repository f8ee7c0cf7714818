/* write_tiny_bundle BUNDLE.ldpb KEY.pub: the tiny signed SanText+ bundle of the C tests and its
 * signer's public key file (base64 of the raw key, one line, as `ldptext keys generate` writes
 * it). make test-install sanitizes with them through an installed copy of the library, which
 * has no Python to build a bundle with. */
#include <stdio.h>
#include <stdlib.h>

#include <sodium.h>

#include "bundle_writer.h"

int main(int argc, char **argv) {
    uint8_t pk[32], sk[64], *data = NULL;
    char b64[64];
    size_t len = 0;
    FILE *f;
    int ok;
    if (argc != 3) {
        fprintf(stderr, "usage: %s BUNDLE.ldpb KEY.pub\n", argv[0]);
        return 1;
    }
    bw_test_keys(pk, sk, 0); /* the key bw_tiny_bundle signs with */
    if (bw_tiny_bundle(1, &data, &len) != 0 || bw_save(argv[1], data, len) != 0) {
        fprintf(stderr, "write_tiny_bundle: cannot write %s\n", argv[1]);
        free(data);
        return 1;
    }
    free(data);
    sodium_bin2base64(b64, sizeof b64, pk, sizeof pk, sodium_base64_VARIANT_ORIGINAL);
    f = fopen(argv[2], "w");
    ok = f != NULL && fprintf(f, "%s\n", b64) > 0;
    if (f != NULL && fclose(f) != 0) ok = 0;
    if (!ok) {
        fprintf(stderr, "write_tiny_bundle: cannot write %s\n", argv[2]);
        return 1;
    }
    return 0;
}
