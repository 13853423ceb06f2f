#!/usr/bin/env bash
# check-symbols.sh LIB HEADER
#
# Fails unless the text (function) symbols that LIB exports are exactly the
# v6d_* functions declared in HEADER: nothing missing (a declared function the
# library does not implement) and nothing extra (a Go/cgo helper such as
# _cgo_* or crosscall2 leaking past the version script, or an //export that
# the header does not declare). See libv6d/v6d.map.
set -euo pipefail

if [[ $# -ne 2 ]]; then
	echo "usage: $0 LIB HEADER" >&2
	exit 2
fi
lib=$1
header=$2
for f in "$lib" "$header"; do
	if [[ ! -r $f ]]; then
		echo "check-symbols: $f: not found (run 'make lib' first?)" >&2
		exit 1
	fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Declared: every identifier v6d_xxx directly followed by '(' in the header,
# after comments are stripped (the doc comments mention functions by name;
# gcc -fpreprocessed removes comments without expanding anything).
${CC:-gcc} -fpreprocessed -dD -E -P -x c "$header" 2>/dev/null >"$tmp/header.i" ||
	cp "$header" "$tmp/header.i"
grep -oE '(^|[^A-Za-z0-9_])v6d_[a-z_0-9]+[[:space:]]*\(' "$tmp/header.i" |
	grep -oE 'v6d_[a-z_0-9]+' | sort -u >"$tmp/declared"

# Exported: defined dynamic symbols of type T/t/W/i (text, weak, ifunc).
nm -D --defined-only "$lib" >"$tmp/nm"
awk 'NF >= 3 && $2 ~ /^[TtWi]$/ { print $3 }' "$tmp/nm" | sed 's/@.*//' | sort -u >"$tmp/exported"

if [[ ! -s $tmp/declared ]]; then
	echo "check-symbols: no v6d_* function declarations found in $header" >&2
	exit 1
fi

missing=$(comm -23 "$tmp/declared" "$tmp/exported")
extra=$(comm -13 "$tmp/declared" "$tmp/exported")
# Any other defined dynamic symbol (data, bss, ...) is a leak too.
other=$(awk 'NF >= 3 && $2 !~ /^[TtWi]$/ && $3 !~ /^v6d_/ { print $2, $3 }' "$tmp/nm")

status=0
if [[ -n $missing ]]; then
	echo "check-symbols: declared in $header but not exported by $lib:" >&2
	sed 's/^/  /' <<<"$missing" >&2
	status=1
fi
if [[ -n $extra ]]; then
	echo "check-symbols: exported by $lib but not declared in $header:" >&2
	sed 's/^/  /' <<<"$extra" >&2
	status=1
fi
if [[ -n $other ]]; then
	echo "check-symbols: non-function symbols exported by $lib:" >&2
	sed 's/^/  /' <<<"$other" >&2
	status=1
fi
if [[ $status -eq 0 ]]; then
	echo "check-symbols: $lib exports exactly the $(wc -l <"$tmp/declared") v6d_* functions of $header"
fi
exit $status
