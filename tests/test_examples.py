"""The README's quick-start Python block and ``examples/quickstart.py`` run as written:
the block is taken from README.md as it is and run against a tiny generated bundle, so an edit that
breaks it fails here."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import build_tiny_bundle

ROOT = Path(__file__).resolve().parents[1]
README_BUNDLE = "glove-santext+.ldpb"  # the file name the README's commands build


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return build_tiny_bundle(tmp_path_factory.mktemp("examples") / "tiny.ldpb", n=40, mechanism="santext+")


def quick_start_python_block() -> str:
    """The first ```python block after the "## Quick start" heading of README.md."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("\n## Quick start")
    m = re.compile(r"^```python\n(.*?)^```", re.S | re.M).search(readme, start)
    assert m is not None, "no python block after '## Quick start'"
    assert readme.find("\n## ", start + 1) > m.start(), "the python block must be in the Quick start section"
    return m.group(1)


def run_python(args: list[str]) -> subprocess.CompletedProcess:
    # the test run's LDPTEXT_HOME and LDPTEXT_DEV=1 (conftest): the tiny bundle's developer key is trusted
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, env=dict(os.environ))


def test_readme_quick_start_block_runs_as_written(bundle):
    code = quick_start_python_block()
    assert code.count(README_BUNDLE) == 1
    code = code.replace(repr(README_BUNDLE).replace("'", '"'), repr(str(bundle)))
    # what the block's last comment promises: the with block closed the sanitizer
    code += ("\ntry:\n    san.sanitize('w1')\nexcept ldptext.errors.ClosedError:\n"
             "    print('closed after the with block')\n")
    r = run_python(["-c", code])
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout.splitlines()
    assert len(out) == 5, r.stdout
    assert "santext+" in out[1] and "UMLDP" in out[1]      # the report's summary
    assert out[2].startswith("[") and out[2].endswith("]")  # sanitized ids
    assert float(out[3]) == pytest.approx(1.0)              # a probability row sums to 1
    assert out[4] == "closed after the with block"
    assert "Emily" not in r.stdout and "asthma" not in r.stdout  # out of the tiny vocabulary: sanitized


def test_quickstart_script_runs_with_a_bundle_argument(bundle):
    r = run_python(["examples/quickstart.py", str(bundle)])
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout.splitlines()
    assert len(out) == 4, r.stdout
    assert "santext+" in out[1] and out[2].startswith("[")
    assert "Emily" not in r.stdout


@pytest.mark.slow
def test_quickstart_script_builds_a_demo_bundle_without_arguments():
    r = run_python(["examples/quickstart.py"])
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout.splitlines()
    assert len(out) == 4 and "santext+" in out[1] and "UMLDP eps=3 per token" in out[1]
