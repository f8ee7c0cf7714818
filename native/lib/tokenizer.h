/* The bundle's tokenizer: a Hugging Face `tokenizers` pipeline read from its JSON, reimplemented
 * for the components the project's bundles use, with ids identical to `tokenizers` (checked by
 * tests/test_libldptext_conformance.py):
 *
 *   added tokens   non-normalized ones split out of the raw text first (leftmost-longest), then
 *                  normalized ones out of each normalized piece (lstrip / rstrip / single_word
 *                  are not supported);
 *   normalizer     BertNormalizer (clean_text, handle_chinese_chars, strip_accents, lowercase),
 *                  Lowercase, NFC, NFD, NFKC, NFKD, StripAccents, or a Sequence of these;
 *   pre_tokenizer  BertPreTokenizer (split on whitespace, isolate punctuation), WhitespaceSplit,
 *                  or a Sequence of these;
 *   model          WordPiece (greedy longest-match-first, "##" continuation, words longer than
 *                  max_input_chars_per_word become the unknown token) or WordLevel.
 *
 * Anything else is refused when the bundle is opened (LDP_E_TOKENIZER_UNSUPPORTED). Padding,
 * truncation, post-processor and decoder are ignored, as the Python runtime ignores them (it
 * encodes without special tokens and decodes with its own table, which ldp_tokenizer_decode
 * reproduces). A tokenizer is immutable after loading; each thread needs its own ldp_tok_work. */
#ifndef LDP_TOKENIZER_H
#define LDP_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "unicode.h"

typedef struct ldp_tokenizer ldp_tokenizer;

/* Scratch space of one caller (one per sanitizer). Zero-initialise; free with ldp_tok_work_free. */
typedef struct {
    ldp_u32vec text, tmp;
    char *utf8;
    size_t utf8_cap;
} ldp_tok_work;

/* Parses tokenizer JSON (json[0..len), UTF-8). Returns LDP_OK or LDP_E_TOKENIZER_JSON /
 * LDP_E_TOKENIZER / LDP_E_TOKENIZER_UNSUPPORTED / LDP_E_NOMEM. */
int ldp_tokenizer_load(const char *json, size_t len, ldp_tokenizer **out);
void ldp_tokenizer_free(ldp_tokenizer *t);
/* 1 for a WordPiece model (decode attaches continuation pieces), 0 for word level. */
int ldp_tokenizer_is_wordpiece(const ldp_tokenizer *t);
/* The id unknown words map to (the model's unk_token). */
int32_t ldp_tokenizer_unk_id(const ldp_tokenizer *t);
/* The token of id as the vocabulary spells it ("##x" for a WordPiece continuation), its length in
 * *len; NULL for an id without a token or outside the tokenizer's ids. */
const char *ldp_tokenizer_token(const ldp_tokenizer *t, int32_t id, size_t *len);

/* Ids of utf8[0..len): see ldp_tokenize in ldptext.h. */
int ldp_tokenizer_encode(const ldp_tokenizer *t, ldp_tok_work *w, const char *utf8, size_t len,
                         int32_t *ids, size_t cap, size_t *n);
/* Text of ids, as sdk/ldptext/tokenization.py TextTokenizer.decode writes it (an id inside the
 * id range but without a token reads as an empty token, as in the Python table); appends to out.
 * LDP_E_INPUT_ID for an id outside [0, largest id]. */
int ldp_tokenizer_decode(const ldp_tokenizer *t, const int32_t *ids, size_t n, ldp_buf *out);

/* The normalizer alone: w->text = normalize(cps[0..n)) (for the conformance tests). */
int ldp_tokenizer_normalize(const ldp_tokenizer *t, ldp_tok_work *w, const uint32_t *cps,
                            size_t n);

void ldp_tok_work_free(ldp_tok_work *w);

/* What a released id renders as: checks for a bundle's open, once the tokenizer is loaded, on
 * the bundle's vocab.json and output ids (check_vocab first: check_outputs reads the tokenizer's
 * tokens, which are then vocab.json's). sdk/ldptext/tokenization.py TextTokenizer.check_vocab and
 * check_outputs are the same rules. Both are fast (MiniLM, GloVe-50k: a few ms).
 *
 * ldp_tokenizer_check_vocab: the tokenizer's tokens are exactly vocab.json's rows. vocab_json
 * [0..len) must be a JSON list of n_rows strings; the tokenizer's ids must be 0 .. n_rows - 1,
 * each with a token, and every (token, id) pair (model vocabulary and added tokens) must be
 * (vocab[id], id), no token having two ids. LDP_OK, LDP_E_TOKENIZER (malformed vocab.json, or
 * any disagreement), LDP_E_NOMEM. */
int ldp_tokenizer_check_vocab(const ldp_tokenizer *t, const char *vocab_json, size_t len,
                              size_t n_rows);
/* Whether each id is read back as itself: ok[k] = 1 when ids[k]'s released text (the token, or
 * for a WordPiece continuation "##x" the x attached to the piece before) is non-empty, holds no
 * control, format (U+200B), private-use or whitespace character (tokenizers' classes,
 * unicode.h), and encodes as exactly [ids[k]] (a whole token) or [P, ids[k]] (P + x, P the
 * context word, ldp_tokenizer_context_word); else 0 (also for an id without a token). A token
 * the normalizer changes (upper case when lowercasing, accents when stripping them) encodes as
 * another id, so it never reads back. LDP_OK or LDP_E_NOMEM. */
int ldp_tokenizer_read_back(const ldp_tokenizer *t, const int32_t *ids, size_t n,
                            unsigned char *ok);
/* LDP_OK when every output reads back as itself, LDP_E_PARAMETER_MISMATCH when one does not
 * (the builder leaves such tokens out: privacy.not_outputs.not_read_back), LDP_E_NOMEM. */
int ldp_tokenizer_check_outputs(const ldp_tokenizer *t, const int32_t *outputs, size_t n);
/* The context word continuation pieces are read back after: of the WordPiece whole words (not
 * continuations) with visible text that encode as exactly themselves, the longest in UTF-8 bytes
 * (the smallest id among equals). *id = -1 for word level or when there is none. LDP_OK or
 * LDP_E_NOMEM. */
int ldp_tokenizer_context_word(const ldp_tokenizer *t, int32_t *id);

#endif
