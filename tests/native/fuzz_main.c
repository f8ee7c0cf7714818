/* A built-in fuzz driver for the libFuzzer-style targets (fuzz_*.c), so that fuzzing runs with any
 * C compiler, under AddressSanitizer + UBSan, in `make -C native test`. No coverage feedback:
 * random mutations (bit flips, bytes, inserts, deletes, duplicated ranges, JSON/UTF-8/integer
 * tokens, splices) of the target's seed inputs, some of the mutants joining the corpus.
 *
 *   fuzz_x [SECONDS] [FILE ...]   fuzz for SECONDS (default 3); or run the given inputs once
 *
 * With clang, the same targets build for libFuzzer instead: clang -fsanitize=fuzzer,address
 * tests/native/fuzz_bundle.c tests/native/bundle_writer.c ... (no fuzz_main.c). LDP_FUZZ_SEED
 * picks the random seed (default fixed, so a run is reproducible). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
void ldp_fuzz_seeds(void (*add)(const uint8_t *, size_t));

#define MAX_CORPUS 512
#define MAX_INPUT (1u << 20)

typedef struct {
    uint8_t *data;
    size_t size;
} input;

static input corpus[MAX_CORPUS];
static size_t n_corpus, n_seeds;
static uint64_t rng_state = 0x243F6A8885A308D3ull;

static uint64_t rnd(void) {
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static void add_input(const uint8_t *data, size_t size) {
    input *slot;
    if (n_corpus < MAX_CORPUS) slot = &corpus[n_corpus++];
    else {
        slot = &corpus[n_seeds + rnd() % (MAX_CORPUS - n_seeds)]; /* seeds stay */
        free(slot->data);
    }
    slot->data = (uint8_t *)malloc(size ? size : 1);
    if (slot->data == NULL) abort();
    if (size) memcpy(slot->data, data, size);
    slot->size = size;
}

static size_t mutate(uint8_t *buf, size_t size, size_t cap) {
    static const uint8_t tokens[] = {0, 0xFF, 0x7F, 0x80, '"', '\\', '{', '}', '[', ']', ',', ':',
                                     '0', '1', '9', 'e', '-', '.', ' ', 'u', 0xC3, 0xE2, 0xF0, 0xED,
                                     0xA0, 0xBF, '#', '\n', '\t'};
    int op = (int)(rnd() % 8);
    size_t pos = size ? rnd() % size : 0, n, k;
    switch (op) {
    case 0:
        if (size) buf[pos] ^= (uint8_t)(1u << (rnd() % 8));
        break;
    case 1:
        if (size) buf[pos] = (uint8_t)rnd();
        break;
    case 2:
        n = 1 + rnd() % 8;
        if (size + n > cap) break;
        memmove(buf + pos + n, buf + pos, size - pos);
        for (k = 0; k < n; k++) buf[pos + k] = (uint8_t)rnd();
        size += n;
        break;
    case 3:
        n = 1 + rnd() % 16;
        if (pos + n > size) n = size - pos;
        memmove(buf + pos, buf + pos + n, size - pos - n);
        size -= n;
        break;
    case 4: {
        size_t from = size ? rnd() % size : 0;
        n = 1 + rnd() % 32;
        if (from + n > size) n = size - from;
        if (size + n > cap || n == 0) break;
        memmove(buf + pos + n, buf + pos, size - pos);
        memmove(buf + pos, buf + (from < pos ? from : from + n), n);
        size += n;
        break;
    }
    case 5:
        if (size) buf[pos] = tokens[rnd() % sizeof tokens];
        break;
    case 6: { /* splice with another corpus entry */
        const input *o = &corpus[rnd() % n_corpus];
        size_t cut = o->size ? rnd() % o->size : 0, keep = pos;
        n = o->size - cut;
        if (keep + n > cap) n = cap - keep;
        memcpy(buf + keep, o->data + cut, n);
        size = keep + n;
        break;
    }
    case 7: { /* an interesting 64-bit integer, little-endian */
        static const uint64_t vals[] = {0, 1, 0xFFFFFFFFFFFFFFFFull, 0x7FFFFFFFFFFFFFFFull,
                                        0x80000000ull, 0xFFFFull, 0x1000000ull, 7, 8, 16};
        uint64_t v = vals[rnd() % (sizeof vals / sizeof vals[0])];
        int i;
        if (size < 8) break;
        pos = rnd() % (size - 7);
        for (i = 0; i < 8; i++) buf[pos + (size_t)i] = (uint8_t)(v >> (8 * i));
        break;
    }
    }
    return size;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 3.0;
    const char *seed_env = getenv("LDP_FUZZ_SEED");
    uint8_t *buf;
    unsigned long long runs = 0, bytes = 0;
    clock_t start;
    if (argc > 2) { /* reproduce: run the given files */
        int i;
        for (i = 2; i < argc; i++) {
            FILE *f = fopen(argv[i], "rb");
            size_t n;
            buf = (uint8_t *)malloc(MAX_INPUT);
            if (f == NULL || buf == NULL) return 2;
            n = fread(buf, 1, MAX_INPUT, f);
            fclose(f);
            LLVMFuzzerTestOneInput(buf, n);
            free(buf);
        }
        return 0;
    }
    if (seed_env != NULL) rng_state = strtoull(seed_env, NULL, 0) | 1u;
    ldp_fuzz_seeds(add_input);
    if (n_corpus == 0) add_input((const uint8_t *)"", 0);
    n_seeds = n_corpus;
    buf = (uint8_t *)malloc(MAX_INPUT);
    if (buf == NULL) return 2;
    start = clock();
    while ((double)(clock() - start) / CLOCKS_PER_SEC < seconds) {
        /* half of the time a seed (mutants drift towards short inputs), else any entry */
        const input *in = &corpus[(rnd() & 1) ? rnd() % n_seeds : rnd() % n_corpus];
        size_t size = in->size < MAX_INPUT ? in->size : MAX_INPUT, k, rounds = 1 + rnd() % 4;
        memcpy(buf, in->data, size);
        for (k = 0; k < rounds; k++) size = mutate(buf, size, MAX_INPUT);
        LLVMFuzzerTestOneInput(buf, size);
        runs++;
        bytes += size;
        if (runs % 64 == 0) add_input(buf, size);
    }
    printf("%llu executions (mean input %llu bytes), corpus %zu\n", runs, runs ? bytes / runs : 0,
           n_corpus);
    free(buf);
    while (n_corpus) free(corpus[--n_corpus].data);
    return 0;
}
