/* An application's pins on the bundles it opens (ldp_expect; the Python runtime's
 * BundleExpectation in sdk/ldptext/runtime.py, same order and semantics): a trusted signature says
 * who made a bundle, the pins say which of that publisher's bundles this app accepts. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ldp_internal.h"

/* the first layout: every field through min_format_version; the second adds allow_weak_privacy */
#define EXPECT_V1_SIZE (offsetof(ldp_expect, min_format_version) + sizeof(int64_t))
#define EXPECT_V2_SIZE (offsetof(ldp_expect, allow_weak_privacy) + sizeof(int))

static int lower_hex64(const char *s) {
    size_t i;
    for (i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return s[64] == '\0';
}

/* 0 (no bound) or a positive finite number */
static int bound_ok(double v) { return v == 0.0 || (isfinite(v) && v > 0.0); }

static int well_formed(const ldp_expect *e) {
    if (e->size < EXPECT_V1_SIZE) return 0;
    if (e->mechanisms & ~(LDP_EXPECT_SANTEXT | LDP_EXPECT_SANTEXT_PLUS | LDP_EXPECT_TEM |
                          LDP_EXPECT_CUSTEXT | LDP_EXPECT_CUSTEXT_PLUS))
        return 0;
    if (!bound_ok(e->epsilon_min) || !bound_ok(e->epsilon_max)) return 0;
    if (e->epsilon_min > 0 && e->epsilon_max > 0 && e->epsilon_min > e->epsilon_max) return 0;
    if (e->bundle_id != NULL && !lower_hex64(e->bundle_id)) return 0;
    return e->min_format_version >= 0;
}

int ldp_bundle_expect(const ldp_bundle *b, const ldp_expect *e) {
    const ldp_json *version;
    if (b == NULL || e == NULL || !well_formed(e)) return LDP_E_ARG;
    if (e->mechanisms != 0 && !(e->mechanisms & (1u << b->mechanism))) return LDP_E_EXPECT_MECHANISM;
    version = ldp_json_get(b->manifest, "format_version"); /* an integer: checked at open */
    if (e->min_format_version > 0 && version->int_value < e->min_format_version)
        return LDP_E_EXPECT_FORMAT;
    if (e->bundle_id != NULL) {
        char id[65];
        int rc = ldp_bundle_id(b, id);
        if (rc != LDP_OK) return rc;
        if (strcmp(id, e->bundle_id) != 0) return LDP_E_EXPECT_BUNDLE_ID;
    }
    if ((e->epsilon_min > 0 && b->epsilon < e->epsilon_min) ||
        (e->epsilon_max > 0 && b->epsilon > e->epsilon_max))
        return LDP_E_EXPECT_EPSILON;
    return LDP_OK;
}

/* expect->allow_weak_privacy where the caller's layout has it */
static int allows_weak(const ldp_expect *e) {
    return e != NULL && e->size >= EXPECT_V2_SIZE && e->allow_weak_privacy != 0;
}

/* The pins of a bundle just opened (with the opt-in, so that a pin's refusal comes first, as in
 * Python), then the weak-privacy rule; closes it on failure. */
static int finish(ldp_bundle *b, int rc, const ldp_expect *e, ldp_bundle **out) {
    if (rc == LDP_OK && e != NULL) rc = ldp_bundle_expect(b, e);
    if (rc == LDP_OK && b->weak_privacy && !allows_weak(e)) rc = LDP_E_WEAK_PRIVACY;
    if (rc != LDP_OK) {
        ldp_bundle_close(b);
        return rc;
    }
    *out = b;
    return LDP_OK;
}

int ldp_bundle_open_expect(const char *path, const uint8_t (*keys)[32], size_t n_keys,
                           const ldp_expect *e, ldp_bundle **out) {
    ldp_bundle *b = NULL;
    int rc;
    if (out == NULL) return LDP_E_ARG;
    *out = NULL;
    if (e != NULL && !well_formed(e)) return LDP_E_ARG;
    rc = ldp_bundle_open_path(path, keys, n_keys, 1, &b); /* before finish reads b */
    return finish(b, rc, e, out);
}

int ldp_bundle_open_memory_expect(const uint8_t *data, size_t len, const uint8_t (*keys)[32],
                                  size_t n_keys, const ldp_expect *e, ldp_bundle **out) {
    ldp_bundle *b = NULL;
    uint8_t *copy;
    int rc;
    if (out == NULL) return LDP_E_ARG;
    *out = NULL;
    if ((e != NULL && !well_formed(e)) || (data == NULL && len > 0) || (keys == NULL && n_keys > 0))
        return LDP_E_ARG;
    copy = (uint8_t *)malloc(len ? len : 1); /* a private copy, as ldp_bundle_open_memory's */
    if (copy == NULL) return LDP_E_NOMEM;
    if (len) memcpy(copy, data, len);
    rc = ldp_bundle_open_owned(copy, len, keys, n_keys, 1, &b); /* before finish reads b */
    return finish(b, rc, e, out);
}
