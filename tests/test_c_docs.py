"""The C the documentation shows works as written.

* Every fenced ```c block of README.md and docs/*.md compiles on its own (``-std=c99 -Wall -Wextra
  -pedantic -Werror``); a block with ``main`` is linked with libldptext and run on a tiny bundle
  with the publisher's ``.pub`` file, as its comment says.
* The link lines of docs/c-library.md (the ```sh block after the app.c block, the same three the
  install table of docs/install.md gives) run verbatim against an installed copy (``make -C native install
  PREFIX=...``, pkg-config finding it through PKG_CONFIG_PATH); ``readelf -d`` shows that only the
  shared line's program needs libldptext.so, and each program sanitizes.
"""
from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import build_lock, build_tiny_bundle

ROOT = Path(__file__).resolve().parents[1]
NATIVE = ROOT / "native"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
C_LIB_DOC = ROOT / "docs" / "c-library.md"
INSTALL_DOC = ROOT / "docs" / "install.md"
APP_MARKER = "<!-- app.c: tests/test_c_docs.py"
CFLAGS = ["-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror"]


def c_blocks() -> list[tuple[str, str]]:
    """(where, code) of every ```c block of the docs."""
    found = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for m in re.finditer(r"^```c\n(.*?)^```$", text, re.S | re.M):
            line = text[:m.start()].count("\n") + 1
            found.append((f"{doc.relative_to(ROOT)}:{line}", m.group(1)))
    return found


def app_and_link_lines() -> tuple[str, list[str]]:
    """docs/c-library.md's app.c and the cc lines of the ```sh block after it."""
    text = C_LIB_DOC.read_text(encoding="utf-8")
    rest = text[text.index(APP_MARKER):]
    app = re.search(r"^```c\n(.*?)^```$", rest, re.S | re.M).group(1)
    sh = re.search(r"^```sh\n(.*?)^```$", rest, re.S | re.M).group(1)
    return app, [line for line in sh.splitlines() if line.startswith("cc ")]


@pytest.fixture(scope="module")
def library():
    with build_lock():
        subprocess.run(["make", "-s", "-C", str(NATIVE), "lib"], check=True, capture_output=True)
    return NATIVE / "build" / "libldptext.a"


@pytest.fixture(scope="module")
def bundle_and_pub(ldptext_home, tmp_path_factory):
    from ldptext import keys
    d = tmp_path_factory.mktemp("cdocs")
    bundle = build_tiny_bundle(d / "tiny.ldpb", mechanism="santext")
    pub = d / "publisher.pub"
    pub.write_text(base64.b64encode(keys.public_bytes(keys.developer_key().public_key())).decode() + "\n")
    return bundle, pub


def run_app(exe: Path, bundle: Path, pub: Path, env=None) -> None:
    res = subprocess.run([str(exe), str(bundle), str(pub), "w1 w2 w3"], capture_output=True, text=True,
                         timeout=60, env=env)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 1 and len(lines[0].split()) == 3, res.stdout


def test_every_c_block_compiles_and_a_program_runs(library, bundle_and_pub, tmp_path):
    blocks = c_blocks()
    assert len(blocks) >= 1, blocks  # docs/c-library.md's app.c at least
    libs = subprocess.run(["pkg-config", "--libs", "libsodium", "libutf8proc"], capture_output=True,
                          text=True).stdout.split() or ["-lsodium", "-lutf8proc"]
    ran = 0
    for i, (where, code) in enumerate(blocks):
        src = tmp_path / f"block{i}.c"
        src.write_text(code)
        obj = tmp_path / f"block{i}.o"
        res = subprocess.run(["cc", *CFLAGS, f"-I{NATIVE / 'include'}", "-c", str(src), "-o", str(obj)],
                             capture_output=True, text=True)
        assert res.returncode == 0, f"{where} does not compile:\n{res.stderr}"
        if re.search(r"\bint main\(", code):
            exe = tmp_path / f"block{i}"
            subprocess.run(["cc", str(obj), str(library), *libs, "-lm", "-pthread", "-o", str(exe)], check=True)
            run_app(exe, *bundle_and_pub)
            ran += 1
    assert ran >= 1


def needed(exe: Path) -> list[str]:
    out = subprocess.run(["readelf", "-d", str(exe)], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def test_the_documented_link_lines_work_as_written(library, bundle_and_pub, tmp_path):
    if not shutil.which("pkg-config") or not shutil.which("readelf"):
        pytest.fail("pkg-config and readelf are part of the core build tools (scripts/system-deps.sh core)")
    app, lines = app_and_link_lines()
    assert len(lines) == 3, lines
    install = INSTALL_DOC.read_text(encoding="utf-8")
    for line in lines:  # the install table of docs/install.md gives the same commands
        assert f"`{line.split('#')[0].strip()}`" in install, line
    prefix = tmp_path / "prefix"
    with build_lock():
        subprocess.run(["make", "-s", "-C", str(NATIVE), "install", f"PREFIX={prefix}"], check=True,
                       capture_output=True)
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    for line in lines:
        work = tmp_path / f"w{lines.index(line)}"
        work.mkdir()
        (work / "app.c").write_text(app)
        res = subprocess.run(line, shell=True, cwd=work, env=env, capture_output=True, text=True)
        assert res.returncode == 0, f"{line}\n{res.stderr}"
        exe = work / "a.out"
        libldptext = [n for n in needed(exe) if n.startswith("libldptext")]
        if "ldptext-static" in line or "-static " in line:
            assert libldptext == [], f"{line}: the program still needs {libldptext}"
            run_app(exe, *bundle_and_pub)
        else:
            assert libldptext == ["libldptext.so.1"], line
            run_app(exe, *bundle_and_pub, env=dict(os.environ, LD_LIBRARY_PATH=str(prefix / "lib")))


def test_pkg_config_static_alone_still_needs_the_shared_library(library, tmp_path):
    """Why ldptext-static.pc exists: --static without -static picks libldptext.so (docs/c-library.md)."""
    app, _ = app_and_link_lines()
    prefix = tmp_path / "prefix"
    with build_lock():
        subprocess.run(["make", "-s", "-C", str(NATIVE), "install", f"PREFIX={prefix}"], check=True,
                       capture_output=True)
    (tmp_path / "app.c").write_text(app)
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    subprocess.run("cc app.c $(pkg-config --cflags --static --libs ldptext)", shell=True, cwd=tmp_path,
                   env=env, check=True)
    assert "libldptext.so.1" in needed(tmp_path / "a.out")
