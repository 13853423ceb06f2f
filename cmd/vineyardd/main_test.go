package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/v6d-io/v6d-go/internal/memsize"
	"github.com/v6d-io/v6d-go/internal/server"
)

func TestParseArgsSpellings(t *testing.T) {
	for _, args := range [][]string{
		{"--socket=/tmp/x.sock", "--size=64Mi", "--reserve_memory", "--meta=local", "--norpc", "--log_level=debug"},
		{"--socket", "/tmp/x.sock", "--size", "64Mi", "--reserve-memory", "--meta", "local", "--rpc=false", "--log-level", "debug"},
		{"-socket", "/tmp/x.sock", "-size=64Mi", "-reserve_memory=true", "--no-rpc", "-log-level=debug"},
	} {
		o, err := parseArgs(args)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if o.Socket != "/tmp/x.sock" || o.Size != 64<<20 || !o.ReserveMemory || o.Meta != "local" || o.logLevel != slog.LevelDebug || o.RPCEndpoint != "" {
			t.Fatalf("%q: got %+v", args, o)
		}
	}
	o, err := parseArgs(nil)
	if err != nil || o.Size != memsize.DefaultSize() || o.SocketMode != 0o600 || o.ReserveMemory || o.Socket != server.DefaultSocket() ||
		o.PrefaultAhead != server.DefaultPrefaultAhead || o.MaxConnections != min(server.DefaultMaxConnections, server.MappingBudget()) || o.PeerEndpoint != "" {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
	if o, err := parseArgs([]string{"--reserve_memory=false", "--allow-overcommit"}); err != nil || o.ReserveMemory || !o.AllowOvercommit {
		t.Fatalf("booleans: %+v, %v", o, err)
	}
	o, err = parseArgs([]string{"--max_connections", "10", "--max-inflight-bytes=1Mi", "--max-reply-bytes", "2Mi",
		"--frame-timeout=5s", "--check_invariants=1s"})
	if err != nil || o.MaxConnections != 10 || o.MaxInflightBytes != 1<<20 || o.MaxReplyBytes != 2<<20 ||
		o.FrameTimeout != 5*time.Second || o.checkInvariants != time.Second {
		t.Fatalf("limits: %+v, %v", o, err)
	}
	for args, want := range map[string]int64{"": server.DefaultPrefaultAhead, "--prefault-ahead=128Mi": 128 << 20, "--prefault_ahead=0": -1} {
		o, err := parseArgs(strings.Fields(args))
		if err != nil || o.PrefaultAhead != want {
			t.Fatalf("%q: prefault-ahead %d, %v; want %d", args, o.PrefaultAhead, err, want)
		}
	}
	if _, err := parseArgs([]string{"--prefault-ahead", "-1"}); err == nil {
		t.Fatal("--prefault-ahead -1 accepted")
	}
	for args, want := range map[string]uint64{"": 0, "--directory-entries=300000": 300000, "--directory_entries=1": 1} {
		o, err := parseArgs(strings.Fields(args))
		if err != nil || o.DirectoryEntries != want {
			t.Fatalf("%q: directory entries %d, %v; want %d", args, o.DirectoryEntries, err, want)
		}
	}
	for _, bad := range []string{"0", "-1", "16777217", "1Mi"} {
		if _, err := parseArgs([]string{"--directory-entries", bad}); err == nil {
			t.Fatalf("--directory-entries %s accepted", bad)
		}
	}
}

func TestParseArgsSchedBatch(t *testing.T) {
	for args, want := range map[string]server.SchedMode{"": server.SchedAuto, "--sched-batch=auto": server.SchedAuto,
		"--sched-batch=on": server.SchedOn, "--sched_batch=true": server.SchedOn, "--sched-batch=off": server.SchedOff,
		"--sched-batch=false": server.SchedOff} {
		o, err := parseArgs(strings.Fields(args))
		if err != nil || o.SchedBatch != want {
			t.Fatalf("%q: %v, %v; want %v", args, o.SchedBatch, err, want)
		}
	}
	if _, err := parseArgs([]string{"--sched-batch=sometimes"}); err == nil || !strings.Contains(err.Error(), "want auto, on or off") {
		t.Fatalf("--sched-batch=sometimes: %v", err)
	}
}

func TestParseArgsEtcd(t *testing.T) {
	for _, args := range [][]string{
		{"--meta=etcd", "--etcd_endpoint=http://a:1, http://b:2", "--etcd_prefix=/v6d", "--etcd_timeout=2s", "--etcd_lease_ttl=3s"},
		{"--meta", "etcd", "--etcd-endpoint", "http://a:1,http://b:2", "--etcd-prefix", "/v6d", "--etcd-timeout", "2s", "--etcd-lease-ttl", "3s"},
	} {
		o, err := parseArgs(args)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if o.Meta != "etcd" || strings.Join(o.EtcdEndpoints, " ") != "http://a:1 http://b:2" || o.EtcdPrefix != "/v6d" ||
			o.EtcdTimeout != 2*time.Second || o.EtcdLeaseTTL != 3*time.Second {
			t.Fatalf("%q: got %+v", args, o)
		}
	}
}

// TestEtcdUnreachableFailsAtStart: a daemon whose etcd does not answer exits
// with status 1 within its --etcd-timeout, naming the endpoint.
func TestEtcdUnreachableFailsAtStart(t *testing.T) {
	var out, errOut bytes.Buffer
	sock := t.TempDir() + "/v.sock"
	// Port 1 on loopback: nothing listens there, so the connection is refused.
	st := run([]string{"--socket", sock, "--size=16Mi", "--meta=etcd", "--etcd-endpoint=http://127.0.0.1:1",
		"--etcd-timeout=500ms", "--norpc"}, &out, &errOut)
	if st != 1 || !strings.Contains(errOut.String(), "http://127.0.0.1:1") {
		t.Fatalf("status %d, stderr %q; want 1 and the endpoint named", st, errOut.String())
	}
}

func TestParseArgsRefusals(t *testing.T) {
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--meta=local", "--etcd_endpoint=http://127.0.0.1:2379"}, "need --meta etcd"},
		{[]string{"--meta=redis"}, "redis backend is not supported"},
		{[]string{"--allocator=jemalloc"}, "want dlmalloc or mimalloc"},
		{[]string{"--stream_threshold=101"}, "percentage"},
		{[]string{"--spill_upper_rate=2"}, "from 0 to 1"},
		{[]string{"--deployment=cloud"}, "want local or distributed"},
		{[]string{"--meta_timeout=-1"}, "positive number of seconds"},
		{[]string{"--log-format=xml"}, "want text or json"},
		{[]string{"--metrics-port=70000"}, "not a port number"},
		{[]string{"--sync_crds", "maybe"}, "unexpected argument"},
		{[]string{"--meta=local", "--etcd_prefix", "/vineyard"}, "need --meta etcd"},
		{[]string{"--meta=etcd", "--instance-id=3"}, "etcd allocates"},
		{[]string{"--meta=etcd", "--etcd-endpoint= , "}, "names no endpoint"},
		{[]string{"--meta=etcd", "--etcd-prefix=/"}, "must not be empty"},
		{[]string{"--meta=etcd", "--etcd-timeout=0s"}, "not a positive duration"},
		{[]string{"--meta=etcd", "--etcd_lease_ttl=soon"}, "not a positive duration"},
		{[]string{"--rpc_socket_port=96000"}, "not a port number"},
		{[]string{"--rpc-auth-file=/nonexistent/secret"}, "--rpc-auth-file"},
		{[]string{"--size=lots"}, "--size"},
		{[]string{"--size=0"}, "--size must be positive"},
		{[]string{"--size"}, "--size needs a value"},
		{[]string{"--socket-mode=999"}, "octal permission"},
		{[]string{"--log-level=loud"}, "want debug, info"},
		{[]string{"--reserve_memory=maybe"}, "want true or false"},
		{[]string{"--norpc=true"}, "takes no value"},
		{[]string{"--nosize"}, "unknown flag --nosize"},
		{[]string{"--bogus"}, "unknown flag --bogus"},
		{[]string{"extra"}, "unexpected argument"},
		{[]string{"--max-connections=0"}, "not a positive integer"},
		{[]string{"--max_inflight_bytes=-1"}, "--max-inflight-bytes"},
		{[]string{"--max-reply-bytes=0"}, "must be positive"},
		{[]string{"--frame-timeout=soon"}, "not a positive duration"},
		{[]string{"--check-invariants=-1s"}, "not a duration"},
	} {
		_, err := parseArgs(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%q: err %v, want one that says %q", tc.args, err, tc.says)
		}
	}
}

func TestHelpAndVersion(t *testing.T) {
	var out, errOut bytes.Buffer
	if st := run([]string{"--help"}, &out, &errOut); st != 0 {
		t.Fatalf("--help: status %d, stderr %s", st, errOut.String())
	}
	help := out.String()
	for _, f := range flags {
		if !strings.Contains(help, "--"+f.name) {
			t.Errorf("--help does not list --%s", f.name)
		}
	}
	for _, s := range []string{"the Vineyard daemon", "Usage: vineyardd", "(default: 0600)", "(default: local)", "Example:"} {
		if !strings.Contains(help, s) {
			t.Errorf("--help does not say %q", s)
		}
	}
	if strings.Count(help, "(default: ") != len(flags) {
		t.Errorf("--help shows %d defaults for %d flags", strings.Count(help, "(default: "), len(flags))
	}
	out.Reset()
	if st := run([]string{"-h"}, &out, &errOut); st != 0 || out.String() != help {
		t.Fatalf("-h: status %d, differs from --help", st)
	}
	out.Reset()
	if st := run([]string{"--version"}, &out, &errOut); st != 0 || out.String() != "vineyardd "+version+"\n" {
		t.Fatalf("--version: status %d, %q", st, out.String())
	}
	errOut.Reset()
	if st := run([]string{"--bogus"}, &out, &errOut); st != 2 || !strings.Contains(errOut.String(), "vineyardd --help") {
		t.Fatalf("--bogus: status %d, stderr %q", st, errOut.String())
	}
}

func TestSizeOverMemoryRefusedAtStart(t *testing.T) {
	var out, errOut bytes.Buffer
	if st := run([]string{"--socket=/nonexistent/dir/x.sock", "--size=1Ei"}, &out, &errOut); st != 1 ||
		!strings.Contains(errOut.String(), "--size 1 EiB is larger than") || !strings.Contains(errOut.String(), "--allow-overcommit") {
		t.Fatalf("--size=1Ei: status %d, stderr %q", st, errOut.String())
	}
}

func TestParseArgsRPC(t *testing.T) {
	o, err := parseArgs(nil)
	if err != nil || o.RPCEndpoint != "127.0.0.1:9600" || o.RPCSecret != nil || o.RPCInsecure {
		t.Fatalf("rpc defaults (loopback, 9600): %+v, %v", o, err)
	}
	for _, off := range []string{"--norpc", "--no-rpc", "--rpc=false"} {
		if o, err := parseArgs([]string{off}); err != nil || o.RPCEndpoint != "" {
			t.Fatalf("%s: %+v, %v", off, o, err)
		}
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("  s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err = parseArgs([]string{"--rpc_socket_port=9700", "--rpc_host", "0.0.0.0", "--rpc_auth_file", secret, "--rpc-insecure"})
	if err != nil || o.RPCEndpoint != "0.0.0.0:9700" || string(o.RPCSecret) != "s3cret" || !o.RPCInsecure {
		t.Fatalf("rpc flags: %+v, %v", o, err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := parseArgs([]string{"--rpc-auth-file", empty}); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("empty secret file: %v", err)
	}
}

// TestRunRefusesOpenRPC: off loopback without a secret the daemon does not
// start.
func TestRunRefusesOpenRPC(t *testing.T) {
	var stderr bytes.Buffer
	sock := filepath.Join(t.TempDir(), "s.sock")
	if code := run([]string{"--socket", sock, "--size", "4Mi", "--rpc-host", "0.0.0.0", "--rpc-socket-port", "0"},
		io.Discard, &stderr); code != 1 || !strings.Contains(stderr.String(), "--rpc-auth-file") {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
}

// TestReadyFD: with --ready-fd the daemon writes one READY line naming its
// socket once it accepts connections; one that cannot start writes nothing.
func TestReadyFD(t *testing.T) {
	r, w := readyPipe(t)
	sock := filepath.Join(t.TempDir(), "s.sock")
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(t.TempDir(), "notify"), Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer notify.Close()
	t.Setenv("NOTIFY_SOCKET", notify.LocalAddr().String())
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"--socket", sock, "--size=4Mi", "--norpc", "--ready-fd", strconv.Itoa(w)},
			io.Discard, io.Discard)
	}()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatalf("no READY line: %v", err)
	}
	var info readyInfo
	if rest, ok := strings.CutPrefix(line, "READY "); !ok || json.Unmarshal([]byte(rest), &info) != nil || info.Socket != sock {
		t.Fatalf("ready line %q", line)
	}
	nc, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("READY written, but the socket refuses: %v", err)
	}
	_ = nc.Close()
	if b, err := io.ReadAll(r); err != nil || len(b) != 0 {
		t.Fatalf("after the READY line: %q, %v; want the fd closed", b, err)
	}
	buf := make([]byte, 256)
	if n, err := notify.Read(buf); err != nil || !strings.HasPrefix(string(buf[:n]), "READY=1\n") {
		t.Fatalf("NOTIFY_SOCKET got %q, %v; want READY=1", buf[:n], err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if c := <-code; c != 0 {
		t.Fatalf("exit %d", c)
	}

	// The socket another daemon serves: no line, status 1.
	other := filepath.Join(t.TempDir(), "busy.sock")
	ln, err := net.Listen("unix", other)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r2, w2 := readyPipe(t)
	var stderr bytes.Buffer
	if c := run([]string{"--socket", other, "--size=4Mi", "--norpc", "--ready-fd", strconv.Itoa(w2)},
		io.Discard, &stderr); c != 1 || !strings.Contains(stderr.String(), "another daemon") {
		t.Fatalf("busy socket: exit %d, stderr %q", c, stderr.String())
	}
	_ = syscall.Close(w2) // the process's exit would close it
	if b, _ := io.ReadAll(r2); len(b) != 0 {
		t.Fatalf("a daemon that did not start wrote %q", b)
	}
}

// readyPipe returns a pipe for --ready-fd: the read end as a file, the write
// end as a bare fd the daemon closes (no *os.File to close it twice).
func readyPipe(t *testing.T) (*os.File, int) {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	r := os.NewFile(uintptr(fds[0]), "ready-r")
	t.Cleanup(func() { _ = r.Close() })
	return r, fds[1]
}

func TestEtcdSecurityFlags(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := parseArgs([]string{"--meta", "etcd", "--etcd-cacert", "ca.pem", "--etcd-cert", "c.pem", "--etcd-key", "k.pem",
		"--etcd-user", "root", "--etcd-password-file", pw})
	if err != nil || o.EtcdCACert != "ca.pem" || o.EtcdCert != "c.pem" || o.EtcdKey != "k.pem" || o.EtcdUser != "root" || o.EtcdPassword != "s3cret" {
		t.Fatalf("%+v, %v", o, err)
	}
	if _, err := parseArgs([]string{"--etcd-password-file", "/nonexistent"}); err == nil {
		t.Fatal("a missing password file was accepted")
	}
}

// Upstream's spill flags, in both spellings, reach server.Config.
func TestParseArgsSpill(t *testing.T) {
	o, err := parseArgs([]string{"--spill_path", "/tmp/sp", "--spill_lower_rate", "0.2", "--spill-upper-rate=0.7", "--spill-wait", "5s"})
	if err != nil {
		t.Fatal(err)
	}
	if o.SpillPath != "/tmp/sp" || o.SpillLowerRate != 0.2 || o.SpillUpperRate != 0.7 || o.SpillWait != 5*time.Second {
		t.Fatalf("spill settings: %q %v %v %v", o.SpillPath, o.SpillLowerRate, o.SpillUpperRate, o.SpillWait)
	}
	d, err := parseArgs(nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.SpillPath != "" || d.SpillLowerRate != 0.3 || d.SpillUpperRate != 0.8 {
		t.Fatalf("spill defaults: %q %v %v", d.SpillPath, d.SpillLowerRate, d.SpillUpperRate)
	}
	for _, bad := range [][]string{{"--spill-lower-rate", "1.5"}, {"--spill-upper-rate", "x"}, {"--spill-path", ""},
		{"--spill-wait", "-1s"}} {
		if _, err := parseArgs(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
	o, err = parseArgs([]string{"--spill-lower-rate", "0.9", "--spill-upper-rate", "0.5", "--socket", "/tmp/x.sock", "--size", "1Mi"})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err == nil {
		t.Fatal("a lower spill rate above the upper one accepted")
	}
}
