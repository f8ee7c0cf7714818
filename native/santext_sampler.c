/* Exact SanText / SanText+ sampling: alias proposal + exact Bernoulli(exp(-gamma)) acceptance. */
#include "santext_sampler.h"
#include "samplers.h"
#include "cluster_bounds.h"
#include <math.h>
#include <stdlib.h>
#if defined(__SSE2__) && !defined(LDP_PORTABLE)
#include <emmintrin.h>
#endif
#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
#endif

/* AVX2 where the CPU has it, chosen at run time: the build targets plain x86-64 (SSE2), and the
 * distance below is most of the sampler's work. Integer arithmetic, so every path gives the same
 * value (tests/native/cross_check.c compares the builds, native/Makefile test-portable). GCC and
 * clang only (target attribute and __builtin_cpu_supports); elsewhere, with LDP_PORTABLE and with
 * LDP_NO_AVX2 (the SSE2 build the cross check compares), the SSE2 or plain loop runs. */
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__)) && \
    !defined(LDP_PORTABLE) && !defined(LDP_NO_AVX2) && !defined(__AVX2__)
#define LDP_DOT_AVX2_DISPATCH 1
#include <immintrin.h>
#endif

/* Small helpers on the per-round path are inlined whatever the compiler's heuristics (GCC drops a
 * static function holding only __builtin_prefetch calls, and an out-of-line call per round costs). */
#if defined(__GNUC__) || defined(__clang__)
#define LDP_ALWAYS_INLINE static inline __attribute__((always_inline))
#else
#define LDP_ALWAYS_INLINE static inline
#endif

/* Where the compiler emits prefetch instructions. wasm has none (clang drops __builtin_prefetch):
 * its build turns each hint into a one-byte load and defines LDP_PREFETCH itself
 * (native/wasm/wasm_prefetch.h). */
#if defined(__GNUC__) && !defined(__wasm__)
#define LDP_PREFETCH 1
#endif

/* Ask for the cache line holding p, into every cache level (a hint: nothing is read). */
LDP_ALWAYS_INLINE void prefetch_line(const void *p) {
#if defined(LDP_PREFETCH)
    __builtin_prefetch(p, 0, 3);
#else
    (void)p;
#endif
}

/* Ask for every cache line of bytes [p, p + bytes). */
LDP_ALWAYS_INLINE void prefetch_bytes(const void *p, size_t bytes) {
#if defined(LDP_PREFETCH)
    const char *line = (const char *)((uintptr_t)p & ~(uintptr_t)63), *end = (const char *)p + bytes;
    for (; line < end; line += 64) prefetch_line(line);
#else
    (void)p;
    (void)bytes;
#endif
}

/* Exact integer <qa, qb> over n int8 codes: SSE2 (or plain) path. */
static int32_t int8_dot_base(const int8_t *qa, const int8_t *qb, int32_t n) {
    int32_t dot = 0, i = 0;
#if defined(__wasm_simd128__) && !defined(LDP_PORTABLE)
    /* wasm SIMD's own sign-extend and i16 dot product (the pmaddwd of the SSE2 path below): the
     * SSE2 emulation's interleave-and-shift costs more instructions. Measured in node, CPU time,
     * one call per 50-word document: MiniLM frequency split 0.86 [0.77-0.93] of the SSE2 form,
     * default split 0.95, GloVe-50k 0.98. */
    v128_t vdot = wasm_i32x4_splat(0);
    for (; i + 16 <= n; i += 16) {
        v128_t a = wasm_v128_load(qa + i), b = wasm_v128_load(qb + i);
        vdot = wasm_i32x4_add(vdot, wasm_i32x4_add(
            wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(a), wasm_i16x8_extend_low_i8x16(b)),
            wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(a), wasm_i16x8_extend_high_i8x16(b))));
    }
    dot = wasm_i32x4_extract_lane(vdot, 0) + wasm_i32x4_extract_lane(vdot, 1) +
          wasm_i32x4_extract_lane(vdot, 2) + wasm_i32x4_extract_lane(vdot, 3);
#elif defined(__SSE2__) && !defined(LDP_PORTABLE)
    /* 16 codes per step: sign-extend to int16, multiply-add pairs into int32 lanes (pmaddwd).
     * The compiler's own vectorisation of the plain loop widens to int32 first and needs ~3x the
     * instructions. */
    __m128i vdot = _mm_setzero_si128();
    int32_t lanes[4];
    for (; i + 16 <= n; i += 16) {
        __m128i a = _mm_loadu_si128((const __m128i *)(qa + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(qb + i));
        __m128i a_lo = _mm_srai_epi16(_mm_unpacklo_epi8(a, a), 8);
        __m128i a_hi = _mm_srai_epi16(_mm_unpackhi_epi8(a, a), 8);
        __m128i b_lo = _mm_srai_epi16(_mm_unpacklo_epi8(b, b), 8);
        __m128i b_hi = _mm_srai_epi16(_mm_unpackhi_epi8(b, b), 8);
        vdot = _mm_add_epi32(vdot, _mm_add_epi32(_mm_madd_epi16(a_lo, b_lo),
                                                 _mm_madd_epi16(a_hi, b_hi)));
    }
    _mm_storeu_si128((__m128i *)lanes, vdot);
    dot = lanes[0] + lanes[1] + lanes[2] + lanes[3];
#endif
    for (; i < n; i++) dot += (int32_t)qa[i] * (int32_t)qb[i];
    return dot;
}

#if defined(LDP_DOT_AVX2_DISPATCH) || \
    (defined(__AVX2__) && !defined(LDP_PORTABLE) && !defined(LDP_NO_AVX2))
#if defined(LDP_DOT_AVX2_DISPATCH)
__attribute__((target("avx2")))
#else
#include <immintrin.h>
#endif
/* The same sum with AVX2: sign extension is one instruction (vpmovsxbw) instead of two per
 * operand, 32 codes per step: about a third of the SSE2 path's instructions. Lanes wrap like
 * the SSE2 path's (two's complement), and |<qa, qb>| < 2^31 for n < 133,000 anyway. */
static int32_t int8_dot_avx2(const int8_t *qa, const int8_t *qb, int32_t n) {
    int32_t dot, i = 0;
    int32_t lanes[8];
    __m256i vdot = _mm256_setzero_si256();
    for (; i + 32 <= n; i += 32) {
        __m256i a0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(qa + i)));
        __m256i b0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(qb + i)));
        __m256i a1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(qa + i + 16)));
        __m256i b1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(qb + i + 16)));
        vdot = _mm256_add_epi32(vdot, _mm256_add_epi32(_mm256_madd_epi16(a0, b0),
                                                       _mm256_madd_epi16(a1, b1)));
    }
    if (i + 16 <= n) { /* 16 more codes: GloVe's 50 would otherwise leave 18 to the plain loop */
        __m256i a0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(qa + i)));
        __m256i b0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(qb + i)));
        vdot = _mm256_add_epi32(vdot, _mm256_madd_epi16(a0, b0));
        i += 16;
    }
    _mm256_storeu_si256((__m256i *)lanes, vdot);
    dot = lanes[0] + lanes[1] + lanes[2] + lanes[3] + lanes[4] + lanes[5] + lanes[6] + lanes[7];
    for (; i < n; i++) dot += (int32_t)qa[i] * (int32_t)qb[i];
    return dot;
}
#endif

static int32_t int8_dot(const int8_t *qa, const int8_t *qb, int32_t n) {
#if defined(LDP_DOT_AVX2_DISPATCH)
    if (__builtin_cpu_supports("avx2")) return int8_dot_avx2(qa, qb, n);
    return int8_dot_base(qa, qb, n);
#elif defined(__AVX2__) && !defined(LDP_PORTABLE) && !defined(LDP_NO_AVX2)
    return int8_dot_avx2(qa, qb, n);
#else
    return int8_dot_base(qa, qb, n);
#endif
}

/* Squared norm of a row of codes, in int32: exact for n <= LDP_SQNORM_INT32_MAX_DIM (|q| <= 128,
 * 128^2 * 131,071 < 2^31). The load-time check of emb_sqnorm runs this over every row; the plain
 * int64 loop (not vectorised at -O2) was most of that check's time. Integer arithmetic, so the
 * SSE2 and portable paths give the same value. */
int32_t ldp_int8_sqnorm(const int8_t *q, int32_t n) {
    int32_t norm = 0, i = 0;
#if defined(__SSE2__) && !defined(LDP_PORTABLE)
    __m128i vnorm = _mm_setzero_si128();
    int32_t lanes[4];
    for (; i + 16 <= n; i += 16) {
        __m128i a = _mm_loadu_si128((const __m128i *)(q + i));
        __m128i lo = _mm_srai_epi16(_mm_unpacklo_epi8(a, a), 8);
        __m128i hi = _mm_srai_epi16(_mm_unpackhi_epi8(a, a), 8);
        vnorm = _mm_add_epi32(vnorm, _mm_add_epi32(_mm_madd_epi16(lo, lo), _mm_madd_epi16(hi, hi)));
    }
    _mm_storeu_si128((__m128i *)lanes, vnorm);
    norm = lanes[0] + lanes[1] + lanes[2] + lanes[3];
#endif
    for (; i < n; i++) norm += (int32_t)q[i] * (int32_t)q[i];
    return norm;
}

uint64_t ldp_realised_mass(const uint32_t *thr, const uint16_t *alias, size_t slots, size_t slot) {
    /* slot j keeps thr[j] of its 2^32 units and gives the rest to alias[j] (all of them to itself
     * when alias[j] = j) */
    uint64_t mass = thr[slot];
    size_t j;
    for (j = 0; j < slots; j++) mass += alias[j] == slot ? ((uint64_t)1 << 32) - thr[j] : 0u;
    return mass;
}

uint64_t ldp_table_realised_mass(const ldp_santext_table *t, int32_t x, size_t slot) {
    const size_t slots = (size_t)t->head_size + 1u, row = (size_t)x * slots;
    const uint32_t *thr = t->alias_threshold + row;
    const uint8_t *al = t->alias_index_u8 + row;
    uint64_t mass = thr[slot];
    size_t j;
    if (t->alias_index_u8 == NULL) return ldp_realised_mass(thr, t->alias_index + row, slots, slot);
    for (j = 0; j < slots; j++) mass += al[j] == slot ? ((uint64_t)1 << 32) - thr[j] : 0u;
    return mass;
}

void ldp_santext_tail_masses(const ldp_santext_table *t, uint64_t *out) {
    int32_t x;
    for (x = 0; x < t->n_rows; x++) out[x] = ldp_table_realised_mass(t, x, (size_t)t->head_size);
}

void ldp_table_head_row(const ldp_santext_table *t, int32_t x, int32_t *dst) {
    const size_t k = (size_t)t->head_size, row = (size_t)x * k;
    size_t j;
    if (t->head_ids_u16 == NULL)
        for (j = 0; j < k; j++) dst[j] = t->head_ids[row + j];
    else
        for (j = 0; j < k; j++) dst[j] = (int32_t)t->head_ids_u16[row + j];
}

void ldp_table_alias_row(const ldp_santext_table *t, int32_t x, uint16_t *dst) {
    const size_t slots = (size_t)t->head_size + 1u, row = (size_t)x * slots;
    size_t j;
    if (t->alias_index_u8 == NULL)
        for (j = 0; j < slots; j++) dst[j] = t->alias_index[row + j];
    else
        for (j = 0; j < slots; j++) dst[j] = (uint16_t)t->alias_index_u8[row + j];
}

void ldp_table_gamma_row(const ldp_santext_table *t, int32_t x, double *dst) {
    const size_t slots = (size_t)t->head_size + 1u, row = (size_t)x * slots;
    size_t j;
    if (t->accept_gamma_f32 == NULL)
        for (j = 0; j < slots; j++) dst[j] = t->accept_gamma[row + j];
    else
        for (j = 0; j < slots; j++) dst[j] = (double)t->accept_gamma_f32[row + j];
}

/* A head row strictly increasing with ids in [0, rows): 0, else 1. Branch-free per element (this
 * runs over every table at every bundle load); the narrow form needs no lower bound. */
static int head_row_bad(const ldp_santext_table *t, int64_t j) {
    const int64_t k = t->head_size, rows = t->n_rows;
    int64_t c;
    int bad;
    if (t->head_ids_u16 != NULL) {
        const uint16_t *h = t->head_ids_u16 + j * k;
        bad = h[0] >= rows;
        for (c = 1; c < k; c++) bad |= (h[c] <= h[c - 1]) | (h[c] >= rows);
    } else {
        const int32_t *h = t->head_ids + j * k;
        bad = h[0] < 0 || h[0] >= rows;
        for (c = 1; c < k; c++) bad |= (h[c] <= h[c - 1]) | (h[c] >= rows);
    }
    return bad;
}

/* Every alias slot < slots and every exponent >= 0 (not NaN), in either form: 0, else 1. */
static int slots_bad(const ldp_santext_table *t) {
    const int64_t n = (int64_t)t->n_rows * ((int64_t)t->head_size + 1), slots = t->head_size + 1;
    int64_t j;
    int bad = 0;
    if (t->alias_index_u8 != NULL)
        for (j = 0; j < n; j++) bad |= t->alias_index_u8[j] >= slots;
    else
        for (j = 0; j < n; j++) bad |= t->alias_index[j] >= slots;
    if (t->accept_gamma_f32 != NULL)
        for (j = 0; j < n; j++) bad |= !(t->accept_gamma_f32[j] >= 0.0f);
    else
        for (j = 0; j < n; j++) bad |= !(t->accept_gamma[j] >= 0.0);
    return bad;
}

int ldp_santext_table_check(const ldp_santext_table *t) {
    const int64_t rows = t->n_rows, dim = t->dim, k = t->head_size;
    int64_t j;
    if (rows <= 0 || dim <= 0 || k <= 0 || k >= 65535 || t->n_outputs < k ||
        t->n_clusters < 1 || t->n_clusters > LDP_MAX_CLUSTERS)
        return LDP_SAMPLE_ERR_INVARIANT;
    {
        int bad = 0;
        for (j = 0; j < rows; j++) bad |= t->tail_cluster[j] >= t->n_clusters;
        if (bad) return LDP_SAMPLE_ERR_INVARIANT;
    }
    for (j = 0; j < rows; j++) {
        int64_t acc = 0, c;
        const int8_t *q = t->emb_q + j * dim;
        if (dim <= LDP_SQNORM_INT32_MAX_DIM) {
            acc = ldp_int8_sqnorm(q, (int32_t)dim);
        } else {
            for (c = 0; c < dim; c++) acc += (int64_t)q[c] * q[c];
        }
        if (acc != t->emb_sqnorm[j] || !(t->emb_scale[j] >= 0.0f) || !isfinite(t->emb_scale[j]) ||
            !(t->tail_floor[j] >= 0.0) || !isfinite(t->tail_floor[j]))
            return LDP_SAMPLE_ERR_INVARIANT;
    }
    for (j = 0; j < t->n_outputs; j++)
        if (t->outputs[j] < 0 || t->outputs[j] >= rows ||
            (j > 0 && t->outputs[j] <= t->outputs[j - 1]))
            return LDP_SAMPLE_ERR_INVARIANT;
    /* strictly increasing within a row: the sampler's binary search needs sorted rows, and
     * together with sorted outputs it guarantees a non-empty tail when n_outputs > k. Row by row
     * (no division per element), the findings of a row accumulated without branches: this check
     * runs over every table at every bundle load. */
    if ((t->head_ids == NULL) == (t->head_ids_u16 == NULL) ||
        (t->alias_index == NULL) == (t->alias_index_u8 == NULL) ||
        (t->accept_gamma == NULL) == (t->accept_gamma_f32 == NULL))
        return LDP_SAMPLE_ERR_INVARIANT; /* exactly one form of each */
    for (j = 0; j < rows; j++)
        if (head_row_bad(t, j)) return LDP_SAMPLE_ERR_INVARIANT;
    return slots_bad(t) ? LDP_SAMPLE_ERR_INVARIANT : LDP_SAMPLE_OK;
}

/* d^2 = s_a^2 |q_a|^2 + s_b^2 |q_b|^2 - 2 s_a s_b <q_a, q_b>, as ldp_distance squares it. The
 * integer dot product is exact (|q| <= 127, so |dot| < 2^31 for dim < 133,000); s_a * s_b and
 * s_a^2 are exact in double (float32 mantissas), leaving three roundings in the combination.
 * |q_b|^2 is read from emb_sqnorm (checked against the codes at load); the sampler prefetches it
 * with b's codes. */
LDP_ALWAYS_INLINE double distance_sq(const ldp_santext_table *t, int32_t a, int32_t b) {
    const int8_t *qa = t->emb_q + (size_t)a * (size_t)t->dim;
    const int8_t *qb = t->emb_q + (size_t)b * (size_t)t->dim;
    const double sa = (double)t->emb_scale[a], sb = (double)t->emb_scale[b];
    const int32_t dot = int8_dot(qa, qb, t->dim);
    return (sa * sa) * (double)t->emb_sqnorm[a] + (sb * sb) * (double)t->emb_sqnorm[b] -
           2.0 * (sa * sb) * (double)dot;
}

void ldp_distance_sq_outputs(const ldp_santext_table *t, int32_t x, double *out) {
    int32_t i;
    for (i = 0; i < t->n_outputs; i++) out[i] = distance_sq(t, x, t->outputs[i]);
}

/* The block kernel: the rows' codes widened to int16 once (up to BLOCK_WIDE_DIM codes each), then
 * each output's codes are read once for all the rows, 8 rows at a time (8 accumulators, summed
 * across lanes by one hadd tree). Integer arithmetic (wrapping like int8_dot's lanes), so every
 * path gives distance_sq's value bit for bit. */
#define BLOCK_WIDE_DIM 768 /* 48 KiB of stack for 32 rows */
#if defined(__GNUC__) || defined(__clang__)
#define LDP_ALIGN32 __attribute__((aligned(32)))
#else
#define LDP_ALIGN32
#endif
#if defined(LDP_DOT_AVX2_DISPATCH) || \
    (defined(__AVX2__) && !defined(LDP_PORTABLE) && !defined(LDP_NO_AVX2)) || \
    (defined(__SSE2__) && !defined(LDP_PORTABLE))
/* The block kernels' rows, in groups of 8 (a group's missing rows repeat row 0: computed, not
 * stored): each row's codes, s_a and s_a^2 |q_a|^2, and its first n codes widened to int16,
 * interleaved so that a group's `lane` codes at c follow each other row after row (one base
 * pointer per step of the kernel). */
static void widen_rows(const ldp_santext_table *t, const int32_t *xs, int nx, int32_t lane, int32_t n,
                       int16_t *wide, const int8_t **qa, double *sa, double *own) {
    const int32_t groups = (nx + 7) / 8;
    int32_t r, c;
    for (r = 0; r < groups * 8; r++) {
        const int32_t x = xs[r < nx ? r : 0];
        int16_t *wg = wide + (size_t)(r / 8) * (size_t)n * 8;
        qa[r] = t->emb_q + (size_t)x * (size_t)t->dim;
        sa[r] = (double)t->emb_scale[x];
        own[r] = (sa[r] * sa[r]) * (double)t->emb_sqnorm[x];
        for (c = 0; c < n; c++) wg[(c / lane * 8 + r % 8) * lane + c % lane] = qa[r][c];
    }
}
#endif

#if defined(LDP_DOT_AVX2_DISPATCH) || \
    (defined(__AVX2__) && !defined(LDP_PORTABLE) && !defined(LDP_NO_AVX2))
#define LDP_BLOCK_AVX2 1
#if defined(LDP_DOT_AVX2_DISPATCH)
__attribute__((target("avx2")))
#endif
static void distance_sq_block_avx2(const ldp_santext_table *t, const int32_t *xs, int nx, const int32_t *ys,
                                   int32_t ny, int32_t readable, double *out) {
    const int32_t dim = t->dim, n16 = dim / 16 * 16, groups = (nx + 7) / 8;
    /* outputs in cluster order are scattered rows: ask for them early enough to hide a miss to
     * memory (a step is shorter for short rows) */
    const int32_t ahead = dim <= 128 ? 16 : 8;
    LDP_ALIGN32 int16_t wide[LDP_DIST_BLOCK * BLOCK_WIDE_DIM];
    const int8_t *qa[LDP_DIST_BLOCK];
    double sa[LDP_DIST_BLOCK], own[LDP_DIST_BLOCK]; /* s_a, s_a^2 |q_a|^2 */
    int32_t r, c, j, g;
    if (nx == 1) { /* one row (a call with one new row): its own dot per output */
        const int32_t x = xs[0];
        const int8_t *q1 = t->emb_q + (size_t)x * (size_t)dim;
        const double s1 = (double)t->emb_scale[x], own1 = (s1 * s1) * (double)t->emb_sqnorm[x];
        for (j = 0; j < ny; j++) {
            const int32_t y = ys[j];
            const double sb = (double)t->emb_scale[y];
            if (j + ahead < readable) prefetch_bytes(t->emb_q + (size_t)ys[j + ahead] * (size_t)dim, (size_t)dim);
            out[j] = own1 + (sb * sb) * (double)t->emb_sqnorm[y] -
                     2.0 * (s1 * sb) * (double)int8_dot_avx2(q1, t->emb_q + (size_t)y * (size_t)dim, dim);
        }
        return;
    }
    widen_rows(t, xs, nx, 16, n16, wide, qa, sa, own);
    for (j = 0; j < ny; j++) {
        const int32_t y = ys[j];
        const int8_t *qb = t->emb_q + (size_t)y * (size_t)dim;
        const double sb = (double)t->emb_scale[y], nb = (double)t->emb_sqnorm[y];
        int32_t dots[LDP_DIST_BLOCK];
        if (j + ahead < readable) prefetch_bytes(t->emb_q + (size_t)ys[j + ahead] * (size_t)dim, (size_t)dim);
        for (g = 0; g < groups; g++) {
            const int16_t *wg = wide + (size_t)g * (size_t)n16 * 8;
            __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
            __m256i h01, h23, h45, h67, h0123, h4567;
            for (c = 0; c < n16; c += 16) {
                const __m256i q = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(qb + c)));
                const int16_t *w = wg + (size_t)c * 8;
#define LDP_ACC(k) a##k = _mm256_add_epi32(a##k, _mm256_madd_epi16( \
                _mm256_load_si256((const __m256i *)(w + k * 16)), q))
                LDP_ACC(0); LDP_ACC(1); LDP_ACC(2); LDP_ACC(3);
                LDP_ACC(4); LDP_ACC(5); LDP_ACC(6); LDP_ACC(7);
#undef LDP_ACC
            }
            h01 = _mm256_hadd_epi32(a0, a1);
            h23 = _mm256_hadd_epi32(a2, a3);
            h45 = _mm256_hadd_epi32(a4, a5);
            h67 = _mm256_hadd_epi32(a6, a7);
            h0123 = _mm256_hadd_epi32(h01, h23);
            h4567 = _mm256_hadd_epi32(h45, h67);
            _mm256_storeu_si256((__m256i *)(dots + g * 8),
                                _mm256_add_epi32(_mm256_permute2x128_si256(h0123, h4567, 0x20),
                                                 _mm256_permute2x128_si256(h0123, h4567, 0x31)));
        }
        if (n16 < dim)
            for (r = 0; r < nx; r++)
                for (c = n16; c < dim; c++) dots[r] += (int32_t)qa[r][c] * (int32_t)qb[c];
        { /* distance_sq's expression, 4 rows per step (the same IEEE operations in the same order) */
            const __m256d vb = _mm256_set1_pd((sb * sb) * nb), vsb = _mm256_set1_pd(sb), two = _mm256_set1_pd(2.0);
            LDP_ALIGN32 double d4[4];
            for (r = 0; r < nx; r += 4) {
                const __m256d dot = _mm256_cvtepi32_pd(_mm_loadu_si128((const __m128i *)(dots + r)));
                const __m256d cross = _mm256_mul_pd(_mm256_mul_pd(two, _mm256_mul_pd(_mm256_loadu_pd(sa + r), vsb)), dot);
                const int lanes = nx - r < 4 ? nx - r : 4;
                int l;
                _mm256_store_pd(d4, _mm256_sub_pd(_mm256_add_pd(_mm256_loadu_pd(own + r), vb), cross));
                for (l = 0; l < lanes; l++) out[(size_t)(r + l) * (size_t)ny + (size_t)j] = d4[l];
            }
        }
    }
}
#endif

#if defined(__SSE2__) && !defined(LDP_PORTABLE)
#define LDP_BLOCK_SSE2 1
/* The block kernel with SSE2 (x86-64 without AVX2, and wasm, whose build maps SSE2 onto its SIMD):
 * the same widening and layout as the AVX2 kernel, 8 codes per step, 4 rows' lane sums combined by
 * a transpose. Integer arithmetic: distance_sq's value bit for bit. */
static __m128i sum4_sse2(__m128i a0, __m128i a1, __m128i a2, __m128i a3) {
    const __m128i s01 = _mm_add_epi32(_mm_unpacklo_epi32(a0, a1), _mm_unpackhi_epi32(a0, a1));
    const __m128i s23 = _mm_add_epi32(_mm_unpacklo_epi32(a2, a3), _mm_unpackhi_epi32(a2, a3));
    return _mm_add_epi32(_mm_unpacklo_epi64(s01, s23), _mm_unpackhi_epi64(s01, s23));
}

static void distance_sq_block_sse2(const ldp_santext_table *t, const int32_t *xs, int nx, const int32_t *ys,
                                   int32_t ny, int32_t readable, double *out) {
    const int32_t dim = t->dim, n8 = dim / 8 * 8, groups = (nx + 7) / 8;
    LDP_ALIGN32 int16_t wide[LDP_DIST_BLOCK * BLOCK_WIDE_DIM];
    const int8_t *qa[LDP_DIST_BLOCK];
    double sa[LDP_DIST_BLOCK], own[LDP_DIST_BLOCK]; /* s_a, s_a^2 |q_a|^2 */
    int32_t r, c, j, g;
    widen_rows(t, xs, nx, 8, n8, wide, qa, sa, own);
    for (j = 0; j < ny; j++) {
        const int32_t y = ys[j];
        const int8_t *qb = t->emb_q + (size_t)y * (size_t)dim;
        const double sb = (double)t->emb_scale[y], nb = (double)t->emb_sqnorm[y];
        int32_t dots[LDP_DIST_BLOCK];
        if (j + 8 < readable) prefetch_bytes(t->emb_q + (size_t)ys[j + 8] * (size_t)dim, (size_t)dim);
        for (g = 0; g < groups; g++) {
            const int16_t *wg = wide + (size_t)g * (size_t)n8 * 8;
            __m128i a0 = _mm_setzero_si128(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
            for (c = 0; c < n8; c += 8) {
                const __m128i b8 = _mm_loadl_epi64((const __m128i *)(qb + c));
                const __m128i q = _mm_srai_epi16(_mm_unpacklo_epi8(b8, b8), 8); /* sign-extended */
                const int16_t *w = wg + (size_t)c * 8;
#define LDP_ACC(k) a##k = _mm_add_epi32(a##k, _mm_madd_epi16(_mm_load_si128((const __m128i *)(w + k * 8)), q))
                LDP_ACC(0); LDP_ACC(1); LDP_ACC(2); LDP_ACC(3);
                LDP_ACC(4); LDP_ACC(5); LDP_ACC(6); LDP_ACC(7);
#undef LDP_ACC
            }
            _mm_storeu_si128((__m128i *)(dots + g * 8), sum4_sse2(a0, a1, a2, a3));
            _mm_storeu_si128((__m128i *)(dots + g * 8 + 4), sum4_sse2(a4, a5, a6, a7));
        }
        for (r = 0; r < nx; r++) {
            int32_t dot = dots[r];
            for (c = n8; c < dim; c++) dot += (int32_t)qa[r][c] * (int32_t)qb[c];
            out[(size_t)r * (size_t)ny + (size_t)j] = own[r] + (sb * sb) * nb - 2.0 * (sa[r] * sb) * (double)dot;
        }
    }
}
#endif

void ldp_distance_sq_block(const ldp_santext_table *t, const int32_t *xs, int nx, const int32_t *ys, int32_t ny,
                           int32_t readable, double *out) {
    int32_t j;
    int r;
#if defined(LDP_BLOCK_AVX2)
#if defined(LDP_DOT_AVX2_DISPATCH)
    if (__builtin_cpu_supports("avx2"))
#endif
        if (t->dim >= 16 && t->dim <= BLOCK_WIDE_DIM) {
            distance_sq_block_avx2(t, xs, nx, ys, ny, readable, out);
            return;
        }
#endif
#if defined(LDP_BLOCK_SSE2)
    if (nx > 1 && t->dim >= 8 && t->dim <= BLOCK_WIDE_DIM) {
        distance_sq_block_sse2(t, xs, nx, ys, ny, readable, out);
        return;
    }
#endif
    for (j = 0; j < ny; j++) {
        if (j + 8 < readable) prefetch_bytes(t->emb_q + (size_t)ys[j + 8] * (size_t)t->dim, (size_t)t->dim);
        for (r = 0; r < nx; r++) out[(size_t)r * (size_t)ny + (size_t)j] = distance_sq(t, xs[r], ys[j]);
    }
}

double ldp_distance(const ldp_santext_table *t, int32_t a, int32_t b) {
    const double d2 = distance_sq(t, a, b);
    return d2 > 0.0 ? sqrt(d2) : 0.0;
}

/* Ask for every cache line of a candidate's embedding at once: the distance loop is otherwise
 * bound by one memory round trip per line (measured: 75 % of sampling time at |V| = 30,522).
 * Into every cache level (locality 3), not the non-temporal hint 0: the line is read within a
 * few tokens' work, and with hint 0 it was often gone again by then. Interleaved A/B in one
 * process (benchmark bundles, 200,000 ids, CPU time, best of 7, 2 shared cores), us/token, hint 0
 * vs 3: MiniLM default split eps = 10 0.544 vs 0.343, eps = 15 0.385 vs 0.271; GloVe-50k eps = 3
 * 0.925 vs 0.791, eps = 10 1.138 vs 0.968. A hint only: the draws are unchanged. Always inlined:
 * out of line over prefetch_bytes, GCC found the call free of effects and deleted it (GloVe-50k
 * eps = 3 sampling 1.8x slower). */
LDP_ALWAYS_INLINE void prefetch_row(const int8_t *row, int32_t dim) { prefetch_bytes(row, (size_t)dim); }

/* Membership in a sorted row. Heads are short (K = 32 by default): every entry is compared, four
 * at a time with SSE2, with no branch and no load depending on another, which measured faster than
 * the binary search's chain of dependent loads. Long rows are binary-searched, each step choosing
 * the next offset with a mask rather than a branch (a random key would mispredict). Every path
 * gives the same answer. */
#define LINEAR_MEMBERSHIP_MAX 256
static int in_sorted(const int32_t *v, int32_t n, int32_t key) {
    if (n <= LINEAR_MEMBERSHIP_MAX) {
        int32_t i = 0, hit = 0;
#if defined(__SSE2__) && !defined(LDP_PORTABLE)
        /* four at a time (an -O2 build does not vectorise the plain loop) */
        const __m128i k4 = _mm_set1_epi32(key);
        __m128i acc = _mm_setzero_si128();
        for (; i + 4 <= n; i += 4)
            acc = _mm_or_si128(acc, _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(v + i)), k4));
        hit = _mm_movemask_epi8(acc) != 0;
#endif
        for (; i < n; i++) hit |= v[i] == key;
        return hit;
    } else {
        size_t lo = 0, len = (size_t)n;
        while (len > 1) {
            size_t half = len / 2;
            lo += half & ((size_t)0 - (size_t)(v[lo + half - 1] < key));
            len -= half;
        }
        return v[lo] == key;
    }
}

/* The same over a compact bundle's uint16 row, eight at a time with SSE2; a key outside [0, 65535]
 * is in no such row. */
static int in_sorted_u16(const uint16_t *v, int32_t n, int32_t key) {
    int32_t i = 0, hit = 0;
    if (key < 0 || key > 65535) return 0;
    if (n > LINEAR_MEMBERSHIP_MAX) {
        size_t lo = 0, len = (size_t)n;
        while (len > 1) {
            size_t half = len / 2;
            lo += half & ((size_t)0 - (size_t)(v[lo + half - 1] < key));
            len -= half;
        }
        return v[lo] == key;
    }
#if defined(__SSE2__) && !defined(LDP_PORTABLE)
    {
        const __m128i k8 = _mm_set1_epi16((short)(uint16_t)key);
        __m128i acc = _mm_setzero_si128();
        for (; i + 8 <= n; i += 8)
            acc = _mm_or_si128(acc, _mm_cmpeq_epi16(_mm_loadu_si128((const __m128i *)(v + i)), k8));
        hit = _mm_movemask_epi8(acc) != 0;
    }
#endif
    for (; i < n; i++) hit |= v[i] == key;
    return hit;
}

/* Whether key is in row x's head, in either stored form. */
static int in_head(const ldp_santext_table *t, int32_t x, int32_t key) {
    const size_t at = (size_t)x * (size_t)t->head_size;
    if (t->head_ids_u16 != NULL) return in_sorted_u16(t->head_ids_u16 + at, t->head_size, key);
    return in_sorted(t->head_ids + at, t->head_size, key);
}

/* Ask for accept_gamma[i] ahead of its use, in either stored form. */
LDP_ALWAYS_INLINE void prefetch_gamma(const ldp_santext_table *t, size_t i) {
    if (t->accept_gamma_f32 != NULL) prefetch_line(t->accept_gamma_f32 + i);
    else prefetch_line(t->accept_gamma + i);
}

/* The first of two trials whose probabilities multiply to exp(-e) (cluster_bounds.h): keep with
 * probability KEEP[q] / 2^32 >= exp(-q/32), one random word; q = 0 keeps without drawing. */
static int keep_trial(ldp_chacha *g, unsigned q) {
    return q == 0 || (uint64_t)ldp_next_u32_inline(g) < LDP_CLUSTER_KEEP[q];
}

/* Row x's bound for cluster c: cluster_gamma[x][c], q in 0..255. */
static unsigned row_cluster_units(const ldp_santext_table *t, int32_t x, unsigned c) {
    if (c >= (unsigned)t->n_clusters) c = 0; /* checked at load; memory-safe if mutated since */
    return t->cluster_gamma[(size_t)x * (size_t)t->n_clusters + c];
}

/* Row x's bound for tail candidate y's cluster. */
static unsigned cluster_units(const ldp_santext_table *t, int32_t x, int32_t y) {
    return row_cluster_units(t, x, t->tail_cluster[y]);
}

/* Row x's cluster weights N_c KEEP[q(x, c)] (N_c = start[c + 1] - start[c] outputs of cluster c):
 * their sum, and with cum != NULL their running sums cum[c]. The skip rows' odds (row_odds) and
 * their candidate draw (row_cum) must use the same weights. */
static uint64_t cluster_weights(const ldp_santext_table *t, int32_t x, const uint32_t *start,
                                uint64_t *cum) {
    const uint8_t *q = t->cluster_gamma + (size_t)x * (size_t)t->n_clusters;
    uint64_t sum = 0;
    int32_t c;
    for (c = 0; c < t->n_clusters; c++) {
        sum += (uint64_t)(start[c + 1] - start[c]) * LDP_CLUSTER_KEEP[q[c]];
        if (cum != NULL) cum[c] = sum;
    }
    return sum;
}

/* A refined row: its skip threshold and flag (as skip_p / skip_row, from the cells' bounds), then
 * per cluster the running sum of the clusters' weights up to it (the skip draw's: the sum over the
 * cluster's cells of N KEEP[q], computed once here rather than per batch, 1,024 products on
 * GloVe-50k) beside its cells' bounds: the draw finds a cluster by its sum and reads its cells'
 * bounds from the same cache line. */
typedef struct {
    uint64_t cum;
    uint8_t q[LDP_CELLS_PER_CLUSTER];
} refined_cluster;

typedef struct {
    uint64_t skip_p;
    uint32_t skip, unused;
    refined_cluster c[];
} refined_row;

/* A refined row's bound of cell j. */
LDP_ALWAYS_INLINE unsigned refined_bound(const refined_row *r, unsigned j) {
    return r->c[j / LDP_CELLS_PER_CLUSTER].q[j % LDP_CELLS_PER_CLUSTER];
}

#if defined(__SIZEOF_INT128__)
#define LDP_HAVE_U128 1
typedef unsigned __int128 ldp_u128;

/* Row x's odds that a proposal round's first success is a kept tail candidate rather than a head
 * proposal, A : B with A = T * S (T the tail mass, S the sum of KEEP over the row's n_T tail
 * positions) and B = H * n_T * 2^32 (H = (K + 1) 2^32 - T, the head mass): a round proposes the
 * tail with probability T / Z, then a tail position with probability 1 / n_T, kept with
 * probability KEEP / 2^32; or it proposes the head, with probability H / Z. Returns A, *n = A + B;
 * *keep = S and *n_tail = n_T. With rq != NULL (a refined row), KEEP of its cells' bounds. */
static ldp_u128 row_odds(const ldp_santext_table *t, int32_t x, const uint32_t *start,
                         const uint8_t *is_output, const refined_row *rq, ldp_u128 *n, uint64_t *keep,
                         uint64_t *n_tail) {
    const int32_t k = t->head_size;
    const uint8_t *q = t->cluster_gamma + (size_t)x * (size_t)t->n_clusters;
    const uint64_t tail = t->tail_mass[x], head = (((uint64_t)k + 1u) << 32) - tail;
    int32_t j;
    *keep = rq != NULL ? rq->c[t->n_clusters - 1].cum : cluster_weights(t, x, start, NULL);
    *n_tail = (uint64_t)t->n_outputs;
    for (j = 0; j < k; j++) {
        const int32_t h = ldp_head_id(t, (size_t)x * (size_t)k + (size_t)j);
        if (is_output != NULL ? (is_output[h >> 3] >> (h & 7)) & 1 : in_sorted(t->outputs, t->n_outputs, h)) {
            *keep -= LDP_CLUSTER_KEEP[rq != NULL ? refined_bound(rq, t->cell_of[h]) : q[t->tail_cluster[h]]];
            (*n_tail)--;
        }
    }
    *n = (ldp_u128)tail * *keep + (((ldp_u128)head * *n_tail) << 32);
    return (ldp_u128)tail * *keep;
}
#endif

/* A row skips refused rounds where its cluster trial refuses at least this many tail positions in
 * SKIP_MIN_REFUSED + 1 on average (n_T 2^32 >= (SKIP_MIN_REFUSED + 1) S): elsewhere the per-row
 * cluster weights cost more than the rounds they save. */
#define SKIP_MIN_REFUSED 2u

/* 1 and *p = floor(2^64 A / n) (row_odds) if row x skips its refused rounds, else 0 and *p = 0. */
static int skip_threshold(const ldp_santext_table *t, int32_t x, const uint32_t *start,
                          const uint8_t *is_output, const refined_row *rq, uint64_t *p) {
    *p = 0;
#if defined(LDP_HAVE_U128)
    if (t->n_outputs > t->head_size) {
        uint64_t keep, n_tail;
        ldp_u128 n;
        const ldp_u128 a = row_odds(t, x, start, is_output, rq, &n, &keep, &n_tail);
        /* P = floor(2^64 A / n), two 32-bit digits of the long division; 0 < A < n < 2^96
         * keeps every shifted remainder in 128 bits (and a row without head mass, A = n,
         * keeps its rounds) */
        if (a > 0 && a < n && (n >> 96) == 0 &&
            (ldp_u128)n_tail << 32 >= (ldp_u128)(SKIP_MIN_REFUSED + 1u) * keep) {
            const ldp_u128 r1 = (a << 32) % n;
            *p = ((uint64_t)((a << 32) / n) << 32) | (uint64_t)((r1 << 32) / n);
            return 1;
        }
    }
#else
    (void)t; (void)x; (void)start; (void)is_output; (void)rq;
#endif
    return 0;
}

static int32_t cells_per_cluster(const ldp_santext_table *t) {
    return t->n_clusters > 1 ? LDP_CELLS_PER_CLUSTER : 0;
}

size_t ldp_santext_cluster_order_size(const ldp_santext_table *t) {
    /* the masks, the skip thresholds, the cluster and cell starts, the sorted ids, their cells, the
     * outputs' cells, their clusters, the skip flags, and a bitmap of the outputs (for the build) */
    const size_t cells = (size_t)t->n_clusters * (size_t)cells_per_cluster(t);
    return (size_t)t->n_rows * 2u * sizeof(uint64_t) + ((size_t)t->n_clusters + 1u) * sizeof(uint32_t) +
           (cells + 1u) * sizeof(uint32_t) + (size_t)t->n_outputs * (sizeof(int32_t) + sizeof(uint16_t) + 1u) +
           (size_t)t->n_rows * sizeof(uint16_t) + (size_t)t->n_rows + ((size_t)t->n_rows + 7u) / 8u;
}

/* Each cluster's outputs (sorted[start[c]..start[c + 1]), ascending) split into s cells: cell j
 * holds the outputs nearer to pivot j (the output at position j n_c / s of the cluster) than to
 * every other pivot, the first on a tie. cell[i]: the cell (c s + j) of position i. Any split is
 * right (a refined bound is each cell's own nearest); this one, a few milliseconds at open, takes
 * GloVe-50k at eps = 3 from 9.1 to 5.5 distances per tail draw (k-means: 4.8). Out of memory: one
 * cell per cluster. */
static void split_cells(const ldp_santext_table *t, const int32_t *sorted, const uint32_t *start, int32_t s,
                        uint16_t *cell) {
    uint32_t widest = 0;
    int32_t c, i, j;
    double *d2;
    for (c = 0; c < t->n_clusters; c++)
        if (start[c + 1] - start[c] > widest) widest = start[c + 1] - start[c];
    d2 = (double *)malloc((size_t)s * (size_t)(widest > 0 ? widest : 1) * sizeof(double));
    for (c = 0; c < t->n_clusters; c++) {
        const int32_t at = (int32_t)start[c], n = (int32_t)(start[c + 1] - start[c]);
        int32_t pivots[LDP_DIST_BLOCK];
        if (d2 == NULL || n == 0) {
            for (i = 0; i < n; i++) cell[at + i] = (uint16_t)(c * s);
            continue;
        }
        for (j = 0; j < s; j++) pivots[j] = sorted[at + (int32_t)((int64_t)j * n / s)];
        ldp_distance_sq_block(t, pivots, (int)s, sorted + at, n, n, d2);
        for (i = 0; i < n; i++) {
            int32_t best = 0;
            for (j = 1; j < s; j++)
                if (d2[(size_t)j * (size_t)n + (size_t)i] < d2[(size_t)best * (size_t)n + (size_t)i]) best = j;
            cell[at + i] = (uint16_t)(c * s + best);
        }
    }
    free(d2);
}

/* 1 if row x's rounds propose its head often enough for its head rows to be worth asking for ahead
 * of its token (sample_in_order): at least 1/16 of a skip row's first successes, or of the other
 * rows' proposal units. */
LDP_ALWAYS_INLINE int head_likely(const ldp_santext_table *t, int32_t x) {
    if (t->skip_row != NULL && t->skip_row[x]) return t->skip_p[x] < (uint64_t)15 << 60;
    return t->tail_mass[x] < ((uint64_t)t->head_size + 1u) * ((uint64_t)15 << 28);
}

/* The parts of a cluster order's buffer (ldp_santext_cluster_order_size's layout). */
typedef struct {
    uint64_t *masks, *skip_p;
    uint32_t *start, *cell_start;
    int32_t *sorted;
    uint16_t *sorted_cell, *cell_of;
    uint8_t *cluster, *skip_row, *is_output;
} order_parts;

static order_parts order_layout(const ldp_santext_table *t, void *buf) {
    const int32_t n_cells = t->n_clusters * cells_per_cluster(t);
    order_parts o;
    o.masks = (uint64_t *)buf;
    o.skip_p = o.masks + t->n_rows;
    o.start = (uint32_t *)(o.skip_p + t->n_rows);
    o.cell_start = o.start + t->n_clusters + 1;
    o.sorted = (int32_t *)(o.cell_start + n_cells + 1);
    o.sorted_cell = (uint16_t *)(o.sorted + t->n_outputs);
    o.cell_of = o.sorted_cell + t->n_outputs;
    o.cluster = (uint8_t *)(o.cell_of + t->n_rows);
    o.skip_row = o.cluster + t->n_outputs;
    o.is_output = o.skip_row + t->n_rows;
    return o;
}

void ldp_santext_cluster_sort(ldp_santext_table *t, void *buf) {
    const int32_t n_cells = t->n_clusters * cells_per_cluster(t);
    int32_t s = cells_per_cluster(t);
    const order_parts o = order_layout(t, buf);
    uint32_t *start = o.start, *cell_start = o.cell_start;
    int32_t *sorted = o.sorted;
    uint16_t *sorted_cell = o.sorted_cell, *cell_of = o.cell_of;
    uint8_t *cluster = o.cluster, *is_output = o.is_output;
    uint32_t fill[LDP_MAX_CLUSTERS];
    int32_t c, j, x;
    for (c = 0; c <= t->n_clusters; c++) start[c] = 0;
    for (j = 0; j < t->n_outputs; j++) start[t->tail_cluster[t->outputs[j]] + 1]++;
    for (c = 0; c < t->n_clusters; c++) start[c + 1] += start[c];
    for (c = 0; c < t->n_clusters; c++) fill[c] = start[c];
    for (j = 0; j < t->n_outputs; j++) { /* a stable counting sort: ids ascend within a cluster */
        const int32_t y = t->outputs[j];
        const unsigned cy = t->tail_cluster[y];
        sorted[fill[cy]++] = y;
    }
    for (x = 0; x < t->n_rows; x++) cell_of[x] = 0;
    if (s > 0) { /* then by cell within each cluster, ids still ascending within a cell */
        int32_t *by_cell = (int32_t *)malloc((size_t)(t->n_outputs > 0 ? t->n_outputs : 1) * sizeof(int32_t));
        uint32_t *next = (uint32_t *)malloc((size_t)n_cells * sizeof(uint32_t));
        if (by_cell == NULL || next == NULL) {
            s = 0; /* out of memory: no cells */
        } else {
            split_cells(t, sorted, start, s, sorted_cell);
            for (c = 0; c <= n_cells; c++) cell_start[c] = 0;
            for (j = 0; j < t->n_outputs; j++) cell_start[sorted_cell[j] + 1]++;
            for (c = 0; c < n_cells; c++) cell_start[c + 1] += cell_start[c];
            for (c = 0; c < n_cells; c++) next[c] = cell_start[c];
            for (j = 0; j < t->n_outputs; j++) by_cell[next[sorted_cell[j]]++] = sorted[j];
            for (j = 0; j < t->n_outputs; j++) cell_of[sorted[j]] = sorted_cell[j];
            for (j = 0; j < t->n_outputs; j++) {
                sorted[j] = by_cell[j];
                sorted_cell[j] = cell_of[by_cell[j]];
            }
        }
        free(by_cell);
        free(next);
    }
    for (j = 0; j < t->n_outputs; j++) cluster[j] = t->tail_cluster[sorted[j]];
    for (j = 0; j < (t->n_rows + 7) / 8; j++) is_output[j] = 0;
    for (j = 0; j < t->n_outputs; j++)
        is_output[t->outputs[j] >> 3] |= (uint8_t)(1u << (t->outputs[j] & 7));
    t->sorted_outputs = sorted;
    t->sorted_cluster = cluster;
    t->cluster_start = start;
    /* cells only where the split was made (out of memory: none, the cluster bounds alone) */
    t->cells_per_cluster = s;
    t->n_cells = s > 0 ? n_cells : 0;
    t->cell_start = s > 0 ? cell_start : NULL;
    t->sorted_cell = s > 0 ? sorted_cell : NULL;
    t->cell_of = s > 0 ? cell_of : NULL;
}

void ldp_santext_cluster_rows(const ldp_santext_table *t, void *buf, int32_t first, int32_t end) {
    const int32_t k = t->head_size;
    const order_parts o = order_layout(t, buf);
    int32_t j, x;
    for (x = first; x < end; x++) { /* C > 64 shares bits (c % 64): a superset, still safe */
        uint64_t m = 0;
        for (j = 0; j < k; j++) {
            const int32_t h = ldp_head_id(t, (size_t)x * (size_t)k + (size_t)j);
            if ((o.is_output[h >> 3] >> (h & 7)) & 1) m |= (uint64_t)1 << (t->tail_cluster[h] & 63u);
        }
        o.masks[x] = m;
        o.skip_row[x] = (uint8_t)skip_threshold(t, x, o.start, o.is_output, NULL, &o.skip_p[x]);
    }
}

void ldp_santext_cluster_rows_done(ldp_santext_table *t, void *buf) {
    const order_parts o = order_layout(t, buf);
    int32_t j, x;
    t->head_clusters = o.masks;
#if defined(LDP_HAVE_U128)
    t->skip_p = o.skip_p;
    t->skip_row = o.skip_row;
#else
    t->skip_p = NULL;
    t->skip_row = NULL;
#endif
#if defined(LDP_PREFETCH)
    for (x = 0, j = 0; x < t->n_rows; x++) j += head_likely(t, x);
    t->look_ahead = j >= t->n_rows / 16;
#else
    (void)j; (void)x;
    t->look_ahead = 0; /* no prefetch instruction: the lookahead would only load */
#endif
}

void ldp_santext_cluster_order(ldp_santext_table *t, void *buf) {
    ldp_santext_cluster_sort(t, buf);
    ldp_santext_cluster_rows(t, buf, 0, t->n_rows);
    ldp_santext_cluster_rows_done(t, buf);
}

/* ---- Refined bounds (santext_sampler.h) --------------------------------------------------- */

#if defined(__GNUC__) || defined(__clang__)
#define REFINE_LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define REFINE_CAS(p, expect, value) \
    __atomic_compare_exchange_n((p), (expect), (value), 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)
#define REFINE_TAKE(p) __atomic_fetch_add((p), 1u, __ATOMIC_RELAXED)
#else /* other compilers: one thread per store */
#define REFINE_LOAD(p) (*(p))
#define REFINE_CAS(p, expect, value) (*(p) == *(expect) ? (*(p) = (value), 1) : (*(expect) = *(p), 0))
#define REFINE_TAKE(p) ((*(p))++)
#endif

/* first_above over a refined row's running sums. */
static unsigned first_above_refined(const refined_cluster *cum, unsigned n, uint64_t u) {
    unsigned j, c = 0, end;
    for (j = 7; j < n; j += 8) c += cum[j].cum <= u;
    c *= 8;
    end = c + 7 < n ? c + 7 : n;
    for (j = c; j < end; j++) c += cum[j].cum <= u;
    return c;
}

#define REFINE_CHUNK_SHIFT 8 /* rows per allocation: 2^8 */
/* a row is refined where its cells keep at most 3/4 of what its clusters keep (ldp_refine_row) */
#define REFINE_KEEP_NUM 3u
#define REFINE_KEEP_DEN 4u

/* A row's slot: its record, or one of these */
#define REFINE_UNSEEN (-1) /* not yet considered */
#define REFINE_NONE (-2)   /* considered: keeps its cluster bounds (not worth it, store full, broken) */

struct ldp_refine_store {
    int32_t *slot;          /* [n_rows]: the row's record, or REFINE_UNSEEN / REFINE_NONE */
    unsigned char **chunk;  /* [n_chunks]: allocated when first needed */
    size_t n_chunks, stride;
    uint32_t next, cap;     /* slots taken, most slots */
};

ldp_refine_store *ldp_refine_store_new(const ldp_santext_table *t, size_t max_bytes) {
    ldp_refine_store *s;
    size_t rows, x;
    if (t->n_cells <= 0 || t->n_rows <= 0 || t->cells_per_cluster != LDP_CELLS_PER_CLUSTER) return NULL;
    s = (ldp_refine_store *)calloc(1, sizeof *s);
    if (s == NULL) return NULL;
    s->stride = sizeof(refined_row) + (size_t)t->n_clusters * sizeof(refined_cluster);
    rows = max_bytes / s->stride;
    if (rows > (size_t)t->n_rows) rows = (size_t)t->n_rows;
    s->cap = (uint32_t)rows;
    s->n_chunks = (rows + ((size_t)1 << REFINE_CHUNK_SHIFT) - 1) >> REFINE_CHUNK_SHIFT;
    s->slot = (int32_t *)malloc((size_t)t->n_rows * sizeof(int32_t));
    s->chunk = (unsigned char **)calloc(s->n_chunks > 0 ? s->n_chunks : 1, sizeof(unsigned char *));
    if (s->slot == NULL || s->chunk == NULL) {
        ldp_refine_store_free(s);
        return NULL;
    }
    for (x = 0; x < (size_t)t->n_rows; x++) s->slot[x] = REFINE_UNSEEN;
    return s;
}

void ldp_refine_store_free(ldp_refine_store *s) {
    size_t i;
    if (s == NULL) return;
    if (s->chunk != NULL)
        for (i = 0; i < s->n_chunks; i++) free(s->chunk[i]);
    free(s->chunk);
    free(s->slot);
    free(s);
}

/* Row x's refined bounds, or NULL (read once per token: a row refined meanwhile by another thread
 * serves the next token). */
LDP_ALWAYS_INLINE const refined_row *refined_of(const ldp_santext_table *t, int32_t x) {
    const ldp_refine_store *s = t->refined;
    int32_t slot;
    if (s == NULL) return NULL;
    slot = REFINE_LOAD(&s->slot[x]);
    if (slot < 0) return NULL;
    return (const refined_row *)(s->chunk[(uint32_t)slot >> REFINE_CHUNK_SHIFT] +
                                 (size_t)((uint32_t)slot & ((1u << REFINE_CHUNK_SHIFT) - 1u)) * s->stride);
}

int ldp_refined_bound(const ldp_santext_table *t, int32_t x, int32_t c) {
    const refined_row *r;
    if (x < 0 || x >= t->n_rows || c < 0 || c >= t->n_cells) return -1;
    r = refined_of(t, x);
    return r != NULL ? (int)refined_bound(r, (unsigned)c) : -1;
}

int ldp_refined_skip(const ldp_santext_table *t, int32_t x) {
    const refined_row *r = x >= 0 && x < t->n_rows ? refined_of(t, x) : NULL;
    return r != NULL ? (int)r->skip : -1;
}

/* The second exponent of a tail candidate of row x at distance d under bound q: what accept_tail
 * draws against, and what a refined bound must keep >= 0 at its cell's nearest output. */
LDP_ALWAYS_INLINE double tail_exponent(const ldp_santext_table *t, int32_t x, unsigned q, double d) {
    const size_t slots = (size_t)t->head_size + 1u;
    return (t->half_epsilon * (d - t->tail_floor[x]) - LDP_CLUSTER_LOG[q]) +
           ldp_accept_gamma(t, (size_t)x * slots + (size_t)t->head_size);
}

/* Row x keeps its cluster bounds from now on (a later call does not consider it again). 0. */
static int refine_none(ldp_refine_store *s, int32_t x) {
    int32_t expect = REFINE_UNSEEN;
    (void)REFINE_CAS(&s->slot[x], &expect, (int32_t)REFINE_NONE);
    return 0;
}

int ldp_refine_row(const ldp_santext_table *t, int32_t x, const double *d2min) {
    ldp_refine_store *s = t->refined;
    const int32_t per = t->cells_per_cluster;
    unsigned char *chunk, *none = NULL;
    refined_row *r;
    uint64_t sum = 0, coarse = 0, cum[LDP_MAX_CLUSTERS];
    uint8_t q[LDP_MAX_CLUSTERS * LDP_CELLS_PER_CLUSTER];
    uint32_t slot;
    int32_t c, expect = REFINE_UNSEEN;
    if (s == NULL || x < 0 || x >= t->n_rows || REFINE_LOAD(&s->slot[x]) != REFINE_UNSEEN) return 0;
    for (c = 0; c < t->n_cells; c++) {
        const unsigned base = row_cluster_units(t, x, (unsigned)(c / per));
        const double d2 = d2min[c], d = d2 > 0.0 ? sqrt(d2) : 0.0;
        const uint64_t n = t->cell_start[c + 1] - t->cell_start[c];
        unsigned lo = base, hi = 255u;
        coarse += n * LDP_CLUSTER_KEEP[base];
        if (d2 == INFINITY) { /* no tail output in the cell: never kept, any bound */
            q[c] = (uint8_t)base;
        } else {
            if (!(tail_exponent(t, x, base, d) >= 0.0)) return refine_none(s, x); /* refused by the check */
            while (lo < hi) { /* the largest q whose exponent stays >= 0 (LOG increases with q) */
                const unsigned mid = (lo + hi + 1u) / 2u;
                if (tail_exponent(t, x, mid, d) >= 0.0) lo = mid;
                else hi = mid - 1u;
            }
            q[c] = (uint8_t)lo;
        }
        sum += n * LDP_CLUSTER_KEEP[q[c]];
        if ((c + 1) % per == 0) cum[c / per] = sum;
    }
    /* Worth its record (and the cache lines the draws then read) only where the cells keep at most
     * REFINE_KEEP_NUM / REFINE_KEEP_DEN of what the clusters keep: a tail draw computes fewer
     * distances in that ratio. Interleaved A/B, refining every row: MiniLM (2.8 -> 2.4 distances per sampled token at
     * eps = 10) 5-30 % slower, GloVe-50k at eps = 10 (4.7 -> 2.0) 34 % faster. */
    if (sum > coarse / REFINE_KEEP_DEN * REFINE_KEEP_NUM) return refine_none(s, x);
    if (REFINE_LOAD(&s->next) >= s->cap) return refine_none(s, x);
    slot = REFINE_TAKE(&s->next);
    if (slot >= s->cap) return refine_none(s, x);
    chunk = REFINE_LOAD(&s->chunk[slot >> REFINE_CHUNK_SHIFT]);
    if (chunk == NULL) {
        unsigned char *mine = (unsigned char *)malloc(s->stride << REFINE_CHUNK_SHIFT);
        if (mine == NULL) return 0; /* out of memory: considered again later */
        if (REFINE_CAS(&s->chunk[slot >> REFINE_CHUNK_SHIFT], &none, mine)) {
            chunk = mine;
        } else {
            free(mine);
            chunk = none;
        }
    }
    r = (refined_row *)(chunk + (size_t)(slot & ((1u << REFINE_CHUNK_SHIFT) - 1u)) * s->stride);
    for (c = 0; c < t->n_cells; c++) r->c[c / per].q[c % per] = q[c];
    for (c = 0; c < t->n_clusters; c++) r->c[c].cum = cum[c];
    r->skip = (uint32_t)skip_threshold(t, x, t->cluster_start, NULL, r, &r->skip_p);
    return REFINE_CAS(&s->slot[x], &expect, (int32_t)slot) ? 1 : 0;
}

int ldp_refine_rows(const ldp_santext_table *t, const int32_t *xs, size_t n) {
    enum { CHUNK = 256 };
    int32_t todo[LDP_DIST_BLOCK];
    double *d2 = NULL, *mins = NULL;
    size_t i, m = 0;
    for (i = 0; i < n; i++)
        if (xs[i] < 0 || xs[i] >= t->n_rows) return LDP_SAMPLE_ERR_ROW;
    if (t->refined == NULL || t->sorted_cell == NULL) return LDP_SAMPLE_OK;
    for (i = 0; i <= n; i++) {
        if (i < n) {
            size_t j;
            int seen = REFINE_LOAD(&t->refined->slot[xs[i]]) != REFINE_UNSEEN;
            for (j = 0; j < m && !seen; j++) seen = todo[j] == xs[i];
            if (!seen) todo[m++] = xs[i];
        }
        if (m > 0 && (m == LDP_DIST_BLOCK || i == n)) {
            int32_t i0, r;
            if (d2 == NULL) {
                d2 = (double *)malloc((size_t)LDP_DIST_BLOCK * CHUNK * sizeof(double));
                mins = (double *)malloc((size_t)LDP_DIST_BLOCK * (size_t)t->n_cells * sizeof(double));
                if (d2 == NULL || mins == NULL) break; /* out of memory: the cluster bounds */
            }
            for (r = 0; r < (int32_t)m * t->n_cells; r++) mins[r] = INFINITY;
            for (i0 = 0; i0 < t->n_outputs; i0 += CHUNK) {
                const int32_t i1 = t->n_outputs - i0 > CHUNK ? i0 + CHUNK : t->n_outputs;
                ldp_distance_sq_block(t, todo, (int)m, t->sorted_outputs + i0, i1 - i0, t->n_outputs - i0, d2);
                for (r = 0; r < (int32_t)m; r++) {
                    double *mr = mins + (size_t)r * (size_t)t->n_cells;
                    const double *dr = d2 + (size_t)r * (size_t)(i1 - i0);
                    int32_t p;
                    for (p = i0; p < i1; p++) {
                        const unsigned c = t->sorted_cell[p];
                        if (dr[p - i0] < mr[c] && !in_head(t, todo[r], t->sorted_outputs[p])) mr[c] = dr[p - i0];
                    }
                }
            }
            for (r = 0; r < (int32_t)m; r++) (void)ldp_refine_row(t, todo[r], mins + (size_t)r * (size_t)t->n_cells);
            m = 0;
        }
    }
    free(d2);
    free(mins);
    return LDP_SAMPLE_OK;
}

#if defined(LDP_HAVE_U128)
/* Uniform on {0, ..., n - 1} for 64-bit n >= 1: Lemire's multiply-and-reject on 64-bit words, one
 * draw almost always. ldp_uniform_u64's bitmask rejection (up to half its draws refused, out of
 * line) made GloVe-50k's skip rows 5-8 % slower at eps = 10 and 15 (interleaved A/B). */
static uint64_t uniform_u64_lemire(ldp_chacha *g, uint64_t n) {
    ldp_u128 m = (ldp_u128)ldp_next_u64_inline(g) * n;
    uint64_t low = (uint64_t)m;
    if (low < n) {
        const uint64_t threshold = (0u - n) % n;
        while (low < threshold) {
            m = (ldp_u128)ldp_next_u64_inline(g) * n;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

int ldp_fraction_trial(ldp_chacha *g, ldp_u128 r, ldp_u128 n) {
    /* U < r / n for U uniform in [0, 1), 32 bits of U at a time against the next digit of r / n:
     * a smaller word decides U < r / n, a larger one U > r / n, an equal one leaves the rest */
    for (;;) {
        uint32_t d, v;
        if (r == 0) return 0;
        d = (uint32_t)((r << 32) / n);
        r = (r << 32) % n;
        v = ldp_next_u32_inline(g);
        if (v != d) return v < d;
    }
}

/* Bernoulli(A / n) of row_odds, for a skip row: U = (w + V) / 2^64 against skip_p = floor(2^64 A/n),
 * w's high word first; a tie of all 64 bits (probability 2^-64) compares V with the rest of the long
 * division (ldp_fraction_trial). */
static int skip_tail_first(ldp_chacha *g, const ldp_santext_table *t, int32_t x, const refined_row *rq) {
    const uint64_t p = rq != NULL ? rq->skip_p : t->skip_p[x];
    const uint32_t high = ldp_next_u32_inline(g);
    uint64_t w, keep, n_tail;
    ldp_u128 n, a;
    if (high != (uint32_t)(p >> 32)) return high < (uint32_t)(p >> 32);
    w = ((uint64_t)high << 32) | ldp_next_u32_inline(g);
    if (w != p) return w < p;
    a = row_odds(t, x, t->cluster_start, NULL, rq, &n, &keep, &n_tail);
    return ldp_fraction_trial(g, (((a << 32) % n) << 32) % n, n);
}
#endif

/* Per-row cumulative cluster weights of the skip path, cum[c] = sum over c' <= c of
 * N_c' KEEP[q(x, c')], for the rows of the tokens in flight (direct-mapped by row): up to 64 rows,
 * fewer where C > 128, so that the cache stays within 64 KiB (a heap block that malloc reuses from
 * call to call, below its mmap threshold). 16 rows measured 12 % slower than 256 on GloVe at
 * eps = 10; 64 within 3 % of 256. */
#define SKIP_CACHE_ROWS 64
#define SKIP_CACHE_BYTES 65536u
typedef struct {
    int32_t row[SKIP_CACHE_ROWS];
    uint32_t mask; /* rows in use - 1 (a power of two) */
    uint64_t *cum; /* [rows][n_clusters] */
} skip_cache;

/* The first c < n with u < cum[c], for cum non-decreasing and u < cum[n - 1]: the number of
 * cum[c] <= u, counted by blocks of eight (the last cum of each block, then the block's own), so
 * the compares neither branch nor wait on each other's loads, where a binary search over 64 cums
 * is six dependent loads. The same c, so the same draws. Interleaved A/B (200,000 Lee ids, CPU
 * time, best of 11-15, us/token), binary search vs blocks: GloVe-50k eps = 10 0.655 / 0.632 vs
 * 0.589 / 0.589, eps = 3 0.618 / 0.602 vs 0.606 / 0.592. */
static unsigned first_above(const uint64_t *cum, unsigned n, uint64_t u) {
    unsigned j, c = 0, end;
    for (j = 7; j < n; j += 8) c += cum[j] <= u;
    c *= 8;
    end = c + 7 < n ? c + 7 : n;
    for (j = c; j < end; j++) c += cum[j] <= u;
    return c;
}

static const uint64_t *row_cum(skip_cache *cache, const ldp_santext_table *t, int32_t x) {
    const unsigned slot = (unsigned)x & cache->mask;
    uint64_t *cum = cache->cum + (size_t)slot * (size_t)t->n_clusters;
    if (cache->row[slot] != x) {
        (void)cluster_weights(t, x, t->cluster_start, cum);
        cache->row[slot] = x;
    }
    return cum;
}

/* Outcome of one proposal round for input x. */
enum { PROPOSED_HEAD = 0, PROPOSED_TAIL = 1 };

/* Ask for what accept_tail reads of tail candidate cand of row x. */
LDP_ALWAYS_INLINE void prefetch_candidate(const ldp_santext_table *t, int32_t x, int32_t cand) {
    prefetch_row(t->emb_q + (size_t)cand * (size_t)t->dim, t->dim);
    /* and row x's own codes, scale and |q|^2, which the token's first distance otherwise waits
     * for (six lines at m = 384; cached for its later candidates, where the hints cost little).
     * Interleaved A/B, 200,000 Lee ids, CPU time, best of 11, us/token, without vs with: MiniLM
     * w = 0.9 eps = 10 0.280 / 0.287 vs 0.259 / 0.260, eps = 15 0.299 / 0.288 vs 0.276 / 0.266,
     * default split eps = 10 0.436 / 0.424 vs 0.411 / 0.379; GloVe-50k (one line) unchanged. */
    prefetch_row(t->emb_q + (size_t)x * (size_t)t->dim, t->dim);
    /* the distance's scale and |q|^2 into every level too: with the non-temporal hint the
     * distance waited on them (interleaved A/B, 200,000 Lee ids, us/token, hint 0 vs 3: MiniLM
     * default split eps = 10 0.314 vs 0.256, eps = 1 0.133 vs 0.109, w = 0.9 eps = 10 0.187 vs
     * 0.158; GloVe-50k eps = 3 0.545 vs 0.503) */
    prefetch_line(t->emb_scale + cand);
    prefetch_line(t->emb_sqnorm + cand);
    /* accept_tail reads these: often evicted meanwhile */
    prefetch_line(t->tail_floor + x);
    prefetch_line(t->emb_scale + x);
    prefetch_line(t->emb_sqnorm + x);
    prefetch_gamma(t, (size_t)x * ((size_t)t->head_size + 1u) + (size_t)t->head_size);
}

#if defined(LDP_HAVE_U128)
/* Largest K for which a head slot may be drawn from the realised masses (a stack array of them). */
#define DIRECT_HEAD_MAX 256

/* A head slot of row x drawn directly, slot j < K with probability mass_j / H (mass_j its realised
 * alias mass: its own thr[j] units and the 2^32 - thr[i] of every slot i aliased to it; H the
 * head's total, (K + 1) 2^32 - tail_mass): the law of propose_head's loop, without its draws of
 * the tail slot. Returns the slot, or a negative value on a broken table. */
static int32_t head_slot_by_mass(ldp_chacha *g, const ldp_santext_table *t, int32_t x) {
    const int32_t k = t->head_size;
    const size_t slots = (size_t)k + 1u, slot_at = (size_t)x * slots;
    const uint32_t *thr = t->alias_threshold + slot_at;
    uint64_t mass[DIRECT_HEAD_MAX + 1], u;
    size_t j;
    for (j = 0; j < slots; j++) mass[j] = 0;
    for (j = 0; j < slots; j++) {
        const uint32_t a = ldp_alias_slot(t, slot_at + j);
        if (a > (uint32_t)k) return -LDP_SAMPLE_ERR_INVARIANT;
        mass[j] += thr[j];
        mass[a] += ((uint64_t)1 << 32) - thr[j];
    }
    for (j = 1; j < (size_t)k; j++) mass[j] += mass[j - 1];
    if (mass[k - 1] == 0) return -LDP_SAMPLE_ERR_INVARIANT; /* no head mass: never proposed */
    u = uniform_u64_lemire(g, mass[k - 1]);
    return (int32_t)first_above(mass, (unsigned)k, u);
}
#endif

/* A head proposal for row x: the alias slot drawn again until it is not the tail (slot j then has
 * probability mass_j / (total - tail_mass), so j overall mass_j / total, as a single alias draw;
 * total > tail_mass here, and each draw is a head slot with probability >= 2^-32 / (K + 1)), then
 * its acceptance exp(-gamma_j). 1: accepted, *y set; 0: refused; negative on a broken table.
 * Where the tail holds more than three quarters of the row's units, that loop would draw the tail
 * slot over and over (98 % of the units for GloVe-50k rows at eps = 10: 47 draws of two words per
 * head proposal), and the slot is drawn from the head's masses instead (head_slot_by_mass). */
LDP_ALWAYS_INLINE int propose_head(ldp_chacha *g, const ldp_santext_table *t, int32_t x, int32_t *y) {
    const int32_t k = t->head_size;
    const uint32_t slots = (uint32_t)k + 1u;
    const size_t slot_at = (size_t)x * slots;
    const uint32_t *thr = t->alias_threshold + slot_at;
    uint64_t tries = (uint64_t)1 << 48;
    uint32_t slot;
    int accept;
#if defined(LDP_HAVE_U128)
    if (k <= DIRECT_HEAD_MAX && t->tail_mass[x] > ((uint64_t)slots * 3u << 30)) {
        const int32_t s = head_slot_by_mass(g, t, x);
        if (s < 0) return s;
        slot = (uint32_t)s;
    } else
#endif
    do {
        if (tries-- == 0) return -LDP_SAMPLE_ERR_INVARIANT;
        slot = ldp_uniform_u32_inline(g, slots);
        /* The range checks below re-assert what the table check validated: they cost a compare
         * each and keep memory safe even if a caller mutates the arrays later. */
        if (ldp_next_u32_inline(g) >= thr[slot]) slot = ldp_alias_slot(t, slot_at + slot);
        if (slot > (uint32_t)k) return -LDP_SAMPLE_ERR_INVARIANT;
    } while (slot == (uint32_t)k);
    accept = ldp_bernoulli_exp(g, ldp_accept_gamma(t, slot_at + slot));
    if (accept < 0) return -LDP_SAMPLE_ERR_INVARIANT;
    if (accept) {
        const int32_t id = ldp_head_id(t, (size_t)x * (size_t)k + slot);
        if (id < 0 || id >= t->n_rows) return -LDP_SAMPLE_ERR_INVARIANT;
        *y = id;
    }
    return accept;
}

/* Draw proposals for row x until one is either an accepted head slot (*y set, PROPOSED_HEAD) or a
 * tail candidate (*y set, its embedding prefetched, PROPOSED_TAIL). Negative on a broken table. */
static int propose(ldp_chacha *g, const ldp_santext_table *t, int32_t x, int32_t *y, const refined_row *rq) {
    const int32_t k = t->head_size;
    const uint32_t slots = (uint32_t)k + 1u;
    const uint64_t tail_mass = t->tail_mass[x];
    const uint32_t tail_high = (uint32_t)(tail_mass >> 32), tail_low = (uint32_t)tail_mass;
    for (;;) {
        /* The alias proposal, tail first: the pair (slot, word) is uniform on (K+1) 2^32 units,
         * and the tail's realised mass is tail_mass[x] of them, so "pair < tail_mass" has exactly
         * the tail's probability, without reading the alias row (at large eps nearly every round
         * is a tail round). Otherwise a head slot is proposed (propose_head). */
        uint32_t slot = ldp_uniform_u32_inline(g, slots);
        /* the word is needed only when the slot alone does not decide (slot == tail_mass >> 32) */
        int tail = slot != tail_high ? slot < tail_high : ldp_next_u32_inline(g) < tail_low;
        if (!tail) {
            const int r = propose_head(g, t, x, y);
            if (r != 0) return r < 0 ? r : PROPOSED_HEAD;
        } else {
            int32_t cand;
            /* at most K of the n_outputs > K candidates are head members: 64 n + 1024 rounds
             * without a tail member have probability below e^-64 unless the table is broken */
            uint64_t tries = 64u * (uint64_t)t->n_outputs + 1024u;
            if (t->n_outputs <= k) return -LDP_SAMPLE_ERR_INVARIANT; /* tail slot must have mass 0 */
            if (t->sorted_outputs != NULL) {
                /* the same draw in cluster order: position i uniform over the outputs, then the
                 * cluster's trial, and the id read only for a kept candidate. Head members are
                 * drawn again before the trial, as below; a position whose cluster holds none of
                 * row x's head (head_clusters) cannot be one, so its id waits. */
                const uint64_t head_mask = t->head_clusters[x];
                uint32_t i;
                do {
                    if (tries-- == 0) return -LDP_SAMPLE_ERR_INVARIANT;
                    i = ldp_uniform_u32_inline(g, (uint32_t)t->n_outputs);
                } while (((head_mask >> (t->sorted_cluster[i] & 63u)) & 1u) &&
                         in_head(t, x, t->sorted_outputs[i]));
                if (!keep_trial(g, rq != NULL ? refined_bound(rq, t->sorted_cell[i])
                                              : row_cluster_units(t, x, t->sorted_cluster[i])))
                    continue;
                cand = t->sorted_outputs[i];
                if (cand < 0 || cand >= t->n_rows) return -LDP_SAMPLE_ERR_INVARIANT;
            } else {
                do { /* uniform over outputs \ head by rejection of head members */
                    if (tries-- == 0) return -LDP_SAMPLE_ERR_INVARIANT;
                    cand = t->outputs[ldp_uniform_u32_inline(g, (uint32_t)t->n_outputs)];
                    if (cand < 0 || cand >= t->n_rows) return -LDP_SAMPLE_ERR_INVARIANT;
                } while (in_head(t, x, cand));
                /* the first trial of the tail acceptance (santext_sampler.h): one random word, no
                 * distance; q = 0 (no bound, every older bundle) draws nothing */
                if (!keep_trial(g, cluster_units(t, x, cand))) continue;
            }
            prefetch_candidate(t, x, cand);
            *y = cand;
            return PROPOSED_TAIL;
        }
    }
}

#if defined(LDP_HAVE_U128)
/* propose() for a skip row (skip_row[x] = 1): the first success of propose()'s rounds is decided
 * at once (skip_tail_first). A kept tail candidate is drawn over the tail positions with weight
 * KEEP (a cluster by its weight N_c KEEP[q], a uniform position in it, a head member drawn again)
 * and goes to the distance with the same second trial; a head proposal is propose()'s. The rounds
 * a cluster trial refuses change nothing in which success comes first, so the output has the same
 * distribution; they are only not drawn. */
static int propose_skip(ldp_chacha *g, const ldp_santext_table *t, int32_t x, int32_t *y,
                        skip_cache *cache, const refined_row *rq) {
    for (;;) {
        if (skip_tail_first(g, t, x, rq)) {
            const uint64_t *cum = rq != NULL ? NULL : row_cum(cache, t, x);
            const uint64_t head_mask = t->head_clusters[x];
            uint64_t tries = 64u * (uint64_t)t->n_outputs + 1024u;
            uint32_t i;
            int32_t cand;
            unsigned c;
            do {
                const uint64_t u = uniform_u64_lemire(g, rq != NULL ? rq->c[t->n_clusters - 1].cum
                                                                    : cum[t->n_clusters - 1]);
                if (tries-- == 0) return -LDP_SAMPLE_ERR_INVARIANT;
                if (rq != NULL) { /* a cluster by its weight, then u's place in it picks the cell */
                    uint64_t r;
                    int32_t cell, last;
                    const uint8_t *q;
                    c = first_above_refined(rq->c, (unsigned)t->n_clusters, u);
                    r = u - (c > 0 ? rq->c[c - 1].cum : 0);
                    cell = (int32_t)c * LDP_CELLS_PER_CLUSTER;
                    last = cell + LDP_CELLS_PER_CLUSTER - 1;
                    q = rq->c[c].q - cell;
                    for (; cell < last; cell++) {
                        const uint64_t w = (uint64_t)(t->cell_start[cell + 1] - t->cell_start[cell]) *
                                           LDP_CLUSTER_KEEP[q[cell]];
                        if (r < w) break;
                        r -= w;
                    }
                    i = t->cell_start[cell] +
                        ldp_uniform_u32_inline(g, t->cell_start[cell + 1] - t->cell_start[cell]);
                } else {
                    c = first_above(cum, (unsigned)t->n_clusters, u);
                    i = t->cluster_start[c] +
                        ldp_uniform_u32_inline(g, t->cluster_start[c + 1] - t->cluster_start[c]);
                }
            } while (((head_mask >> (c & 63u)) & 1u) && in_head(t, x, t->sorted_outputs[i]));
            cand = t->sorted_outputs[i];
            if (cand < 0 || cand >= t->n_rows) return -LDP_SAMPLE_ERR_INVARIANT;
            prefetch_candidate(t, x, cand);
            *y = cand;
            return PROPOSED_TAIL;
        } else {
            const int r = propose_head(g, t, x, y);
            if (r != 0) return r < 0 ? r : PROPOSED_HEAD;
        }
    }
}
#endif

/* propose_skip() where the row skips and the pipeline has its cluster weights, else propose(). */
static int propose_any(ldp_chacha *g, const ldp_santext_table *t, int32_t x, int32_t *y,
                       skip_cache *cache, const refined_row *rq) {
#if defined(LDP_HAVE_U128)
    if (cache != NULL && (rq != NULL ? rq->skip : t->skip_row[x])) return propose_skip(g, t, x, y, cache, rq);
#endif
    return propose(g, t, x, y, rq);
}

/* Bernoulli(exp(-e)) for e >= 0 (-1 for a negative or NaN e), in two trials as the cluster
 * bound's: j = floor(32 e) (at most 255), one random word against KEEP[j], then the exact
 * ldp_bernoulli_exp of e - LOG[j], which is in [0, 1/32] + 2^-49 for e < 8 (one word, mostly).
 * The product is exp(-e) up to LOG[j]'s rounding (< 2^-49 relative, in the stated tolerance);
 * measured 7-9 % faster than ldp_bernoulli_exp(e) on the tail exponents of eps = 10-15, whose
 * integer part costs ldp_bernoulli_exp a loop. */
static int bernoulli_exp_by_table(ldp_chacha *g, double e) {
    unsigned j;
    if (!(e >= 0.0)) return -1;
    j = e < 255.0 / 32.0 ? (unsigned)(e * 32.0) : 255u; /* exact scaling; truncation = floor */
    if (!keep_trial(g, j)) return 0;
    return ldp_bernoulli_exp(g, e - LDP_CLUSTER_LOG[j]);
}

double ldp_tail_exponent(const ldp_santext_table *t, int32_t x, int32_t y, double d) {
    return tail_exponent(t, x, cluster_units(t, x, y), d);
}

/* Accept tail candidate y for row x, which passed the cluster trial KEEP[q] / 2^32 in propose(),
 * with probability exp(-(eps/2 (d(x,y) - floor) - LOG[q] + gamma_K)): 1 accept, 0 reject,
 * negative if the floor or the cluster bound was not a lower bound (broken table). The bound
 * holds for the computed d (precompute leaves the margin) and LOG[q] <= q/32, and rounding is
 * monotone, so the exponent computed here is >= 0 whenever the table is right. With q = 0 it is
 * the plain tail's exponent, bit for bit; with C > 1 the trial itself is bernoulli_exp_by_table's.
 * rq: the bounds the candidate was kept under (refined, or the cluster's) */
static int accept_tail(ldp_chacha *g, const ldp_santext_table *t, int32_t x, int32_t y, const refined_row *rq) {
    double g_tail = tail_exponent(t, x, rq != NULL ? refined_bound(rq, t->cell_of[y]) : cluster_units(t, x, y),
                                  ldp_distance(t, x, y));
    /* the table trial only where the bundle has tail clusters: their builds state its rounding
     * in the tolerance; older bundles (C = 1) keep the exact trial their tolerance was made for */
    int accept = t->n_clusters > 1 ? bernoulli_exp_by_table(g, g_tail) : ldp_bernoulli_exp(g, g_tail);
    return accept < 0 ? -LDP_SAMPLE_ERR_INVARIANT : accept;
}

/* Start sampling x: 1 if *y is final (kept in the clear or an accepted head slot), 0 if *y is a
 * pending tail candidate, negative on error. */
static int start(ldp_chacha *g, const ldp_santext_table *t, int32_t x, int32_t *y, skip_cache *cache,
                 const refined_row *rq) {
    int r;
    if (x < 0 || x >= t->n_rows) return -LDP_SAMPLE_ERR_ROW;
    if (t->keep_row[x] && !ldp_bernoulli(g, t->p)) { /* SanText+: V_N kept w.p. 1 - p */
        *y = x;
        return 1;
    }
    r = propose_any(g, t, x, y, cache, rq);
    return r < 0 ? r : (r == PROPOSED_HEAD);
}

/* Continue with a pending tail candidate *y: same return values as start(). */
static int resume(ldp_chacha *g, const ldp_santext_table *t, int32_t x, int32_t *y, skip_cache *cache,
                  const refined_row *rq) {
    int r = accept_tail(g, t, x, *y, rq);
    if (r != 0) return r; /* accepted (1) or error */
    r = propose_any(g, t, x, y, cache, rq);
    return r < 0 ? r : (r == PROPOSED_HEAD);
}

/* Positions [0, n) of xs in ascending order of their row, ties in position order: an LSD radix sort
 * by bytes of the row id (every xs[i] in [0, n_rows)). order and tmp hold n entries each. Where
 * rows and positions fit 16 bits each (n <= 65,536 and n_rows <= 65,536: the bench bundles), the
 * sort carries key = row << 16 | position and returns 1: the passes and the sampler then read
 * every row from its key in order, where reading xs[order[i]] waited on a miss per token (13 % of
 * a grouped call's time on MiniLM). Otherwise order holds positions and it returns 0. The same
 * permutation either way, so the same draws. */
static int order_by_row(const int32_t *xs, size_t n, int32_t n_rows, uint32_t *order, uint32_t *tmp) {
    uint32_t *out = order;
    size_t count[257], i;
    unsigned shift;
#if defined(LDP_ORDER_POSITIONS) /* the portable build's cross check of the two */
    const int packed = 0;
#else
    const int packed = (uint32_t)(n_rows - 1) <= 0xFFFFu && n <= 0x10000u;
#endif
    if (packed) {
        for (i = 0; i < n; i++) order[i] = ((uint32_t)xs[i] << 16) | (uint32_t)i;
        for (shift = 16; shift < 32 && ((uint32_t)(n_rows - 1) >> (shift - 16)) != 0; shift += 8) {
            uint32_t *swap;
            for (i = 0; i < 257; i++) count[i] = 0;
            for (i = 0; i < n; i++) count[((order[i] >> shift) & 255u) + 1]++;
            for (i = 0; i < 256; i++) count[i + 1] += count[i];
            for (i = 0; i < n; i++) tmp[count[(order[i] >> shift) & 255u]++] = order[i];
            swap = order;
            order = tmp;
            tmp = swap;
        }
    } else {
        for (i = 0; i < n; i++) order[i] = (uint32_t)i;
        for (shift = 0; shift < 32 && ((uint32_t)(n_rows - 1) >> shift) != 0; shift += 8) {
            uint32_t *swap;
            for (i = 0; i < 257; i++) count[i] = 0;
            for (i = 0; i < n; i++) count[(((uint32_t)xs[order[i]] >> shift) & 255u) + 1]++;
            for (i = 0; i < 256; i++) count[i + 1] += count[i];
            for (i = 0; i < n; i++) tmp[count[((uint32_t)xs[order[i]] >> shift) & 255u]++] = order[i];
            swap = order;
            order = tmp;
            tmp = swap;
        }
    }
    if (order != out)
        for (i = 0; i < n; i++) out[i] = order[i];
    return packed;
}

/* A call of at least ORDER_MIN tokens takes them grouped by row, ORDER_WINDOW at a time (two
 * uint32 per token of scratch, 512 KiB): the tokens of one row then share its cluster weights
 * (computed once instead of once per token), its alias, bound and embedding rows and their near
 * candidates, all still in cache. Each token still runs the same procedure on its own fresh
 * draws, so the outputs have the same distribution and are independent (as for the pipeline
 * below, only the order in which tokens take draws from the stream changes). Interleaved A/B on
 * the bench bundles (200,000 Lee ids, the median of 11 per-run ratios of CPU time), grouped by
 * windows of 65,536 vs input order: GloVe-50k eps = 3 0.86, eps = 10 0.74, eps = 15 0.84, MiniLM
 * eps = 3-15 0.85-0.93, eps = 1 0.96-1.04 in every bundle; windows of 16,384 gain 0.89 and 0.95
 * on GloVe eps = 3 and MiniLM w = 0.9 eps = 15, windows of 512 or 4,096 nothing (the rows whose
 * tokens gain are rare words, which recur far apart). */
#define ORDER_WINDOW 65536u
#define ORDER_MIN 8192u

/* Many tokens at once, interleaved: up to PIPELINE tokens wait on a prefetched tail candidate
 * while the others proceed, so memory latency overlaps. Each token still runs exactly the same
 * procedure (start(), then resume() until final) on its own fresh random draws, so every output
 * has the same distribution and the outputs are independent; only the order of draws from the
 * stream differs.
 *
 * Eight in flight, not more: each pending candidate has asked for its whole embedding row (six
 * cache lines at m = 384), and sixteen rows at once outrun the core's outstanding-miss capacity, so
 * prefetches queue behind each other. Measured, interleaved A/B (benchmarks/bench_santext.py
 * bundles, 200,000 tokens, CPU time, 2 shared cores): MiniLM default split eps = 10 0.72 -> 0.55
 * us/token, w = 0.9 eps = 15 0.49 -> 0.37, eps = 1 0.235 -> 0.20; GloVe-50k eps = 10 1.37 -> 1.21.
 * The pipeline depth sets the order in which tokens take draws from the stream, so a seed gives
 * other (equally distributed) outputs than with sixteen. */
#define PIPELINE 8

/* Looking ahead of start(), in calls too short to be grouped by row: a token's first rounds read
 * its row's odds (SanText+ flag, tail mass, skip odds) and, for a head proposal, lines of its
 * alias thresholds, slots, exponents and head ids, each load waiting on the one before (slot,
 * threshold, alias, exponent), each a miss where the tokenizer and detokenizer of a one-document
 * call ran in between. For the token GATE_AHEAD positions on, the odds are asked for; for the
 * token ROW_AHEAD on, whose odds have arrived meanwhile, its whole head rows, where its rounds are
 * likely to propose the head (head_likely). Only in tables where at least 1/16 of the rows are
 * (t->look_ahead: eps = 15, GloVe-50k at eps = 3 and 10; in wasm too, whose hints are loads);
 * elsewhere it found nothing to ask for and cost 1-5 %. Grouped calls find a row's lines in cache
 * from its previous token, and were slower with it (GloVe-50k eps = 3 1.06). Hints only: the draws
 * are unchanged. Interleaved A/B of two builds (one ldp_sanitize per document over the 300 bench
 * documents, median per-run ratio, each build loaded first in one of two runs): MiniLM default
 * split eps = 15 0.85-0.89, frequency split eps = 15 0.94-0.98, GloVe-50k eps = 10 0.90-0.95,
 * eps = 15 0.86-0.89, eps = 1-3 and MiniLM eps = 10 0.98-1.03. Asking for the head rows of
 * every token instead cost eps = 1 4-10 %; two or twelve positions ahead measured the same. */
#define GATE_AHEAD 8
#define ROW_AHEAD 4

/* Ask for what start() reads first of row x, and what head_likely() reads. */
LDP_ALWAYS_INLINE void prefetch_odds(const ldp_santext_table *t, int32_t x) {
    prefetch_line(t->keep_row + x);
    prefetch_line(t->tail_mass + x);
    if (t->skip_row != NULL) {
        prefetch_line(t->skip_row + x);
        prefetch_line(t->skip_p + x);
    }
}

/* Ask for every line of row x's alias thresholds and slots, acceptance exponents and head ids. */
LDP_ALWAYS_INLINE void prefetch_head_rows(const ldp_santext_table *t, int32_t x) {
    const size_t k = (size_t)t->head_size, slots = k + 1u, at = (size_t)x * slots;
    prefetch_bytes(t->alias_threshold + at, slots * sizeof *t->alias_threshold);
    if (t->alias_index_u8 != NULL) prefetch_bytes(t->alias_index_u8 + at, slots);
    else prefetch_bytes(t->alias_index + at, slots * sizeof *t->alias_index);
    if (t->accept_gamma_f32 != NULL) prefetch_bytes(t->accept_gamma_f32 + at, slots * sizeof(float));
    else prefetch_bytes(t->accept_gamma + at, slots * sizeof(double));
    if (t->head_ids_u16 != NULL) prefetch_bytes(t->head_ids_u16 + (size_t)x * k, k * sizeof(uint16_t));
    else prefetch_bytes(t->head_ids + (size_t)x * k, k * sizeof(int32_t));
}

/* The lookahead from token i of n in input order. */
LDP_ALWAYS_INLINE void prefetch_ahead(const ldp_santext_table *t, const int32_t *xs, size_t i, size_t n) {
    if (i + GATE_AHEAD < n) prefetch_odds(t, xs[i + GATE_AHEAD]);
    if (i + ROW_AHEAD < n) {
        const int32_t x = xs[i + ROW_AHEAD];
        if (head_likely(t, x)) prefetch_head_rows(t, x);
    }
}

/* The n tokens at positions order[0..n) (0..n without order), in the pipeline. Tokens in row order
 * find their rows in cache from the token before; the lookahead is for the others. */
static int sample_in_order(ldp_chacha *g, const ldp_santext_table *t, const int32_t *xs,
                           int32_t *ys, const uint32_t *order, int packed, size_t n, size_t *failed_at,
                           skip_cache *cache) {
    const int ahead = t->look_ahead && order == NULL;
    size_t pending[PIPELINE], next = 0;
    int32_t pending_x[PIPELINE];
    const refined_row *bounds[PIPELINE];
    int active = 0, i, r = 0;
    while (r >= 0 && (next < n || active > 0)) {
        while (active < PIPELINE && next < n) {
            /* order: positions, or with packed, row << 16 | position (order_by_row) */
            const uint32_t key = order != NULL ? order[next] : 0u;
            const size_t pos = order == NULL ? next : packed ? (size_t)(key & 0xFFFFu) : (size_t)key;
            const int32_t x = packed ? (int32_t)(key >> 16) : xs[pos];
            const refined_row *rq = refined_of(t, x);
            if (ahead) prefetch_ahead(t, xs, next, n);
            r = start(g, t, x, &ys[pos], cache, rq);
            if (r < 0) {
                *failed_at = pos;
                break;
            }
            if (r == 0) {
                bounds[active] = rq;
                pending_x[active] = x;
                pending[active++] = pos;
            }
            next++;
        }
        for (i = 0; r >= 0 && i < active;) {
            size_t pos = pending[i];
            r = resume(g, t, pending_x[i], &ys[pos], cache, bounds[i]);
            if (r < 0) *failed_at = pos;
            else if (r == 1) { /* done: swap-remove */
                pending[i] = pending[--active];
                pending_x[i] = pending_x[active];
                bounds[i] = bounds[active];
            } else {
                i++;
            }
        }
    }
    return r;
}

int ldp_santext_sample_many(ldp_chacha *g, const ldp_santext_table *t, const int32_t *xs,
                            int32_t *ys, size_t n, size_t *failed_at) {
    int r = 0;
    size_t i, w;
    uint32_t *order = NULL;
    skip_cache store, *cache = NULL;
    if (t->skip_row != NULL && n > 0) { /* out of memory: every row keeps its rounds */
        size_t rows = SKIP_CACHE_ROWS;
        while (rows > 1 && rows * (size_t)t->n_clusters * sizeof(uint64_t) > SKIP_CACHE_BYTES) rows /= 2;
        store.mask = (uint32_t)rows - 1u;
        store.cum = (uint64_t *)malloc(rows * (size_t)t->n_clusters * sizeof(uint64_t));
        if (store.cum != NULL) {
            for (i = 0; i < SKIP_CACHE_ROWS; i++) store.row[i] = -1;
            cache = &store;
        }
    }
    for (i = 0; i < n; i++)
        if (xs[i] < 0 || xs[i] >= t->n_rows) {
            *failed_at = i;
            r = -LDP_SAMPLE_ERR_ROW;
            break;
        }
    /* out of memory: input order */
    if (r == 0 && n >= ORDER_MIN) order = (uint32_t *)malloc(2u * ORDER_WINDOW * sizeof(uint32_t));
    for (w = 0; r >= 0 && w < n; w += ORDER_WINDOW) {
        const size_t m = n - w < ORDER_WINDOW ? n - w : ORDER_WINDOW;
        const int packed = order != NULL ? order_by_row(xs + w, m, t->n_rows, order, order + m) : 0;
        r = sample_in_order(g, t, xs + w, ys + w, order, packed, m, failed_at, cache);
        if (r < 0) *failed_at += w;
    }
    free(order);
    if (cache != NULL) free(store.cum);
    return r < 0 ? -r : LDP_SAMPLE_OK;
}
