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

/* A valid row (sensitive: also not kept in the clear) drawn uniformly, by rejection over [0, V),
 * from OS randomness; -1 if that fails after `tries` draws (or the OS generator fails). */
static int32_t random_row(const ldp_bundle *b, int sensitive, int tries) {
    const ldp_santext_table *t = &b->table;
    for (; tries > 0; tries--) {
        uint64_t r;
        if (ldp_os_random((uint8_t *)&r, sizeof r) != 0) return -1;
        /* the bias of a modulo over 2^64 is below 2^-32 for V < 2^31: irrelevant to which rows a
         * check reads */
        r %= (uint64_t)t->n_rows;
        if (b->valid_input[r] && !(sensitive && t->keep_row[r])) return (int32_t)r;
    }
    return -1;
}

static int32_t random_valid_row(const ldp_bundle *b) { return random_row(b, 0, 4096); }

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

/* 1 if the sensitive row x's verbatim rate is above level, 0 if it is not or is left undecided
 * (*exact: computations over the outputs still allowed). */
static int rate_above(const ldp_bundle *b, int32_t x, double level, int *exact) {
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
    if (1.0 / head_sum <= level) return 0;
    if (1.0 / (head_sum + (double)(t->n_outputs - (int32_t)k) * exp(-half * fmax(t->tail_floor[x] - own, 0.0))) >
        level)
        return 1;
    if (*exact <= 0) return 0;
    (*exact)--;
    for (i = 0; i < t->n_outputs; i++) sum += exp(-half * (ldp_distance(t, x, t->outputs[i]) - own));
    return 1.0 / sum > level;
}

static double tem_verbatim_rate(const ldp_bundle *b, int32_t x);
static double custext_verbatim_rate(const ldp_bundle *b, int32_t x, double *sim);

/* LDP_OK, or LDP_E_PARAMETER_MISMATCH when too many random sensitive rows lie above the stated
 * median (LDP_E_RANDOM if the OS generator fails). SanText: the bounds above; TEM and CusText: the
 * row's exact rate (one pass over the outputs, or over the row's output set). */
static int check_stated_median(const ldp_bundle *b) {
    const int custext = b->mechanism == LDP_MECH_CUSTEXT || b->mechanism == LDP_MECH_CUSTEXT_PLUS;
    size_t i, n = 0, above = 0;
    int exact = MEDIAN_EXACT_ROWS;
    double *sim = NULL;
    if (isnan(b->verbatim_median)) return LDP_OK;
    if (custext && (sim = (double *)malloc((size_t)b->table.head_size * sizeof *sim)) == NULL)
        return LDP_E_NOMEM;
    for (i = 0; i < MEDIAN_ROWS; i++) {
        int32_t x = random_row(b, 1, 65536);
        if (x < 0) break; /* no sensitive row: nothing is released unchanged by the rule */
        n++;
        if (b->mechanism == LDP_MECH_TEM) above += tem_verbatim_rate(b, x) > b->verbatim_median;
        else if (custext) above += custext_verbatim_rate(b, x, sim) > b->verbatim_median;
        else above += (size_t)rate_above(b, x, b->verbatim_median, &exact);
    }
    free(sim);
    return n > 0 && above >= binomial_threshold(n) ? LDP_E_PARAMETER_MISMATCH : LDP_OK;
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
    if (check_stated_median(b) != LDP_OK) return LDP_E_PARAMETER_MISMATCH;
    /* |log P_realised - log P_formula| <= tolerance per probability (the manifest's statement), so
     * a difference of two by twice that, plus the float rounding of eps * d / 2 */
    return check_head_ratios(b, rows, (size_t)n,
                             2.0 * b->tolerance + 1e-12 * (1.0 + b->epsilon * b->d_max));
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
    tol = 2.0 * b->tolerance + 1e-12 * (1.0 + b->epsilon * fmin(b->gamma, b->d_max));
    if (check_d_max(b, rows[0]) != LDP_OK || check_d_max(b, rows[n - RANDOM_ROWS]) != LDP_OK ||
        check_tem_far(b, rows[0], tol) != LDP_OK ||
        check_tem_far(b, rows[n - RANDOM_ROWS], tol) != LDP_OK)
        return LDP_E_PARAMETER_MISMATCH;
    if (check_head_ratios(b, rows, (size_t)n, 2.0 * b->tolerance + 1e-12 * (1.0 + b->epsilon * b->d_max)) !=
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
    return rate > b->verbatim_max + 1e-9 * fmax(1.0, b->verbatim_max) + 1e-12;
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
    const double tol = 2.0 * b->tolerance + 1e-12 * (1.0 + b->epsilon);
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
 * from the formula is at most the stated largest verbatim rate. One pass over O; the rate's sum
 * over O only when the head's own bound (the head's terms alone give P(x -> x) at most
 * e^(-eps d(x,x)/2) / sum over the head) does not already show it. 1 right, -1 refused. */
static int check_engine_row(const ldp_bundle *b, int32_t x, double tol, double *nearest, double *dist2) {
    const ldp_santext_table *t = &b->table;
    const size_t k = (size_t)t->head_size, slots = k + 1, head_at = (size_t)x * k;
    const double half = t->half_epsilon, floor_x = t->tail_floor[x];
    const uint64_t n_tail = (uint64_t)t->n_outputs - (uint64_t)k; /* head ⊂ O (bundle.c) */
    /* SanText's rate (TEM's own, truncated, is checked by check_one_row) */
    const int rate_stated = !isnan(b->verbatim_max) && !t->keep_row[x] &&
                            (b->mechanism == LDP_MECH_SANTEXT || b->mechanism == LDP_MECH_SANTEXT_PLUS);
    double rmin = INFINITY, rmax = -INFINITY, own = INFINITY, head_sum = 0.0, sum = 0.0;
    int sum_tail;
    size_t j, h = 0;
    int32_t i;
    for (j = 0; j < k; j++) {
        const int32_t y = ldp_head_id(t, head_at + j);
        const uint64_t mass = ldp_table_realised_mass(t, x, j);
        const double d = ldp_distance(t, x, y);
        double r;
        if (mass == 0) return -1; /* an output the formula gives mass, never drawn */
        r = log((double)mass) - ldp_accept_gamma(t, (size_t)x * slots + j) + half * d;
        rmin = fmin(rmin, r);
        rmax = fmax(rmax, r);
        if (y == x) own = d;
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
    sum_tail = 0;
    if (rate_stated && own != INFINITY) {
        for (j = 0; j < k; j++)
            head_sum += exp(-half * (ldp_distance(t, x, ldp_head_id(t, head_at + j)) - own));
        sum_tail = 1.0 / head_sum > b->verbatim_max;
    }
    /* The tail's second trial: its exponent grows with d (every step of ldp_tail_exponent is a
     * monotone rounding), so in each cluster the nearest tail output has the smallest; find it by
     * the squared distance (sqrt is monotone), then take the exponent of each cluster's nearest
     * exactly as the sampler computes it. nearest: C (squared distance, output) pairs. */
    for (j = 0; j < (size_t)t->n_clusters; j++) nearest[2 * j] = INFINITY, nearest[2 * j + 1] = -1.0;
    ldp_distance_sq_outputs(t, x, dist2);
    for (i = 0; i < t->n_outputs; i++) {
        const int32_t y = t->outputs[i];
        const double d2 = dist2[i];
        while (h < k && ldp_head_id(t, head_at + h) < y) h++;
        if (h < k && ldp_head_id(t, head_at + h) == y) continue;
        if (d2 < nearest[2 * t->tail_cluster[y]]) {
            nearest[2 * t->tail_cluster[y]] = d2;
            nearest[2 * t->tail_cluster[y] + 1] = (double)y;
        }
        if (sum_tail) sum += exp(-half * ((d2 > 0.0 ? sqrt(d2) : 0.0) - own));
    }
    for (j = 0; j < (size_t)t->n_clusters; j++) {
        const double d2 = nearest[2 * j];
        if (nearest[2 * j + 1] < 0.0) continue; /* no tail output in this cluster */
        if (!(ldp_tail_exponent(t, x, (int32_t)nearest[2 * j + 1], d2 > 0.0 ? sqrt(d2) : 0.0) >= 0.0))
            return -1;
    }
    if (sum_tail && 1.0 / (head_sum + sum) > b->verbatim_max + 1e-9 * fmax(1.0, b->verbatim_max) + 1e-12)
        return -1;
    return 1;
}

/* Scratch for check_one_row: max(K, C) pairs of doubles (CusText's weights and similarities; the
 * tail's nearest output per cluster), then n_outputs doubles (the squared distances of a row). */
static size_t row_scratch_pairs(const ldp_bundle *b) {
    const size_t k = (size_t)b->table.head_size, c = (size_t)b->table.n_clusters;
    return k > c ? k : c;
}
static double *row_scratch(const ldp_bundle *b) {
    return (double *)malloc((2u * row_scratch_pairs(b) + (size_t)b->table.n_outputs) * sizeof(double));
}

/* Row x's whole check for its mechanism: 1 right (or not an input: never drawn), -1 refused.
 * scratch: row_scratch's. */
static int check_one_row(const ldp_bundle *b, int32_t x, double *scratch) {
    double tol;
    if (!b->valid_input[x]) return 1;
    switch (b->mechanism) {
    case LDP_MECH_CUSTEXT:
    case LDP_MECH_CUSTEXT_PLUS:
        /* a stop word (group -1) is kept, never drawn: nothing to check */
        if (check_custext_row(b, x, 2.0 * b->tolerance + 1e-12 * (1.0 + b->epsilon), scratch) < 0) return -1;
        return !isnan(b->verbatim_max) && above_stated_max(b, custext_verbatim_rate(b, x, scratch)) ? -1 : 1;
    case LDP_MECH_TEM:
        tol = 2.0 * b->tolerance + 1e-12 * (1.0 + b->epsilon * b->d_max);
        if (check_engine_row(b, x, tol, scratch, scratch + 2 * row_scratch_pairs(b)) < 0) return -1;
        tol = 2.0 * b->tolerance + 1e-12 * (1.0 + b->epsilon * fmin(b->gamma, b->d_max));
        if (check_tem_far(b, x, tol) != LDP_OK) return -1;
        return !isnan(b->verbatim_max) && above_stated_max(b, tem_verbatim_rate(b, x)) ? -1 : 1;
    default:
        return check_engine_row(b, x, 2.0 * b->tolerance + 1e-12 * (1.0 + b->epsilon * b->d_max), scratch,
                                scratch + 2 * row_scratch_pairs(b));
    }
}


/* Check row x unless its verdict is known; LDP_OK or LDP_E_PARAMETER_MISMATCH. *scratch is
 * allocated on first need (the caller frees it). */
static int check_row_once(const ldp_bundle *b, int32_t x, double **scratch) {
    uint8_t *state = b->row_state + x;
    uint8_t v = ROW_STATE_LOAD(state);
    if (v == 0) {
        if (*scratch == NULL && (*scratch = row_scratch(b)) == NULL) return LDP_E_NOMEM;
        v = check_one_row(b, x, *scratch) > 0 ? 1 : 2;
        ROW_STATE_STORE(state, v);
    }
    return v == 1 ? LDP_OK : LDP_E_PARAMETER_MISMATCH;
}

int ldp_check_rows_of(const ldp_bundle *b, const int32_t *xs, size_t n) {
    double *scratch = NULL;
    size_t i;
    int rc = LDP_OK;
    if (b->row_state == NULL) return LDP_OK; /* not a bundle on the SanText engine */
    for (i = 0; i < n && rc == LDP_OK; i++)
        if (ROW_STATE_LOAD(b->row_state + xs[i]) != 1) rc = check_row_once(b, xs[i], &scratch);
    free(scratch);
    return rc;
}

int ldp_bundle_check_rows(const ldp_bundle *b, int64_t first, int64_t count, int64_t *bad_row) {
    double *scratch = NULL;
    int64_t x;
    int rc = LDP_OK;
    if (bad_row != NULL) *bad_row = -1;
    if (b == NULL || first < 0 || count < 0) return LDP_E_ARG;
    if (b->row_state == NULL) return LDP_OK;
    if (first > b->table.n_rows) first = b->table.n_rows;
    if (count > b->table.n_rows - first) count = b->table.n_rows - first;
    for (x = first; x < first + count && rc == LDP_OK; x++) {
        rc = check_row_once(b, (int32_t)x, &scratch);
        if (rc == LDP_E_PARAMETER_MISMATCH && bad_row != NULL) *bad_row = x;
    }
    free(scratch);
    return rc;
}
