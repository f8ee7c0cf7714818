/* libldptext: on-device text sanitization with local differential privacy (SanText / SanText+,
 * and on the same exact engine TEM, CusText and CusText+), in C99. The same bundles, the same exact sampler and the same tokenization as the Python
 * runtime (`ldptext.Sanitizer`); see README.md "What is and is not protected" for the guarantee.
 *
 *   ldp_bundle *b;  ldp_sanitizer *s;  char *out;  size_t n;  ldp_report rep = LDP_REPORT_INIT;
 *   // keys: raw 32-byte keys; ldp_public_key_parse reads a .pub file's text into one
 *   if (ldp_bundle_open("glove-santext+.ldpb", keys, n_keys, &b) != LDP_OK) ...   // verifies
 *   if (ldp_sanitizer_new(b, &s) != LDP_OK) ...                                  // OS-seeded
 *   if (ldp_sanitize(s, text, strlen(text), &out, &n, &rep) == LDP_OK) { upload(out); ldp_free(out); }
 *   ldp_sanitizer_free(s);  ldp_bundle_close(b);
 *
 * Guarantee (per token, any two tokens x, x' of the bundle's input domain, any output y):
 *   SanText:  Pr[M(x)=y] <= exp(eps * d(x,x')) * Pr[M(x')=y]   (eps*d-MLDP; worst case eps*D_max)
 *   SanText+: the same for protected outputs y in V_S, with an extra eps0 = ln(1/p) across the
 *             sensitive / non-sensitive split; a non-sensitive token is released unchanged with
 *             probability 1 - p (no finite worst-case LDP level).
 *   TEM:      Pr[M(x)=y] <= exp(eps * min(d(x,x'), gamma)) * Pr[M(x')=y]   (eps*d-MLDP truncated
 *             at gamma; worst case eps*min(gamma, D_max))
 *   CusText:  Pr[M(x)=y] <= exp(eps) * Pr[M(x')=y] for x, x' in the same output set; the output
 *             reveals the output set (group) of its input: no bound across groups. CusText+ also
 *             releases its stop words unchanged (probability 1).
 * Tokens are sanitized independently; the number of tokens is not hidden. SanText: Yue et al. 2021,
 * "Differential Privacy for Text Analytics via Natural Text Sanitization" (Findings of ACL), as
 * presented in Yue 2023 (PhD thesis, Ohio State), section 2.4, Theorems 1-2. TEM: Carvalho et al.
 * 2021, "TEM: High Utility Metric Differential Privacy on Text" (the truncated exponential
 * mechanism). CusText: Chen et al. 2023, "A Customized Text Sanitization Mechanism with
 * Differential Privacy" (Findings of ACL), section 3. CMP and Mahalanobis (nearest-neighbour
 * search over noised vectors) and DP-BART run in the Python SDK only; this library refuses them
 * (LDP_E_MECHANISM).
 *
 * Bundles: ldp_bundle_open verifies, before anything is used, exactly what the Python loader
 * (sdk/ldptext/bundle.py, santext.py, santext_tables.py) verifies: the safetensors layout (length
 * prefix, the one canonical header its signed manifest implies, contiguous aligned offsets, no
 * trailing data), the manifest's canonical JSON, an Ed25519 signature by one of the trusted keys,
 * the SHA-256 of every array, dtypes and shapes, and the SanText tables' semantic invariants. Every
 * failure returns its own error code (ldp_strerror says which check failed). There is no way to load
 * an unsigned or untrusted bundle. The tokenizer stored in the bundle is parsed at open too.
 *
 * Randomness: ChaCha20 keyed from the operating system (getrandom / getentropy / /dev/urandom);
 * uniform integers by Lemire's rejection; acceptance by exact Bernoulli(exp(-gamma)) (Canonne,
 * Kamath, Steinke 2020). A forked child never continues its parent's stream: each sanitizer
 * notices a fork (a pid change, and on Linux a MADV_WIPEONFORK page) and rekeys before its next draw.
 *
 * Threads: an ldp_bundle is immutable after ldp_bundle_open and may be shared by any number of
 * threads (and sanitizers). An ldp_sanitizer holds a random stream and scratch buffers: use one
 * per thread (or serialise calls on it). The library has no global mutable state.
 *
 * Errors and text: messages never contain input text. Strings are UTF-8; invalid UTF-8 input is
 * refused (LDP_E_INVALID_UTF8), never passed through.
 *
 * Memory: strings returned through `char **out` are allocated by the library; release them with
 * ldp_free.
 *
 * Building against it: `make -C native install PREFIX=...` installs this header, the shared
 * library libldptext.so.N (SONAME, N = LDP_ABI_VERSION), the static libldptext.a and ldptext.pc.
 * Take the flags from pkg-config: `cc app.c $(pkg-config --cflags --libs ldptext)` links the
 * shared library; `cc app.c $(pkg-config --cflags --libs ldptext-static)` links libldptext.a into
 * the program (ldptext-static.pc); `cc -static app.c $(pkg-config --cflags --static --libs
 * ldptext)` links everything statically (libsodium, libutf8proc, -lm, -pthread, and libcrypto when
 * the library was built with SHA256=openssl). docs/c-library.md has a complete program.
 *
 * SHA-256 of the arrays: the library's own by default, on the CPU's SHA extensions where an x86-64
 * or ARMv8 CPU has them and libsodium's portable C elsewhere, so the library needs nothing beyond
 * libsodium and utf8proc on every platform, including those that ship no libcrypto (Android, iOS,
 * the browser). SHA256=openssl (native/Makefile) uses OpenSSL's instead, for hosts that have
 * libcrypto anyway. Only ldp_bundle_open's time differs; the checks are the same.
 *
 * ABI: LDP_ABI_VERSION changes only when a change breaks callers compiled against an earlier
 * header (a removed or changed function, a struct field moved); it is the N of the SONAME
 * libldptext.so.N, so such a library never replaces an older one silently. New functions and new
 * trailing fields of size-prefixed structs (ldp_report) keep it: a caller compiled against an
 * older header states its struct's size and the library writes only the fields that fit. */
#ifndef LDPTEXT_H
#define LDPTEXT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(LDP_BUILDING_DLL)
#define LDP_API __declspec(dllexport)
#elif defined(__GNUC__) || defined(__clang__)
#define LDP_API __attribute__((visibility("default")))
#else
#define LDP_API
#endif

#define LDP_VERSION "0.1.0"
/* The ABI major version: N of the SONAME libldptext.so.N (see "ABI" above). Compare it with
 * ldp_abi_version() to detect a header / library mismatch at run time. */
#define LDP_ABI_VERSION 1

typedef struct ldp_bundle ldp_bundle;
typedef struct ldp_sanitizer ldp_sanitizer;

/* BEGIN mechanisms: generated by native/gen_mechanisms.py from the mechanism registry (sdk/ldptext/registry.py) */
/* mechanism values of ldp_report (LDP_MECH_*) and the bits of ldp_expect.mechanisms */
enum {
    LDP_MECH_SANTEXT = 1,
    LDP_MECH_SANTEXT_PLUS = 2,
    LDP_MECH_TEM = 3,
    LDP_MECH_CUSTEXT = 4,
    LDP_MECH_CUSTEXT_PLUS = 5
};
#define LDP_EXPECT_SANTEXT (1u << LDP_MECH_SANTEXT)
#define LDP_EXPECT_SANTEXT_PLUS (1u << LDP_MECH_SANTEXT_PLUS)
#define LDP_EXPECT_TEM (1u << LDP_MECH_TEM)
#define LDP_EXPECT_CUSTEXT (1u << LDP_MECH_CUSTEXT)
#define LDP_EXPECT_CUSTEXT_PLUS (1u << LDP_MECH_CUSTEXT_PLUS)
#define LDP_MECH_COUNT 6
/* END mechanisms */

/* What one ldp_sanitize call released. epsilon: the eps per token (metric for SanText and TEM);
 * epsilon0 = ln(1/p) for SanText+, 0 for SanText, TEM and CusText, +inf for CusText+ (its stop
 * words are released unchanged); p: the probability of sanitizing a token the mechanism may keep
 * (SanText+'s non-sensitive words; 0 for CusText+'s stop words; 1 where every token is sanitized);
 * n_tokens: tokens released (not hidden by the mechanism); a SanText document of n tokens is
 * eps * sum_i d(x_i, x'_i)-indistinguishable from any other of n tokens (TEM: with d truncated at
 * gamma; CusText: n * eps between documents whose tokens share their output sets).
 * seeded: 1 if the sanitizer was created with ldp_sanitizer_new_seeded: the output is then
 * reproducible and NOT private. d_max: the bound on distances the bundle states (NaN for CusText,
 * which states none); tolerance: the bound on |log P^ - log P| of every realised probability
 * against the formula that the checks confirm: the stated tolerance plus their float64 resolution,
 * 0.5e-12 * (1 + eps * R), R = d_max (SanText, TEM) or 1 (CusText). worst_case_epsilon: the LDP level per token over ANY two inputs
 * (SanText: eps * d_max; TEM: eps * min(gamma, d_max)); +inf where none exists (SanText+ and
 * CusText+ release some words unchanged; CusText reveals the output set).
 *
 * size: set by the caller to sizeof(ldp_report) before the call (LDP_REPORT_INIT does). The
 * library writes only the fields that lie within `size` bytes and leaves the rest as they were,
 * so new fields are added only at the end and a caller compiled against an older, shorter
 * ldp_report keeps working; a size below LDP_REPORT_V1_SIZE (the first layout: size through
 * seeded) is refused with LDP_E_ARG. */
typedef struct {
    size_t size;
    /* layout 1 */
    double epsilon, epsilon0, p;
    size_t n_tokens;
    int mechanism;
    int seeded;
    /* layout 2 */
    double d_max, tolerance;
    /* layout 3 */
    double worst_case_epsilon;
    /* layout 4: the stated verbatim rate P(M(x) = x) over the sensitive inputs (its largest value
     * checked on every row before the row's first draw, its median against the rows checked at
     * open; NaN where a bundle states none), and weak_privacy = 1 for a near-identity bundle
     * (median >= LDP_NEAR_IDENTITY_MEDIAN), opened only with ldp_expect.allow_weak_privacy */
    double verbatim_median, verbatim_max;
    int weak_privacy;
} ldp_report;
#define LDP_REPORT_V1_SIZE (offsetof(ldp_report, seeded) + sizeof(int))
#define LDP_REPORT_INIT {sizeof(ldp_report), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
/* A stated median verbatim rate at or above this marks a near-identity bundle (the Python SDK's
 * ldptext.verbatim.NEAR_IDENTITY_MEDIAN): every open refuses it with LDP_E_WEAK_PRIVACY unless the
 * application opts in, and every report of it says weak_privacy. */
#define LDP_NEAR_IDENTITY_MEDIAN 0.9

/* Return codes: LDP_OK, or one negative code per failure. */
enum {
    LDP_OK = 0,
    /* arguments and resources */
    LDP_E_ARG = -1,                  /* a NULL pointer or an invalid argument */
    LDP_E_NOMEM = -2,                /* out of memory */
    LDP_E_RANDOM = -3,               /* the operating system's random generator failed */
    LDP_E_CAPACITY = -4,             /* the output buffer is too small (*n says how many) */
    LDP_E_INVALID_UTF8 = -5,         /* input text is not valid UTF-8 */
    LDP_E_INPUT_ID = -6,             /* a token id is out of range or a special token */
    LDP_E_SAMPLER = -7,              /* sampler invariant violated (corrupted tables in memory) */
    LDP_E_TOO_LONG = -8,             /* input longer than the library handles (> 2^31 tokens) */
    LDP_E_HOST = -9,                 /* big-endian host: bundles are little-endian (unsupported) */
    /* the bundle file */
    LDP_E_FILE_NOT_FOUND = -20,      /* bundle file not found */
    LDP_E_FILE_OPEN = -21,           /* bundle cannot be opened or mapped (permissions, I/O) */
    LDP_E_NOT_REGULAR = -22,         /* bundle is a directory, FIFO or device */
    LDP_E_FILE_EMPTY = -23,          /* bundle file is empty */
    LDP_E_FILE_TOO_LARGE = -24,      /* bundle is larger than 64 GiB */
    LDP_E_TRUNCATED = -25,           /* bundle is truncated (no header, or array data missing) */
    /* container: safetensors header */
    LDP_E_HEADER_LENGTH = -30,       /* header length is invalid (< 2 or > 16 MiB) */
    LDP_E_HEADER_INCOMPLETE = -31,   /* header is longer than the file */
    LDP_E_HEADER_JSON = -32,         /* header is not a valid JSON object */
    LDP_E_HEADER_DUPLICATE_KEY = -33,/* header repeats a key */
    LDP_E_NO_MANIFEST = -34,         /* not an ldptext bundle (no manifest in the metadata) */
    LDP_E_METADATA_FIELDS = -35,     /* metadata has unknown fields */
    LDP_E_METADATA_TYPE = -36,       /* metadata values are not strings */
    LDP_E_MANIFEST_JSON = -37,       /* manifest is not valid JSON */
    LDP_E_MANIFEST_DUPLICATE_KEY = -38, /* manifest repeats a key */
    LDP_E_MANIFEST_UNICODE = -39,    /* manifest contains invalid Unicode (a lone surrogate) */
    /* signature and trust */
    LDP_E_SIGNATURE_INCOMPLETE = -40,/* only one of signature / public key is present */
    LDP_E_SIGNATURE_MALFORMED = -41, /* signature or public key is not canonical base64 of 64/32 bytes */
    LDP_E_UNSIGNED = -42,            /* bundle is unsigned */
    LDP_E_UNTRUSTED_KEY = -43,       /* signed by a key that is not among the trusted keys */
    LDP_E_BAD_SIGNATURE = -44,       /* signature does not verify: the manifest was altered */
    /* manifest */
    LDP_E_FORMAT_TAG = -50,          /* manifest lacks the ldptext-bundle format tag */
    LDP_E_FORMAT_VERSION = -51,      /* unsupported format version */
    LDP_E_MANIFEST_NONCANONICAL = -52,/* manifest is not in canonical form */
    LDP_E_MECHANISM = -53,           /* unknown mechanism, or one this library does not run
                                        (CMP, Mahalanobis, DP-BART: Python SDK only) */
    LDP_E_NO_ARRAY_TABLE = -54,      /* manifest has no array table */
    /* arrays */
    LDP_E_ARRAY_SET = -60,           /* header arrays differ from the signed manifest's */
    LDP_E_ARRAY_ENTRY = -61,         /* a header array entry is malformed */
    LDP_E_ARRAY_DTYPE_SHAPE = -62,   /* an array's dtype or shape differs from the manifest */
    LDP_E_ARRAY_HASH_MALFORMED = -63,/* the manifest's hash of an array is malformed */
    LDP_E_ARRAY_OFFSETS = -64,       /* an array's data offsets disagree with its shape */
    LDP_E_ARRAY_ALIGNMENT = -65,     /* an array's data is not aligned to its item size */
    LDP_E_ARRAY_OVERLAP = -66,       /* array data overlap or leave a gap */
    LDP_E_TRAILING_DATA = -67,       /* bytes after the last array */
    LDP_E_ARRAY_HASH = -68,          /* an array's SHA-256 differs from the signed manifest */
    LDP_E_BOOL_VALUES = -69,         /* a boolean array holds bytes other than 0 and 1 */
    LDP_E_HEADER_NONCANONICAL = -70, /* header is not the canonical header of its manifest */
    /* SanText schema and semantics */
    LDP_E_MISSING_ARRAY = -80,       /* a required SanText array or blob is absent */
    LDP_E_PARAMS = -81,              /* manifest lacks or malforms a required parameter */
    LDP_E_EPSILON = -82,             /* epsilon is not a positive finite number */
    LDP_E_P = -83,                   /* SanText+ p is not in (0, 1] */
    LDP_E_TOLERANCE = -84,           /* stated numeric tolerance is above 1e-9 (or not finite) */
    LDP_E_SCHEMA_DTYPE = -85,        /* a SanText array has the wrong dtype */
    LDP_E_SCHEMA_SHAPE = -86,        /* a SanText array has the wrong shape */
    LDP_E_TABLE_EMPTY = -87,         /* vocabulary or output domain is empty (or O < K) */
    LDP_E_TABLE_NONFINITE = -88,     /* embedding scales or tail floors are negative or not finite */
    LDP_E_TABLE_OUTPUTS = -89,       /* output ids out of range or not strictly increasing */
    LDP_E_TABLE_HEAD = -90,          /* head ids out of range or not strictly increasing */
    LDP_E_TABLE_DOMAIN = -91,        /* a head candidate or an output is outside the output domain */
    LDP_E_TABLE_ALIAS = -92,         /* alias slots out of range */
    LDP_E_TABLE_GAMMA = -93,         /* acceptance exponents negative or not finite */
    LDP_E_TABLE_GAMMA_NORM = -94,    /* acceptance exponents not normalised (row minimum != 0) */
    LDP_E_TABLE_TAIL_MASS = -95,     /* tail slot has proposal mass but the tail is empty */
    LDP_E_TABLE_HEAD_SIZE = -96,     /* head_ids width differs from the manifest's head_size */
    LDP_E_TABLE_KEEP = -97,          /* keep_row set for SanText, or for a sensitive/invalid row */
    LDP_E_TABLE_DIMS = -98,          /* dimensions outside what the sampler supports */
    LDP_E_TABLE_CLUSTER = -99,       /* tail cluster count outside [1, 256] or a cluster id >= it */
    LDP_E_PARAMETER_MISMATCH = -100, /* a stated parameter (eps, eps0, p, D_max, the verbatim
                                        rate) or descriptive field is not what the tables realise,
                                        an output does not read back as itself, or a row's law is
                                        not the mechanism's: the signer's numbers are wrong */
    /* the application's pins (ldp_expect), checked after verification */
    LDP_E_EXPECT_MECHANISM = -101,   /* the bundle's mechanism is not one the application pinned */
    LDP_E_EXPECT_FORMAT = -102,      /* the bundle's format version is below the pinned minimum */
    LDP_E_EXPECT_BUNDLE_ID = -103,   /* the bundle is not the pinned bundle id */
    LDP_E_EXPECT_EPSILON = -104,     /* the bundle's epsilon is outside the pinned range */
    LDP_E_WEAK_PRIVACY = -105,       /* near identity: the bundle's median sensitive word is released
                                        unchanged with probability >= 0.9, and the application did
                                        not opt in (ldp_expect.allow_weak_privacy) */
    /* tokenizer */
    LDP_E_TOKENIZER_JSON = -110,     /* tokenizer.json is not valid UTF-8 JSON */
    LDP_E_TOKENIZER = -111,          /* tokenizer.json is malformed (missing or mistyped fields) */
    LDP_E_TOKENIZER_UNSUPPORTED = -112, /* tokenizer.json uses a component this library lacks */
    /* the arrays of the mechanisms on the SanText engine */
    LDP_E_TEM_TABLES = -120,         /* TEM's bot_gamma / bot_count out of range, or its tables
                                        keep rows in the clear */
    LDP_E_CUSTEXT_TABLES = -121,     /* CusText's group_id disagrees with the tables (kept rows,
                                        a row proposing outside its output set, a group below K) */
    /* public key text (ldp_public_key_parse) */
    LDP_E_KEY_FORMAT = -130,         /* not a public key: neither one base64 line nor a PEM public
                                        key (empty, other characters, bad padding) */
    LDP_E_KEY_LENGTH = -131,         /* base64 that decodes to other than the 32 bytes of a key */
    LDP_E_KEY_PRIVATE = -132,        /* a private key where the public key is expected */
    LDP_E_KEY_TYPE = -133            /* a PEM public key of another algorithm than Ed25519 */
};

/* The trusted keys the opens take are raw 32-byte Ed25519 public keys. ldp_public_key_parse turns
 * the text of a public key file into one: text[0..len) is what `ldptext keys generate` writes to
 * its .pub file (the base64 of the 32 bytes, standard alphabet, padded, on one line) or a PEM
 * "PUBLIC KEY" (SubjectPublicKeyInfo) of an Ed25519 key; whitespace around it is ignored. It
 * accepts what the Python SDK's keys.load_public_key accepts from such a file. Returns LDP_OK
 * (key written), LDP_E_KEY_FORMAT, LDP_E_KEY_LENGTH, LDP_E_KEY_PRIVATE or LDP_E_KEY_TYPE (key
 * untouched), LDP_E_ARG for NULL pointers. The text need not be NUL-terminated. */
LDP_API int ldp_public_key_parse(const char *text, size_t len, uint8_t key[32]);

/* Opens, verifies and maps a SanText, SanText+, TEM, CusText or CusText+ bundle. trusted_keys: n_keys raw Ed25519 public
 * keys (32 bytes each); the signer must be one of them (n_keys == 0 refuses every bundle). Every
 * check listed at the top runs before *out is set; on failure *out is NULL and the return value
 * names the failed check. The file is memory-mapped: keep it unmodified while open (bundles are
 * written by atomic rename, which never changes an open file). The sampler reads its own copy of
 * the embedding codes, rows on cache lines, and the mapping's pages of them are released, so the
 * resident size stays about the file's. A near-identity bundle (LDP_NEAR_IDENTITY_MEDIAN) is
 * refused with LDP_E_WEAK_PRIVACY: open it with ldp_bundle_open_expect and
 * ldp_expect.allow_weak_privacy = 1 to accept it. */
LDP_API int ldp_bundle_open(const char *path, const uint8_t (*trusted_keys)[32], size_t n_keys,
                            ldp_bundle **out);
/* The same for a bundle already in memory (copied: data may be released after the call; the
 * sampler reads the copy in place, so the rows are not realigned: ldp_bundle_open samples faster). */
LDP_API int ldp_bundle_open_memory(const uint8_t *data, size_t len,
                                   const uint8_t (*trusted_keys)[32], size_t n_keys,
                                   ldp_bundle **out);
/* Releases a bundle; every sanitizer made from it must be freed first. NULL is ignored. */
LDP_API void ldp_bundle_close(ldp_bundle *bundle);
/* The verified bundle's public facts as one JSON object (UTF-8, NUL-terminated; release with
 * ldp_free), the same values the Python runtime reports for the bundle:
 *   format_version   the manifest's format version
 *   mechanism        the bundle's mechanism, as the registry names it (a name of the generated
 *                    LDP_MECH_* table above)
 *   epsilon, epsilon0, p, d_max, tolerance   as stated and checked (tolerance: as ldp_report's,
 *                    the stated one plus the checks' resolution; p: null where the manifest
 *                    states none, as for SanText and TEM; d_max: null for CusText; epsilon0:
 *                    null for CusText+, whose stop words are released unchanged)
 *   gamma, beta      TEM only: the truncation threshold and the beta that chose it (or null)
 *   k, similarity    CusText only: the smallest output set and the similarity ("euclidean" or
 *                    "cosine")
 *   ledger_unit      the unit ledger charges are made in: "metric:<16 hex>" (santext.py
 *                    metric_id; SanText and TEM over one metric share it) or, for CusText,
 *                    "partition:<16 hex>" (custext.py partition_id)
 *   verbatim_max, verbatim_median   the stated verbatim rate P(M(x) = x) over the sensitive
 *                    inputs (checked: ldp_report), null where none is stated
 *   weak_privacy     true for a near-identity bundle (opened only with the application's opt-in)
 *   worst_case_token_epsilon   SanText: epsilon * d_max; TEM: epsilon * min(gamma, d_max);
 *                    SanText+ and CusText(+): null, and
 *   worst_case_note  what the worst case is, or why there is none
 *   bundle_id        SHA-256 (64 hex) of the signed manifest (bundle.py Bundle.bundle_id)
 *   key_id           16 hex digits naming the signer's key (keys.py key_id)
 *   manifest         the verified manifest itself
 * Numbers are written as Python's repr writes them, so they read back to the same doubles. */
LDP_API int ldp_bundle_info(const ldp_bundle *bundle, char **json_out);

/* Checks rows [first, first + count) of the bundle in full now (the range is clipped to the
 * vocabulary): each row's whole output law against its mechanism's formula, the tail's bounds
 * against every tail output, the stated largest verbatim rate. Sampling checks each row the
 * first time a call needs it anyway (a call that needs a wrong row returns
 * LDP_E_PARAMETER_MISMATCH before any draw); a batch job can check every row up front, each
 * thread its own range. Verdicts are kept with the bundle, so no row is checked twice. Returns
 * LDP_OK, LDP_E_PARAMETER_MISMATCH (*bad_row, if not NULL, names the first wrong row; -1
 * otherwise), LDP_E_NOMEM or LDP_E_ARG. Thread-safe. */
LDP_API int ldp_bundle_check_rows(const ldp_bundle *bundle, int64_t first, int64_t count,
                                  int64_t *bad_row);

/* Pins: what an application requires of the bundles it opens, beyond a trusted signature (the
 * Python runtime's BundleExpectation, same semantics). A validly signed bundle of the same publisher
 * may still be another mechanism, a larger epsilon or an older format: pin what the app promises.
 * Start from LDP_EXPECT_INIT (it sets size; every pin off) and set the pins wanted:
 *   mechanisms          bit set of LDP_EXPECT_SANTEXT, _SANTEXT_PLUS, _TEM, _CUSTEXT and
 *                       _CUSTEXT_PLUS; 0: any
 *   epsilon_min/_max    the stated per-token epsilon must lie in [min, max]; 0: no bound
 *   bundle_id           exactly this bundle (64 lowercase hex digits, ldp_bundle_info); NULL: any
 *   min_format_version  refuse older formats; 0: any
 * size: sizeof(ldp_expect) of the caller's header, so fields added later stay optional. */
typedef struct {
    size_t size;
    unsigned mechanisms;
    double epsilon_min, epsilon_max;
    const char *bundle_id;
    int64_t min_format_version;
    /* layout 2: 1 accepts a near-identity bundle (LDP_NEAR_IDENTITY_MEDIAN; refused otherwise with
     * LDP_E_WEAK_PRIVACY, by every open); its reports then say weak_privacy */
    int allow_weak_privacy;
} ldp_expect;
#define LDP_EXPECT_INIT {sizeof(ldp_expect), 0u, 0.0, 0.0, NULL, 0, 0}
/* Checks a verified bundle against the pins, in the Python order (mechanism, format version,
 * bundle id, epsilon): LDP_OK or the LDP_E_EXPECT_* code of the first unmet pin; LDP_E_ARG for a
 * malformed expectation (size too small, unknown mechanism bits, a bound not positive and finite,
 * min > max, a bundle id that is not 64 lowercase hex digits, a negative version). */
LDP_API int ldp_bundle_expect(const ldp_bundle *bundle, const ldp_expect *expect);
/* ldp_bundle_open, then ldp_bundle_expect: *out is set only when both pass (the bundle is closed
 * otherwise). expect may be NULL (no pins). expect->allow_weak_privacy = 1 (layout 2) is the one
 * way to open a near-identity bundle. */
LDP_API int ldp_bundle_open_expect(const char *path, const uint8_t (*trusted_keys)[32],
                                   size_t n_keys, const ldp_expect *expect, ldp_bundle **out);
/* The same for a bundle held in memory (ldp_bundle_open_memory's private copy). */
LDP_API int ldp_bundle_open_memory_expect(const uint8_t *data, size_t len,
                                          const uint8_t (*trusted_keys)[32], size_t n_keys,
                                          const ldp_expect *expect, ldp_bundle **out);

/* A sanitizer over a verified bundle, keyed from the operating system's CSPRNG; rekeys itself
 * after a fork. One per thread. */
LDP_API int ldp_sanitizer_new(const ldp_bundle *bundle, ldp_sanitizer **out);
/* TESTS AND REPRODUCIBLE EXPERIMENTS ONLY: a sanitizer whose stream is derived from `seed`. Its
 * output is reproducible and therefore NOT PRIVATE; every report it fills has seeded = 1. The key
 * is SHA-256("ldptext seeded mode v1:" + decimal seed), the same as the Python runtime's
 * `Sanitizer.load(..., seed=seed)`, so equal seeds give equal outputs in both. */
LDP_API int ldp_sanitizer_new_seeded(const ldp_bundle *bundle, uint64_t seed, ldp_sanitizer **out);
LDP_API void ldp_sanitizer_free(ldp_sanitizer *sanitizer);

/* Token ids of utf8[0..len) with the bundle's tokenizer, exactly as Hugging Face `tokenizers`
 * encodes it without special tokens (out-of-vocabulary words map to the unknown token). Writes at
 * most cap ids (ids may be NULL when cap is 0) and sets *n to the number of tokens; returns
 * LDP_E_CAPACITY when *n > cap. */
LDP_API int ldp_tokenize(ldp_sanitizer *sanitizer, const char *utf8, size_t len, int32_t *ids,
                         size_t cap, size_t *n);
/* Text of token ids, joined as the Python runtime joins them (WordPiece "##" pieces attach to the
 * previous piece, other tokens are separated by one space, BERT clean-up of the space before
 * punctuation and English contractions). *out is NUL-terminated; release it with ldp_free. */
LDP_API int ldp_detokenize(ldp_sanitizer *sanitizer, const int32_t *ids, size_t n, char **out,
                           size_t *out_len);
/* The primitive: out[i] drawn independently from the mechanism's distribution for input ids[i]
 * (ids and out may be the same array). Refuses (LDP_E_INPUT_ID, nothing written) if any id is out
 * of range or not a valid input (a special token). */
LDP_API int ldp_sample_ids(ldp_sanitizer *sanitizer, const int32_t *ids, int32_t *out, size_t n);
/* Tokenize, sample every token, detokenize. *out (NUL-terminated, *out_len bytes) may leave the
 * device; rep (may be NULL; else rep->size set, see ldp_report) says what was released. Nothing is
 * returned on failure. */
LDP_API int ldp_sanitize(ldp_sanitizer *sanitizer, const char *utf8, size_t len, char **out,
                         size_t *out_len, ldp_report *rep);

/* Releases memory the library returned. NULL is ignored. */
LDP_API void ldp_free(void *p);
/* A static description of a return code (never NULL). */
LDP_API const char *ldp_strerror(int rc);
/* The library version, LDP_VERSION. */
LDP_API const char *ldp_version(void);
/* The ABI major version the library was built with: LDP_ABI_VERSION of its header. */
LDP_API int ldp_abi_version(void);

#ifdef __cplusplus
}
#endif

#endif
