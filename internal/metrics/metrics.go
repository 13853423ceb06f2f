// Package metrics is the daemon's observability seam: counters, gauges and
// histograms, each with a name and help text, registered per package in a
// Registry that the daemon's config carries (server.Config.Metrics). There
// is no global state: two daemons in one process (tests) keep apart.
//
// Updating a metric is an atomic operation and allocates nothing, so the
// request path may count (a CounterVec with a fixed set of label values is
// indexed, not looked up). Reading is safe at any time. A Registry is a
// prometheus.Collector (prom.go, the one place the exposition is made, by
// github.com/prometheus/client_golang): the daemon's HTTP listener
// registers it with Prometheus' registry and serves it with promhttp;
// WriteText writes the same text for tests and tools.
//
// Names follow Prometheus' conventions: snake_case, a unit suffix, _total
// for counters. Registering a name twice panics: it is a programming error,
// found by the first test that starts a daemon.
package metrics

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Registry holds a daemon's metrics. The zero value is not usable: use
// NewRegistry. Its methods are safe for concurrent use.
type Registry struct {
	mu      sync.Mutex
	metrics map[string]metric
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{metrics: make(map[string]metric)} }

// metric is one registered metric, as Collect sees it (prom.go).
type metric interface {
	desc() (name, help, typ string)
	promDesc() *prometheus.Desc
	collect(ch chan<- prometheus.Metric)
}

func (r *Registry) register(name string, m metric) {
	if name == "" || strings.ContainsAny(name, " {}\"\n") {
		panic(fmt.Sprintf("metrics: bad name %q", name))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.metrics[name]; dup {
		panic(fmt.Sprintf("metrics: %s registered twice", name))
	}
	r.metrics[name] = m
}

// described is a metric's name, help and type, and its Prometheus
// descriptor (made at registration, with the label of a vector).
type described struct {
	name, help, typ string
	pd              *prometheus.Desc
}

func newDescribed(name, help, typ string, label ...string) described {
	return described{name, help, typ, prometheus.NewDesc(name, help, label, nil)}
}

func (d described) desc() (string, string, string) { return d.name, d.help, d.typ }

// Counter is a count that only grows.
type Counter struct {
	described
	n atomic.Uint64
}

// Counter registers and returns a counter.
func (r *Registry) Counter(name, help string) *Counter {
	c := &Counter{described: newDescribed(name, help, "counter")}
	r.register(name, c)
	return c
}

// Inc adds 1.
func (c *Counter) Inc() { c.n.Add(1) }

// Add adds n.
func (c *Counter) Add(n uint64) { c.n.Add(n) }

// Value returns the count.
func (c *Counter) Value() uint64 { return c.n.Load() }

// CounterVec is a counter per value of one label, from a set fixed when it
// is registered, indexed by the value's position: counting costs one atomic
// add. Values given as "" are not exposed (holes in an index space).
type CounterVec struct {
	described
	label  string
	values []string
	n      []atomic.Uint64
}

// CounterVec registers a counter per value of label.
func (r *Registry) CounterVec(name, help, label string, values []string) *CounterVec {
	c := &CounterVec{described: newDescribed(name, help, "counter", label), label: label, values: slices.Clone(values),
		n: make([]atomic.Uint64, len(values))}
	r.register(name, c)
	return c
}

// Inc adds 1 to the counter of the i-th value; an i out of range is ignored.
func (c *CounterVec) Inc(i int) {
	if uint(i) < uint(len(c.n)) {
		c.n[i].Add(1)
	}
}

// Add adds n to the counter of the i-th value; an i out of range is ignored.
func (c *CounterVec) Add(i int, n uint64) {
	if uint(i) < uint(len(c.n)) {
		c.n[i].Add(n)
	}
}

// Value returns the count of the i-th value (0 out of range).
func (c *CounterVec) Value(i int) uint64 {
	if uint(i) < uint(len(c.n)) {
		return c.n[i].Load()
	}
	return 0
}

// CounterMap is a counter per value of one label, values added as they come
// (under a lock: for rare events such as errors, not the request path).
type CounterMap struct {
	described
	label string
	mu    sync.Mutex
	n     map[string]uint64
}

// CounterMap registers a counter per value of label, made on first use.
func (r *Registry) CounterMap(name, help, label string) *CounterMap {
	c := &CounterMap{described: newDescribed(name, help, "counter", label), label: label, n: make(map[string]uint64)}
	r.register(name, c)
	return c
}

// Inc adds 1 to the counter of value.
func (c *CounterMap) Inc(value string) {
	c.mu.Lock()
	c.n[value]++
	c.mu.Unlock()
}

// Value returns the count of value.
func (c *CounterMap) Value(value string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[value]
}

// Gauge is a value that goes up and down.
type Gauge struct {
	described
	v atomic.Int64
}

// Gauge registers and returns a gauge.
func (r *Registry) Gauge(name, help string) *Gauge {
	g := &Gauge{described: newDescribed(name, help, "gauge")}
	r.register(name, g)
	return g
}

// Set sets the value.
func (g *Gauge) Set(v int64) { g.v.Store(v) }

// Add adds d (negative: subtracts).
func (g *Gauge) Add(d int64) { g.v.Add(d) }

// Value returns the value.
func (g *Gauge) Value() int64 { return g.v.Load() }

// GaugeFunc is a gauge whose value a function computes when read, for
// values kept elsewhere (the arena's use, the connections open).
type GaugeFunc struct {
	described
	f func() int64
}

// GaugeFunc registers a gauge read from f; f must be safe to call at any
// time from any goroutine.
func (r *Registry) GaugeFunc(name, help string, f func() int64) *GaugeFunc {
	g := &GaugeFunc{described: newDescribed(name, help, "gauge"), f: f}
	r.register(name, g)
	return g
}

// Value returns f's value now.
func (g *GaugeFunc) Value() int64 { return g.f() }

// Histogram counts observations in buckets of fixed upper bounds.
type Histogram struct {
	described
	bounds []float64       // ascending upper bounds; +Inf implied
	n      []atomic.Uint64 // per bucket (not cumulative), the last for +Inf
	sum    atomic.Uint64   // float64 bits
	count  atomic.Uint64
}

// Histogram registers a histogram with the given ascending upper bounds.
func (r *Registry) Histogram(name, help string, bounds []float64) *Histogram {
	if !slices.IsSorted(bounds) {
		panic(fmt.Sprintf("metrics: %s: bounds not ascending", name))
	}
	h := &Histogram{described: newDescribed(name, help, "histogram"), bounds: slices.Clone(bounds),
		n: make([]atomic.Uint64, len(bounds)+1)}
	r.register(name, h)
	return h
}

// Observe records v.
func (h *Histogram) Observe(v float64) {
	i, _ := slices.BinarySearch(h.bounds, v)
	h.n[i].Add(1)
	h.count.Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// Count returns how many values were observed.
func (h *Histogram) Count() uint64 { return h.count.Load() }

// Sum returns the sum of the values observed.
func (h *Histogram) Sum() float64 { return math.Float64frombits(h.sum.Load()) }

// GaugeFuncVec is a gauge per value of one label, from a set fixed when it
// is registered, each read by calling f with the value's position.
type GaugeFuncVec struct {
	described
	values []string
	f      func(i int) int64
}

// GaugeFuncVec registers a gauge per value of label, read from f; f must be
// safe to call at any time from any goroutine.
func (r *Registry) GaugeFuncVec(name, help, label string, values []string, f func(i int) int64) *GaugeFuncVec {
	g := &GaugeFuncVec{described: newDescribed(name, help, "gauge", label), values: slices.Clone(values), f: f}
	r.register(name, g)
	return g
}

// Value returns the i-th gauge's value now.
func (g *GaugeFuncVec) Value(i int) int64 { return g.f(i) }
