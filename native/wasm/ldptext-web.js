/* ldptext-web.js: libldptext (local differential privacy: SanText, SanText+, and on the same exact
 * engine TEM, CusText and CusText+) in the browser and in node, as an ES module over the
 * WebAssembly build of the C library (make wasm: this file, ldptext.js and ldptext.wasm side by
 * side in native/build/wasm/).
 *
 *   import { LdpText } from './ldptext-web.js';
 *   const bytes = new Uint8Array(await (await fetch('web.ldpb')).arrayBuffer());
 *   const san = await LdpText.open(bytes, [PUBLISHER_KEY]);  // verifies, or throws LdpTextError
 *   const { text, report } = san.sanitize(typed);             // text may leave the device
 *   san.close();                                              // frees the wasm memory
 *
 * Verification is the C library's own (ldp_bundle_open_memory: canonical layout and manifest, an
 * Ed25519 signature by one of `trustedKeys`, the SHA-256 of every array, the mechanism's tables'
 * invariants and stated parameters), compiled with libsodium; nothing is used before it passes.
 * `trustedKeys` are the publisher's raw Ed25519 public keys (32 bytes, or the base64 of `ldptext
 * keys generate`'s .pub file): ship them with the app's code, never next to the bundle.
 *
 * Pins: a trusted signature says who made a bundle, not which of that publisher's bundles this app
 * accepts. `options.expect` states it, with the keys and meaning of the Python runtime's
 * `expect=` (BundleExpectation), checked by the C library after verification:
 *   await LdpText.open(bytes, [PUBLISHER_KEY], { expect: { mechanism: 'santext+', epsilon_max: 3 } });
 * An unmet pin throws LdpTextExpectationError (`pin` says which, `code` LDP_E_EXPECT_*).
 *
 * Randomness: each sanitizer is a ChaCha20 stream keyed from crypto.getRandomValues (the C
 * library's /dev/urandom, which emscripten backs with it); without crypto.getRandomValues nothing
 * starts. `options.seed` makes a reproducible sanitizer for tests: its output is NOT private.
 *
 * Guarantee (see README "What is and is not protected"), per token: eps*d(x,x')-metric LDP
 * (SanText); UMLDP (SanText+: non-sensitive words released unchanged with probability 1 - p);
 * eps*min(d(x,x'), gamma)-metric LDP (TEM); eps-LDP between inputs of the same output set
 * (CusText: the output reveals its input's set; CusText+ also releases its stop words unchanged).
 * `san.info.worst_case_note` says what the worst case over any two inputs is, or why there is none.
 * The number of tokens is not hidden. CMP, Mahalanobis and DP-BART run in the Python SDK only:
 * their bundles are refused (LDP_E_MECHANISM). */
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
export const LDP_E_MECHANISM = -53; // a mechanism this library does not run (CMP, Mahalanobis, DP-BART)
export const LDP_E_ARRAY_HASH = -68;
/* a stated eps, eps0, p, D_max (TEM: gamma / beta; CusText: similarity, group sizes) that the
 * bundle's tables do not realise (refused at open) */
export const LDP_E_PARAMETER_MISMATCH = -100;
/* the application's pins (options.expect), checked after verification: LdpTextExpectationError */
export const LDP_E_EXPECT_MECHANISM = -101;
export const LDP_E_EXPECT_FORMAT = -102;
export const LDP_E_EXPECT_BUNDLE_ID = -103;
export const LDP_E_EXPECT_EPSILON = -104;
/* arrays of the token-level mechanisms that break the mechanism's invariants (refused at open) */
export const LDP_E_TEM_TABLES = -120;
export const LDP_E_CUSTEXT_TABLES = -121;

/* ldp_report.mechanism (LDP_MECH_*) */
const MECHANISMS = { 1: 'santext', 2: 'santext+', 3: 'tem', 4: 'custext', 5: 'custext+' };
// reported as Python's PrivacyReport; the others as its MechanismReport
const SANTEXT_FAMILY = ['santext', 'santext+'];
/* The mechanism names a pin may give: Python's ldptext.bundle.MECHANISMS, so that an expectation
 * written for the Python runtime means the same here. The mechanisms this library opens have a bit
 * of ldp_expect.mechanisms (LDP_EXPECT_* = 1 << LDP_MECH_*); CMP, Mahalanobis and DP-BART bundles
 * never open here, so a pin that names only those refuses every bundle. */
const PIN_MECHANISMS = ['santext', 'santext+', 'dpbart', 'tem', 'custext', 'custext+', 'cmp', 'mahalanobis'];
const MECHANISM_BITS = { // LDP_EXPECT_SANTEXT, _SANTEXT_PLUS, _TEM, _CUSTEXT, _CUSTEXT_PLUS
  santext: 1 << 1, 'santext+': 1 << 2, tem: 1 << 3, custext: 1 << 4, 'custext+': 1 << 5,
};
const PIN_KEYS = ['mechanism', 'epsilon_min', 'epsilon_max', 'bundle_id', 'min_format_version'];

/** An error of the C library (`code`: its LDP_E_* value, `message`: ldp_strerror) or of this module. */
export class LdpTextError extends Error {
  constructor(code, message) {
    super(message);
    this.name = 'LdpTextError';
    this.code = code;
  }
}

/** A verified bundle that is not one the application pinned (options.expect): Python's
 * BundleExpectationError. `pin` names the unmet pin ('mechanism', 'min_format_version',
 * 'bundle_id', 'epsilon_min' or 'epsilon_max'), `code` is LDP_E_EXPECT_*. */
export class LdpTextExpectationError extends LdpTextError {
  constructor(code, message, pin) {
    super(code, message);
    this.name = 'LdpTextExpectationError';
    this.pin = pin;
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
  for (let f = 0; f <= 10; f++) layout.push(mod._ldp_wasm_report_layout(f));
  return { mod, report: { size: layout[0], epsilon: layout[1], epsilon0: layout[2], p: layout[3],
    nTokens: layout[4], mechanism: layout[5], seeded: layout[6], sizeField: layout[7],
    dMax: layout[8], tolerance: layout[9],
    worstCase: layout[10] || null } }; // null: a library without ldp_report.worst_case_epsilon
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

/* Python's repr() of a mechanism name and its '{:g}' of a float, so that a refusal reads as the Python
 * runtime's does for the same pin. */
const pyRepr = (s) => `'${s}'`;
function formatG(x) {
  if (x === 0 || !Number.isFinite(x)) return String(x);
  const exp = Math.floor(Math.log10(Math.abs(Number(x.toPrecision(6)))));
  if (exp < -4 || exp >= 6) {
    const [mant, e] = x.toExponential(5).split('e');
    const m = mant.includes('.') ? mant.replace(/\.?0+$/, '') : mant;
    const n = Number(e);
    return `${m}e${n < 0 ? '-' : '+'}${String(Math.abs(n)).padStart(2, '0')}`;
  }
  return String(Number(x.toPrecision(6)));
}

/* options.expect checked as Python's BundleExpectation checks its fields, before the bundle is
 * read (a malformed pin is the caller's bug, whatever the bundle): null/undefined for no pins, else
 * the pins with `mechanism` made a sorted list. Refusals are LDP_E_ARG (Python: ParameterError).
 * The C library has its own checks, but it reads 0 as "no pin" where Python refuses 0. */
function expectationOf(expect) {
  if (expect === undefined || expect === null) return null;
  if (typeof expect !== 'object' || Array.isArray(expect)) {
    throw new LdpTextError(LDP_E_ARG, 'options.expect must be an object of pins or null');
  }
  const unknown = Object.keys(expect).filter((k) => !PIN_KEYS.includes(k)).sort();
  if (unknown.length) {
    throw new LdpTextError(LDP_E_ARG, `unknown expect key(s) ${JSON.stringify(unknown.slice(0, 5))}; ` +
      `known: ${JSON.stringify([...PIN_KEYS].sort())}`);
  }
  const given = (k) => expect[k] !== undefined && expect[k] !== null;
  const pins = {};
  if (given('mechanism')) {
    const m = typeof expect.mechanism === 'string' ? [expect.mechanism] : expect.mechanism;
    if (!Array.isArray(m) || m.length === 0 || m.some((x) => !PIN_MECHANISMS.includes(x))) {
      throw new LdpTextError(LDP_E_ARG, `expected mechanism must be among ${PIN_MECHANISMS.join(', ')}`);
    }
    pins.mechanism = [...m].sort(); // as Python's tuple(sorted(...)): its message lists them so
  }
  for (const k of ['epsilon_min', 'epsilon_max']) {
    if (!given(k)) continue;
    const v = expect[k];
    if (typeof v !== 'number' || !Number.isFinite(v) || !(v > 0)) {
      throw new LdpTextError(LDP_E_ARG, `${k} must be a positive finite number`);
    }
    pins[k] = v;
  }
  if (pins.epsilon_min !== undefined && pins.epsilon_max !== undefined && pins.epsilon_min > pins.epsilon_max) {
    throw new LdpTextError(LDP_E_ARG, 'epsilon_min is larger than epsilon_max');
  }
  if (given('bundle_id')) {
    if (typeof expect.bundle_id !== 'string' || !/^[0-9a-f]{64}$/.test(expect.bundle_id)) {
      throw new LdpTextError(LDP_E_ARG, 'bundle_id must be 64 lowercase hex digits (see `ldptext bundle verify`)');
    }
    pins.bundle_id = expect.bundle_id;
  }
  if (given('min_format_version')) {
    const v = expect.min_format_version;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) {
      throw new LdpTextError(LDP_E_ARG, 'min_format_version must be an integer >= 1');
    }
    pins.min_format_version = v;
  }
  return pins;
}

/* The C library's ldp_bundle_expect (through the scalar shim) on a verified bundle; an unmet pin
 * throws LdpTextExpectationError worded as Python's, from `info` (ldp_bundle_info). */
function checkExpectation(mod, bundle, pins, info) {
  let rc;
  let bits = 0;
  if (pins.mechanism) for (const m of pins.mechanism) bits |= MECHANISM_BITS[m] || 0;
  if (pins.mechanism && bits === 0) {
    rc = LDP_E_EXPECT_MECHANISM; // only mechanisms this library never opens: 0 would mean "any" in C
  } else {
    let id = 0;
    if (pins.bundle_id) {
      id = mod._malloc(65);
      if (!id) throw new LdpTextError(-2, 'out of memory');
      mod.HEAPU8.set(encoder.encode(pins.bundle_id + '\0'), id);
    }
    try {
      rc = mod._ldp_wasm_bundle_expect(bundle, bits, pins.epsilon_min || 0, pins.epsilon_max || 0, id,
        pins.min_format_version || 0);
    } finally {
      mod._free(id);
    }
  }
  switch (rc) {
    case LDP_OK: return;
    case LDP_E_EXPECT_MECHANISM:
      throw new LdpTextExpectationError(rc, `bundle is for mechanism ${pyRepr(info.mechanism)}; the ` +
        `application requires ${pins.mechanism.join(' or ')}`, 'mechanism');
    case LDP_E_EXPECT_FORMAT:
      throw new LdpTextExpectationError(rc, `bundle has format version ${info.format_version}; the ` +
        `application requires >= ${pins.min_format_version}`, 'min_format_version');
    case LDP_E_EXPECT_BUNDLE_ID:
      throw new LdpTextExpectationError(rc, `bundle id ${info.bundle_id.slice(0, 16)}... is not the ` +
        `pinned ${pins.bundle_id.slice(0, 16)}...`, 'bundle_id');
    case LDP_E_EXPECT_EPSILON:
      if (pins.epsilon_min !== undefined && info.epsilon < pins.epsilon_min) {
        throw new LdpTextExpectationError(rc, `bundle epsilon ${formatG(info.epsilon)} is below the ` +
          `required minimum ${formatG(pins.epsilon_min)}`, 'epsilon_min');
      }
      throw new LdpTextExpectationError(rc, `bundle epsilon ${formatG(info.epsilon)} exceeds the ` +
        `required maximum ${formatG(pins.epsilon_max)}`, 'epsilon_max');
    default:
      check(mod, rc);
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
   * @param {{seed?: number|bigint, expect?: object, wasmBinary?: Uint8Array, locateFile?: Function}} [options]
   *   seed: TESTS ONLY, a reproducible and NOT private sanitizer (the same seed as Python's
   *   `Sanitizer.load(..., seed=...)` gives the same output)
   *   expect: the application's pins, Python's `expect=` (BundleExpectation) with the same keys and
   *   meaning, checked after verification: mechanism ('santext', 'santext+', 'tem', 'custext',
   *   'custext+' or a list of names; 'cmp', 'mahalanobis' and 'dpbart' name bundles that never
   *   open here),
   *   epsilon_min / epsilon_max (inclusive bounds on the stated per-token epsilon), bundle_id (64
   *   lowercase hex digits, `info.bundle_id`), min_format_version. A trusted signature says who
   *   made a bundle; the pins say which of that publisher's bundles this app accepts.
   * @returns {Promise<LdpText>}
   * @throws {LdpTextError} code and message of the check that failed (e.g. LDP_E_UNTRUSTED_KEY;
   *   LDP_E_ARG for a malformed pin); {LdpTextExpectationError} (a subclass: `pin` names which) for
   *   a verified bundle that does not meet options.expect
   */
  static async open(bundle, trustedKeys, options = {}) {
    const { mod, report } = await runtime(options);
    const own = bytesOf(bundle, 'bundle'); // copied into the wasm heap below, then verified there
    if (!Array.isArray(trustedKeys)) throw new TypeError('trustedKeys must be an array');
    const keys = trustedKeys.map(keyBytes);
    const pins = expectationOf(options.expect);
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
      info = bundleInfo(mod, bundlePtr, scratch);
      if (pins !== null) checkExpectation(mod, bundlePtr, pins, info); // before any sanitizer exists
      if (seed === null) {
        check(mod, mod._ldp_sanitizer_new(bundlePtr, scratch));
      } else {
        check(mod, mod._ldp_wasm_sanitizer_new_seeded(bundlePtr, Number(seed & 0xffffffffn),
          Number(seed >> 32n), scratch));
      }
      sanitizer = mod.HEAPU32[scratch >> 2];
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
    /** 'santext', 'santext+', 'tem', 'custext' or 'custext+' */
    this.mechanism = info.mechanism;
    /** the per-token epsilon (metric for SanText(+) and TEM) */
    this.epsilon = info.epsilon;
    /** ln(1/p) for SanText+, 0 for SanText, TEM and CusText; null for CusText+ (its stop words
     * are released in the clear) */
    this.epsilon0 = info.epsilon0;
    /** the probability of sanitizing a word the mechanism may keep (SanText+'s non-sensitive words,
     * 0 for CusText+'s stop words); null where the bundle states none (every token is sanitized) */
    this.p = info.p;
    /** the stated bound on input distances (SanText(+), TEM); null for CusText(+): none stated */
    this.dMax = info.d_max;
    /** TEM: the truncation threshold gamma and the beta that chose it (null if gamma was given) */
    this.gamma = info.gamma === undefined ? null : info.gamma;
    this.beta = info.beta === undefined ? null : info.beta;
    /** CusText(+): the smallest output set K and the similarity ('euclidean' or 'cosine') */
    this.k = info.k === undefined ? null : info.k;
    this.similarity = info.similarity === undefined ? null : info.similarity;
    /** the unit ledger charges are made in: "metric:<id>" (SanText(+), TEM: santext.py metric_id)
     * or "partition:<id>" (CusText(+): custext.py partition_id) */
    this.ledgerUnit = info.ledger_unit;
    /** the LDP level per token over any two inputs, null where none exists (SanText+, CusText(+));
     * worstCaseNote says what it is, or why there is none */
    this.worstCaseTokenEpsilon = info.worst_case_token_epsilon;
    this.worstCaseNote = info.worst_case_note;
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
   * @returns {{text: string, report: object}} report: SanText(+): the fields of Python's
   *   PrivacyReport.to_dict(); TEM, CusText(+): those of Python's MechanismReport.to_dict() but its
   *   prose (neighbouring, metric, numeric_note; worst_case_note says what the worst case is, or
   *   why there is none). worst_case_token_epsilon is the C library's
   *   (ldp_report.worst_case_epsilon), null where no worst case exists.
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
    const tolerance = f64(L.tolerance);
    // ldp_report.worst_case_epsilon: +inf where no worst case exists (Python: None)
    const w = L.worstCase !== null ? f64(L.worstCase) : this.worstCaseTokenEpsilon;
    const worst = w === null || !Number.isFinite(w) ? null : w;
    // the probability of keeping a keepable word in the clear: SanText+ 1 - p, CusText+ 1 (p = 0)
    const p = this.p === null ? null : f64(L.p);
    const common = {
      n_tokens: n,
      per_token_epsilon: epsilon,
      document_epsilon: epsilon * n,
      ledger_unit: this.ledgerUnit,
      worst_case_token_epsilon: worst,
      worst_case_document_epsilon: worst === null ? null : worst * n,
      worst_case_note: this.worstCaseNote,
      numeric_tolerance: tolerance,
      ratio_slack: 2 * tolerance,
      kept_in_clear_probability: p === null ? null : 1.0 - p,
      seeded: mod.HEAP32[(ptr + L.seeded) >> 2] !== 0,
      // what sampled, as the Python reports name it: here always the C library (in wasm)
      backend: 'libldptext',
    };
    if (SANTEXT_FAMILY.includes(mechanism)) { // Python's PrivacyReport, field for field
      const { n_tokens, ...rest } = common;
      return {
        mechanism,
        notion: mechanism === 'santext+' ? 'UMLDP' : 'MLDP',
        epsilon,
        p,
        epsilon0: f64(L.epsilon0),
        d_max: f64(L.dMax),
        n_tokens,
        ...rest,
      };
    }
    // Python's MechanismReport (TEM, CusText(+)) without its prose fields neighbouring, metric and
    // numeric_note: the parameters are the bundle's, as ldp_bundle_info states them
    const tem = mechanism === 'tem';
    const { kept_in_clear_probability, seeded, backend, ...head } = common;
    let parameters;
    if (tem) {
      parameters = { epsilon, gamma: this.gamma, beta: this.beta, d_max: this.dMax };
    } else {
      parameters = { epsilon, k: this.k, similarity: this.similarity };
      const groups = this.manifest.privacy && this.manifest.privacy.groups; // checked at open
      if (typeof groups === 'number') parameters.groups = groups;
    }
    return {
      mechanism,
      notion: tem ? 'metric-LDP' : 'LDP within output sets',
      epsilon,
      ...head,
      kept_in_clear_probability,
      seeded,
      backend,
      parameters,
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
