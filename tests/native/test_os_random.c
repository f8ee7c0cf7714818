/* The operating system's randomness: each Linux source on its own (the getrandom system call, and
 * /dev/urandom, the fallback where the kernel lacks it), and ldp_os_random: bytes are written, and
 * two draws differ. */
#include <stdint.h>
#include <string.h>

#include "ldp_internal.h"
#include "ldptext.h"
#include "testing.h"

typedef int (*source_fn)(uint8_t *, size_t);

/* n bytes twice from src: both calls succeed, the buffers were written and differ */
static void check_source(source_fn src) {
    uint8_t a[4096], b[4096];
    size_t sizes[] = {1, 32, 257, sizeof a}, i;
    for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i], k, zeros = 0;
        memset(a, 0, sizeof a);
        memset(b, 0, sizeof b);
        CHECK_RC(src(a, n), 0);
        CHECK_RC(src(b, n), 0);
        for (k = 0; k < n; k++) zeros += a[k] == 0;
        CHECK(n < 32 || zeros < n / 8 + 8); /* written: about n / 256 zero bytes expected */
        CHECK(n < 8 || memcmp(a, b, n) != 0);
        CHECK(n == sizeof a || a[n] == 0); /* nothing past n */
    }
    CHECK_RC(src(a, 0), 0);
}

static void test_os_random(void) { check_source(ldp_os_random); }

#if defined(__linux__)
static void test_getrandom_system_call(void) { check_source(ldp_os_random_syscall); }
static void test_dev_urandom_fallback(void) { check_source(ldp_os_random_urandom); }
#endif

int main(void) {
    RUN(test_os_random);
#if defined(__linux__)
    RUN(test_getrandom_system_call);
    RUN(test_dev_urandom_fallback);
#endif
    DONE();
}
