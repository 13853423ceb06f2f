package metrics

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// The exposition: a Registry is a prometheus.Collector that reads every
// metric when Prometheus' registry gathers (each scrape), as constant
// metrics; the counting stays in this package's atomics.

var _ prometheus.Collector = (*Registry)(nil)

// Describe sends the descriptor of every metric registered so far.
// Metrics registered later are collected too: Prometheus checks what
// Collect sends against these only for consistency of name and labels.
func (r *Registry) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range r.snapshot() {
		ch <- m.promDesc()
	}
}

// Collect sends the current value of every metric.
func (r *Registry) Collect(ch chan<- prometheus.Metric) {
	for _, m := range r.snapshot() {
		m.collect(ch)
	}
}

// snapshot returns the registered metrics, sorted by name.
func (r *Registry) snapshot() []metric {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.metrics))
	for n := range r.metrics {
		names = append(names, n)
	}
	sort.Strings(names)
	ms := make([]metric, len(names))
	for i, n := range names {
		ms[i] = r.metrics[n]
	}
	return ms
}

func (d described) promDesc() *prometheus.Desc { return d.pd }

func (c *Counter) collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.pd, prometheus.CounterValue, float64(c.Value()))
}

func (c *CounterVec) collect(ch chan<- prometheus.Metric) {
	for i, v := range c.values {
		if v != "" {
			ch <- prometheus.MustNewConstMetric(c.pd, prometheus.CounterValue, float64(c.n[i].Load()), v)
		}
	}
}

func (c *CounterMap) collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	vals := make(map[string]uint64, len(c.n))
	for k, n := range c.n {
		vals[k] = n
	}
	c.mu.Unlock()
	for k, n := range vals {
		ch <- prometheus.MustNewConstMetric(c.pd, prometheus.CounterValue, float64(n), k)
	}
}

func (g *Gauge) collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(g.pd, prometheus.GaugeValue, float64(g.Value()))
}

func (g *GaugeFunc) collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(g.pd, prometheus.GaugeValue, float64(g.f()))
}

func (h *Histogram) collect(ch chan<- prometheus.Metric) {
	ch <- h.constHistogram(h.pd)
}

// constHistogram reads h as a Prometheus histogram; the count is the sum
// of the buckets read, so that the +Inf bucket equals it even while
// observations land.
func (h *Histogram) constHistogram(pd *prometheus.Desc, labelValues ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.bounds))
	var cum uint64
	for i, b := range h.bounds {
		cum += h.n[i].Load()
		buckets[b] = cum
	}
	cum += h.n[len(h.bounds)].Load()
	return prometheus.MustNewConstHistogram(pd, cum, h.Sum(), buckets, labelValues...)
}

// HistogramVec is a histogram per value of one label, from a set fixed when
// it is registered, indexed by the value's position as CounterVec is.
// Values given as "" are not exposed.
type HistogramVec struct {
	described
	values []string
	h      []Histogram
}

// HistogramVec registers a histogram per value of label, with the given
// ascending upper bounds.
func (r *Registry) HistogramVec(name, help, label string, values []string, bounds []float64) *HistogramVec {
	if !slices.IsSorted(bounds) {
		panic(fmt.Sprintf("metrics: %s: bounds not ascending", name))
	}
	v := &HistogramVec{described: newDescribed(name, help, "histogram", label), values: slices.Clone(values),
		h: make([]Histogram, len(values))}
	for i := range v.h {
		v.h[i].bounds = slices.Clone(bounds)
		v.h[i].n = make([]atomic.Uint64, len(bounds)+1)
	}
	r.register(name, v)
	return v
}

// Observe records x in the histogram of the i-th value; an i out of range
// is ignored.
func (v *HistogramVec) Observe(i int, x float64) {
	if uint(i) < uint(len(v.h)) {
		v.h[i].Observe(x)
	}
}

// Count returns how many values the i-th histogram observed.
func (v *HistogramVec) Count(i int) uint64 {
	if uint(i) < uint(len(v.h)) {
		return v.h[i].Count()
	}
	return 0
}

func (v *HistogramVec) collect(ch chan<- prometheus.Metric) {
	for i, val := range v.values {
		if val != "" && v.h[i].Count() > 0 {
			ch <- v.h[i].constHistogram(v.pd, val)
		}
	}
}

// WriteText writes every metric of r in Prometheus' text exposition format
// (version 0.0.4), as the daemon's /metrics serves them, sorted by name.
func (r *Registry) WriteText(w io.Writer) error {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(r); err != nil {
		return err
	}
	mfs, err := reg.Gather()
	if err != nil {
		return err
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return err
		}
	}
	return nil
}

func (g *GaugeFuncVec) collect(ch chan<- prometheus.Metric) {
	for i, v := range g.values {
		ch <- prometheus.MustNewConstMetric(g.pd, prometheus.GaugeValue, float64(g.f(i)), v)
	}
}
