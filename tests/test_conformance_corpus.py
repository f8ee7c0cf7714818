"""One corpus of crafted bundles, one verdict in every runtime.

Each bundle of the corpus is what a misused trusted key produces (re-signed, so every signature and
hash check passes) or a control: a relabelled ε or γ, a row whose law is not the mechanism's, a raised
tail, an understated verbatim median or maximum (SanText, TEM, CusText), a cap below the largest rate,
a misstated description, a near-identity bundle (SanText, TEM) opened without the opt-in, an untrusted
signer, honest bundles.
Each is opened and then asked to sanitize a document that needs the crafted row, through

* the Python SDK on the numpy fallback (where Python verifies alone) and on its default backend,
* libldptext (C, through ctypes),
* the web wrapper (wasm, in node),
* the JVM binding,

and must get the same verdict in each: the C library's code, equal in C, wasm and the JVM, and the
Python exception of the same class (``ParameterMismatchError`` for LDP_E_PARAMETER_MISMATCH,
``WeakPrivacyError`` for LDP_E_WEAK_PRIVACY, a ``SignatureError`` for a trust code), and the one the
corpus expects. A verdict may come at open or at the first document that needs the row (the load
checks a random sample of rows); nothing is released in either case.
"""
from __future__ import annotations

import json
import subprocess
import warnings

import numpy as np
import pytest
from conftest import build_lock, build_tiny_bundle, edited_bundle, random_word_embeddings
from test_libldptext import OK, clib, dev_key  # noqa: F401 (fixtures)
from wasm_node import run_node_script

from ldptext import keys, registry
from ldptext.errors import ParameterMismatchError, SignatureError, WeakPrivacyError
from ldptext.ldp_codes import GROUPS, LDP_E_PARAMETER_MISMATCH, LDP_E_WEAK_PRIVACY
from ldptext.library import available
from ldptext.rng import SeededModeWarning

MISMATCH, WEAK, TRUST, CLEAN = "mismatch", "weak", "trust", "ok"


def verdict_of_code(code: int) -> str:
    """The verdict class of a libldptext return code."""
    if code == OK:
        return CLEAN
    if code == LDP_E_PARAMETER_MISMATCH:
        return MISMATCH
    if code == LDP_E_WEAK_PRIVACY:
        return WEAK
    if GROUPS.get(code) == "signature and trust":
        return TRUST
    return f"code {code}"


def verdict_of_exception(e: BaseException | None) -> str:
    """The verdict class of what the Python SDK raised."""
    if e is None:
        return CLEAN
    if isinstance(e, ParameterMismatchError):
        return MISMATCH
    if isinstance(e, WeakPrivacyError):
        return WEAK
    if isinstance(e, SignatureError):
        return TRUST
    return type(e).__name__


# ---- the corpus ------------------------------------------------------------------------------------

def _victim(path) -> tuple[int, int, str]:
    """A sensitive input that is its own head output, not the largest-norm row: (row, head slot, word)."""
    from ldptext.santext import Sanitizer
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        with Sanitizer.load(path, seed=0, backend="fallback") as san:
            t = san.tables
            norms = t.emb_scale.astype(float) * np.sqrt(t.emb_sqnorm.astype(float))
            sens = np.flatnonzero(t.valid_input & ~t.keep_row.astype(bool))
            sens = sens[np.argsort(norms[sens])]
            x = int(sens[sens.size // 2])
            return x, int(np.flatnonzero(t.stored("head_ids")[x] == x)[0]), san.vocab[x]


def _top_word(path) -> str:
    """The sensitive word released unchanged most often (exactly, from the realised law)."""
    from ldptext import bundle as B
    mechanism = B.open_unverified(path)[0].mechanism
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        with registry.get(mechanism).runtime_class().load(path, seed=0, backend="fallback") as san:
            t = san.tables
            rows = np.flatnonzero(t.valid_input & ~t.keep_row.astype(bool))
            own = san.log_probabilities(rows)[np.arange(rows.size), rows]
            return san.vocab[int(rows[int(np.argmax(own))])]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """name -> (path, document, expected verdict)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from ldptext_precompute.custext.build import build_custext_bundle
    from ldptext_precompute.tem.build import build_tem_bundle

    d = tmp_path_factory.mktemp("corpus")
    trusted = keys.developer_key()
    santext = build_tiny_bundle(d / "santext+.ldpb", n=120, mechanism="santext+", epsilon=2.0, p=0.3, w=0.7)
    emb = random_word_embeddings(47, 5, 8)
    tem = build_tem_bundle(d / "tem.ldpb", embeddings="unused", loaded=emb, epsilon=3.0, gamma=2.4, head_size=6,
                           sign_key=trusted)
    custext = build_custext_bundle(d / "custext.ldpb", embeddings="unused", loaded=emb, epsilon=2.5, k=5,
                                   device="cpu", sign_key=trusted)
    weak = build_tiny_bundle(d / "weak.ldpb", n=80, epsilon=80.0, mechanism="santext+", p=0.3, w=0.7,
                             allow_weak_privacy=True)
    weak_tem = build_tem_bundle(d / "tem-weak.ldpb", embeddings="unused", loaded=emb, epsilon=30.0, gamma=1.0,
                                head_size=6, sign_key=trusted, allow_weak_privacy=True)
    x, slot, word = _victim(santext)
    doc = f"w1 {word} w2"

    def resigned(name, src, edit=None, arrays_edit=None, key=trusted):
        return edited_bundle(src, d / f"{name}.ldpb", edit or (lambda m: None), arrays_edit, sign_key=key)

    def identity_row(a):
        a["alias_threshold"][x, :] = 0
        a["alias_threshold"][x, slot] = 0xFFFFFFFF
        a["alias_index"][x, :] = slot
        a["accept_gamma"][x, :] = 0.0

    def tail_gamma(a):
        a["accept_gamma"][x, -1] += 3.0

    def tail_floor(a):
        a["tail_floor"][x] = a["tail_floor"][x] * 4.0 + 1.0

    def verbatim(**over):
        return lambda m: m["privacy"]["verbatim"].update(over)

    from ldptext import bundle as B
    stated = B.open_unverified(santext)[0].manifest["privacy"]["verbatim"]

    def understated_max(path):  # the largest rate stated as the median (the tail kept consistent)
        v = B.open_unverified(path)[0].manifest["privacy"]["verbatim"]
        return verbatim(max=v["median"], p99=v["median"], p90=v["median"], above_0_5=0, above_0_9=0)
    return {
        "honest santext+": (santext, doc, CLEAN),
        "honest tem": (tem, "w1 w2 w3", CLEAN),
        "honest custext": (custext, "w1 w2 w3", CLEAN),
        "custext eps relabelled 2.5 -> 1": (resigned("custext-eps", custext, lambda m: m["params"].update(
            epsilon=1.0)), "w1 w2", MISMATCH),
        "tem gamma relabelled": (resigned("tem-gamma", tem, lambda m: m["params"].update(gamma=1.2)), "w1 w2",
                                 MISMATCH),
        "identity row": (resigned("identity", santext, arrays_edit=identity_row), doc, MISMATCH),
        "tail gamma raised": (resigned("tail-gamma", santext, arrays_edit=tail_gamma), doc, MISMATCH),
        "tail floor raised": (resigned("tail-floor", santext, arrays_edit=tail_floor), doc, MISMATCH),
        "largest verbatim rate understated": (resigned("max-low", santext, verbatim(
            max=stated["median"], p99=stated["median"], p90=stated["median"], above_0_5=0, above_0_9=0)),
            f"w1 {_top_word(santext)}", MISMATCH),
        "cap below the largest rate": (resigned("cap", santext, verbatim(cap=stated["max"] / 2)), doc, MISMATCH),
        "near identity without opt-in": (weak, "w1 w2", WEAK),
        "median understated": (resigned("median", weak, verbatim(median=0.5)), "w1 w2", MISMATCH),
        "kept in the clear misstated": (resigned("kept", santext, lambda m: m["vocab"].update(non_sensitive=0)),
                                        doc, MISMATCH),
        "notion misstated": (resigned("notion", santext, lambda m: m["privacy"].update(notion="metric-LDP")),
                             doc, MISMATCH),
        "untrusted signer": (resigned("untrusted", santext, key=Ed25519PrivateKey.generate()), doc, TRUST),
        "tem near identity without opt-in": (weak_tem, "w1 w2", WEAK),
        "tem largest verbatim rate understated": (resigned("tem-max", tem, understated_max(tem)),
                                                  f"w1 {_top_word(tem)}", MISMATCH),
        "custext largest verbatim rate understated": (resigned("custext-max", custext, understated_max(custext)),
                                                      f"w1 {_top_word(custext)}", MISMATCH),
    }


# ---- each runtime's verdicts -------------------------------------------------------------------------

def _python_verdicts(corpus, backend: str) -> dict:
    out = {}
    for name, (path, doc, _) in corpus.items():
        from ldptext import bundle as B
        cls = registry.get(B.open_unverified(path)[0].mechanism).runtime_class()
        error = None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SeededModeWarning)
                with cls.load(path, seed=0, backend=backend) as san:
                    san.sanitize(doc)
        except Exception as e:  # the verdict is the exception's class
            error = e
        out[name] = verdict_of_exception(error)
    return out


def _c_codes(clib, dev_key, corpus) -> dict:  # noqa: F811
    out = {}
    for name, (path, doc, _) in corpus.items():
        rc, b = clib.open(path, [dev_key], allow_weak=False)
        if rc == OK:
            s = clib.sanitizer(b, seed=0)
            try:
                rc = clib.sanitize(s, doc)[0]
            finally:
                clib.free_sanitizer(s)
                clib.close(b)
        out[name] = rc
    return out


@pytest.fixture(scope="module")
def c_codes(clib, dev_key, corpus):  # noqa: F811
    return _c_codes(clib, dev_key, corpus)


def test_the_corpus_gets_its_verdict_from_the_c_library(corpus, c_codes):
    got = {name: verdict_of_code(code) for name, code in c_codes.items()}
    assert got == {name: want for name, (_, _, want) in corpus.items()}


@pytest.mark.parametrize("backend", ["fallback"] + (["auto"] if available() else []))
def test_the_python_sdk_gives_the_same_verdicts(corpus, c_codes, backend):
    assert _python_verdicts(corpus, backend) == {name: verdict_of_code(c) for name, c in c_codes.items()}


def test_the_web_wrapper_gives_the_same_codes(corpus, c_codes, dev_key, tmp_path):  # noqa: F811
    spec = tmp_path / "corpus.json"
    spec.write_text(json.dumps({name: [str(path), doc] for name, (path, doc, _) in corpus.items()}))
    out = run_node_script(f"""
const spec = JSON.parse(await readFile({json.dumps(str(spec))}, 'utf8'));
const out = {{}};
for (const [name, [file, doc]] of Object.entries(spec)) {{
  let code = 0;
  try {{
    const ldp = await api.LdpText.open(new Uint8Array(await readFile(file)), [key], {{ seed: 0 }});
    try {{ ldp.sanitize(doc); }} finally {{ ldp.close(); }}
  }} catch (e) {{
    if (typeof e.code !== 'number') throw e;
    code = e.code;
  }}
  out[name] = code;
}}
process.stdout.write(JSON.stringify(out));
""", tmp_path / "corpus.mjs", dev_key, timeout=300)
    assert out == c_codes


def test_the_jvm_binding_gives_the_same_codes(corpus, c_codes, dev_key, tmp_path):  # noqa: F811
    from test_jvm import ROOT as JROOT
    from test_jvm import _tool, compile_and_run
    jdk = {"javac": _tool("javac"), "java": _tool("java")}
    with build_lock():
        done = subprocess.run(["make", "-s", "-C", str(JROOT), "jvm"], capture_output=True, text=True,
                              timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    names = list(corpus)
    listing = tmp_path / "corpus.txt"  # name TAB path TAB document, one bundle per line
    listing.write_text("".join(f"{i}\t{corpus[n][0]}\t{corpus[n][1]}\n" for i, n in enumerate(names)))
    key = ",".join(str(b if b < 128 else b - 256) for b in dev_key)
    source = f"""
import java.nio.file.*;
import java.util.List;
import org.ldptext.*;
public class Corpus {{
    public static void main(String[] args) throws Exception {{
        byte[] key = new byte[] {{{key}}};
        List<String> lines = Files.readAllLines(Paths.get(args[0]));
        for (String line : lines) {{
            String[] f = line.split("\\t", 3);
            int code = 0;
            try (LdpText l = LdpText.openSeededForTests(Paths.get(f[1]), 0L, key)) {{
                l.sanitize(f[2]);
            }} catch (LdpTextException e) {{
                code = e.code();
            }}
            System.out.println(f[0] + " " + code);
        }}
    }}
}}
"""
    done = compile_and_run(jdk, JROOT / "build" / "jvm", tmp_path, "Corpus", source, [str(listing)], timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    got = {names[int(i)]: int(c) for i, c in (line.split() for line in done.stdout.strip().splitlines())}
    assert got == c_codes
