package metrics

import (
	"strings"
	"sync"
	"testing"
	"time"
)

func TestWriteText(t *testing.T) {
	r := NewRegistry()
	c := r.Counter("things_total", "Things done.")
	v := r.CounterVec("requests_total", "Requests by type.", "type", []string{"", "get", "put"})
	m := r.CounterMap("errors_total", "Errors by code.", "code")
	g := r.Gauge("open", "Open\nthings \\ now.")
	r.GaugeFunc("limit_bytes", "The limit.", func() int64 { return 1 << 30 })
	h := r.Histogram("latency_seconds", "Latency.", []float64{0.001, 0.01})
	c.Add(3)
	v.Inc(1)
	v.Inc(2)
	v.Inc(2)
	v.Inc(7) // out of range: ignored
	m.Inc(`Object"NotExists`)
	g.Add(5)
	g.Add(-2)
	h.Observe(0.0005)
	h.Observe(0.005)
	h.Observe(1)
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := `# HELP errors_total Errors by code.
# TYPE errors_total counter
errors_total{code="Object\"NotExists"} 1
# HELP latency_seconds Latency.
# TYPE latency_seconds histogram
latency_seconds_bucket{le="0.001"} 1
latency_seconds_bucket{le="0.01"} 2
latency_seconds_bucket{le="+Inf"} 3
latency_seconds_sum 1.0055
latency_seconds_count 3
# HELP limit_bytes The limit.
# TYPE limit_bytes gauge
limit_bytes 1.073741824e+09
# HELP open Open\nthings \\ now.
# TYPE open gauge
open 3
# HELP requests_total Requests by type.
# TYPE requests_total counter
requests_total{type="get"} 1
requests_total{type="put"} 2
# HELP things_total Things done.
# TYPE things_total counter
things_total 3
`
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
	if c.Value() != 3 || v.Value(2) != 2 || v.Value(9) != 0 || m.Value(`Object"NotExists`) != 1 || g.Value() != 3 ||
		h.Count() != 3 {
		t.Fatal("values")
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	r := NewRegistry()
	r.Counter("x_total", "x")
	defer func() {
		if recover() == nil {
			t.Fatal("a second x_total was registered")
		}
	}()
	r.Gauge("x_total", "again")
}

// TestConcurrentUpdates: updates from many goroutines all count (run with
// -race), and no registry is shared between two NewRegistry calls.
func TestConcurrentUpdates(t *testing.T) {
	r, other := NewRegistry(), NewRegistry()
	c := r.Counter("n_total", "n")
	other.Counter("n_total", "n") // no global state: the same name in another registry
	h := r.Histogram("h", "h", []float64{1})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				c.Inc()
				h.Observe(0.5)
			}
		}()
	}
	wg.Wait()
	if c.Value() != 8000 || h.Count() != 8000 || h.Sum() != 4000 {
		t.Fatalf("counter %d, histogram %d/%g", c.Value(), h.Count(), h.Sum())
	}
}

func BenchmarkCounterVecInc(b *testing.B) {
	v := NewRegistry().CounterVec("r_total", "r", "type", []string{"a", "b"})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		v.Inc(i & 1)
	}
}

// BenchmarkRequestTiming is what the daemon adds per request while its
// metrics listener runs: two clock reads and a histogram observation.
func BenchmarkRequestTiming(b *testing.B) {
	v := NewRegistry().HistogramVec("d_seconds", "d", "type", []string{"a", "b"},
		[]float64{1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		v.Observe(i&1, time.Since(start).Seconds())
	}
}
