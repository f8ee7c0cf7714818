/* Hugging Face tokenizers pipeline subset; see tokenizer.h. */
#include "tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "ldptext.h"

enum { MODEL_WORDPIECE = 1, MODEL_WORDLEVEL = 2 };
enum { NORM_BERT, NORM_LOWERCASE, NORM_NFC, NORM_NFD, NORM_NFKC, NORM_NFKD, NORM_STRIP_ACCENTS };
enum { PRE_BERT, PRE_WHITESPACE_SPLIT };

#define MAX_STEPS 16

#define ASCII_DROP 0xFF

typedef struct {
    int kind;
    int clean_text, chinese, strip_accents, lowercase; /* BertNormalizer */
    /* BertNormalizer's first pass on each ASCII code point: the one it writes (cleaned, and
     * lowercased, see normalize), or ASCII_DROP for one clean_text removes */
    unsigned char ascii[128];
} norm_step;

typedef struct {
    const char *content; /* UTF-8, in the pool */
    uint32_t entry;      /* its entry in the pool */
    size_t len;
    uint32_t *norm;      /* normalized content as code points (normalized tokens only) */
    size_t norm_len;
    int32_t id;
    int normalized;
    int special;
} added_token;

/* Every string the tokenizer keeps is an entry of one pool: this header, then " " + the string +
 * NUL (so " " + token, a decoding piece, is contiguous), padded to a multiple of 4 bytes. The
 * entry at offset 0 is the empty string (the piece " " of an id without a token). */
typedef struct {
    uint32_t len; /* of the string */
    uint32_t id;  /* its id; ENTRY_CONTINUATION: decodes as the string without the prefix */
} entry_header;

#define ENTRY_CONTINUATION 0x80000000u
#define ENTRY_STR(off) ((off) + sizeof(entry_header) + 1)
/* an entry's size is at most ENTRY_MAX_EXTRA + the string's length */
#define ENTRY_MAX_EXTRA (sizeof(entry_header) + 2 + 3)

static size_t entry_size(size_t len) { return (sizeof(entry_header) + len + 2 + 3) & ~(size_t)3; }

/* The vocabulary: open addressing (linear probing) over entries of the pool, at most 3/4 full,
 * each slot the entry's offset (0: empty) and 32 bits of the key's hash, so a probe reads the
 * pool only on a likely match. */
typedef struct {
    uint32_t off;
    uint32_t hash;
} vocab_slot;

struct ldp_tokenizer {
    int model;
    int32_t unk_id;
    const char *prefix; /* WordPiece continuing_subword_prefix (in the pool) */
    size_t prefix_len;
    size_t max_input_chars;
    size_t max_token_len; /* longest vocabulary entry in bytes */
    vocab_slot *slots;
    size_t n_slots;
    int vocab_bad;                   /* a vocabulary id is not one (refused by load_model) */
    size_t vocab_begin, vocab_end;   /* the vocabulary's entries in the pool, document order */
    /* id -> the entry of its token (0: none), whose piece of decoded text is the token without
     * the continuation prefix, or " " + token, as sdk/ldptext/tokenization.py's table */
    uint32_t *id_entry;
    size_t n_ids;
    norm_step norms[MAX_STEPS];
    size_t n_norms;
    int pres[MAX_STEPS];
    size_t n_pres;
    /* ASCII text in bytes (ascii_piece): every normalizer maps ASCII to ASCII and no added token
     * is matched after normalizing; then ascii_map is the normalizers' composition on each byte
     * (ASCII_DROP: removed) and ascii_split the pre-tokenizers' classes */
    int ascii_bytes, ascii_split;
    unsigned char ascii_map[128];
    added_token *added;
    size_t n_added, n_added_normalized, n_added_raw; /* raw: neither special nor normalized */
    char *pool; /* every string above (entries, see entry_header); never moves */
    size_t pool_used, pool_cap;
};

/* ---- helpers -------------------------------------------------------------------------------- */

/* Bytes 0..n of p (n < 8; every byte is read, some twice) as one 64-bit word. */
static uint64_t load_short(const unsigned char *p, size_t n) {
    if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, p, 4);
        memcpy(&b, p + n - 4, 4);
        return ((uint64_t)a << 32) | b;
    }
    if (n > 0) return ((uint64_t)p[0] << 16) | ((uint64_t)p[n >> 1] << 8) | p[n - 1];
    return 0;
}

/* A 64-bit hash of s[0..n), eight bytes per multiply (vocabulary lookups hash every piece the
 * encoder tries, most of them a few bytes long). Not stored anywhere: only this process needs to
 * agree with itself. */
static inline uint64_t hash_bytes(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    uint64_t h = (uint64_t)n * 0x9E3779B97F4A7C15ull, w;
    size_t left = n;
    while (left > 8) {
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
        p += 8;
        left -= 8;
    }
    /* the last 1..8 bytes (those of a longer string end where it ends, overlapping) */
    if (n >= 8) memcpy(&w, (const unsigned char *)s + n - 8, 8);
    else w = load_short(p, left);
    h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 32);
}

static entry_header entry_at(const ldp_tokenizer *t, size_t off) {
    entry_header h;
    memcpy(&h, t->pool + off, sizeof h);
    return h;
}

/* A new entry of s[0..n) with this id; its offset. The pool was sized for every entry
 * (ldp_tokenizer_load), so the room is there. */
static uint32_t pool_add(ldp_tokenizer *t, const char *s, size_t n, uint32_t id) {
    size_t off = t->pool_used;
    char *p = t->pool + off;
    entry_header h;
    h.len = (uint32_t)n;
    h.id = id;
    memcpy(p, &h, sizeof h);
    p += sizeof h;
    p[0] = ' ';
    if (n) memcpy(p + 1, s, n);
    p[n + 1] = '\0';
    t->pool_used += entry_size(n);
    return (uint32_t)off;
}

/* the first slot to probe for hash h: its high half scaled to the table (any size) */
static size_t slot_of(const ldp_tokenizer *t, uint64_t h) {
    return (size_t)(((h >> 32) * (uint64_t)t->n_slots) >> 32);
}

/* The entry of s[0..n) in the vocabulary, or 0; *slot: the slot holding it, or the empty one
 * that ends its probe sequence. (Inline: the encoder looks up every piece it tries.) */
static inline uint32_t vocab_entry(const ldp_tokenizer *t, const char *s, size_t n, size_t *slot) {
    uint64_t h = hash_bytes(s, n);
    uint32_t frag = (uint32_t)h;
    size_t i = slot_of(t, h);
    for (;;) {
        uint32_t off = t->slots[i].off;
        if (off == 0 || (t->slots[i].hash == frag && entry_at(t, off).len == n &&
                         memcmp(t->pool + ENTRY_STR(off), s, n) == 0)) {
            *slot = i;
            return off;
        }
        if (++i == t->n_slots) i = 0;
    }
}

static inline int vocab_find(const ldp_tokenizer *t, const char *s, size_t n, int32_t *id) {
    size_t slot;
    uint32_t off = vocab_entry(t, s, n, &slot);
    if (off == 0) return 0;
    *id = (int32_t)(entry_at(t, off).id & ~ENTRY_CONTINUATION);
    return 1;
}

static int is_bool(const ldp_json *v) {
    return v != NULL && (v->type == LDP_JSON_TRUE || v->type == LDP_JSON_FALSE);
}

static int type_is(const ldp_json *v, const char *name) {
    const ldp_json *ty = ldp_json_get(v, "type");
    return ty != NULL && ty->type == LDP_JSON_STRING && strcmp(ty->str, name) == 0 &&
           ty->str_len == strlen(name);
}

static int is_null_or_absent(const ldp_json *v) { return v == NULL || v->type == LDP_JSON_NULL; }

/* ---- loading -------------------------------------------------------------------------------- */

static int load_normalizer(ldp_tokenizer *t, const ldp_json *n, int depth) {
    norm_step st;
    memset(&st, 0, sizeof st);
    if (is_null_or_absent(n)) return LDP_OK;
    if (n->type != LDP_JSON_OBJECT) return LDP_E_TOKENIZER;
    if (type_is(n, "Sequence")) {
        const ldp_json *list = ldp_json_get(n, "normalizers");
        size_t i;
        if (depth > 0) return LDP_E_TOKENIZER_UNSUPPORTED;
        if (list == NULL || list->type != LDP_JSON_ARRAY) return LDP_E_TOKENIZER;
        for (i = 0; i < list->n; i++) {
            int rc = load_normalizer(t, list->items[i], depth + 1);
            if (rc != LDP_OK) return rc;
        }
        return LDP_OK;
    }
    if (type_is(n, "BertNormalizer")) {
        const ldp_json *c = ldp_json_get(n, "clean_text"), *h = ldp_json_get(n, "handle_chinese_chars"),
                       *s = ldp_json_get(n, "strip_accents"), *l = ldp_json_get(n, "lowercase");
        size_t i;
        if (!is_bool(c) || !is_bool(h) || !is_bool(l) || (s != NULL && !is_bool(s) &&
                                                           s->type != LDP_JSON_NULL))
            return LDP_E_TOKENIZER;
        st.kind = NORM_BERT;
        st.clean_text = c->type == LDP_JSON_TRUE;
        st.chinese = h->type == LDP_JSON_TRUE;
        st.lowercase = l->type == LDP_JSON_TRUE;
        /* strip_accents: None means "as lowercase" (tokenizers' BertNormalizer) */
        st.strip_accents = is_bool(s) ? s->type == LDP_JSON_TRUE : st.lowercase;
        for (i = 0; i < 128; i++) {
            uint32_t c = (uint32_t)i;
            if (st.clean_text && (ldp_uc_ascii[c] & LDP_UC_OTHER)) c = ASCII_DROP;
            else if (st.clean_text && (ldp_uc_ascii[c] & LDP_UC_SPACE)) c = ' ';
            else if (st.lowercase) c = ldp_uc_ascii_lower(c);
            st.ascii[i] = (unsigned char)c;
        }
    } else if (type_is(n, "Lowercase")) {
        st.kind = NORM_LOWERCASE;
    } else if (type_is(n, "NFC")) {
        st.kind = NORM_NFC;
    } else if (type_is(n, "NFD")) {
        st.kind = NORM_NFD;
    } else if (type_is(n, "NFKC")) {
        st.kind = NORM_NFKC;
    } else if (type_is(n, "NFKD")) {
        st.kind = NORM_NFKD;
    } else if (type_is(n, "StripAccents")) {
        st.kind = NORM_STRIP_ACCENTS;
    } else {
        return LDP_E_TOKENIZER_UNSUPPORTED;
    }
    if (t->n_norms >= MAX_STEPS) return LDP_E_TOKENIZER_UNSUPPORTED;
    t->norms[t->n_norms++] = st;
    return LDP_OK;
}

static int load_pre_tokenizer(ldp_tokenizer *t, const ldp_json *p, int depth) {
    if (is_null_or_absent(p)) return LDP_OK;
    if (p->type != LDP_JSON_OBJECT) return LDP_E_TOKENIZER;
    if (type_is(p, "Sequence")) {
        const ldp_json *list = ldp_json_get(p, "pretokenizers");
        size_t i;
        if (depth > 0) return LDP_E_TOKENIZER_UNSUPPORTED;
        if (list == NULL || list->type != LDP_JSON_ARRAY) return LDP_E_TOKENIZER;
        for (i = 0; i < list->n; i++) {
            int rc = load_pre_tokenizer(t, list->items[i], depth + 1);
            if (rc != LDP_OK) return rc;
        }
        return LDP_OK;
    }
    if (t->n_pres >= MAX_STEPS) return LDP_E_TOKENIZER_UNSUPPORTED;
    if (type_is(p, "BertPreTokenizer")) t->pres[t->n_pres++] = PRE_BERT;
    else if (type_is(p, "WhitespaceSplit")) t->pres[t->n_pres++] = PRE_WHITESPACE_SPLIT;
    else return LDP_E_TOKENIZER_UNSUPPORTED;
    return LDP_OK;
}

static int normalize(const ldp_tokenizer *t, ldp_tok_work *w);

static int load_added(ldp_tokenizer *t, const ldp_json *list) {
    size_t i, k = 0;
    if (is_null_or_absent(list)) return LDP_OK;
    if (list->type != LDP_JSON_ARRAY) return LDP_E_TOKENIZER;
    t->added = (added_token *)calloc(list->n ? list->n : 1, sizeof *t->added);
    if (t->added == NULL) return LDP_E_NOMEM;
    for (i = 0; i < list->n; i++) {
        const ldp_json *a = list->items[i];
        const ldp_json *id = ldp_json_get(a, "id"), *content = ldp_json_get(a, "content"),
                       *norm = ldp_json_get(a, "normalized"), *special = ldp_json_get(a, "special");
        const char *flags[3] = {"lstrip", "rstrip", "single_word"};
        int f;
        if (a->type != LDP_JSON_OBJECT || id == NULL || id->type != LDP_JSON_INT || !id->int_fits ||
            id->int_value < 0 || id->int_value > INT32_MAX || content == NULL ||
            content->type != LDP_JSON_STRING || !is_bool(norm) ||
            (special != NULL && !is_bool(special)))
            return LDP_E_TOKENIZER;
        for (f = 0; f < 3; f++) {
            const ldp_json *v = ldp_json_get(a, flags[f]);
            if (v != NULL && !is_bool(v)) return LDP_E_TOKENIZER;
            if (v != NULL && v->type == LDP_JSON_TRUE) return LDP_E_TOKENIZER_UNSUPPORTED;
        }
        if (content->str_len == 0) continue; /* tokenizers ignores empty added tokens */
        t->added[k].entry = pool_add(t, content->str, content->str_len, (uint32_t)id->int_value);
        t->added[k].content = t->pool + ENTRY_STR(t->added[k].entry);
        t->added[k].len = content->str_len;
        t->added[k].id = (int32_t)id->int_value;
        t->added[k].normalized = norm->type == LDP_JSON_TRUE;
        /* special tokens typed by a user are ordinary text, never matched in input (tokenizers'
         * encode_special_tokens = True, as sdk/ldptext/tokenization.py sets); kept for decoding */
        t->added[k].special = special != NULL && special->type == LDP_JSON_TRUE;
        if (!t->added[k].special && !t->added[k].normalized) t->n_added_raw++;
        k++;
    }
    t->n_added = k;
    return LDP_OK;
}

/* the normalized form of each normalized added token (tokenizers matches those in normalized
 * text); needs the normalizers loaded */
static int normalize_added(ldp_tokenizer *t) {
    ldp_tok_work w;
    size_t i;
    memset(&w, 0, sizeof w);
    for (i = 0; i < t->n_added; i++) {
        added_token *a = &t->added[i];
        if (!a->normalized || a->special) continue;
        t->n_added_normalized++;
        ldp_utf8_decode(a->content, a->len, &w.text);
        if (w.text.failed || normalize(t, &w) != 0) {
            ldp_tok_work_free(&w);
            return LDP_E_NOMEM;
        }
        a->norm = (uint32_t *)malloc((w.text.n ? w.text.n : 1) * sizeof(uint32_t));
        if (a->norm == NULL) {
            ldp_tok_work_free(&w);
            return LDP_E_NOMEM;
        }
        memcpy(a->norm, w.text.v, w.text.n * sizeof(uint32_t));
        a->norm_len = w.text.n;
    }
    ldp_tok_work_free(&w);
    return LDP_OK;
}

/* id_entry[the entry's id] = the entry, which decodes as a continuation piece when it is one */
static void set_id_entry(ldp_tokenizer *t, uint32_t off) {
    entry_header h = entry_at(t, off);
    uint32_t id = h.id & ~ENTRY_CONTINUATION;
    /* Python: `prefix and t.startswith(prefix)`: an empty prefix never attaches */
    h.id = id;
    if (t->model == MODEL_WORDPIECE && t->prefix_len > 0 && h.len >= t->prefix_len &&
        memcmp(t->pool + ENTRY_STR(off), t->prefix, t->prefix_len) == 0)
        h.id |= ENTRY_CONTINUATION;
    memcpy(t->pool + off, &h, sizeof h);
    t->id_entry[id] = off;
}

/* The vocabulary (model.vocab, left unbuilt by the parser) into the pool and the table, read
 * before anything else: the parser leaves it to us to refuse a repeated key, which is malformed
 * JSON (LDP_E_TOKENIZER_JSON) whatever else is wrong. An id that is not one is remembered for
 * load_model, which refuses it where it refused it when the vocabulary was built. */
static int load_vocab(ldp_tokenizer *t, const ldp_json *vocab) {
    ldp_json_cursor *c;
    int rc = LDP_OK;
    if (vocab->n > (size_t)INT32_MAX) return LDP_OK; /* load_model refuses it */
    t->n_slots = vocab->n + vocab->n / 3 + 1; /* at most 3/4 full, one slot empty at least */
    t->slots = (vocab_slot *)calloc(t->n_slots, sizeof *t->slots);
    c = ldp_json_cursor_new(vocab);
    if (t->slots == NULL || c == NULL) {
        ldp_json_cursor_free(c);
        return LDP_E_NOMEM;
    }
    t->vocab_begin = t->pool_used;
    for (;;) {
        const char *key;
        size_t key_len, i;
        const ldp_json *id;
        uint32_t off;
        int jrc = ldp_json_cursor_next(c, &key, &key_len, &id);
        if (jrc != LDP_JSON_OK) {
            rc = jrc == LDP_JSON_E_NOMEM ? LDP_E_NOMEM : LDP_E_TOKENIZER_JSON;
            break;
        }
        if (id == NULL) break;
        if (vocab_entry(t, key, key_len, &i) != 0) {
            rc = LDP_E_TOKENIZER_JSON; /* a repeated key */
            break;
        }
        if (id->type != LDP_JSON_INT || !id->int_fits || id->int_value < 0 ||
            id->int_value > INT32_MAX) {
            t->vocab_bad = 1;
            off = pool_add(t, key, key_len, 0);
        } else {
            off = pool_add(t, key, key_len, (uint32_t)id->int_value);
        }
        t->slots[i].off = off;
        t->slots[i].hash = (uint32_t)hash_bytes(key, key_len);
        if (key_len > t->max_token_len) t->max_token_len = key_len;
    }
    t->vocab_end = t->pool_used;
    ldp_json_cursor_free(c);
    return rc;
}

static int load_model(ldp_tokenizer *t, const ldp_json *m) {
    const ldp_json *vocab = ldp_json_get(m, "vocab"), *unk = ldp_json_get(m, "unk_token");
    size_t i, off;
    int64_t max_id = -1;
    if (m == NULL || m->type != LDP_JSON_OBJECT) return LDP_E_TOKENIZER;
    if (type_is(m, "WordPiece")) {
        const ldp_json *pre = ldp_json_get(m, "continuing_subword_prefix"),
                       *mx = ldp_json_get(m, "max_input_chars_per_word");
        t->model = MODEL_WORDPIECE;
        if (pre == NULL || pre->type != LDP_JSON_STRING || mx == NULL || mx->type != LDP_JSON_INT ||
            !mx->int_fits || mx->int_value < 0)
            return LDP_E_TOKENIZER;
        if (pre->str_len > 64) return LDP_E_TOKENIZER_UNSUPPORTED;
        t->prefix = t->pool + ENTRY_STR(pool_add(t, pre->str, pre->str_len, 0));
        t->prefix_len = pre->str_len;
        t->max_input_chars = (size_t)mx->int_value;
    } else if (type_is(m, "WordLevel")) {
        t->model = MODEL_WORDLEVEL;
    } else {
        return LDP_E_TOKENIZER_UNSUPPORTED;
    }
    /* (vocab: the vocabulary load_vocab read) */
    if (vocab == NULL || vocab->type != LDP_JSON_LAZY || unk == NULL ||
        unk->type != LDP_JSON_STRING || vocab->n > (size_t)INT32_MAX || t->vocab_bad)
        return LDP_E_TOKENIZER;
    if (!vocab_find(t, unk->str, unk->str_len, &t->unk_id))
        return LDP_E_TOKENIZER; /* tokenizers fails on the first unknown word: refuse up front */
    /* id -> string: the model's vocabulary (document order), then the added tokens
     * (get_vocab(with_added_tokens)); the last one of an id wins */
    for (off = t->vocab_begin; off < t->vocab_end; off += entry_size(entry_at(t, off).len)) {
        uint32_t id = entry_at(t, off).id;
        if (id > max_id) max_id = id;
    }
    for (i = 0; i < t->n_added; i++)
        if (t->added[i].id > max_id) max_id = t->added[i].id;
    t->n_ids = (size_t)(max_id + 1);
    t->id_entry = (uint32_t *)calloc(t->n_ids ? t->n_ids : 1, sizeof *t->id_entry);
    if (t->id_entry == NULL) return LDP_E_NOMEM;
    for (off = t->vocab_begin; off < t->vocab_end; off += entry_size(entry_at(t, off).len))
        set_id_entry(t, (uint32_t)off);
    for (i = 0; i < t->n_added; i++) set_id_entry(t, t->added[i].entry);
    return LDP_OK;
}

/* Room for one more entry of n bytes (at most): 0 when the sum would overflow. */
static int room_for(size_t *total, size_t n) {
    if (n > (size_t)-1 - ENTRY_MAX_EXTRA || *total > (size_t)-1 - ENTRY_MAX_EXTRA - n) return 0;
    *total += ENTRY_MAX_EXTRA + n;
    return 1;
}

/* Bytes the pool needs at most: the empty entry, the vocabulary's keys, the added tokens and the
 * continuation prefix (whatever the loaders below will keep, and no less when they refuse). 0
 * when it does not fit in a size_t. */
static size_t pool_bound(const ldp_json *root, const ldp_json *vocab) {
    const ldp_json *added = ldp_json_get(root, "added_tokens"),
                   *prefix = ldp_json_get(ldp_json_get(root, "model"), "continuing_subword_prefix");
    size_t total = 0, i;
    if (!room_for(&total, 0)) return 0;
    if (vocab != NULL && vocab->type == LDP_JSON_LAZY) {
        if (vocab->n > ((size_t)-1 - vocab->key_bytes) / ENTRY_MAX_EXTRA ||
            total > (size_t)-1 - vocab->key_bytes - vocab->n * ENTRY_MAX_EXTRA)
            return 0;
        total += vocab->key_bytes + vocab->n * ENTRY_MAX_EXTRA;
    }
    if (added != NULL && added->type == LDP_JSON_ARRAY)
        for (i = 0; i < added->n; i++) {
            const ldp_json *content = ldp_json_get(added->items[i], "content");
            if (content != NULL && content->type == LDP_JSON_STRING &&
                !room_for(&total, content->str_len))
                return 0;
        }
    if (prefix != NULL && prefix->type == LDP_JSON_STRING && !room_for(&total, prefix->str_len))
        return 0;
    return total;
}

/* Whether ASCII text can be encoded in bytes (ascii_piece), and the byte map and split classes
 * that path uses. Every normalizer here maps an ASCII code point to one ASCII code point or drops
 * it (NFC, NFD, NFKC, NFKD and strip_accents leave ASCII as it is; lowercasing and BertNormalizer
 * are tables), so their composition is a table. The pre-tokenizers split on their classes level by
 * level; on ASCII the words that leaves are those of one split on the union of the classes (a
 * space is removed at any level, a punctuation character isolated at a BERT level stays one). */
static void ascii_plan(ldp_tokenizer *t) {
    size_t s, c;
    t->ascii_bytes = 0;
    if (t->n_added_normalized > 0) return;
    for (c = 0; c < 128; c++) {
        unsigned v = (unsigned)c;
        for (s = 0; s < t->n_norms && v != ASCII_DROP; s++) {
            const norm_step *st = &t->norms[s];
            if (st->kind == NORM_BERT) v = st->ascii[v];
            else if (st->kind == NORM_LOWERCASE) v = ldp_uc_ascii_lower(v);
            /* NFC, NFD, NFKC, NFKD, strip_accents: ASCII is stable under each */
        }
        t->ascii_map[c] = (unsigned char)v;
    }
    t->ascii_split = 0;
    for (s = 0; s < t->n_pres; s++)
        t->ascii_split |= t->pres[s] == PRE_BERT ? LDP_UC_SPACE | LDP_UC_PUNCT : LDP_UC_SPACE;
    t->ascii_bytes = 1;
}

int ldp_tokenizer_load(const char *json, size_t len, ldp_tokenizer **out) {
    /* the vocabulary is read from its text, not built as a tree (ldp_json_parse_lazy) */
    static const char *const vocab_path[2] = {"model", "vocab"};
    ldp_json_doc *doc = NULL;
    const ldp_json *root = NULL, *vocab;
    ldp_tokenizer *t;
    int rc;
    *out = NULL;
    if (!ldp_utf8_valid(json, len)) return LDP_E_TOKENIZER_JSON;
    rc = ldp_json_parse_lazy(json, len, vocab_path, 2, &doc, &root);
    if (rc == LDP_JSON_E_NOMEM) return LDP_E_NOMEM;
    if (rc != LDP_JSON_OK) return LDP_E_TOKENIZER_JSON;
    vocab = ldp_json_get(ldp_json_get(root, "model"), "vocab");
    t = (ldp_tokenizer *)calloc(1, sizeof *t);
    if (t == NULL) {
        ldp_json_free(doc);
        return LDP_E_NOMEM;
    }
    /* entries are addressed by 32-bit offsets */
    t->pool_cap = pool_bound(root, vocab);
    if (t->pool_cap == 0 || t->pool_cap > UINT32_MAX) {
        rc = LDP_E_TOKENIZER_UNSUPPORTED;
        goto done;
    }
    t->pool = (char *)malloc(t->pool_cap);
    if (t->pool == NULL) {
        rc = LDP_E_NOMEM;
        goto done;
    }
    pool_add(t, "", 0, 0); /* offset 0: the empty string */
    if (vocab != NULL && vocab->type == LDP_JSON_LAZY && (rc = load_vocab(t, vocab)) != LDP_OK)
        goto done;
    if (root->type != LDP_JSON_OBJECT) {
        rc = LDP_E_TOKENIZER;
        goto done;
    }
    if ((rc = load_normalizer(t, ldp_json_get(root, "normalizer"), 0)) != LDP_OK) goto done;
    if ((rc = load_pre_tokenizer(t, ldp_json_get(root, "pre_tokenizer"), 0)) != LDP_OK) goto done;
    if ((rc = load_added(t, ldp_json_get(root, "added_tokens"))) != LDP_OK) goto done;
    if ((rc = load_model(t, ldp_json_get(root, "model"))) != LDP_OK) goto done;
    rc = normalize_added(t);
    if (rc == LDP_OK) ascii_plan(t);
done:
    ldp_json_free(doc);
    if (rc != LDP_OK) {
        ldp_tokenizer_free(t);
        return rc;
    }
    *out = t;
    return LDP_OK;
}

void ldp_tokenizer_free(ldp_tokenizer *t) {
    size_t i;
    if (t == NULL) return;
    for (i = 0; i < t->n_added; i++) free(t->added[i].norm);
    free(t->added);
    free(t->slots);
    free(t->id_entry);
    free(t->pool);
    free(t);
}

int ldp_tokenizer_is_wordpiece(const ldp_tokenizer *t) { return t->model == MODEL_WORDPIECE; }

int32_t ldp_tokenizer_unk_id(const ldp_tokenizer *t) { return t->unk_id; }

void ldp_tok_work_free(ldp_tok_work *w) {
    ldp_u32_free(&w->text);
    ldp_u32_free(&w->tmp);
    free(w->utf8);
    memset(w, 0, sizeof *w);
}

/* ---- encoding ------------------------------------------------------------------------------- */

typedef struct {
    int32_t *ids;
    size_t cap, n;
} emitter;

static void emit(emitter *e, int32_t id) {
    if (e->n < e->cap) e->ids[e->n] = id;
    e->n++;
}

static void swap_vec(ldp_u32vec *a, ldp_u32vec *b) {
    ldp_u32vec t = *a;
    *a = *b;
    *b = t;
}

/* w->text = every normalizer applied to w->text (w->tmp is scratch). 0, or -1 out of memory. */
static int normalize(const ldp_tokenizer *t, ldp_tok_work *w) {
    size_t s, i, k;
    for (s = 0; s < t->n_norms; s++) {
        const norm_step *st = &t->norms[s];
        ldp_u32vec *in = &w->text, *out = &w->tmp;
        switch (st->kind) {
        case NORM_BERT: {
            int ascii = 1; /* nothing but ASCII written */
            out->n = 0;
            if (!ldp_u32_reserve(out, in->n * (st->chinese ? 3 : 1))) return -1;
            for (i = 0; i < in->n; i++) {
                uint32_t c = in->v[i];
                if (c < 0x80) {
                    /* ASCII is lowercased here already: NFD and strip_accents below leave ASCII
                     * letters alone (starters that do not decompose, not marks), so the text is
                     * the same as when they are lowercased last, and lowercasing again keeps it.
                     * Written always, kept unless dropped: no branch on the text. */
                    out->v[out->n] = st->ascii[c];
                    out->n += st->ascii[c] != ASCII_DROP;
                    continue;
                }
                if (st->clean_text) {
                    if (ldp_uc_is_other(c)) continue; /* also U+FFFD */
                    if (ldp_uc_is_space(c)) c = ' ';
                }
                if (c >= 0x80) ascii = 0;
                if (st->chinese && ldp_uc_is_chinese(c)) {
                    out->v[out->n++] = ' ';
                    out->v[out->n++] = c;
                    out->v[out->n++] = ' ';
                } else {
                    out->v[out->n++] = c;
                }
            }
            swap_vec(in, out);
            /* ASCII text: NFD, strip_accents and lowercasing change nothing more */
            if (ascii) break;
            if (st->strip_accents) {
                if (ldp_uc_normalize(in->v, in->n, LDP_NF_NFD, out) != 0) return -1;
                for (i = 0, k = 0; i < out->n; i++)
                    if (!ldp_uc_is_mn(out->v[i])) out->v[k++] = out->v[i];
                out->n = k;
                swap_vec(in, out);
            }
            if (st->lowercase) goto lowercase;
            break;
        }
        case NORM_LOWERCASE:
        lowercase:
            out->n = 0;
            if (!ldp_u32_reserve(out, in->n)) return -1;
            for (i = 0; i < in->n; i++) {
                uint32_t low[3], c = in->v[i];
                size_t m, j;
                if (c < 0x80) {
                    out->v[out->n++] = ldp_uc_ascii_lower(c);
                    continue;
                }
                m = ldp_uc_lower(c, low);
                if (m > 1 && !ldp_u32_reserve(out, in->n - i + m)) return -1;
                for (j = 0; j < m; j++) out->v[out->n++] = low[j];
            }
            swap_vec(in, out);
            break;
        case NORM_NFC:
        case NORM_NFD:
        case NORM_NFKC:
        case NORM_NFKD: {
            int form = st->kind == NORM_NFC    ? LDP_NF_NFC
                       : st->kind == NORM_NFD  ? LDP_NF_NFD
                       : st->kind == NORM_NFKC ? LDP_NF_NFKC
                                               : LDP_NF_NFKD;
            if (ldp_uc_normalize(in->v, in->n, form, out) != 0) return -1;
            swap_vec(in, out);
            break;
        }
        case NORM_STRIP_ACCENTS:
            for (i = 0, k = 0; i < in->n; i++)
                if (!ldp_uc_is_mark(in->v[i])) in->v[k++] = in->v[i];
            in->n = k;
            break;
        }
    }
    return w->text.failed || w->tmp.failed ? -1 : 0;
}

/* w->utf8 holds at least need bytes. */
static int utf8_room(ldp_tok_work *w, size_t need) {
    if (need > w->utf8_cap) {
        char *p = (char *)realloc(w->utf8, need);
        if (p == NULL) return 0;
        w->utf8 = p;
        w->utf8_cap = need;
    }
    return 1;
}

static int model_utf8(const ldp_tokenizer *t, char *word, size_t len, size_t n, emitter *e);

/* The model on one word (code points). */
static int model_word(const ldp_tokenizer *t, ldp_tok_work *w, const uint32_t *cps, size_t n,
                      emitter *e) {
    char *word;
    if (n == 0) return 0;
    if (n + t->prefix_len > (SIZE_MAX - 80) / 4 || !utf8_room(w, 4 * (n + t->prefix_len) + 80)) return -1;
    /* the word sits after room for the prefix, so "##" + piece is one contiguous string */
    word = w->utf8 + t->prefix_len + 1;
    return model_utf8(t, word, ldp_utf8_encode(cps, n, word), n, e);
}

/* The model on one word: its UTF-8 word[0..len), n code points, writable, with at least
 * prefix_len writable bytes before it (each "##" + piece is written over the bytes before the
 * piece, then they are restored). */
static int model_utf8(const ldp_tokenizer *t, char *word, size_t len, size_t n, emitter *e) {
    size_t start;
    int32_t id;
    if (t->model == MODEL_WORDLEVEL) {
        emit(e, vocab_find(t, word, len, &id) ? id : t->unk_id);
        return 0;
    }
    if (n > t->max_input_chars) {
        emit(e, t->unk_id);
        return 0;
    }
    {
        size_t first = e->n; /* tokens of this word, rolled back if the word is unknown */
        start = 0;
        while (start < len) {
            size_t end = len, extra = start > 0 ? t->prefix_len : 0;
            int found = 0;
            /* longest first: no vocabulary entry is longer than max_token_len bytes */
            while (end > start && end - start + extra > t->max_token_len) {
                end--;
                while (end > start && ((unsigned char)word[end] & 0xC0) == 0x80) end--;
            }
            while (end > start) {
                const char *piece = word + start;
                size_t plen = end - start;
                if (extra) { /* prefix + piece: written just before the piece */
                    char saved[64];
                    char *at = word + start - extra;
                    if (extra > sizeof saved) return -1;
                    memcpy(saved, at, extra);
                    memcpy(at, t->prefix, extra);
                    found = vocab_find(t, at, plen + extra, &id);
                    memcpy(at, saved, extra);
                } else {
                    found = vocab_find(t, piece, plen, &id);
                }
                if (found) break;
                end--;
                while (end > start && ((unsigned char)word[end] & 0xC0) == 0x80) end--;
            }
            if (!found) {
                e->n = first;
                emit(e, t->unk_id);
                return 0;
            }
            emit(e, id);
            start = end;
        }
    }
    return 0;
}

/* The words of cps[0..n) under pre-tokenizers s, s + 1, ... (each splits the words of the one
 * before), each through the model, in order; with none left, cps[0..n) is one word. Depth first,
 * so no list of words is kept. */
static int pre_and_model(const ldp_tokenizer *t, ldp_tok_work *w, const uint32_t *cps, size_t n,
                         size_t s, emitter *e) {
    /* whitespace is removed; BertPreTokenizer also isolates punctuation */
    int split;
    size_t j, start = 0;
    if (s == t->n_pres) return model_word(t, w, cps, n, e);
    split = t->pres[s] == PRE_BERT ? LDP_UC_SPACE | LDP_UC_PUNCT : LDP_UC_SPACE;
    for (j = 0; j < n; j++) {
        uint32_t c = cps[j];
        int cls;
        if (c < 0x80) cls = ldp_uc_ascii[c] & split; /* most text: no call */
        else if (ldp_uc_is_space(c)) cls = LDP_UC_SPACE;
        else if ((split & LDP_UC_PUNCT) && ldp_uc_is_punct(c)) cls = LDP_UC_PUNCT;
        else cls = 0;
        if (cls == 0) continue;
        if (j > start && pre_and_model(t, w, cps + start, j - start, s + 1, e) != 0) return -1;
        if (cls == LDP_UC_PUNCT && pre_and_model(t, w, cps + j, 1, s + 1, e) != 0) return -1;
        start = j + 1;
    }
    return n > start ? pre_and_model(t, w, cps + start, n - start, s + 1, e) : 0;
}

/* Normalized added tokens out of the normalized text, then pre_and_model on the rest. */
static int normalized_piece(const ldp_tokenizer *t, ldp_tok_work *w, emitter *e) {
    const uint32_t *cps = w->text.v;
    size_t n = w->text.n, pos = 0, i;
    if (t->n_added_normalized == 0) return pre_and_model(t, w, cps, n, 0, e);
    /* w->text is not touched below (pre_and_model uses w->utf8 only) */
    for (i = 0; i < n;) {
        size_t best_len = 0, k;
        int32_t best_id = 0;
        for (k = 0; k < t->n_added; k++) {
            const added_token *a = &t->added[k];
            if (a->special || !a->normalized || a->norm_len == 0 || a->norm_len > n - i ||
                a->norm_len <= best_len)
                continue;
            if (memcmp(cps + i, a->norm, a->norm_len * sizeof(uint32_t)) == 0) {
                best_len = a->norm_len;
                best_id = a->id;
            }
        }
        if (best_len == 0) {
            i++;
            continue;
        }
        if (i > pos && pre_and_model(t, w, cps + pos, i - pos, 0, e) != 0) return -1;
        emit(e, best_id);
        i += best_len;
        pos = i;
    }
    if (n > pos) return pre_and_model(t, w, cps + pos, n - pos, 0, e);
    return 0;
}

int ldp_tokenizer_normalize(const ldp_tokenizer *t, ldp_tok_work *w, const uint32_t *cps,
                            size_t n) {
    w->text.n = 0;
    if (!ldp_u32_reserve(&w->text, n)) return LDP_E_NOMEM;
    if (n) memcpy(w->text.v, cps, n * sizeof *cps);
    w->text.n = n;
    return normalize(t, w) == 0 ? LDP_OK : LDP_E_NOMEM;
}

/* raw_piece for an ASCII piece of a tokenizer with ascii_bytes: normalized byte by byte, split and
 * looked up in place, with no code points in between (those passes were a third of encoding
 * ASCII text). The same ids as raw_piece's path (ascii_plan says why; tests/test_tokenizer_ascii.py
 * compares both paths and the Hugging Face tokenizer). */
static int ascii_piece(const ldp_tokenizer *t, ldp_tok_work *w, const char *s, size_t len, emitter *e) {
    const int split = t->ascii_split;
    const size_t room = t->prefix_len + 1; /* model_word writes the prefix before a piece */
    size_t i, m = 0, start = 0;
    char *text;
    if (len > SIZE_MAX - room - 16 || !utf8_room(w, room + len + 16)) return -1;
    text = w->utf8 + room;
    for (i = 0; i < len; i++) { /* written always, kept unless dropped: no branch on the text */
        const unsigned char c = t->ascii_map[(unsigned char)s[i]];
        text[m] = (char)c;
        m += c != ASCII_DROP;
    }
    for (i = 0; i < m; i++) {
        const int cls = ldp_uc_ascii[(unsigned char)text[i]] & split;
        if (cls == 0) continue;
        if (i > start && model_utf8(t, text + start, i - start, i - start, e) != 0) return -1;
        if (cls == LDP_UC_PUNCT && model_utf8(t, text + i, 1, 1, e) != 0) return -1;
        start = i + 1;
    }
    return m > start ? model_utf8(t, text + start, m - start, m - start, e) : 0;
}

static int is_ascii(const char *s, size_t len) {
    unsigned char any = 0;
    size_t i;
    for (i = 0; i < len; i++) any |= (unsigned char)s[i];
    return any < 0x80;
}

/* A piece of raw text between non-normalized added tokens. */
static int raw_piece(const ldp_tokenizer *t, ldp_tok_work *w, const char *s, size_t len, emitter *e) {
    if (t->ascii_bytes && is_ascii(s, len)) return ascii_piece(t, w, s, len, e);
    ldp_utf8_decode(s, len, &w->text);
    if (w->text.failed || normalize(t, w) != 0) return -1;
    return normalized_piece(t, w, e);
}

int ldp_tokenizer_encode(const ldp_tokenizer *t, ldp_tok_work *w, const char *utf8, size_t len,
                         int32_t *ids, size_t cap, size_t *n) {
    emitter e;
    size_t pos = 0, i;
    e.ids = ids;
    e.cap = ids == NULL ? 0 : cap;
    e.n = 0;
    *n = 0;
    if (utf8 == NULL && len > 0) return LDP_E_ARG;
    if (!ldp_utf8_valid(utf8, len)) return LDP_E_INVALID_UTF8;
    /* non-normalized added tokens, leftmost-longest over the raw bytes (most bundles have none:
     * their added tokens are special) */
    for (i = 0; t->n_added_raw > 0 && i < len;) {
        size_t best_len = 0, k;
        int32_t best_id = 0;
        for (k = 0; k < t->n_added; k++) {
            const added_token *a = &t->added[k];
            if (a->special || a->normalized || a->len > len - i || a->len <= best_len) continue;
            if (a->content[0] == utf8[i] && memcmp(utf8 + i, a->content, a->len) == 0) {
                best_len = a->len;
                best_id = a->id;
            }
        }
        if (best_len == 0) {
            i++;
            continue;
        }
        if (i > pos && raw_piece(t, w, utf8 + pos, i - pos, &e) != 0) return LDP_E_NOMEM;
        emit(&e, best_id);
        i += best_len;
        pos = i;
    }
    if (len > pos && raw_piece(t, w, utf8 + pos, len - pos, &e) != 0) return LDP_E_NOMEM;
    *n = e.n;
    return e.n > e.cap ? LDP_E_CAPACITY : LDP_OK;
}

/* ---- decoding ------------------------------------------------------------------------------- */

/* The first occurrence of a[0..na) in s[0..n) (na >= 1), or NULL. memchr looks for a[k], the
 * pattern's rarest byte (the clean-up patterns all start with a space, which is every fifth byte
 * of text, but their punctuation or apostrophe is rare); the leftmost a[k] that completes the
 * pattern is the leftmost occurrence. C99 has no memmem. */
static const char *find_bytes(const char *s, size_t n, const char *a, size_t na, size_t k) {
    const char *p, *last;
    if (n < na) return NULL;
    p = s + k;
    last = s + (n - na) + k; /* the last place a[k] may sit */
    while (p <= last) {
        p = (const char *)memchr(p, (unsigned char)a[k], (size_t)(last - p) + 1);
        if (p == NULL) return NULL;
        if (memcmp(p - k, a, na) == 0) return p - k;
        p++;
    }
    return NULL;
}

/* Python's str.replace(a, b) on buf[from..]: leftmost non-overlapping occurrences, left to right
 * (a[k]: the byte to look for, see find_bytes). The text between occurrences is moved in blocks;
 * a pattern that does not occur costs one memchr scan. In place: b is not longer than a (every
 * clean-up rule). */
static void replace_all(ldp_buf *buf, size_t from, const char *a, size_t k, const char *b) {
    size_t na = strlen(a), nb = strlen(b), i, w;
    const char *hit;
    if (buf->failed || buf->len - from < na) return;
    hit = find_bytes(buf->data + from, buf->len - from, a, na, k);
    /* the write position never passes the read position: memmove the kept runs down */
    i = w = from;
    while (hit != NULL) {
        size_t at = (size_t)(hit - buf->data);
        if (w != i) memmove(buf->data + w, buf->data + i, at - i);
        w += at - i;
        memcpy(buf->data + w, b, nb);
        w += nb;
        i = at + na;
        hit = find_bytes(buf->data + i, buf->len - i, a, na, k);
    }
    if (w != i) memmove(buf->data + w, buf->data + i, buf->len - i);
    buf->len = w + (buf->len - i);
}

/* How many ids ahead the decoder asks for an entry's offset (and half as many for the entry). */
#define DECODE_AHEAD 16

int ldp_tokenizer_decode(const ldp_tokenizer *t, const int32_t *ids, size_t n, ldp_buf *out) {
    /* sdk/ldptext/tokenization.py: WordPiece continuation pieces attach to the previous piece,
     * every other token is preceded by one space (id_entry); leading spaces are stripped;
     * WordPiece text gets the BERT clean-up of the space before punctuation and contractions,
     * in this order (each rule: pattern, index of its rarest byte, replacement). */
    static const struct {
        const char *a;
        size_t k;
        const char *b;
    } cleanup[] = {{" .", 1, "."},    {" ?", 1, "?"},     {" !", 1, "!"},   {" ,", 1, ","},
                   {" ' ", 1, "'"},   {" n't", 2, "n't"}, {" 'm", 1, "'m"}, {" 's", 1, "'s"},
                   {" 've", 1, "'ve"}, {" 're", 1, "'re"}};
    size_t i, from = out->len;
    for (i = 0; i < n; i++) {
        const char *s;
        size_t len, off;
        entry_header h;
#if defined(__GNUC__)
        /* ask for the entries of the ids ahead, in two steps (an entry's offset, then the entry):
         * after a document's sampling its entries are mostly out of cache. One ldp_sanitize call
         * per document (300 news documents), builds interleaved, median per-run ratio of CPU time
         * with vs without: MiniLM default split eps = 10 0.87-0.90, frequency split eps = 1
         * 0.82-0.83, eps = 15 0.92; GloVe-50k (one word per id) eps = 10 0.96-1.00. With the
         * entries already in cache (ldp_detokenize of every document, second pass) 0.85-0.88. */
        if (i + DECODE_AHEAD < n && ids[i + DECODE_AHEAD] >= 0 && (size_t)ids[i + DECODE_AHEAD] < t->n_ids)
            __builtin_prefetch(t->id_entry + ids[i + DECODE_AHEAD], 0, 3);
        if (i + DECODE_AHEAD / 2 < n && ids[i + DECODE_AHEAD / 2] >= 0 &&
            (size_t)ids[i + DECODE_AHEAD / 2] < t->n_ids)
            __builtin_prefetch(t->pool + t->id_entry[ids[i + DECODE_AHEAD / 2]], 0, 3);
#endif
        if (ids[i] < 0 || (size_t)ids[i] >= t->n_ids) return LDP_E_INPUT_ID;
        off = t->id_entry[ids[i]]; /* 0: no token, the empty string, whose piece is " " */
        h = entry_at(t, off);
        s = t->pool + ENTRY_STR(off);
        if (h.id & ENTRY_CONTINUATION) {
            s += t->prefix_len;
            len = h.len - t->prefix_len;
        } else {
            s--;
            len = h.len + 1;
        }
        /* lstrip(" "): leading spaces are dropped until the first other byte is written */
        if (out->len == from)
            while (len > 0 && *s == ' ') {
                s++;
                len--;
            }
        ldp_buf_put(out, s, len);
    }
    if (out->failed) return LDP_E_NOMEM;
    /* the last six rules need an apostrophe: one scan spares five when there is none */
    if (t->model == MODEL_WORDPIECE) {
        size_t n_rules =
            out->len > from && memchr(out->data + from, '\'', out->len - from) != NULL ? 10 : 4;
        for (i = 0; i < n_rules; i++)
            replace_all(out, from, cleanup[i].a, cleanup[i].k, cleanup[i].b);
    }
    if (out->data == NULL) ldp_buf_put(out, "", 0);
    else out->data[out->len] = '\0';
    return out->failed ? LDP_E_NOMEM : LDP_OK;
}

/* ---- what a released id renders as ---------------------------------------------------------- */
/* A released id leaves the device as its token's text (ldp_tokenizer_decode), while the bundle's
 * privacy statement (embeddings, metric, verbatim rate) is about rows, whose words are vocab.json.
 * These checks tie the two: the tokenizer's tokens are vocab.json's rows, and every output's text
 * is read back by the same tokenizer as that output, so no output can be shown as another word
 * (an input's look-alike: the same letters upper-cased, or with invisible characters inside).
 * sdk/ldptext/tokenization.py (agrees_with_vocab, read_back) states the same rules. */

/* the token of entry off (continuation prefix included) */
static const char *entry_str(const ldp_tokenizer *t, uint32_t off, size_t *len) {
    *len = entry_at(t, off).len;
    return t->pool + ENTRY_STR(off);
}

const char *ldp_tokenizer_token(const ldp_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || (size_t)id >= t->n_ids || t->id_entry[id] == 0) return NULL;
    return entry_str(t, t->id_entry[id], len);
}

/* 1 if a[0..na) is the token of entry off */
static int is_token(const ldp_tokenizer *t, uint32_t off, const char *a, size_t na) {
    size_t n;
    const char *s = entry_str(t, off, &n);
    return n == na && (na == 0 || memcmp(s, a, na) == 0);
}

/* qsort order of added tokens by content (bytes, then length) */
static int cmp_added(const void *pa, const void *pb) {
    const added_token *a = *(const added_token *const *)pa, *b = *(const added_token *const *)pb;
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->content, b->content, n);
    if (c != 0) return c;
    return a->len < b->len ? -1 : a->len > b->len;
}

static const char *json_ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

static int hex4(const char *p, const char *end, uint32_t *out) {
    int i;
    *out = 0;
    if (end - p < 4) return 0;
    for (i = 0; i < 4; i++) {
        char c = p[i];
        *out <<= 4;
        if (c >= '0' && c <= '9') *out |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') *out |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') *out |= (uint32_t)(c - 'A' + 10);
        else return 0;
    }
    return 1;
}

/* The JSON string whose opening quote *pp is at, decoded into out (cleared first); *pp moves past
 * its closing quote. The text is valid UTF-8. As strict as json.c: no raw control character,
 * only JSON's escapes, no lone surrogate (Python's json reads one, but no token can hold it, so
 * the Python check refuses that vocab.json too). 0, -1 malformed, -2 out of memory.
 * (vocab.json is read here, not by ldp_json_parse: building its tree took most of the check's
 * time, 13 ms for GloVe-50k.) */
static int json_string(const char **pp, const char *end, ldp_buf *out) {
    static const char plain[] = "\"\\/bfnrt", decoded[] = "\"\\/\b\f\n\r\t";
    const char *p = *pp + 1;
    out->len = 0;
    for (;;) {
        const char *run = p, *e;
        uint32_t cp, lo;
        char utf8[4];
        while (p < end && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20) p++;
        ldp_buf_put(out, run, (size_t)(p - run));
        if (p >= end || (unsigned char)*p < 0x20) return -1;
        if (*p++ == '"') break;
        if (p >= end) return -1;
        if (*p != 'u') {
            if (*p == '\0' || (e = strchr(plain, *p)) == NULL) return -1;
            ldp_buf_putc(out, decoded[e - plain]);
            p++;
            continue;
        }
        if (!hex4(p + 1, end, &cp) || (cp >= 0xDC00 && cp <= 0xDFFF)) return -1;
        p += 5;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (end - p < 2 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, end, &lo) ||
                lo < 0xDC00 || lo > 0xDFFF)
                return -1;
            p += 6;
            cp = 0x10000u + ((cp - 0xD800u) << 10) + (lo - 0xDC00u);
        }
        ldp_buf_put(out, utf8, ldp_utf8_encode(&cp, 1, utf8));
    }
    *pp = p;
    return out->failed ? -2 : 0;
}

int ldp_tokenizer_check_vocab(const ldp_tokenizer *t, const char *vocab_json, size_t len,
                              size_t n_rows) {
    const char *p = vocab_json, *end = vocab_json + len;
    const added_token **sorted = NULL;
    ldp_buf word;
    size_t off, i = 0;
    int rc = LDP_E_TOKENIZER;
    ldp_buf_init(&word);
    /* the tokenizer's ids are 0 .. n_rows - 1 exactly: an id past the rows would be an input no
     * row sanitizes */
    if (t->n_ids != n_rows || (len > 0 && vocab_json == NULL) || !ldp_utf8_valid(vocab_json, len))
        goto done;
    /* vocab.json, a JSON list of n_rows strings: row i's token is vocab[i] (so every row has
     * one: an id without a token has entry 0) */
    p = json_ws(p, end);
    if (p == end || *p++ != '[') goto done;
    p = json_ws(p, end);
    if (p < end && *p == ']') {
        p++;
    } else {
        for (;; i++) {
            int r;
            if (p == end || *p != '"') goto done;
            if ((r = json_string(&p, end, &word)) != 0) {
                if (r == -2) rc = LDP_E_NOMEM;
                goto done;
            }
            if (i >= n_rows || t->id_entry[i] == 0 || !is_token(t, t->id_entry[i], word.data, word.len))
                goto done;
            p = json_ws(p, end);
            if (p < end && *p == ',') {
                p = json_ws(p + 1, end);
                continue;
            }
            if (p == end || *p++ != ']') goto done;
            i++;
            break;
        }
    }
    if (i != n_rows || json_ws(p, end) != end) goto done;
    /* every (token, id) pair is (vocab[id], id), vocab[id] being now the token of id_entry[id]:
     * the model's vocabulary, whose tokens are distinct (load_vocab), so none of its ids has two
     * tokens, ... */
    for (off = t->vocab_begin; off < t->vocab_end; off += entry_size(entry_at(t, off).len)) {
        size_t n;
        const char *s = entry_str(t, (uint32_t)off, &n);
        if (!is_token(t, t->id_entry[entry_at(t, off).id & ~ENTRY_CONTINUATION], s, n)) goto done;
    }
    /* ... and the added tokens, none of which gives a token of the vocabulary or of another added
     * token a second id (the Python runtime's table keeps one id per token: a second would leave
     * a row without its token there, and two rows rendering alike here) */
    sorted = (const added_token **)malloc((t->n_added ? t->n_added : 1) * sizeof *sorted);
    if (sorted == NULL) {
        rc = LDP_E_NOMEM;
        goto done;
    }
    for (i = 0; i < t->n_added; i++) {
        const added_token *a = &t->added[i];
        int32_t id;
        if (!is_token(t, t->id_entry[a->id], a->content, a->len)) goto done;
        if (vocab_find(t, a->content, a->len, &id) && id != a->id) goto done;
        sorted[i] = a;
    }
    qsort(sorted, t->n_added, sizeof *sorted, cmp_added);
    for (i = 1; i < t->n_added; i++)
        if (cmp_added(&sorted[i - 1], &sorted[i]) == 0 && sorted[i - 1]->id != sorted[i]->id)
            goto done;
    rc = LDP_OK;
done:
    free(sorted);
    ldp_buf_free(&word);
    return rc;
}

/* 1 if s[0..n) (valid UTF-8) is not empty and has no code point that BERT's clean_text removes
 * (control, format such as U+200B, private use, U+FFFD) or that is whitespace: text a reader
 * sees all of. The classes are tokenizers' own (unicode_tables.h), so the Python rule, which asks
 * tokenizers, gives the same answer. */
static int visible(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    if (n == 0) return 0;
    while (p < end) {
        uint32_t c = *p;
        int extra = c < 0x80 ? 0 : c < 0xE0 ? 1 : c < 0xF0 ? 2 : 3;
        if (extra) c &= 0x3F >> extra;
        p++;
        while (extra-- > 0 && p < end) c = (c << 6) | (*p++ & 0x3F);
        if (ldp_uc_is_other(c) || ldp_uc_is_space(c)) return 0;
    }
    return 1;
}

/* 1 if text[0..len) encodes as exactly want[0..n_want) (n_want <= 2), 0 if not, -1 out of memory */
static int encodes_as(const ldp_tokenizer *t, ldp_tok_work *w, const char *text, size_t len,
                      const int32_t *want, size_t n_want) {
    int32_t got[3];
    size_t n = 0, i;
    int rc = ldp_tokenizer_encode(t, w, text, len, got, 3, &n);
    if (rc == LDP_E_NOMEM) return -1;
    if (rc != LDP_OK || n != n_want) return 0; /* LDP_E_CAPACITY: more than 3 ids */
    for (i = 0; i < n; i++)
        if (got[i] != want[i]) return 0;
    return 1;
}

/* What encodes_as(s, [y]) answers, found without running the encoder, for the common token:
 * ASCII, visible (the caller checked), in a tokenizer without non-special added tokens (none is
 * matched then). On such text the normalizers only lowercase (stable[c]: no step changes c);
 * BertPreTokenizer isolates each ASCII punctuation mark, so a longer token holding one is read
 * as two words or more (each gives an id); else the text is one word, and the model reads it
 * whole: word level looks it up (unknown: unk_id), WordPiece finds the whole token first (it is
 * in the vocabulary) unless it is longer than max_input_chars_per_word (unk_id). 1 or 0; -2 when
 * unsure (upper case that a step lowercases, a WordPiece word not in the vocabulary): the caller
 * runs the encoder. GloVe's read-back check took 14 ms through the encoder, 2 ms with this. */
static int ascii_reads_back(const ldp_tokenizer *t, const unsigned char *stable, int bert_pre,
                            const char *s, size_t n, int32_t y) {
    size_t i;
    int32_t id;
    int found;
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) return -2;
        if (!stable[c]) return -2;
        if (bert_pre && (ldp_uc_ascii[c] & LDP_UC_PUNCT) && n > 1) return 0;
    }
    found = vocab_find(t, s, n, &id);
    if (t->model == MODEL_WORDLEVEL) return (found ? id : t->unk_id) == y;
    if (n > t->max_input_chars) return t->unk_id == y;
    return found ? id == y : -2;
}

/* ascii_reads_back for a continuation: what encodes_as(P + x, [P, y]) answers, text = P + x
 * (np + nx bytes), tok = y's token (the prefix + x), when P is ASCII, stable and without
 * punctuation (the caller checked) and reads as P's id. P + x is then one word (x ASCII, stable,
 * no punctuation) that no normalizer changes; WordPiece reads P first when no longer vocabulary
 * entry prefixes the text (checked here, else unsure), then the prefix + x whole (it is in the
 * vocabulary). 1 or 0; -2 when unsure. */
static int ascii_continuation_reads_back(const ldp_tokenizer *t, const unsigned char *stable,
                                         const char *text, size_t np, size_t nx, const char *tok,
                                         int32_t y) {
    size_t i, k, slot;
    int32_t id;
    for (i = np; i < np + nx; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c >= 0x80 || !stable[c] || (ldp_uc_ascii[c] & LDP_UC_PUNCT)) return -2;
    }
    if (np + nx > t->max_input_chars) return 0; /* one id: the unknown token */
    for (k = np + 1; k <= np + nx && k <= t->max_token_len; k++)
        if (vocab_entry(t, text, k, &slot) != 0) return -2;
    if (!vocab_find(t, tok, t->prefix_len + nx, &id)) return -2;
    return id == y;
}

/* stable[c] = 1 when no normalizer step changes the ASCII code point c; *bert_pre = 1 when a
 * pre-tokenizer step is BertPreTokenizer. 0 when the fast path does not apply at all (added
 * tokens that may be matched). */
static int ascii_fast_path(const ldp_tokenizer *t, unsigned char stable[128], int *bert_pre) {
    size_t c, k;
    if (t->n_added_raw > 0 || t->n_added_normalized > 0) return 0;
    for (c = 0; c < 128; c++) {
        uint32_t v = (uint32_t)c;
        for (k = 0; k < t->n_norms; k++) {
            const norm_step *st = &t->norms[k];
            if (st->kind == NORM_BERT) v = v < 128 ? st->ascii[v] : v; /* ASCII_DROP: changed */
            else if (st->kind == NORM_LOWERCASE) v = ldp_uc_ascii_lower(v);
        }
        stable[c] = v == c;
    }
    *bert_pre = 0;
    for (k = 0; k < t->n_pres; k++)
        if (t->pres[k] == PRE_BERT) *bert_pre = 1;
    return 1;
}

typedef struct {
    uint32_t len;
    int32_t id;
} len_id;

/* longest first, then the smallest id */
static int cmp_len_id(const void *pa, const void *pb) {
    const len_id *a = (const len_id *)pa, *b = (const len_id *)pb;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Continuation pieces are read back after a context word P: of the whole words (not
 * continuations) with visible text that encode as exactly themselves, the longest in bytes, the
 * smallest id among equals. Reading P + x starts with the longest vocabulary entry that prefixes
 * it; no whole word that reads back is longer than P, so that entry is P and x is then read as
 * a continuation ("##x" itself, the whole rest, when nothing in P + x changes the reading).
 * *id = -1 when there is none (word level, or no such word). 0, or -1 out of memory. */
/* *id = y when y's token encodes as exactly [y]; 0, or -1 out of memory */
static int try_context(const ldp_tokenizer *t, ldp_tok_work *w, int32_t y, int32_t *id) {
    size_t len;
    const char *s = entry_str(t, t->id_entry[y], &len);
    int r = encodes_as(t, w, s, len, &y, 1);
    if (r == 1) *id = y;
    return r < 0 ? -1 : 0;
}

static int context_word(const ldp_tokenizer *t, ldp_tok_work *w, int32_t *id) {
    len_id *c;
    size_t n = 0, i, tries;
    int r = 0;
    *id = -1;
    if (t->model != MODEL_WORDPIECE) return 0;
    c = (len_id *)malloc((t->n_ids ? t->n_ids : 1) * sizeof *c);
    if (c == NULL) return -1;
    for (i = 0; i < t->n_ids; i++) {
        uint32_t off = t->id_entry[i];
        size_t len;
        const char *s = entry_str(t, off, &len);
        if (off == 0 || (entry_at(t, off).id & ENTRY_CONTINUATION) || !visible(s, len)) continue;
        c[n].len = (uint32_t)len;
        c[n].id = (int32_t)i;
        n++;
    }
    /* in that order, the first that reads back: the best one by a scan (it nearly always reads
     * back; a sort of MiniLM's 24,000 took 3 ms), a sort after a few that do not (len 0: tried) */
    for (tries = 0; *id < 0; tries++) {
        size_t best = n;
        if (tries == 8) {
            qsort(c, n, sizeof *c, cmp_len_id);
            for (i = 0; i < n && c[i].len > 0 && *id < 0; i++)
                if ((r = try_context(t, w, c[i].id, id)) < 0) break;
            break;
        }
        for (i = 0; i < n; i++) /* ids increase: the first longest is the smallest id */
            if (c[i].len > 0 && (best == n || c[i].len > c[best].len)) best = i;
        if (best == n) break;
        if ((r = try_context(t, w, c[best].id, id)) < 0) break;
        c[best].len = 0;
    }
    free(c);
    return r < 0 ? -1 : 0;
}

int ldp_tokenizer_context_word(const ldp_tokenizer *t, int32_t *id) {
    ldp_tok_work w;
    int r;
    memset(&w, 0, sizeof w);
    r = context_word(t, &w, id);
    ldp_tok_work_free(&w);
    return r == 0 ? LDP_OK : LDP_E_NOMEM;
}

/* Verdicts of ids[0..n) (see tokenizer.h); ok == NULL: stop at the first that fails. LDP_OK
 * with *all = whether every one reads back, or LDP_E_NOMEM. */
static int read_back(const ldp_tokenizer *t, const int32_t *ids, size_t n, unsigned char *ok,
                     int *all) {
    ldp_tok_work w;
    char *buf = NULL; /* P + x */
    size_t k, i, ctx_len = 0, buf_cap = 0;
    const char *ctx = NULL;
    int32_t want[2];
    int have_ctx = 0, rc = LDP_OK, bert_pre = 0, fast, fast_ctx = 0;
    unsigned char stable[128];
    memset(&w, 0, sizeof w);
    want[0] = -1;
    *all = 1;
    fast = ascii_fast_path(t, stable, &bert_pre);
    for (k = 0; k < n; k++) {
        int32_t y = ids[k];
        uint32_t off;
        size_t len;
        const char *s;
        int r;
        if (ok != NULL) ok[k] = 0;
        if (y < 0 || (size_t)y >= t->n_ids || (off = t->id_entry[y]) == 0) goto fails;
        s = entry_str(t, off, &len);
        if (entry_at(t, off).id & ENTRY_CONTINUATION) {
            /* shown as x = the token less the prefix, attached to the piece before: P + x must
             * read as [P, y] */
            s += t->prefix_len;
            len -= t->prefix_len;
            if (!have_ctx) { /* found once, on the first continuation (word level: never) */
                if (context_word(t, &w, &want[0]) != 0) goto nomem;
                have_ctx = 1;
                if (want[0] >= 0) {
                    int32_t id;
                    ctx = entry_str(t, t->id_entry[want[0]], &ctx_len);
                    /* the fast path needs P ASCII, stable, without punctuation, read as its id */
                    fast_ctx = fast && vocab_find(t, ctx, ctx_len, &id) && id == want[0];
                    for (i = 0; fast_ctx && i < ctx_len; i++)
                        fast_ctx = (unsigned char)ctx[i] < 0x80 && stable[(unsigned char)ctx[i]] &&
                                   !(ldp_uc_ascii[(unsigned char)ctx[i]] & LDP_UC_PUNCT);
                }
            }
            if (want[0] < 0 || !visible(s, len)) goto fails;
            if (ctx_len + len > buf_cap) { /* (an added token may be longer than max_token_len) */
                char *p = (char *)realloc(buf, ctx_len + len);
                if (p == NULL) goto nomem;
                buf = p;
                buf_cap = ctx_len + len;
                memcpy(buf, ctx, ctx_len);
            }
            memcpy(buf + ctx_len, s, len);
            want[1] = y;
            r = fast_ctx ? ascii_continuation_reads_back(t, stable, buf, ctx_len, len,
                                                         s - t->prefix_len, y)
                         : -2;
            if (r == -2) r = encodes_as(t, &w, buf, ctx_len + len, want, 2);
        } else {
            if (!visible(s, len)) goto fails;
            r = fast ? ascii_reads_back(t, stable, bert_pre, s, len, y) : -2;
            if (r == -2) r = encodes_as(t, &w, s, len, &y, 1);
        }
        if (r < 0) goto nomem;
        if (r == 1) {
            if (ok != NULL) ok[k] = 1;
            continue;
        }
    fails:
        *all = 0;
        if (ok == NULL) break;
    }
    goto done;
nomem:
    rc = LDP_E_NOMEM;
done:
    free(buf);
    ldp_tok_work_free(&w);
    return rc;
}

int ldp_tokenizer_read_back(const ldp_tokenizer *t, const int32_t *ids, size_t n,
                            unsigned char *ok) {
    int all;
    return read_back(t, ids, n, ok, &all);
}

int ldp_tokenizer_check_outputs(const ldp_tokenizer *t, const int32_t *outputs, size_t n) {
    int all, rc = read_back(t, outputs, n, NULL, &all);
    if (rc != LDP_OK) return rc;
    return all ? LDP_OK : LDP_E_PARAMETER_MISMATCH;
}
