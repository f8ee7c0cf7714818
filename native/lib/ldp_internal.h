/* libldptext internals shared by bundle.c, sanitizer.c and the C tests. */
#ifndef LDP_INTERNAL_H
#define LDP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "ldptext.h"
#include "santext_sampler.h"
#include "tokenizer.h"

/* safetensors dtype codes, in the bundle's layout order (decreasing rank) */
enum {
    LDP_DT_U64, LDP_DT_I64, LDP_DT_F64, LDP_DT_F32, LDP_DT_U32, LDP_DT_I32, LDP_DT_F16,
    LDP_DT_U16, LDP_DT_I16, LDP_DT_I8, LDP_DT_U8, LDP_DT_BOOL, LDP_DT_COUNT
};

#define LDP_MAX_NDIM 8

typedef struct {
    const char *name; /* decoded, NUL-terminated (may contain NUL: name_len) */
    size_t name_len;
    int dtype;
    int ndim;
    uint64_t shape[LDP_MAX_NDIM];
    uint64_t start, end; /* offsets in the data region */
    const char *sha256;  /* manifest's hex digest (64 chars) */
    const uint8_t *data; /* start of the array's bytes */
    size_t nbytes;
} ldp_array;

struct ldp_bundle {
    /* storage: a private copy (open_memory, or no mmap) or a read-only mapping */
    uint8_t *owned;
    void *map;
    size_t map_len;
    const uint8_t *data;
    size_t size;
    /* parsed header and manifest (the manifest's numbers point into the header's strings) */
    ldp_json_doc *header_doc, *manifest_doc;
    const ldp_json *manifest;
    ldp_array *arrays;
    size_t n_arrays;
    /* SanText, and the mechanisms on its engine */
    int mechanism; /* LDP_MECH_* */
    double epsilon, epsilon0, p, d_max, tolerance; /* p, d_max: NaN where not stated */
    int64_t head_size;
    /* TEM (tem.py): the threshold, the beta that chose it (NaN: none), per row -ln P(far branch)
     * and the number of outputs farther than gamma */
    double gamma, beta;
    const double *bot_gamma;
    const int32_t *bot_count;
    /* CusText (custext.py): the smallest group K, the similarity, per row its output set (-1:
     * a CusText+ stop word, kept; or not an input) */
    int64_t k;
    int cosine; /* 0: euclidean, 1: cosine */
    const int32_t *group_id;
    uint64_t *group_size; /* outputs per group id (owned), n_groups = largest id + 1 */
    size_t n_groups;
    ldp_santext_table table; /* borrows the arrays (compact ones in their stored form) */
    int32_t *emb_sqnorm;     /* owned, as are zero_clusters, tail_mass and emb_rows */
    void *emb_rows;          /* the sampler's cache-line copy of emb_q (bundle.c align_rows), or NULL */
    int adopted;             /* the arrays are the host's (ldp_host_bundle_adopt) */
    uint8_t *zero_clusters;/* V zeros for a bundle without tail clusters (C = 1), else NULL */
    uint64_t *tail_mass;   /* the sampler's derived tail masses (ldp_santext_tail_masses) */
    void *cluster_order;   /* the sampler's outputs in cluster order (ldp_santext_cluster_order) */
    /* table.refined (owned): refined bounds of checked rows, at most LDP_REFINE_MAX_BYTES
     * (santext_sampler.h); NULL without clusters */
    const uint8_t *valid_input, *sensitive;
    /* per row: 0 not yet checked, 1 its whole law checked and right, 2 refused (check.c); NULL
     * until the tables are checked. Written through a const bundle: a verdict is a cache. */
    uint8_t *row_state;
    /* the stated largest and median verbatim rates (NaN: none stated), and whether the bundle is
     * near identity (check.c ldp_near_identity: the stated median, else rows drawn at open; or most
     * valid inputs kept in the clear w.p. >= LDP_NEAR_IDENTITY_MEDIAN) */
    double verbatim_max, verbatim_median;
    /* the stated cap and tail (verbatim.py VerbatimRate): NaN where a bundle older than them states
     * none; the counts as doubles */
    double verbatim_cap, verbatim_p90, verbatim_p99, verbatim_above_0_5, verbatim_above_0_9;
    int weak_privacy;
    ldp_tokenizer *tokenizer;
    /* the trusted key that signed the manifest (ldp_bundle_info's key_id); has_signer is 0 for a
     * bundle adopted from the Python runtime, which verified the signature itself */
    uint8_t signer[32];
    int has_signer;
};

/* ldp_bundle_open_memory without the private copy: the bundle takes `data` (from malloc, `len`
 * bytes, which the caller must no longer touch) and frees it at close, or before returning an
 * error. For a host whose own copy is already private (the web wrapper's buffer in the wasm
 * heap), so that the bundle is resident once. */
int ldp_bundle_open_owned(uint8_t *data, size_t len, const uint8_t (*keys)[32], size_t n_keys,
                          int allow_weak_privacy, ldp_bundle **out);
/* ldp_bundle_open with the weak-privacy opt-in (ldp_bundle_open_expect's). */
int ldp_bundle_open_path(const char *path, const uint8_t (*keys)[32], size_t n_keys,
                         int allow_weak_privacy, ldp_bundle **out);

/* The first array named `name`, or NULL. */
const ldp_array *ldp_bundle_array(const ldp_bundle *b, const char *name);
size_t ldp_dtype_size(int dtype);
const char *ldp_dtype_code(int dtype);

/* The stated eps, eps0, p and D_max (and TEM's gamma and beta, CusText's similarity and group
 * sizes) against what the tables realise (check.c): LDP_OK, LDP_E_PARAMETER_MISMATCH,
 * LDP_E_NOMEM or LDP_E_RANDOM. The bundle's table and mechanism arrays must be complete and
 * checked. */
int ldp_check_realised(const ldp_bundle *b);

/* Whether a checked bundle is near identity (check.c): its stated median verbatim rate is at least
 * LDP_NEAR_IDENTITY_MEDIAN; or it states none and rows drawn at random show the median at least
 * that; or its kept-in-clear inputs are most of the valid inputs and kept with probability at least
 * that. *weak 0 or 1; LDP_OK or LDP_E_NOMEM. */
int ldp_near_identity(const ldp_bundle *b, int *weak);

/* Each row of xs[0..n) checked in full before its first draw, once per bundle (check.c): every
 * head slot and the tail against the mechanism's formula, the tail's floor and cluster bounds
 * against every tail output, the stated largest verbatim rate. LDP_OK, LDP_E_PARAMETER_MISMATCH
 * (a row is wrong: nothing may be drawn) or LDP_E_NOMEM. Every xs[i] in [0, n_rows). */
int ldp_check_rows_of(const ldp_bundle *b, const int32_t *xs, size_t n);

/* TEM's draws (tem.py TEMSanitizer._draw, in the same order of random draws): a far-branch
 * trial per token that has far outputs, then rounds of uniform candidates for the far tokens and
 * rounds of engine draws for the others, each round over the tokens still waiting, in order.
 * LDP_OK, LDP_E_NOMEM or LDP_E_SAMPLER. */
int ldp_tem_sample_many(ldp_chacha *g, const ldp_bundle *b, const int32_t *xs, int32_t *ys,
                        size_t n);

/* guarantee.py checked_tolerance: the stated tolerance plus the checks' float64 resolution,
 * tolerance + LDP_CHECK_RESOLUTION * (1 + eps * reach), reach the largest quantity eps multiplies in
 * the law the check compares (D_max, min(gamma, D_max), or 1 for CusText). A check accepts a
 * log-ratio off the formula by twice this; the report states it at the mechanism's reach
 * (ldp_report_tolerance). */
#define LDP_CHECK_RESOLUTION 0.5e-12
double ldp_checked_tolerance(const ldp_bundle *b, double reach);
/* ldp_report.tolerance: ldp_checked_tolerance at D_max (SanText, TEM) or 1 (CusText). */
double ldp_report_tolerance(const ldp_bundle *b);

/* The LDP level per token over any two inputs (ldp_report.worst_case_epsilon): eps * d_max
 * (SanText), eps * min(gamma, d_max) (TEM), +inf where none exists. */
double ldp_worst_case_epsilon(const ldp_bundle *b);

/* bundle.py's bundle_id: SHA-256 of the canonical signed manifest, 64 hex digits + NUL. */
int ldp_bundle_id(const ldp_bundle *b, char hex[65]);

/* Operating-system randomness: 0 on success. Linux and Android: the getrandom system call
 * (ldp_os_random_syscall), /dev/urandom where the kernel lacks it; BSDs and macOS: getentropy;
 * other POSIX systems (and emscripten, which backs it with crypto.getRandomValues): /dev/urandom. */
int ldp_os_random(uint8_t *out, size_t n);
/* The two Linux sources, separately testable: /dev/urandom (0 or -1), and the getrandom system
 * call (0; 1 where the kernel lacks it or a sandbox forbids it; -1 on another failure). */
int ldp_os_random_urandom(uint8_t *out, size_t n);
int ldp_os_random_syscall(uint8_t *out, size_t n);

#endif
