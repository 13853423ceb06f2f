// Package gctune sets the daemon's garbage collector target from the size
// of its live heap (docs/performance.md measures the effect).
//
// A daemon's live heap is small (trees of the objects it holds: a few MB
// for thousands of objects) while every request makes garbage, so with Go's
// default target (GOGC=100: collect when the heap doubles, from 4 MB) it
// collects every few thousand small puts, and the collector's work (mark,
// the background sweeper) was a tenth of the daemon's CPU per put. Start
// raises the target to Small percent while the live heap is under Low bytes,
// and lowers it in steps back to Go's 100 at High bytes and above, so a
// daemon holding millions of objects grows its heap no further than Go's
// default would: after each collection it reads the live heap and sets the
// percent for the next cycle.
package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// Small is the percent while the live heap is under Low.
const Small = 400

// Low and High bound the live heap over which the percent goes from Small
// down to 100 (variables for the tests).
var (
	Low  uint64 = 64 << 20
	High uint64 = 512 << 20
)

// last and cycles are the percent set after the last collection and the
// number of collections seen (for the tests).
var last, cycles atomic.Int64

// Percent is the GC percent for a live heap of live bytes: Small under Low,
// 100 from High, in between falling linearly.
func Percent(live uint64) int {
	switch {
	case live <= Low:
		return Small
	case live >= High:
		return 100
	}
	return Small - int(uint64(Small-100)*(live-Low)/(High-Low))
}

// Start tunes the collector for the rest of the process, unless GOGC is set
// (the operator's choice stands). It reports whether it did. Calling it
// again is harmless.
func Start() bool {
	if _, set := os.LookupEnv("GOGC"); set {
		return false
	}
	debug.SetGCPercent(Small)
	armOnce.Do(arm) // one chain of sentinels, however often Start runs
	return true
}

var armOnce sync.Once

// sentinel is an object whose finalizer runs after each collection that
// found it unreachable: it re-arms itself with a fresh one.
type sentinel struct{ _ [16]byte }

func arm() {
	s := &sentinel{}
	runtime.SetFinalizer(s, func(*sentinel) {
		p := Percent(liveHeap())
		debug.SetGCPercent(p)
		last.Store(int64(p))
		cycles.Add(1)
		arm()
	})
}

var liveSample = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}

// liveHeap is the heap marked live by the last collection.
func liveHeap() uint64 {
	metrics.Read(liveSample)
	if liveSample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return liveSample[0].Value.Uint64()
}
