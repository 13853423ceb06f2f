#!/usr/bin/env bash
# demo.sh — the two-process quick start (make demo).
#
# Starts build/vineyardd on a private temporary socket, stores some bytes from
# one process (`share put`), reads the same bytes back from a second process
# (`share get`), checks they match, and stops the daemon. Run from the
# repository root after `make build`.
set -euo pipefail

CC=${CC:-gcc}
daemon=build/vineyardd
lib=build/libv6d.so
for f in "$daemon" "$lib"; do
	[[ -e $f ]] || { echo "demo: $f is missing: run 'make build' first" >&2; exit 1; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/v6d-demo.XXXXXX")
pid=
cleanup() {
	if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

mkdir -p build/examples
"$CC" -std=c11 -Wall -Wextra -Werror -Iinclude examples/c/share.c \
	-L"$PWD/build" -lv6d -Wl,-rpath,"$PWD/build" -o build/examples/share

sock=$tmp/vineyard.sock
echo "demo: starting $daemon --socket $sock --size 64Mi"
"$daemon" --socket "$sock" --size 64Mi >"$tmp/daemon.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
	[[ -S $sock ]] && break
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "demo: the daemon exited early:" >&2
		cat "$tmp/daemon.log" >&2
		exit 1
	fi
	sleep 0.1
done
[[ -S $sock ]] || { echo "demo: no socket at $sock after 10 s" >&2; cat "$tmp/daemon.log" >&2; exit 1; }

text="Hello from process $$, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "demo: process 1: share put $sock '$text'"
id=$(build/examples/share put "$sock" "$text" 2>"$tmp/put.err") ||
	{ cat "$tmp/put.err" >&2; exit 1; }
cat "$tmp/put.err"
echo "demo: process 1 stored object $id and exited"

echo "demo: process 2: share get $sock $id"
got=$(build/examples/share get "$sock" "$id" 2>"$tmp/get.err") ||
	{ cat "$tmp/get.err" >&2; exit 1; }
cat "$tmp/get.err"
echo "demo: process 2 read: $got"

if [[ $got != "$text" ]]; then
	echo "demo: FAILED: process 2 read different bytes" >&2
	exit 1
fi
put_sum=$(sed -n 's/.*fnv1a64 //p' "$tmp/put.err")
get_sum=$(sed -n 's/.*fnv1a64 //p' "$tmp/get.err")
if [[ $put_sum != "$get_sum" ]]; then
	echo "demo: FAILED: checksums differ ($put_sum vs $get_sum)" >&2
	exit 1
fi
echo "demo: OK: the second process got the same bytes (fnv1a64 $get_sum); stopping the daemon"
