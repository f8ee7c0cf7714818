/* The few WebAssembly entry points ldptext-web.js needs beyond include/ldptext.h: what JavaScript
 * cannot express through the C ABI of this emscripten build alone. Everything else the JS module
 * calls is the public API itself (ldp_bundle_open_memory, ldp_sanitize, ...), so the browser runs
 * exactly the C library's verification, tokenizer and sampler. */
#include <malloc.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ldptext.h"
#include "ldp_internal.h"

/* ldp_sanitizer_new_seeded with the 64-bit seed as two 32-bit halves: a JavaScript number holds 53
 * bits, and without BigInt integration emscripten splits 64-bit arguments anyway. TESTS ONLY: the
 * output of a seeded sanitizer is reproducible and NOT private (its reports say seeded = 1). */
LDP_API int ldp_wasm_sanitizer_new_seeded(const ldp_bundle *bundle, uint32_t seed_lo,
                                          uint32_t seed_hi, ldp_sanitizer **out) {
    return ldp_sanitizer_new_seeded(bundle, ((uint64_t)seed_hi << 32) | seed_lo, out);
}

/* The layout of ldp_report as this compiler lays it out, so that JavaScript reads it without
 * guessing: field 0 is sizeof(ldp_report), fields 1..6 the offsets of epsilon, epsilon0, p,
 * n_tokens (a size_t: 4 bytes here), mechanism and seeded (ints), 7..9 those of size (a size_t
 * JavaScript sets to field 0 before each call), d_max and tolerance, 10 that of
 * worst_case_epsilon (layout 3); any other field gives 0. */
LDP_API size_t ldp_wasm_report_layout(int field) {
    switch (field) {
    case 0: return sizeof(ldp_report);
    case 1: return offsetof(ldp_report, epsilon);
    case 2: return offsetof(ldp_report, epsilon0);
    case 3: return offsetof(ldp_report, p);
    case 4: return offsetof(ldp_report, n_tokens);
    case 5: return offsetof(ldp_report, mechanism);
    case 6: return offsetof(ldp_report, seeded);
    case 7: return offsetof(ldp_report, size);
    case 8: return offsetof(ldp_report, d_max);
    case 9: return offsetof(ldp_report, tolerance);
    case 10: return offsetof(ldp_report, worst_case_epsilon);
    default: return 0;
    }
}

/* Bytes of the wasm heap in use (dlmalloc's mallinfo): lets the tests check that opening, using and
 * closing bundles, and every refused bundle, frees all it allocated. Diagnostics only. */
LDP_API size_t ldp_wasm_heap_in_use(void) {
    struct mallinfo info = mallinfo();
    return (size_t)info.uordblks;
}

/* ldp_bundle_expect with the pins as scalars, so that JavaScript never lays out an ldp_expect by
 * hand (size_t and pointers are 4 bytes in wasm32, the doubles 8-aligned: offsets guessed in JS
 * would silently misread a pin if the struct changed). The meanings are ldp_expect's: 0 (NULL for
 * bundle_id) is "no pin". min_format_version comes as a double because a 64-bit integer argument
 * does not cross this emscripten's JS boundary as one number; JS passes only integers >= 1 (or 0),
 * and one beyond int64_t pins a version no bundle has. */
LDP_API int ldp_wasm_bundle_expect(const ldp_bundle *bundle, unsigned mechanisms, double epsilon_min,
                                   double epsilon_max, const char *bundle_id,
                                   double min_format_version) {
    ldp_expect e = LDP_EXPECT_INIT;
    if (!(min_format_version >= 0.0)) return LDP_E_ARG; /* negative or NaN */
    e.mechanisms = mechanisms;
    e.epsilon_min = epsilon_min;
    e.epsilon_max = epsilon_max;
    e.bundle_id = bundle_id;
    e.min_format_version = min_format_version >= 9.2e18 ? INT64_MAX : (int64_t)min_format_version;
    return ldp_bundle_expect(bundle, &e);
}

/* ldp_bundle_open_memory on a buffer JavaScript allocated with malloc and filled, which the bundle
 * takes instead of copying (freed at ldp_bundle_close, or here on an error): the bundle is then
 * resident once in the wasm heap rather than twice. JavaScript must not touch `data` afterwards.
 * allow_weak_privacy: the application's opt-in to a near-identity bundle (ldp_expect's). */
LDP_API int ldp_wasm_bundle_open_owned(uint8_t *data, size_t len, const uint8_t (*keys)[32],
                                       size_t n_keys, int allow_weak_privacy, ldp_bundle **out) {
    return ldp_bundle_open_owned(data, len, keys, n_keys, allow_weak_privacy, out);
}

/* ldp_sanitize in one crossing, for ldptext-web.js's sanitize(): the text is io[0..len), in a
 * buffer of cap bytes that JavaScript keeps from call to call (no malloc, free or second call per
 * document). The text is zeroed there before this returns, whatever the outcome (the user's text
 * does not linger in the heap); the output then goes into io when it fits with its NUL
 * (out[0] = io), else stays where the library put it (out[0] = that pointer, which JavaScript
 * releases with ldp_free); out[1] is its length in bytes. rep: filled as ldp_sanitize fills it
 * (its size is set here: the layout is this build's). */
LDP_API int ldp_wasm_sanitize(ldp_sanitizer *sanitizer, char *io, size_t len, size_t cap,
                              ldp_report *rep, uint32_t out[2]) {
    char *text = NULL;
    size_t n = 0;
    int rc;
    out[0] = 0;
    out[1] = 0;
    rep->size = sizeof *rep;
    rc = ldp_sanitize(sanitizer, io, len, &text, &n, rep);
    memset(io, 0, len);
    if (rc != LDP_OK) return rc;
    if (n < cap) {
        memcpy(io, text, n + 1);
        ldp_free(text);
        text = io;
    }
    out[0] = (uint32_t)(uintptr_t)text;
    out[1] = (uint32_t)n;
    return LDP_OK;
}
