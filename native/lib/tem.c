/* TEM's sampler on the exact SanText engine (Carvalho et al. 2021, "TEM: High Utility Metric
 * Differential Privacy on Text", the truncated exponential mechanism; sdk/ldptext/tem.py derives
 * it). With L_x the outputs within gamma of x and Lbar_x the others, the release is
 *   Pr[M(x) = y] = exp(-eps * min(d(x, y), gamma) / 2) / Z(x),
 * drawn exactly in two branches:
 *   far (the paper's "bottom"), with probability exp(-bot_gamma[x]) when Lbar_x is not empty:
 *     y uniform over Lbar_x, by rejection from uniform candidates over the output domain;
 *   near, otherwise: SanText's law at the same eps (the bundle's engine tables) conditioned on
 *     L_x, by redrawing until the draw lies within gamma.
 * Membership is decided with ldp_distance, the sampler's own float64 distance, the function the
 * builder counted |Lbar_x| with. Both loops take at most one expected round per token (tem.py).
 *
 * The random draws come in the Python runtime's order (TEMSanitizer._draw): one far-branch trial
 * per token with far outputs, in token order; then rounds of one candidate per far token still
 * waiting; then rounds of one engine draw per near token still waiting. So the same stream gives
 * the same output here, in the Python extension and in the numpy fallback. */
#include <stdlib.h>

#include "ldp_internal.h"
#include "samplers.h"

int ldp_tem_sample_many(ldp_chacha *g, const ldp_bundle *b, const int32_t *xs, int32_t *ys,
                        size_t n) {
    const ldp_santext_table *t = &b->table;
    size_t i, n_far = 0, n_near = 0, waiting;
    size_t *far, *near;
    int32_t *rows, *draws;
    int rc = LDP_OK;
    if (n == 0) return LDP_OK;
    far = (size_t *)malloc(n * sizeof *far);
    near = (size_t *)malloc(n * sizeof *near);
    rows = (int32_t *)malloc(n * sizeof *rows);
    draws = (int32_t *)malloc(n * sizeof *draws);
    if (far == NULL || near == NULL || rows == NULL || draws == NULL) {
        rc = LDP_E_NOMEM;
        goto done;
    }
    /* the branch of every token */
    for (i = 0; i < n; i++) {
        int bot = 0;
        if (b->bot_count[xs[i]] > 0) {
            bot = ldp_bernoulli_exp(g, b->bot_gamma[xs[i]]);
            if (bot < 0) {
                rc = LDP_E_SAMPLER;
                goto done;
            }
        }
        if (bot) far[n_far++] = i;
        else near[n_near++] = i;
    }
    /* far: uniform over Lbar_x by rejection; rng.uniform_int draws 64-bit uniforms */
    for (waiting = n_far; waiting > 0;) {
        size_t kept = 0;
        for (i = 0; i < waiting; i++) {
            const size_t at = far[i];
            const int32_t y = t->outputs[ldp_uniform_u64(g, (uint64_t)t->n_outputs)];
            if (ldp_distance(t, xs[at], y) > b->gamma) ys[at] = y;
            else far[kept++] = at;
        }
        waiting = kept;
    }
    /* near: the engine's draw, kept when within gamma; one sampler call per round, over the
     * tokens still waiting, as rng.santext_sample is called */
    for (waiting = n_near; waiting > 0;) {
        size_t kept = 0, failed_at = 0;
        for (i = 0; i < waiting; i++) rows[i] = xs[near[i]];
        if (ldp_santext_sample_many(g, t, rows, draws, waiting, &failed_at) != LDP_SAMPLE_OK) {
            rc = LDP_E_SAMPLER;
            goto done;
        }
        for (i = 0; i < waiting; i++) {
            if (ldp_distance(t, rows[i], draws[i]) <= b->gamma) ys[near[i]] = draws[i];
            else near[kept++] = near[i];
        }
        waiting = kept;
    }
done:
    free(far);
    free(near);
    free(rows);
    free(draws);
    return rc;
}
