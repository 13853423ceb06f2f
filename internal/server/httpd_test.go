package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/v6d-io/v6d-go/internal/etcdtest"
	"github.com/v6d-io/v6d-go/internal/ids"
)

// httpGet returns the status and body of GET url.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url) //nolint:noctx // a test against a loopback listener
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// scrape reads a daemon's /metrics and parses it with Prometheus' parser.
func scrape(t *testing.T, s *Server) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := httpGet(t, "http://"+s.MetricsEndpoint()+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}
	return mfs
}

// sample returns the value of the sample of family name whose labels
// include the given label=value pairs (none: the first sample).
func sample(t *testing.T, mfs map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	mf, ok := mfs[name]
	if !ok {
		t.Fatalf("/metrics has no %s", name)
	}
next:
	for _, m := range mf.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	t.Fatalf("/metrics has no %s%v", name, labels)
	return 0
}

// TestMetricsEndpoint: a daemon with a metrics listener serves its counts
// in Prometheus' format (Prometheus' own parser reads them), request
// durations by type, the Go runtime's metrics, and /healthz and /readyz.
func TestMetricsEndpoint(t *testing.T) {
	s := startCfg(t, Config{MetricsEndpoint: "127.0.0.1:0", Size: 8 << 20})
	r := dial(t, s)
	r.rpc(`{"type":"register_request","version":"0.24.0"}`)
	for range 3 {
		r.rpc(`{"type":"exists_request","id":1}`)
	}
	r.rpc(`{"type":"get_name_request","name":"nope","wait":false}`)
	r.rpc(`{"type":"create_data_request","content":{"typename":"vineyard::Scalar","value_":"1"}}`)
	mfs := scrape(t, s)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"vineyard_requests_total", []string{"type", "exists_request"}, 3},
		{"vineyard_request_duration_seconds", []string{"type", "exists_request"}, 3},
		{"vineyard_request_errors_total", []string{"code", "ObjectNotExists"}, 1},
		{"vineyard_connections", []string{"listener", "ipc"}, 1},
		{"vineyard_connections", []string{"listener", "rpc"}, 0},
		{"vineyard_connections_accepted_total", []string{"listener", "ipc"}, 1},
		{"vineyard_objects", nil, 1},
		{"vineyard_memory_limit_bytes", nil, 8 << 20},
		{"vineyard_memory_spilled_bytes", nil, 0},
		{"vineyard_streams", nil, 0},
		{"vineyard_peer_transfers_total", []string{"direction", "in"}, 0},
		{"vineyard_store_events_total", []string{"kind", "created"}, 1},
	} {
		if got := sample(t, mfs, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if _, ok := mfs["go_goroutines"]; !ok {
		t.Error("/metrics lacks the Go runtime's metrics")
	}
	for name := range mfs {
		if !strings.HasPrefix(name, "vineyard_") && !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") &&
			!strings.HasPrefix(name, "promhttp_") {
			t.Errorf("metric %s has no vineyard_ prefix", name)
		}
	}
	if code, body := httpGet(t, "http://"+s.MetricsEndpoint()+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d %s", code, body)
	}
	if code, body := httpGet(t, "http://"+s.MetricsEndpoint()+"/readyz"); code != http.StatusOK || body != "ready\n" {
		t.Errorf("/readyz: %d %s", code, body)
	}
}

// TestNoMetricsListener: without MetricsEndpoint nothing listens and no
// request is timed.
func TestNoMetricsListener(t *testing.T) {
	s := startCfg(t, Config{})
	r := dial(t, s)
	r.rpc(`{"type":"register_request","version":"0.24.0"}`)
	if s.MetricsEndpoint() != "" || s.m.timed || s.m.durations.Count(0)+s.m.durations.Count(1) != 0 {
		t.Fatalf("metrics listener %q, timed %v", s.MetricsEndpoint(), s.m.timed)
	}
}

// waitStatus polls url until it answers want (a readiness probe's view).
func waitStatus(t *testing.T, url string, want int) string {
	t.Helper()
	var code int
	var body string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if code, body = httpGet(t, url); code == want {
			return body
		}
	}
	t.Fatalf("%s: %d %q, want %d", url, code, body, want)
	return ""
}

// TestReadyzFollowsEtcd: with the etcd backend the daemon is ready while
// etcd answers, not ready while it is away (saying why), ready again once
// it is back; /healthz stays ok throughout; the etcd metrics count calls.
func TestReadyzFollowsEtcd(t *testing.T) {
	srv := etcdtest.Run(t)
	s := startCfg(t, Config{Meta: "etcd", EtcdEndpoints: []string{srv.Endpoint()}, EtcdPrefix: "readyz-test",
		EtcdTimeout: time.Second, EtcdLeaseTTL: 2 * time.Second, MetricsEndpoint: "127.0.0.1:0"})
	base := "http://" + s.MetricsEndpoint()
	waitStatus(t, base+"/readyz", http.StatusOK)
	mfs := scrape(t, s)
	if got := sample(t, mfs, "vineyard_etcd_requests_total", "method", "LeaseGrant"); got < 1 {
		t.Errorf("etcd LeaseGrant calls %v", got)
	}
	if got := sample(t, mfs, "vineyard_etcd_lease_held"); got != 1 {
		t.Errorf("lease held %v", got)
	}
	srv.Stop()
	body := waitStatus(t, base+"/readyz", http.StatusServiceUnavailable)
	if !strings.Contains(body, "etcd") {
		t.Errorf("/readyz while etcd is away says %q", body)
	}
	if code, _ := httpGet(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while etcd is away: %d", code)
	}
	r := dial(t, s)
	r.rpc(`{"type":"register_request","version":"0.24.0"}`)
	if got := r.rpc(`{"type":"cluster_meta"}`); got["code"] == nil {
		t.Fatalf("cluster_meta while etcd is away: %v", got)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, base+"/readyz", http.StatusOK)
	mfs = scrape(t, s)
	if got := sample(t, mfs, "vineyard_etcd_lease_held"); got != 1 {
		t.Errorf("lease held after etcd came back: %v", got)
	}
	var errs float64
	for _, m := range mfs["vineyard_etcd_request_errors_total"].GetMetric() {
		errs += m.GetCounter().GetValue()
	}
	if errs < 1 {
		t.Errorf("etcd errors %v: the failed cluster_meta was not counted", errs)
	}
}

// TestMetricsSpilled: spilled bytes and blobs read the store's spill state.
func TestMetricsSpilled(t *testing.T) {
	s := startCfg(t, Config{MetricsEndpoint: "127.0.0.1:0", Size: 8 << 20, SpillPath: t.TempDir()})
	id, err := storeTensor(s, 64<<10, func(b []byte) { b[0] = 1 })
	if err != nil {
		t.Fatal(err)
	}
	ss := s.store.NewSession()
	defer ss.Close()
	if err := ss.Evict([]ids.ObjectID{id}); err != nil {
		t.Fatal(err)
	}
	mfs := scrape(t, s)
	if got := sample(t, mfs, "vineyard_spilled_blobs"); got != 1 {
		t.Errorf("spilled blobs %v, want 1", got)
	}
	if got := sample(t, mfs, "vineyard_memory_spilled_bytes"); got < 64<<10 {
		t.Errorf("spilled bytes %v, want at least %d", got, 64<<10)
	}
}

// TestMetricsPeerTransfers: a migration counts one transfer in on the
// daemon that fetched and one out on the owner, with the blob's bytes.
func TestMetricsPeerTransfers(t *testing.T) {
	etcd := etcdtest.Run(t)
	a := clusterServer(t, etcd, 16<<20)
	b := clusterServer(t, etcd, 16<<20)
	const n = 1<<20 + 3
	id := putTensor(t, a, 3, n)
	synced(t, b)
	if _, err := b.Migrate(migrateCtx(t), id); err != nil {
		t.Fatal(err)
	}
	if in, out := b.m.peerTransfers.Value(peerIn), a.m.peerTransfers.Value(peerOut); in != 1 || out != 1 {
		t.Errorf("transfers in %d (fetcher), out %d (owner); want 1 and 1", in, out)
	}
	if in, out := b.m.peerBytes.Value(peerIn), a.m.peerBytes.Value(peerOut); in != n || out != n {
		t.Errorf("bytes in %d, out %d; want %d", in, out, n)
	}
	var text strings.Builder
	if err := b.Metrics().WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if want := `vineyard_peer_bytes_total{direction="in"} 1.048579e+06`; !strings.Contains(text.String(), want) {
		t.Errorf("metrics lack %s", want)
	}
}
