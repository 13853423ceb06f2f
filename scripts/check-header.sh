#!/usr/bin/env bash
# check-header.sh HEADER
#
# Compiles a tiny translation unit that includes HEADER (twice, to test the
# include guard) as strict C11 and as C++17 with warnings as errors, and takes
# the address of every v6d_* function it declares, so that a typo in a
# prototype, a C++-only construct or a missing include fails here and not in a
# user's build.
set -euo pipefail

if [[ $# -ne 1 ]]; then
	echo "usage: $0 HEADER" >&2
	exit 2
fi
header=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
CC=${CC:-gcc}
CXX=${CXX:-g++}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

funcs=$("$CC" -fpreprocessed -dD -E -P -x c "$header" |
	grep -oE '(^|[^A-Za-z0-9_])v6d_[a-z_0-9]+[[:space:]]*\(' |
	grep -oE 'v6d_[a-z_0-9]+' | sort -u)
if [[ -z $funcs ]]; then
	echo "check-header: no v6d_* functions declared in $header" >&2
	exit 1
fi

{
	printf '#include "%s"\n#include "%s"\n\n' "$header" "$header"
	printf 'typedef void (*v6d_any_fn)(void);\n'
	printf 'static const v6d_any_fn v6d_all_functions[] = {\n'
	for f in $funcs; do
		printf '    (v6d_any_fn)&%s,\n' "$f"
	done
	printf '};\n\n'
	cat <<'C'
int v6d_header_check(void);
int v6d_header_check(void) {
  v6d_error err = {0, NULL};
  v6d_client client = 0;
  v6d_status st = V6D_OK;
  (void)err;
  (void)client;
  return (int)st + (V6D_ABI_VERSION > 0 ? 0 : 1) +
         (int)(sizeof v6d_all_functions / sizeof v6d_all_functions[0] == 0);
}
C
} >"$tmp/tu.c"
cp "$tmp/tu.c" "$tmp/tu.cpp"

"$CC" -std=c11 -Wall -Wextra -Werror -pedantic -c "$tmp/tu.c" -o "$tmp/c.o"
"$CXX" -std=c++17 -Wall -Wextra -Werror -c "$tmp/tu.cpp" -o "$tmp/cpp.o"
echo "check-header: $(basename "$header") compiles as C11 (-pedantic) and C++17 with -Wall -Wextra -Werror ($(wc -w <<<"$funcs") functions)"
