#!/usr/bin/env bash
# cluster-demo.sh — three daemons sharing metadata through etcd (make cluster-demo).
#
# Starts build/v6d-etcd (a one-member etcd on a free port), then three
# build/vineyardd --meta etcd with their own sockets and arenas; persists and
# names a NumPy array on the first, finds it by name from the second, lists
# the cluster's instances from the third, and stops everything. Run from the
# repository root after `make build` (make cluster-demo sets PYTHONPATH and
# V6D_LIBRARY; see docs/cluster.md for several machines).
set -euo pipefail

etcd=build/v6d-etcd
daemon=build/vineyardd
for f in "$etcd" "$daemon" build/libv6d.so; do
	[[ -e $f ]] || { echo "cluster-demo: $f is missing: run 'make build' first" >&2; exit 1; }
done
export V6D_LIBRARY=${V6D_LIBRARY:-$PWD/build/libv6d.so}
export PYTHONPATH=${PYTHONPATH:-$PWD/python}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/v6d-cluster.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

"$etcd" -endpoint-file "$tmp/etcd.url" >"$tmp/etcd.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
	[[ -s $tmp/etcd.url ]] && break
	sleep 0.1
done
[[ -s $tmp/etcd.url ]] || { echo "cluster-demo: etcd did not start:" >&2; cat "$tmp/etcd.log" >&2; exit 1; }
endpoint=$(cat "$tmp/etcd.url")
echo "cluster-demo: etcd at $endpoint"

for n in a b c; do
	sock=$tmp/$n.sock
	"$daemon" --socket "$sock" --size 64Mi --rpc-socket-port 0 --meta etcd --etcd-endpoint "$endpoint" \
		--etcd-prefix v6d-demo >"$tmp/$n.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 100); do
		[[ -S $sock ]] && break
		sleep 0.1
	done
	[[ -S $sock ]] || { echo "cluster-demo: daemon $n did not start:" >&2; cat "$tmp/$n.log" >&2; exit 1; }
	echo "cluster-demo: daemon $n on $sock"
done

python3 - "$tmp" <<'PY'
import sys

import numpy as np
import vineyard

tmp = sys.argv[1]
a, b, c = (vineyard.connect(f"{tmp}/{n}.sock") for n in "abc")
oid = a.put(np.arange(6, dtype=np.int64), persist=True, name="demo_array")
print(f"cluster-demo: instance {a.instance_id} persisted {oid!r} as 'demo_array'")
found = b.get_name("demo_array")
meta = b.get_meta(found)
print(f"cluster-demo: instance {b.instance_id} found {found!r}: {meta.typename}, "
      f"shape {meta['shape_']}, stored on instance {meta.instance_id}")
assert found == oid
print(f"cluster-demo: instance {c.instance_id} sees instances {sorted(c.meta)}")
assert len(c.meta) == 3
PY
echo "cluster-demo: ok"
