#!/usr/bin/env bash
# test-image-root.sh BINDIR: what the container image holds suffices. Lays
# out the image's file system (deploy/docker/rootfs.sh, as the Dockerfile
# does) in a temp directory and, in a mount namespace of its own, runs the
# daemon chrooted into it as the image's user (65532): no shared libraries,
# no /dev at all (so no /dev/shm), only /proc, which every container runtime
# mounts. The image's vineyardctl then puts and gets a file through the
# socket in /var/run/vineyard, and the host's build/vineyardctl lists it
# through the same socket, as a pod sharing the host path would.
# Needs root (mount, chroot).
set -euo pipefail
cd "$(dirname "$0")/.."
bindir=${1:?usage: test-image-root.sh BINDIR}

fail() {
	echo "test-image: FAIL: $*" >&2
	exit 1
}
if [ "$(id -u)" != 0 ]; then
	echo "test-image: needs root (unshare -m, mount, chroot); skipped"
	exit 0
fi
for tool in unshare chroot mount; do
	command -v "$tool" >/dev/null || fail "$tool not found (util-linux, coreutils)"
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
deploy/docker/rootfs.sh "$bindir" "$root"

# Nothing but the two binaries, the user files and empty directories.
files=$(cd "$root" && find . -type f | sort | tr '\n' ' ')
[ "$files" = "./etc/group ./etc/passwd ./usr/local/bin/vineyardctl ./usr/local/bin/vineyardd " ] ||
	fail "the image's files are: $files"
[ ! -e "$root/dev" ] || fail "the root has /dev"

data=$tmp/data
head -c 3000000 /dev/urandom >"$data"
cp "$data" "$root/tmp/in"
chmod 0644 "$root/tmp/in"

# Everything below runs in a private mount namespace: the /proc mount goes
# away with it.
unshare --mount --propagation private --fork bash -euo pipefail -c '
root=$1
mount -t proc proc "$root/proc"
as_user() { chroot --userspec=65532:65532 "$root" "$@"; }
as_user /usr/local/bin/vineyardd --version
as_user /usr/local/bin/vineyardd --socket /var/run/vineyard/vineyard.sock --size 64Mi --norpc \
	>"$root/../daemon.log" 2>&1 &
daemon=$!
trap "kill $daemon 2>/dev/null; wait $daemon 2>/dev/null || true" EXIT
sock=/var/run/vineyard/vineyard.sock
for _ in $(seq 600); do # until it answers (or dies)
	if as_user /usr/local/bin/vineyardctl --socket $sock status >/dev/null 2>&1; then break; fi
	kill -0 $daemon 2>/dev/null || { cat "$root/../daemon.log" >&2; echo "daemon exited" >&2; exit 1; }
	sleep 0.1
done
as_user /usr/local/bin/vineyardctl --socket $sock status
id=$(as_user /usr/local/bin/vineyardctl --socket $sock put /tmp/in)
as_user /usr/local/bin/vineyardctl --socket $sock get "$id" -o /tmp/out
cmp "$root/tmp/in" "$root/tmp/out" || { echo "got back other bytes" >&2; exit 1; }
# The socket is a file of the host path: a client outside the root reaches it.
build/vineyardctl --socket "$root$sock" ls | grep -q "$id" || { echo "host ls does not see $id" >&2; exit 1; }
stat -c "%u %a" "$root$sock"
' bash "$root" || { cat "$tmp/daemon.log" >&2 2>/dev/null || true; fail "the daemon in the empty root"; }
grep -q "vineyardd ready" "$tmp/daemon.log" || fail "no ready line in the daemon log"
echo "test-image: OK: vineyardd and vineyardctl (static) in an empty root as uid 65532, no /dev/shm: put/get of 3 MB through /var/run/vineyard/vineyard.sock"
