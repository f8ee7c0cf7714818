/* check.html's script: the cases of runner.js in the browser, then the example page driven like a
 * user (type, click "Sanitize & upload", read what is shown). Results go to #results as JSON. */
import * as api from '/ldptext/ldptext-web.js';
import { runAll } from './runner.js';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(probe, what, tries = 4000) {
  for (let i = 0; i < tries; i++) {
    const value = probe();
    if (value) return value;
    await sleep(25);
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function fetchBytes(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

/* Type into the example page, click the button, read what it shows. */
async function driveExample(example) {
  const frame = document.getElementById('example');
  frame.src = example.url;
  const doc = await waitFor(() => {
    const d = frame.contentDocument;
    return d && d.body && ['ready', 'error'].includes(d.body.dataset.state) ? d : null;
  }, 'the example page to load its bundle');
  const out = { state: doc.body.dataset.state, status: doc.getElementById('status').textContent };
  if (out.state !== 'ready') {
    out.error = doc.getElementById('error').textContent;
    return out;
  }
  doc.getElementById('input').value = example.text;
  doc.getElementById('send').click();
  await waitFor(() => doc.getElementById('result').dataset.count === '1', 'the sanitized text');
  out.sanitized = doc.getElementById('sanitized').textContent;
  out.upload = JSON.parse(doc.getElementById('upload').textContent);
  out.report_rows = Array.from(doc.querySelectorAll('#report tr'),
    (tr) => Array.from(tr.children, (cell) => cell.textContent));
  out.protected = Array.from(doc.querySelectorAll('#protected li'), (li) => li.textContent);
  out.not_protected = Array.from(doc.querySelectorAll('#not-protected li'), (li) => li.textContent);
  out.error_shown = !doc.getElementById('error').hidden;
  return out;
}

async function main() {
  const spec = await (await fetch('/fixtures/spec.json')).json();
  const results = await runAll(api, spec, (name) => fetchBytes('/fixtures/' + name));
  results.example = spec.example ? await driveExample(spec.example) : null;
  return results;
}

main().then(
  (results) => { document.getElementById('results').textContent = JSON.stringify(results); },
  (e) => { document.getElementById('results').textContent = JSON.stringify({ fatal: String(e && e.stack || e) }); },
).finally(() => { document.body.dataset.done = '1'; });
