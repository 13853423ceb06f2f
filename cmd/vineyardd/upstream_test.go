package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/v6d-io/v6d-go/internal/client"
	"github.com/v6d-io/v6d-go/internal/etcdtest"
	"github.com/v6d-io/v6d-go/internal/ids"
)

// upstreamFlagNames are the flags of upstream vineyardd 0.24.4's --help
// (src/server/util/spec_resolvers.cc, src/server/memory/malloc.cc) and
// glog's -log_dir: every one must be accepted.
var upstreamFlagNames = []string{"deployment", "meta", "meta_timeout", "skip_launch_etcd", "etcd_endpoint", "etcd_prefix",
	"etcd_cmd", "etcd_data_dir", "redis_endpoint", "redis_prefix", "redis_cmd", "size", "allocator", "stream_threshold",
	"spill_path", "spill_lower_rate", "spill_upper_rate", "socket", "rpc", "rpc_socket_port", "rdma_endpoint",
	"sync_crds", "compression", "prometheus", "metrics", "coredump", "htpasswd", "reserve_memory", "log_dir"}

// TestEveryUpstreamFlagAccepted: each upstream flag parses with a typical
// value, and those not supported here give one warning each.
func TestEveryUpstreamFlagAccepted(t *testing.T) {
	values := map[string]string{"deployment": "distributed", "meta": "etcd", "meta_timeout": "60", "size": "256Mi",
		"allocator": "mimalloc", "stream_threshold": "80", "spill_lower_rate": "0.3", "spill_upper_rate": "0.8",
		"rpc_socket_port": "9600", "etcd_endpoint": "http://127.0.0.1:2379", "etcd_prefix": "/vineyard"}
	for _, name := range upstreamFlagNames {
		f, _ := lookup(strings.ReplaceAll(name, "_", "-"))
		if f == nil {
			t.Errorf("--%s is not a flag", name)
			continue
		}
		args := []string{"--" + name}
		if f.arg != "" {
			v, ok := values[name]
			if !ok {
				v = "/some/where"
			}
			args = append(args, v)
		}
		if _, err := parseArgs(args); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
	o, err := parseArgs([]string{"--sync_crds", "true", "--compression", "--allocator=dlmalloc", "--htpasswd", "/etc/pw",
		"--spill_path", "/tmp/s", "--spill_lower_rate", "0.3", "--spill_upper_rate", "0.8", "--skip_launch_etcd=true",
		"--nosync_crds"})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.warnings) != 4 { // sync_crds, compression, allocator, htpasswd (spilling is implemented)
		t.Errorf("warnings %q, want 4", o.warnings)
	}
	if o, err := parseArgs([]string{"--sync_crds", "false", "--compression=false", "--skip_launch_etcd", "true"}); err != nil ||
		len(o.warnings) != 0 {
		t.Errorf("flags that ask for what this daemon does warn: %q, %v", o.warnings, err)
	}
}

// TestUpstreamMeaning: upstream's spellings mean what they mean upstream.
func TestUpstreamMeaning(t *testing.T) {
	o, err := parseArgs([]string{"--etcd_endpoint", "http://e:2379", "--etcd_cmd", "etcd", "--meta_timeout", "7",
		"--deployment", "distributed", "--size", "", "--metrics"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Meta != "etcd" || o.EtcdCmd != "etcd" || o.EtcdTimeout != 7*time.Second || o.Deployment != "distributed" ||
		o.MetricsEndpoint != fmt.Sprintf("127.0.0.1:%d", 9610) {
		t.Fatalf("%+v", o)
	}
	if o, err := parseArgs(nil); err != nil || o.Meta != "local" || o.MetricsEndpoint != "" {
		t.Fatalf("no etcd flag: meta %q, metrics %q, %v", o.Meta, o.MetricsEndpoint, err)
	}
	if o, err := parseArgs([]string{"--metrics", "--metrics-port", "0"}); err != nil || o.MetricsEndpoint != "" {
		t.Fatalf("--metrics-port 0: %q, %v", o.MetricsEndpoint, err)
	}
	if o, err := parseArgs([]string{"--metrics-port=9999", "--metrics-host", "0.0.0.0"}); err != nil || o.MetricsEndpoint != "0.0.0.0:9999" {
		t.Fatalf("--metrics-port 9999: %q, %v", o.MetricsEndpoint, err)
	}
	if o, err := parseArgs([]string{"-v", "2", "--log-format", "json", "-log_dir", "/x"}); err != nil || o.logLevel.String() != "DEBUG" ||
		o.logFormat != "json" || o.logDir != "/x" {
		t.Fatalf("log flags: %+v, %v", o, err)
	}
}

// daemon is a vineyardd run in this process by run().
type daemon struct {
	info   readyInfo
	stderr *lockedBuffer
	code   chan int
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startDaemon runs the daemon with args (plus --ready-fd) and waits until
// it is ready. Every daemon of the test stops at stopDaemons.
func startDaemon(t *testing.T, args []string) *daemon {
	t.Helper()
	r, w := readyPipe(t)
	d := &daemon{stderr: &lockedBuffer{}, code: make(chan int, 1)}
	go func() { d.code <- run(append(args, "--ready-fd", strconv.Itoa(w)), io.Discard, d.stderr) }()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatalf("%q did not start: %v\n%s", args, err, d.stderr.String())
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "READY ")), &d.info); err != nil {
		t.Fatalf("ready line %q: %v", line, err)
	}
	return d
}

// stopDaemons stops every daemon run in this process (SIGTERM reaches
// each one's signal channel) and checks they exit cleanly.
func stopDaemons(t *testing.T, ds ...*daemon) {
	t.Helper()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if c := <-d.code; c != 0 {
			t.Errorf("exit %d\n%s", c, d.stderr.String())
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// putPersistGet puts a tensor with one blob of n bytes on the daemon at
// from, persists it, and gets it back through the daemon at to (the
// metadata as persisted, the bytes by a migration to it).
func putPersistGet(t *testing.T, from, to string, n int) {
	t.Helper()
	a, err := client.Connect(from)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	bid, buf, err := a.CreateBuffer(uint64(n))
	if err != nil {
		t.Fatal(err)
	}
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	tree := fmt.Sprintf(`{"typename":"vineyard::Tensor<uint8>","shape_":"[%d]","nbytes":%d,"buffer_":{"id":%q}}`, n, n, bid.String())
	id, err := a.Create([]byte(tree), []ids.ObjectID{bid})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Persist(id); err != nil {
		t.Fatal(err)
	}
	b, err := client.Connect(to)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.InstanceID() == a.InstanceID() {
		t.Fatalf("both daemons are instance %d", a.InstanceID())
	}
	meta, err := b.GetMetadata(id)
	if err != nil {
		t.Fatalf("the persisted object on the second daemon: %v", err)
	}
	if !strings.Contains(string(meta), fmt.Sprintf(`"shape_":"[%d]"`, n)) {
		t.Fatalf("metadata on the second daemon: %s", meta)
	}
	local, err := b.Migrate(id)
	if err != nil {
		t.Fatalf("migrate to the second daemon: %v", err)
	}
	lt, err := b.GetObject(local)
	if err != nil {
		t.Fatal(err)
	}
	var tt struct {
		Buffer struct {
			ID string `json:"id"`
		} `json:"buffer_"`
	}
	if err := json.Unmarshal(lt, &tt); err != nil {
		t.Fatal(err)
	}
	lb, err := ids.Parse(tt.Buffer.ID)
	if err != nil {
		t.Fatalf("local copy %s: %v", lt, err)
	}
	got, err := b.Get(lb)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("got %d bytes, want %d", len(got), n)
	}
	for i := range got {
		if got[i] != byte(i*7) {
			t.Fatalf("byte %d: %d, want %d", i, got[i], byte(i*7))
		}
	}
	_ = b.Release(lb)
}

// TestOperatorCommandLine runs the command line upstream's Kubernetes
// operator gives vineyardd (k8s/pkg/templates/vineyardd), with the socket,
// paths and ports made local and free, against a real etcd, twice: an
// object put and persisted on one daemon is got from the other; each
// unsupported flag (--sync_crds, --stream_threshold) warned once; -log_dir
// got the log; --metrics serves.
func TestOperatorCommandLine(t *testing.T) {
	etcd := etcdtest.Run(t)
	dir := t.TempDir()
	operator := func(name string, metricsPort int) []string {
		return append(strings.Fields(fmt.Sprintf("--sync_crds true --socket %s/%s.sock --size 256Mi --reserve_memory "+
			"--stream_threshold 80 --etcd_cmd etcd --etcd_prefix /vineyard --etcd_endpoint %s "+
			"--spill_path %s/spill --spill_lower_rate 0.3 --spill_upper_rate 0.8 --metrics -log_dir %s/log-%s/",
			dir, name, etcd.Endpoint(), dir, dir, name)),
			// Made local and free: any TCP port, the metrics on one free now.
			"--rpc_socket_port", "0", "--metrics-port", strconv.Itoa(metricsPort))
	}
	portA := freePort(t)
	a := startDaemon(t, operator("a", portA))
	b := startDaemon(t, operator("b", freePort(t)))
	putPersistGet(t, a.info.Socket, b.info.Socket, 1<<20)

	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", portA)) //nolint:noctx // loopback test
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz: %d", resp.StatusCode)
	}
	resp, err = http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", portA)) //nolint:noctx // loopback test
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !strings.Contains(string(body), `vineyard_requests_total{type="persist_request"} 1`) {
		t.Errorf("/metrics lacks the persist:\n%s", body)
	}
	stopDaemons(t, a, b)

	logA := a.stderr.String()
	for _, flag := range []string{"--sync-crds", "--stream-threshold"} {
		if n := strings.Count(logA, "not supported here: "+flag+":"); n != 1 {
			t.Errorf("%d warnings of %s, want 1:\n%s", n, flag, logA)
		}
	}
	if n := strings.Count(logA, "upstream flag accepted"); n != 2 {
		t.Errorf("%d warnings, want 2:\n%s", n, logA)
	}
	file, err := os.ReadFile(filepath.Join(dir, "log-a", logFileName))
	if err != nil || !strings.Contains(string(file), "vineyardd ready") || !strings.Contains(string(file), "meta=etcd") {
		t.Errorf("-log_dir's file: %v\n%s", err, file)
	}
}

// TestEtcdCmdLaunchesEtcd: with --etcd_cmd and no etcd at a local
// endpoint, the first daemon launches one (here cmd/v6d-etcd, which takes
// etcd's flags), a second daemon uses it, an object crosses, and the etcd
// stops with the daemon that launched it.
func TestEtcdCmdLaunchesEtcd(t *testing.T) {
	dir := t.TempDir()
	etcdBin := os.Getenv("V6D_ETCD") // build/v6d-etcd under make test
	if etcdBin == "" {
		if testing.Short() {
			t.Skip("builds cmd/v6d-etcd (or set V6D_ETCD)")
		}
		etcdBin = filepath.Join(dir, "v6d-etcd")
		if out, err := exec.Command("go", "build", "-o", etcdBin, "../v6d-etcd").CombinedOutput(); err != nil {
			t.Fatalf("go build ../v6d-etcd: %v\n%s", err, out)
		}
	}
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	args := func(name string) []string {
		return []string{"--socket", filepath.Join(dir, name+".sock"), "--size", "32Mi", "--norpc",
			"--etcd_endpoint", endpoint, "--etcd_cmd", etcdBin, "--etcd_prefix", "/launch-test"}
	}
	a := startDaemon(t, args("a"))
	if !strings.Contains(a.stderr.String(), "launched one") {
		t.Fatalf("no etcd launched:\n%s", a.stderr.String())
	}
	b := startDaemon(t, args("b"))
	if strings.Contains(b.stderr.String(), "launched one") {
		t.Fatalf("the second daemon launched an etcd too:\n%s", b.stderr.String())
	}
	putPersistGet(t, a.info.Socket, b.info.Socket, 4096)
	stopDaemons(t, a, b)
	if c, err := net.DialTimeout("tcp", strings.TrimPrefix(endpoint, "http://"), time.Second); err == nil {
		_ = c.Close()
		t.Fatal("the launched etcd still serves after its daemon stopped")
	}
}

// TestLogFormatJSON: with --log-format json every log line is a JSON object,
// in the -log_dir file too.
func TestLogFormatJSON(t *testing.T) {
	var stderr bytes.Buffer
	dir := t.TempDir()
	// The warning is logged, then the start fails (the socket's directory
	// cannot be made): the log is all there is.
	code := run([]string{"--log-format", "json", "-log_dir", dir, "--sync_crds", "--socket", "/proc/x/v.sock",
		"--size", "4Mi", "--norpc"}, io.Discard, &stderr)
	if code != 1 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	file, err := os.ReadFile(filepath.Join(dir, logFileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{stderr.String(), string(file)} {
		var lines int
		for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
			if !strings.HasPrefix(line, "{") {
				continue // the failure itself, printed for the operator
			}
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["level"] == nil || rec["msg"] == nil {
				t.Errorf("not a JSON log record: %q (%v)", line, err)
			}
			lines++
		}
		if lines == 0 || !strings.Contains(out, `"level":"WARN"`) {
			t.Errorf("no JSON warning in %q", out)
		}
	}
}
