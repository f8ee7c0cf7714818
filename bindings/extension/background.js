/* ldptext "sanitize before send": the service worker, which holds the engine.
 *
 * Where the engine runs, and why here: the WebAssembly module (ldptext-web.js over libldptext) runs
 * in this MV3 service worker, an ES module worker of the extension's own origin. Its CSP
 * (manifest: extension_pages) allows exactly 'wasm-unsafe-eval' for compiling the module and
 * connect-src 'self', so the only things it can fetch are the extension's own files (the .wasm and
 * the bundle): nothing it holds can be sent anywhere. A content script would compile the wasm
 * under each page's own rules, once per tab and frame; an offscreen document adds a second
 * process hop, its own lifetime API and a reason code, for nothing the worker lacks (it has
 * WebAssembly, fetch of its own files and crypto.getRandomValues). Both run in headless Chromium,
 * the worker with the fewest moving parts. The worker is stopped when idle and started again by
 * the next message: each start verifies the bundle again (the Ed25519 signature by the publisher's
 * key, the SHA-256 of every array, the tables), before any text is sanitized.
 *
 * Fail closed: if the bundle does not verify or the engine cannot load, every request is answered
 * {ok: false, error} and nothing is sanitized; content.js then blocks the guarded submit and shows
 * a message. The text sent here is sanitized and answered; it is never logged or stored (the popup
 * keeps the last report's numbers only, in session storage). */
import { LdpText, STATEMENTS } from './ldptext-web.js';
import { PUBLISHER_KEYS, BUNDLE_FILE } from './publisher.js';

let engine = null;

function errorOf(e) {
  return { code: e && typeof e.code === 'number' ? e.code : null, message: String((e && e.message) || e) };
}

/* One of the extension's own files, or an error that says which is missing (a fetch of a missing
 * extension file fails with a bare "Failed to fetch"). */
async function ownFile(name, what) {
  let response;
  try {
    response = await fetch(chrome.runtime.getURL(name));
  } catch (e) {
    response = null;
  }
  if (!response || !response.ok) {
    throw new Error(`${what} (${name}) is missing from the extension: build it again (make extension) and `
      + 'reload it at chrome://extensions');
  }
  return new Uint8Array(await response.arrayBuffer());
}

async function openEngine() {
  try {
    const bundle = await ownFile(BUNDLE_FILE, 'the bundle');
    const wasmBinary = await ownFile('ldptext.wasm', 'the WebAssembly module');
    const san = await LdpText.open(bundle, PUBLISHER_KEYS, { wasmBinary });
    const { report } = san.sanitize(''); // the report's fields for zero tokens: what the popup shows
    // the label comes from the mechanism table generated from the registry, like the report's prose
    const facts = { ...report, label: STATEMENTS[report.mechanism].label, bundle_id: san.info.bundle_id,
      key_id: san.info.key_id, worst_case_note: san.worstCaseNote };
    return { ok: true, san, facts };
  } catch (e) {
    return { ok: false, error: errorOf(e) };
  }
}

function start() {
  if (engine === null) engine = openEngine();
  return engine;
}

/* texts -> their sanitized texts (all or nothing) and the documents' reports */
async function sanitizeAll(texts) {
  const e = await start();
  if (!e.ok) return { ok: false, error: e.error };
  if (!Array.isArray(texts) || !texts.every((t) => typeof t === 'string')) {
    return { ok: false, error: { code: null, message: 'malformed request' } };
  }
  try {
    const results = texts.map((t) => e.san.sanitize(t));
    const reports = results.map((r) => r.report);
    const last = reports.reduce((acc, r) => ({ n_tokens: acc.n_tokens + r.n_tokens,
      document_epsilon: acc.document_epsilon + r.document_epsilon }), { n_tokens: 0, document_epsilon: 0 });
    await chrome.storage.session.set({ lastRelease: { ...last, fields: texts.length, at: Date.now() } });
    return { ok: true, texts: results.map((r) => r.text), reports };
  } catch (err) {
    return { ok: false, error: errorOf(err) };
  }
}

async function status() {
  const e = await start();
  const { lastRelease } = await chrome.storage.session.get('lastRelease');
  return e.ok ? { ok: true, facts: e.facts, lastRelease: lastRelease || null }
    : { ok: false, error: e.error, lastRelease: null };
}

chrome.runtime.onMessage.addListener((msg, sender, sendResponse) => {
  if (sender.id !== chrome.runtime.id || !msg || typeof msg !== 'object') return false;
  if (msg.type === 'sanitize') {
    sanitizeAll(msg.texts).then(sendResponse);
    return true;
  }
  if (msg.type === 'status') {
    status().then(sendResponse);
    return true;
  }
  const probe = msg.type === 'focus-candidate' && probes.get(msg.probe);
  if (probe && sender.tab && sender.tab.id === probe.tabId) {
    probe.candidates.push({ frameId: sender.frameId, hasFocus: msg.hasFocus === true,
      focusedAt: Number(msg.focusedAt) || 0 });
    return false;
  }
  if (msg.type === 'sanitize-focused-tab' && Number.isInteger(msg.tabId)) { // the popup's button
    sanitizeFocused(msg.tabId).then(sendResponse);
    return true;
  }
  return false;
});

/* The user actions: the context menu on an editable field (it names the frame), the keyboard
 * shortcut and the popup's button (they name the tab). Each asks a content script to sanitize its
 * focused field in place. For a tab, every frame is asked which of them holds a focused field
 * (each frame answers by its own message, as only one reply to a message to a tab comes back):
 * the one that has the focus, or else the one that had it last (the popup takes it from the page). */
const probes = new Map(); // probe id -> {tabId, candidates: the frames that answered}

async function focusedFrame(tabId) {
  const probe = `${Date.now()}-${Math.random()}`;
  const candidates = [];
  probes.set(probe, { tabId, candidates });
  try {
    await chrome.tabs.sendMessage(tabId, { type: 'focus-probe', probe }).catch(() => {});
    const deadline = Date.now() + 300;
    while (Date.now() < deadline && !candidates.some((c) => c.hasFocus)) {
      await new Promise((resolve) => { setTimeout(resolve, 20); });
    }
  } finally {
    probes.delete(probe);
  }
  if (!candidates.length) return null;
  const focused = candidates.find((c) => c.hasFocus);
  return (focused || candidates.reduce((a, c) => (c.focusedAt > a.focusedAt ? c : a))).frameId;
}

async function sanitizeFocused(tabId, frameId) {
  const none = { ok: false, error: { code: null, message: 'no text field to sanitize in this tab' } };
  try {
    const frame = frameId === undefined ? await focusedFrame(tabId) : frameId;
    if (frame === null) return none;
    return (await chrome.tabs.sendMessage(tabId, { type: 'sanitize-focused' }, { frameId: frame })) || none;
  } catch (e) {
    return none;
  }
}
self.ldptextSanitizeFocused = sanitizeFocused; // the same path, for tests driving the worker

chrome.runtime.onInstalled.addListener(() => {
  chrome.contextMenus.create({ id: 'ldptext-sanitize', title: 'Sanitize this text (ldptext)',
    contexts: ['editable'] });
});

chrome.contextMenus.onClicked.addListener((info, tab) => {
  if (info.menuItemId === 'ldptext-sanitize' && tab && tab.id !== undefined) sanitizeFocused(tab.id, info.frameId);
});

chrome.commands.onCommand.addListener(async (command, tab) => {
  if (command !== 'sanitize-focused-field') return;
  const t = tab || (await chrome.tabs.query({ active: true, currentWindow: true }))[0];
  if (t && t.id !== undefined) sanitizeFocused(t.id);
});

start(); // verify at start
