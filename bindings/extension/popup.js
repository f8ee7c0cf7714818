/* The popup: the engine's state, the privacy report (what is and is not protected), the site's
 * allow-list entry and the "sanitize the focused field" button. It shows numbers about the
 * releases, never their text. */
const $ = (id) => document.getElementById(id);
const fmt = (x) => (x === null || x === undefined ? '—' : Number(x).toPrecision(4).replace(/\.?0+$/, ''));
/* A probability with the digits that tell it from 1 (0.99998, never "1"): ldptext.verbatim.format_probability */
const prob = (v) => {
  if (v === null || v === undefined) return '—';
  if (v >= 0.99 && v < 1) {
    const decimals = Math.min(17, Math.max(3, 1 - Math.floor(Math.log10(1 - v))));
    return v.toFixed(decimals).replace(/0+$/, '');
  }
  return Number(v.toPrecision(3)).toString();
};

function row(name, value) {
  const tr = document.createElement('tr');
  for (const v of [name, value]) {
    const td = document.createElement('td');
    td.textContent = v;
    tr.appendChild(td);
  }
  $('facts').appendChild(tr);
}

function list(id, items) {
  $(id).replaceChildren(...items.map((t) => {
    const li = document.createElement('li');
    li.textContent = t;
    return li;
  }));
}

function render(facts, lastRelease) {
  // rendered from the report alone (its fields and the registry's words), for any mechanism
  const r = facts;
  const par = r.parameters || {};
  const kept = r.kept_in_clear_probability !== null && r.kept_in_clear_probability !== undefined;
  row('Mechanism', `${r.label || r.mechanism} (${r.notion})`);
  row('ε per token', r.metric ? `${fmt(r.epsilon)} (metric: ε·d(x, x′) between words x, x′)` : fmt(r.epsilon));
  if (par.p !== null && par.p !== undefined && par.p > 0) {
    row('p (kept word re-drawn)', `${fmt(par.p)}; ε₀ = ln(1/p) = ${fmt(par.epsilon0)}`);
  }
  row('Worst-case LDP level per token', r.worst_case_token_epsilon === null ? 'none (see below)'
    : fmt(r.worst_case_token_epsilon));
  if (r.verbatim_median !== undefined && r.verbatim_median !== null) {
    row('Sensitive word released unchanged', `median ${prob(r.verbatim_median)}, 90th percentile `
      + `${prob(r.verbatim_p90)}, 99th ${prob(r.verbatim_p99)}, largest ${prob(r.verbatim_max)}`);
    if (r.verbatim_above_0_5 !== null && r.verbatim_above_0_5 !== undefined) {
      row('Sensitive words often unchanged', `${r.verbatim_above_0_5} at ≥ 0.5, ${r.verbatim_above_0_9} at ≥ 0.9`);
    }
    row('Cap on any sensitive word', r.verbatim_cap === null || r.verbatim_cap === undefined ? 'none'
      : `${prob(r.verbatim_cap)} (no sensitive word is released unchanged more often)`);
  }
  row('Budget unit', r.ledger_unit);
  row('Bundle', `${String(r.bundle_id).slice(0, 16)}… signed by key ${String(r.key_id).slice(0, 16)}…`);
  if (lastRelease) {
    row('Last release', `${lastRelease.n_tokens} tokens in ${lastRelease.fields} field(s): charge n·ε = `
      + `${fmt(lastRelease.document_epsilon)}`);
  }
  if (r.weak_privacy) row('WEAK PRIVACY', 'this bundle releases text close to the input');

  const prot = [
    r.metric ? `Each re-drawn word: the output cannot tell two words x, x′ apart by more than a factor `
      + `exp(ε·d(x, x′)), ε = ${fmt(r.epsilon)}, d their distance (${r.metric}).`
      : `Each token: ${r.notion}, ε = ${fmt(r.epsilon)} per token, between ${r.neighbouring}.`,
    'Your text is sanitized on this device; the extension itself sends nothing anywhere.',
    'On a guarded site: the text of a form\'s text areas and text, search and tel fields (read-only and '
      + 'disabled ones too), in the page, its frames and its shadow roots, when the form is sent by a click, '
      + 'Enter, or the page\'s own script (requestSubmit(), submit(), or its submit handler sending the form '
      + 'with fetch or XMLHttpRequest).',
    'A guarded form is not sent unless those fields were sanitized: if the bundle does not verify or the '
      + 'engine cannot load, the submit is blocked.',
  ];
  if (kept) prot.splice(1, 0, 'Sensitive words (names, places, numbers, health words) are always re-drawn.');
  list('protected', prot);
  const not = [
    'The number of words: token-level privacy never hides the length.',
    `Worst case: ${r.worst_case_note}.`,
  ];
  if (kept) {
    not.push(`Words kept in the clear (function words, punctuation) are released unchanged with probability `
      + `${par.p ? '1 − p = ' : ''}${fmt(r.kept_in_clear_probability)}.`);
  }
  not.push('Fields sent as typed, by design: password (the site must get it exactly); e-mail and URL (the '
    + 'browser checks their form, and a sanitized address is no address); number, date and time, range and '
    + 'colour (the browser accepts only their format); hidden fields (set by the page, not typed); files; '
    + 'controls a page draws itself (form-associated custom elements).');
  not.push('Editable regions (rich-text editors) are not part of a form: sanitize them yourself (the button '
    + 'above, Alt+Shift+S or right-click) before you send.');
  not.push('What the page\'s own scripts read while you type, or send by themselves (not by submitting the '
    + 'form).');
  not.push('Sites you have not allowed: there, only the fields you sanitize yourself are.');
  list('not-protected', not);
  $('report').hidden = false;
}

async function activeTab() {
  const [tab] = await chrome.tabs.query({ active: true, currentWindow: true });
  return tab;
}

async function main() {
  const state = await chrome.runtime.sendMessage({ type: 'status' });
  if (state && state.ok) {
    $('status').className = 'ok';
    $('status').textContent = 'Bundle verified against the publisher\'s key; the engine is ready.';
    render(state.facts, state.lastRelease);
  } else {
    const e = (state && state.error) || {};
    $('status').className = 'failed';
    $('status').textContent = `The privacy engine is NOT available: ${e.message || 'no answer'}`
      + `${typeof e.code === 'number' ? ` (code ${e.code})` : ''}. Nothing is sanitized, and forms on `
      + 'guarded sites are blocked.';
  }

  const tab = await activeTab().catch(() => null);
  let origin = null;
  try { origin = tab && tab.url ? new URL(tab.url).origin : null; } catch (e) { origin = null; }
  if (origin && /^https?:/.test(origin)) {
    $('origin').textContent = origin;
    const { allowedOrigins } = await chrome.storage.local.get({ allowedOrigins: [] });
    $('allow').checked = allowedOrigins.includes(origin);
    $('allow').addEventListener('change', async () => {
      const { allowedOrigins: now } = await chrome.storage.local.get({ allowedOrigins: [] });
      const next = now.filter((o) => o !== origin);
      if ($('allow').checked) next.push(origin);
      await chrome.storage.local.set({ allowedOrigins: next });
    });
  } else {
    $('allow').disabled = true;
  }
  $('sanitize').addEventListener('click', async () => {
    if (!tab || tab.id === undefined) return;
    let reply;
    try { // the worker finds the frame that holds the field (the page's, or one of its frames')
      reply = await chrome.runtime.sendMessage({ type: 'sanitize-focused-tab', tabId: tab.id });
    } catch (e) {
      reply = { ok: false, error: { message: 'the extension\'s privacy engine did not answer' } };
    }
    $('action-result').textContent = reply && reply.ok
      ? `Sanitized in place: ${reply.report.n_tokens} tokens, charge ${fmt(reply.report.document_epsilon)}.`
      : `Not sanitized: ${(reply && reply.error && reply.error.message) || 'no focused text field'}.`;
  });
}

main();
