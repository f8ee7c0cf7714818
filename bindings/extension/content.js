/* ldptext "sanitize before send": the content script (every page and frame, about:blank, srcdoc and
 * data: frames included, from document_start, in the extension's isolated world).
 *
 * 1. The submit guard, on guarded pages: a frame is guarded when its origin, or the origin of any
 *    frame above it, is on the allow-list (popup: "Guard forms on this site";
 *    chrome.storage.local.allowedOrigins). Its submit listener is registered on window in the
 *    capture phase before any of the page's scripts run, and on every shadow root (a submit event
 *    does not leave its shadow root): page-hooks.js, in the page's world, announces each root as it
 *    is made, before the page can use it; a MutationObserver finds the roots the parser makes. The
 *    listener sees every submit event first: it stops the event (preventDefault,
 *    stopImmediatePropagation), has the form's text fields (GUARDED_FIELD: text areas and text,
 *    search and tel inputs, read-only and disabled ones too: the page can change that before the
 *    form is sent) sanitized by the service worker, writes the sanitized text into them and submits
 *    the form again with requestSubmit(); that second submit event reaches the page's own handlers
 *    with the sanitized text in place. form.submit(), which fires no submit event, comes here too
 *    (page-hooks.js). If the engine is not available (a bundle that does not verify, a module that
 *    cannot load, no answer), the form is not submitted and a message says so: it fails closed.
 * 2. The user action (context menu, keyboard shortcut, popup button): the focused text field's or
 *    editable region's text is replaced in place with its sanitized text, as if typed (so that an
 *    editor which keeps its own copy of the text takes it); on failure it is left as it is, with a
 *    message.
 * Nothing here logs text; messages name the error, never the input. */
(() => {
  if (window.__ldptextGuard) return;
  window.__ldptextGuard = true;

  // ---- is this frame guarded? ----------------------------------------------------------------------
  const origins = [location.origin];
  try {
    if (location.ancestorOrigins) origins.push(...location.ancestorOrigins);
  } catch (e) { /* no ancestors */ }
  let allowed = null; // null: not known yet (the guard waits for it)
  const isAllowed = (list) => Array.isArray(list) && origins.some((o) => o !== 'null' && list.includes(o));
  const allowList = () => chrome.storage.local.get({ allowedOrigins: [] })
    .then(({ allowedOrigins }) => isAllowed(allowedOrigins));
  function setAllowed(a) {
    const was = allowed;
    allowed = a;
    if (a === false) shadows.stop();
    else if (was === false) {
      listen();
      shadows.scan(document);
    }
  }
  allowList().then(setAllowed, () => { allowed = null; });
  chrome.storage.onChanged.addListener((changes, area) => {
    if (area === 'local' && changes.allowedOrigins) setAllowed(isAllowed(changes.allowedOrigins.newValue));
  });

  /* The fields whose text a form submit sends as the user typed it, and which the guard sanitizes:
   * text areas and text, search and tel inputs (an input whose type the browser does not know is a
   * text input). Left alone: password (the site must get it exactly), email and url (the browser
   * checks their form: a sanitized address is no address), number, range, date and time, color
   * (the browser accepts only their format), hidden (set by the page, not typed), checkbox, radio,
   * file and buttons. Said in docs/extension.md and in the popup. */
  const GUARDED_INPUT_TYPES = ['text', 'search', 'tel'];
  function isGuardedField(el) { // by name, not instanceof: a frame's elements are of its own realm
    if (!el || !el.localName) return false;
    if (el.localName === 'textarea') return true;
    return el.localName === 'input' && GUARDED_INPUT_TYPES.includes(el.type);
  }
  const isEditableField = (el) => isGuardedField(el) && !el.disabled && !el.readOnly;
  const shadowRootOf = (el) => (chrome.dom && chrome.dom.openOrClosedShadowRoot
    ? chrome.dom.openOrClosedShadowRoot(el) : el.shadowRoot) || null;

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
      return { ok: false, error: { code: null, message: 'the extension\'s privacy engine did not answer (if the '
        + 'extension was just reloaded or updated, reload this page)' } };
    }
  }

  // ---- 1. the submit guard ----------------------------------------------------------------------
  const passing = new WeakSet(); // a form whose next submit event is our own, already sanitized
  const written = new WeakMap(); // field -> the sanitized text written into it (not sanitized twice)
  const nativeSubmit = HTMLFormElement.prototype.submit; // this world's: page-hooks.js wraps the page's

  /* how: 'request' (a submit event of the browser's: a click, Enter, requestSubmit()), 'submit' (the
   * page called form.submit(): no submit event, no validation) or 'event' (a submit event the page
   * made itself, which sends nothing by itself: it is dispatched again, for the page's handlers) */
  function resubmit(form, submitter, how) {
    if (how === 'submit') {
      nativeSubmit.call(form);
      return;
    }
    passing.add(form);
    try {
      if (how === 'event') {
        form.dispatchEvent(new SubmitEvent('submit', { bubbles: true, cancelable: true, submitter }));
      } else if (submitter && submitter.form === form) form.requestSubmit(submitter);
      else form.requestSubmit();
    } finally {
      passing.delete(form); // requestSubmit dispatches synchronously; invalid forms dispatch nothing
    }
  }

  const blocked = (text) => showMessage('ldptext-blocked', text);

  async function guard(form, submitter, how) {
    if (allowed === null) {
      try { allowed = await allowList(); } catch (e) { allowed = true; } // unknown: treat as guarded
    }
    if (!allowed) {
      resubmit(form, submitter, how);
      return;
    }
    const fields = [...form.elements].filter(isGuardedField);
    const before = fields.map((f) => f.value);
    const todo = fields.filter((f) => f.value !== '' && written.get(f) !== f.value);
    const texts = todo.map((f) => f.value);
    let sanitized = [];
    if (todo.length) {
      const reply = await askEngine(texts);
      if (!reply.ok) {
        blocked('ldptext blocked this form: its text could not be sanitized, so nothing was sent. '
          + describe(reply.error));
        return;
      }
      sanitized = reply.texts;
    }
    const now = [...form.elements].filter(isGuardedField);
    if (now.length !== fields.length || now.some((f, i) => f !== fields[i] || f.value !== before[i])) {
      blocked('ldptext: the form changed while it was being sanitized; nothing was sent. Submit it again.');
      return;
    }
    todo.forEach((f, i) => {
      f.value = sanitized[i];
      written.set(f, f.value);
    });
    const noValidate = form.noValidate || (submitter && submitter.formNoValidate);
    if (how === 'request' && !noValidate && !form.checkValidity()) {
      blocked('ldptext: the sanitized text does not meet a rule of this form (a field\'s pattern or length); '
        + 'nothing was sent. Edit the field and submit again.');
      form.reportValidity();
      return;
    }
    const note = document.getElementById('ldptext-blocked');
    if (note) note.remove();
    resubmit(form, submitter, how);
  }

  function onSubmit(event) {
    const form = event.composedPath()[0];
    if (!form || form.localName !== 'form') return;
    if (event.type === 'submit' && passing.has(form)) return; // our own resubmission: already sanitized
    if (allowed === false) return; // not a guarded page
    event.preventDefault();
    event.stopImmediatePropagation();
    if (event.type !== 'submit') guard(form, null, 'submit');
    else guard(form, event.submitter || null, event.isTrusted ? 'request' : 'event');
  }

  /* Shadow roots: our listeners go on each one (a submit event, or page-hooks.js's events, do not
   * leave it). page-hooks.js announces a root as attachShadow makes it; the observer finds roots
   * the parser makes (declarative shadow DOM) and hosts added later. */
  const shadows = (() => {
    const hooked = new WeakSet();
    const observer = new MutationObserver((records) => {
      listen(); // document.open() erases the window's listeners (and empties the document: a record)
      for (const r of records) for (const n of r.addedNodes) if (n.nodeType === 1) scan(n);
    });
    let observing = false;

    function observe(node) {
      if (allowed === false) return;
      observer.observe(node, { childList: true, subtree: true });
      observing = true;
    }

    /* a root: our listeners on it (once), watched for hosts added to it, and the roots inside it */
    function visit(root) {
      if (!hooked.has(root)) {
        hooked.add(root);
        root.addEventListener('submit', onSubmit, true);
        root.addEventListener('ldptext-form-submit', onSubmit, true);
        root.addEventListener('ldptext-shadow-root', onAnnounce, true);
      }
      observe(root);
      scan(root);
    }

    /* every shadow root in node's tree (node's own included) and, in turn, in theirs */
    function scan(node) {
      if (allowed === false) return;
      if (node === document) observe(document);
      const root = node.nodeType === 1 ? shadowRootOf(node) : null;
      if (root) visit(root);
      if (!node.querySelectorAll) return;
      for (const el of node.querySelectorAll('*')) {
        const r = shadowRootOf(el);
        if (r) visit(r);
      }
    }

    function onAnnounce(event) {
      event.stopImmediatePropagation();
      event.preventDefault(); // heard: page-hooks.js need not tell window
      if (allowed === false) return;
      const host = event.relatedTarget;
      if (!host || host.nodeType !== 1) return;
      const root = shadowRootOf(host);
      if (root) visit(root); // hooked already: the host was retargeted to an outer one; this looks inside
    }

    function stop() {
      if (observing) observer.disconnect();
      observing = false;
    }

    return { onAnnounce, scan, stop };
  })();

  let focusedAt = 0; // when this frame last got the focus (the popup takes it from the page)
  const onFocus = () => { focusedAt = Date.now(); };

  /* Our listeners on window: registered now, before the page's scripts, and again (a no-op when
   * they are there) after the page's document.open(), which erases every listener on the window */
  function listen() {
    window.addEventListener('submit', onSubmit, true);
    window.addEventListener('ldptext-form-submit', onSubmit, true);
    window.addEventListener('ldptext-shadow-root', shadows.onAnnounce, true);
    window.addEventListener('focusin', onFocus, true);
  }
  listen();
  shadows.scan(document);

  // ---- 2. the user action: the focused field, in place --------------------------------------------

  function focusedElement() {
    let el = document.activeElement;
    for (let root = el && shadowRootOf(el); root && root.activeElement; root = shadowRootOf(el)) {
      el = root.activeElement;
    }
    return el;
  }

  const norm = (s) => s.replace(/\s+/g, ' ').trim();

  /* Replace the text as typing it would, so that an editor which keeps its own copy of the text (a
   * model it renders) takes the new text: select it all; offer an editable region's editor a
   * beforeinput "insertText" (the event rich-text editors handle: one that takes it cancels it and
   * applies it itself); otherwise insert it with execCommand('insertText'), which changes the DOM
   * and fires input, as typing does; where that is refused, set it directly. True when the field
   * then shows the new text. */
  function replaceText(el, text, editable) {
    const doc = el.ownerDocument;
    el.focus();
    if (editable) {
      const sel = doc.getSelection();
      const range = doc.createRange();
      range.selectNodeContents(el);
      sel.removeAllRanges();
      sel.addRange(range);
    } else {
      el.select();
    }
    const now = () => (editable ? el.innerText : el.value);
    let done = false;
    if (editable) {
      const offer = new InputEvent('beforeinput', { inputType: 'insertText', data: text, bubbles: true,
        cancelable: true, composed: true });
      done = !el.dispatchEvent(offer) && norm(now()) === norm(text);
    }
    if (!done) {
      try {
        done = doc.execCommand('insertText', false, text) && norm(now()) === norm(text);
      } catch (e) {
        done = false;
      }
    }
    if (!done) {
      if (editable) el.textContent = text;
      else el.value = text;
      el.dispatchEvent(new Event('input', { bubbles: true }));
    }
    return norm(now()) === norm(text);
  }

  function focusedField() {
    const el = focusedElement();
    if (isEditableField(el)) return { el, get: () => el.value, set: (t) => replaceText(el, t, false) };
    if (el && el.isContentEditable) return { el, get: () => el.innerText, set: (t) => replaceText(el, t, true) };
    return null;
  }

  chrome.runtime.onMessage.addListener((msg, sender, sendResponse) => {
    if (!msg || sender.id !== chrome.runtime.id) return false;
    if (msg.type === 'focus-probe') { // which frame holds the field? (the worker asks every frame)
      if (focusedField()) {
        chrome.runtime.sendMessage({ type: 'focus-candidate', probe: msg.probe, hasFocus: document.hasFocus(),
          focusedAt }).catch(() => {});
      }
      return false;
    }
    if (msg.type !== 'sanitize-focused') return false;
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
      if (!field.set(reply.texts[0])) {
        showMessage('ldptext-not-sanitized', 'ldptext: this editor did not take the sanitized text; check the '
          + 'field before you send it.');
        sendResponse({ ok: false, error: { code: null, message: 'the editor did not take the sanitized text' } });
        return;
      }
      sendResponse({ ok: true, report: reply.reports[0] });
    });
    return true;
  });
})();
