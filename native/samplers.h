/* Samplers on top of the ChaCha20 generator (Canonne, Kamath, Steinke 2020, "The Discrete Gaussian
 * for Differential Privacy", §5): no exp() that can underflow, no modulo bias.
 *
 * Exactness. ldp_uniform_*, ldp_bernoulli and ldp_bernoulli_exp are exact: the probability of every
 * outcome equals the formula at the given float64 parameter, with no further rounding.
 * ldp_discrete_laplace / ldp_discrete_gaussian (float parameters) are NOT exact: they form
 * acceptance exponents by floating-point division and squaring (u/scale, sigma^2/t, a^2/(2 sigma^2)),
 * so their pmf deviates from the formula by a relative ~1e-16 per term. The *_exact samplers take
 * integer parameters and use integer arithmetic only: their pmf is exactly the formula. DP-BART's
 * releases use the *_exact ones. */
#ifndef LDPTEXT_SAMPLERS_H
#define LDPTEXT_SAMPLERS_H

#include <stdint.h>
#include "chacha20.h"

/* Uniform on {0, ..., n-1}, n >= 1, by Lemire's multiply-and-reject (no modulo bias). */
uint32_t ldp_uniform_u32(ldp_chacha *g, uint32_t n);

/* The same draw, inlined into the SanText sampler's loop (up to three per proposal round; the
 * calls were ~8 % of its instructions). Lemire 2019: m = x * n; the high word is uniform once low
 * words below (2^32 mod n) are rejected. */
static inline uint32_t ldp_uniform_u32_inline(ldp_chacha *g, uint32_t n) {
    uint64_t m = (uint64_t)ldp_next_u32_inline(g) * (uint64_t)n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        uint32_t threshold = (uint32_t)(-n) % n;
        while (low < threshold) {
            m = (uint64_t)ldp_next_u32_inline(g) * (uint64_t)n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

/* Uniform on {0, ..., n-1} for 64-bit n >= 1 (bitmask rejection). */
uint64_t ldp_uniform_u64(ldp_chacha *g, uint64_t n);

/* Bernoulli(p) for a float64 p in [0, 1]: compares a lazily drawn uniform real with p's exact
 * binary expansion. Returns 0/1. */
int ldp_bernoulli(ldp_chacha *g, double p);

/* Bernoulli(exp(-gamma)) for float64 gamma >= 0 (CKS 2020 Algorithm 1); no exp() is evaluated, so
 * nothing underflows however large gamma is. Returns 0/1, or -1 if gamma is negative or NaN. */
int ldp_bernoulli_exp(ldp_chacha *g, double gamma);

/* Discrete Laplace: P(k) proportional to exp(-|k| / scale), scale > 0 (CKS 2020 Alg. 2, generalised
 * to a real scale; the exponents are rounded float64 quotients, so not exact, see above). Sets
 * *ok = 0 on a bad parameter. */
int64_t ldp_discrete_laplace(ldp_chacha *g, double scale, int *ok);

/* Discrete Gaussian: P(k) proportional to exp(-k^2 / (2 sigma^2)), sigma > 0 (CKS 2020 Alg. 3; float
 * exponents, not exact, see above). */
int64_t ldp_discrete_gaussian(ldp_chacha *g, double sigma, int *ok);

/* Largest integer parameter of the exact samplers (2^62). */
#define LDP_EXACT_MAX ((uint64_t)1 << 62)

/* Exact discrete Laplace with the rational scale num/den: P(k) proportional to
 * exp(-|k| * den / num), 1 <= num, den <= LDP_EXACT_MAX (CKS 2020 Alg. 2, integer arithmetic only).
 * Sets *ok = 0 on a bad parameter or a draw beyond int64. */
int64_t ldp_discrete_laplace_exact(ldp_chacha *g, uint64_t num, uint64_t den, int *ok);

/* Exact discrete Gaussian with sigma^2 = t * m: P(k) proportional to exp(-k^2 / (2 t m)),
 * 1 <= m <= t <= min(4m, LDP_EXACT_MAX), i.e. the proposal scale t is in [sigma, 2 sigma] (CKS 2020
 * Alg. 3 with proposal scale t, integer arithmetic only; t = floor(sigma) + 1 and m = ceil(sigma^2/t)
 * qualify). Sets *ok = 0 on a bad parameter or a draw beyond int64. */
int64_t ldp_discrete_gaussian_exact(ldp_chacha *g, uint64_t t, uint64_t m, int *ok);

#endif
