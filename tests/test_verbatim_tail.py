"""The verbatim tail a bundle states (the cap τ, the 90th and 99th percentiles, the counts at 0.5 and
0.9) is checked and reported the same way by every runtime: the Python report and ``bundle inspect``,
libldptext's ``ldp_bundle_info`` (and so the web wrapper's report and the JVM binding's
``BundleInfo``); a statement whose numbers contradict one another is refused by Python and C alike
(ParameterMismatchError / LDP_E_PARAMETER_MISMATCH); ``bundle inspect --exposed`` lists the most
exposed words with their exact probability, against an independent float64 evaluation."""
from __future__ import annotations

import json
import subprocess
import warnings

import numpy as np
import pytest
from conftest import build_lock, build_tiny_bundle, edited_bundle
from test_libldptext import OK, clib, dev_key  # noqa: F401 (fixtures)
from test_verbatim_cap import metric, reference_rates
from wasm_node import run_node_script

from ldptext import keys
from ldptext.errors import ParameterMismatchError
from ldptext.rng import SeededModeWarning
from ldptext.santext import Sanitizer

E_PARAMETER_MISMATCH = -100
TAIL = ("cap", "p90", "p99", "above_0_5", "above_0_9")


@pytest.fixture(scope="module")
def capped(tmp_path_factory):
    """A SanText+ bundle built with the cap, signed by the test run's developer key."""
    d = tmp_path_factory.mktemp("tail")
    path = build_tiny_bundle(d / "cap.ldpb", n=150, dim=6, seed=3, epsilon=3.0, mechanism="santext+", w=0.8,
                             verbatim_cap=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeededModeWarning)
        with Sanitizer.load(path, seed=0) as san:
            stated = dict(san.manifest["privacy"]["verbatim"])
            report = san.privacy_report(3)
    assert stated["cap"] == 0.5 and stated["p90"] is not None  # the fixture is what it is named
    return path, stated, report


def test_the_python_report_carries_the_stated_tail(capped):
    _, stated, report = capped
    assert [getattr(report, f"verbatim_{k}") for k in TAIL] == [stated[k] for k in TAIL]
    assert report.verbatim_max == stated["max"] <= 0.5
    text = report.summary()
    assert "capped at 0.5" in text and f"{stated['above_0_5']} at >= 0.5" in text


def test_the_c_library_states_the_same_tail(clib, dev_key, capped):  # noqa: F811
    path, stated, _ = capped
    rc, b = clib.open(path, [dev_key])
    assert rc == OK, clib.strerror(rc)
    try:
        info = clib.bundle_info(b)
    finally:
        clib.close(b)
    assert [info[f"verbatim_{k}"] for k in TAIL] == [stated[k] for k in TAIL]
    assert isinstance(info["verbatim_above_0_5"], int) and isinstance(info["verbatim_above_0_9"], int)


def _contradictions(stated: dict) -> list:
    """Edits of a consistent statement that make it contradict itself."""
    n = stated["inputs"]
    return [
        dict(cap=stated["max"] / 2),                          # a largest rate above its own cap
        dict(cap=1.5),
        dict(p90=stated["p99"] + 1e-3, p99=stated["p99"]),    # percentiles out of order
        dict(p99=min(1.0, stated["max"] + 1e-3)),             # the 99th percentile above the largest
        dict(above_0_5=n + 1, above_0_9=0),                   # more inputs above 0.5 than inputs
        dict(above_0_9=stated["above_0_5"] + 1),              # more above 0.9 than above 0.5
        dict(above_0_5=stated["above_0_5"] + 1),              # contradicts max < 0.5 (the cap)
        dict(p99=None),                                       # a partial tail
        dict(above_0_5=0.5),                                  # not a count
        dict(cap="0.5"),                                      # not a number
    ]


@pytest.mark.parametrize("case", range(10))
def test_a_contradictory_tail_is_refused_by_python_and_c(clib, dev_key, capped, tmp_path, case):  # noqa: F811
    """Re-signed by the trusted key: the signature vouches for the signer, not the numbers."""
    path, stated, _ = capped
    edit = _contradictions(stated)[case]
    bad = edited_bundle(path, tmp_path / "bad.ldpb", lambda m: m["privacy"]["verbatim"].update(edit),
                        sign_key=keys.developer_key())
    with pytest.raises(ParameterMismatchError):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SeededModeWarning)
            Sanitizer.load(bad, seed=0, backend="fallback")
    rc, _ = clib.open(bad, [dev_key])
    assert rc == E_PARAMETER_MISMATCH, clib.strerror(rc)


def test_inspect_lists_the_most_exposed_words_with_their_exact_probability(capped, capsys):
    from ldptext.bundle import open_unverified
    from ldptext.cli import main
    from ldptext.santext_tables import SanTextTables, stored_arrays_of
    path, _, _ = capped
    b, _ = open_unverified(path)
    t = SanTextTables(**stored_arrays_of(b))
    xs = np.flatnonzero(t.valid_input.astype(bool) & ~t.keep_row.astype(bool))
    ref = reference_rates(metric(t), xs, t.outputs.astype(np.int64), float(b.manifest["params"]["epsilon"]))
    vocab = json.loads(b.blob("vocab.json"))
    order = np.argsort(-ref, kind="stable")[:5]
    assert main(["bundle", "inspect", "--json", "--exposed", "5", str(path)]) == 0
    exposed = json.loads(capsys.readouterr().out)["exposed"]
    assert [e["word"] for e in exposed] == [vocab[xs[i]] for i in order]
    np.testing.assert_allclose([e["probability"] for e in exposed], ref[order], rtol=1e-9, atol=1e-15)
    assert main(["bundle", "inspect", "--exposed", "3", str(path)]) == 0
    out = capsys.readouterr().out
    assert "most exposed sensitive words" in out and vocab[xs[order[0]]] in out
    assert "verbatim cap" in out and "verbatim tail" in out


def test_the_web_wrapper_reports_the_tail(capped, dev_key, tmp_path):  # noqa: F811
    path, stated, report = capped
    r = run_node_script(f"""
const ldp = await api.LdpText.open(new Uint8Array(await readFile({json.dumps(str(path))})), [key]);
const r = ldp.sanitize('w1 w2 w3').report;
ldp.close();
process.stdout.write(JSON.stringify(r));
""", tmp_path / "tail.mjs", dev_key)
    assert [r[f"verbatim_{k}"] for k in TAIL] == [stated[k] for k in TAIL]
    assert (r["notion"], r["neighbouring"]) == (report.notion, report.neighbouring)


def test_the_jvm_binding_reports_the_tail(capped, dev_key, tmp_path):  # noqa: F811
    from test_jvm import ROOT as JROOT
    from test_jvm import _tool, compile_and_run
    jdk = {"javac": _tool("javac"), "java": _tool("java")}
    with build_lock():
        done = subprocess.run(["make", "-s", "-C", str(JROOT), "jvm"], capture_output=True, text=True,
                              timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    path, stated, report = capped
    key = ",".join(str(b if b < 128 else b - 256) for b in dev_key)
    source = f"""
import java.nio.file.Paths;
import org.ldptext.*;
public class Tail {{
    public static void main(String[] args) throws Exception {{
        try (LdpText l = LdpText.open(Paths.get(args[0]), new byte[] {{{key}}})) {{
            BundleInfo i = l.info();
            Report r = l.sanitize("w1 w2").report();
            System.out.println(i.verbatimCap() + " " + i.verbatimP90() + " " + i.verbatimP99() + " "
                               + i.verbatimAbove05() + " " + i.verbatimAbove09());
            System.out.println(r.notion() + "|" + i.notion() + "|" + r.neighbouring());
        }}
    }}
}}
"""
    done = compile_and_run(jdk, JROOT / "build" / "jvm", tmp_path, "Tail", source, [str(path)])
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    lines = done.stdout.split("\n")
    assert lines[0] == " ".join([repr(float(stated["cap"])), repr(stated["p90"]), repr(stated["p99"]),
                                 str(stated["above_0_5"]), str(stated["above_0_9"])])
    assert lines[1] == f"{report.notion}|{report.notion}|{report.neighbouring}"
