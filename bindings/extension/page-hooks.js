/* ldptext "sanitize before send": the page-world hooks (every page and frame, from document_start,
 * in the page's own JavaScript world, before any of its scripts run). They read no text and decide
 * nothing; they tell the content script (content.js, the extension's isolated world) about two things
 * it cannot see by itself:
 *
 * 1. A new shadow root. A `submit` event is not composed: fired by a form inside a shadow root, it
 *    never reaches window, where the content script listens. Element.prototype.attachShadow is
 *    wrapped so that, before the page gets the new root, the content script hears of its host (an
 *    `ldptext-shadow-root` event whose relatedTarget is the host: a DOM node passes between the two
 *    worlds, a JavaScript object does not) and puts its own submit listener on the root, open or
 *    closed, ahead of the page's. First on the host itself (heard by the content script's listener
 *    on the root or document holding it); if nobody answered (the host is not in the document yet),
 *    on window.
 * 2. form.submit(), which fires no submit event. It is wrapped to fire `ldptext-form-submit` on the
 *    form first; if the content script takes it (preventDefault: a guarded page), the content script
 *    sanitizes the form's fields and submits it itself; otherwise the form is submitted as the page
 *    asked.
 *
 * A page that wants to send the text another way can (it sees every keystroke); these hooks only
 * make sure that the ways a form is submitted all pass the guard. */
(() => {
  const dispatch = EventTarget.prototype.dispatchEvent;
  const attachShadow = Element.prototype.attachShadow;
  const submit = HTMLFormElement.prototype.submit;

  function announce(host) {
    const init = { relatedTarget: host, bubbles: true, cancelable: true };
    const here = new MouseEvent('ldptext-shadow-root', init);
    dispatch.call(host, here);
    if (!here.defaultPrevented) dispatch.call(window, new MouseEvent('ldptext-shadow-root', init));
  }

  function wrap(proto, name, fn) {
    const d = Object.getOwnPropertyDescriptor(proto, name);
    Object.defineProperty(proto, name, { ...d, value: fn });
  }

  wrap(Element.prototype, 'attachShadow', {
    attachShadow(init) {
      const root = attachShadow.call(this, init);
      try { announce(this); } catch (e) { /* the guard's MutationObserver still finds the root */ }
      return root;
    },
  }.attachShadow);

  wrap(HTMLFormElement.prototype, 'submit', {
    submit() {
      const taken = new Event('ldptext-form-submit', { cancelable: true });
      dispatch.call(this, taken);
      if (taken.defaultPrevented) return undefined; // the guard sanitizes it and submits it itself
      return submit.call(this);
    },
  }.submit);
})();
