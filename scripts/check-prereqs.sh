#!/usr/bin/env bash
# check-prereqs.sh: checks the toolchains the build and the tests need, and for
# each missing one says what to install. `make check` runs it; `make test` runs
# `make check` first. Everything else (the Python packages) `make venv` provisions.
#
# Env: GO (default go), PYTHON (default python3), CC (default gcc).
set -uo pipefail

GO=${GO:-go}
PYTHON=${PYTHON:-python3}
CC=${CC:-gcc}
missing=0

ok() { printf 'check: %-11s %s\n' "$1" "$2"; }
bad() {
	printf 'check: %-11s MISSING: %s\n' "$1" "$2" >&2
	printf '       fix: %s\n' "$3" >&2
	missing=$((missing + 1))
}

# Go: the version go.mod asks for.
want_go=$(sed -n 's/^go \([0-9.]*\).*/\1/p' go.mod 2>/dev/null | head -1)
want_go=${want_go:-1.26}
if ! command -v "$GO" >/dev/null 2>&1; then
	bad go "'$GO' is not on PATH (Go >= $want_go needed)" \
		"install Go $want_go or newer from the official Go downloads and add its bin/ to PATH (e.g. export PATH=/usr/local/go/bin:\$PATH)"
else
	have_go=$("$GO" env GOVERSION 2>/dev/null | sed 's/^go//')
	if [[ -n $have_go ]] && [[ $(printf '%s\n%s\n' "$want_go" "$have_go" | sort -V | head -1) == "$want_go" ]]; then
		ok go "go$have_go"
	else
		bad go "go${have_go:-?} is older than go.mod's go $want_go" "install Go $want_go or newer (or set GOTOOLCHAIN=auto)"
	fi
fi

# C compiler (cgo and the C tests) and make.
if command -v "$CC" >/dev/null 2>&1; then
	ok cc "$("$CC" --version 2>/dev/null | head -1)"
else
	bad cc "'$CC' is not on PATH (cgo builds libv6d.so with it)" "apt-get install -y gcc g++ (Debian/Ubuntu) or dnf install -y gcc gcc-c++"
fi
if command -v g++ >/dev/null 2>&1 || command -v "${CXX:-g++}" >/dev/null 2>&1; then
	ok c++ "$("${CXX:-g++}" --version 2>/dev/null | head -1)"
else
	bad c++ "'${CXX:-g++}' is not on PATH (make check-header compiles v6d.h as C++17)" "apt-get install -y g++"
fi

# pkg-config (make test-install builds a program the way a C user does).
if command -v pkg-config >/dev/null 2>&1; then
	ok pkg-config "$(pkg-config --version)"
else
	bad pkg-config "pkg-config is not on PATH (make test-install uses it)" "apt-get install -y pkg-config"
fi

# Python >= 3.11 with venv and ensurepip (make venv makes build/venv with it).
if ! command -v "$PYTHON" >/dev/null 2>&1; then
	bad python "'$PYTHON' is not on PATH (Python >= 3.11 needed)" "apt-get install -y python3 python3-venv, or run make with PYTHON=/path/to/python3.11"
else
	pyver=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
	if [[ -z $pyver ]]; then
		bad python "'$PYTHON' does not run" "install Python 3.11 or newer, or run make with PYTHON=/path/to/python3.11"
	elif [[ $(printf '3.11\n%s\n' "$pyver" | sort -V | head -1) != 3.11 ]]; then
		bad python "$PYTHON is Python $pyver; 3.11 or newer is needed" "install Python 3.11 or newer, or run make with PYTHON=/path/to/python3.11"
	else
		base=$("$PYTHON" -c 'import sys; print(getattr(sys, "_base_executable", "") or sys.executable)')
		if "$base" -c 'import venv, ensurepip' >/dev/null 2>&1; then
			ok python "Python $pyver ($base, with venv and ensurepip)"
		else
			bad python "$base has no venv/ensurepip module (make venv needs them)" \
				"apt-get install -y python3-venv (Debian/Ubuntu: python${pyver}-venv)"
		fi
	fi
fi

if ((missing > 0)); then
	echo "check: $missing prerequisite(s) missing; install them as shown above, then rerun make" >&2
	exit 1
fi
echo "check: all prerequisites found (Python packages come from 'make venv')"
