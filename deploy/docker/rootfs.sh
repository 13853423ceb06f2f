#!/usr/bin/env bash
# rootfs.sh BINDIR ROOT: lays out the container image's whole file system in
# ROOT (which must be empty or absent): the static vineyardd and vineyardctl
# from BINDIR in /usr/local/bin, the non-root user vineyard (65532) in
# /etc/passwd and /etc/group, /tmp, and the socket directory
# /var/run/vineyard owned by that user. Nothing else: no shell, no shared
# libraries, no /dev/shm (the arena is a memfd).
#
# The Dockerfile's build stage runs it, and so does scripts/test-image-root.sh,
# which then runs the daemon chrooted into ROOT: what that test proves is what
# the image holds.
set -euo pipefail
bindir=${1:?usage: rootfs.sh BINDIR ROOT}
root=${2:?usage: rootfs.sh BINDIR ROOT}
uid=65532

mkdir -p "$root"
if [ -n "$(ls -A "$root")" ]; then
	echo "rootfs.sh: $root is not empty" >&2
	exit 1
fi
for bin in vineyardd vineyardctl; do
	if ! [ -x "$bindir/$bin" ]; then
		echo "rootfs.sh: $bindir/$bin missing (make image-binaries)" >&2
		exit 1
	fi
done
install -d -m 0755 "$root/usr/local/bin" "$root/etc" "$root/var/run" "$root/proc"
install -m 0755 "$bindir/vineyardd" "$bindir/vineyardctl" "$root/usr/local/bin/"
install -d -m 1777 "$root/tmp"
install -d -m 0755 -o "$uid" -g "$uid" "$root/var/run/vineyard"
printf 'root:x:0:0:root:/root:/sbin/nologin\nvineyard:x:%d:%d:vineyard:/tmp:/sbin/nologin\n' "$uid" "$uid" >"$root/etc/passwd"
printf 'root:x:0:\nvineyard:x:%d:\n' "$uid" >"$root/etc/group"
chmod 0644 "$root/etc/passwd" "$root/etc/group"
