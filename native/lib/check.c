/* Are a bundle's stated parameters what its tables realise? Run by ldp_bundle_open after
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
 * TEM (tem.py) adds: gamma is the threshold of a stated beta and no far branch exceeds beta; for
 * the two D_max rows, |Lbar_x| = bot_count[x] and -ln P_far = bot_gamma[x] recomputed from all
 * |O| distances; its engine's head ratios are SanText's at the same eps. CusText (custext.py)
 * has its own: the stated p (0 for CusText+) and group statistics, and on the sampled rows the
 * exponential mechanism exp(eps u / 2) over the output set (u the normalised similarity).
 * A stated worst case must be the one the parameters give (none for CusText).
 *
 * Cost: two passes over the valid inputs for D_max (2 V distances) and (16 + 48) * K distances;
 * TEM 2 |O| more. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
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

/* A valid row drawn uniformly, by rejection over [0, V), from OS randomness; -1 if that fails
 * after 4096 draws (or the OS generator fails). */
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

/* log(alias mass) - gamma of head slot i of row x: the realised log-probability of that output up
 * to the row's normaliser; -inf where the slot has no proposal mass. */
static double head_log_weight(const ldp_santext_table *t, int32_t x, size_t i) {
    const size_t slots = (size_t)t->head_size + 1, row = (size_t)x * slots;
    uint64_t mass = ldp_table_realised_mass(t, x, i);
    return mass == 0 ? -INFINITY : log((double)mass) - ldp_accept_gamma(t, row + i);
}

/* 1: the row's head ratios are checkable and agree with eps; 0: not checkable (fewer than two
 * head outputs at different distances); -1: they disagree. */
static int check_row(const ldp_bundle *b, int32_t x, double tol) {
    const ldp_santext_table *t = &b->table;
    const size_t k = (size_t)t->head_size;
    const size_t head_at = (size_t)x * k;
    double rmin = INFINITY, rmax = -INFINITY, dmin = INFINITY, dmax = -INFINITY;
    size_t i, used = 0;
    for (i = 0; i < k; i++) {
        double w = head_log_weight(t, x, i), d, r;
        if (w == -INFINITY || (t->keep_row[x] && ldp_head_id(t, head_at + i) == x)) continue;
        d = ldp_distance(t, x, ldp_head_id(t, head_at + i));
        r = w + t->half_epsilon * d;
        rmin = fmin(rmin, r);
        rmax = fmax(rmax, r);
        dmin = fmin(dmin, d);
        dmax = fmax(dmax, d);
        used++;
    }
    if (used < 2 || !(dmax - dmin > 1e-9)) return 0;
    return rmax - rmin > tol ? -1 : 1;
}

/* The stated worst case (privacy.worst_case_token_epsilon), where a manifest states one, against
 * what its parameters give (token_runtime.py check_stated_worst_case); computed = +inf: none. */
static int check_stated_worst_case(const ldp_bundle *b, double computed) {
    const ldp_json *stated = ldp_json_get(ldp_json_get(b->manifest, "privacy"),
                                          "worst_case_token_epsilon");
    if (stated == NULL) return LDP_OK;
    if (isinf(computed)) return stated->type == LDP_JSON_NULL ? LDP_OK : LDP_E_PARAMETER_MISMATCH;
    return ldp_json_is_number(stated) && close12(ldp_json_number(stated), computed)
               ? LDP_OK
               : LDP_E_PARAMETER_MISMATCH;
}

/* The rows every check reads: the fixed sample, then RANDOM_ROWS drawn at this open (a table
 * that lies on some rows cannot know which rows a device reads). Returns how many (0: no valid
 * input), or -1 when the OS random generator fails. */
static long check_rows(const ldp_bundle *b, int32_t rows[FIXED_ROWS + RANDOM_ROWS]) {
    const ldp_santext_table *t = &b->table;
    size_t n, i, n_valid = 0;
    int32_t x;
    for (x = 0; x < t->n_rows; x++) n_valid += b->valid_input[x] != 0;
    if (n_valid == 0) return 0;
    n = fixed_rows(b, rows, n_valid);
    for (i = 0; i < RANDOM_ROWS; i++) {
        int32_t r = random_valid_row(b);
        if (r < 0) return -1;
        rows[n++] = r;
    }
    return (long)n;
}

/* SanText's head ratios on every sampled row: LDP_OK when they agree with eps and at least one
 * row was checkable. */
static int check_head_ratios(const ldp_bundle *b, const int32_t *rows, size_t n, double tol) {
    size_t i, checked = 0;
    for (i = 0; i < n; i++) {
        int rc = check_row(b, rows[i], tol);
        if (rc < 0) return LDP_E_PARAMETER_MISMATCH;
        checked += (size_t)rc;
    }
    return checked > 0 ? LDP_OK : LDP_E_PARAMETER_MISMATCH;
}

/* ---- the stated median verbatim rate --------------------------------------------------------
 * The stated median m of P(M(x) = x) over the sensitive inputs says that a uniformly random
 * sensitive input is above it with probability at most 1/2. Of the rows drawn at random at open, the
 * sensitive ones are such inputs: if at least k(n) of n are above m, with P(Bin(n, 1/2) >= k) <=
 * 1e-11, the statement is refused (an honest bundle is refused that way at most once in 10^11
 * opens). A row's rate is decided by bounds from its head where they suffice (above: the tail's
 * terms are at most e^(-eps/2 (floor - d(x, x))) each; not above: the head's terms alone), else
 * computed over the outputs, at most MEDIAN_EXACT_ROWS times; an undecided row counts as not
 * above, which can only make a refusal rarer. So a gross misstatement (a true median of 0.9999
 * stated as 0.5, whose rows the bounds decide) cannot pass. verbatim.py check_stated_median is the
 * same test. The rows are MEDIAN_ROWS sensitive inputs drawn uniformly at each open. */
#define MEDIAN_REFUSAL 1e-11
#define MEDIAN_EXACT_ROWS 8
#define MEDIAN_ROWS 64 /* sensitive rows drawn at each open: refused from 58 of 64 above */

/* The smallest k with P(Bin(n, 1/2) >= k) <= MEDIAN_REFUSAL; n + 1 when even k = n is likelier. */
static size_t binomial_threshold(size_t n) {
    double term = ldexp(1.0, -(int)n), tail = 0.0; /* C(n, i) / 2^n, from i = n down */
    size_t i;
    for (i = n + 1; i-- > 0;) {
        tail += term;
        if (tail > MEDIAN_REFUSAL) return i + 1;
        term = term * (double)i / (double)(n - i + 1);
    }
    return 0;
}

/* A stated verbatim rate with the slack of verbatim.py check_stated_maximum: a realised rate counts
 * as above the statement only beyond this (the rate's own rounding). */
static double with_slack(double stated) {
    return stated + 1e-9 * fmax(1.0, stated) + 1e-12;
}

/* r beyond level: above it, or at or above it (at_least) */
static int beyond(double r, double level, int at_least) {
    return at_least ? r >= level : r > level;
}

/* 1 if the sensitive row x's verbatim rate is above level (at_least: at or above it), 0 if it is
 * not or is left undecided (*exact: computations over the outputs still allowed). */
static int rate_above(const ldp_bundle *b, int32_t x, double level, int at_least, int *exact) {
    const ldp_santext_table *t = &b->table;
    const size_t k = (size_t)t->head_size, head_at = (size_t)x * k;
    const double half = t->half_epsilon, own = ldp_distance(t, x, x);
    double head_sum = 0.0, sum = 0.0;
    int in_head = 0, lo = 0, hi = t->n_outputs;
    size_t j;
    int32_t i;
    while (lo < hi) { /* x an output? (outputs ascending) */
        const int mid = lo + (hi - lo) / 2;
        if (t->outputs[mid] < x) lo = mid + 1;
        else hi = mid;
    }
    if (lo == t->n_outputs || t->outputs[lo] != x) return 0; /* never released unchanged */
    for (j = 0; j < k; j++) {
        const int32_t y = ldp_head_id(t, head_at + j);
        in_head |= y == x;
        head_sum += exp(-half * (ldp_distance(t, x, y) - own));
    }
    if (!in_head) head_sum += 1.0;
    if (!beyond(1.0 / head_sum, level, at_least)) return 0;
    if (beyond(1.0 / (head_sum + (double)(t->n_outputs - (int32_t)k) *
                                     exp(-half * fmax(t->tail_floor[x] - own, 0.0))),
               level, at_least))
        return 1;
    if (*exact <= 0) return 0;
    (*exact)--;
    for (i = 0; i < t->n_outputs; i++) sum += exp(-half * (ldp_distance(t, x, t->outputs[i]) - own));
    return beyond(1.0 / sum, level, at_least);
}

static double tem_verbatim_rate(const ldp_bundle *b, int32_t x);
static double custext_verbatim_rate(const ldp_bundle *b, int32_t x, double *sim);

/* Whether the sensitive row x's verbatim rate is above level (at_least: at or above it): SanText by
 * rate_above (bounds, then at most *exact computations over the outputs); TEM and CusText: the
 * row's exact rate (one pass over the outputs, or over the row's output set; sim: K doubles). */
static int row_above(const ldp_bundle *b, int32_t x, double level, int at_least, int *exact, double *sim) {
    if (b->mechanism == LDP_MECH_TEM) return beyond(tem_verbatim_rate(b, x), level, at_least);
    if (b->mechanism == LDP_MECH_CUSTEXT || b->mechanism == LDP_MECH_CUSTEXT_PLUS)
        return beyond(custext_verbatim_rate(b, x, sim), level, at_least);
    return rate_above(b, x, level, at_least, exact);
}

/* MEDIAN_ROWS sensitive rows drawn uniformly (with replacement) at this open, each with probability
 * 1 / their count (verbatim.py random_sensitive_rows): no rejection that could run out of tries.
 * *n: how many (0: the bundle has no sensitive row). LDP_E_RANDOM if the OS generator fails. */
static int sensitive_sample(const ldp_bundle *b, int32_t rows[MEDIAN_ROWS], size_t *n) {
    const ldp_santext_table *t = &b->table;
    int32_t *sensitive, x;
    size_t n_sensitive = 0;
    *n = 0;
    sensitive = (int32_t *)malloc(((size_t)t->n_rows + 1) * sizeof *sensitive);
    if (sensitive == NULL) return LDP_E_NOMEM;
    for (x = 0; x < t->n_rows; x++)
        if (b->valid_input[x] && !t->keep_row[x]) sensitive[n_sensitive++] = x;
    for (; n_sensitive > 0 && *n < MEDIAN_ROWS; (*n)++) {
        uint64_t r;
        if (ldp_os_random((uint8_t *)&r, sizeof r) != 0) {
            free(sensitive);
            return LDP_E_RANDOM;
        }
        rows[*n] = sensitive[r % (uint64_t)n_sensitive]; /* bias < 2^-32: irrelevant to which rows */
    }
    free(sensitive);
    return LDP_OK;
}

/* LDP_OK, or LDP_E_PARAMETER_MISMATCH when too many random sensitive rows lie above the stated
 * median (verbatim.py check_stated_median). A row counts as above when its rate exceeds the median
 * by more than the slack of the stated maximum (above_stated_max): an honest bundle whose rates are
 * all equal (CusText with K = 2) states a median that its rows' rates, rounded, may exceed. */
static int check_stated_median(const ldp_bundle *b) {
    const double level = with_slack(b->verbatim_median);
    int32_t rows[MEDIAN_ROWS];
    size_t i, n, above = 0;
    int exact = MEDIAN_EXACT_ROWS, rc;
    double *sim;
    if (isnan(b->verbatim_median)) return LDP_OK;
    rc = sensitive_sample(b, rows, &n);
    if (rc != LDP_OK) return rc;
    sim = (double *)malloc(((size_t)b->table.head_size + 1) * sizeof *sim);
    if (sim == NULL) return LDP_E_NOMEM;
    for (i = 0; i < n; i++) above += (size_t)row_above(b, rows[i], level, 0, &exact, sim);
    free(sim);
    return n > 0 && above >= binomial_threshold(n) ? LDP_E_PARAMETER_MISMATCH : LDP_OK;
}

/* ---- near identity (verbatim.py near_identity_at_load) ----------------------------------------
 * A bundle is near identity, refused without the application's opt-in, when
 *   (1) its stated median verbatim rate is at least LDP_NEAR_IDENTITY_MEDIAN; or
 *   (2) it states none (privacy.verbatim left out) and, of the MEDIAN_ROWS sensitive rows drawn at
 *       random at this open, at least binomial_threshold(n) are released unchanged with
 *       probability >= LDP_NEAR_IDENTITY_MEDIAN: the test check_stated_median applies to a stated
 *       median, applied to one just below the threshold, so leaving the statement out gains nothing
 *       over stating a median just below it. Each row decided exactly (SanText: by its head's
 *       bounds, else over every output; at most MEDIAN_ROWS rows, fewer once the count decides);
 *   (3) its kept-in-clear inputs (keep_row: SanText+'s V_N, kept w.p. 1 - p; CusText+'s stop words,
 *       kept always) are more than half of the valid inputs and kept with probability
 *       1 - p >= LDP_NEAR_IDENTITY_MEDIAN: most of the vocabulary leaves unchanged. */
static int sampled_near_identity(const ldp_bundle *b, int *weak) {
    int32_t rows[MEDIAN_ROWS];
    size_t i, n, at = 0, need;
    int exact = MEDIAN_ROWS, rc;
    double *sim;
    *weak = 0;
    rc = sensitive_sample(b, rows, &n);
    if (rc != LDP_OK) return rc;
    sim = (double *)malloc(((size_t)b->table.head_size + 1) * sizeof *sim);
    if (sim == NULL) return LDP_E_NOMEM;
    need = binomial_threshold(n);
    /* stop once the count decides: need reached, or out of reach */
    for (i = 0; n > 0 && i < n && at < need && at + (n - i) >= need; i++)
        at += (size_t)row_above(b, rows[i], LDP_NEAR_IDENTITY_MEDIAN, 1, &exact, sim);
    free(sim);
    *weak = n > 0 && at >= need;
    return LDP_OK;
}

int ldp_near_identity(const ldp_bundle *b, int *weak) {
    const ldp_santext_table *t = &b->table;
    const double kept_probability = isnan(b->p) ? 1.0 : 1.0 - b->p;
    int64_t valid = 0, kept = 0;
    int32_t x;
    *weak = b->verbatim_median >= LDP_NEAR_IDENTITY_MEDIAN; /* NaN: none stated */
    for (x = 0; x < t->n_rows; x++) {
        valid += b->valid_input[x] != 0;
        kept += b->valid_input[x] && t->keep_row[x];
    }
    if (2 * kept > valid && kept_probability >= LDP_NEAR_IDENTITY_MEDIAN) *weak = 1;
    if (*weak || !isnan(b->verbatim_median)) return LDP_OK;
    return sampled_near_identity(b, weak);
}

static int check_santext(const ldp_bundle *b) {
    int32_t rows[FIXED_ROWS + RANDOM_ROWS];
    long n;
    if (b->mechanism == LDP_MECH_SANTEXT_PLUS) {
        if (!close12(b->epsilon0, log(1.0 / b->p))) return LDP_E_PARAMETER_MISMATCH;
    } else if (!isnan(b->p) || b->epsilon0 != 0.0) {
        return LDP_E_PARAMETER_MISMATCH;
    }
    n = check_rows(b, rows);
    if (n < 0) return LDP_E_RANDOM;
    if (n == 0) return LDP_OK; /* nothing can be sanitized: no statement is exercised */
    /* D_max from the largest-norm row and the first random one */
    if (check_d_max(b, rows[0]) != LDP_OK || check_d_max(b, rows[n - RANDOM_ROWS]) != LDP_OK)
        return LDP_E_PARAMETER_MISMATCH;
    {
        const int rc = check_stated_median(b);
        if (rc != LDP_OK) return rc;
    }
    /* |log P_realised - log P_formula| <= tolerance per probability (the manifest's statement), so
     * a difference of two by twice that, plus the float rounding of eps * d / 2 */
    return check_head_ratios(b, rows, (size_t)n, 2.0 * ldp_checked_tolerance(b, b->d_max));
}

/* log(exp(a) + exp(b)) */
static double log_add(double a, double b) {
    double hi = fmax(a, b), lo = fmin(a, b);
    if (hi == -INFINITY) return -INFINITY;
    return hi + log1p(exp(lo - hi));
}

/* TEM's far branch of row x (tem.py bot_rows): |Lbar_x| equals bot_count[x] and -ln P_far =
 * softplus(ln A - ln B), A = sum over L_x of exp(-eps d / 2), B = |Lbar_x| exp(-eps gamma / 2),
 * within tol of bot_gamma[x]. */
static int check_tem_far(const ldp_bundle *b, int32_t x, double tol) {
    const ldp_santext_table *t = &b->table;
    double log_a = -INFINITY, z;
    int64_t far = 0;
    int32_t i;
    for (i = 0; i < t->n_outputs; i++) {
        double d = ldp_distance(t, x, t->outputs[i]);
        if (d > b->gamma) far++;
        else log_a = log_add(log_a, -t->half_epsilon * d);
    }
    if (far != (int64_t)b->bot_count[x]) return LDP_E_PARAMETER_MISMATCH;
    if (far == 0) return LDP_OK; /* no far branch: bot_gamma is not read */
    if (log_a == -INFINITY) /* every output is far: the far branch always */
        return b->bot_gamma[x] == 0.0 ? LDP_OK : LDP_E_PARAMETER_MISMATCH;
    z = log_a - (log((double)far) - t->half_epsilon * b->gamma);
    z = z > 0 ? z + log1p(exp(-z)) : log1p(exp(z)); /* softplus */
    return fabs(z - b->bot_gamma[x]) <= tol ? LDP_OK : LDP_E_PARAMETER_MISMATCH;
}

/* tem.py TEMSanitizer.check_parameters: no p or eps0 (TEM keeps no word); gamma is the threshold
 * of the stated beta and no input's far branch exceeds beta; the stated worst case; D_max; the
 * engine's head ratios at eps (its tables are SanText's at the same eps); the far branch of the
 * largest-norm row and of a random one at the stated gamma. */
static int check_tem(const ldp_bundle *b) {
    const ldp_santext_table *t = &b->table;
    int32_t rows[FIXED_ROWS + RANDOM_ROWS];
    long n;
    double tol;
    int32_t x;
    if (!isnan(b->p) || b->epsilon0 != 0.0) return LDP_E_PARAMETER_MISMATCH;
    if (!isnan(b->beta)) {
        double want = 2.0 / b->epsilon * log((1.0 - b->beta) * (double)t->n_outputs / b->beta);
        if (!(b->beta > 0 && b->beta < 1 && isfinite(want) && want > 0) ||
            fabs(b->gamma - want) > 1e-12 * fmax(fabs(b->gamma), fabs(want)))
            return LDP_E_PARAMETER_MISMATCH;
        for (x = 0; x < t->n_rows; x++)
            if (b->valid_input[x] && b->bot_count[x] > 0 &&
                exp(-b->bot_gamma[x]) > b->beta * (1 + 1e-9))
                return LDP_E_PARAMETER_MISMATCH;
    }
    if (check_stated_worst_case(b, ldp_worst_case_epsilon(b)) != LDP_OK)
        return LDP_E_PARAMETER_MISMATCH;
    n = check_rows(b, rows);
    if (n < 0) return LDP_E_RANDOM;
    if (n == 0) return LDP_OK;
    tol = 2.0 * ldp_checked_tolerance(b, fmin(b->gamma, b->d_max));
    if (check_d_max(b, rows[0]) != LDP_OK || check_d_max(b, rows[n - RANDOM_ROWS]) != LDP_OK ||
        check_tem_far(b, rows[0], tol) != LDP_OK ||
        check_tem_far(b, rows[n - RANDOM_ROWS], tol) != LDP_OK)
        return LDP_E_PARAMETER_MISMATCH;
    if (check_head_ratios(b, rows, (size_t)n, 2.0 * ldp_checked_tolerance(b, b->d_max)) !=
        LDP_OK)
        return LDP_E_PARAMETER_MISMATCH;
    return check_stated_median(b);
}

/* CusText's similarity of rows x and y (custext.py check_parameters): minus the distance, or the
 * cosine of the int8 codes (the scales cancel; 0 where a vector is zero). */
static double similarity(const ldp_bundle *b, int32_t x, int32_t y) {
    const ldp_santext_table *t = &b->table;
    const int8_t *qx = t->emb_q + (size_t)x * (size_t)t->dim, *qy = t->emb_q + (size_t)y * (size_t)t->dim;
    double norms;
    int64_t dot = 0;
    int32_t i;
    if (!b->cosine) return -ldp_distance(t, x, y);
    norms = sqrt((double)t->emb_sqnorm[x]) * sqrt((double)t->emb_sqnorm[y]);
    if (!(t->emb_scale[x] > 0 && t->emb_scale[y] > 0 && norms > 0)) return 0.0;
    for (i = 0; i < t->dim; i++) dot += (int32_t)qx[i] * (int32_t)qy[i];
    return (double)dot / norms;
}

/* TEM's P(x -> x) from its formula (tem.py): exp(-eps min(d(x, x), gamma) / 2) over Z(x), the sum over
 * L_x of exp(-eps d / 2) plus |Lbar_x| exp(-eps gamma / 2); 0 where x is not an output. Every row's
 * check shows its realised law to be this formula within the stated tolerance. */
static double tem_verbatim_rate(const ldp_bundle *b, int32_t x) {
    const ldp_santext_table *t = &b->table;
    double log_z = -INFINITY, own = NAN;
    int64_t far = 0;
    int32_t i;
    for (i = 0; i < t->n_outputs; i++) {
        const double d = ldp_distance(t, x, t->outputs[i]);
        if (t->outputs[i] == x) own = d;
        if (d > b->gamma) far++;
        else log_z = log_add(log_z, -t->half_epsilon * d);
    }
    if (isnan(own)) return 0.0;
    if (far > 0) log_z = log_add(log_z, log((double)far) - t->half_epsilon * b->gamma);
    return exp(-t->half_epsilon * fmin(own, b->gamma) - log_z);
}

/* CusText's P(x -> x) from its formula (custext.py): exp(eps u(x, x) / 2) over the sum of exp(eps u / 2)
 * over x's output set (the head members with proposal mass; u the similarity min-max normalised over
 * the set); 0 where x is not in its set or is kept (a stop word). sim: K doubles of scratch. */
static double custext_verbatim_rate(const ldp_bundle *b, int32_t x, double *sim) {
    const ldp_santext_table *t = &b->table;
    const size_t k = (size_t)t->head_size, head_at = (size_t)x * k;
    double smin = INFINITY, smax = -INFINITY, span, log_z = -INFINITY, own = NAN;
    size_t i, live = 0, self = k;
    if (!b->valid_input[x] || b->group_id[x] < 0) return 0.0;
    for (i = 0; i < k; i++) {
        if (head_log_weight(t, x, i) == -INFINITY) continue;
        sim[live] = similarity(b, x, ldp_head_id(t, head_at + i));
        if (ldp_head_id(t, head_at + i) == x) self = live;
        smin = fmin(smin, sim[live]);
        smax = fmax(smax, sim[live]);
        live++;
    }
    if (self == k) return 0.0;
    span = smax - smin;
    for (i = 0; i < live; i++) {
        const double u = span > 0 ? fmin(fmax((sim[i] - smin) / span, 0.0), 1.0) : 1.0;
        log_z = log_add(log_z, t->half_epsilon * u);
        if (i == self) own = t->half_epsilon * u;
    }
    return exp(own - log_z);
}

/* the largest stated verbatim rate, with the slack of verbatim.py check_stated_maximum */
static int above_stated_max(const ldp_bundle *b, double rate) {
    return rate > with_slack(b->verbatim_max);
}

/* 1: row x's realised law over its output set is the exponential mechanism exp(eps u / 2) up to
 * tol (u the similarity min-max normalised over the set); 0: x is not sanitized (a stop word or
 * not an input); -1: it is not, or an output of its set has probability 0. scratch: 2 K doubles. */
static int check_custext_row(const ldp_bundle *b, int32_t x, double tol, double *scratch) {
    const ldp_santext_table *t = &b->table;
    const size_t k = (size_t)t->head_size;
    const size_t head_at = (size_t)x * k;
    double *weight = scratch, *sim = scratch + k;
    double smin = INFINITY, smax = -INFINITY, lo = INFINITY, hi = -INFINITY, span;
    size_t i, live = 0;
    if (!b->valid_input[x] || b->group_id[x] < 0) return 0;
    for (i = 0; i < k; i++) { /* the members with proposal mass: their weights and similarities */
        weight[live] = head_log_weight(t, x, i);
        if (weight[live] == -INFINITY) continue;
        sim[live] = similarity(b, x, ldp_head_id(t, head_at + i));
        smin = fmin(smin, sim[live]);
        smax = fmax(smax, sim[live]);
        live++;
    }
    if (live != b->group_size[b->group_id[x]]) return -1; /* a member with probability 0 */
    span = smax - smin;
    for (i = 0; i < live; i++) {
        double u = span > 0 ? fmin(fmax((sim[i] - smin) / span, 0.0), 1.0) : 1.0;
        double r = weight[i] - t->half_epsilon * u;
        lo = fmin(lo, r);
        hi = fmax(hi, r);
    }
    return hi - lo > tol ? -1 : 1;
}

/* custext.py CusTextSanitizer.check_parameters: p is 0 for CusText+ (stop words kept with
 * probability 1) and absent for CusText; no eps0 and no worst case; the stated group statistics;
 * and on the sampled rows the exponential mechanism at the stated eps and similarity. */
static int check_custext(const ldp_bundle *b) {
    const ldp_santext_table *t = &b->table;
    const ldp_json *privacy = ldp_json_get(b->manifest, "privacy");
    int32_t rows[FIXED_ROWS + RANDOM_ROWS], x;
    uint64_t groups = 0, smallest = 0, largest = 0;
    double *scratch;
    size_t i, checked = 0;
    long n;
    int rc = LDP_OK;
    const double tol = 2.0 * ldp_checked_tolerance(b, 1.0);
    if (b->mechanism == LDP_MECH_CUSTEXT_PLUS ? b->p != 0.0 : !isnan(b->p))
        return LDP_E_PARAMETER_MISMATCH;
    if (b->epsilon0 != 0.0 || check_stated_worst_case(b, INFINITY) != LDP_OK)
        return LDP_E_PARAMETER_MISMATCH;
    for (i = 0; i < b->n_groups; i++) { /* every group has >= K >= 1 outputs (bundle.c) */
        const uint64_t size = b->group_size[i];
        groups++;
        smallest = smallest == 0 || size < smallest ? size : smallest;
        largest = size > largest ? size : largest;
    }
    {
        static const char *const keys[3] = {"groups", "smallest_group", "largest_group"};
        const uint64_t values[3] = {groups, smallest, largest};
        for (i = 0; i < 3 && rc == LDP_OK; i++) {
            const ldp_json *v = ldp_json_get(privacy, keys[i]);
            if (v != NULL && !(ldp_json_is_number(v) && ldp_json_number(v) == (double)values[i]))
                rc = LDP_E_PARAMETER_MISMATCH;
        }
    }
    if (rc != LDP_OK) return rc;
    scratch = (double *)malloc(2 * (size_t)t->head_size * sizeof *scratch);
    if (scratch == NULL) return LDP_E_NOMEM;
    n = check_rows(b, rows);
    if (n < 0) rc = LDP_E_RANDOM;
    for (i = 0; rc == LDP_OK && i < (size_t)n; i++) {
        int r = check_custext_row(b, rows[i], tol, scratch);
        if (r < 0) rc = LDP_E_PARAMETER_MISMATCH;
        checked += (size_t)(r > 0);
    }
    /* every sampled row a stop word: check the first sanitized row */
    for (x = 0; rc == LDP_OK && checked == 0 && x < t->n_rows; x++) {
        int r = check_custext_row(b, x, tol, scratch);
        if (r < 0) rc = LDP_E_PARAMETER_MISMATCH;
        checked += (size_t)(r > 0);
    }
    free(scratch);
    return rc == LDP_OK ? check_stated_median(b) : rc;
}

int ldp_check_realised(const ldp_bundle *b) {
    switch (b->mechanism) {
    case LDP_MECH_TEM: return check_tem(b);
    case LDP_MECH_CUSTEXT:
    case LDP_MECH_CUSTEXT_PLUS: return check_custext(b);
    default: return check_santext(b);
    }
}

/* ---- Every row before its first draw -------------------------------------------------------
 * The checks above read a sample of rows at open. A table that lies on one row only (that row's
 * input released unchanged with probability 1, say) passes them most of the time, so the sampler
 * also checks each row's whole law the first time a call needs it (ldp_check_rows_of), and
 * ldp_bundle_check_rows checks any range up front. A row's verdict is kept per bundle (row_state:
 * 0 unchecked, 1 right, 2 refused); the check is deterministic, so two threads that check the
 * same row at once write the same verdict. */

#if defined(__GNUC__)
#define ROW_STATE_LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define ROW_STATE_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#else
#define ROW_STATE_LOAD(p) (*(volatile uint8_t *)(p))
#define ROW_STATE_STORE(p, v) (*(volatile uint8_t *)(p) = (v))
#endif

/* Row x's whole law on the SanText engine against Pr[y] ∝ exp(-eps d(x, y) / 2) over the outputs
 * O (row_guard.py, santext.py _row_laws_ok): every head slot's realised log(mass) - gamma + eps/2 d
 * and the tail's log(mass_K / n_T) - gamma_K + eps/2 floor are one constant within tol (so every
 * output's realised probability is the formula's); every output of the tail has probability > 0
 * (mass_K > 0) and a second-trial exponent >= 0 as the sampler computes it (the floor and the
 * cluster bounds are lower bounds: no draw can fail half-way); and, for a sensitive row, P(x -> x)
 * from the formula is at most the stated largest verbatim rate. One pass over O, shared by up to
 * LDP_DIST_BLOCK rows (each output's codes read once for all of them: check_engine_rows); the
 * rate's sum over O only when the head's own bound (the head's terms alone give P(x -> x) at most
 * e^(-eps d(x,x)/2) / sum over the head) does not already show it.
 *
 * A row in three steps: engine_head (everything the head decides), the pass (engine_scan, per
 * chunk of outputs), engine_finish. */
#define SCAN_CHUNK 256 /* outputs per step of the pass: a block's distances stay in L2 */
typedef struct {
    int32_t x;
    int sum_tail;     /* the rate needs the sum over O */
    double own;       /* d(x, x) if x is a head output, else inf */
    double head_sum, sum;
    int32_t *skip;    /* positions in the scan order of the head's outputs (not tail outputs) */
    size_t n_skip;
    double *near_d;   /* per group: the nearest tail output's squared distance and id */
    int32_t *near_y;
} engine_row;

/* The pass reads the outputs in the sampler's cluster order (by cluster, then cell, ids
 * ascending; one cluster, the outputs themselves), so that each group's nearest is the minimum of a
 * contiguous run. A group is a cell where the order has cells (each cell's nearest is then also its
 * refined bound: ldp_refine_row), else a cluster. */
static const int32_t *scan_order(const ldp_santext_table *t) {
    return t->sorted_outputs != NULL ? t->sorted_outputs : t->outputs;
}
static int32_t n_groups(const ldp_santext_table *t) {
    return t->n_cells > 0 ? t->n_cells : t->n_clusters;
}
static int32_t group_end(const ldp_santext_table *t, int32_t c) {
    if (t->n_cells > 0) return (int32_t)t->cell_start[c + 1];
    return t->sorted_outputs != NULL ? (int32_t)t->cluster_start[c + 1] : t->n_outputs;
}

static int engine_head(const ldp_bundle *b, engine_row *e, double tol) {
    const ldp_santext_table *t = &b->table;
    const int32_t x = e->x, *order = scan_order(t);
    const size_t k = (size_t)t->head_size, slots = k + 1, head_at = (size_t)x * k;
    const double half = t->half_epsilon, floor_x = t->tail_floor[x];
    const uint64_t n_tail = (uint64_t)t->n_outputs - (uint64_t)k; /* head ⊂ O (bundle.c) */
    /* SanText's rate (TEM's own, truncated, is checked by check_rows_now) */
    const int rate_stated = !isnan(b->verbatim_max) && !t->keep_row[x] &&
                            (b->mechanism == LDP_MECH_SANTEXT || b->mechanism == LDP_MECH_SANTEXT_PLUS);
    double rmin = INFINITY, rmax = -INFINITY;
    size_t j;
    e->own = INFINITY;
    e->head_sum = e->sum = 0.0;
    e->sum_tail = 0;
    e->n_skip = 0;
    for (j = 0; j < k; j++) {
        const int32_t y = ldp_head_id(t, head_at + j);
        const uint64_t mass = ldp_table_realised_mass(t, x, j);
        const double d = ldp_distance(t, x, y);
        int32_t lo = 0, hi = t->n_outputs;
        double r;
        if (mass == 0) return -1; /* an output the formula gives mass, never drawn */
        r = log((double)mass) - ldp_accept_gamma(t, (size_t)x * slots + j) + half * d;
        rmin = fmin(rmin, r);
        rmax = fmax(rmax, r);
        if (y == x) e->own = d;
        if (t->n_cells > 0) { /* y's position in the scan order: within its cell */
            lo = (int32_t)t->cell_start[t->cell_of[y]];
            hi = (int32_t)t->cell_start[t->cell_of[y] + 1];
        } else if (t->sorted_outputs != NULL) { /* within its cluster */
            lo = (int32_t)t->cluster_start[t->tail_cluster[y]];
            hi = (int32_t)t->cluster_start[t->tail_cluster[y] + 1];
        }
        while (lo < hi) {
            const int32_t mid = lo + (hi - lo) / 2;
            if (order[mid] < y) lo = mid + 1;
            else hi = mid;
        }
        if (lo < t->n_outputs && order[lo] == y) e->skip[e->n_skip++] = lo;
    }
    if (n_tail > 0) {
        const uint64_t mass = t->tail_mass[x];
        double r;
        if (mass == 0) return -1;
        r = log((double)mass) - log((double)n_tail) -
            ldp_accept_gamma(t, (size_t)x * slots + k) + half * floor_x;
        rmin = fmin(rmin, r);
        rmax = fmax(rmax, r);
    }
    if (!(rmax - rmin <= tol)) return -1;
    /* the rate's bound from the head (terms shifted by d(x, x), the smallest distance up to rounding) */
    if (rate_stated && e->own != INFINITY) {
        for (j = 0; j < k; j++)
            e->head_sum += exp(-half * (ldp_distance(t, x, ldp_head_id(t, head_at + j)) - e->own));
        e->sum_tail = 1.0 / e->head_sum > b->verbatim_max;
    }
    for (j = 0; j < (size_t)n_groups(t); j++) e->near_d[j] = INFINITY, e->near_y[j] = -1;
    return 1;
}

/* Row e's part of the pass over the scan order's [i0, i1), d2 the squared distances to them
 * (overwritten). The tail's second trial: its exponent grows with d (every step of
 * ldp_tail_exponent is a monotone rounding), so in each group the nearest tail output has the
 * smallest; find it by the squared distance (sqrt is monotone). seg: the groups' runs in
 * [i0, i1), seg_at[s] to seg_at[s + 1] of group seg_c[s]. */
static void engine_scan(const ldp_santext_table *t, engine_row *e, double *d2, int32_t i0, int32_t i1,
                        const int32_t *seg_at, const int32_t *seg_c, size_t n_seg) {
    const int32_t *order = scan_order(t);
    size_t j, s;
    if (e->sum_tail) { /* the rate's sum over this chunk's tail outputs, from below (engine_finish) */
        double sum_d = 0.0;
        int32_t i, cnt = i1 - i0;
        for (i = i0; i < i1; i++) sum_d += d2[i - i0] > 0.0 ? sqrt(d2[i - i0]) : 0.0;
        for (j = 0; j < e->n_skip; j++)
            if (e->skip[j] >= i0 && e->skip[j] < i1) {
                const double d = d2[e->skip[j] - i0];
                sum_d -= d > 0.0 ? sqrt(d) : 0.0;
                cnt--;
            }
        /* Jensen: exp is convex, so the mean of exp(-eps/2 (d - own)) is at least exp of the mean */
        if (cnt > 0) e->sum += (double)cnt * exp(-t->half_epsilon * (fmax(sum_d, 0.0) / (double)cnt - e->own));
    }
    for (j = 0; j < e->n_skip; j++) /* a head output is not in the tail */
        if (e->skip[j] >= i0 && e->skip[j] < i1) d2[e->skip[j] - i0] = INFINITY;
    for (s = 0; s < n_seg; s++) {
        const double *d = d2 + (seg_at[s] - i0);
        const int32_t n = seg_at[s + 1] - seg_at[s], c = seg_c[s];
        double m0 = INFINITY, m1 = INFINITY, m2 = INFINITY, m3 = INFINITY, m;
        int32_t i = 0;
        for (; i + 4 <= n; i += 4) {
            m0 = d[i] < m0 ? d[i] : m0;
            m1 = d[i + 1] < m1 ? d[i + 1] : m1;
            m2 = d[i + 2] < m2 ? d[i + 2] : m2;
            m3 = d[i + 3] < m3 ? d[i + 3] : m3;
        }
        for (; i < n; i++) m0 = d[i] < m0 ? d[i] : m0;
        m = fmin(fmin(m0, m1), fmin(m2, m3));
        if (m < e->near_d[c]) { /* the first of equals: the lowest id (ascending within a group) */
            for (i = 0; d[i] != m; i++) {}
            e->near_d[c] = m;
            e->near_y[c] = order[seg_at[s] + i];
        }
    }
}

/* The rate's sum over the tail outputs of row x, exactly (in output order, skipping the head):
 * for a row whose bound from below does not show the rate within the stated maximum. */
static double tail_sum_exact(const ldp_santext_table *t, const engine_row *e, double *d2) {
    const size_t k = (size_t)t->head_size, head_at = (size_t)e->x * k;
    const double half = t->half_epsilon;
    double sum = 0.0;
    size_t h = 0;
    int32_t i0, i;
    for (i0 = 0; i0 < t->n_outputs; i0 += SCAN_CHUNK) {
        const int32_t i1 = t->n_outputs - i0 > SCAN_CHUNK ? i0 + SCAN_CHUNK : t->n_outputs;
        ldp_distance_sq_block(t, &e->x, 1, t->outputs + i0, i1 - i0, t->n_outputs - i0, d2);
        for (i = i0; i < i1; i++) {
            const int32_t y = t->outputs[i];
            const double d = d2[i - i0];
            while (h < k && ldp_head_id(t, head_at + h) < y) h++;
            if (h < k && ldp_head_id(t, head_at + h) == y) continue;
            sum += exp(-half * ((d > 0.0 ? sqrt(d) : 0.0) - e->own));
        }
    }
    return sum;
}

static int engine_finish(const ldp_bundle *b, const engine_row *e, double *d2) {
    const ldp_santext_table *t = &b->table;
    size_t j;
    for (j = 0; j < (size_t)n_groups(t); j++) { /* the cluster bound at each group's nearest */
        const double d = e->near_d[j];
        if (e->near_y[j] < 0) continue; /* no tail output in this group */
        if (!(ldp_tail_exponent(t, e->x, e->near_y[j], d > 0.0 ? sqrt(d) : 0.0) >= 0.0)) return -1;
    }
    /* the bound from below shows the rate within the maximum (no slack: the exact sum, within
     * rounding of it, would too), or the exact sum decides */
    if (e->sum_tail && 1.0 / (e->head_sum + e->sum) > b->verbatim_max &&
        above_stated_max(b, 1.0 / (e->head_sum + tail_sum_exact(t, e, d2))))
        return -1;
    return 1;
}

/* Scratch of check_engine_rows: the squared distances of a block to a chunk of outputs, and
 * per row its head positions and nearest tail output per cluster. */
typedef struct {
    double *d2;       /* [LDP_DIST_BLOCK][SCAN_CHUNK] */
    double *near_d;   /* [LDP_DIST_BLOCK][groups] */
    int32_t *near_y;  /* [LDP_DIST_BLOCK][groups] */
    int32_t *skip;    /* [LDP_DIST_BLOCK][K] */
    double *pairs;    /* CusText's: max(K, C) pairs (weights and similarities) */
} row_scratch;

static int scratch_alloc(const ldp_bundle *b, row_scratch *s) {
    const size_t k = (size_t)b->table.head_size, c = (size_t)n_groups(&b->table);
    const size_t blk = LDP_DIST_BLOCK;
    s->d2 = (double *)malloc(blk * SCAN_CHUNK * sizeof(double));
    s->near_d = (double *)malloc(blk * c * sizeof(double));
    s->near_y = (int32_t *)malloc(blk * c * sizeof(int32_t));
    s->skip = (int32_t *)malloc(blk * (k > 0 ? k : 1) * sizeof(int32_t));
    s->pairs = (double *)malloc(2u * (k > c ? k : c) * sizeof(double));
    return s->d2 && s->near_d && s->near_y && s->skip && s->pairs ? LDP_OK : LDP_E_NOMEM;
}

static void scratch_free(row_scratch *s) {
    free(s->d2);
    free(s->near_d);
    free(s->near_y);
    free(s->skip);
    free(s->pairs);
    memset(s, 0, sizeof *s);
}

/* The engine law of rows xs[0..n) (n <= LDP_DIST_BLOCK): verdict[i] 1 right, -1 refused. */
static void check_engine_rows(const ldp_bundle *b, const int32_t *xs, size_t n, double tol, row_scratch *s,
                              int *verdict) {
    const ldp_santext_table *t = &b->table;
    const int32_t *order = scan_order(t);
    const size_t k = (size_t)t->head_size, c = (size_t)n_groups(t);
    engine_row rows[LDP_DIST_BLOCK];
    int32_t live[LDP_DIST_BLOCK], seg_at[SCAN_CHUNK + 1], seg_c[SCAN_CHUNK], cur = 0, end = group_end(t, 0);
    size_t i, n_live = 0, at[LDP_DIST_BLOCK];
    int32_t i0;
    for (i = 0; i < n; i++) {
        engine_row *e = &rows[i];
        e->x = xs[i];
        e->skip = s->skip + i * k;
        e->near_d = s->near_d + i * c;
        e->near_y = s->near_y + i * c;
        verdict[i] = engine_head(b, e, tol);
        if (verdict[i] > 0) {
            at[n_live] = i;
            live[n_live++] = xs[i];
        }
    }
    if (n_live == 0) return;
    for (i0 = 0; i0 < t->n_outputs; i0 += SCAN_CHUNK) {
        const int32_t i1 = t->n_outputs - i0 > SCAN_CHUNK ? i0 + SCAN_CHUNK : t->n_outputs;
        size_t n_seg = 0;
        int32_t p = i0;
        while (p < i1) { /* the groups' runs in [i0, i1) (a group may be empty) */
            while (end <= p) end = group_end(t, ++cur);
            seg_at[n_seg] = p;
            seg_c[n_seg++] = cur;
            p = end < i1 ? end : i1;
        }
        seg_at[n_seg] = i1;
        ldp_distance_sq_block(t, live, (int)n_live, order + i0, i1 - i0, t->n_outputs - i0, s->d2);
        for (i = 0; i < n_live; i++)
            engine_scan(t, &rows[at[i]], s->d2 + i * (size_t)(i1 - i0), i0, i1, seg_at, seg_c, n_seg);
    }
    for (i = 0; i < n_live; i++) {
        verdict[at[i]] = engine_finish(b, &rows[at[i]], s->d2);
        /* a right row's refined bounds come with its check: each cell's nearest, found above */
        if (verdict[at[i]] > 0 && t->refined != NULL) (void)ldp_refine_row(t, rows[at[i]].x, rows[at[i]].near_d);
    }
}

/* The whole check of rows xs[0..n) (valid inputs, distinct) for their mechanism: each verdict
 * stored in row_state (1 right, 2 refused). Rows on the SanText engine (SanText, TEM) share
 * one pass over the outputs per LDP_DIST_BLOCK rows. LDP_OK, or LDP_E_PARAMETER_MISMATCH with
 * *bad the first refused row in xs's order. */
static int check_rows_now(const ldp_bundle *b, const int32_t *xs, size_t n, row_scratch *s, int32_t *bad) {
    int verdict[LDP_DIST_BLOCK];
    size_t i, j;
    *bad = -1;
    for (i = 0; i < n; i += LDP_DIST_BLOCK) {
        const size_t m = n - i < LDP_DIST_BLOCK ? n - i : LDP_DIST_BLOCK;
        double tol;
        switch (b->mechanism) {
        case LDP_MECH_CUSTEXT:
        case LDP_MECH_CUSTEXT_PLUS:
            /* a stop word (group -1) is kept, never drawn: nothing to check */
            tol = 2.0 * ldp_checked_tolerance(b, 1.0);
            for (j = 0; j < m; j++)
                verdict[j] = check_custext_row(b, xs[i + j], tol, s->pairs) < 0 ||
                                     (!isnan(b->verbatim_max) &&
                                      above_stated_max(b, custext_verbatim_rate(b, xs[i + j], s->pairs)))
                                 ? -1
                                 : 1;
            break;
        case LDP_MECH_TEM:
            check_engine_rows(b, xs + i, m, 2.0 * ldp_checked_tolerance(b, b->d_max), s,
                              verdict);
            tol = 2.0 * ldp_checked_tolerance(b, fmin(b->gamma, b->d_max));
            for (j = 0; j < m; j++)
                if (verdict[j] > 0 &&
                    (check_tem_far(b, xs[i + j], tol) != LDP_OK ||
                     (!isnan(b->verbatim_max) && above_stated_max(b, tem_verbatim_rate(b, xs[i + j])))))
                    verdict[j] = -1;
            break;
        default:
            check_engine_rows(b, xs + i, m, 2.0 * ldp_checked_tolerance(b, b->d_max), s,
                              verdict);
        }
        for (j = 0; j < m; j++) ROW_STATE_STORE(b->row_state + xs[i + j], verdict[j] > 0 ? 1 : 2);
        for (j = 0; j < m; j++)
            if (verdict[j] < 0) {
                *bad = xs[i + j];
                return LDP_E_PARAMETER_MISMATCH;
            }
    }
    return LDP_OK;
}

static int cmp_int32(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Before a call's first draw: the rows of xs whose verdict is unknown are checked now, together
 * (distinct, in id order), the rows of a 300-word document in a few passes over the outputs. */
int ldp_check_rows_of(const ldp_bundle *b, const int32_t *xs, size_t n) {
    row_scratch s;
    int32_t *todo, bad;
    size_t i, m = 0, u = 0;
    int rc;
    if (b->row_state == NULL) return LDP_OK; /* not a bundle on the SanText engine */
    for (i = 0; i < n; i++) { /* the common case: every row checked */
        const uint8_t v = ROW_STATE_LOAD(b->row_state + xs[i]);
        if (v == 2) return LDP_E_PARAMETER_MISMATCH;
        m += v != 1;
    }
    if (m == 0) return LDP_OK;
    todo = (int32_t *)malloc(m * sizeof(int32_t));
    if (todo == NULL) return LDP_E_NOMEM;
    for (i = 0, m = 0; i < n; i++)
        if (ROW_STATE_LOAD(b->row_state + xs[i]) != 1) todo[m++] = xs[i];
    qsort(todo, m, sizeof(int32_t), cmp_int32);
    for (i = 0; i < m; i++) { /* distinct, and not an input (never drawn): right */
        if (i > 0 && todo[i] == todo[i - 1]) continue;
        if (!b->valid_input[todo[i]]) ROW_STATE_STORE(b->row_state + todo[i], 1);
        else todo[u++] = todo[i];
    }
    memset(&s, 0, sizeof s);
    rc = u == 0 ? LDP_OK : scratch_alloc(b, &s);
    if (rc == LDP_OK && u > 0) rc = check_rows_now(b, todo, u, &s, &bad);
    scratch_free(&s);
    free(todo);
    return rc;
}

int ldp_bundle_check_rows(const ldp_bundle *b, int64_t first, int64_t count, int64_t *bad_row) {
    row_scratch s;
    int32_t todo[4 * LDP_DIST_BLOCK], bad;
    int64_t x;
    size_t m = 0;
    int rc = LDP_OK;
    if (bad_row != NULL) *bad_row = -1;
    if (b == NULL || first < 0 || count < 0) return LDP_E_ARG;
    if (b->row_state == NULL) return LDP_OK;
    if (first > b->table.n_rows) first = b->table.n_rows;
    if (count > b->table.n_rows - first) count = b->table.n_rows - first;
    memset(&s, 0, sizeof s);
    if (scratch_alloc(b, &s) != LDP_OK) {
        scratch_free(&s);
        return LDP_E_NOMEM;
    }
    /* in id order, a block at a time: the first refused row is the lowest */
    for (x = first; x <= first + count && rc == LDP_OK; x++) {
        const int end = x == first + count;
        if (!end) {
            const uint8_t v = ROW_STATE_LOAD(b->row_state + x);
            if (v == 2) {
                rc = check_rows_now(b, todo, m, &s, &bad);
                if (rc == LDP_OK) { /* the earlier rows right: x is the first refused */
                    bad = (int32_t)x;
                    rc = LDP_E_PARAMETER_MISMATCH;
                }
                break;
            }
            if (v == 1) continue;
            if (!b->valid_input[x]) {
                ROW_STATE_STORE(b->row_state + x, 1);
                continue;
            }
            todo[m++] = (int32_t)x;
        }
        if (m == sizeof todo / sizeof todo[0] || (end && m > 0)) {
            rc = check_rows_now(b, todo, m, &s, &bad);
            m = 0;
        }
    }
    if (rc == LDP_E_PARAMETER_MISMATCH && bad_row != NULL) *bad_row = bad;
    scratch_free(&s);
    return rc;
}
