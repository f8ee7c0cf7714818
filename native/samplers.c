/* Exact samplers: uniform integers, Bernoulli(p), Bernoulli(exp(-gamma)), discrete Laplace and
 * discrete Gaussian. See samplers.h; algorithms from Canonne, Kamath, Steinke (2020). The *_exact
 * samplers at the end work in integer arithmetic only (what DP-BART's releases use). */
#include "samplers.h"
#include <math.h>

uint32_t ldp_uniform_u32(ldp_chacha *g, uint32_t n) { return ldp_uniform_u32_inline(g, n); }

uint64_t ldp_uniform_u64(ldp_chacha *g, uint64_t n) {
    uint64_t mask = n - 1, x;
    if (n <= 0xFFFFFFFFull) return ldp_uniform_u32(g, (uint32_t)n);
    mask |= mask >> 1; mask |= mask >> 2; mask |= mask >> 4;
    mask |= mask >> 8; mask |= mask >> 16; mask |= mask >> 32;
    do { x = ldp_next_u64_inline(g) & mask; } while (x >= n);
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
        u = ldp_next_u64_inline(g);
        if (u < c) return 1;
        if (u > c) return 0;
        if (rest == 0.0) return 0; /* U >= p: the remaining bits of U are >= 0 */
    }
}

/* Bernoulli(p), p a float64 in [0, 1], as ldp_bernoulli but 32 bits per step: the first word
 * decides unless it equals p's leading 32 bits (probability 2^-32), so a draw costs one word, not
 * two. Exact: scaling by 2^32 and splitting off the integer part lose nothing. Used inside
 * ldp_bernoulli_exp, whose random words were most of SanText sampling's keystream. */
static int bernoulli32(ldp_chacha *g, double p) {
    double rest = p;
    if (!(p > 0.0)) return 0;
    if (p >= 1.0) return 1;
    for (;;) {
        double scaled = rest * 4294967296.0; /* 2^32, exact scaling */
        uint32_t c = (uint32_t)scaled, u;     /* scaled < 2^32: truncation = floor */
        rest = scaled - (double)c;
        u = ldp_next_u32_inline(g);
        if (u < c) return 1;
        if (u > c) return 0;
        if (rest == 0.0) return 0; /* U >= p: the remaining bits of U are >= 0 */
    }
}

/* 12! / k! for k = 0..12: with U uniform on {0, ..., 12! - 1}, the events U < 12!/k! are nested
 * and P(U < 12!/k! | U < 12!/(k-1)!) = 1/k exactly (integer divisions without remainder). */
#define FACT12 (12u * 11u * 10u * 9u * 8u * 7u * 6u * 5u * 4u * 3u * 2u) /* 479,001,600 < 2^32 */
static const uint32_t fact12_over[13] = {
    FACT12, FACT12,                                             /* k = 0, 1 */
    12u * 11u * 10u * 9u * 8u * 7u * 6u * 5u * 4u * 3u,         /* 12!/2! */
    12u * 11u * 10u * 9u * 8u * 7u * 6u * 5u * 4u,              /* 12!/3! */
    12u * 11u * 10u * 9u * 8u * 7u * 6u * 5u,                   /* 12!/4! */
    12u * 11u * 10u * 9u * 8u * 7u * 6u,                        /* 12!/5! */
    12u * 11u * 10u * 9u * 8u * 7u,                             /* 12!/6! */
    12u * 11u * 10u * 9u * 8u,                                  /* 12!/7! */
    12u * 11u * 10u * 9u,                                       /* 12!/8! */
    12u * 11u * 10u,                                            /* 12!/9! */
    12u * 11u,                                                  /* 12!/10! */
    12u,                                                        /* 12!/11! */
    1u};                                                        /* 12!/12! */

/* CKS Algorithm 1 for gamma in [0, 1]: K = 1; while Bernoulli(gamma/K): K++; return K odd, with
 * Bernoulli(gamma/K) = (a 1-in-K event) and Bernoulli(gamma), all independent. The 1-in-K events
 * of K = 2..12 come from one uniform U on {0..12!-1} (the K-th happens iff U < 12!/K!, given the
 * earlier ones: probability 1/K, see fact12_over) instead of one uniform word each; from K = 13
 * (probability < 1/12!) they are drawn one by one as before. Same distribution of K, exactly;
 * fewer random words (gamma = 1/2: about 2 instead of 3; gamma = 1: about 1.1 instead of 1.7). */
static int bernoulli_exp_unit(ldp_chacha *g, double gamma) {
    uint32_t k, u;
    if (!bernoulli32(g, gamma)) return 1; /* stopped at K = 1 */
    u = ldp_uniform_u32_inline(g, FACT12);
    for (k = 2; k <= 12; k++) {
        if (u >= fact12_over[k]) return (int)(k & 1u); /* the 1-in-K event failed */
        if (!bernoulli32(g, gamma)) return (int)(k & 1u);
    }
    for (k = 13;; k++) {
        if (ldp_uniform_u32_inline(g, k) != 0 || !bernoulli32(g, gamma)) break;
        if (k == 0xFFFFFFFEu) break; /* probability < 1/(2^32)! : unreachable in practice */
    }
    return (int)(k & 1u);
}

int ldp_bernoulli_exp(ldp_chacha *g, double gamma) {
    double whole;
    if (!(gamma >= 0.0)) return -1; /* negative or NaN */
    if (gamma <= 1.0) return bernoulli_exp_unit(g, gamma);
    /* exp(-gamma) = exp(-1)^floor(gamma) * exp(-(gamma - floor(gamma))); stop at the first 0.
     * gamma may be huge (1e300): the loop ends early with probability 1 - e^-1 per step.
     * floor(gamma) without the libm call plain x86-64 makes for floor(): truncation is floor for
     * gamma >= 0, and a double >= 2^53 is an integer already. */
    whole = gamma < 9007199254740992.0 ? (double)(int64_t)gamma : gamma;
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

/* ---- exact samplers with integer (rational) parameters ------------------------------------
 * No floating point at all: every probability below is a ratio of integers, realised by uniform
 * integers (Lemire / masked rejection), so the output distribution is exactly the formula. Numbers
 * up to 2^127 are handled by a portable two-word integer (no compiler extension needed). */

typedef struct {
    uint64_t hi, lo;
} u128;

static u128 u128_from(uint64_t x) {
    u128 r;
    r.hi = 0;
    r.lo = x;
    return r;
}

static u128 u128_mul64(uint64_t a, uint64_t b) { /* full 64 x 64 -> 128-bit product */
    uint64_t a0 = a & 0xFFFFFFFFu, a1 = a >> 32, b0 = b & 0xFFFFFFFFu, b1 = b >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    uint64_t mid = (p00 >> 32) + (p01 & 0xFFFFFFFFu) + (p10 & 0xFFFFFFFFu);
    u128 r;
    r.lo = (mid << 32) | (p00 & 0xFFFFFFFFu);
    r.hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
    return r;
}

static int u128_lt(u128 a, u128 b) { return a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo); }

static u128 u128_sub(u128 a, u128 b) { /* a - b for a >= b */
    u128 r;
    r.lo = a.lo - b.lo;
    r.hi = a.hi - b.hi - (a.lo < b.lo);
    return r;
}

/* Uniform on {0, ..., n-1} for 1 <= n < 2^128: one 64-bit word when n fits, else masked rejection
 * on two words (accepts with probability > 1/2). n = 1 draws nothing. */
static u128 u128_uniform(ldp_chacha *g, u128 n) {
    u128 x;
    uint64_t mask;
    if (n.hi == 0) return u128_from(n.lo <= 1 ? 0 : ldp_uniform_u64(g, n.lo));
    mask = n.hi;
    mask |= mask >> 1; mask |= mask >> 2; mask |= mask >> 4;
    mask |= mask >> 8; mask |= mask >> 16; mask |= mask >> 32;
    do {
        x.hi = ldp_next_u64_inline(g) & mask;
        x.lo = ldp_next_u64_inline(g);
    } while (!u128_lt(x, n));
    return x;
}

/* CKS Algorithm 1 for gamma = num/den in [0, 1] (num <= den, den >= 1): K = 1; while
 * Bernoulli(gamma/K): K++; return K odd. Bernoulli(gamma/K) is a 1-in-K event and then
 * Bernoulli(num/den) = [U < num] with U uniform on {0..den-1}: both exact. */
static int bernoulli_exp_unit_q(ldp_chacha *g, u128 num, u128 den) {
    uint32_t k = 1;
    for (;;) {
        if (k > 1 && ldp_uniform_u32(g, k) != 0) break;
        if (!u128_lt(u128_uniform(g, den), num)) break;
        k++;
        if (k == 0xFFFFFFFFu) break; /* probability < 1/(2^32)! : unreachable in practice */
    }
    return (int)(k & 1u);
}

/* Bernoulli(exp(-num/den)) for integers num >= 0, den >= 1: exp(-1)^floor(num/den) (stopping at
 * the first failure, so the expected work is O(1) however large the quotient) times
 * exp(-(num mod den)/den). The quotient is never formed: den is subtracted once per success. */
static int bernoulli_exp_q(ldp_chacha *g, u128 num, u128 den) {
    const u128 one = u128_from(1);
    while (!u128_lt(num, den)) {
        if (!bernoulli_exp_unit_q(g, one, one)) return 0;
        num = u128_sub(num, den);
    }
    return bernoulli_exp_unit_q(g, num, den);
}

int64_t ldp_discrete_laplace_exact(ldp_chacha *g, uint64_t num, uint64_t den, int *ok) {
    /* CKS Algorithm 2 with scale num/den: X = U + num*V with U on {0..num-1} accepted with
     * probability exp(-U/num) and V geometric (successes of Bernoulli(exp(-1))), so
     * P(X = x) ∝ exp(-x/num) on x >= 0; Y = floor(X/den) has P(Y = y) ∝ exp(-y*den/num). Then a
     * random sign, rejecting (negative, 0) so that 0 is not counted twice. */
    const u128 one = u128_from(1);
    *ok = num >= 1 && den >= 1 && num <= LDP_EXACT_MAX && den <= LDP_EXACT_MAX;
    if (!*ok) return 0;
    for (;;) {
        uint64_t u = ldp_uniform_u64(g, num), x, y;
        int64_t v = 0;
        int negative;
        if (!bernoulli_exp_unit_q(g, u128_from(u), u128_from(num))) continue;
        while (bernoulli_exp_unit_q(g, one, one)) v++;
        /* u + num*v must fit in int64: fails only with probability ~exp(-(2^63 - u)/num) */
        if ((uint64_t)v > ((uint64_t)INT64_MAX - u) / num) {
            *ok = 0;
            return 0;
        }
        x = u + num * (uint64_t)v;
        y = x / den;
        negative = (int)ldp_next_bit(g);
        if (negative && y == 0) continue;
        return negative ? -(int64_t)y : (int64_t)y;
    }
}

int64_t ldp_discrete_gaussian_exact(ldp_chacha *g, uint64_t t, uint64_t m, int *ok) {
    /* CKS Algorithm 3 with sigma^2 = t*m: propose Y from the discrete Laplace of integer scale t,
     * accept with probability exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2)) = exp(-(|Y| - m)^2 / (2tm)).
     * Then P(Y = y) ∝ exp(-|y|/t - (|y| - m)^2/(2tm)) = exp(-y^2/(2tm) - m/(2t)) ∝
     * exp(-y^2/(2 sigma^2)). (|Y| - m)^2 < 2^126 and 2tm < 2^125: two-word integers. */
    /* m <= t <= 4m keeps the proposal scale t within [sigma, 2 sigma]: each try is accepted with
     * probability bounded away from 0 (far outside it a draw could take astronomically long) */
    *ok = m >= 1 && m <= t && t <= LDP_EXACT_MAX && (t - 1) / 4 < m;
    if (!*ok) return 0;
    for (;;) {
        int lap_ok;
        uint64_t ay, a;
        u128 den;
        int64_t y = ldp_discrete_laplace_exact(g, t, 1, &lap_ok);
        if (!lap_ok) { /* the proposal overflowed int64 (see above) */
            *ok = 0;
            return 0;
        }
        ay = y < 0 ? (uint64_t)(-(y + 1)) + 1u : (uint64_t)y;
        a = ay >= m ? ay - m : m - ay;
        den = u128_mul64(2u * t, m);
        if (bernoulli_exp_q(g, u128_mul64(a, a), den)) return y;
    }
}
