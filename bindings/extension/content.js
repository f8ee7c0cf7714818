/* ldptext "sanitize before send": the content script (every page and frame, from document_start).
 *
 * 1. The submit guard, on pages whose origin the user allowed (popup: "Guard forms on this site";
 *    the list is chrome.storage.local.allowedOrigins). Its listener is registered on window in the
 *    capture phase before any of the page's scripts run, so it sees every submit event first: it
 *    stops the event (preventDefault, stopImmediatePropagation), has the form's text fields
 *    (textarea, input type text / search) sanitized by the service worker, writes the sanitized
 *    text into them and submits the form again with requestSubmit(); that second submit event
 *    reaches the page's own handlers with the sanitized text in place. If the engine is not
 *    available (a bundle that does not verify, a module that cannot load, no answer), the form is
 *    not submitted and a message says so: it fails closed.
 * 2. The user action (context menu, keyboard shortcut, popup button): the focused text field's
 *    text is replaced in place with its sanitized text; on failure it is left as it is, with a
 *    message.
 * Nothing here logs text; messages name the error, never the input. */
(() => {
  if (window.__ldptextGuard) return;
  window.__ldptextGuard = true;

  const origin = location.origin;
  let allowed = null; // null: not known yet (the guard waits for it)
  const allowList = () => chrome.storage.local.get({ allowedOrigins: [] })
    .then(({ allowedOrigins }) => Array.isArray(allowedOrigins) && allowedOrigins.includes(origin));
  allowList().then((a) => { allowed = a; }, () => { allowed = null; });
  chrome.storage.onChanged.addListener((changes, area) => {
    if (area === 'local' && changes.allowedOrigins) {
      const list = changes.allowedOrigins.newValue;
      allowed = Array.isArray(list) && list.includes(origin);
    }
  });

  const TEXT_TYPES = ['text', 'search'];
  function isTextField(el) {
    if (el instanceof HTMLTextAreaElement) return !el.disabled && !el.readOnly;
    if (el instanceof HTMLInputElement) return TEXT_TYPES.includes(el.type) && !el.disabled && !el.readOnly;
    return false;
  }

  function showMessage(id, text) {
    let box = document.getElementById(id);
    if (!box) {
      box = document.createElement('div');
      box.id = id;
      box.setAttribute('role', 'alert');
      box.style.cssText = 'position:fixed;z-index:2147483647;left:12px;right:12px;top:12px;padding:12px 16px;'
        + 'background:#b00020;color:#fff;font:14px/1.4 system-ui,sans-serif;border-radius:6px;'
        + 'box-shadow:0 2px 8px rgba(0,0,0,.4);white-space:pre-wrap';
      (document.body || document.documentElement).appendChild(box);
    }
    box.textContent = text;
    return box;
  }

  function describe(error) {
    const e = error || {};
    return `${e.message || 'the privacy engine did not answer'}${typeof e.code === 'number' ? ` (code ${e.code})` : ''}`;
  }

  async function askEngine(texts) {
    try {
      const reply = await chrome.runtime.sendMessage({ type: 'sanitize', texts });
      if (reply && reply.ok && Array.isArray(reply.texts) && reply.texts.length === texts.length) return reply;
      return { ok: false, error: reply && reply.error };
    } catch (e) {
      return { ok: false, error: { code: null, message: 'the extension\'s privacy engine did not answer' } };
    }
  }

  // ---- 1. the submit guard ----------------------------------------------------------------------
  const passing = new WeakSet(); // a form whose next submit event is our own, already sanitized

  function resubmit(form, submitter) {
    passing.add(form);
    try {
      if (submitter && submitter.form === form) form.requestSubmit(submitter);
      else form.requestSubmit();
    } finally {
      passing.delete(form); // requestSubmit dispatches synchronously; invalid forms dispatch nothing
    }
  }

  async function guard(form, submitter) {
    if (allowed === null) {
      try { allowed = await allowList(); } catch (e) { allowed = true; } // unknown: treat as guarded
    }
    if (!allowed) {
      resubmit(form, submitter);
      return;
    }
    const fields = [...form.elements].filter(isTextField);
    const texts = fields.map((f) => f.value);
    const reply = await askEngine(texts);
    if (!reply.ok) {
      showMessage('ldptext-blocked', 'ldptext blocked this form: its text could not be sanitized, so nothing '
        + `was sent. ${describe(reply.error)}`);
      return;
    }
    if (fields.some((f, i) => f.value !== texts[i])) { // typed into while it was sanitized: ask again
      showMessage('ldptext-blocked', 'ldptext: the form changed while it was being sanitized; nothing was '
        + 'sent. Submit it again.');
      return;
    }
    fields.forEach((f, i) => { f.value = reply.texts[i]; });
    const note = document.getElementById('ldptext-blocked');
    if (note) note.remove();
    resubmit(form, submitter);
  }

  window.addEventListener('submit', (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement)) return;
    if (passing.has(form)) return; // our own resubmission: the text is sanitized, let the page have it
    if (allowed === false) return; // not a guarded page
    event.preventDefault();
    event.stopImmediatePropagation();
    guard(form, event.submitter);
  }, true);

  // ---- 2. the user action: the focused field, in place --------------------------------------------
  function focusedField() {
    let el = document.activeElement;
    while (el && el.shadowRoot && el.shadowRoot.activeElement) el = el.shadowRoot.activeElement;
    if (isTextField(el)) return { el, get: () => el.value, set: (t) => { el.value = t; } };
    if (el && el.isContentEditable) return { el, get: () => el.innerText, set: (t) => { el.textContent = t; } };
    return null;
  }

  chrome.runtime.onMessage.addListener((msg, sender, sendResponse) => {
    if (!msg || msg.type !== 'sanitize-focused' || sender.id !== chrome.runtime.id) return false;
    const field = focusedField();
    if (!field) return false; // another frame may hold the focus
    const text = field.get();
    askEngine([text]).then((reply) => {
      if (!reply.ok) {
        showMessage('ldptext-not-sanitized', 'ldptext could not sanitize this field; its text was left as it is and '
          + `nothing was sent. ${describe(reply.error)}`);
        sendResponse({ ok: false, error: reply.error });
        return;
      }
      if (field.get() !== text) {
        sendResponse({ ok: false, error: { code: null, message: 'the field changed while it was sanitized' } });
        return;
      }
      field.set(reply.texts[0]);
      field.el.dispatchEvent(new Event('input', { bubbles: true }));
      sendResponse({ ok: true, report: reply.reports[0] });
    });
    return true;
  });
})();
