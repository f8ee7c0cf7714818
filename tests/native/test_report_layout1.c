/* ldp_report grows at its end: a caller compiled against the first layout (a copy of it below,
 * shorter than today's ldp_report) keeps working, and the library never writes past the size the
 * caller states; a size below the first layout's is refused; a caller compiled against a longer,
 * future layout gets today's fields and its newer ones are left alone. */
#include <stddef.h>
#include <stdint.h>

#include "bundle_writer.h"
#include "ldptext.h"
#include "testing.h"

/* ldp_report as the first header declared it (layout 1): an application built then passes this */
typedef struct {
    size_t size;
    double epsilon, epsilon0, p;
    size_t n_tokens;
    int mechanism;
    int seeded;
} report_layout1;

/* a future layout: today's fields and one more */
typedef struct {
    ldp_report now;
    double later;
} report_future;

static uint8_t PK[32], SK[64];

static ldp_sanitizer *tiny_sanitizer(int plus, ldp_bundle **b) {
    uint8_t *data = NULL;
    size_t len = 0;
    ldp_sanitizer *s = NULL;
    *b = NULL;
    if (bw_tiny_bundle(plus, &data, &len) != 0) return NULL;
    if (ldp_bundle_open_memory(data, len, (const uint8_t (*)[32])PK, 1, b) == LDP_OK &&
        ldp_sanitizer_new_seeded(*b, 7, &s) != LDP_OK)
        s = NULL;
    free(data);
    return s;
}

static void test_first_layout_is_filled_and_nothing_after_it(void) {
    /* the old struct at the start of a larger buffer: bytes after it must stay untouched */
    union {
        report_layout1 rep;
        unsigned char bytes[sizeof(report_layout1) + 64];
    } buf;
    ldp_bundle *b;
    ldp_sanitizer *s = tiny_sanitizer(1, &b);
    char *out = NULL;
    size_t len = 0, i;
    REQUIRE(s != NULL);
    CHECK(LDP_REPORT_V1_SIZE <= sizeof(report_layout1));
    CHECK(sizeof(report_layout1) < sizeof(ldp_report));
    memset(buf.bytes, 0xAB, sizeof buf.bytes);
    buf.rep.size = sizeof(report_layout1);
    CHECK_RC(ldp_sanitize(s, "alpha beta gamma", 16, &out, &len, (ldp_report *)&buf.rep), LDP_OK);
    CHECK(out != NULL && len == strlen(out));
    CHECK(buf.rep.size == sizeof(report_layout1));
    CHECK(buf.rep.epsilon == 2.0 && buf.rep.mechanism == LDP_MECH_SANTEXT_PLUS);
    CHECK(buf.rep.p > 0 && buf.rep.p < 1 && buf.rep.epsilon0 > 0);
    CHECK(buf.rep.n_tokens == 3 && buf.rep.seeded == 1);
    for (i = sizeof(report_layout1); i < sizeof buf.bytes; i++) CHECK(buf.bytes[i] == 0xAB);
    ldp_free(out);
    ldp_sanitizer_free(s);
    ldp_bundle_close(b);
}

static void test_current_layout_has_the_new_fields(void) {
    ldp_report rep = LDP_REPORT_INIT;
    ldp_bundle *b;
    ldp_sanitizer *s = tiny_sanitizer(0, &b);
    char *out = NULL;
    size_t len = 0;
    REQUIRE(s != NULL);
    CHECK(rep.size == sizeof(ldp_report));
    CHECK_RC(ldp_sanitize(s, "alpha beta", 10, &out, &len, &rep), LDP_OK);
    CHECK(rep.n_tokens == 2 && rep.mechanism == LDP_MECH_SANTEXT && rep.p == 1.0);
    CHECK(rep.d_max > 0 && rep.tolerance >= 0 && rep.tolerance <= 1e-9);
    ldp_free(out);
    ldp_sanitizer_free(s);
    ldp_bundle_close(b);
}

static void test_a_short_or_unset_size_is_refused(void) {
    ldp_report rep = LDP_REPORT_INIT;
    ldp_bundle *b;
    ldp_sanitizer *s = tiny_sanitizer(0, &b);
    char *out = (char *)&rep;
    size_t len = 5;
    REQUIRE(s != NULL);
    rep.size = 0; /* a caller that did not set it */
    CHECK_RC(ldp_sanitize(s, "alpha", 5, &out, &len, &rep), LDP_E_ARG);
    CHECK(out == NULL && len == 0 && rep.n_tokens == 0);
    rep.size = LDP_REPORT_V1_SIZE - 1;
    CHECK_RC(ldp_sanitize(s, "alpha", 5, &out, &len, &rep), LDP_E_ARG);
    rep.size = LDP_REPORT_V1_SIZE; /* exactly the first layout's fields */
    CHECK_RC(ldp_sanitize(s, "alpha", 5, &out, &len, &rep), LDP_OK);
    CHECK(rep.n_tokens == 1 && rep.d_max == 0 && rep.tolerance == 0);
    ldp_free(out);
    ldp_sanitizer_free(s);
    ldp_bundle_close(b);
}

static void test_a_future_layout_keeps_its_newer_fields(void) {
    report_future rep;
    ldp_bundle *b;
    ldp_sanitizer *s = tiny_sanitizer(0, &b);
    char *out = NULL;
    size_t len = 0;
    REQUIRE(s != NULL);
    memset(&rep, 0, sizeof rep);
    rep.now.size = sizeof rep;
    rep.later = -1.5;
    CHECK_RC(ldp_sanitize(s, "alpha beta", 10, &out, &len, (ldp_report *)&rep), LDP_OK);
    CHECK(rep.now.n_tokens == 2 && rep.now.d_max > 0 && rep.later == -1.5);
    ldp_free(out);
    ldp_sanitizer_free(s);
    ldp_bundle_close(b);
}

static void test_the_abi_version_is_the_header_s(void) {
    CHECK(ldp_abi_version() == LDP_ABI_VERSION);
    CHECK(strcmp(ldp_version(), LDP_VERSION) == 0);
}

int main(void) {
    bw_test_keys(PK, SK, 0);
    RUN(test_first_layout_is_filled_and_nothing_after_it);
    RUN(test_current_layout_has_the_new_fields);
    RUN(test_a_short_or_unset_size_is_refused);
    RUN(test_a_future_layout_keeps_its_newer_fields);
    RUN(test_the_abi_version_is_the_header_s);
    DONE();
}
