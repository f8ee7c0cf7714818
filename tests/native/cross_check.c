/* Cross-platform check: prints every value the library's randomness and arithmetic produce for
 * fixed seeds, so that builds for different targets can be compared byte for byte
 * (native/Makefile `test-portable` and `test-arm64` compare x86-64 SSE2, x86-64 portable C and
 * aarch64 under qemu). "Same distribution" is checked as "same draws": ChaCha20, the exact
 * samplers and the SanText sampler are deterministic functions of the key, so a platform whose
 * draws differ in one bit would be sampling a different distribution somewhere.
 *
 * Output (stdout, text): the ChaCha20 keystream, uniform integers, exact Bernoulli(exp(-gamma))
 * and the exact discrete Laplace / Gaussian draws, int8 distances (as hex floats: every bit), the
 * SanText sampler on a synthetic table of dimension 50 (so that the 16-code SIMD steps and the
 * scalar remainder both run), and seeded ldp_sanitize on the tiny test bundle. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bundle_writer.h"
#include "chacha20.h"
#include "ldp_internal.h"
#include "ldptext.h"
#include "samplers.h"
#include "santext_sampler.h"

#define V 64
#define DIM 50
#define K 6

static int8_t emb_q[V][DIM];
static float emb_scale[V];
static int32_t emb_sqnorm[V], outputs[V], head_ids[V][K];
static uint32_t alias_threshold[V][K + 1];
static uint16_t alias_index[V][K + 1];
static double accept_gamma[V][K + 1], tail_floor[V];
static uint8_t keep_row[V];
#define C 3
static uint8_t tail_cluster[V], cluster_gamma[V][C];
static uint64_t tail_mass[V];

/* A valid (not SanText-calibrated) table: random codes and scales, head = K outputs after x,
 * random alias slots, gammas in [0, 4), tail floor 0 (every tail gamma >= 0). Every sampler branch
 * runs: alias keep and alias jump, head and tail acceptance, SanText+ keep rows. */
static void synthetic_table(ldp_chacha *g, ldp_santext_table *t) {
    int i, j, c;
    memset(t, 0, sizeof(*t));
    for (i = 0; i < V; i++) {
        int32_t sq = 0;
        for (c = 0; c < DIM; c++) {
            emb_q[i][c] = (int8_t)(ldp_uniform_u32(g, 255) - 127);
            sq += (int32_t)emb_q[i][c] * emb_q[i][c];
        }
        emb_sqnorm[i] = sq;
        emb_scale[i] = (float)(1 + ldp_uniform_u32(g, 1000)) / 4096.0f;
        outputs[i] = i;
        for (j = 0; j < K; j++) head_ids[i][j] = (i + 1 + j) % V;
        /* ascending within the row */
        for (j = 1; j < K; j++) {
            int m = j;
            while (m > 0 && head_ids[i][m] < head_ids[i][m - 1]) {
                int32_t tmp = head_ids[i][m];
                head_ids[i][m] = head_ids[i][m - 1];
                head_ids[i][m - 1] = tmp;
                m--;
            }
        }
        for (j = 0; j <= K; j++) {
            alias_threshold[i][j] = ldp_next_u32(g);
            alias_index[i][j] = (uint16_t)ldp_uniform_u32(g, K + 1);
            accept_gamma[i][j] = (double)ldp_uniform_u32(g, 1u << 20) / (double)(1u << 18);
        }
        tail_floor[i] = 0.0;
        keep_row[i] = (uint8_t)(i % 5 == 0);
    }
    memset(t, 0, sizeof *t);
    t->n_rows = V;
    t->dim = DIM;
    t->head_size = K;
    t->n_outputs = V;
    t->emb_q = &emb_q[0][0];
    t->emb_scale = emb_scale;
    t->emb_sqnorm = emb_sqnorm;
    t->outputs = outputs;
    t->head_ids = &head_ids[0][0];
    t->alias_threshold = &alias_threshold[0][0];
    t->alias_index = &alias_index[0][0];
    t->accept_gamma = &accept_gamma[0][0];
    t->tail_floor = tail_floor;
    t->keep_row = keep_row;
    t->half_epsilon = 1.5;
    t->p = 0.3;
    /* tail clusters: each row's bound is the nearest tail member of the cluster (the sampler's
     * own distance), a little less, so both trials of the tail run with non-zero cluster bounds */
    for (i = 0; i < V; i++) tail_cluster[i] = (uint8_t)ldp_uniform_u32(g, C);
    t->n_clusters = C;
    t->tail_cluster = tail_cluster;
    t->cluster_gamma = &cluster_gamma[0][0];
    for (i = 0; i < V; i++) {
        double lo[C];
        for (c = 0; c < C; c++) lo[c] = 1e300;
        for (j = 0; j < V; j++) {
            int in_head = 0, m;
            for (m = 0; m < K; m++) in_head |= head_ids[i][m] == j;
            if (!in_head) {
                double d = ldp_distance(t, i, j);
                if (d < lo[tail_cluster[j]]) lo[tail_cluster[j]] = d;
            }
        }
        for (c = 0; c < C; c++) {
            double units = floor(t->half_epsilon * lo[c] * 32.0 * 0.999);
            cluster_gamma[i][c] = (uint8_t)(units > 255.0 ? 255.0 : units);
        }
    }
    ldp_santext_tail_masses(t, tail_mass);
    t->tail_mass = tail_mass;
    { /* the cluster-order tail draw, as libldptext sets it up for a bundle with clusters */
        static uint64_t order[4 * V];
        if (ldp_santext_cluster_order_size(t) > sizeof(order)) abort();
        ldp_santext_cluster_order(t, order);
    }
}

int main(void) {
    static const char *docs[] = {"alpha beta gamma", "eta zeta alpha alpha", "delta", "",
                                 "beta beta beta beta beta beta beta beta"};
    uint8_t key[32], pk[32], sk[64], *data = NULL;
    ldp_chacha g;
    ldp_santext_table table;
    int32_t xs[4096], ys[4096];
    size_t i, failed = 0, len = 0;
    int ok = 1, rc;
    ldp_bundle *b = NULL;
    ldp_sanitizer *s = NULL;

    for (i = 0; i < 32; i++) key[i] = (uint8_t)(7 * i + 1);
    ldp_chacha_init(&g, key, 42);
    printf("version %s\nkeystream", ldp_version());
    for (i = 0; i < 64; i++) printf(" %08x", (unsigned)ldp_next_u32(&g));
    printf("\nuniform");
    for (i = 0; i < 64; i++) printf(" %u", (unsigned)ldp_uniform_u32(&g, 1000003u));
    printf("\nbernoulli_exp");
    for (i = 0; i < 256; i++) printf("%d", ldp_bernoulli_exp(&g, (double)i / 64.0));
    printf("\ndiscrete_laplace_exact");
    for (i = 0; i < 64; i++) printf(" %lld", (long long)ldp_discrete_laplace_exact(&g, 7, 3, &ok));
    printf("\ndiscrete_gaussian_exact");
    for (i = 0; i < 64; i++) printf(" %lld", (long long)ldp_discrete_gaussian_exact(&g, 11, 10, &ok));
    printf("\nok %d\n", ok);

    synthetic_table(&g, &table);
    if (ldp_santext_table_check(&table) != LDP_SAMPLE_OK) {
        fprintf(stderr, "cross_check: synthetic table invalid\n");
        return 1;
    }
    { /* the rows that skip refused rounds (santext_sampler.c propose_skip): some, not all */
        size_t n_skip = 0;
        for (i = 0; table.skip_row != NULL && i < V; i++) n_skip += table.skip_row[i];
        printf("skip rows %zu\n", n_skip);
    }
    printf("distances");
    for (i = 0; i < V * V; i += 7) printf(" %a", ldp_distance(&table, (int32_t)(i / V), (int32_t)(i % V)));
    { /* the row check's block kernel (lib/check.c): bit for bit the per-row distances, 1..32 rows */
        static double blk[LDP_DIST_BLOCK * V], one[V];
        int32_t rows[LDP_DIST_BLOCK];
        int nx, r, same = 1;
        for (nx = 1; nx <= LDP_DIST_BLOCK; nx += 3) {
            for (r = 0; r < nx; r++) rows[r] = (int32_t)((r * 7 + nx) % V);
            ldp_distance_sq_block(&table, rows, nx, outputs, V, V, blk);
            for (r = 0; r < nx; r++) {
                ldp_distance_sq_outputs(&table, rows[r], one);
                same &= memcmp(one, blk + (size_t)r * V, sizeof one) == 0;
            }
        }
        if (!same) {
            fprintf(stderr, "cross_check: block distances differ from the per-row distances\n");
            return 1;
        }
        printf("\nblock distances");
        for (i = 0; i < V; i += 5) printf(" %a", blk[i]);
    }
    for (i = 0; i < 4096; i++) xs[i] = (int32_t)(i % V);
    rc = ldp_santext_sample_many(&g, &table, xs, ys, 4096, &failed);
    printf("\nsample rc %d", rc);
    for (i = 0; i < 4096; i++) printf("%s%d", i % 64 ? " " : "\n", ys[i]);
    { /* refined bounds (santext_sampler.h): each cell's nearest, then draws under them */
        ldp_refine_store *store = ldp_refine_store_new(&table, (size_t)1 << 20);
        int32_t all[V];
        int c;
        for (i = 0; i < V; i++) all[i] = (int32_t)i;
        table.refined = store;
        rc = store != NULL ? ldp_refine_rows(&table, all, V) : -1;
        printf("\nrefined rc %d cells %d", rc, (int)table.n_cells);
        for (i = 0; i < V; i += 3) {
            printf("\nrow %zu skip %d:", i, ldp_refined_skip(&table, (int32_t)i));
            for (c = 0; c < table.n_cells; c++) printf(" %d", ldp_refined_bound(&table, (int32_t)i, c));
        }
        rc = ldp_santext_sample_many(&g, &table, xs, ys, 4096, &failed);
        printf("\nrefined sample rc %d", rc);
        for (i = 0; i < 4096; i++) printf("%s%d", i % 64 ? " " : "\n", ys[i]);
        table.refined = NULL;
        ldp_refine_store_free(store);
    }
    { /* a call grouped by row (santext_sampler.c order_by_row): 70,000 tokens in two windows, the
       * rows in a scrambled order; the portable build sorts positions instead of packed keys
       * (-DLDP_ORDER_POSITIONS), so this line also compares the two */
        static int32_t lxs[70000], lys[70000];
        uint64_t h = 1469598103934665603ull;
        for (i = 0; i < 70000; i++) lxs[i] = (int32_t)((i * 7919u + i / 13u) % V);
        rc = ldp_santext_sample_many(&g, &table, lxs, lys, 70000, &failed);
        for (i = 0; i < 70000; i++) h = (h ^ (uint64_t)(uint32_t)lys[i]) * 1099511628211ull;
        printf("\ngrouped sample rc %d fnv %016llx", rc, (unsigned long long)h);
        for (i = 0; i < 70000; i += 997) printf(" %d", lys[i]);
    }

    /* the public API on the tiny signed bundle, seeded */
    bw_test_keys(pk, sk, 0);
    if (bw_tiny_bundle(1, &data, &len) != 0 ||
        ldp_bundle_open_memory(data, len, (const uint8_t (*)[32])pk, 1, &b) != LDP_OK ||
        ldp_sanitizer_new_seeded(b, 20261124, &s) != LDP_OK) {
        fprintf(stderr, "cross_check: tiny bundle failed\n");
        return 1;
    }
    for (i = 0; i < 40; i++) {
        const char *d = docs[i % (sizeof docs / sizeof docs[0])];
        char *out = NULL;
        size_t n = 0;
        ldp_report rep = LDP_REPORT_INIT;
        rc = ldp_sanitize(s, d, strlen(d), &out, &n, &rep);
        printf("\nsanitize rc %d n_tokens %zu eps %a p %a: %s", rc, rep.n_tokens, rep.epsilon, rep.p,
               out ? out : "");
        ldp_free(out);
    }
    printf("\n");
    ldp_sanitizer_free(s);
    ldp_bundle_close(b);
    free(data);
    return 0;
}
