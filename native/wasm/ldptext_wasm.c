/* The few WebAssembly entry points ldptext-web.js needs beyond include/ldptext.h: what JavaScript
 * cannot express through the C ABI of this emscripten build alone. Everything else the JS module
 * calls is the public API itself (ldp_bundle_open_memory, ldp_sanitize, ...), so the browser runs
 * exactly the C library's verification, tokenizer and sampler. */
#include <malloc.h>
#include <stddef.h>
#include <stdint.h>

#include "ldptext.h"

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
 * JavaScript sets to field 0 before each call), d_max and tolerance; any other field gives 0. */
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
    default: return 0;
    }
}

/* Bytes of the wasm heap in use (dlmalloc's mallinfo): lets the tests check that opening, using and
 * closing bundles, and every refused bundle, frees all it allocated. Diagnostics only. */
LDP_API size_t ldp_wasm_heap_in_use(void) {
    struct mallinfo info = mallinfo();
    return (size_t)info.uordblks;
}
