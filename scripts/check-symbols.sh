#!/usr/bin/env bash
# check-symbols.sh LIB HEADER [HEADER...]
#
# Fails unless the text (function) symbols that LIB exports are exactly the
# v6d_* functions declared in the HEADERs together (include/v6d.h, the public
# ABI, and include/v6d_internal.h, the uninstalled one of the Python
# package): nothing missing (a declared function the library does not
# implement), nothing extra (a Go/cgo helper such as _cgo_* or crosscall2
# leaking past the version script, or an //export that no header declares),
# and no function declared in two headers (each is public or internal, not
# both). See libv6d/v6d.map.
set -euo pipefail

if [[ $# -lt 2 ]]; then
	echo "usage: $0 LIB HEADER [HEADER...]" >&2
	exit 2
fi
lib=$1
shift
headers=("$@")
for f in "$lib" "${headers[@]}"; do
	if [[ ! -r $f ]]; then
		echo "check-symbols: $f: not found (run 'make lib' first?)" >&2
		exit 1
	fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Declared: every identifier v6d_xxx directly followed by '(' in a header,
# after comments are stripped (the doc comments mention functions by name;
# gcc -fpreprocessed removes comments without expanding anything, includes
# neither: each header gives only its own declarations).
: >"$tmp/all"
for header in "${headers[@]}"; do
	${CC:-gcc} -fpreprocessed -dD -E -P -x c "$header" 2>/dev/null >"$tmp/header.i" ||
		cp "$header" "$tmp/header.i"
	names=$(grep -oE '(^|[^A-Za-z0-9_])v6d_[a-z_0-9]+[[:space:]]*\(' "$tmp/header.i" |
		grep -oE 'v6d_[a-z_0-9]+' | sort -u)
	if [[ -z $names ]]; then
		echo "check-symbols: no v6d_* function declarations found in $header" >&2
		exit 1
	fi
	echo "$names" >>"$tmp/all"
done
sort -u "$tmp/all" >"$tmp/declared"
twice=$(sort "$tmp/all" | uniq -d)

# Exported: defined dynamic symbols of type T/t/W/i (text, weak, ifunc).
nm -D --defined-only "$lib" >"$tmp/nm"
awk 'NF >= 3 && $2 ~ /^[TtWi]$/ { print $3 }' "$tmp/nm" | sed 's/@.*//' | sort -u >"$tmp/exported"

missing=$(comm -23 "$tmp/declared" "$tmp/exported")
extra=$(comm -13 "$tmp/declared" "$tmp/exported")
# Any other defined dynamic symbol (data, bss, ...) is a leak too.
other=$(awk 'NF >= 3 && $2 !~ /^[TtWi]$/ && $3 !~ /^v6d_/ { print $2, $3 }' "$tmp/nm")

status=0
if [[ -n $twice ]]; then
	echo "check-symbols: declared in more than one of ${headers[*]}:" >&2
	sed 's/^/  /' <<<"$twice" >&2
	status=1
fi
if [[ -n $missing ]]; then
	echo "check-symbols: declared in ${headers[*]} but not exported by $lib:" >&2
	sed 's/^/  /' <<<"$missing" >&2
	status=1
fi
if [[ -n $extra ]]; then
	echo "check-symbols: exported by $lib but declared in none of ${headers[*]}:" >&2
	sed 's/^/  /' <<<"$extra" >&2
	status=1
fi
if [[ -n $other ]]; then
	echo "check-symbols: non-function symbols exported by $lib:" >&2
	sed 's/^/  /' <<<"$other" >&2
	status=1
fi
if [[ $status -eq 0 ]]; then
	echo "check-symbols: $lib exports exactly the $(wc -l <"$tmp/declared") v6d_* functions of ${headers[*]}"
fi
exit $status
