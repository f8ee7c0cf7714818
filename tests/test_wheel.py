"""make wheel's promise (scripts/build-wheel.sh): the manylinux wheel carries libsodium and libutf8proc,
so on a machine without them and without a C compiler ``pip install ldptext-*.whl`` runs libldptext
(``Sanitizer.backend == "libldptext"``), not the numpy fallback.

The test builds the wheel from the working tree with the same script as ``make wheel`` (sdist first,
the wheel from the sdist, then ``auditwheel repair``), installs it with its runtime dependencies in a
new venv and runs a quick start there, all inside a mount namespace (``unshare --mount``, root only)
where every system copy of libsodium and libutf8proc, and every C compiler, is covered by /dev/null.
Controls in the same namespace show that the covering works: loading a covered library fails, the
compiler does not run, and the plain (not repaired) wheel's extension fails to import there while it
imports outside. About 25 s on two cores with pip's cache warm. Skipped where unshare or root is
missing, unless LDPTEXT_REQUIRE_WHEEL=1 (CI), which makes that a failure.
"""
from __future__ import annotations

import base64
import glob
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIBRARIES = ("libsodium.so", "libutf8proc.so")
COMPILERS = ("cc", "gcc", "c99", "clang", "x86_64-linux-gnu-gcc", "tcc")
TEXT = "w1 w2 w3 w4 w5 w6 w7 w8"

# runs with the venv's python -I (no PYTHONPATH, no user site, not the checkout): prints one JSON line
QUICKSTART = r"""
import json, subprocess, sys
import ldptext, ldptext._native as native

bundle, pub = sys.argv[1], sys.argv[2]
with ldptext.Sanitizer.load(bundle, trusted_keys=[pub]) as san:
    result = san.sanitize(sys.argv[3])
    ids = san.tokenize(sys.argv[3])
    out = {"backend": san.backend, "text": result.text, "vocab": len(san.vocab),
           "sampled": [int(i) for i in san.sample_ids(ids)]}
out["ldptext"] = ldptext.__file__
out["native"] = native.__file__
out["ldd"] = subprocess.run(["ldd", native.__file__], capture_output=True, text=True, check=True).stdout
print(json.dumps(out))
"""

# inside the namespace: cover each file named in HIDE with /dev/null, then run the command given
HIDE_AND_RUN = r"""
set -eu
for f in $HIDE; do mount --bind /dev/null "$f"; done
exec "$@"
"""


def _require(reason: str):
    if os.environ.get("LDPTEXT_REQUIRE_WHEEL"):
        pytest.fail(f"LDPTEXT_REQUIRE_WHEEL=1 but {reason}")
    pytest.skip(reason)


def system_library_files() -> list[str]:
    """Every file the dynamic loader could take for libsodium or libutf8proc: the entries of
    ldconfig's cache and of the usual library folders, resolved through their symbolic links."""
    found = set()
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    cache = subprocess.run([ldconfig, "-p"], capture_output=True, text=True).stdout if os.path.exists(ldconfig) else ""
    for line in cache.splitlines():
        if "=>" in line and any(name in line for name in LIBRARIES):
            found.add(line.split("=>")[-1].strip())
    for folder in ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib"):
        for name in LIBRARIES:
            found.update(glob.glob(f"{folder}/{name}*") + glob.glob(f"{folder}/*/{name}*"))
    return sorted({os.path.realpath(f) for f in found if os.path.exists(f)})


def compiler_files() -> list[str]:
    return sorted({os.path.realpath(p) for c in COMPILERS if (p := shutil.which(c))})


def run(cmd, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kwargs)


def test_manylinux_wheel_runs_libldptext_without_system_libraries(tmp_path):
    if not sys.platform.startswith("linux"):
        _require("manylinux wheels are built on Linux")
    if os.geteuid() != 0:
        _require("covering the system libraries needs root (mount --bind in a mount namespace)")
    if not shutil.which("unshare") or not shutil.which("mount"):
        _require("unshare or mount missing (Debian: util-linux, mount)")
    probe = run(["unshare", "--mount", "--propagation", "private", "true"])
    if probe.returncode != 0:
        _require(f"unshare --mount is refused here: {probe.stderr.strip()}")

    from ldptext.keys import developer_public_key
    from cryptography.hazmat.primitives import serialization

    from conftest import build_tiny_bundle

    # the wheel, exactly as make wheel builds it
    dist, work = tmp_path / "dist", tmp_path / "work"
    built = run(["bash", str(ROOT / "scripts/build-wheel.sh"), "wheel", str(dist), str(work)],
                env={**os.environ, "PY": sys.executable}, timeout=600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    wheels, raws = sorted(dist.glob("ldptext-*-manylinux*.whl")), sorted((work / "raw").glob("ldptext-*-linux_*.whl"))
    assert len(wheels) == 1 and len(raws) == 1, (wheels, raws, built.stdout[-2000:])
    wheel, raw = wheels[0], raws[0]
    members = zipfile.ZipFile(wheel).namelist()
    for name in ("libsodium", "libutf8proc"):
        assert any(m.startswith("ldptext.libs/" + name) for m in members), (name, members)

    bundle = build_tiny_bundle(tmp_path / "tiny.ldpb", mechanism="santext+")
    pub = base64.b64encode(developer_public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw)).decode()
    (tmp_path / "quickstart.py").write_text(QUICKSTART)
    (tmp_path / "hide_and_run.sh").write_text(HIDE_AND_RUN)

    hidden_libraries, compilers = system_library_files(), compiler_files()
    assert hidden_libraries, "no system libsodium / libutf8proc found: nothing would prove the wheel carries them"
    venv = tmp_path / "venv"
    vpy = str(venv / "bin" / "python")
    # an environment of its own: no PYTHONPATH or LD_LIBRARY_PATH, an empty LDPTEXT_HOME (the bundle is
    # trusted only through the key passed to quickstart.py), no LDPTEXT_DEV
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LDPTEXT_HOME": str(home),
           "LANG": "C.UTF-8", "HIDE": " ".join(hidden_libraries + compilers),
           "PIP_DISABLE_PIP_VERSION_CHECK": "1",
           # pip's own cache (reruns install the dependencies without downloading them)
           "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip")}
    for key in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CERT", "PIP_CONFIG_FILE",
                "PIP_DEFAULT_TIMEOUT", "SSL_CERT_FILE", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"):
        if key in os.environ:
            env[key] = os.environ[key]

    def in_namespace(*cmd, timeout=300):
        return run(["unshare", "--mount", "--propagation", "private", "sh", str(tmp_path / "hide_and_run.sh"),
                    *map(str, cmd)], env=env, cwd=tmp_path, timeout=timeout)

    # controls: in the namespace the system libraries do not load and no compiler runs
    for lib in hidden_libraries:
        control = in_namespace(sys.executable, "-I", "-c", "import ctypes, sys; ctypes.CDLL(sys.argv[1])", lib)
        assert control.returncode != 0 and "OSError" in control.stderr, (lib, control.stderr)
    for compiler in compilers:
        control = in_namespace(compiler, "--version")
        assert control.returncode != 0, (compiler, control.stdout)

    # pip install of the wheel in the namespace: a machine without the libraries and without a compiler
    made = run([sys.executable, "-m", "venv", str(venv)], env=env, timeout=120)
    assert made.returncode == 0, made.stderr
    installed = in_namespace(vpy, "-m", "pip", "install", "-q", "--only-binary", ":all:", wheel, timeout=600)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]

    ran = in_namespace(vpy, "-I", tmp_path / "quickstart.py", bundle, pub, TEXT)
    assert ran.returncode == 0, ran.stderr[-3000:]
    out = json.loads(ran.stdout.strip().splitlines()[-1])
    site = Path(out["ldptext"]).resolve().parents[1]
    assert site.is_relative_to(venv.resolve()), out["ldptext"]  # the wheel's copy, not the checkout's
    assert out["backend"] == "libldptext", out
    words = out["text"].split()
    assert len(words) == len(TEXT.split()) and all(w.startswith("w") for w in words), out["text"]
    assert out["sampled"] and all(0 <= i < out["vocab"] for i in out["sampled"]), out
    # the extension resolves both libraries from the wheel's own folder (auditwheel's RPATH)
    libs_dir = site / "ldptext.libs"
    resolved = {}
    for line in out["ldd"].splitlines():
        if "=>" in line:
            name, target = (part.strip() for part in line.split("=>", 1))
            resolved[name] = target.split(" (")[0].strip()
    assert "not found" not in out["ldd"], out["ldd"]
    for name in ("libsodium", "libutf8proc"):
        (target,) = [t for n, t in resolved.items() if n.startswith(name)] or [None]
        assert target and Path(target).resolve().parent == libs_dir.resolve(), (name, out["ldd"])

    # the plain wheel's extension links the system libraries: it imports outside the namespace,
    # and fails inside it, where they are covered
    plain = tmp_path / "plain"
    zipfile.ZipFile(raw).extractall(plain)
    import_plain = ["-I", "-c", "import sys; sys.path.insert(0, sys.argv[1]); import ldptext._native as m; "
                    "assert m.__file__.startswith(sys.argv[1]), m.__file__", plain]
    outside = run([vpy, *map(str, import_plain)], env=env, timeout=120)
    assert outside.returncode == 0, outside.stderr[-2000:]
    inside = in_namespace(vpy, *import_plain, timeout=120)
    assert inside.returncode != 0, "the plain wheel's extension imported with the system libraries covered"
    assert "libsodium" in inside.stderr or "libutf8proc" in inside.stderr, inside.stderr[-2000:]
