/* ldptext: the npm entry point. Everything is ldptext-web.js's (the hand-written ES module over
 * the WebAssembly build of libldptext, copied here by `make npm`); see index.d.ts for the types.
 *
 * Where the .wasm comes from: ldptext.js (emscripten's glue) asks for
 * new URL('ldptext.wasm', import.meta.url), a pattern bundlers (webpack 5, Vite, Rollup's
 * import-meta-url plugins, esbuild with a file loader) follow and copy; in node, ldptext-web.js
 * reads that same file:// URL from disk (node's fetch cannot read files). An app that serves the
 * file elsewhere passes options.locateFile or options.wasmBinary to the first LdpText.open. */
export * from './ldptext-web.js';
