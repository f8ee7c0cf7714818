#!/usr/bin/env bash
# The Debian packages ldptext's builds need, in one list: installed only when missing, with one line
# saying what is being installed. `make setup` (so make demo / make test) runs the `core` group;
# .ci/run runs all three.
#
#   scripts/system-deps.sh core          the C library and the Python extension: a C compiler,
#                                        pkg-config, libsodium and libutf8proc with their headers
#   scripts/system-deps.sh arm64         make test-arm64: the aarch64 cross toolchain, qemu-user and
#                                        the arm64 builds of the two libraries (multiarch)
#   scripts/system-deps.sh wasm          make wasm (and make extension): emscripten, and the libsodium
#                                        and utf8proc sources the wasm build compiles (deb-src)
#   scripts/system-deps.sh npm           make npm: the wasm group, node and npm
#   scripts/system-deps.sh web           the tests of all three (make test): both groups, headless
#                                        Chromium and the TypeScript compiler
#   scripts/system-deps.sh jvm           make jvm: OpenJDK 17 (javac, jar, the JNI headers); Maven with
#                                        Debian's own copies of the plugins a compile needs
#                                        (/usr/share/maven-repo: tests/test_jvm_jar.py builds a Maven
#                                        project against the jar offline; junit5 for the BOM their POMs
#                                        import). `make jvm` also runs arm64 (the aarch64 library)
#   scripts/system-deps.sh --check core  exit 1, listing what is missing, instead of installing
#
# Not Debian: install the same libraries with your package manager (Homebrew: libsodium utf8proc
# pkg-config) and set LDPTEXT_SKIP_SYSTEM_DEPS=1; the builds find them through pkg-config.
set -euo pipefail

check_only=0
if [ "${1:-}" = "--check" ]; then check_only=1; shift; fi
[ "$#" -gt 0 ] || { echo "usage: $0 [--check] core|arm64|wasm|npm|web|jvm ..." >&2; exit 2; }

if [ -n "${LDPTEXT_SKIP_SYSTEM_DEPS:-}" ]; then exit 0; fi
if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "ldptext: not a Debian-based system: install libsodium, utf8proc and pkg-config yourself" \
       "(see README, Install), then set LDPTEXT_SKIP_SYSTEM_DEPS=1" >&2
  [ "$check_only" -eq 1 ] && exit 1
  exit 0
fi

packages_of() {
  case "$1" in
    core)  echo "gcc libc6-dev make pkg-config libsodium-dev libutf8proc-dev" ;;
    arm64) echo "gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user libsodium-dev:arm64 libutf8proc-dev:arm64" ;;
    wasm)  echo "emscripten dpkg-dev" ;;
    npm)   echo "emscripten dpkg-dev nodejs" ;;
    web)   echo "emscripten chromium dpkg-dev nodejs node-typescript" ;;
    jvm)   echo "openjdk-17-jdk-headless maven libmaven-resources-plugin-java libmaven-compiler-plugin-java junit5" ;;
    *) echo "unknown group '$1' (core, arm64, wasm, npm, web, jvm)" >&2; exit 2 ;;
  esac
}

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
updated=0
apt_update() { if [ "$updated" -eq 0 ]; then $sudo apt-get update -qq; updated=1; fi; }

missing=()
need_arm64_arch=0
need_deb_src=0
wasm_sources="$(cd "$(dirname "$0")/.." && pwd)/native/build/wasm/src/.fetched"
for group in "$@"; do
  pkgs=$(packages_of "$group") || exit 2
  for pkg in $pkgs; do installed "$pkg" || missing+=("$pkg"); done
  if [ "$group" = arm64 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
    need_arm64_arch=1
  fi
  # deb-src: only until native/wasm/Makefile has fetched the sources once
  case "$group" in wasm|npm|web)
    if [ ! -f "$wasm_sources" ] && ! apt-cache showsrc libsodium 2>/dev/null | grep -q '^Package: libsodium'; then
      need_deb_src=1
    fi
  esac
  # npm: Debian's own package, unless a node that brings its own npm (NodeSource) is installed
  case "$group" in npm|web)
    if ! command -v npm >/dev/null 2>&1 && ! installed npm; then missing+=(npm); fi
  esac
done

if [ "$check_only" -eq 1 ]; then
  if [ "${#missing[@]}" -gt 0 ] || [ "$need_deb_src" -eq 1 ]; then
    msg="missing:"
    [ "${#missing[@]}" -gt 0 ] && msg="$msg ${missing[*]}"
    [ "$need_deb_src" -eq 1 ] && msg="$msg (deb-src sources for libsodium and utf8proc)"
    echo "$msg"
    exit 1
  fi
  exit 0
fi

if [ "$need_arm64_arch" -eq 1 ]; then
  echo "ldptext: enabling the arm64 architecture (dpkg multiarch) for the cross build"
  $sudo dpkg --add-architecture arm64
fi
if [ "$need_deb_src" -eq 1 ]; then
  # deb-src twins of the configured Debian sources: the wasm build compiles libsodium and utf8proc
  echo "ldptext: adding deb-src entries for the configured Debian sources (apt-get source, wasm build)"
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources | \
      $sudo tee /etc/apt/sources.list.d/ldptext-deb-src.sources >/dev/null
  fi
  if [ -f /etc/apt/sources.list ] && grep -q '^deb ' /etc/apt/sources.list; then
    sed -n 's/^deb /deb-src /p' /etc/apt/sources.list | $sudo tee /etc/apt/sources.list.d/ldptext-deb-src.list >/dev/null
  fi
  apt_update
fi
if [ "${#missing[@]}" -gt 0 ]; then
  echo "ldptext: installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt_update
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
