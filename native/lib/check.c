/* Are a SanText bundle's stated parameters what its tables realise? Run by ldp_bundle_open after
 * the table checks: a signature says who vouches for the manifest, not that its numbers are right,
 * and a signing key can be misused or a build script wrong. The same checks as the Python loader
 * (sdk/ldptext/santext_check.py, which explains them):
 *
 *   eps0, p  SanText+: eps0 = ln(1/p); SanText: no p, eps0 = 0.
 *   D_max    no distance from the largest-norm valid row, or from one random valid row, to any
 *            valid input exceeds the stated D_max.
 *   eps      for a fixed sample of rows (the largest-norm half, an even spread) and rows drawn at
 *            random at each open, the head outputs' realised log-probabilities
 *            log(alias mass_i) - gamma_i differ by -eps/2 * (d_i - d_j), within the stated
 *            tolerance (the per-row normaliser cancels in the differences).
 *
 * Cost: two passes over the valid inputs for D_max (2 V distances) and (16 + 48) * K distances. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ldp_internal.h"

#define FIXED_ROWS 16
#define RANDOM_ROWS 48

static double row_norm(const ldp_santext_table *t, int32_t x) {
    return (double)t->emb_scale[x] * sqrt((double)t->emb_sqnorm[x]);
}

/* math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12) */
static int close12(double a, double b) {
    double diff = fabs(a - b), big = fmax(fabs(a), fabs(b));
    return diff <= fmax(1e-12 * big, 1e-12);
}

/* The fixed sample: the FIXED_ROWS/2 valid rows of largest norm (ties: the lower id first), then
 * an even spread over the valid rows. Writes up to FIXED_ROWS ids, the largest-norm row first;
 * returns how many. */
static size_t fixed_rows(const ldp_bundle *b, int32_t *rows, size_t n_valid) {
    const ldp_santext_table *t = &b->table;
    size_t n = 0, i, half = FIXED_ROWS / 2, spread = FIXED_ROWS - half, next = 0, rank = 0;
    size_t want[FIXED_ROWS];
    int32_t x;
    /* the largest-norm rows, by insertion into a short sorted list */
    for (x = 0; x < t->n_rows; x++) {
        double v;
        if (!b->valid_input[x]) continue;
        v = row_norm(t, x);
        for (i = n; i > 0 && row_norm(t, rows[i - 1]) < v; i--) {}
        if (i >= half) continue;
        if (n < half) n++;
        memmove(rows + i + 1, rows + i, (n - 1 - i) * sizeof(int32_t));
        rows[i] = x;
    }
    /* the even spread: the valid rows of rank floor(j (n_valid - 1) / (spread - 1)), j < spread */
    for (i = 0; i < spread; i++)
        want[i] = (size_t)((double)i * (double)(n_valid - 1) / (double)(spread - 1));
    for (x = 0; x < t->n_rows && next < spread; x++) {
        size_t k;
        if (!b->valid_input[x]) continue;
        if (rank++ != want[next]) continue;
        while (next < spread && want[next] == rank - 1) next++;
        for (k = 0; k < n && rows[k] != x; k++) {}
        if (k == n) rows[n++] = x;
    }
    return n;
}

/* A valid row drawn uniformly (by rejection over [0, V)) from OS randomness; -1 if that fails. */
static int32_t random_valid_row(const ldp_bundle *b) {
    const ldp_santext_table *t = &b->table;
    int tries;
    for (tries = 0; tries < 4096; tries++) {
        uint64_t r;
        if (ldp_os_random((uint8_t *)&r, sizeof r) != 0) return -1;
        /* the bias of a modulo over 2^64 is below 2^-32 for V < 2^31: irrelevant to which rows a
         * check reads */
        r %= (uint64_t)t->n_rows;
        if (b->valid_input[r]) return (int32_t)r;
    }
    return -1;
}

static int check_d_max(const ldp_bundle *b, int32_t x) {
    const ldp_santext_table *t = &b->table;
    double far = 0.0;
    int32_t y;
    for (y = 0; y < t->n_rows; y++) {
        double d;
        if (!b->valid_input[y]) continue;
        d = ldp_distance(t, x, y);
        if (d > far) far = d;
    }
    return far > b->d_max * (1.0 + 1e-9) + 1e-12 ? LDP_E_PARAMETER_MISMATCH : LDP_OK;
}

/* 1: the row's head ratios are checkable and agree with eps; 0: not checkable (fewer than two
 * head outputs at different distances); -1: they disagree. */
static int check_row(const ldp_bundle *b, int32_t x, double tol) {
    const ldp_santext_table *t = &b->table;
    const size_t k = (size_t)t->head_size, slots = k + 1;
    const uint32_t *thr = t->alias_threshold + (size_t)x * slots;
    const uint16_t *alias = t->alias_index + (size_t)x * slots;
    const int32_t *head = t->head_ids + (size_t)x * k;
    const double *gamma = t->accept_gamma + (size_t)x * slots;
    double rmin = INFINITY, rmax = -INFINITY, dmin = INFINITY, dmax = -INFINITY;
    size_t i, used = 0;
    for (i = 0; i < k; i++) {
        uint64_t mass = ldp_realised_mass(thr, alias, slots, i);
        double d, r;
        if (mass == 0 || (t->keep_row[x] && head[i] == x)) continue;
        d = ldp_distance(t, x, head[i]);
        r = log((double)mass) - gamma[i] + t->half_epsilon * d;
        rmin = fmin(rmin, r);
        rmax = fmax(rmax, r);
        dmin = fmin(dmin, d);
        dmax = fmax(dmax, d);
        used++;
    }
    if (used < 2 || !(dmax - dmin > 1e-9)) return 0;
    return rmax - rmin > tol ? -1 : 1;
}

int ldp_check_realised(const ldp_bundle *b) {
    const ldp_santext_table *t = &b->table;
    int32_t rows[FIXED_ROWS + RANDOM_ROWS];
    size_t n, i, n_valid = 0, checked = 0;
    int32_t x;
    double tol;
    if (b->mechanism == LDP_MECH_SANTEXT_PLUS) {
        if (!close12(b->epsilon0, log(1.0 / b->p))) return LDP_E_PARAMETER_MISMATCH;
    } else if (!isnan(b->p) || b->epsilon0 != 0.0) {
        return LDP_E_PARAMETER_MISMATCH;
    }
    for (x = 0; x < t->n_rows; x++) n_valid += b->valid_input[x] != 0;
    if (n_valid == 0) return LDP_OK; /* nothing can be sanitized: no statement is exercised */
    n = fixed_rows(b, rows, n_valid);
    for (i = 0; i < RANDOM_ROWS; i++) {
        int32_t r = random_valid_row(b);
        if (r < 0) return LDP_E_RANDOM;
        rows[n++] = r;
    }
    /* D_max from the largest-norm row and the first random one */
    if (check_d_max(b, rows[0]) != LDP_OK || check_d_max(b, rows[n - RANDOM_ROWS]) != LDP_OK)
        return LDP_E_PARAMETER_MISMATCH;
    /* |log P_realised - log P_formula| <= tolerance per probability (the manifest's statement), so
     * a difference of two by twice that, plus the float rounding of eps * d / 2 */
    tol = 2.0 * b->tolerance + 1e-12 * (1.0 + b->epsilon * b->d_max);
    for (i = 0; i < n; i++) {
        int rc = check_row(b, rows[i], tol);
        if (rc < 0) return LDP_E_PARAMETER_MISMATCH;
        checked += (size_t)rc;
    }
    return checked > 0 ? LDP_OK : LDP_E_PARAMETER_MISMATCH;
}
