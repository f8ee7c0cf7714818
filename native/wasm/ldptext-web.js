/* ldptext-web.js: libldptext (SanText / SanText+ local differential privacy) in the browser and in
 * node, as an ES module over the WebAssembly build of the C library (make wasm: this file,
 * ldptext.js and ldptext.wasm side by side in native/build/wasm/).
 *
 *   import { LdpText } from './ldptext-web.js';
 *   const bytes = new Uint8Array(await (await fetch('web.ldpb')).arrayBuffer());
 *   const san = await LdpText.open(bytes, [PUBLISHER_KEY]);  // verifies, or throws LdpTextError
 *   const { text, report } = san.sanitize(typed);             // text may leave the device
 *   san.close();                                              // frees the wasm memory
 *
 * Verification is the C library's own (ldp_bundle_open_memory: canonical layout and manifest, an
 * Ed25519 signature by one of `trustedKeys`, the SHA-256 of every array, the SanText tables'
 * invariants), compiled with libsodium; nothing is used before it passes. `trustedKeys` are the
 * publisher's raw Ed25519 public keys (32 bytes, or the base64 of `ldptext keys generate`'s .pub
 * file): ship them with the app's code, never next to the bundle.
 *
 * Randomness: each sanitizer is a ChaCha20 stream keyed from crypto.getRandomValues (the C
 * library's /dev/urandom, which emscripten backs with it); without crypto.getRandomValues nothing
 * starts. `options.seed` makes a reproducible sanitizer for tests: its output is NOT private.
 *
 * Guarantee (see README "What is and is not protected"): per token, eps*d(x,x')-metric LDP
 * (SanText) or UMLDP (SanText+: non-sensitive words released unchanged with probability 1 - p).
 * The number of tokens is not hidden. */
import createLdptextModule from './ldptext.js';

/* Return codes of include/ldptext.h that callers commonly test. */
export const LDP_OK = 0;
export const LDP_E_ARG = -1;
export const LDP_E_RANDOM = -3;
export const LDP_E_CAPACITY = -4;
export const LDP_E_INVALID_UTF8 = -5;
export const LDP_E_INPUT_ID = -6;
export const LDP_E_UNSIGNED = -42;
export const LDP_E_UNTRUSTED_KEY = -43;
export const LDP_E_BAD_SIGNATURE = -44;
export const LDP_E_ARRAY_HASH = -68;

const MECHANISMS = { 1: 'santext', 2: 'santext+' };

/** An error of the C library (`code`: its LDP_E_* value, `message`: ldp_strerror) or of this module. */
export class LdpTextError extends Error {
  constructor(code, message) {
    super(message);
    this.name = 'LdpTextError';
    this.code = code;
  }
}

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });
let runtimePromise = null;

function cryptoRandom() {
  const c = globalThis.crypto;
  if (!c || typeof c.getRandomValues !== 'function') {
    throw new LdpTextError(LDP_E_RANDOM, 'crypto.getRandomValues is unavailable: no CSPRNG, refusing to start');
  }
  return c;
}

async function instantiate(options) {
  if (!globalThis.crypto && typeof process === 'object' && process.versions && process.versions.node) {
    globalThis.crypto = (await import('node:crypto')).webcrypto; // node < 19: WebCrypto not yet global
  }
  const c = cryptoRandom();
  const settings = {
    // libsodium's own generator (used by nothing here but sodium_init) through the same CSPRNG
    getRandomValue: () => c.getRandomValues(new Uint32Array(1))[0] >>> 0,
  };
  if (options.wasmBinary) settings.wasmBinary = options.wasmBinary;
  if (options.locateFile) settings.locateFile = options.locateFile;
  if (!settings.wasmBinary && !settings.locateFile) {
    const url = new URL('./ldptext.wasm', import.meta.url);
    if (url.protocol === 'file:') { // node: no fetch for files
      const fs = await import('node:fs/promises');
      settings.wasmBinary = await fs.readFile(url);
    }
  }
  const mod = await createLdptextModule(settings);
  const layout = [];
  for (let f = 0; f <= 9; f++) layout.push(mod._ldp_wasm_report_layout(f));
  return { mod, report: { size: layout[0], epsilon: layout[1], epsilon0: layout[2], p: layout[3],
    nTokens: layout[4], mechanism: layout[5], seeded: layout[6], sizeField: layout[7],
    dMax: layout[8], tolerance: layout[9] } };
}

/* The WebAssembly module, instantiated once per page (options only matter on the first call). */
function runtime(options = {}) {
  if (runtimePromise === null) {
    runtimePromise = instantiate(options);
    runtimePromise.catch(() => { runtimePromise = null; });
  }
  return runtimePromise;
}

/** The C library's version string (LDP_VERSION). */
export async function version(options) {
  const { mod } = await runtime(options);
  return mod.UTF8ToString(mod._ldp_version());
}

/** Bytes of the wasm heap in use (diagnostics: the tests check that close() frees everything). */
export async function heapInUse(options) {
  const { mod } = await runtime(options);
  return mod._ldp_wasm_heap_in_use();
}

function check(mod, rc) {
  if (rc !== LDP_OK) throw new LdpTextError(rc, mod.UTF8ToString(mod._ldp_strerror(rc)));
}

function bytesOf(data, what) {
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  throw new TypeError(`${what} must be an ArrayBuffer or a typed array`);
}

function decodeBase64(text) {
  const raw = atob(text.trim());
  const out = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
  return out;
}

function keyBytes(key) {
  let k;
  try {
    k = typeof key === 'string' ? decodeBase64(key) : bytesOf(key, 'a trusted key');
  } catch (e) {
    throw new LdpTextError(LDP_E_ARG, 'a trusted key is neither 32 bytes nor their base64');
  }
  if (k.length !== 32) throw new LdpTextError(LDP_E_ARG, 'a trusted key must be 32 bytes (raw Ed25519)');
  return k;
}

function utf8Of(text) {
  if (text instanceof Uint8Array) return text; // raw UTF-8: the C library validates it
  if (typeof text !== 'string') throw new TypeError('text must be a string (or a Uint8Array of UTF-8)');
  const wellFormed = typeof text.isWellFormed === 'function' ? text.isWellFormed() : !/\p{Surrogate}/u.test(text);
  if (!wellFormed) {
    // TextEncoder would replace a lone surrogate with U+FFFD: refuse, as the C library refuses bad UTF-8
    throw new LdpTextError(LDP_E_INVALID_UTF8, 'input text is not valid Unicode (a lone surrogate)');
  }
  return encoder.encode(text);
}

/* ldp_bundle_info of a verified bundle: the C library's facts (ids, ledger unit, worst case) and
 * the verified manifest, so nothing here parses the container or re-derives an id. */
function bundleInfo(mod, bundle, scratch) {
  check(mod, mod._ldp_bundle_info(bundle, scratch));
  const ptr = mod.HEAPU32[scratch >> 2];
  try {
    return JSON.parse(mod.UTF8ToString(ptr));
  } finally {
    mod._ldp_free(ptr);
  }
}

/* Frees what an LdpText holds if it is garbage-collected without close(). */
const finalizer = typeof FinalizationRegistry === 'function'
  ? new FinalizationRegistry(({ mod, sanitizer, bundle, scratch }) => {
    mod._ldp_sanitizer_free(sanitizer);
    mod._ldp_bundle_close(bundle);
    mod._free(scratch);
  })
  : null;

let seededWarned = false;

/** A verified bundle and one sanitizer over it (one random stream). */
export class LdpText {
  /**
   * Verify a bundle and make a sanitizer over it.
   * @param {ArrayBuffer|Uint8Array} bundle the .ldpb bytes (copied: may be reused afterwards)
   * @param {Array<Uint8Array|string>} trustedKeys the publisher's Ed25519 public keys (raw 32 bytes
   *   or base64); the bundle must be signed by one of them (an empty list refuses every bundle)
   * @param {{seed?: number|bigint, wasmBinary?: Uint8Array, locateFile?: Function}} [options]
   *   seed: TESTS ONLY, a reproducible and NOT private sanitizer (the same seed as Python's
   *   `Sanitizer.load(..., seed=...)` gives the same output)
   * @returns {Promise<LdpText>}
   * @throws {LdpTextError} code and message of the check that failed (e.g. LDP_E_UNTRUSTED_KEY)
   */
  static async open(bundle, trustedKeys, options = {}) {
    const { mod, report } = await runtime(options);
    const own = bytesOf(bundle, 'bundle'); // copied into the wasm heap below, then verified there
    if (!Array.isArray(trustedKeys)) throw new TypeError('trustedKeys must be an array');
    const keys = trustedKeys.map(keyBytes);
    let seed = null;
    if (options.seed !== undefined && options.seed !== null) {
      seed = BigInt(options.seed);
      if (seed < 0n || seed >= 1n << 64n) throw new LdpTextError(LDP_E_ARG, 'seed must be in [0, 2^64)');
      if (!seededWarned) {
        seededWarned = true;
        console.warn('ldptext: seeded sanitizer: the output is reproducible and NOT private (tests only)');
      }
    }
    const scratch = mod._malloc(Math.max(16, report.size) + 16);
    const data = mod._malloc(Math.max(1, own.length));
    const keyBuf = mod._malloc(Math.max(1, 32 * keys.length));
    let bundlePtr = 0;
    let sanitizer = 0;
    let info;
    try {
      if (!scratch || !data || !keyBuf) throw new LdpTextError(-2, 'out of memory');
      mod.HEAPU8.set(own, data);
      keys.forEach((k, i) => mod.HEAPU8.set(k, keyBuf + 32 * i));
      check(mod, mod._ldp_bundle_open_memory(data, own.length, keyBuf, keys.length, scratch));
      bundlePtr = mod.HEAPU32[scratch >> 2];
      if (seed === null) {
        check(mod, mod._ldp_sanitizer_new(bundlePtr, scratch));
      } else {
        check(mod, mod._ldp_wasm_sanitizer_new_seeded(bundlePtr, Number(seed & 0xffffffffn),
          Number(seed >> 32n), scratch));
      }
      sanitizer = mod.HEAPU32[scratch >> 2];
      info = bundleInfo(mod, bundlePtr, scratch);
    } catch (e) {
      mod._ldp_sanitizer_free(sanitizer);
      mod._ldp_bundle_close(bundlePtr);
      mod._free(scratch);
      throw e;
    } finally {
      mod._free(data);
      mod._free(keyBuf);
    }
    return new LdpText(mod, report, bundlePtr, sanitizer, scratch, info, seed !== null);
  }

  #mod; #layout; #bundle; #sanitizer; #scratch; #token;

  /** @private use LdpText.open */
  constructor(mod, layout, bundle, sanitizer, scratch, info, seeded) {
    this.#mod = mod;
    this.#layout = layout;
    this.#bundle = bundle;
    this.#sanitizer = sanitizer;
    this.#scratch = scratch;
    /** the bundle's facts from the C library (ldp_bundle_info: bundle_id, key_id, d_max, ...) */
    this.info = info;
    /** the verified manifest (parameters, provenance, array hashes) */
    this.manifest = info.manifest;
    /** 'santext' or 'santext+' */
    this.mechanism = info.mechanism;
    this.epsilon = info.epsilon;
    this.p = this.mechanism === 'santext+' ? info.p : null;
    /** "metric:<id>": the unit ledger charges are made in (sdk/ldptext/santext.py metric_id) */
    this.ledgerUnit = info.ledger_unit;
    this.seeded = seeded;
    this.#token = {};
    if (finalizer) finalizer.register(this, { mod, sanitizer, bundle, scratch }, this.#token);
  }

  /** true after close() */
  get closed() {
    return this.#sanitizer === 0;
  }

  #live() {
    if (this.#sanitizer === 0) throw new LdpTextError(LDP_E_ARG, 'this LdpText is closed');
    return this.#mod;
  }

  /* Runs fn(ptr) with utf8 copied into the wasm heap; frees it afterwards. */
  #withBytes(bytes, fn) {
    const mod = this.#live();
    const ptr = mod._malloc(Math.max(1, bytes.length));
    if (!ptr) throw new LdpTextError(-2, 'out of memory');
    try {
      mod.HEAPU8.set(bytes, ptr);
      return fn(ptr);
    } finally {
      mod.HEAPU8.fill(0, ptr, ptr + bytes.length); // the user's text does not linger in the heap
      mod._free(ptr);
    }
  }

  /* The library's NUL-terminated output at *(scratch) of *(scratch + 4) bytes, then ldp_free. */
  #takeOutput() {
    const mod = this.#mod;
    const out = mod.HEAPU32[this.#scratch >> 2];
    const len = mod.HEAPU32[(this.#scratch + 4) >> 2];
    try {
      return decoder.decode(mod.HEAPU8.subarray(out, out + len));
    } finally {
      mod._ldp_free(out);
    }
  }

  /**
   * Sanitize one document; the returned text may leave the device.
   * @param {string|Uint8Array} text the private text (UTF-8 bytes or a well-formed string)
   * @returns {{text: string, report: object}} report: the fields of Python's PrivacyReport.to_dict()
   */
  sanitize(text) {
    const utf8 = utf8Of(text);
    const mod = this.#live();
    const s = this.#scratch;
    const rep = s + 8;
    return this.#withBytes(utf8, (ptr) => {
      mod.HEAPU32[(rep + this.#layout.sizeField) >> 2] = this.#layout.size; // ldp_report.size
      check(mod, mod._ldp_sanitize(this.#sanitizer, ptr, utf8.length, s, s + 4, rep));
      const out = this.#takeOutput();
      return { text: out, report: this.#report(rep) };
    });
  }

  #report(ptr) {
    const mod = this.#mod;
    const L = this.#layout;
    const f64 = (off) => new DataView(mod.HEAPU8.buffer).getFloat64(ptr + off, true);
    const mechanism = MECHANISMS[mod.HEAP32[(ptr + L.mechanism) >> 2]];
    const epsilon = f64(L.epsilon);
    const n = mod.HEAPU32[(ptr + L.nTokens) >> 2];
    const plus = mechanism === 'santext+';
    const p = plus ? f64(L.p) : null;
    const dMax = f64(L.dMax);
    const tolerance = f64(L.tolerance);
    const worst = plus ? null : epsilon * dMax;
    return {
      mechanism,
      notion: plus ? 'UMLDP' : 'MLDP',
      epsilon,
      p,
      epsilon0: f64(L.epsilon0),
      d_max: dMax,
      n_tokens: n,
      per_token_epsilon: epsilon,
      document_epsilon: epsilon * n,
      ledger_unit: this.ledgerUnit,
      worst_case_token_epsilon: worst,
      worst_case_document_epsilon: worst === null ? null : worst * n,
      worst_case_note: this.info.worst_case_note,
      numeric_tolerance: tolerance,
      ratio_slack: 2 * tolerance,
      kept_in_clear_probability: plus ? 1.0 - p : null,
      seeded: mod.HEAP32[(ptr + L.seeded) >> 2] !== 0,
      // what sampled, as Python's PrivacyReport names it: here always the C library (in wasm)
      backend: 'libldptext',
    };
  }

  /**
   * Token ids of text with the bundle's tokenizer (Hugging Face `tokenizers`, no special tokens).
   * @param {string|Uint8Array} text
   * @returns {Int32Array}
   */
  tokenize(text) {
    const utf8 = utf8Of(text);
    const mod = this.#live();
    const s = this.#scratch;
    return this.#withBytes(utf8, (ptr) => {
      let cap = utf8.length + 16;
      for (;;) {
        const ids = mod._malloc(4 * cap);
        if (!ids) throw new LdpTextError(-2, 'out of memory');
        try {
          const rc = mod._ldp_tokenize(this.#sanitizer, ptr, utf8.length, ids, cap, s);
          const n = mod.HEAPU32[s >> 2];
          if (rc === LDP_E_CAPACITY && n > cap) {
            cap = n;
            continue;
          }
          check(mod, rc);
          return mod.HEAP32.slice(ids >> 2, (ids >> 2) + n);
        } finally {
          mod._free(ids);
        }
      }
    });
  }

  /**
   * The primitive: out[i] drawn from the mechanism's distribution for input ids[i].
   * @param {Int32Array|number[]} ids
   * @returns {Int32Array}
   */
  sampleIds(ids) {
    const xs = Int32Array.from(ids);
    const bytes = new Uint8Array(xs.buffer);
    const mod = this.#live();
    return this.#withBytes(bytes, (ptr) => {
      check(mod, mod._ldp_sample_ids(this.#sanitizer, ptr, ptr, xs.length));
      return mod.HEAP32.slice(ptr >> 2, (ptr >> 2) + xs.length);
    });
  }

  /**
   * Text of token ids, joined as the Python runtime joins them.
   * @param {Int32Array|number[]} ids
   * @returns {string}
   */
  detokenize(ids) {
    const xs = Int32Array.from(ids);
    const mod = this.#live();
    const s = this.#scratch;
    return this.#withBytes(new Uint8Array(xs.buffer), (ptr) => {
      check(mod, mod._ldp_detokenize(this.#sanitizer, ptr, xs.length, s, s + 4));
      return this.#takeOutput();
    });
  }

  /** Frees the sanitizer and the bundle's memory; later calls throw. Calling it twice is harmless. */
  close() {
    if (this.#sanitizer === 0) return;
    const mod = this.#mod;
    if (finalizer) finalizer.unregister(this.#token);
    mod._ldp_sanitizer_free(this.#sanitizer);
    mod._ldp_bundle_close(this.#bundle);
    mod._free(this.#scratch);
    this.#sanitizer = 0;
    this.#bundle = 0;
    this.#scratch = 0;
  }
}
