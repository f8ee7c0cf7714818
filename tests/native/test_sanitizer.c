/* Sanitizers: the realised output distribution equals the tables' exact distribution (chi-square),
 * seeded streams are reproducible, OS-seeded ones are not, a forked child never repeats its
 * parent's stream, inputs are validated, and sanitizers on one shared bundle run in threads. */
#define _GNU_SOURCE 1
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bundle_writer.h"
#include "ldp_internal.h"
#include "ldptext.h"
#include "testing.h"

static uint8_t PK[32], SK[64];

static ldp_bundle *open_tiny(int plus, void (*tweak)(bw_tables *)) {
    bw_tables t;
    bw_spec s;
    uint8_t *data = NULL;
    size_t len = 0;
    ldp_bundle *b = NULL;
    bw_tiny_tables(&t, plus);
    if (tweak != NULL) tweak(&t);
    bw_tiny_spec(&s, &t);
    if (bw_write(&s, &data, &len) != 0) return NULL;
    if (ldp_bundle_open_memory(data, len, (const uint8_t (*)[32])PK, 1, &b) != LDP_OK) b = NULL;
    free(data);
    return b;
}

/* The distribution the tables define for input x (sdk/ldptext/santext.py _log_probabilities):
 * proposal masses from the alias table, acceptance exp(-gamma), tail outputs uniform in the tail
 * slot with acceptance exp(-(gamma_K + eps/2 (d - floor))), renormalised; SanText+ keep rows mix
 * in the identity with probability 1 - p. */
static void exact_distribution(const ldp_santext_table *t, int32_t x, double *prob) {
    const size_t k = (size_t)t->head_size, slots = k + 1;
    const uint32_t *thr = t->alias_threshold + (size_t)x * slots;
    const uint16_t *alias = t->alias_index + (size_t)x * slots;
    const double *gamma = t->accept_gamma + (size_t)x * slots;
    const int32_t *head = t->head_ids + (size_t)x * k;
    double mass[64], total = 0;
    size_t j, i;
    int y;
    for (j = 0; j < slots; j++) mass[j] = 0;
    for (j = 0; j < slots; j++) {
        if (alias[j] == j) {
            mass[j] += 4294967296.0;
        } else {
            mass[j] += thr[j];
            mass[alias[j]] += 4294967296.0 - thr[j];
        }
    }
    for (y = 0; y < t->n_rows; y++) prob[y] = 0;
    for (j = 0; j < k; j++) prob[head[j]] += mass[j] * exp(-gamma[j]);
    for (i = 0; i < (size_t)t->n_outputs; i++) {
        int32_t out = t->outputs[i], in_head = 0;
        for (j = 0; j < k; j++) in_head |= head[j] == out;
        if (in_head) continue;
        prob[out] += mass[k] / (double)(t->n_outputs - (int32_t)k) *
                     exp(-(gamma[k] + t->half_epsilon * (ldp_distance(t, x, out) - t->tail_floor[x])));
    }
    for (y = 0; y < t->n_rows; y++) total += prob[y];
    for (y = 0; y < t->n_rows; y++) prob[y] /= total;
    if (t->keep_row[x]) {
        for (y = 0; y < t->n_rows; y++) prob[y] *= t->p;
        prob[x] += 1.0 - t->p;
    }
}

/* critical values of chi-square at p = 1e-6 for df = 1..7 */
static const double crit[8] = {0, 23.9, 27.6, 30.7, 33.4, 35.9, 38.3, 40.5};

/* chi-square of n draws ys against the exact distribution prob; counts the degrees of freedom;
 * *impossible if a draw has probability 0 */
static double chi_square_of(const double *prob, const int32_t *ys, size_t n, int *df, int *impossible) {
    double stat = 0;
    size_t count[BW_V] = {0}, i;
    int y;
    for (i = 0; i < n && !*impossible; i++) {
        if (ys[i] < 0 || ys[i] >= BW_V || prob[ys[i]] == 0) *impossible = 1;
        else count[ys[i]]++;
    }
    for (y = 0; y < BW_V; y++) {
        double e = prob[y] * (double)n;
        if (prob[y] == 0) continue;
        stat += (count[y] - e) * (count[y] - e) / e;
        (*df)++;
    }
    return stat;
}

/* chi-square of n draws from row x against the exact distribution; returns the statistic and
 * the degrees of freedom; fails if a draw has probability 0 */
static double chi_square(ldp_sanitizer *s, const ldp_bundle *b, int32_t x, size_t n, int *df,
                         int *impossible) {
    double prob[BW_V], stat;
    int32_t *xs = (int32_t *)malloc(n * sizeof *xs), *ys = (int32_t *)malloc(n * sizeof *ys);
    size_t i;
    *df = -1;
    *impossible = 0;
    exact_distribution(&b->table, x, prob);
    for (i = 0; i < n; i++) xs[i] = x;
    if (ldp_sample_ids(s, xs, ys, n) != LDP_OK) *impossible = 1;
    stat = chi_square_of(prob, ys, n, df, impossible);
    free(xs);
    free(ys);
    return stat;
}

/* Three tail clusters with the largest valid bounds: per row and cluster, just under
 * eps/2 * (nearest tail member's distance - tail floor), distances computed here in double from
 * the codes (scale 1/8, exact), 0.1 % below for the sampler's rounding. The exact distribution
 * does not depend on them (santext_sampler.h: the two trials multiply to the single one). */
static void clustered(bw_tables *t) {
    int x, y, j, c;
    t->n_clusters = 3;
    for (y = 0; y < BW_V; y++) t->tail_cluster[y] = (uint8_t)(y % 3);
    for (x = 0; x < BW_V; x++) {
        double lo[3] = {1e300, 1e300, 1e300};
        for (j = 0; j < t->n_outputs; j++) {
            int32_t out = t->outputs[j];
            double d2 = 0;
            int m, in_head = 0;
            for (m = 0; m < BW_K; m++) in_head |= t->head_ids[x][m] == out;
            if (in_head) continue;
            for (m = 0; m < BW_M; m++) {
                double diff = 0.125 * (t->emb_q[x][m] - t->emb_q[out][m]);
                d2 += diff * diff;
            }
            if (sqrt(d2) < lo[out % 3]) lo[out % 3] = sqrt(d2);
        }
        for (c = 0; c < 3; c++) {
            double units = floor(t->epsilon / 2 * (lo[c] - t->tail_floor[x]) * 32.0 * 0.999);
            t->cluster_gamma[x * 3 + c] = (uint8_t)(units > 255 ? 255 : units < 0 ? 0 : units);
        }
    }
}

static void test_sampled_distribution_is_the_exact_one(void) {
    int plus;
    for (plus = 0; plus <= 3; plus++) { /* 2, 3: the same tables with tail clusters */
        ldp_bundle *b = open_tiny(plus & 1, plus >= 2 ? clustered : NULL);
        ldp_sanitizer *s = NULL;
        int32_t x;
        REQUIRE(b != NULL);
        REQUIRE(ldp_sanitizer_new_seeded(b, 7, &s) == LDP_OK);
        for (x = 0; x < BW_V; x++) {
            int df, impossible;
            double stat = chi_square(s, b, x, 200000, &df, &impossible);
            CHECK(!impossible);
            CHECK(df >= 1 && df <= 7);
            if (df >= 1 && df <= 7 && !(stat < crit[df]))
                fprintf(stderr, "  plus=%d row %d: chi2 %.1f df %d\n", plus, x, stat, df);
            CHECK(df >= 1 && df <= 7 && stat < crit[df]);
        }
        ldp_sanitizer_free(s);
        ldp_bundle_close(b);
    }
}

/* A long call takes its tokens grouped by row, 65,536 at a time (santext_sampler.c order_by_row):
 * rows interleaved over 150,000 tokens (three windows, the last one partial), with and without
 * tail clusters. Each row's outputs follow its exact distribution (an output written to another
 * row's position fails this), and consecutive outputs of a row are as often equal as independent
 * draws: (m - 1) sum p^2 within six standard deviations. */
static void test_long_calls_keep_each_position_s_law(void) {
    const size_t n = 150000;
    int clusters;
    for (clusters = 0; clusters <= 1; clusters++) {
        ldp_bundle *b = open_tiny(1, clusters ? clustered : NULL);
        int32_t *xs = (int32_t *)malloc(n * sizeof *xs), *ys = (int32_t *)malloc(n * sizeof *ys);
        int32_t *mine = (int32_t *)malloc(n * sizeof *mine);
        ldp_sanitizer *s = NULL;
        uint32_t state = 1;
        size_t i;
        int32_t x;
        REQUIRE(b != NULL && xs != NULL && ys != NULL && mine != NULL);
        REQUIRE(ldp_sanitizer_new_seeded(b, 11, &s) == LDP_OK);
        for (i = 0; i < n; i++) {
            state = state * 1664525u + 1013904223u;
            xs[i] = (int32_t)((state >> 16) % BW_V);
        }
        CHECK(ldp_sample_ids(s, xs, ys, n) == LDP_OK);
        for (x = 0; x < BW_V; x++) {
            double prob[BW_V], stat, q = 0, expect;
            size_t m = 0, same = 0;
            int df = -1, impossible = 0, y;
            exact_distribution(&b->table, x, prob);
            for (i = 0; i < n; i++)
                if (xs[i] == x) mine[m++] = ys[i];
            stat = chi_square_of(prob, mine, m, &df, &impossible);
            CHECK(!impossible);
            if (df >= 1 && df <= 7 && !(stat < crit[df]))
                fprintf(stderr, "  clusters=%d row %d: chi2 %.1f df %d\n", clusters, x, stat, df);
            CHECK(df >= 1 && df <= 7 && stat < crit[df]);
            for (y = 0; y < BW_V; y++) q += prob[y] * prob[y];
            for (i = 1; i < m; i++) same += mine[i] == mine[i - 1];
            expect = (double)(m - 1) * q;
            CHECK(fabs((double)same - expect) < 6.0 * sqrt(expect * (1.0 - q)) + 1.0);
        }
        ldp_sanitizer_free(s);
        free(xs);
        free(ys);
        free(mine);
        ldp_bundle_close(b);
    }
}

/* A head proposal where the tail slot holds more than three quarters of a row's alias units draws
 * its slot from the head's realised masses instead of drawing the tail slot again and again
 * (santext_sampler.c propose_head): the tiny tables with the proposal 0.2 : 0.3 : 2.5 (slot 0 owns
 * a tenth of slot K's column, so the masses need the alias entries), with and without tail
 * clusters (skip rows), sampled by ldp_santext_sample_many against their exact distribution. */
static void test_head_drawn_by_mass_where_the_tail_dominates(void) {
    const size_t n = 200000;
    int variant;
    for (variant = 0; variant <= 1; variant++) {
        ldp_bundle *b = open_tiny(0, variant ? clustered : NULL);
        ldp_santext_table t;
        uint32_t thr[BW_V][BW_K + 1];
        uint16_t alias[BW_V][BW_K + 1];
        uint64_t tail[BW_V];
        int32_t *xs = (int32_t *)malloc(n * sizeof *xs), *ys = (int32_t *)malloc(n * sizeof *ys);
        void *order = NULL;
        uint8_t key[32] = {5};
        ldp_chacha g;
        int32_t x;
        REQUIRE(b != NULL && xs != NULL && ys != NULL);
        t = b->table;
        for (x = 0; x < BW_V; x++) {
            thr[x][0] = 429496730u;  /* 0.1 of the column, the rest to the tail slot */
            thr[x][1] = 1288490189u; /* 0.3 */
            thr[x][2] = 3865470566u; /* 0.9 to the tail, 0.1 to slot 0 */
            alias[x][0] = alias[x][1] = 2;
            alias[x][2] = 0;
        }
        t.alias_threshold = &thr[0][0];
        t.alias_index = &alias[0][0];
        t.alias_index_u8 = NULL;
        ldp_santext_tail_masses(&t, tail);
        t.tail_mass = tail;
        CHECK(tail[0] > ((uint64_t)3 << 30) * (BW_K + 1)); /* the direct draw's side of the rule */
        if (t.n_clusters > 1) {
            order = malloc(ldp_santext_cluster_order_size(&t));
            REQUIRE(order != NULL);
            ldp_santext_cluster_order(&t, order);
        }
        ldp_chacha_init(&g, key, (uint64_t)variant);
        for (x = 0; x < BW_V; x++) {
            double prob[BW_V], stat;
            size_t i, failed = 0;
            int df = -1, impossible = 0;
            exact_distribution(&t, x, prob);
            for (i = 0; i < n; i++) xs[i] = x;
            CHECK(ldp_santext_sample_many(&g, &t, xs, ys, n, &failed) == LDP_SAMPLE_OK);
            stat = chi_square_of(prob, ys, n, &df, &impossible);
            CHECK(!impossible);
            if (df >= 1 && df <= 7 && !(stat < crit[df]))
                fprintf(stderr, "  variant %d row %d: chi2 %.1f df %d\n", variant, x, stat, df);
            CHECK(df >= 1 && df <= 7 && stat < crit[df]);
        }
        free(order);
        free(xs);
        free(ys);
        ldp_bundle_close(b);
    }
}

/* The lookahead (santext_sampler.c prefetch_ahead) only asks for memory: a call below the grouping
 * threshold gives the same draws with and without it, in SanText and SanText+ tables with and
 * without tail clusters (skip rows). The tiny tables propose their heads often, so the head rows
 * are asked for. */
static void test_look_ahead_changes_no_draw(void) {
    const size_t n = 5000;
    int variant;
    for (variant = 0; variant < 4; variant++) {
        ldp_bundle *b = open_tiny(variant & 1, variant >= 2 ? clustered : NULL);
        ldp_santext_table t;
        int32_t *xs = (int32_t *)malloc(n * sizeof *xs), *ys = (int32_t *)malloc(2 * n * sizeof *ys);
        uint8_t key[32] = {9};
        size_t i, failed = 0, differ = 0;
        int32_t ahead, x, likely = 0;
        REQUIRE(b != NULL && xs != NULL && ys != NULL);
        t = b->table;
        for (x = 0; x < t.n_rows; x++)
            likely += t.skip_row != NULL && t.skip_row[x] ? t.skip_p[x] < (uint64_t)15 << 60
                                                          : t.tail_mass[x] < (uint64_t)(BW_K + 1) * ((uint64_t)15 << 28);
        CHECK(likely > 0);
        if (variant >= 2) CHECK(t.look_ahead == (likely >= t.n_rows / 16));
        for (i = 0; i < n; i++) xs[i] = (int32_t)((i * 7u + i / 13u) % BW_V);
        for (ahead = 0; ahead <= 1; ahead++) {
            ldp_chacha g;
            t.look_ahead = ahead;
            ldp_chacha_init(&g, key, 3);
            CHECK(ldp_santext_sample_many(&g, &t, xs, ys + (size_t)ahead * n, n, &failed) == LDP_SAMPLE_OK);
        }
        for (i = 0; i < n; i++) differ += ys[i] != ys[n + i];
        CHECK(differ == 0);
        free(xs);
        free(ys);
        ldp_bundle_close(b);
    }
}

static void sample_n(ldp_sanitizer *s, int32_t *ys, size_t n) {
    int32_t xs[256];
    size_t i;
    for (i = 0; i < n; i++) xs[i] = (int32_t)(i % BW_V);
    if (ldp_sample_ids(s, xs, ys, n) != LDP_OK) memset(ys, 0xFF, n * sizeof *ys);
}

static void test_seeded_streams_are_reproducible_and_marked(void) {
    ldp_bundle *b = open_tiny(0, NULL);
    ldp_sanitizer *s1 = NULL, *s2 = NULL, *s3 = NULL;
    int32_t a[256], c[256], d[256];
    char *out = NULL;
    size_t len;
    ldp_report rep = LDP_REPORT_INIT;
    REQUIRE(b != NULL);
    REQUIRE(ldp_sanitizer_new_seeded(b, 1, &s1) == LDP_OK);
    REQUIRE(ldp_sanitizer_new_seeded(b, 1, &s2) == LDP_OK);
    REQUIRE(ldp_sanitizer_new_seeded(b, 2, &s3) == LDP_OK);
    sample_n(s1, a, 256);
    sample_n(s2, c, 256);
    sample_n(s3, d, 256);
    CHECK(memcmp(a, c, sizeof a) == 0);
    CHECK(memcmp(a, d, sizeof a) != 0);
    CHECK_RC(ldp_sanitize(s1, "alpha beta", 10, &out, &len, &rep), LDP_OK);
    CHECK(rep.seeded == 1 && rep.n_tokens == 2);
    ldp_free(out);
    ldp_sanitizer_free(s1);
    ldp_sanitizer_free(s2);
    ldp_sanitizer_free(s3);
    ldp_bundle_close(b);
}

static void test_os_seeded_streams_differ(void) {
    ldp_bundle *b = open_tiny(0, NULL);
    ldp_sanitizer *s1 = NULL, *s2 = NULL;
    int32_t a[256], c[256];
    char *out = NULL;
    size_t len;
    ldp_report rep = LDP_REPORT_INIT;
    REQUIRE(b != NULL);
    REQUIRE(ldp_sanitizer_new(b, &s1) == LDP_OK);
    REQUIRE(ldp_sanitizer_new(b, &s2) == LDP_OK);
    sample_n(s1, a, 256);
    sample_n(s2, c, 256);
    CHECK(memcmp(a, c, sizeof a) != 0);
    CHECK_RC(ldp_sanitize(s1, "alpha beta", 10, &out, &len, &rep), LDP_OK);
    CHECK(rep.seeded == 0 && rep.mechanism == LDP_MECH_SANTEXT && rep.p == 1.0 &&
          rep.epsilon0 == 0.0 && rep.epsilon == 2.0);
    ldp_free(out);
    ldp_sanitizer_free(s1);
    ldp_sanitizer_free(s2);
    ldp_bundle_close(b);
}

/* parent and child draw after a fork: the child must not produce the parent's stream */
static int fork_streams_equal(ldp_sanitizer *s) {
    int fds[2], status = 0;
    int32_t mine[256], theirs[256];
    pid_t pid;
    size_t got = 0;
    if (pipe(fds) != 0) return -1;
    pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int32_t ys[256];
        close(fds[0]);
        sample_n(s, ys, 256);
        if (write(fds[1], ys, sizeof ys) != (ssize_t)sizeof ys) _exit(1);
        _exit(0);
    }
    close(fds[1]);
    sample_n(s, mine, 256);
    while (got < sizeof theirs) {
        ssize_t r = read(fds[0], (char *)theirs + got, sizeof theirs - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fds[0]);
    waitpid(pid, &status, 0);
    if (got != sizeof theirs || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
    return memcmp(mine, theirs, sizeof mine) == 0;
}

static void test_forked_child_never_continues_the_parent_stream(void) {
    ldp_bundle *b = open_tiny(0, NULL);
    ldp_sanitizer *s = NULL;
    int32_t warm[16];
    REQUIRE(b != NULL);
    REQUIRE(ldp_sanitizer_new(b, &s) == LDP_OK);
    sample_n(s, warm, 16);
    CHECK(fork_streams_equal(s) == 0);
    CHECK(fork_streams_equal(s) == 0); /* again, from the same parent */
    ldp_sanitizer_free(s);
    REQUIRE(ldp_sanitizer_new_seeded(b, 3, &s) == LDP_OK);
    sample_n(s, warm, 16);
    CHECK(fork_streams_equal(s) == 0); /* seeded: the child derives a key of its own */
    ldp_sanitizer_free(s);
    ldp_bundle_close(b);
}

static void no_unk_input(bw_tables *t) { t->valid_input[7] = 0; }

static void test_inputs_are_validated(void) {
    ldp_bundle *b = open_tiny(0, no_unk_input);
    ldp_sanitizer *s = NULL;
    int32_t ys[3] = {99, 99, 99};
    char *out = (char *)1;
    size_t len;
    REQUIRE(b != NULL);
    REQUIRE(ldp_sanitizer_new(b, &s) == LDP_OK);
    {
        const int32_t bad1[3] = {0, 8, 1}, bad2[3] = {0, -1, 1}, bad3[3] = {0, 7, 1};
        CHECK_RC(ldp_sample_ids(s, bad1, ys, 3), LDP_E_INPUT_ID);
        CHECK_RC(ldp_sample_ids(s, bad2, ys, 3), LDP_E_INPUT_ID);
        CHECK_RC(ldp_sample_ids(s, bad3, ys, 3), LDP_E_INPUT_ID); /* not a valid input row */
        CHECK(ys[0] == 99 && ys[1] == 99 && ys[2] == 99);          /* nothing written */
    }
    /* an unknown word maps to <unk>, which this bundle does not accept as an input */
    CHECK_RC(ldp_sanitize(s, "alpha qqq", 9, &out, &len, NULL), LDP_E_INPUT_ID);
    CHECK(out == NULL);
    CHECK_RC(ldp_sanitize(s, "alpha \xff", 7, &out, &len, NULL), LDP_E_INVALID_UTF8);
    CHECK_RC(ldp_sanitize(s, NULL, 3, &out, &len, NULL), LDP_E_ARG);
    CHECK_RC(ldp_sanitize(NULL, "a", 1, &out, &len, NULL), LDP_E_ARG);
    CHECK_RC(ldp_sample_ids(s, NULL, ys, 1), LDP_E_ARG);
    CHECK_RC(ldp_sample_ids(s, NULL, NULL, 0), LDP_OK);
    ldp_sanitizer_free(s);
    CHECK_RC(ldp_sanitizer_new(NULL, &s), LDP_E_ARG);
    CHECK(s == NULL);
    ldp_bundle_close(b);
}

static void test_in_place_sampling_has_the_same_stream(void) {
    ldp_bundle *b = open_tiny(1, NULL);
    ldp_sanitizer *s1 = NULL, *s2 = NULL;
    int32_t xs[200], ys[200], inplace[200];
    int i;
    REQUIRE(b != NULL);
    REQUIRE(ldp_sanitizer_new_seeded(b, 11, &s1) == LDP_OK);
    REQUIRE(ldp_sanitizer_new_seeded(b, 11, &s2) == LDP_OK);
    for (i = 0; i < 200; i++) xs[i] = inplace[i] = i % BW_V;
    CHECK_RC(ldp_sample_ids(s1, xs, ys, 200), LDP_OK);
    CHECK_RC(ldp_sample_ids(s2, inplace, inplace, 200), LDP_OK);
    CHECK(memcmp(ys, inplace, sizeof ys) == 0);
    ldp_sanitizer_free(s1);
    ldp_sanitizer_free(s2);
    ldp_bundle_close(b);
}

static void test_public_tokenize_and_detokenize(void) {
    ldp_bundle *b = open_tiny(0, NULL);
    ldp_sanitizer *s = NULL;
    int32_t ids[8];
    size_t n = 0, len = 0;
    char *text = NULL, *out = NULL;
    ldp_report rep = LDP_REPORT_INIT;
    REQUIRE(b != NULL);
    REQUIRE(ldp_sanitizer_new_seeded(b, 5, &s) == LDP_OK);
    CHECK_RC(ldp_tokenize(s, "Gamma, delta!", 13, ids, 8, &n), LDP_OK);
    CHECK(n == 4 && ids[0] == 2 && ids[1] == 7 && ids[2] == 3 && ids[3] == 7);
    CHECK_RC(ldp_tokenize(s, "Gamma, delta!", 13, NULL, 0, &n), LDP_E_CAPACITY);
    CHECK(n == 4);
    CHECK_RC(ldp_detokenize(s, ids, 3, &text, &len), LDP_OK);
    CHECK(text != NULL && strcmp(text, "gamma <unk> delta") == 0 && len == 17);
    ldp_free(text);
    CHECK_RC(ldp_sanitize(s, "", 0, &out, &len, &rep), LDP_OK);
    CHECK(out != NULL && len == 0 && out[0] == '\0' && rep.n_tokens == 0);
    ldp_free(out);
    CHECK_RC(ldp_sanitize(s, "alpha beta gamma", 16, &out, &len, &rep), LDP_OK);
    CHECK(out != NULL && rep.n_tokens == 3 && strlen(out) == len);
    ldp_free(out);
    ldp_sanitizer_free(s);
    ldp_bundle_close(b);
}

typedef struct {
    const ldp_bundle *b;
    int ok;
} thread_arg;

static void *worker(void *p) {
    thread_arg *a = (thread_arg *)p;
    ldp_sanitizer *s = NULL;
    int i;
    a->ok = ldp_sanitizer_new(a->b, &s) == LDP_OK;
    for (i = 0; i < 2000 && a->ok; i++) {
        char *out = NULL;
        size_t len;
        ldp_report rep = LDP_REPORT_INIT;
        a->ok = ldp_sanitize(s, "Alpha beta, GAMMA delta epsilon zeta eta", 40, &out, &len, &rep) ==
                    LDP_OK &&
                rep.n_tokens == 8;
        ldp_free(out);
    }
    ldp_sanitizer_free(s);
    return NULL;
}

static void test_threads_share_one_bundle(void) {
    ldp_bundle *b = open_tiny(1, NULL);
    pthread_t th[4];
    thread_arg args[4];
    int i;
    REQUIRE(b != NULL);
    for (i = 0; i < 4; i++) {
        args[i].b = b;
        args[i].ok = 0;
        CHECK(pthread_create(&th[i], NULL, worker, &args[i]) == 0);
    }
    for (i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(args[i].ok);
    }
    ldp_bundle_close(b);
}

#if defined(__SIZEOF_INT128__)
/* ldp_fraction_trial, the exact end of a skip row's rare 64-bit tie: U < r / n decided 32 bits at a
 * time. With n = 2^96 the digits of r / n are r's own 32-bit words, so r is built from the words the
 * generator will give (w0, w1): equal digits must move on to the next word, a larger digit
 * decides U < r / n, and a fraction whose digits run out after two equal ones (r / n = 0.w0 w1) is
 * not above U, without a third word. */
static void test_fraction_trial_follows_the_digits(void) {
    const unsigned __int128 n = (unsigned __int128)1 << 96;
    uint32_t w[2];
    int i;
    ldp_chacha g, probe;
    uint8_t key[32];
    for (i = 0; i < 32; i++) key[i] = (uint8_t)(3 * i + 1);
    ldp_chacha_init(&probe, key, 9);
    for (i = 0; i < 2; i++) w[i] = ldp_next_u32(&probe);
    CHECK(w[1] < UINT32_MAX && w[0] > 0);
    ldp_chacha_init(&g, key, 9); /* r / n = 0.w0 (w1 + 1): two words, then U < r / n */
    CHECK(ldp_fraction_trial(&g, ((unsigned __int128)w[0] << 64) | ((unsigned __int128)(w[1] + 1u) << 32), n) == 1);
    CHECK(g.used == 2);
    ldp_chacha_init(&g, key, 9); /* r / n = 0.w0 w1 exactly: U >= r / n */
    CHECK(ldp_fraction_trial(&g, ((unsigned __int128)w[0] << 64) | ((unsigned __int128)w[1] << 32), n) == 0);
    CHECK(g.used == 2);
    ldp_chacha_init(&g, key, 9); /* first digit w0 - 1 < w0: one word, U > r / n */
    CHECK(ldp_fraction_trial(&g, (unsigned __int128)(w[0] - 1u) << 64, n) == 0);
    CHECK(g.used == 1);
    ldp_chacha_init(&g, key, 9); /* r = 0: never */
    CHECK(ldp_fraction_trial(&g, 0, n) == 0);
    /* a non-power-of-two n: r / n = 1/3 = 0.5555...h, so the first word decides */
    ldp_chacha_init(&g, key, 9);
    CHECK(ldp_fraction_trial(&g, 1, 3) == (w[0] < 0x55555555u));
}
#endif

/* Every row is checked in full before its first draw (lib/check.c): a table wrong on one row only
 * passes the open's sampled check (the row's head has one slot left, which the ratio check cannot
 * read; or only its tail is wrong, which it does not read), yet no call ever draws from it: the
 * call that needs it returns LDP_E_PARAMETER_MISMATCH with nothing written, its text releases
 * nothing, and ldp_bundle_check_rows names it. */
static void one_slot_row(bw_tables *t) { /* row 3 proposes its first head slot only */
    int j;
    for (j = 0; j <= BW_K; j++) {
        t->alias_threshold[3][j] = j == 0 ? 0xFFFFFFFFu : 0u;
        t->alias_index[3][j] = 0;
    }
}
static void floor_raised(bw_tables *t) { t->tail_floor[3] += 1.0; } /* its tail made e^(eps/2) heavier */
static void tail_gamma_raised(bw_tables *t) { t->accept_gamma[3][BW_K] += 2.0; } /* its tail lighter */

static void test_every_row_is_checked_before_its_first_draw(void) {
    void (*const tweaks[3])(bw_tables *) = {one_slot_row, floor_raised, tail_gamma_raised};
    int i, plus;
    for (plus = 0; plus <= 1; plus++) {
        ldp_bundle *b = open_tiny(plus, NULL);
        int64_t bad = 7;
        REQUIRE(b != NULL);
        CHECK_RC(ldp_bundle_check_rows(b, 0, BW_V, &bad), LDP_OK);
        CHECK(bad == -1);
        CHECK_RC(ldp_bundle_check_rows(b, -1, 1, NULL), LDP_E_ARG);
        ldp_bundle_close(b);
        for (i = 0; i < 3; i++) {
            ldp_sanitizer *s = NULL;
            const int32_t good[2] = {2, 5}, with_bad[3] = {2, 3, 5};
            int32_t ys[3] = {-1, -1, -1};
            char *out = NULL;
            size_t len = 0;
            b = open_tiny(plus, tweaks[i]);
            REQUIRE(b != NULL); /* the sampled check at open passes it */
            REQUIRE(ldp_sanitizer_new_seeded(b, 1, &s) == LDP_OK);
            CHECK_RC(ldp_sample_ids(s, good, ys, 2), LDP_OK);
            ys[0] = ys[1] = -1;
            CHECK_RC(ldp_sample_ids(s, with_bad, ys, 3), LDP_E_PARAMETER_MISMATCH);
            CHECK(ys[0] == -1 && ys[1] == -1 && ys[2] == -1); /* nothing drawn, nothing written */
            CHECK_RC(ldp_sanitize(s, "gamma delta", 11, &out, &len, NULL), LDP_E_PARAMETER_MISMATCH);
            CHECK(out == NULL);
            CHECK_RC(ldp_sample_ids(s, with_bad + 1, ys, 1), LDP_E_PARAMETER_MISMATCH); /* kept */
            bad = 0;
            CHECK_RC(ldp_bundle_check_rows(b, 0, BW_V, &bad), LDP_E_PARAMETER_MISMATCH);
            CHECK(bad == 3);
            ldp_sanitizer_free(s);
            ldp_bundle_close(b);
        }
    }
}

int main(void) {
    bw_test_keys(PK, SK, 0);
    RUN(test_sampled_distribution_is_the_exact_one);
    RUN(test_head_drawn_by_mass_where_the_tail_dominates);
    RUN(test_long_calls_keep_each_position_s_law);
    RUN(test_look_ahead_changes_no_draw);
    RUN(test_every_row_is_checked_before_its_first_draw);
    RUN(test_seeded_streams_are_reproducible_and_marked);
    RUN(test_os_seeded_streams_differ);
    RUN(test_forked_child_never_continues_the_parent_stream);
    RUN(test_inputs_are_validated);
    RUN(test_in_place_sampling_has_the_same_stream);
    RUN(test_public_tokenize_and_detokenize);
    RUN(test_threads_share_one_bundle);
#if defined(__SIZEOF_INT128__)
    RUN(test_fraction_trial_follows_the_digits);
#endif
    DONE();
}
