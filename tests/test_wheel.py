"""make wheel's promise (scripts/build-wheel.sh): the manylinux wheel carries libsodium and libutf8proc,
so on a machine without them and without a C compiler ``pip install ldptext-*.whl`` runs libldptext
(``Sanitizer.backend == "libldptext"``), not the numpy fallback.

Each test builds the wheel from the working tree with the same script as ``make wheel`` (sdist first,
the wheel from the sdist, then ``auditwheel repair``), installs it with its runtime dependencies and
runs a quick start, all inside a mount namespace (``unshare --mount``, root only) where every system
copy of libsodium and libutf8proc (both architectures), and every C compiler, is covered by /dev/null.
Controls in the same namespace show that the covering works: loading a covered library fails, no
compiler runs, and the plain (not repaired) wheel's extension fails to import there while it imports
outside. The x86-64 test installs into a new venv with pip; the aarch64 one (``make wheel-aarch64``)
installs with this pip's ``--platform`` into a folder and runs Debian's aarch64 Python under
qemu-aarch64. About 25 s each on two cores with pip's cache warm. Skipped where unshare, root (or for
aarch64 the cross toolchain and qemu) are missing, unless LDPTEXT_REQUIRE_WHEEL=1 (or, for aarch64,
LDPTEXT_REQUIRE_ARM64=1, which CI sets), which makes that a failure.
"""
from __future__ import annotations

import base64
import glob
import json
import os
import platform
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds wheels and an sdist in fresh virtual environments

ROOT = Path(__file__).resolve().parents[1]
LIBRARIES = ("libsodium.so", "libutf8proc.so")
COMPILERS = ("cc", "gcc", "c99", "clang", "tcc", "x86_64-linux-gnu-gcc", "aarch64-linux-gnu-gcc")
TEXT = "w1 w2 w3 w4 w5 w6 w7 w8"
PYVER = f"{sys.version_info[0]}.{sys.version_info[1]}"
# Debian's aarch64 Python and what its standard library's extension modules link (unpacked, not installed)
ARM64_RUNTIME_DEBS = [f"python{PYVER}-minimal:arm64", f"libpython{PYVER}-minimal:arm64",
                      f"libpython{PYVER}-stdlib:arm64", "libffi8:arm64", "libssl3:arm64", "zlib1g:arm64",
                      "libexpat1:arm64", "libbz2-1.0:arm64", "liblzma5:arm64", "libstdc++6:arm64",
                      "libgcc-s1:arm64"]

# the quick start, run with the installed wheel: prints one JSON line, with the files of libsodium and
# libutf8proc that the process mapped (what the dynamic loader really loaded)
QUICKSTART = r"""
import json, sys
import ldptext, ldptext._native as native

bundle, pub = sys.argv[1], sys.argv[2]
with ldptext.Sanitizer.load(bundle, trusted_keys=[pub]) as san:
    result = san.sanitize(sys.argv[3])
    ids = san.tokenize(sys.argv[3])
    out = {"backend": san.backend, "text": result.text, "vocab": len(san.vocab),
           "sampled": [int(i) for i in san.sample_ids(ids)]}
out["ldptext"] = ldptext.__file__
out["native"] = native.__file__
with open("/proc/self/maps") as maps:
    out["mapped"] = sorted({line.split()[-1] for line in maps if "libsodium" in line or "libutf8proc" in line})
print(json.dumps(out))
"""

# seeded outputs of every mechanism libldptext runs, for the cross-platform identity check: the same
# seed must give the same text and ids on every architecture (the release is then the same law)
IDENTITY = r"""
import json, sys, warnings
import ldptext
from ldptext.custext import CusTextSanitizer
from ldptext.tem import TEMSanitizer

warnings.simplefilter("ignore")  # seeded mode warns
pub, text, out = sys.argv[1], sys.argv[2], {}
for kind, cls, path in (("santext+", ldptext.Sanitizer, sys.argv[3]), ("tem", TEMSanitizer, sys.argv[4]),
                        ("custext+", CusTextSanitizer, sys.argv[5])):
    with cls.load(path, trusted_keys=[pub], seed=11) as san:
        out[kind] = {"backend": san.backend, "texts": [r.text for r in san.sanitize_batch([text, text])],
                     "ids": [int(i) for i in san.sample_ids(san.tokenize(text * 3))]}
print(json.dumps(out))
"""


def identity_inputs(tmp_path: Path, santext_bundle: Path) -> list:
    """IDENTITY's script and its arguments after the public key: the text and three bundles."""
    from conftest import random_word_embeddings
    from ldptext_precompute.custext.build import build_custext_bundle
    from ldptext_precompute.tem.build import build_tem_bundle

    emb = random_word_embeddings(47, 5, 8)
    stop = tmp_path / "stop.txt"
    stop.write_text("w0\nw1\nw2\n")
    tem = build_tem_bundle(tmp_path / "tem.ldpb", embeddings="unused", loaded=emb, epsilon=3.0, gamma=2.4,
                           head_size=6)
    cus = build_custext_bundle(tmp_path / "cus.ldpb", embeddings="unused", loaded=emb, epsilon=1.5, k=4,
                               mechanism="custext+", non_sensitive=str(stop), similarity="cosine", device="cpu")
    (tmp_path / "identity.py").write_text(IDENTITY)
    return [TEXT, santext_bundle, tem, cus]


# inside the namespace: cover each file named in HIDE with /dev/null, then run the command given
HIDE_AND_RUN = r"""
set -eu
for f in $HIDE; do mount --bind /dev/null "$f"; done
exec "$@"
"""


def _require(reason: str, *variables: str):
    for var in ("LDPTEXT_REQUIRE_WHEEL",) + variables:
        if os.environ.get(var):
            pytest.fail(f"{var}=1 but {reason}")
    pytest.skip(reason)


def system_library_files() -> list[str]:
    """Every file the dynamic loader could take for libsodium or libutf8proc, of any architecture: the
    entries of ldconfig's cache and of the usual library folders, resolved through their symbolic links."""
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
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kwargs)


def tail(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout[-3000:] + proc.stderr[-3000:]


class Covered:
    """Runs commands in a mount namespace where the system libraries and the compilers are /dev/null,
    in an environment of its own: no PYTHONPATH or LD_LIBRARY_PATH, an empty LDPTEXT_HOME (a bundle is
    trusted only through the key passed to the quick start), no LDPTEXT_DEV."""

    def __init__(self, tmp_path: Path):
        if os.geteuid() != 0:
            _require("covering the system libraries needs root (mount --bind in a mount namespace)")
        if not shutil.which("unshare") or not shutil.which("mount"):
            _require("unshare or mount missing (Debian: util-linux, mount)")
        probe = run(["unshare", "--mount", "--propagation", "private", "true"])
        if probe.returncode != 0:
            _require(f"unshare --mount is refused here: {probe.stderr.strip()}")
        self.tmp = tmp_path
        self.libraries, self.compilers = system_library_files(), compiler_files()
        assert self.libraries, "no system libsodium / libutf8proc found: nothing would show the wheel carries them"
        home = tmp_path / "home"
        home.mkdir()
        (tmp_path / "hide_and_run.sh").write_text(HIDE_AND_RUN)
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LDPTEXT_HOME": str(home),
                    "LANG": "C.UTF-8", "HIDE": " ".join(self.libraries + self.compilers),
                    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                    # pip's own cache (reruns install the dependencies without downloading them)
                    "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip")}
        for key in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CERT", "PIP_CONFIG_FILE",
                    "PIP_DEFAULT_TIMEOUT", "SSL_CERT_FILE", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"):
            if key in os.environ:
                self.env[key] = os.environ[key]

    def inside(self, *cmd, timeout=300, **env) -> subprocess.CompletedProcess:
        return run(["unshare", "--mount", "--propagation", "private", "sh", self.tmp / "hide_and_run.sh", *cmd],
                   env={**self.env, **env}, cwd=self.tmp, timeout=timeout)

    def outside(self, *cmd, timeout=300, **env) -> subprocess.CompletedProcess:
        return run(cmd, env={**self.env, **env}, cwd=self.tmp, timeout=timeout)

    def check_controls(self, python: list):
        """In the namespace the system libraries do not load (``python``: a command running Python)
        and no compiler runs."""
        for lib in self.libraries:
            if not _same_machine(lib, python):  # it would fail to load anyway: no control
                continue
            control = self.inside(*python, "-c", "import ctypes, sys; ctypes.CDLL(sys.argv[1])", lib)
            assert control.returncode != 0 and "OSError" in control.stderr, (lib, tail(control))
        for compiler in self.compilers:
            control = self.inside(compiler, "--version")
            assert control.returncode != 0, (compiler, control.stdout)


def _same_machine(lib: str, python: list) -> bool:
    """Whether the shared library ``lib`` is for the architecture ``python`` runs (ELF e_machine)."""
    with open(lib, "rb") as f:
        machine = int.from_bytes(f.read(20)[18:20], "little")
    return machine == (183 if any("aarch64" in str(p) for p in python) else 62)  # EM_AARCH64, EM_X86_64


def build_wheel(tmp_path: Path, what: str) -> tuple[Path, Path]:
    """The repaired and the plain wheel, exactly as make wheel / make wheel-aarch64 build them."""
    dist, work = tmp_path / "dist", tmp_path / "work"
    built = run(["bash", ROOT / "scripts/build-wheel.sh", what, dist, work],
                env={**os.environ, "PY": sys.executable}, timeout=600)
    assert built.returncode == 0, tail(built)
    wheels, raws = sorted(dist.glob("ldptext-*-manylinux*.whl")), sorted((work / "raw").glob("ldptext-*-linux_*.whl"))
    assert len(wheels) == 1 and len(raws) == 1, (wheels, raws, built.stdout[-2000:])
    members = zipfile.ZipFile(wheels[0]).namelist()
    for name in ("libsodium", "libutf8proc"):
        assert any(m.startswith("ldptext.libs/" + name) for m in members), (name, members)
    return wheels[0], raws[0]


def quickstart_inputs(tmp_path: Path) -> tuple[Path, str]:
    """A tiny signed SanText+ bundle and its signer's public key (base64), and quickstart.py."""
    from cryptography.hazmat.primitives import serialization
    from ldptext.keys import developer_public_key

    from conftest import build_tiny_bundle

    bundle = build_tiny_bundle(tmp_path / "tiny.ldpb", mechanism="santext+")
    pub = base64.b64encode(developer_public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw)).decode()
    (tmp_path / "quickstart.py").write_text(QUICKSTART)
    return bundle, pub


def check_quickstart(ran: subprocess.CompletedProcess, site: Path) -> dict:
    """The quick start ran libldptext from the wheel installed under ``site``, and the process loaded
    libsodium and libutf8proc from the wheel's ldptext.libs/, nothing else."""
    assert ran.returncode == 0, tail(ran)
    out = json.loads(ran.stdout.strip().splitlines()[-1])
    assert Path(out["ldptext"]).resolve().is_relative_to(site.resolve()), out["ldptext"]  # not the checkout's
    assert out["backend"] == "libldptext", out
    words = out["text"].split()
    assert len(words) == len(TEXT.split()) and all(w.startswith("w") for w in words), out["text"]
    assert out["sampled"] and all(0 <= i < out["vocab"] for i in out["sampled"]), out
    libs_dir = (Path(out["ldptext"]).parents[1] / "ldptext.libs").resolve()  # beside the installed package
    for name in ("libsodium", "libutf8proc"):
        mapped = [m for m in out["mapped"] if name in Path(m).name]
        assert mapped and all(Path(m).resolve().parent == libs_dir for m in mapped), (name, out["mapped"])
    return out


def check_plain_wheel(covered: Covered, raw: Path, python: list, **env):
    """The plain wheel's extension links the system libraries: it imports outside the namespace, and
    fails inside it, where they are covered (so the covering is what the repaired wheel survived)."""
    plain = covered.tmp / "plain"
    zipfile.ZipFile(raw).extractall(plain)
    code = ["-c", "import sys; sys.path.insert(0, sys.argv[1]); import ldptext._native as m; "
            "assert m.__file__.startswith(sys.argv[1]), m.__file__", plain]
    outside = covered.outside(*python, *code, **env)
    assert outside.returncode == 0, tail(outside)
    inside = covered.inside(*python, *code, **env)
    assert inside.returncode != 0, "the plain wheel's extension imported with the system libraries covered"
    assert "libsodium" in inside.stderr or "libutf8proc" in inside.stderr, tail(inside)


def test_manylinux_wheel_runs_libldptext_without_system_libraries(tmp_path):
    if not sys.platform.startswith("linux"):
        _require("manylinux wheels are built on Linux")
    covered = Covered(tmp_path)
    wheel, raw = build_wheel(tmp_path, "wheel")
    bundle, pub = quickstart_inputs(tmp_path)
    covered.check_controls([sys.executable, "-I"])

    # pip install of the wheel in the namespace: a machine without the libraries and without a compiler
    venv = tmp_path / "venv"
    vpy = [venv / "bin" / "python", "-I"]  # -I: no PYTHONPATH, no user site, not the checkout
    made = covered.outside(sys.executable, "-m", "venv", venv, timeout=120)
    assert made.returncode == 0, tail(made)
    installed = covered.inside(*vpy, "-m", "pip", "install", "-q", "--only-binary", ":all:", wheel, timeout=600)
    assert installed.returncode == 0, tail(installed)

    ran = covered.inside(*vpy, tmp_path / "quickstart.py", bundle, pub, TEXT)
    out = check_quickstart(ran, venv)
    # and ldd, in the namespace, resolves both libraries to the wheel's folder (auditwheel's RPATH)
    ldd = covered.inside("ldd", out["native"])
    assert ldd.returncode == 0 and "not found" not in ldd.stdout, tail(ldd)
    libs_dir = (Path(out["native"]).parents[1] / "ldptext.libs").resolve()
    for name in ("libsodium", "libutf8proc"):
        targets = [line.split("=>", 1)[1].split(" (")[0].strip() for line in ldd.stdout.splitlines()
                   if "=>" in line and line.strip().startswith(name)]
        assert len(targets) == 1 and Path(targets[0]).resolve().parent == libs_dir, (name, ldd.stdout)

    check_plain_wheel(covered, raw, vpy)


def test_aarch64_wheel_runs_libldptext_under_qemu(tmp_path):
    if not sys.platform.startswith("linux") or platform.machine() != "x86_64":
        _require("make wheel-aarch64 cross-compiles on an x86-64 Linux host", "LDPTEXT_REQUIRE_ARM64")
    missing = [t for t in ("aarch64-linux-gnu-gcc", "qemu-aarch64", "apt-get", "dpkg-deb") if not shutil.which(t)]
    if missing or not glob.glob("/usr/lib/aarch64-linux-gnu/libsodium.so*") \
            or not glob.glob("/usr/lib/aarch64-linux-gnu/libutf8proc.so*"):
        _require(f"the aarch64 toolchain or libraries are missing ({', '.join(missing) or 'arm64 libsodium'}; "
                 "scripts/system-deps.sh arm64)", "LDPTEXT_REQUIRE_ARM64")
    if run(["apt-cache", "show", f"libpython{PYVER}-dev:arm64"]).returncode != 0:
        _require(f"apt has no libpython{PYVER}-dev:arm64 (the wheel is for this Python, {PYVER})",
                 "LDPTEXT_REQUIRE_ARM64")
    covered = Covered(tmp_path)
    wheel, raw = build_wheel(tmp_path, "wheel-aarch64")
    assert wheel.name.endswith("_aarch64.whl"), wheel.name
    bundle, pub = quickstart_inputs(tmp_path)

    # Debian's aarch64 Python, run by qemu-aarch64 with the unpacked packages as its root (-L)
    sysroot = tmp_path / "sysroot"
    (sysroot / "debs").mkdir(parents=True)
    got = run(["apt-get", "download", "-q", *ARM64_RUNTIME_DEBS], cwd=sysroot / "debs", timeout=300)
    assert got.returncode == 0, tail(got)
    for deb in (sysroot / "debs").glob("*.deb"):
        unpacked = run(["dpkg-deb", "-x", deb, sysroot])
        assert unpacked.returncode == 0, tail(unpacked)
    apy = ["qemu-aarch64", "-L", sysroot, sysroot / "usr/bin" / f"python{PYVER}", "-s", "-P"]
    covered.check_controls(apy)

    # the wheel and its dependencies for aarch64, by this machine's pip (pip itself does not run here)
    site = tmp_path / "site"
    plats = [a for p in ("manylinux_2_34", "manylinux_2_28", "manylinux_2_27", "manylinux2014")
             for a in ("--platform", f"{p}_aarch64")]
    installed = covered.inside(sys.executable, "-m", "pip", "install", "-q", "--target", site, *plats,
                               "--implementation", "cp", "--python-version", PYVER, "--only-binary", ":all:",
                               wheel, timeout=600)
    assert installed.returncode == 0, tail(installed)

    ran = covered.inside(*apy, tmp_path / "quickstart.py", bundle, pub, TEXT, PYTHONPATH=str(site))
    out = check_quickstart(ran, site)
    assert out["native"].endswith("-aarch64-linux-gnu.so"), out["native"]

    # cross-platform identity: seeded SanText+, TEM and CusText+ releases on aarch64 are this
    # machine's, text for text and id for id
    args = identity_inputs(tmp_path, bundle)
    here = run([sys.executable, tmp_path / "identity.py", pub, *args])
    assert here.returncode == 0, tail(here)
    there = covered.inside(*apy, tmp_path / "identity.py", pub, *args, PYTHONPATH=str(site))
    assert there.returncode == 0, tail(there)
    expected, got = json.loads(here.stdout.splitlines()[-1]), json.loads(there.stdout.splitlines()[-1])
    assert all(r["backend"] == "libldptext" for r in got.values()), got
    assert got == expected

    check_plain_wheel(covered, raw, apy, PYTHONPATH=str(site))
