#!/usr/bin/env bash
# check-abi-shim.sh [PKGDIR]
#
# Proves that the build checks the Go exports of libv6d against
# include/v6d.h (libv6d/v6d.c): each case below builds the library with one
# file replaced (go build -overlay) by a copy carrying a deliberately wrong
# signature, and must fail to compile, naming the function. A control build
# of the unmodified sources through the same overlay machinery must succeed,
# so a failure is the mutation's, not the harness's.
set -euo pipefail

pkg=$(cd "${1:-libv6d}" && pwd)
GO=${GO:-go}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# build FILE REPLACEMENT: go build the package with FILE replaced; output in $tmp/out.
build() {
	printf '{"Replace":{"%s":"%s"}}\n' "$1" "$2" >"$tmp/overlay.json"
	CGO_ENABLED=1 "$GO" build -overlay "$tmp/overlay.json" -o "$tmp/lib" "$pkg" >"$tmp/out" 2>&1
}

cp "$pkg/exports.go" "$tmp/control.go"
if ! build "$pkg/exports.go" "$tmp/control.go"; then
	echo "check-abi-shim: the control build (no mutation) failed:" >&2
	cat "$tmp/out" >&2
	exit 1
fi

n=0
status=0
# expect_fail NAME FILE SED-EXPR FUNCTION: FILE with SED-EXPR applied must not
# build, and the compiler must name FUNCTION.
expect_fail() {
	local name=$1 file=$pkg/$2 expr=$3 fn=$4
	local mutated=$tmp/$n.${2##*.}
	n=$((n + 1))
	sed -e "$expr" "$file" >"$mutated"
	if cmp -s "$file" "$mutated"; then
		echo "check-abi-shim: $name: the mutation did not apply to $2 (update this script)" >&2
		status=1
	elif build "$file" "$mutated"; then
		echo "check-abi-shim: $name: a wrong signature BUILT; the header is not checked" >&2
		status=1
	elif ! grep -q "$fn" "$tmp/out"; then
		echo "check-abi-shim: $name: the build failed, but not naming $fn:" >&2
		cat "$tmp/out" >&2
		status=1
	fi
}

expect_fail "narrowed integer" exports.go \
	's/^func v6dgo_shrink(h C.uint64_t, id C.uint64_t, size C.uint64_t,/func v6dgo_shrink(h C.uint64_t, id C.uint64_t, size C.uint32_t,/' \
	v6d_shrink
expect_fail "signedness" exports.go \
	's/^func v6dgo_get_name(h C.uint64_t, name \*C.char, wait C.int32_t, timeoutMs C.int64_t,/func v6dgo_get_name(h C.uint64_t, name *C.char, wait C.int32_t, timeoutMs C.uint64_t,/' \
	v6d_get_name
expect_fail "pointer type" exports.go \
	's/^func v6dgo_get(h C.uint64_t, id C.uint64_t, data \*\*C.uint8_t, size \*C.uint64_t,/func v6dgo_get(h C.uint64_t, id C.uint64_t, data **C.uint8_t, size *C.uint32_t,/' \
	v6d_get
expect_fail "missing parameter" exports.go \
	's/^func v6dgo_seal(h C.uint64_t, id C.uint64_t, err \*C.v6d_error)/func v6dgo_seal(h C.uint64_t, err *C.v6d_error)/; s/c.Seal(ids.ObjectID(id))/c.Seal(0)/' \
	v6d_seal
expect_fail "return type" exports.go \
	's/^func v6dgo_open_handles() C.int64_t {/func v6dgo_open_handles() C.uint64_t {/; s/return C.int64_t(len(handles))/return C.uint64_t(len(handles))/' \
	v6d_open_handles
expect_fail "Arrow struct type" arrow.go \
	's/^func v6dgo_get_arrow_stream(h C.uint64_t, id C.uint64_t, out \*C.struct_ArrowArrayStream,/func v6dgo_get_arrow_stream(h C.uint64_t, id C.uint64_t, out *C.struct_ArrowArray,/' \
	v6d_get_arrow_stream
expect_fail "the header changed" v6d.h \
	's/^v6d_status v6d_persist(v6d_client client, uint64_t id, v6d_error \*err);/v6d_status v6d_persist(v6d_client client, int64_t id, v6d_error *err);/' \
	v6d_persist
expect_fail "definition against the header" v6d.c \
	's/^v6d_status v6d_abort(v6d_client client, uint64_t id, v6d_error \*err) {/v6d_status v6d_abort(v6d_client client, uint32_t id, v6d_error *err) {/' \
	v6d_abort

if [[ $status -eq 0 ]]; then
	echo "check-abi-shim: $n wrong signatures of libv6d exports fail to compile against include/v6d.h"
fi
exit $status
