package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/v6d-io/v6d-go/internal/server"
)

// The flags of upstream vineyardd (v0.24.x: src/server/util/spec_resolvers.cc,
// src/server/memory/malloc.cc, and glog's -log_dir and -v), so that its
// command lines (the Kubernetes operator's among them) run unchanged. Each
// is implemented, an alias of ours, or accepted with one warning at start
// saying what is not supported here; none is silently ignored, and a value
// is still checked. The flags both share (--socket, --size, --reserve_memory,
// --meta, --etcd_endpoint, --etcd_prefix, --rpc, --rpc_socket_port, and the
// spill flags) are rows of the table's own files. A row here is skipped when a row of the same name exists
// (a feature implemented since, such as spilling, owns its flags).

// warn records the one warning of an upstream flag accepted but not
// supported here; run logs it once the logger exists.
func (o *settings) warn(flag, what string) {
	w := "--" + flag + ": " + what
	for _, have := range o.warnings {
		if have == w {
			return
		}
	}
	o.warnings = append(o.warnings, w)
}

// warnOnly is the setter of an upstream flag that this daemon does not
// support: check(v) validates the value, and the flag warns unless skip(v).
func warnOnly(name, what string, check func(string) error, skip func(string) bool) func(*settings, string) error {
	return func(o *settings, v string) error {
		if check != nil {
			if err := check(v); err != nil {
				return fmt.Errorf("--%s %q: %w", name, v, err)
			}
		}
		if skip == nil || !skip(v) {
			o.warn(name, what)
		}
		return nil
	}
}

func isFalse(v string) bool { return v == "false" }
func isEmpty(v string) bool { return v == "" }

// upstreamFlags are the rows of upstream's flags that flags.go does not
// have.
var upstreamFlags = []flagDef{
	{"deployment", "MODE", func(d *settings) string { return "local" },
		"upstream's: local or distributed, reported in instance_status",
		func(o *settings, v string) error {
			if v != "local" && v != "distributed" {
				return fmt.Errorf("--deployment %q: want local or distributed", v)
			}
			o.Deployment = v
			return nil
		}},
	{"meta-timeout", "SECONDS", constant("the --etcd-timeout"),
		"upstream's: seconds to wait for the metadata service; with etcd, --etcd-timeout in seconds",
		func(o *settings, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return fmt.Errorf("--meta-timeout %q is not a positive number of seconds", v)
			}
			o.metaTimeout = n
			return nil
		}},
	{"etcd-cmd", "PATH", constant("none"),
		"etcd executable to launch when no etcd answers at the first --etcd-endpoint and that\n" +
			"endpoint is on this machine (upstream's behaviour); the daemon stops it when it stops.\n" +
			"An endpoint of another machine is waited for instead (implies --meta etcd)",
		func(o *settings, v string) error {
			if v == "" {
				return errors.New("--etcd-cmd must not be empty")
			}
			o.EtcdCmd = v
			return nil
		}},
	{"etcd-data-dir", "DIR", constant("a temporary directory, removed at exit"),
		"data directory of the etcd --etcd-cmd launches (implies --meta etcd)",
		func(o *settings, v string) error { o.EtcdDataDir = v; return nil }},
	{"skip-launch-etcd", "", constant("true"),
		"upstream's: false makes upstream join a running etcd as a new member; here etcd is only\n" +
			"launched (--etcd-cmd) when none answers, so false is accepted with a warning",
		warnOnly("skip-launch-etcd", "joining a running etcd cluster as a new member is not supported; "+
			"etcd is launched (--etcd-cmd) only when none answers", nil, func(v string) bool { return v == "true" })},
	{"redis-endpoint", "URL", constant("none"), "upstream's redis backend: not supported (a warning)",
		warnOnly("redis-endpoint", "the redis metadata backend is not supported here; use etcd", nil, nil)},
	{"redis-prefix", "PREFIX", constant("none"), "upstream's redis backend: not supported (a warning)",
		warnOnly("redis-prefix", "the redis metadata backend is not supported here; use etcd", nil, nil)},
	{"redis-cmd", "PATH", constant("none"), "upstream's redis backend: not supported (a warning)",
		warnOnly("redis-cmd", "the redis metadata backend is not supported here; use etcd", nil, nil)},
	{"allocator", "NAME", constant("this daemon's own"),
		"upstream's dlmalloc or mimalloc: accepted with a warning (the arena has one allocator here)",
		warnOnly("allocator", "ignored: this daemon has one allocator of its own", func(v string) error {
			if v != "dlmalloc" && v != "mimalloc" {
				return errors.New("want dlmalloc or mimalloc")
			}
			return nil
		}, nil)},
	{"stream-threshold", "PERCENT", constant("80"),
		"upstream's share of the memory streams may hold: accepted with a warning, not enforced here",
		warnOnly("stream-threshold", "not enforced: a stream holds at most --stream-capacity chunks here", func(v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 100 {
				return errors.New("want a percentage from 0 to 100")
			}
			return nil
		}, nil)},
	{"rdma-endpoint", "HOST:PORT", constant("none"), "upstream's RDMA transport: not supported (a warning)",
		warnOnly("rdma-endpoint", "RDMA is not supported here; peers move blobs over the gRPC peer service", nil, isEmpty)},
	{"sync-crds", "", constant("false"),
		"upstream's mirroring of persisted objects into Kubernetes CRDs (also VINEYARD_SYNC_CRDS=1):\n" +
			"accepted with a warning, since this daemon has no Kubernetes API client",
		warnOnly("sync-crds", "CRD sync is not supported here (no Kubernetes API client): objects are not mirrored to CRDs",
			nil, isFalse)},
	{"compression", "", constant("true (upstream's)"),
		"upstream's zstd compression of migration and spill files: accepted, with a warning when true",
		warnOnly("compression", "ignored: transfers between daemons are not compressed here", nil, isFalse)},
	{"metrics", "", constant("false"),
		"serve Prometheus metrics (upstream's --metrics, which logged them): the HTTP listener of\n" +
			"--metrics-port, on port " + strconv.Itoa(server.DefaultMetricsPort) + " when that is not given",
		boolSetter(func(o *settings) *bool { return &o.metrics })},
	{"prometheus", "", constant("false"), "upstream's older name of --metrics",
		boolSetter(func(o *settings) *bool { return &o.metrics })},
	{"coredump", "", constant("false"),
		"on a crash, abort with a core dump (Go's GOTRACEBACK=crash) instead of exiting",
		func(o *settings, v string) error { o.coredump = v == "true"; return nil }},
	{"htpasswd", "FILE", constant("none"),
		"upstream's password file: not supported (a warning); TCP clients authenticate with\n" +
			"--rpc-auth-file, and off loopback the RPC listener needs it",
		warnOnly("htpasswd", "not supported: TCP clients authenticate with --rpc-auth-file here", nil, isEmpty)},
}

func init() {
	for _, f := range upstreamFlags {
		if have, _ := lookup(f.name); have == nil {
			flags = append(flags, f)
		}
	}
}

// finishUpstream applies what upstream's flags say once every flag is read.
func (o *settings) finishUpstream() error {
	if o.metaTimeout > 0 && o.Meta == "etcd" && o.EtcdTimeout == 0 {
		o.EtcdTimeout = secondsDuration(o.metaTimeout)
	}
	if os.Getenv("VINEYARD_SYNC_CRDS") == "1" {
		o.warn("sync-crds", "CRD sync is not supported here (no Kubernetes API client): objects are not mirrored to CRDs")
	}
	port := o.metricsPort
	if port < 0 {
		port = 0
		if o.metrics {
			port = server.DefaultMetricsPort
		}
	}
	o.MetricsEndpoint = ""
	if port > 0 {
		o.MetricsEndpoint = net.JoinHostPort(o.metricsHost, strconv.Itoa(port))
	}
	return nil
}
