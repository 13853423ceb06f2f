#!/usr/bin/env bash
# test-install.sh: the C user's paths of README.md ("From C", "Installing"),
# built and run exactly as the README shows, against a real daemon:
#
#   1. from the tree: the README's C example (extracted from README.md) and
#      examples/c/*.c with -Iinclude -Lbuild -lv6d -Wl,-rpath,$PWD/build, and
#      with LD_LIBRARY_PATH=build instead of the rpath;
#   2. make install PREFIX=<custom> (no DESTDIR): pkg-config through
#      PKG_CONFIG_PATH, the rpath from `pkg-config --variable=libdir v6d`;
#   3. make install DESTDIR=<stage> PREFIX=/usr/local: the layout, v6d.pc, and a
#      program built with pkg-config and run with LD_LIBRARY_PATH; the internal
#      header (include/v6d_internal.h) is not installed nor named by v6d.pc, and
#      a program including only v6d.h links every function it declares.
#
# Run from the repository root after `make build` (make test does both).
set -euo pipefail

MAKE=${MAKE:-make}
CC=${CC:-gcc}
fail() { echo "test-install: FAILED: $*" >&2; exit 1; }

if ! command -v pkg-config >/dev/null 2>&1; then
	fail "pkg-config is not installed (apt-get install -y pkg-config; 'make check' lists every prerequisite)"
fi
[[ -x build/vineyardd && -x build/vineyardctl && -f build/libv6d.so ]] ||
	fail "build/vineyardd, build/vineyardctl or build/libv6d.so missing: run 'make build'"

tmp=$(mktemp -d)
pid=
cleanup() {
	if [[ -n $pid ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT

# A daemon for the programs to talk to.
sock=$tmp/v6d.sock
build/vineyardd --socket "$sock" --size 64Mi --norpc >"$tmp/daemon.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
	[[ -S $sock ]] && break
	kill -0 "$pid" 2>/dev/null || { cat "$tmp/daemon.log" >&2; fail "the daemon exited early"; }
	sleep 0.1
done
[[ -S $sock ]] || fail "no daemon socket at $sock"

# The README's C example: the first ```c block after "## From C".
awk '/^## From C/ { on = 1 } on && /^```c$/ { code = 1; next } code && /^```$/ { exit } code { print }' \
	README.md >"$tmp/app.c"
[[ -s $tmp/app.c ]] || fail "no C example found under '## From C' in README.md"

# expect_hello PROGRAM [ENV...]: the README example prints "o<16 hex>: hello".
expect_hello() {
	local out
	out=$("$@" "$sock" 2>&1) || fail "$* exited non-zero: $out"
	[[ $out =~ ^o[0-9a-f]{16}:\ hello$ ]] || fail "$* printed '$out', want 'o<id>: hello'"
}

# 1. From the tree (README: "From C").
"$CC" -Iinclude "$tmp/app.c" -o "$tmp/app" -Lbuild -lv6d -Wl,-rpath,"$PWD/build" ||
	fail "the README's C example does not build from the tree"
expect_hello "$tmp/app"
"$CC" -Iinclude "$tmp/app.c" -o "$tmp/app-norpath" -Lbuild -lv6d || fail "build without rpath"
if "$tmp/app-norpath" "$sock" >/dev/null 2>&1; then
	echo "test-install: note: libv6d.so is found without an rpath here (an installed copy?)"
fi
expect_hello env LD_LIBRARY_PATH="$PWD/build" "$tmp/app-norpath"
for src in examples/c/*.c; do
	name=$(basename "$src" .c)
	"$CC" -std=c11 -Wall -Wextra -Werror -Iinclude "$src" -Lbuild -lv6d -Wl,-rpath,"$PWD/build" \
		-o "$tmp/$name" || fail "$src does not build from the tree"
done
# share.c in two processes, as make demo runs it: put prints the id, get the same digest.
id=$("$tmp/share" put "$sock" "bytes from test-install" 2>"$tmp/put.err") || fail "share put: $(cat "$tmp/put.err")"
[[ $id =~ ^o[0-9a-f]{16}$ ]] || fail "share put printed '$id', want an object id"
"$tmp/share" get "$sock" "$id" >/dev/null 2>"$tmp/get.err" || fail "share get $id: $(cat "$tmp/get.err")"
[[ $(grep -o 'fnv1a64 [0-9a-f]*' "$tmp/put.err") == $(grep -o 'fnv1a64 [0-9a-f]*' "$tmp/get.err") ]] ||
	fail "share get's digest differs from put's: $(cat "$tmp/put.err" "$tmp/get.err")"
echo "test-install: tree: README example and examples/c/*.c build and run (rpath and LD_LIBRARY_PATH)"

# 2. A custom PREFIX, installed for real: pkg-config via PKG_CONFIG_PATH, rpath from its libdir.
prefix=$tmp/prefix
"$MAKE" --no-print-directory install NO_BUILD=1 PREFIX="$prefix" >"$tmp/install.log" ||
	{ cat "$tmp/install.log" >&2; fail "make install PREFIX=$prefix"; }
(
	export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
	unset PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR
	# shellcheck disable=SC2046 # pkg-config prints a list of flags
	"$CC" "$tmp/app.c" -o "$tmp/app-prefix" $(pkg-config --cflags --libs v6d) \
		-Wl,-rpath,"$(pkg-config --variable=libdir v6d)" || fail "build against PREFIX=$prefix with pkg-config"
)
expect_hello env -u LD_LIBRARY_PATH "$tmp/app-prefix"
"$prefix/bin/vineyardd" --version | grep -qx "vineyardd $(cat VERSION)" || fail "installed vineyardd --version"
"$prefix/bin/vineyardctl" version | grep -qx "vineyardctl $(cat VERSION)" || fail "installed vineyardctl version"
"$MAKE" --no-print-directory uninstall PREFIX="$prefix" >/dev/null
[[ ! -e $prefix/lib/libv6d.so ]] || fail "make uninstall left $prefix/lib/libv6d.so"
[[ ! -e $prefix/bin/vineyardctl ]] || fail "make uninstall left $prefix/bin/vineyardctl"
echo "test-install: PREFIX=$prefix: pkg-config + rpath build runs; uninstall removes it"

# 3. /usr/local, staged in a DESTDIR (the layout a plain 'make install' writes).
stage=$tmp/stage
prefix=/usr/local
"$MAKE" --no-print-directory install NO_BUILD=1 DESTDIR="$stage" PREFIX="$prefix" >"$tmp/install.log" ||
	{ cat "$tmp/install.log" >&2; fail "make install DESTDIR=$stage"; }
root=$stage$prefix
[[ -x $root/bin/vineyardd ]] || fail "$prefix/bin/vineyardd missing or not executable"
[[ -x $root/bin/vineyardctl ]] || fail "$prefix/bin/vineyardctl missing or not executable"
[[ -f $root/lib/libv6d.so ]] || fail "$prefix/lib/libv6d.so missing"
[[ -f $root/include/v6d.h ]] || fail "$prefix/include/v6d.h missing"
[[ -f $root/lib/pkgconfig/v6d.pc ]] || fail "$prefix/lib/pkgconfig/v6d.pc missing"
[[ ! -e $root/include/libv6d.h ]] || fail "the cgo-generated header must not be installed"
grep -q "^prefix=$prefix\$" "$root/lib/pkgconfig/v6d.pc" || fail "v6d.pc does not carry prefix=$prefix"
grep -q "^Version: $(cat VERSION)\$" "$root/lib/pkgconfig/v6d.pc" || fail "v6d.pc does not carry Version: $(cat VERSION)"
if grep -q '@[A-Z_]*@' "$root/lib/pkgconfig/v6d.pc"; then
	fail "v6d.pc has unsubstituted placeholders: $(grep '@[A-Z_]*@' "$root/lib/pkgconfig/v6d.pc")"
fi
# PKG_CONFIG_SYSROOT_DIR maps the -I/-L paths of the staged .pc into DESTDIR.
flags=$(PKG_CONFIG_LIBDIR=$root/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$stage pkg-config --cflags --libs v6d) ||
	fail "pkg-config --cflags --libs v6d failed"
# shellcheck disable=SC2086 # $flags is a list of compiler flags
"$CC" -std=c11 -Wall -Wextra -Werror "$tmp/app.c" -o "$tmp/app-usr-local" $flags ||
	fail "compiling against the staged /usr/local failed (flags: $flags)"
expect_hello env LD_LIBRARY_PATH="$root/lib" "$tmp/app-usr-local"
# The internal header stays in the tree: not installed, not on v6d.pc's paths.
leaked=$(find "$stage" -name 'v6d_internal*' -print)
[[ -z $leaked ]] || fail "the internal header was installed: $leaked"
if grep -q 'internal' "$root/lib/pkgconfig/v6d.pc"; then fail "v6d.pc names the internal header"; fi
printf '#include "v6d_internal.h"\nint main(void) { return v6d_internal_version(); }\n' >"$tmp/internal.c"
# shellcheck disable=SC2086 # $flags is a list of compiler flags
if "$CC" "$tmp/internal.c" -o "$tmp/internal" $flags 2>/dev/null; then
	fail "a program including v6d_internal.h builds against the installed copy"
fi
# Every function of the installed v6d.h, and nothing else, links and loads.
funcs=$("$CC" -fpreprocessed -dD -E -P -x c "$root/include/v6d.h" |
	grep -oE '(^|[^A-Za-z0-9_])v6d_[a-z_0-9]+[[:space:]]*\(' | grep -oE 'v6d_[a-z_0-9]+' | sort -u)
{
	printf '#include <stdio.h>\n#include <v6d.h>\ntypedef void (*fn)(void);\nstatic const fn all[] = {\n'
	for f in $funcs; do printf '  (fn)&%s,\n' "$f"; done
	printf '};\nint main(void) {\n  printf("%%zu %%d\\n", sizeof all / sizeof all[0], v6d_abi_version());\n'
	printf '  return v6d_abi_version() == V6D_ABI_VERSION ? 0 : 1;\n}\n'
} >"$tmp/every.c"
# shellcheck disable=SC2086 # $flags is a list of compiler flags
"$CC" -std=c11 -Wall -Wextra -Werror "$tmp/every.c" -o "$tmp/every" $flags ||
	fail "a program taking every function of the installed v6d.h does not build against it"
out=$(env LD_LIBRARY_PATH="$root/lib" "$tmp/every") || fail "the program of every v6d.h function: $out"
[[ $out == "$(wc -w <<<"$funcs") $(sed -n 's/^#define V6D_ABI_VERSION \([0-9]*\)$/\1/p' include/v6d.h)" ]] ||
	fail "the program of every v6d.h function printed '$out'"
echo "test-install: DESTDIR/usr/local: v6d_internal.h not installed; $(wc -w <<<"$funcs") functions of v6d.h link against the installed library"
echo "test-install: OK: README example and examples/c from the tree, PREFIX=<custom> and DESTDIR/usr/local ($flags)"
