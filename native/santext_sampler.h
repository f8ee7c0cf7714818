/* Exact SanText / SanText+ sampler over a bundle's tables (Yue et al. 2021, "Differential Privacy
 * for Text Analytics via Natural Text Sanitization", as presented in Yue 2023, "Data Synthesis:
 * Boosting Utility and Privacy in NLP", PhD thesis, §2.4).
 * Table layout: sdk/ldptext/santext_tables.py.
 *
 * Per input row x the bundle stores a "head" of K candidate outputs and one "tail" slot standing for
 * every other output. A proposal slot is drawn from an integer alias table, then accepted with
 * probability exp(-gamma):
 *   head slot j -> y = head_ids[x][j],  gamma = accept_gamma[x][j];
 *   tail slot   -> y uniform over outputs \ head(x),
 *                  gamma = accept_gamma[x][K] + eps/2 * (d(x, y) - tail_floor[x]),
 * and on rejection everything restarts. Precompute chose accept_gamma so that the accepted output has
 * Pr[y] ∝ exp(-eps * d(x, y) / 2) exactly (sdk/ldptext/alias.py, precompute/ldptext_precompute/santext/build.py).
 *
 * Clustered tail: the outputs fall into C public clusters (tail_cluster), and for each row x and
 * cluster c, q = cluster_gamma[x][c] satisfies q/32 <= eps/2 * (d(x, y) - tail_floor[x]) for every
 * tail output y of cluster c. The tail acceptance is then split into two trials: before the
 * distance, keep with probability KEEP[q] / 2^32 (one random word; KEEP[q] = ceil(2^32 e^(-q/32)));
 * after it, accept with probability exp(-(accept_gamma[x][K] + eps/2 * (d(x, y) - tail_floor[x]) -
 * LOG[q])), LOG[q] = -ln(KEEP[q] / 2^32) rounded down (cluster_bounds.h). The product is the
 * one-step probability above (up to LOG's rounding, < 2^-49, in the stated tolerance), so the output
 * distribution is the same, but most far candidates are refused without reading their embedding.
 * q = 0 is the plain tail (C = 1 with zero cluster_gamma: a bundle without them). With C > 1 the
 * second trial itself is made the same way (one word against KEEP[floor(32 e)], then the exact
 * trial of the rest of e): one more rounding of LOG, < 2^-49 relative, which the builds that write
 * clusters state in their tolerance.
 *
 * Cluster order (C > 1, ldp_santext_cluster_order): the tail candidate is the output at a uniform
 * position of the outputs sorted by cluster, so its cluster (a byte per position) decides the first
 * trial before its id is read; a position whose cluster holds an output of row x's head
 * (head_clusters[x]) reads the id first and is drawn again if it is a head member. That is the same
 * uniform draw over outputs \ head(x) and the same trial, so the same distribution; which output a
 * given random word selects differs from id order, which a bundle without clusters keeps.
 *
 * Skip rows (derived with the cluster order where the compiler has 128-bit integers): a row whose
 * cluster trial refuses at least two of three tail positions on average draws no refused round.
 * Of the rounds above, the first that is not refused is a head proposal or a kept tail candidate,
 * with odds H : T S / (n_T 2^32) (H, T the head and tail masses, n_T the tail positions, S their
 * sum of KEEP[q]); that Bernoulli is decided at once (64 bits of its exact threshold stored per
 * row, the long division continued on a tie), and a kept candidate is drawn with weight KEEP[q]:
 * a cluster by its weight N_c KEEP[q] (cumulative weights per row, computed when a batch first
 * meets the row), then a uniform position in it, a head member drawn again. The candidate then
 * takes the same second trial. The same distribution, with other draws than the rounds' for a
 * given seed.
 *
 * Refined rows (ldp_refine_row below): each cluster is split into cells at open, and a row whose
 * check found its cells' nearest outputs far enough above its cluster bounds samples with a bound
 * per cell instead (the first trial, the skip odds and the cluster weights from those): any lower
 * bound leaves the two-trial product, and so the law, as it is. */
#ifndef LDPTEXT_SANTEXT_SAMPLER_H
#define LDPTEXT_SANTEXT_SAMPLER_H

#include <stddef.h>
#include <stdint.h>
#include "chacha20.h"

typedef struct {
    int32_t n_rows;              /* |V|: rows of embeddings and of every per-row table */
    int32_t dim;                 /* embedding dimension m */
    int32_t head_size;           /* K; the alias tables have K + 1 slots, slot K is the tail */
    int32_t n_outputs;           /* |O|, the output domain (V, or V_S for SanText+) */
    const int8_t *emb_q;         /* [n_rows][dim] int8 embedding codes */
    const float *emb_scale;      /* [n_rows]: embedding of row r is emb_scale[r] * emb_q[r] */
    const int32_t *emb_sqnorm;   /* [n_rows]: sum of emb_q[r][i]^2 (exact) */
    const int32_t *outputs;      /* [n_outputs] token ids of the output domain */
    const int32_t *head_ids;     /* [n_rows][K], ascending within a row */
    const uint32_t *alias_threshold; /* [n_rows][K+1]: keep slot j if u32 < threshold */
    const uint16_t *alias_index;     /* [n_rows][K+1]: otherwise take this slot */
    const double *accept_gamma;      /* [n_rows][K+1], >= 0 */
    const double *tail_floor;        /* [n_rows]: lower bound of d(x, y) over the tail */
    const uint8_t *keep_row;     /* [n_rows]: 1 = non-sensitive input of SanText+ (kept w.p. 1-p) */
    int32_t n_clusters;          /* C in [1, 256]: tail clusters */
    const uint8_t *tail_cluster; /* [n_rows]: cluster of each row (< C; only outputs are drawn) */
    const uint8_t *cluster_gamma;/* [n_rows][C]: tail exponent bound before the distance, in 1/32 */
    const uint64_t *tail_mass;   /* [n_rows]: realised alias mass of the tail slot K, in 2^-32 units
                                  * of a slot (derived: ldp_santext_tail_masses) */
    /* The outputs in cluster order, for tail draws that read a candidate's id only once it passed
     * its cluster's trial (derived: ldp_santext_cluster_order; NULL: the draw reads outputs). */
    const int32_t *sorted_outputs;   /* [n_outputs]: outputs grouped by tail cluster, ascending within */
    const uint8_t *sorted_cluster;   /* [n_outputs]: tail_cluster of sorted_outputs[i] */
    const uint64_t *head_clusters;   /* [n_rows]: bit c % 64 set if row's head has an output of cluster c */
    const uint32_t *cluster_start;   /* [C + 1]: first position of each cluster in sorted_outputs */
    /* Rows whose tail candidates are mostly refused by their cluster's trial skip the refused
     * rounds (derived with the cluster order; NULL where the compiler has no 128-bit integers):
     * skip_row[x] = 1 for such a row, skip_p[x] = floor(2^64 P(a round's first success is a kept
     * tail candidate)). */
    const uint64_t *skip_p;          /* [n_rows] */
    const uint8_t *skip_row;         /* [n_rows] */
    /* Derived with the cluster order: 1 where at least 1/16 of the rows propose their head often
     * enough for the sampler to ask for head rows ahead of their tokens (a hint: same draws; 0
     * where the target has no prefetch instruction). */
    int32_t look_ahead;
    /* Cells (derived with the cluster order): each cluster's outputs split by their nearest of
     * cells_per_cluster pivots, the positions sorted by (cluster, cell, id); 0 cells: none. */
    int32_t n_cells;                 /* C * cells_per_cluster */
    int32_t cells_per_cluster;
    const uint32_t *cell_start;      /* [n_cells + 1]: first position of each cell */
    const uint16_t *sorted_cell;     /* [n_outputs]: cell of sorted_outputs[i] */
    const uint16_t *cell_of;         /* [n_rows]: cell of each output (0 for the other rows) */
    /* Refined bounds (ldp_refine_row): per row, a bound per cell instead of per cluster; NULL:
     * none. Mutable behind a const table: rows are added, never changed. */
    struct ldp_refine_store *refined;
    double half_epsilon;         /* eps / 2 */
    double p;                    /* SanText+ probability of sanitizing a non-sensitive token */
    /* A compact bundle's narrow arrays, read where they are stored (no widened copy): when one of
     * these is set, it replaces the wide array above (which is then NULL). Every narrow value
     * widens exactly (uint16 -> int32, uint8 -> uint16, float32 -> float64), so the sampler draws
     * the same outputs from either form. Read them through the accessors below. */
    const uint16_t *head_ids_u16;    /* [n_rows][K] instead of head_ids */
    const uint8_t *alias_index_u8;   /* [n_rows][K+1] instead of alias_index */
    const float *accept_gamma_f32;   /* [n_rows][K+1] instead of accept_gamma */
} ldp_santext_table;

/* Element i (row-major index) of head_ids, alias_index and accept_gamma, in whichever form the
 * table holds. */
static inline int32_t ldp_head_id(const ldp_santext_table *t, size_t i) {
    return t->head_ids_u16 != NULL ? (int32_t)t->head_ids_u16[i] : t->head_ids[i];
}
static inline uint32_t ldp_alias_slot(const ldp_santext_table *t, size_t i) {
    return t->alias_index_u8 != NULL ? (uint32_t)t->alias_index_u8[i] : (uint32_t)t->alias_index[i];
}
static inline double ldp_accept_gamma(const ldp_santext_table *t, size_t i) {
    return t->accept_gamma_f32 != NULL ? (double)t->accept_gamma_f32[i] : t->accept_gamma[i];
}
/* Row x of head_ids (K ids), alias_index and accept_gamma (K + 1 slots), widened into dst. */
void ldp_table_head_row(const ldp_santext_table *t, int32_t x, int32_t *dst);
void ldp_table_alias_row(const ldp_santext_table *t, int32_t x, uint16_t *dst);
void ldp_table_gamma_row(const ldp_santext_table *t, int32_t x, double *dst);

/* Most tail clusters (cluster ids are uint8); cluster_gamma counts units of 1/32 (cluster_bounds.h). */
#define LDP_MAX_CLUSTERS 256

enum {
    LDP_SAMPLE_OK = 0,
    LDP_SAMPLE_ERR_ROW = 1,        /* input id outside [0, n_rows) */
    LDP_SAMPLE_ERR_INVARIANT = 2   /* a table invariant is violated (negative gamma, empty tail) */
};

/* The value checks every table must pass before sampling (ids used as indices in range, outputs
 * and head rows strictly increasing, alias slots <= K, gammas >= 0 and not NaN, scales and tail
 * floors finite and >= 0, emb_sqnorm equal to the codes' squared norms, 1 <= C <= 256 and every
 * tail_cluster < C). Shapes are the caller's
 * job. Returns LDP_SAMPLE_OK or LDP_SAMPLE_ERR_INVARIANT. Shared by the Python extension and
 * libldptext. */
int ldp_santext_table_check(const ldp_santext_table *t);

/* Exact proposal mass of slot `slot` of one alias row (alias.py realised_masses), in 2^-32 units of
 * a slot: thr[slot] + sum over j with alias[j] = slot of (2^32 - thr[j]). */
uint64_t ldp_realised_mass(const uint32_t *thr, const uint16_t *alias, size_t slots, size_t slot);
/* ldp_realised_mass of slot `slot` of row x of the table, in either alias form. */
uint64_t ldp_table_realised_mass(const ldp_santext_table *t, int32_t x, size_t slot);
/* The realised mass of every row's tail slot K, for t->tail_mass. The table must have passed
 * ldp_santext_table_check. */
void ldp_santext_tail_masses(const ldp_santext_table *t, uint64_t *out);

/* Bytes of the cluster order of table t, and building it into buf (malloc alignment) and pointing
 * t's sorted_outputs, sorted_cluster, head_clusters, cluster_start, skip_p and skip_row at it. The
 * table must have passed ldp_santext_table_check and have its tail_mass. */
size_t ldp_santext_cluster_order_size(const ldp_santext_table *t);
void ldp_santext_cluster_order(ldp_santext_table *t, void *buf);
/* ldp_santext_cluster_order in three steps, for a loader that derives the rows' part on another
 * thread while it checks other things: the order and its cells (t's sorted_outputs, sorted_cluster,
 * cluster_start and cells; what a row check reads), then each row's head-cluster mask and skip
 * threshold for rows [first, end) (disjoint ranges may run at once; nothing in t changes), then
 * pointing t's head_clusters, skip_p and skip_row at them. No draw before the third step. */
void ldp_santext_cluster_sort(ldp_santext_table *t, void *buf);
void ldp_santext_cluster_rows(const ldp_santext_table *t, void *buf, int32_t first, int32_t end);
void ldp_santext_cluster_rows_done(ldp_santext_table *t, void *buf);

/* Cells per cluster of the cluster order (fewer where C * 8 would exceed 2048: cell ids are uint16). */
#define LDP_CELLS_PER_CLUSTER 8

/* Refined bounds: the cluster bound cluster_gamma[x][c] holds for every tail output of cluster c, so
 * at wide eps a kept candidate is often far above it and refused by its distance (GloVe-50k at eps
 * = 3: 9 distances per tail draw). Once a row's distances to every output are known (libldptext's
 * row check computes them anyway; ldp_refine_rows for other callers), the bound of each cell, its
 * nearest tail output's, is stored for the row: q_cell >= q_cluster, every one still a lower
 * bound of the second exponent as the sampler computes it, so the two-trial product and the
 * output law are unchanged (santext_sampler.c) while far cells are refused before their
 * distance. A row is refined only where its cells keep at most 3/4 of the tail weight its
 * clusters keep (so that a tail draw computes at least a quarter fewer distances); once, never
 * changed; a store holds at most max_bytes of rows, the others keep their cluster bounds. A token
 * reads its row's bounds once, at its start. */
typedef struct ldp_refine_store ldp_refine_store;
/* The store libldptext and the Python extension give a table: 16 MiB (8,000 GloVe-50k rows of 128
 * clusters, 16,000 MiniLM rows of 64). */
#define LDP_REFINE_MAX_BYTES ((size_t)16 << 20)
/* A store for table t's refined rows (t must have cells), of at most max_bytes; NULL without
 * cells or memory. Attach it as t->refined; free it after the last draw. */
ldp_refine_store *ldp_refine_store_new(const ldp_santext_table *t, size_t max_bytes);
void ldp_refine_store_free(ldp_refine_store *s);
/* Refines row x from d2min[c] (n_cells values): the smallest squared distance (as
 * ldp_distance_sq_block gives it) from x to a tail output of cell c, +inf where the cell has
 * none. 1 stored, 0 not (no store, full, refined before, cells not worth it, or a cluster bound
 * that does not hold: the row check refuses such a row). Thread-safe. */
int ldp_refine_row(const ldp_santext_table *t, int32_t x, const double *d2min);
/* Refines each row of xs[0..n) that is not yet (one pass over the outputs per LDP_DIST_BLOCK
 * rows): for callers whose rows no check has refined. LDP_SAMPLE_OK, or _ERR_ROW for an id out
 * of range (nothing refined). */
int ldp_refine_rows(const ldp_santext_table *t, const int32_t *xs, size_t n);
/* Row x's refined bound of cell c (units of 1/32), or -1 where the row is not refined. */
int ldp_refined_bound(const ldp_santext_table *t, int32_t x, int32_t c);
/* Row x's refined skip flag (1 it skips its refused rounds, 0 not), or -1 where it is not refined. */
int ldp_refined_skip(const ldp_santext_table *t, int32_t x);

#if defined(__SIZEOF_INT128__)
/* Bernoulli(r / n) for 0 <= r < n < 2^96: the lazily drawn uniform U against r / n's binary digits,
 * 32 at a time (exact). The skip rows' rare ties end here (santext_sampler.c skip_tail_first). */
int ldp_fraction_trial(ldp_chacha *g, unsigned __int128 r, unsigned __int128 n);
#endif

/* Squared norm of n int8 codes, exact in int32 for n <= LDP_SQNORM_INT32_MAX_DIM (128^2 * 131,071
 * < 2^31); SSE2 and portable paths give the same value. */
#define LDP_SQNORM_INT32_MAX_DIM 131071
int32_t ldp_int8_sqnorm(const int8_t *q, int32_t n);

/* Distance between rows a and b of the int8 metric embedding, exact up to a few roundings:
 * |d^2 - true d^2| <= 8 * 2^-53 * (|a|^2 + |b|^2) (precompute's tail floors leave that margin). */
double ldp_distance(const ldp_santext_table *t, int32_t a, int32_t b);
/* The squared distance ldp_distance takes the root of (it may be <= 0 by rounding, where the
 * distance is 0), from row x to every output: out[i] for outputs[i], so that ldp_distance(t, x,
 * outputs[i]) == sqrt(out[i]) where positive (one inlined pass: the per-row reference the
 * cross check holds ldp_distance_sq_block to). */
void ldp_distance_sq_outputs(const ldp_santext_table *t, int32_t x, double *out);
/* The same squared distances from each of the rows xs[0..nx) (1 <= nx <= LDP_DIST_BLOCK) to the
 * rows ys[0..ny) (outputs): out[r * ny + j] for xs[r] and ys[j], bit for bit
 * ldp_distance_sq_outputs's. Each output's codes are read once for all nx rows: the check of a
 * call's new rows (lib/check.c) is one pass over the outputs per LDP_DIST_BLOCK rows.
 * ys[ny..readable) may be read too (the rows that follow, asked for ahead of their turn). */
#define LDP_DIST_BLOCK 32
void ldp_distance_sq_block(const ldp_santext_table *t, const int32_t *xs, int nx, const int32_t *ys, int32_t ny,
                           int32_t readable, double *out);
/* The exponent of the second tail trial of tail candidate y of row x at distance d, exactly as the
 * sampler computes it: eps/2 (d - tail_floor[x]) - LOG[cluster_gamma[x][c(y)]] + accept_gamma[x][K].
 * The sampler refuses a negative one; libldptext's row check (lib/check.c) reads it for every
 * tail output of a row before the row's first draw. */
double ldp_tail_exponent(const ldp_santext_table *t, int32_t x, int32_t y, double d);

/* Samples n ids, each from its row's law with its own draws (outputs independent); on error returns
 * the code and stores the failing position in *failed_at. An id outside [0, n_rows) is found
 * before any draw. Which draws of g go to which token depends on n (a long call takes its tokens
 * grouped by row: santext_sampler.c), not the law. */
int ldp_santext_sample_many(ldp_chacha *g, const ldp_santext_table *t, const int32_t *xs,
                            int32_t *ys, size_t n, size_t *failed_at);

#endif
