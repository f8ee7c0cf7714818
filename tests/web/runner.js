/* The cases of tests/test_wasm.py, run against ldptext-web.js: shared by node (node_run.mjs) and
 * headless Chromium (check.html). It only records what happened; the Python test compares the
 * records with the Python runtime and the native C library.
 *
 * spec: { cases: [{ name, bundle, keys: [base64], seed?, expect?, allowWeakPrivacy?, ops: [[op, arg], ...] }],
 *         rounds }
 *   expect: LdpText.open's options.expect (the application's pins), passed as it is
 *   allowWeakPrivacy: LdpText.open's option, true unless the case sets it false
 *   op: sanitize (text), sanitize_bytes (byte values), tokenize (text), sample_ids (ids),
 *       detokenize (ids), close_then_sanitize (text), facts (no argument: what the LdpText states
 *       about its bundle, from ldp_bundle_info)
 * result: { version, cases: [{ name, ok, results | code, message, error, pin, at }], heap, random }
 *   error: the error's class name; pin: the unmet pin of an LdpTextExpectationError, else null */

function errorRecord(e) {
  return { code: e && e.code !== undefined ? e.code : null, message: String(e && e.message),
    error: e && e.name ? String(e.name) : null, pin: e && e.pin !== undefined ? e.pin : null };
}

async function runOp(san, op, arg) {
  switch (op) {
    case 'sanitize': return san.sanitize(arg);
    case 'sanitize_bytes': return san.sanitize(Uint8Array.from(arg));
    case 'tokenize': return Array.from(san.tokenize(arg));
    case 'sample_ids': return Array.from(san.sampleIds(arg));
    case 'detokenize': return san.detokenize(arg);
    case 'facts': return facts(san);
    case 'close_then_sanitize':
      san.close();
      return san.sanitize(arg);
    default: throw new Error(`unknown op ${op}`);
  }
}

/* The sanitizer's public facts (the manifest left out: the Python test reads its own). */
function facts(san) {
  const { manifest, ...info } = san.info;
  return { mechanism: san.mechanism, epsilon: san.epsilon, epsilon0: san.epsilon0, p: san.p,
    dMax: san.dMax, gamma: san.gamma, beta: san.beta, k: san.k, similarity: san.similarity,
    ledgerUnit: san.ledgerUnit, worstCaseTokenEpsilon: san.worstCaseTokenEpsilon,
    worstCaseNote: san.worstCaseNote, seeded: san.seeded, info };
}

async function runCase(LdpText, c, load) {
  const bytes = await load(c.bundle);
  const options = {};
  if (c.seed !== undefined && c.seed !== null) options.seed = c.seed;
  if (c.expect !== undefined) options.expect = c.expect;
  // as the Python side's loads (conftest.load_seeded): near-identity test bundles are opted into
  options.allowWeakPrivacy = c.allowWeakPrivacy !== false;
  let san;
  try {
    san = await LdpText.open(bytes, c.keys, options);
  } catch (e) {
    return { name: c.name, ok: false, at: 'open', ...errorRecord(e) };
  }
  const results = [];
  try {
    for (const [op, arg] of c.ops || []) {
      try {
        results.push({ ok: true, value: await runOp(san, op, arg) });
      } catch (e) {
        results.push({ ok: false, ...errorRecord(e) });
      }
    }
  } finally {
    san.close();
  }
  return { name: c.name, ok: true, results };
}

/* Every case, `spec.rounds` times (the heap in use is recorded before and after each round: close()
 * and every refusal must free what they allocated), then the randomness checks. */
export async function runAll(api, spec, load) {
  const { LdpText, version, heapInUse } = api;
  const out = { version: await version(), cases: [], heap: [] };
  out.heap.push(await heapInUse());
  for (let round = 0; round < (spec.rounds || 1); round++) {
    const cases = [];
    for (const c of spec.cases) cases.push(await runCase(LdpText, c, load));
    if (round === 0) out.cases = cases;
    out.heap.push(await heapInUse());
  }
  out.random = await randomness(LdpText, spec.random, load);
  return out;
}

/* An unseeded sanitizer keys itself from crypto.getRandomValues and never from Math.random; two
 * of them over the same bundle draw different outputs. */
async function randomness(LdpText, r, load) {
  if (!r) return null;
  const bytes = await load(r.bundle);
  const c = globalThis.crypto;
  const original = c.getRandomValues;
  const originalMath = Math.random;
  let cryptoCalls = 0;
  let mathCalls = 0;
  c.getRandomValues = function (a) { cryptoCalls += 1; return original.call(c, a); };
  Math.random = function () { mathCalls += 1; return originalMath(); };
  const texts = [];
  let seeded = null;
  try {
    for (let i = 0; i < 2; i++) {
      const san = await LdpText.open(bytes, r.keys, { allowWeakPrivacy: true });
      try {
        const res = san.sanitize(r.text);
        texts.push(res.text);
        if (i === 0) seeded = res.report.seeded;
      } finally {
        san.close();
      }
    }
  } finally {
    c.getRandomValues = original;
    Math.random = originalMath;
  }
  return { crypto_calls: cryptoCalls, math_random_calls: mathCalls, texts, seeded };
}
