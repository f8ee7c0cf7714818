/* Exact samplers: uniform integers, Bernoulli(p), Bernoulli(exp(-gamma)), discrete Laplace and
 * discrete Gaussian. See samplers.h; algorithms from Canonne, Kamath, Steinke (2020). */
#include "samplers.h"
#include <math.h>

uint32_t ldp_uniform_u32(ldp_chacha *g, uint32_t n) {
    /* Lemire 2019: m = x * n; the high word is uniform once low words below (2^32 mod n) are
     * rejected. */
    uint64_t m = (uint64_t)ldp_next_u32(g) * (uint64_t)n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        uint32_t threshold = (uint32_t)(-n) % n;
        while (low < threshold) {
            m = (uint64_t)ldp_next_u32(g) * (uint64_t)n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

uint64_t ldp_uniform_u64(ldp_chacha *g, uint64_t n) {
    uint64_t mask = n - 1, x;
    if (n <= 0xFFFFFFFFull) return ldp_uniform_u32(g, (uint32_t)n);
    mask |= mask >> 1; mask |= mask >> 2; mask |= mask >> 4;
    mask |= mask >> 8; mask |= mask >> 16; mask |= mask >> 32;
    do { x = ldp_next_u64(g) & mask; } while (x >= n);
    return x;
}

int ldp_bernoulli(ldp_chacha *g, double p) {
    /* U uniform in [0,1) is drawn 64 bits at a time and compared with p's binary expansion, which
     * is exact: multiplying by 2^64 and splitting into integer and fractional parts lose nothing
     * (a double below 2^64 has an integer part of at most 53 significant bits). */
    double rest = p;
    if (!(p > 0.0)) return 0;
    if (p >= 1.0) return 1;
    for (;;) {
        double scaled = rest * 18446744073709551616.0; /* 2^64, exact scaling */
        uint64_t c = (uint64_t)scaled, u;             /* truncation = floor for scaled >= 0 */
        rest = scaled - (double)c;
        u = ldp_next_u64(g);
        if (u < c) return 1;
        if (u > c) return 0;
        if (rest == 0.0) return 0; /* U >= p: the remaining bits of U are >= 0 */
    }
}

/* Bernoulli(gamma / k) for 0 <= gamma <= 1 and integer k >= 1: first a 1-in-k event, then
 * Bernoulli(gamma). Exact because both parts are. */
static int bernoulli_ratio(ldp_chacha *g, double gamma, uint32_t k) {
    if (k > 1 && ldp_uniform_u32(g, k) != 0) return 0;
    return ldp_bernoulli(g, gamma);
}

/* CKS Algorithm 1 for gamma in [0, 1]: K = 1; while Bernoulli(gamma/K): K++; return K odd. */
static int bernoulli_exp_unit(ldp_chacha *g, double gamma) {
    uint32_t k = 1;
    while (bernoulli_ratio(g, gamma, k)) {
        k++;
        if (k == 0xFFFFFFFFu) break; /* probability < 1/(2^32)! : unreachable in practice */
    }
    return (int)(k & 1u);
}

int ldp_bernoulli_exp(ldp_chacha *g, double gamma) {
    double whole;
    if (!(gamma >= 0.0)) return -1; /* negative or NaN */
    if (gamma <= 1.0) return bernoulli_exp_unit(g, gamma);
    /* exp(-gamma) = exp(-1)^floor(gamma) * exp(-(gamma - floor(gamma))); stop at the first 0.
     * gamma may be huge (1e300): the loop ends early with probability 1 - e^-1 per step. */
    whole = floor(gamma);
    for (double i = 0.0; i < whole; i += 1.0) {
        if (!bernoulli_exp_unit(g, 1.0)) return 0;
        if (i > 9.0e15) break; /* i no longer increments exactly; probability e^-9e15 */
    }
    return bernoulli_exp_unit(g, gamma - whole);
}

/* Geometric count: number of successes of Bernoulli(exp(-rate)) before the first failure. */
static int64_t geometric_exp(ldp_chacha *g, double rate) {
    int64_t v = 0;
    while (ldp_bernoulli_exp(g, rate) == 1) v++;
    return v;
}

int64_t ldp_discrete_laplace(ldp_chacha *g, double scale, int *ok) {
    /* P(X = x) ∝ exp(-x/scale) on x >= 0, written X = U + t*V with t = max(1, floor(scale)):
     * U on {0..t-1} with weight exp(-U/scale) (uniform proposal, accept Bernoulli(exp(-U/scale)),
     * acceptance >= e^-1), V geometric with ratio exp(-t/scale) <= e^-1/2 (so O(1) work).
     * Then a random sign, rejecting (negative, 0) so that 0 is not counted twice. */
    uint64_t t;
    *ok = scale > 0.0 && isfinite(scale) && scale < 4.0e18;
    if (!*ok) return 0;
    t = scale >= 1.0 ? (uint64_t)floor(scale) : 1u;
    for (;;) {
        uint64_t u = ldp_uniform_u64(g, t);
        int64_t x;
        int negative;
        if (!ldp_bernoulli_exp(g, (double)u / scale)) continue;
        {
            int64_t v = geometric_exp(g, (double)t / scale);
            /* u + t*v must fit in int64 (signed overflow is undefined behaviour). With
             * scale < 4e18 it fails only with probability exp(-v*t/scale), tiny but real for
             * scales near the limit: report it instead of wrapping around. */
            if (v > (int64_t)((INT64_MAX - (int64_t)u) / (int64_t)t)) {
                *ok = 0;
                return 0;
            }
            x = (int64_t)u + (int64_t)t * v;
        }
        negative = (int)ldp_next_bit(g);
        if (negative && x == 0) continue;
        return negative ? -x : x;
    }
}

int64_t ldp_discrete_gaussian(ldp_chacha *g, double sigma, int *ok) {
    /* CKS Algorithm 3: propose Y from discrete Laplace with integer scale t = floor(sigma) + 1,
     * accept with probability exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2)). */
    double t, s2;
    *ok = sigma > 0.0 && isfinite(sigma) && sigma < 1.0e15;
    if (!*ok) return 0;
    t = floor(sigma) + 1.0;
    s2 = sigma * sigma;
    /* sigma < ~1.5e-162: sigma^2 underflows to 0 and the acceptance exponent below would be 0/0
     * (NaN, rejected forever: a hang). P(Y != 0) <= 2exp(-1/(2 sigma^2)) < 2exp(-1e323) then,
     * far below what any finite number of random bits can realise, so Y = 0. */
    if (s2 == 0.0) return 0;
    for (;;) {
        int lap_ok;
        int64_t y = ldp_discrete_laplace(g, t, &lap_ok);
        if (!lap_ok) { /* the proposal overflowed (see above) */
            *ok = 0;
            return 0;
        }
        double a = fabs((double)y) - s2 / t;
        if (ldp_bernoulli_exp(g, a * a / (2.0 * s2)) == 1) return y;
    }
}
