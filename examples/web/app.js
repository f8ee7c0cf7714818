/* The example page: load and verify a bundle, sanitize what the user typed in this page, show the
 * privacy report and what an upload would contain (nothing is sent).
 *
 * config.json (served next to this page) names the bundle and the publisher's public keys. A real
 * app ships its publisher's key with its code; it must never come from the same place as the bundle
 * in a way an attacker who can replace the bundle could also replace. */
import { LdpText } from './ldptext/ldptext-web.js';

const $ = (id) => document.getElementById(id);
const fmt = (x, digits = 4) => (x === null || x === undefined ? '—' : String(Number(x.toPrecision(digits))));

function showError(e) {
  $('error').textContent = `Error: ${e && e.message ? e.message : e}`;
  $('error').hidden = false;
}

function row(table, label, value) {
  const tr = table.insertRow();
  const th = document.createElement('th');
  th.textContent = label;
  tr.appendChild(th);
  tr.insertCell().textContent = value;
}

function list(ul, items) {
  ul.replaceChildren(...items.map((text) => {
    const li = document.createElement('li');
    li.textContent = text;
    return li;
  }));
}

const NAMES = { santext: 'SanText', 'santext+': 'SanText+', tem: 'TEM', custext: 'CusText', 'custext+': 'CusText+' };

/* TEM and CusText(+): the report's own statement of the worst case (ldp_bundle_info's note). */
function renderFamily(r) {
  const tem = r.mechanism === 'tem';
  list($('protected'), [
    tem ? `Every token: two words x, x′ are indistinguishable up to exp(ε·min(d(x, x′), γ)), γ = ` +
          `${fmt(r.parameters.gamma)} (ε = ${fmt(r.epsilon)}).`
        : `Every re-drawn token: two words of the same output set are indistinguishable up to exp(ε), ` +
          `ε = ${fmt(r.epsilon)}.`,
    'The text you typed stays in this page: only the sanitized text and this report would be uploaded.',
  ]);
  list($('not-protected'), [
    `The number of tokens (${r.n_tokens}): token-level privacy never hides the length.`,
    `Worst case: ${r.worst_case_note}.`,
    'Side channels of the device (timing, memory) are out of scope.',
  ]);
}

function render(san, result) {
  const r = result.report;
  const plus = r.mechanism === 'santext+';
  const family = !r.mechanism.startsWith('santext');
  const vocab = san.manifest.vocab || {};
  $('sanitized').textContent = result.text;

  const table = $('report');
  table.replaceChildren();
  row(table, 'Mechanism', `${NAMES[r.mechanism] ?? r.mechanism} (${r.notion})`);
  if (family) row(table, 'ε per token', fmt(r.epsilon));
  else row(table, 'ε per token (metric)', `${fmt(r.epsilon)}  — any two words x, x′: ε·d(x, x′)`);
  if (plus) {
    row(table, 'p (non-sensitive word re-drawn)', `${fmt(r.p)}  — ε₀ = ln(1/p) = ${fmt(r.epsilon0)}`);
  }
  row(table, 'Tokens released', String(r.n_tokens));
  row(table, 'Budget charge (n·ε)', `${fmt(r.document_epsilon)} in ${r.ledger_unit}`);
  row(table, 'Worst-case LDP level per token',
    r.worst_case_token_epsilon === null ? 'none (see below)'
      : `${family ? '' : 'ε·D_max = '}${fmt(r.worst_case_token_epsilon)}`);
  row(table, 'Numeric tolerance τ', `${r.numeric_tolerance.toExponential(1)} (ratio bounds hold with slack exp(2τ))`);
  row(table, 'Seeded', r.seeded ? 'YES: reproducible, NOT private' : 'no (crypto.getRandomValues)');

  if (family) {
    renderFamily(r);
    $('upload').textContent = JSON.stringify({ text: result.text, privacy_report: r }, null, 2);
    $('result').hidden = false;
    $('result').dataset.count = String(Number($('result').dataset.count) + 1);
    return;
  }
  const protectedItems = [
    `Every re-drawn token: its output cannot tell two words x, x′ apart by more than a factor ` +
      `exp(ε·d(x, x′)), d their distance in the bundle's embedding (ε = ${fmt(r.epsilon)})` +
      `${plus ? ', for outputs in the protected set' : ''}.`,
  ];
  if (plus) {
    protectedItems.push(`Sensitive words are always re-drawn: all but the bundle's ` +
      `${vocab.non_sensitive ?? 'few'} non-sensitive function words and punctuation marks, so names, ` +
      `places, numbers and health words are; across the sensitive split the factor is ` +
      `exp(ε·d(x, x′) + ε₀), ε₀ = ${fmt(r.epsilon0)}.`);
  } else {
    protectedItems.push(`Every token is re-drawn. Worst case over any two words: ` +
      `${fmt(r.worst_case_token_epsilon)}-LDP per token (ε·D_max), ` +
      `${fmt(r.worst_case_document_epsilon)} for these ${r.n_tokens} tokens.`);
  }
  protectedItems.push('The text you typed stays in this page: only the sanitized text and this report ' +
    'would be uploaded.');
  list($('protected'), protectedItems);

  const notProtected = [
    `The number of tokens (${r.n_tokens}): token-level privacy never hides the length.`,
  ];
  if (plus) {
    notProtected.push(`Non-sensitive words are released unchanged with probability 1 − p = ` +
      `${fmt(r.kept_in_clear_probability)}: SanText+ has no finite worst-case LDP level.`);
  }
  notProtected.push(`Meaning at large ε: over arbitrary word pairs the bound is ε·D_max = ` +
    `${fmt(r.epsilon * r.d_max)} per token; the guarantee worth having is between similar words.`);
  notProtected.push('Side channels of the device (timing, memory) are out of scope.');
  list($('not-protected'), notProtected);

  // what an app would upload: the sanitized text and its report, never the input
  $('upload').textContent = JSON.stringify({ text: result.text, privacy_report: r }, null, 2);
  $('result').hidden = false;
  $('result').dataset.count = String(Number($('result').dataset.count) + 1);
}

async function main() {
  const config = await (await fetch('config.json')).json();
  const response = await fetch(config.bundle);
  if (!response.ok) throw new Error(`could not load the bundle (HTTP ${response.status})`);
  const bytes = new Uint8Array(await response.arrayBuffer());
  const san = await LdpText.open(bytes, config.trusted_keys); // signature, key, every hash
  const source = san.manifest.sources?.embeddings?.name ?? 'embeddings';
  $('status').textContent = `Bundle verified: ${san.mechanism}, ε = ${san.epsilon} per token` +
    `${san.p === null ? '' : `, p = ${san.p}`}; ${source}, ` +
    `${(bytes.length / 2 ** 20).toFixed(1)} MiB, signed by a trusted key.`;
  $('send').disabled = false;
  $('send').addEventListener('click', () => {
    $('error').hidden = true;
    try {
      render(san, san.sanitize($('input').value));
    } catch (e) {
      showError(e);
    }
  });
  addEventListener('pagehide', (event) => { if (!event.persisted) san.close(); });
  document.body.dataset.state = 'ready';
}

main().catch((e) => {
  $('status').textContent = 'The sanitizer could not be loaded: nothing can be uploaded.';
  showError(e);
  document.body.dataset.state = 'error';
});
