"""The README's quick-start shell block reuses the bundle ``make demo`` cached instead of rebuilding
it (a GloVe-50k build takes minutes): run as written, minus ``make demo``, against a tiny cached
bundle, it finishes in seconds and sanitizes with exactly that bundle."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from conftest import build_tiny_bundle

ROOT = Path(__file__).resolve().parents[1]


def quick_start_shell_block() -> str:
    """The first ```bash block after the "## Quick start" heading of README.md."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Quick start"):]
    start = section.index("```bash\n") + len("```bash\n")
    return section[start:section.index("```", start)]


def test_quick_start_reuses_the_cached_demo_bundle(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("LDPTEXT_HOME", str(tmp_path / "ldptext-home"))  # its own developer key and store
    monkeypatch.delenv("LDPTEXT_DEV", raising=False)
    cached = home / ".cache" / "ldptext" / "demo-tiny.ldpb"
    cached.parent.mkdir(parents=True)
    build_tiny_bundle(cached, n=40, mechanism="santext+", epsilon=3.0)  # signed by that developer key
    work = tmp_path / "work"
    work.mkdir()
    (work / ".venv").symlink_to(ROOT / ".venv")
    block = quick_start_shell_block()
    lines = [line for line in block.replace("\\\n", " ").splitlines() if not line.startswith("make ")]
    env = dict(os.environ, HOME=str(home))
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(lines)], cwd=work, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (work / "glove-santext+.ldpb").read_bytes() == cached.read_bytes()
    report = json.loads(r.stdout.splitlines()[-1])["report"]
    assert report["mechanism"] == "santext+" and report["per_token_epsilon"] == 3.0
