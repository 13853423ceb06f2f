// Package metrics is the daemon's observability seam: counters, gauges and
// histograms, each with a name and help text, registered per package in a
// Registry that the daemon's config carries (server.Config.Metrics). There
// is no global state: two daemons in one process (tests) keep apart.
//
// Updating a metric is an atomic operation and allocates nothing, so the
// request path may count (a CounterVec with a fixed set of label values is
// indexed, not looked up). Reading is safe at any time. WriteText writes
// every metric in Prometheus' text exposition format (version 0.0.4); the
// endpoint that serves it is not here.
//
// Names follow Prometheus' conventions: snake_case, a unit suffix, _total
// for counters. Registering a name twice panics: it is a programming error,
// found by the first test that starts a daemon.
package metrics

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Registry holds a daemon's metrics. The zero value is not usable: use
// NewRegistry. Its methods are safe for concurrent use.
type Registry struct {
	mu      sync.Mutex
	metrics map[string]metric
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{metrics: make(map[string]metric)} }

// metric is one registered metric, as WriteText sees it.
type metric interface {
	desc() (name, help, typ string)
	write(w *bufio.Writer, name string)
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

type described struct{ name, help, typ string }

func (d described) desc() (string, string, string) { return d.name, d.help, d.typ }

// Counter is a count that only grows.
type Counter struct {
	described
	n atomic.Uint64
}

// Counter registers and returns a counter.
func (r *Registry) Counter(name, help string) *Counter {
	c := &Counter{described: described{name, help, "counter"}}
	r.register(name, c)
	return c
}

// Inc adds 1.
func (c *Counter) Inc() { c.n.Add(1) }

// Add adds n.
func (c *Counter) Add(n uint64) { c.n.Add(n) }

// Value returns the count.
func (c *Counter) Value() uint64 { return c.n.Load() }

func (c *Counter) write(w *bufio.Writer, name string) {
	writeSample(w, name, "", "", float64(c.Value()))
}

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
	c := &CounterVec{described: described{name, help, "counter"}, label: label, values: slices.Clone(values),
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

// Value returns the count of the i-th value (0 out of range).
func (c *CounterVec) Value(i int) uint64 {
	if uint(i) < uint(len(c.n)) {
		return c.n[i].Load()
	}
	return 0
}

func (c *CounterVec) write(w *bufio.Writer, name string) {
	for i, v := range c.values {
		if v != "" {
			writeSample(w, name, c.label, v, float64(c.n[i].Load()))
		}
	}
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
	c := &CounterMap{described: described{name, help, "counter"}, label: label, n: make(map[string]uint64)}
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

func (c *CounterMap) write(w *bufio.Writer, name string) {
	c.mu.Lock()
	keys := make([]string, 0, len(c.n))
	for k := range c.n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	vals := make([]uint64, len(keys))
	for i, k := range keys {
		vals[i] = c.n[k]
	}
	c.mu.Unlock()
	for i, k := range keys {
		writeSample(w, name, c.label, k, float64(vals[i]))
	}
}

// Gauge is a value that goes up and down.
type Gauge struct {
	described
	v atomic.Int64
}

// Gauge registers and returns a gauge.
func (r *Registry) Gauge(name, help string) *Gauge {
	g := &Gauge{described: described{name, help, "gauge"}}
	r.register(name, g)
	return g
}

// Set sets the value.
func (g *Gauge) Set(v int64) { g.v.Store(v) }

// Add adds d (negative: subtracts).
func (g *Gauge) Add(d int64) { g.v.Add(d) }

// Value returns the value.
func (g *Gauge) Value() int64 { return g.v.Load() }

func (g *Gauge) write(w *bufio.Writer, name string) { writeSample(w, name, "", "", float64(g.Value())) }

// GaugeFunc is a gauge whose value a function computes when read, for
// values kept elsewhere (the arena's use, the connections open).
type GaugeFunc struct {
	described
	f func() int64
}

// GaugeFunc registers a gauge read from f; f must be safe to call at any
// time from any goroutine.
func (r *Registry) GaugeFunc(name, help string, f func() int64) *GaugeFunc {
	g := &GaugeFunc{described: described{name, help, "gauge"}, f: f}
	r.register(name, g)
	return g
}

// Value returns f's value now.
func (g *GaugeFunc) Value() int64 { return g.f() }

func (g *GaugeFunc) write(w *bufio.Writer, name string) { writeSample(w, name, "", "", float64(g.f())) }

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
	h := &Histogram{described: described{name, help, "histogram"}, bounds: slices.Clone(bounds),
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

func (h *Histogram) write(w *bufio.Writer, name string) {
	var cum uint64
	for i, b := range h.bounds {
		cum += h.n[i].Load()
		writeSample(w, name+"_bucket", "le", formatFloat(b), float64(cum))
	}
	cum += h.n[len(h.bounds)].Load()
	writeSample(w, name+"_bucket", "le", "+Inf", float64(cum))
	writeSample(w, name+"_sum", "", "", h.Sum())
	writeSample(w, name+"_count", "", "", float64(h.Count()))
}

// WriteText writes every metric in Prometheus' text exposition format,
// sorted by name, each with its HELP and TYPE lines.
func (r *Registry) WriteText(out io.Writer) error {
	r.mu.Lock()
	names := make([]string, 0, len(r.metrics))
	for n := range r.metrics {
		names = append(names, n)
	}
	ms := make([]metric, len(names))
	sort.Strings(names)
	for i, n := range names {
		ms[i] = r.metrics[n]
	}
	r.mu.Unlock()
	w := bufio.NewWriter(out)
	for _, m := range ms {
		name, help, typ := m.desc()
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, escapeHelp(help), name, typ)
		m.write(w, name)
	}
	return w.Flush()
}

// writeSample writes one sample line; a write error stays in w, and
// WriteText's Flush returns it.
func writeSample(w *bufio.Writer, name, label, value string, v float64) {
	if label != "" {
		_, _ = fmt.Fprintf(w, "%s{%s=\"%s\"} %s\n", name, label, escapeLabel(value), formatFloat(v))
		return
	}
	_, _ = fmt.Fprintf(w, "%s %s\n", name, formatFloat(v))
}

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

var helpEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
var labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)

func escapeHelp(s string) string  { return helpEscaper.Replace(s) }
func escapeLabel(s string) string { return labelEscaper.Replace(s) }
