#!/bin/sh
# make -C native test-install: an installed libldptext is usable as a system library.
#
#   test_install.sh STAGE PREFIX SONAME REALNAME WRITE_TINY_BUNDLE   (run from native/)
#
# STAGE is the DESTDIR `make install PREFIX=...` wrote into. Checks: the installed files and
# links, nothing written outside STAGE/PREFIX, the SONAME; then examples/c/sanitize.c and a
# small ABI check build with only pkg-config's flags (PKG_CONFIG_SYSROOT_DIR maps the prefix into
# the staging directory, as for a cross build), shared, with libldptext.a linked in
# (ldptext-static.pc) and fully static, and each sanitizes a line of the C tests' tiny bundle.
set -eu
stage=$1 prefix=$2 soname=$3 realname=$4 writer=$5
CC=${CC:-cc}
root=$stage$prefix
work=$stage/work
fail() { echo "test-install: $*" >&2; exit 1; }

# ---- the installed files ----------------------------------------------------------------------
for f in include/ldptext.h "lib/$realname" lib/libldptext.a lib/pkgconfig/ldptext.pc \
         lib/pkgconfig/ldptext-static.pc; do
  [ -f "$root/$f" ] && [ ! -L "$root/$f" ] || fail "$f missing (or not a regular file)"
done
for l in "lib/$soname" lib/libldptext.so; do
  [ -L "$root/$l" ] && [ "$(readlink "$root/$l")" = "$realname" ] || fail "$l is not a link to $realname"
done
outside=$(find "$stage" ! -type d | grep -v "^$root/" || true)
[ -z "$outside" ] || fail "installed outside PREFIX: $outside"
readelf -d "$root/lib/$realname" | grep -q "(SONAME).*\[$soname\]" || fail "SONAME is not $soname"
echo "installed: $(cd "$root" && find . ! -type d | sort | tr '\n' ' ')"

# ---- build against the installed copy with pkg-config's flags only ---------------------------
mkdir -p "$work"
# the sysroot also prefixes the system libraries' -I/-L (stage/usr/...): those directories do not
# exist, and the compiler finds libsodium and utf8proc in its own default paths
PKG_CONFIG_PATH=$root/lib/pkgconfig
PKG_CONFIG_SYSROOT_DIR=$stage
export PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
cflags=$(pkg-config --cflags ldptext)
libs=$(pkg-config --libs ldptext)
static_libs=$(pkg-config --static --libs ldptext)
archive_libs=$(pkg-config --libs ldptext-static)
echo "pkg-config --cflags --libs ldptext: $cflags $libs"
echo "pkg-config --static --libs ldptext: $static_libs"
echo "pkg-config --libs ldptext-static: $archive_libs"

# the run-time ABI is the header's, and the library is this release
cat > "$work/abi_check.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <ldptext.h>
int main(void) {
    if (ldp_abi_version() != LDP_ABI_VERSION || strcmp(ldp_version(), LDP_VERSION) != 0) {
        fprintf(stderr, "header ABI %d %s, library ABI %d %s\n", LDP_ABI_VERSION, LDP_VERSION,
                ldp_abi_version(), ldp_version());
        return 1;
    }
    printf("ABI %d, version %s\n", ldp_abi_version(), ldp_version());
    return 0;
}
C
"$writer" "$work/tiny.ldpb" "$work/tiny.pub"
echo "alpha beta, gamma" > "$work/in.txt"

# shared: libldptext.so.N; archive: libldptext.a linked in (ldptext-static.pc), the rest shared;
# static: everything linked in (-static, pkg-config --static)
for kind in shared archive static; do
  case $kind in
    shared) link=$libs; extra= ;;
    archive) link=$archive_libs; extra= ;;
    static) link=$static_libs; extra=-static ;;
  esac
  # $cflags and $link are word lists from pkg-config: split them
  # shellcheck disable=SC2086
  $CC -std=c99 $cflags ../examples/c/sanitize.c $extra $link -o "$work/sanitize-$kind" ||
    fail "examples/c/sanitize.c does not link ($kind)"
  # shellcheck disable=SC2086
  $CC -std=c99 $cflags "$work/abi_check.c" $extra $link -o "$work/abi_check-$kind" ||
    fail "the ABI check does not link ($kind)"
  needed=$(readelf -d "$work/sanitize-$kind" | sed -n 's/.*(NEEDED).*\[\(libldptext[^]]*\)\].*/\1/p')
  if [ $kind = shared ]; then
    [ "$needed" = "$soname" ] || fail "the shared build needs '$needed', not $soname"
    run="env LD_LIBRARY_PATH=$root/lib"
  else
    [ -z "$needed" ] || fail "the $kind build still needs $needed"
    run=
  fi
  $run "$work/abi_check-$kind"
  $run "$work/sanitize-$kind" --report "$work/tiny.ldpb" "$work/tiny.pub" < "$work/in.txt" \
    > "$work/out-$kind.txt" 2> "$work/report-$kind.txt" || fail "sanitize ($kind) failed: $(cat "$work/report-$kind.txt")"
  grep -q "santext+ .*tokens=4" "$work/report-$kind.txt" || fail "unexpected report ($kind): $(cat "$work/report-$kind.txt")"
  [ "$(wc -l < "$work/out-$kind.txt")" -eq 1 ] || fail "expected one output line ($kind)"
  echo "$kind: ${needed:+NEEDED $needed, }$(cat "$work/report-$kind.txt")"
done
echo "test-install: ok"
