/* Messages of the return codes; ldp_version and ldp_abi_version. */
#include "ldptext.h"

const char *ldp_strerror(int rc) {
    switch (rc) {
    case LDP_OK: return "success";
    case LDP_E_ARG: return "invalid argument (a NULL pointer or a value out of range)";
    case LDP_E_NOMEM: return "out of memory";
    case LDP_E_RANDOM: return "the operating system's random generator failed";
    case LDP_E_CAPACITY: return "output buffer too small (the count needed was returned)";
    case LDP_E_INVALID_UTF8: return "input text is not valid UTF-8";
    case LDP_E_INPUT_ID: return "a token id is not a valid input of this bundle (out of range or a special token)";
    case LDP_E_SAMPLER: return "sampler invariant violated (corrupted tables in memory)";
    case LDP_E_TOO_LONG: return "input has more tokens than the library handles (2^31)";
    case LDP_E_HOST: return "this host is big-endian; bundle arrays are little-endian (not supported)";
    case LDP_E_FILE_NOT_FOUND: return "bundle file not found";
    case LDP_E_FILE_OPEN: return "cannot open or map the bundle file";
    case LDP_E_NOT_REGULAR: return "bundle is not a regular file (a directory, FIFO or device)";
    case LDP_E_FILE_EMPTY: return "bundle file is empty";
    case LDP_E_FILE_TOO_LARGE: return "bundle is larger than 64 GiB";
    case LDP_E_TRUNCATED: return "bundle is truncated (no header, or array data missing)";
    case LDP_E_HEADER_LENGTH: return "bundle header length is invalid";
    case LDP_E_HEADER_INCOMPLETE: return "bundle is truncated (header incomplete)";
    case LDP_E_HEADER_JSON: return "bundle header is not a valid JSON object";
    case LDP_E_HEADER_DUPLICATE_KEY: return "bundle header repeats a key";
    case LDP_E_NO_MANIFEST: return "not an ldptext bundle (no manifest)";
    case LDP_E_METADATA_FIELDS: return "bundle metadata has unknown fields";
    case LDP_E_METADATA_TYPE: return "bundle metadata values must be strings";
    case LDP_E_MANIFEST_JSON: return "bundle manifest is not valid JSON";
    case LDP_E_MANIFEST_DUPLICATE_KEY: return "bundle manifest repeats a key";
    case LDP_E_MANIFEST_UNICODE: return "bundle manifest contains invalid Unicode";
    case LDP_E_SIGNATURE_INCOMPLETE: return "bundle signature fields are incomplete";
    case LDP_E_SIGNATURE_MALFORMED: return "bundle signature fields are malformed";
    case LDP_E_UNSIGNED: return "bundle is unsigned";
    case LDP_E_UNTRUSTED_KEY: return "bundle is signed by an untrusted key";
    case LDP_E_BAD_SIGNATURE: return "bundle signature does not verify: the manifest was altered";
    case LDP_E_FORMAT_TAG: return "not an ldptext bundle (wrong format tag)";
    case LDP_E_FORMAT_VERSION: return "bundle format version is not supported (this library reads 1)";
    case LDP_E_MANIFEST_NONCANONICAL: return "bundle manifest is not in canonical form";
    case LDP_E_MECHANISM:
        return "bundle mechanism is unknown or not run by libldptext (it runs SanText, SanText+, TEM, "
               "CusText and CusText+; CMP, Mahalanobis and DP-BART run in the Python SDK only)";
    case LDP_E_NO_ARRAY_TABLE: return "bundle manifest has no array table";
    case LDP_E_ARRAY_SET: return "bundle arrays do not match the signed manifest";
    case LDP_E_ARRAY_ENTRY: return "bundle header entry for an array is malformed";
    case LDP_E_ARRAY_DTYPE_SHAPE: return "an array's dtype or shape differs from the manifest";
    case LDP_E_ARRAY_HASH_MALFORMED: return "the manifest hash of an array is malformed";
    case LDP_E_ARRAY_OFFSETS: return "an array's data offsets disagree with its shape";
    case LDP_E_ARRAY_ALIGNMENT: return "an array's data is not aligned";
    case LDP_E_ARRAY_OVERLAP: return "array data offsets overlap or leave a gap";
    case LDP_E_TRAILING_DATA: return "bundle has trailing data after its arrays";
    case LDP_E_ARRAY_HASH: return "an array's content hash differs from the manifest";
    case LDP_E_BOOL_VALUES: return "a boolean array holds values other than 0/1";
    case LDP_E_HEADER_NONCANONICAL: return "bundle header is not the canonical header of its signed manifest";
    case LDP_E_MISSING_ARRAY: return "bundle lacks a required SanText array or blob";
    case LDP_E_PARAMS: return "SanText manifest lacks or malforms a required field";
    case LDP_E_EPSILON: return "bundle epsilon is not a positive number";
    case LDP_E_P: return "bundle p is not in (0, 1]";
    case LDP_E_TOLERANCE: return "bundle states a numeric tolerance above 1e-09";
    case LDP_E_SCHEMA_DTYPE: return "a SanText array has the wrong dtype";
    case LDP_E_SCHEMA_SHAPE: return "a SanText array has the wrong shape";
    case LDP_E_TABLE_EMPTY: return "bundle vocabulary or output domain is empty";
    case LDP_E_TABLE_NONFINITE: return "embeddings or tail bounds are not finite";
    case LDP_E_TABLE_OUTPUTS: return "output ids are out of range or not strictly increasing";
    case LDP_E_TABLE_HEAD: return "head ids are out of range or not strictly increasing";
    case LDP_E_TABLE_DOMAIN: return "a head candidate or an output is outside the output domain";
    case LDP_E_TABLE_ALIAS: return "alias table values are out of range";
    case LDP_E_TABLE_GAMMA: return "acceptance exponents are negative or not finite";
    case LDP_E_TABLE_GAMMA_NORM: return "acceptance exponents are not normalised (min per row != 0)";
    case LDP_E_TABLE_TAIL_MASS: return "tail slot has mass but the tail is empty";
    case LDP_E_TABLE_HEAD_SIZE: return "array 'head_ids' does not have the manifest's head_size";
    case LDP_E_TABLE_KEEP: return "a row is kept in the clear that may not be (SanText, or a sensitive or invalid row)";
    case LDP_E_TABLE_DIMS: return "table dimensions outside what the sampler supports";
    case LDP_E_TABLE_CLUSTER: return "tail cluster ids are out of range";
    case LDP_E_PARAMETER_MISMATCH:
        return "a stated parameter (epsilon, epsilon0, p, D_max, TEM's gamma / beta, CusText's "
               "similarity or group sizes, the verbatim rate) or descriptive field is not what the "
               "tables realise, an output is not read back by the bundle's tokenizer as itself (a "
               "bundle built before that rule must be rebuilt), or a row's output law is not its "
               "mechanism's";
    case LDP_E_EXPECT_MECHANISM: return "the bundle's mechanism is not the one the application requires";
    case LDP_E_EXPECT_FORMAT: return "the bundle's format version is older than the application requires";
    case LDP_E_EXPECT_BUNDLE_ID: return "the bundle is not the bundle id the application pinned";
    case LDP_E_EXPECT_EPSILON: return "the bundle's epsilon is outside the range the application requires";
    case LDP_E_WEAK_PRIVACY:
        return "epsilon is so large that the output is close to the input: the median sensitive word is "
               "released unchanged with probability >= 0.9; use a smaller epsilon, or opt in "
               "(allow_weak_privacy) to accept it (every report will say so)";
    case LDP_E_TOKENIZER_JSON: return "bundle tokenizer.json is not valid UTF-8 JSON";
    case LDP_E_TOKENIZER: return "bundle tokenizer.json is malformed";
    case LDP_E_TOKENIZER_UNSUPPORTED: return "bundle tokenizer.json uses a component libldptext does not implement";
    case LDP_E_TEM_TABLES:
        return "bundle TEM arrays bot_gamma / bot_count are out of range, or its tables keep rows in the clear";
    case LDP_E_CUSTEXT_TABLES:
        return "bundle CusText group_id disagrees with its tables (kept rows, a row proposing outside its "
               "output set, or an output set smaller than K)";
    case LDP_E_KEY_FORMAT:
        return "not a public key: expected one base64 line (a 32-byte Ed25519 key, as `ldptext keys "
               "generate` writes to its .pub file) or a PEM public key";
    case LDP_E_KEY_LENGTH: return "public key text is base64 of other than 32 bytes (not an Ed25519 key)";
    case LDP_E_KEY_PRIVATE: return "a PRIVATE key was given where the public key is expected (use the .pub file)";
    case LDP_E_KEY_TYPE: return "the PEM public key is not an Ed25519 key";
    default: return "unknown error code";
    }
}

const char *ldp_version(void) { return LDP_VERSION; }
int ldp_abi_version(void) { return LDP_ABI_VERSION; }
