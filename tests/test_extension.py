"""The Chromium extension "sanitize before send" (``make extension``: build/extension/, the sources in
bindings/extension/), loaded unpacked into headless Chromium (``--headless=new --load-extension``)
and driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: no port, no websocket
library), against a page on 127.0.0.1 whose form posts to its own server (http.server in a thread):

* the page's origin allowed (the allow-list in the extension's storage): text typed into the form's
  fields (a marker of words the bundle has never seen, and known ones) and submitted with a mouse
  click reaches the server sanitized only: the same number of tokens, every one a word of the
  bundle, the marker nowhere in the request; the page's own submit handler (which copies the text
  into a hidden field) ran after the sanitization and saw the sanitized text;
* the user action (context menu / shortcut / popup: the worker's ``sanitizeFocused``) replaces the
  focused field's text in place with its sanitized text;
* a site not on the allow-list is not guarded: the typed text reaches the server as typed (the
  control: the harness types and submits for real);
* the popup states that the bundle verified and shows the report (ε, what is and is not protected);
* the same extension with one flipped byte in its bundle: the guarded submit is blocked (the server
  receives nothing), a visible message says so, the field keeps its text (nothing sanitized), the
  user action changes nothing, and the popup says the engine is not available.

Skipped when emcc, node or chromium is missing; with LDPTEXT_REQUIRE_NPM=1 (CI) their absence fails
instead."""
from __future__ import annotations

import json
import os
import queue
import re
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import build_lock, build_tiny_bundle, require_tool

ROOT = Path(__file__).resolve().parents[1]
# unknown to the tiny bundle (its words are w0..w59): never in any output
MARKERS = ("zqxsecret", "qvmarker", "kjwhidden")
TYPED = {"message": "zqxsecret w3 qvmarker w7, w9", "subject": "kjwhidden w12", "note": "qvmarker w1 zqxsecret"}
WORD = re.compile(r"^w\d+$")
CASES_PAGE = Path(__file__).resolve().parent / "extension" / "cases.html"


def _tool(names: list[str], why: str) -> str:
    return require_tool(names, why, "LDPTEXT_REQUIRE_NPM")


# ---- the DevTools protocol over --remote-debugging-pipe (fd 3: commands in, fd 4: replies out) -------

class Browser:
    """Headless Chromium with one unpacked extension, driven by CDP messages (JSON, NUL-terminated)."""

    def __init__(self, chromium: str, extension: Path) -> None:
        self.profile = tempfile.mkdtemp(prefix="ldptext-ext-profile-")
        to_chrome_r, self._w = os.pipe()
        self._r, from_chrome_w = os.pipe()

        def fds() -> None:  # in the child: its fd 3 reads our commands, its fd 4 writes the replies
            a, b = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        cmd = [chromium, "--headless=new", "--no-sandbox", f"--user-data-dir={self.profile}",
               "--remote-debugging-pipe", f"--load-extension={extension}",
               f"--disable-extensions-except={extension}", "--no-first-run", "--no-default-browser-check",
               "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--no-proxy-server",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-default-apps", "about:blank"]
        self.proc = subprocess.Popen(cmd, preexec_fn=fds, close_fds=False, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._next = 0
        self._replies: dict[int, dict] = {}
        self._cond = threading.Condition()
        self.events: queue.Queue = queue.Queue()
        self.targets: dict[str, dict] = {}
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                data = os.read(self._r, 1 << 16)
            except OSError:
                data = b""
            if not data:
                with self._cond:
                    self._replies[-1] = {"closed": True}
                    self._cond.notify_all()
                return
            buf += data
            while b"\0" in buf:
                raw, _, buf = buf.partition(b"\0")
                msg = json.loads(raw)
                if "id" in msg:
                    with self._cond:
                        self._replies[msg["id"]] = msg
                        self._cond.notify_all()
                else:
                    if msg.get("method") in ("Target.targetCreated", "Target.targetInfoChanged"):
                        info = msg["params"]["targetInfo"]
                        with self._cond:
                            self.targets[info["targetId"]] = info
                            self._cond.notify_all()
                    self.events.put(msg)

    def call(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 30) -> dict:
        with self._cond:
            self._next += 1
            mid = self._next
        msg = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._cond:
            while mid not in self._replies:
                if -1 in self._replies:
                    raise RuntimeError("chromium closed the DevTools pipe")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(method)
                self._cond.wait(left)
            reply = self._replies.pop(mid)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_target(self, pred, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for info in self.targets.values():
                    if pred(info):
                        return info
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("target: " + json.dumps(list(self.targets.values()))[:2000])
                self._cond.wait(left)

    def attach(self, target_id: str) -> str:
        return self.call("Target.attachToTarget", {"targetId": target_id, "flatten": True})["sessionId"]

    def evaluate(self, session: str, expression: str):
        r = self.call("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                           "returnByValue": True}, session)
        if "exceptionDetails" in r:
            raise RuntimeError(f"evaluate failed: {json.dumps(r['exceptionDetails'])[:1500]}")
        return r["result"].get("value")

    def wait_for(self, session: str, expression: str, timeout: float = 20):
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self.evaluate(session, expression)
            except RuntimeError:
                value = None  # a navigation in progress
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(expression)
            time.sleep(0.1)

    def close(self) -> None:
        try:
            os.close(self._w)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._r)
        shutil.rmtree(self.profile, ignore_errors=True)


# ---- the site: a form that posts to its own server --------------------------------------------------

FORM_PAGE = """<!doctype html><meta charset="utf-8"><title>test form</title>
<textarea id="note" aria-label="note"></textarea>
<form id="form" method="post" action="/submit">
  <input id="subject" name="subject" type="text">
  <textarea id="message" name="message"></textarea>
  <input id="page_saw" name="page_saw" type="hidden" value="">
  <button id="send" type="submit" style="width:120px;height:40px">Send</button>
</form>
<script>
  // the page's own handler: it copies what it sees into a hidden field, which the form then posts
  document.getElementById('form').addEventListener('submit', () => {
    document.getElementById('page_saw').value = document.getElementById('message').value;
  });
</script>"""


class Site:
    """The loopback server: ``/form`` (FORM_PAGE), ``/cases`` (tests/extension/cases.html); it records
    every request (``requests``: method, path with query, body) and the bodies of POSTs (``posts``)."""

    def __init__(self) -> None:
        site = self
        self.posts: list[bytes] = []
        self.requests: list[tuple[str, str, bytes]] = []
        self.other: Site | None = None  # a second origin, for the cases page's cross-origin frame

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.requests.append(("GET", self.path, b""))
                if self.path.startswith("/submit/"):
                    self._send(b"<!doctype html><p id='done'>received</p>")
                elif self.path.startswith("/frame-form/"):  # a form of this origin, for another's frame
                    case = urllib.parse.quote(self.path[len("/frame-form/"):])
                    self._send(f'<!doctype html><form method="post" action="/submit/{case}"><textarea '
                               'name="message"></textarea><button>Send</button></form>'.encode())
                elif urllib.parse.urlsplit(self.path).path == "/cases":
                    self._send(CASES_PAGE.read_bytes())
                else:
                    self._send(FORM_PAGE.encode())

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                site.requests.append(("POST", self.path, body))
                site.posts.append(body)
                self._send(b"<!doctype html><p id='done'>received</p>")

            def _send(self, body: bytes) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def received(self, case: str) -> list[dict]:
        """The fields of every request made to /submit/<case> (a POST's body or a GET's query)."""
        out = []
        for method, path, body in list(self.requests):
            url = urllib.parse.urlsplit(path)
            if url.path == f"/submit/{case}":
                data = body.decode() if method == "POST" else url.query
                out.append({k: v[0] for k, v in urllib.parse.parse_qs(data, keep_blank_values=True).items()})
        return out

    def assert_no_marker(self) -> None:
        """No request of any kind, to any path, carried a typed marker."""
        leaked = [f"{method} {urllib.parse.urlsplit(path).path}" for method, path, body in list(self.requests)
                  if any(m in path or m.encode() in body for m in MARKERS)]
        assert not leaked, f"a typed marker reached the server: {leaked}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def chromium() -> str:
    return _tool(["chromium", "chromium-browser", "google-chrome"],
                 "the extension test needs headless Chromium (Debian: chromium)")


@pytest.fixture(scope="module")
def extension(chromium, tmp_path_factory, ldptext_home) -> dict:
    """make extension with a tiny SanText+ bundle and the test run's developer key; a copy with one
    flipped byte in its bundle; a copy without its bundle."""
    _tool(["emcc"], "make extension builds the wasm module (Debian: emscripten)")
    _tool(["node", "nodejs"], "emscripten runs under node (Debian: nodejs)")
    d = tmp_path_factory.mktemp("extension")
    bundle = build_tiny_bundle(d / "tiny.ldpb", mechanism="santext+", p=0.3, w=0.7)
    out = d / "good"
    with build_lock():  # build/extension/ is rewritten by every make extension: copied before another
        done = subprocess.run(["make", "-s", "extension", f"EXT_BUNDLE={bundle}", "EXT_TRUST=--developer"],
                              cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        shutil.copytree(ROOT / "build" / "extension", out)
    bad = d / "tampered"
    shutil.copytree(out, bad)
    data = bytearray((bad / "bundle.ldpb").read_bytes())
    data[len(data) // 2] ^= 0x01
    (bad / "bundle.ldpb").write_bytes(bytes(data))
    missing = d / "no-bundle"
    shutil.copytree(out, missing)
    (missing / "bundle.ldpb").unlink()
    return {"good": out, "bad": bad, "no-bundle": missing}


def test_extension_manifest_sends_nothing(extension):
    m = json.loads((extension["good"] / "manifest.json").read_text())
    assert m["manifest_version"] == 3
    csp = m["content_security_policy"]["extension_pages"]
    assert "connect-src 'self'" in csp and "default-src 'self'" in csp
    assert not m.get("host_permissions"), "the extension asks for no host access beyond its content script"
    assert set(m["permissions"]) <= {"storage", "contextMenus", "activeTab"}
    assert "PUBLISHER_KEYS" in (extension["good"] / "publisher.js").read_text()


def _start(chromium: str, ext: Path, site: Site, allow: bool = True) -> tuple[Browser, str, str]:
    """The browser, the extension's id and a session on its service worker, with the site allowed
    (or, ``allow=False``, another origin only)."""
    b = Browser(chromium, ext)
    b.call("Target.setDiscoverTargets", {"discover": True})
    sw = b.wait_target(lambda t: t["type"] == "service_worker" and t["url"].startswith("chrome-extension://")
                       and t["url"].endswith("/background.js"))
    ext_id = urllib.parse.urlparse(sw["url"]).netloc
    s = b.attach(sw["targetId"])
    # the worker's extension bindings, and its module's top level, may still be on their way
    b.wait_for(s, "typeof chrome === 'object' && !!chrome.storage && typeof self.ldptextSanitizeFocused === 'function'")
    origin = site.origin if allow else "http://127.0.0.2:1"
    b.evaluate(s, f"chrome.storage.local.set({{allowedOrigins: [{json.dumps(origin)}]}}).then(() => true)")
    return b, ext_id, s


def _open_form(b: Browser, site: Site) -> str:
    tid = b.call("Target.createTarget", {"url": site.origin + "/form"})["targetId"]
    s = b.attach(tid)
    b.call("Page.enable", {}, s)
    b.call("Page.bringToFront", {}, s)
    b.wait_for(s, "document.readyState === 'complete' && !!document.getElementById('send')")
    return s


def _type(b: Browser, s: str, field: str, text: str) -> None:
    b.evaluate(s, f"document.getElementById({json.dumps(field)}).focus(), true")
    b.call("Input.insertText", {"text": text}, s)
    assert b.evaluate(s, f"document.getElementById({json.dumps(field)}).value") == text


def _click(b: Browser, s: str, element_id: str) -> None:
    rect = b.evaluate(s, f"(() => {{ const r = document.getElementById({json.dumps(element_id)})"
                         ".getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()")
    for kind in ("mousePressed", "mouseReleased"):
        b.call("Input.dispatchMouseEvent", {"type": kind, "x": rect[0], "y": rect[1], "button": "left",
                                            "clickCount": 1}, s)


def _sanitize_focused(b: Browser, sw: str):
    """What the context menu, the shortcut and the popup button call in the worker."""
    # the active tab, as the keyboard shortcut finds it (the extension has no "tabs" permission to
    # read other tabs' addresses)
    return b.evaluate(sw, "(async () => { const [t] = await chrome.tabs.query({active: true, "
                          "lastFocusedWindow: true}); return await self.ldptextSanitizeFocused(t.id, 0); })()")


def _popup(b: Browser, ext_id: str) -> dict:
    tid = b.call("Target.createTarget", {"url": f"chrome-extension://{ext_id}/popup.html"})["targetId"]
    s = b.attach(tid)
    b.wait_for(s, "document.getElementById('status') && "
                  "document.getElementById('status').className !== 'pending'")
    return b.evaluate(s, "({status: document.getElementById('status').textContent, "
                         "report_hidden: document.getElementById('report').hidden, "
                         "facts: document.getElementById('facts').innerText, "
                         "protected: document.getElementById('protected').innerText, "
                         "not_protected: document.getElementById('not-protected').innerText})")


def _sanitized(text: str, typed: str) -> None:
    """``text`` is a sanitized release of ``typed``: as many tokens, each a word of the bundle."""
    words = text.split()
    n = len(re.findall(r"\w+|[^\w\s]", typed))
    assert len(words) == n and all(WORD.match(w) for w in words), "not a sanitized release of the typed text"
    assert not any(m in text for m in MARKERS)


def test_guarded_submit_sends_only_sanitized_text(chromium, extension):
    start = time.monotonic()
    site = Site()
    b, ext_id, sw = _start(chromium, extension["good"], site)
    try:
        s = _open_form(b, site)
        # the user action, in place
        _type(b, s, "note", TYPED["note"])
        reply = _sanitize_focused(b, sw)
        assert reply and reply["ok"], reply
        assert reply["report"]["mechanism"] == "santext+" and reply["report"]["n_tokens"] == 3
        _sanitized(b.evaluate(s, "document.getElementById('note').value"), TYPED["note"])

        # the guarded form
        _type(b, s, "subject", TYPED["subject"])
        _type(b, s, "message", TYPED["message"])
        _click(b, s, "send")
        deadline = time.monotonic() + 20
        while not site.posts and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(site.posts) == 1, f"the server received {len(site.posts)} posts"
        raw = site.posts[0]
        for m in MARKERS:
            assert m.encode() not in raw, "the typed marker reached the server"
        form = {k: v[0] for k, v in urllib.parse.parse_qs(raw.decode(), keep_blank_values=True).items()}
        assert set(form) == {"subject", "message", "page_saw"}
        _sanitized(form["subject"], TYPED["subject"])
        _sanitized(form["message"], TYPED["message"])
        assert form["page_saw"] == form["message"], "the page's handler ran before the sanitization"
        b.wait_for(s, "!!document.getElementById('done')")

        popup = _popup(b, ext_id)
        assert "verified" in popup["status"] and popup["report_hidden"] is False
        assert "SanText+" in popup["facts"] and "ε per token" in popup["facts"] and "2" in popup["facts"]
        assert "Last release" in popup["facts"]
        # the verbatim tail, as every runtime's report carries it (never "largest 1" for 0.99998)
        assert "90th percentile" in popup["facts"] and "Cap on any sensitive word" in popup["facts"]
        assert "number of words" in popup["not_protected"] and "1 − p = 0.7" in popup["not_protected"]
        assert "sends nothing" in popup["protected"]
        # which fields are sanitized, which are sent as typed and why
        assert "text, search and tel fields" in popup["protected"] and "shadow roots" in popup["protected"]
        for left in ("password", "e-mail and URL", "number, date and time", "hidden fields", "Editable regions"):
            assert left in popup["not_protected"], left
    finally:
        b.close()
        site.close()
    assert time.monotonic() - start < 90


def test_tampered_bundle_blocks_the_submit_with_a_message(chromium, extension):
    start = time.monotonic()
    site = Site()
    b, ext_id, sw = _start(chromium, extension["bad"], site)
    try:
        s = _open_form(b, site)
        _type(b, s, "note", TYPED["note"])
        reply = _sanitize_focused(b, sw)
        assert reply and reply["ok"] is False and reply["error"]["code"] < 0, reply
        assert b.evaluate(s, "document.getElementById('note').value") == TYPED["note"], "changed without an engine"
        note = b.evaluate(s, "document.getElementById('ldptext-not-sanitized')?.textContent")
        assert note and "could not sanitize this field" in note and not any(m in note for m in MARKERS)

        _type(b, s, "message", TYPED["message"])
        _click(b, s, "send")
        msg = b.wait_for(s, "(() => { const m = document.getElementById('ldptext-blocked'); if (!m) return null; "
                            "const r = m.getBoundingClientRect(); const st = getComputedStyle(m); "
                            "return {text: m.textContent, visible: r.width > 0 && r.height > 0 && "
                            "st.visibility === 'visible' && st.display !== 'none'}; })()")
        assert msg["visible"], msg
        assert "blocked this form" in msg["text"] and "nothing was sent" in msg["text"]
        assert not any(m in msg["text"] for m in MARKERS)
        time.sleep(2)  # the submit would have been answered by now
        assert site.posts == [], "the server received the form from an extension that cannot sanitize"
        assert b.evaluate(s, "!!document.getElementById('send') && !document.getElementById('done')")
        assert b.evaluate(s, "document.getElementById('message').value") == TYPED["message"]

        popup = _popup(b, ext_id)
        assert "NOT available" in popup["status"] and popup["report_hidden"] is True
        assert "code -" in popup["status"]
    finally:
        b.close()
        site.close()
    assert time.monotonic() - start < 90


def test_a_missing_bundle_blocks_the_submit_and_says_so(chromium, extension):
    """An extension without its bundle (a broken build): the guarded submit is blocked with a message
    that names the missing file and what to do, not a bare network error; the popup says the same."""
    site = Site()
    b, ext_id, _ = _start(chromium, extension["no-bundle"], site)
    try:
        s = _open_form(b, site)
        _type(b, s, "message", TYPED["message"])
        _click(b, s, "send")
        text = b.wait_for(s, "document.getElementById('ldptext-blocked')?.textContent")
        assert "blocked this form" in text and "bundle.ldpb) is missing from the extension" in text, text
        assert "make extension" in text and "Failed to fetch" not in text, text
        time.sleep(1)
        assert site.posts == [], "the form was sent"
        site.assert_no_marker()
        popup = _popup(b, ext_id)
        assert "NOT available" in popup["status"] and "is missing from the extension" in popup["status"]
    finally:
        b.close()
        site.close()


def test_a_site_not_allowed_is_not_guarded(chromium, extension):
    """The control: the same typing and click on a page the user did not allow reach the server as
    typed (so the guard above, not the harness, is what sanitized them)."""
    site = Site()
    b, _, _ = _start(chromium, extension["good"], site, allow=False)
    try:
        s = _open_form(b, site)
        _type(b, s, "message", TYPED["message"])
        _click(b, s, "send")
        deadline = time.monotonic() + 20
        while not site.posts and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(site.posts) == 1
        form = {k: v[0] for k, v in urllib.parse.parse_qs(site.posts[0].decode(), keep_blank_values=True).items()}
        assert form["message"] == TYPED["message"]
    finally:
        b.close()
        site.close()


# ---- every way the cases page (tests/extension/cases.html) sends typed text ----------------------------

# text typed into each case's field: unknown words (the markers) and words of the bundle
CASE_TEXT = "zqxsecret w3 qvmarker w7"
# submitted by a form (a click, or the page's own form.submit()) or by the page's own submit handler,
# on a guarded page
GUARD_CASES = ["readonly-after-typing", "disabled-then-enabled", "type-tel", "fetch-in-handler",
               "synthetic-submit-event", "form-submit-method", "shadow-open", "shadow-declarative", "shadow-closed-xhr",
               "shadow-form-submit-method", "shadow-nested-get", "iframe-about-blank", "iframe-srcdoc",
               "iframe-made-later", "iframe-document-write", "iframe-sandboxed", "iframe-other-origin"]
# in a frame of an opaque origin (sandboxed): the page's script cannot reach it, the harness finds the
# field and the button over the DevTools protocol (DOM), by the frame's element id
OPAQUE_CASES = {"iframe-sandboxed": "iframe-sandboxed-frame", "iframe-other-origin": "iframe-other-origin-frame"}
# editors the page sends from its own copy of the text: sanitized on demand, before the page sends
EDITOR_CASES = ["editor-model", "editor-frame"]


@pytest.fixture(scope="module")
def guarded(chromium, extension):
    """One browser with the good extension and a site that is allowed (each test opens its own tab),
    and a second site (another origin, not on the list) whose page the cases page frames."""
    site, other = Site(), Site()
    b, ext_id, sw = _start(chromium, extension["good"], site)
    site.other = other
    yield b, site, ext_id, sw
    b.close()
    site.close()
    other.close()


def _open_cases(b: Browser, site: Site) -> str:
    url = f"{site.origin}/cases?other={urllib.parse.quote(site.other.origin)}"
    tid = b.call("Target.createTarget", {"url": url})["targetId"]
    s = b.attach(tid)
    b.call("Page.enable", {}, s)
    b.call("Page.bringToFront", {}, s)
    b.wait_for(s, "document.readyState === 'complete' && window.ldpReady === true")
    return s


def _find(node: dict, pred) -> dict | None:
    if pred(node):
        return node
    for child in node.get("children", []) + node.get("shadowRoots", []) + (
            [node["contentDocument"]] if "contentDocument" in node else []):
        hit = _find(child, pred)
        if hit:
            return hit
    return None


def _opaque_frame(b: Browser, s: str, case: str) -> dict:
    """The field and the button of the case's frame of an opaque origin (by the frame element's id):
    the frame's own DevTools session (a sandboxed frame runs in a process of its own), their node ids
    there, and where the frame's content starts on the page."""
    def attr(node, name):
        a = node.get("attributes", [])
        return dict(zip(a[::2], a[1::2])).get(name)

    root = b.call("DOM.getDocument", {"depth": -1, "pierce": True}, s)["root"]
    el = _find(root, lambda n: n.get("localName") == "iframe" and attr(n, "id") == OPAQUE_CASES[case])
    assert el, f"no frame for {case}"
    quad = b.call("DOM.getBoxModel", {"nodeId": el["nodeId"]}, s)["model"]["content"]
    doc, fs = el.get("contentDocument"), s
    if doc is None:  # out of process: its own target, whose id is the frame's id
        b.wait_target(lambda t: t["targetId"] == el["frameId"])
        fs = b.attach(el["frameId"])
        doc = b.call("DOM.getDocument", {"depth": -1, "pierce": True}, fs)["root"]
    field = _find(doc, lambda n: n.get("localName") in ("textarea", "input"))
    button = _find(doc, lambda n: n.get("localName") == "button")
    return {"session": fs, "field": field["nodeId"], "button": button["nodeId"],
            "offset": (quad[0], quad[1]) if fs != s else (0, 0)}


def _case_text(b: Browser, s: str, case: str) -> str:
    if case in OPAQUE_CASES:
        f = _opaque_frame(b, s, case)
        obj = b.call("DOM.resolveNode", {"nodeId": f["field"]}, f["session"])["object"]["objectId"]
        return b.call("Runtime.callFunctionOn", {"objectId": obj, "returnByValue": True,
                                                 "functionDeclaration": "function () { return this.value; }"},
                      f["session"])["result"]["value"]
    return b.evaluate(s, f"(() => {{ const f = ldpCases[{json.dumps(case)}].field(); "
                         "return f.isContentEditable ? f.innerText : f.value; })()")


def _type_case(b: Browser, s: str, case: str, text: str) -> None:
    if case in OPAQUE_CASES:
        f = _opaque_frame(b, s, case)
        b.call("DOM.focus", {"nodeId": f["field"]}, f["session"])
    else:
        b.evaluate(s, f"ldpCases[{json.dumps(case)}].field().focus(), true")
    b.call("Input.insertText", {"text": text}, s)
    assert _case_text(b, s, case) == text, "the harness could not type into the case's field"


def _click_case(b: Browser, s: str, case: str) -> None:
    if case in OPAQUE_CASES:
        f = _opaque_frame(b, s, case)
        quad = b.call("DOM.getBoxModel", {"nodeId": f["button"]}, f["session"])["model"]["content"]
        x, y = f["offset"][0] + sum(quad[0::2]) / 4, f["offset"][1] + sum(quad[1::2]) / 4
    else:
        x, y = b.evaluate(s, f"ldpCases[{json.dumps(case)}].point()")
    for kind in ("mousePressed", "mouseReleased"):
        b.call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}, s)


def _await_case(sites: list[Site], case: str, timeout: float = 15) -> list[dict]:
    """What the case sent to any of the sites: waits for the first, then a little for a second."""
    deadline = time.monotonic() + timeout
    while not any(x.received(case) for x in sites) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.3)  # a second request would be here by now
    return [got for x in sites for got in x.received(case)]


@pytest.mark.parametrize("case", GUARD_CASES)
def test_every_case_of_a_guarded_page_sends_only_sanitized_text(guarded, case):
    """Typed into the case's field and sent with a mouse click: the server receives the case's text
    sanitized, once, and no request anywhere carries the marker."""
    b, site, _, _ = guarded
    sites = [site, site.other]
    for x in sites:
        x.requests.clear()
    s = _open_cases(b, site)
    try:
        _type_case(b, s, case, CASE_TEXT)
        _click_case(b, s, case)
        got = _await_case(sites, case)
        for x in sites:
            x.assert_no_marker()
        assert len(got) == 1, f"{case}: the server received {len(got)} submissions"
        _sanitized(got[0]["message"], CASE_TEXT)
    finally:
        b.call("Target.closeTarget", {"targetId": b.call("Target.getTargetInfo", {}, s)["targetInfo"]["targetId"]})


def test_a_sanitized_text_the_form_refuses_is_not_sent(guarded):
    """A field whose pattern the sanitized text breaks (typed: letters; sanitized: w3 w7): the browser
    will not send the form, and the page says why; nothing reaches the server."""
    b, site, _, _ = guarded
    site.requests.clear()
    case = "pattern-refuses-sanitized"
    s = _open_cases(b, site)
    try:
        _type_case(b, s, case, "zqxsecret qvmarker")
        _click_case(b, s, case)
        text = b.wait_for(s, "document.getElementById('ldptext-blocked')?.textContent")
        assert "does not meet a rule of this form" in text and "nothing was sent" in text, text
        _sanitized(_case_text(b, s, case), "zqxsecret qvmarker")
        time.sleep(1)
        site.assert_no_marker()
        assert site.received(case) == []
    finally:
        b.call("Target.closeTarget", {"targetId": b.call("Target.getTargetInfo", {}, s)["targetInfo"]["targetId"]})


def _sanitize_tab(b: Browser, sw: str, ext_id: str, via: str):
    """The on-demand action for the active tab: as the keyboard shortcut asks the worker, or as the
    popup's button asks it (a message naming the tab). Neither names a frame."""
    tab = b.evaluate(sw, "chrome.tabs.query({active: true, lastFocusedWindow: true}).then(([t]) => t.id)")
    if via == "shortcut":
        return b.evaluate(sw, f"self.ldptextSanitizeFocused({tab})")
    tid = b.call("Target.createTarget", {"url": f"chrome-extension://{ext_id}/popup.html", "background": True})
    ps = b.attach(tid["targetId"])
    try:
        b.wait_for(ps, "typeof chrome === 'object' && !!chrome.runtime")
        return b.evaluate(ps, f"chrome.runtime.sendMessage({{type: 'sanitize-focused-tab', tabId: {tab}}})")
    finally:
        b.call("Target.closeTarget", {"targetId": tid["targetId"]})


@pytest.mark.parametrize("via", ["shortcut", "popup"])
@pytest.mark.parametrize("case", EDITOR_CASES)
def test_an_editor_sanitized_on_demand_sends_only_sanitized_text(guarded, case, via):
    """An editor that keeps its own copy of the text (or lives in a frame): the on-demand action, as
    the keyboard shortcut or the popup's button asks for it (for the tab, not a frame), replaces the
    text so that the editor's own copy is the sanitized text; what the page then sends carries no
    marker."""
    b, site, ext_id, sw = guarded
    site.requests.clear()
    s = _open_cases(b, site)
    try:
        _type_case(b, s, case, CASE_TEXT)
        reply = _sanitize_tab(b, sw, ext_id, via)
        assert reply and reply["ok"], reply
        _sanitized(_case_text(b, s, case), CASE_TEXT)
        _click_case(b, s, case)
        got = _await_case([site], case)
        site.assert_no_marker()
        assert len(got) == 1, f"{case}: the server received {len(got)} submissions"
        _sanitized(got[0]["message"], CASE_TEXT)
    finally:
        b.call("Target.closeTarget", {"targetId": b.call("Target.getTargetInfo", {}, s)["targetInfo"]["targetId"]})
