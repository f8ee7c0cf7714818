/* Sanitize text line by line with libldptext: stdin (one document per line) -> stdout.
 *
 *   make -C native
 *   native/build/sanitize [--report] [--epsilon-max E] [--bundle-id ID] [--allow-weak-privacy]
 *                         BUNDLE.ldpb TRUSTED.pub [MORE.pub ...] < in.txt > out.txt
 *
 * --epsilon-max and --bundle-id are pins (ldp_expect): a bundle of the same trusted publisher with
 * a larger epsilon, or another bundle than the pinned one, is refused. An app pins what it promises
 * its users. A near-identity bundle (its median sensitive word released unchanged with probability
 * >= 0.9) is refused unless --allow-weak-privacy.
 *
 * Each TRUSTED.pub is a public key file as `ldptext keys generate` writes it (the base64 of the
 * raw 32-byte Ed25519 key, one line; ldp_public_key_parse reads it); the bundle must be signed by
 * one of them. Every output line
 * is the sanitized version of the input line with the same number; a report per line goes to
 * stderr with --report. Errors name the line number, never its text. Exit status: 0 on success,
 * 1 on a usage or bundle error, 2 if a line could not be sanitized (its output line is empty). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ldptext.h"

/* the key of a public key file: ldp_public_key_parse's code, or LDP_E_FILE_OPEN if it cannot be read */
static int read_key_file(const char *path, uint8_t key[32]) {
    char text[4096]; /* a .pub file is one line of 44 characters; a PEM key a few lines */
    size_t len;
    FILE *f = fopen(path, "rb");
    if (f == NULL) return LDP_E_FILE_OPEN;
    len = fread(text, 1, sizeof text, f);
    fclose(f);
    if (len == sizeof text) return LDP_E_KEY_FORMAT; /* far longer than any public key */
    return ldp_public_key_parse(text, len, key);
}

static const char *mechanism_name(int mechanism) {
    switch (mechanism) {
    case LDP_MECH_SANTEXT: return "santext";
    case LDP_MECH_SANTEXT_PLUS: return "santext+";
    case LDP_MECH_TEM: return "tem";
    case LDP_MECH_CUSTEXT: return "custext";
    case LDP_MECH_CUSTEXT_PLUS: return "custext+";
    default: return "unknown";
    }
}

int main(int argc, char **argv) {
    uint8_t (*keys)[32];
    int n_keys = 0, i, report = 0, status = 0, rc;
    ldp_bundle *bundle = NULL;
    ldp_sanitizer *san = NULL;
    char *line = NULL;
    size_t cap = 0, line_no = 0;
    const char *path = NULL;
    ldp_expect expect = LDP_EXPECT_INIT;

    keys = (uint8_t (*)[32])calloc((size_t)(argc > 1 ? argc : 1), 32);
    if (keys == NULL) return 1;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--report") == 0) {
            report = 1;
        } else if (strcmp(argv[i], "--epsilon-max") == 0 && i + 1 < argc) {
            char *end;
            expect.epsilon_max = strtod(argv[++i], &end);
            if (*end != '\0' || !(expect.epsilon_max > 0)) {
                fprintf(stderr, "sanitize: --epsilon-max takes a positive number\n");
                free(keys);
                return 1;
            }
        } else if (strcmp(argv[i], "--bundle-id") == 0 && i + 1 < argc) {
            expect.bundle_id = argv[++i];
        } else if (strcmp(argv[i], "--allow-weak-privacy") == 0) {
            expect.allow_weak_privacy = 1; /* accept a near-identity bundle (reports say so) */
        } else if (path == NULL) {
            path = argv[i];
        } else if ((rc = read_key_file(argv[i], keys[n_keys])) == LDP_OK) {
            n_keys++;
        } else {
            fprintf(stderr, "sanitize: %s: %s\n", argv[i],
                    rc == LDP_E_FILE_OPEN ? "cannot read the public key file" : ldp_strerror(rc));
            free(keys);
            return 1;
        }
    }
    if (path == NULL || n_keys == 0) {
        fprintf(stderr, "usage: %s [--report] [--epsilon-max E] [--bundle-id ID] [--allow-weak-privacy] "
                "BUNDLE TRUSTED.pub [MORE.pub ...] < in > out\n", argv[0]);
        free(keys);
        return 1;
    }
    rc = ldp_bundle_open_expect(path, (const uint8_t (*)[32])keys, (size_t)n_keys, &expect, &bundle);
    free(keys);
    if (rc != LDP_OK) {
        fprintf(stderr, "sanitize: %s: %s\n", path, ldp_strerror(rc));
        return 1;
    }
    rc = ldp_sanitizer_new(bundle, &san);
    if (rc != LDP_OK) {
        fprintf(stderr, "sanitize: %s\n", ldp_strerror(rc));
        ldp_bundle_close(bundle);
        return 1;
    }
    for (;;) {
        size_t len = 0;
        int c;
        char *out = NULL;
        size_t out_len = 0;
        ldp_report rep = LDP_REPORT_INIT;
        /* one line, any length, without the newline */
        while ((c = getchar()) != EOF && c != '\n') {
            if (len + 1 >= cap) {
                size_t ncap = cap ? cap * 2 : 4096;
                char *p = (char *)realloc(line, ncap);
                if (p == NULL) {
                    fprintf(stderr, "sanitize: out of memory at line %zu\n", line_no + 1);
                    status = 1;
                    goto done;
                }
                line = p;
                cap = ncap;
            }
            line[len++] = (char)c;
        }
        if (c == EOF && len == 0) break;
        line_no++;
        if (len > 0 && line[len - 1] == '\r') len--;
        rc = ldp_sanitize(san, line, len, &out, &out_len, &rep);
        if (rc == LDP_OK) {
            fwrite(out, 1, out_len, stdout);
            if (report)
                fprintf(stderr, "line %zu: %s eps=%g eps0=%g p=%g tokens=%zu%s\n", line_no,
                        mechanism_name(rep.mechanism), rep.epsilon, rep.epsilon0, rep.p,
                        rep.n_tokens, rep.seeded ? " SEEDED (not private)" : "");
        } else {
            fprintf(stderr, "sanitize: line %zu: %s\n", line_no, ldp_strerror(rc));
            status = 2;
        }
        ldp_free(out);
        putchar('\n');
        if (c == EOF) break;
    }
done:
    free(line);
    ldp_sanitizer_free(san);
    ldp_bundle_close(bundle);
    if (fflush(stdout) != 0) status = 1;
    return status;
}
