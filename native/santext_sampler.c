/* Exact SanText / SanText+ sampling: alias proposal + exact Bernoulli(exp(-gamma)) acceptance. */
#include "santext_sampler.h"
#include "samplers.h"
#include <math.h>

double ldp_distance(const float *a, const float *b, int32_t dim) {
    /* float32 differences are exact in double; the sum is double precision */
    double s = 0.0;
    int32_t i;
    for (i = 0; i < dim; i++) {
        double d = (double)a[i] - (double)b[i];
        s += d * d;
    }
    return sqrt(s);
}

static int in_sorted(const int32_t *v, int32_t n, int32_t key) {
    int32_t lo = 0, hi = n;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (v[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && v[lo] == key;
}

int ldp_santext_sample(ldp_chacha *g, const ldp_santext_table *t, int32_t x, int32_t *y) {
    const int32_t k = t->head_size;
    const uint32_t slots = (uint32_t)k + 1u;
    const int32_t *head;
    const uint32_t *thr;
    const uint16_t *alias;
    const double *gamma;

    if (x < 0 || x >= t->n_rows) return LDP_ERR_ROW;
    if (t->keep_row[x] && !ldp_bernoulli(g, t->p)) { /* SanText+: V_N kept w.p. 1 - p */
        *y = x;
        return LDP_OK;
    }
    head = t->head_ids + (size_t)x * (size_t)k;
    thr = t->alias_threshold + (size_t)x * slots;
    alias = t->alias_index + (size_t)x * slots;
    gamma = t->accept_gamma + (size_t)x * slots;

    for (;;) {
        uint32_t slot = ldp_uniform_u32(g, slots);
        if (ldp_next_u32(g) >= thr[slot]) slot = alias[slot];
        if (slot < (uint32_t)k) {
            int accept = ldp_bernoulli_exp(g, gamma[slot]);
            if (accept < 0) return LDP_ERR_INVARIANT;
            if (accept) {
                *y = head[slot];
                return LDP_OK;
            }
        } else {
            int32_t cand;
            double g_tail;
            int accept;
            if (t->n_outputs <= k) return LDP_ERR_INVARIANT; /* tail slot must have mass 0 */
            do { /* uniform over outputs \ head by rejection of head members */
                cand = t->outputs[ldp_uniform_u32(g, (uint32_t)t->n_outputs)];
            } while (in_sorted(head, k, cand));
            g_tail = gamma[k] + t->half_epsilon *
                     (ldp_distance(t->embeddings + (size_t)x * (size_t)t->dim,
                                   t->embeddings + (size_t)cand * (size_t)t->dim, t->dim) -
                      t->tail_floor[x]);
            accept = ldp_bernoulli_exp(g, g_tail); /* -1 if the floor was not a lower bound */
            if (accept < 0) return LDP_ERR_INVARIANT;
            if (accept) {
                *y = cand;
                return LDP_OK;
            }
        }
    }
}

int ldp_santext_sample_many(ldp_chacha *g, const ldp_santext_table *t, const int32_t *xs,
                            int32_t *ys, size_t n, size_t *failed_at) {
    size_t i;
    for (i = 0; i < n; i++) {
        int rc = ldp_santext_sample(g, t, xs[i], &ys[i]);
        if (rc != LDP_OK) {
            *failed_at = i;
            return rc;
        }
    }
    return LDP_OK;
}
