/* Force-included into every C file of the wasm build (native/wasm/Makefile: -include): the
 * library's prefetch hints as loads. WebAssembly has no prefetch instruction (clang drops
 * __builtin_prefetch for wasm32), so a hint becomes a one-byte volatile load of the address, whose
 * value nothing uses: the engine's code issues it and the CPU runs on while the line arrives (a
 * load that misses does not hold up the instructions after it until the reorder buffer fills).
 * The sampler asks for a tail candidate's embedding before the pipeline's other tokens run
 * (PIPELINE in santext_sampler.c) and, with its lookahead, for the rows of the tokens ahead; the
 * detokenizer for the entries of the ids ahead. The sampler's hints exist where LDP_PREFETCH is
 * defined, which santext_sampler.c does only for targets with a prefetch instruction: the Makefile
 * defines it. The draws and outputs are the same (a hint reads, it decides nothing: the cross
 * check compares them with the native build's byte for byte).
 *
 * A load, unlike a prefetch, traps outside the wasm memory: every address the library asks for is
 * inside an array it reads anyway (a row of a checked table, an entry of the tokenizer's pool,
 * ids the caller bounds first), and a line start that prefetch_bytes rounds down to lies below
 * such an address, so inside the memory too. */
#ifndef LDPTEXT_WASM_PREFETCH_H
#define LDPTEXT_WASM_PREFETCH_H
#if defined(__wasm__)
static inline __attribute__((always_inline)) void ldp_wasm_touch(const void *p) {
    (void)*(const volatile unsigned char *)p;
}
#define __builtin_prefetch(p, ...) ldp_wasm_touch(p)
#endif
#endif
