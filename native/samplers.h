/* Exact samplers on top of the ChaCha20 generator.
 *
 * "Exact" means: the probability of every outcome equals the mathematical formula evaluated at the
 * given float64 parameters, with no further floating-point rounding (Canonne, Kamath, Steinke 2020,
 * "The Discrete Gaussian for Differential Privacy", §5): no exp() that can underflow, no modulo
 * bias. */
#ifndef LDPTEXT_SAMPLERS_H
#define LDPTEXT_SAMPLERS_H

#include <stdint.h>
#include "chacha20.h"

/* Uniform on {0, ..., n-1}, n >= 1, by Lemire's multiply-and-reject (no modulo bias). */
uint32_t ldp_uniform_u32(ldp_chacha *g, uint32_t n);
/* Uniform on {0, ..., n-1} for 64-bit n >= 1 (bitmask rejection). */
uint64_t ldp_uniform_u64(ldp_chacha *g, uint64_t n);

/* Bernoulli(p) for a float64 p in [0, 1]: compares a lazily drawn uniform real with p's exact
 * binary expansion. Returns 0/1. */
int ldp_bernoulli(ldp_chacha *g, double p);

/* Bernoulli(exp(-gamma)) for float64 gamma >= 0 (CKS 2020 Algorithm 1); no exp() is evaluated, so
 * nothing underflows however large gamma is. Returns 0/1, or -1 if gamma is negative or NaN. */
int ldp_bernoulli_exp(ldp_chacha *g, double gamma);

/* Discrete Laplace: P(k) proportional to exp(-|k| / scale), scale > 0 (CKS 2020 Alg. 2, generalised
 * to a real scale). Sets *ok = 0 on a bad parameter. */
int64_t ldp_discrete_laplace(ldp_chacha *g, double scale, int *ok);

/* Discrete Gaussian: P(k) proportional to exp(-k^2 / (2 sigma^2)), sigma > 0 (CKS 2020 Alg. 3). */
int64_t ldp_discrete_gaussian(ldp_chacha *g, double sigma, int *ok);

#endif
