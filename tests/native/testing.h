/* A minimal test harness for the libldptext C tests: CHECK records a failure and continues,
 * REQUIRE stops the current test; main() runs every TEST listed and returns non-zero on failure. */
#ifndef LDP_TESTING_H
#define LDP_TESTING_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_failures = 0, t_checks = 0;
static const char *t_current = "";

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        t_checks++;                                                                        \
        if (!(cond)) {                                                                     \
            t_failures++;                                                                  \
            fprintf(stderr, "%s:%d: %s: CHECK failed: %s\n", __FILE__, __LINE__, t_current, \
                    #cond);                                                                \
        }                                                                                  \
    } while (0)

#define CHECK_RC(got, want)                                                                 \
    do {                                                                                    \
        int g_ = (got), w_ = (want);                                                        \
        t_checks++;                                                                         \
        if (g_ != w_) {                                                                     \
            t_failures++;                                                                   \
            fprintf(stderr, "%s:%d: %s: got %d (%s), want %d (%s)\n", __FILE__, __LINE__,   \
                    t_current, g_, ldp_strerror(g_), w_, ldp_strerror(w_));                 \
        }                                                                                   \
    } while (0)

#define REQUIRE(cond)                                                                      \
    do {                                                                                   \
        t_checks++;                                                                        \
        if (!(cond)) {                                                                     \
            t_failures++;                                                                  \
            fprintf(stderr, "%s:%d: %s: REQUIRE failed: %s\n", __FILE__, __LINE__,          \
                    t_current, #cond);                                                     \
            return;                                                                        \
        }                                                                                  \
    } while (0)

#define RUN(fn)                                 \
    do {                                        \
        int before_ = t_failures;               \
        t_current = #fn;                        \
        fn();                                   \
        printf("%s %s\n", before_ == t_failures ? "ok  " : "FAIL", #fn); \
    } while (0)

#define DONE()                                                                     \
    do {                                                                           \
        printf("%d checks, %d failures\n", t_checks, t_failures);                 \
        return t_failures ? 1 : 0;                                                 \
    } while (0)

#endif
