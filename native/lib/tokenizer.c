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

static int utf8_room(ldp_tok_work *w, size_t n_cps) {
    size_t need = 4 * n_cps + 16 + 64;
    if (need > w->utf8_cap) {
        char *p = (char *)realloc(w->utf8, need);
        if (p == NULL) return 0;
        w->utf8 = p;
        w->utf8_cap = need;
    }
    return 1;
}

/* The model on one word (code points). */
static int model_word(const ldp_tokenizer *t, ldp_tok_work *w, const uint32_t *cps, size_t n,
                      emitter *e) {
    size_t len, start;
    char *word;
    int32_t id;
    if (n == 0) return 0;
    if (!utf8_room(w, n + t->prefix_len)) return -1;
    /* the word sits after room for the prefix, so "##" + piece is one contiguous string */
    word = w->utf8 + t->prefix_len + 1;
    len = ldp_utf8_encode(cps, n, word);
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

/* A piece of raw text between non-normalized added tokens. */
static int raw_piece(const ldp_tokenizer *t, ldp_tok_work *w, const char *s, size_t len, emitter *e) {
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
