#!/usr/bin/env bash
# test-install.sh
#
# Installs the built artifacts into a temporary DESTDIR (with a PREFIX that is
# not /usr/local, so that nothing is found by accident), then builds and runs a
# C program against the installed copy using only
# `pkg-config --cflags --libs v6d`. Run from the repository root after
# `make build` (make test does both).
set -euo pipefail

MAKE=${MAKE:-make}
CC=${CC:-gcc}

if ! command -v pkg-config >/dev/null 2>&1; then
	echo "test-install: SKIPPED: pkg-config is not installed (apt-get install -y pkg-config)"
	exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
stage=$tmp/stage
prefix=/opt/v6d-test

"$MAKE" --no-print-directory install NO_BUILD=1 DESTDIR="$stage" PREFIX="$prefix" >"$tmp/install.log" ||
	{ cat "$tmp/install.log" >&2; echo "test-install: make install failed" >&2; exit 1; }

root=$stage$prefix
fail() { echo "test-install: $*" >&2; exit 1; }
[[ -x $root/bin/vineyardd ]] || fail "$prefix/bin/vineyardd missing or not executable"
[[ -f $root/lib/libv6d.so ]] || fail "$prefix/lib/libv6d.so missing"
[[ -f $root/include/v6d.h ]] || fail "$prefix/include/v6d.h missing"
[[ -f $root/lib/pkgconfig/v6d.pc ]] || fail "$prefix/lib/pkgconfig/v6d.pc missing"
[[ ! -e $root/include/libv6d.h ]] || fail "the cgo-generated header must not be installed"
grep -q "^prefix=$prefix\$" "$root/lib/pkgconfig/v6d.pc" || fail "v6d.pc does not carry prefix=$prefix"
if grep -q '@[A-Z_]*@' "$root/lib/pkgconfig/v6d.pc"; then
	fail "v6d.pc has unsubstituted placeholders: $(grep '@[A-Z_]*@' "$root/lib/pkgconfig/v6d.pc")"
fi

# PKG_CONFIG_SYSROOT_DIR maps the -I/-L paths of the staged .pc into DESTDIR.
export PKG_CONFIG_PATH=$root/lib/pkgconfig
export PKG_CONFIG_SYSROOT_DIR=$stage
export PKG_CONFIG_LIBDIR=$root/lib/pkgconfig
flags=$(pkg-config --cflags --libs v6d) || fail "pkg-config --cflags --libs v6d failed"
version=$(pkg-config --modversion v6d)

cat >"$tmp/use.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <v6d.h>

int main(void) {
  v6d_error err = {0, NULL};
  v6d_client client = 0;
  v6d_status st;
  if (v6d_abi_version() != V6D_ABI_VERSION) {
    fprintf(stderr, "ABI %d, header %d\n", (int)v6d_abi_version(), V6D_ABI_VERSION);
    return 1;
  }
  /* A connection to a socket that does not exist fails cleanly. */
  st = v6d_connect("/nonexistent/v6d-test-install.sock", &client, &err);
  if (st == V6D_OK) {
    fprintf(stderr, "connect to a missing socket succeeded\n");
    return 1;
  }
  printf("%s %s\n", v6d_version(), v6d_status_name(st));
  v6d_error_release(&err);
  return 0;
}
C
# shellcheck disable=SC2086 # $flags is a list of compiler flags
"$CC" -std=c11 -Wall -Wextra -Werror -o "$tmp/use" "$tmp/use.c" $flags ||
	fail "compiling against the installed library failed (flags: $flags)"
out=$(LD_LIBRARY_PATH=$root/lib "$tmp/use") || fail "the installed library did not run: $out"
echo "test-install: OK: installed to DESTDIR$prefix, built with '$flags' (v6d.pc $version; library says: $out)"
