package server

import (
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/v6d-io/v6d-go/internal/nice"
)

// SchedMode says when the daemon's threads run under SCHED_BATCH
// (Config.SchedBatch; nice.SetBatch says what that changes).
type SchedMode int

const (
	// SchedOff keeps the default policy.
	SchedOff SchedMode = iota
	// SchedAuto runs the threads under SCHED_BATCH while at least as many
	// connections stream pipelined puts as there are CPUs, and under the
	// default policy otherwise.
	SchedAuto
	// SchedOn runs them under SCHED_BATCH always.
	SchedOn
)

// String returns the mode as --sched-batch spells it: off, auto or on.
func (m SchedMode) String() string {
	switch m {
	case SchedOff:
		return "off"
	case SchedAuto:
		return "auto"
	case SchedOn:
		return "on"
	}
	return "SchedMode(" + strconv.Itoa(int(m)) + ")"
}

// A connection streams while it sends at least streamPuts pipelined puts in
// each streamWindow: a client putting in a loop sends hundreds, one that
// puts now and then none or a few. A connection that stops counts until its
// next request (a put or any other) or until it parks (ParkAfter idle) or
// closes.
const (
	streamWindow = 10 * time.Millisecond
	streamPuts   = 32
)

// streamThreshold is how many streaming connections switch SchedAuto to
// SCHED_BATCH: one per CPU. A variable for tests.
var streamThreshold = func() int32 { return int32(runtime.NumCPU()) }

// schedPolicy applies Config.SchedBatch. Under SchedAuto, SCHED_BATCH pays
// only when the clients alone keep every CPU busy: then a woken connection
// thread no longer preempts a client (10-25% more puts with 2-4 clients on
// 2 CPUs). With a CPU to spare it costs: the kernel often wakes the thread
// on the CPU of the client that wrote, and behind a client that does not
// sleep it waits instead of running (a lone C client's pipelined puts 2-4x
// slower; docs/performance.md, "December 5, late night").
type schedPolicy struct {
	mode      SchedMode
	threshold int32
	start     time.Time // for monotonic window numbers
	warn      func(msg string, args ...any)

	mu        sync.Mutex
	streaming int32 // connections that stream (SchedAuto only: others never count one)
	batch     bool  // the threads are under SCHED_BATCH
}

func newSchedPolicy(mode SchedMode, warn func(string, ...any)) *schedPolicy {
	p := &schedPolicy{mode: mode, threshold: streamThreshold(), start: time.Now(), warn: warn}
	if mode == SchedOn {
		p.set(true)
	}
	return p
}

// set moves every thread to SCHED_BATCH (on) or back; p.mu is held or p is
// not shared yet.
func (p *schedPolicy) set(on bool) {
	if _, err := nice.SetBatch(on); err != nil {
		p.warn("could not change the threads' scheduling policy", "batch", on, "err", err)
	}
	p.batch = on
}

// streams counts a connection that starts (+1) or stops (-1) streaming,
// and switches the policy when the count crosses the threshold.
func (p *schedPolicy) streams(delta int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.streaming += delta
	if want := p.streaming >= p.threshold; want != p.batch {
		p.set(want)
	}
}

// close puts the threads back under the default policy (tests run servers
// in their own process).
func (p *schedPolicy) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.batch {
		p.set(false)
	}
}

// window returns the number of the streamWindow now.
func (p *schedPolicy) window() int64 { return int64(time.Since(p.start) / streamWindow) }

// notePipelined counts a pipelined put of c (SchedAuto only): at the first
// put of a window, c streams if the window before had streamPuts puts.
func (c *conn) notePipelined() {
	p := c.s.sched
	if p.mode != SchedAuto {
		return
	}
	w := p.window()
	if w != c.pipeWindow {
		c.setStreaming(c.streamedBefore(w))
		c.pipeWindow, c.pipePuts = w, 0
	}
	c.pipePuts++
}

// streamedBefore reports whether the window before w held streamPuts puts
// of c (w is the current window).
func (c *conn) streamedBefore(w int64) bool {
	return w == c.pipeWindow+1 && c.pipePuts >= streamPuts
}

// noteRequest ends c's stream at a request other than a pipelined put that
// comes after a window with fewer than streamPuts puts: a client that
// stopped putting but goes on with round trips (gets that miss the
// directory, deletes) no longer counts. The requests a streaming client
// sends between its puts (a lease, a sync) come within a window of a put.
func (c *conn) noteRequest() {
	if !c.streaming {
		return
	}
	if w := c.s.sched.window(); w != c.pipeWindow && !c.streamedBefore(w) {
		c.setStreaming(false)
	}
}

// setStreaming records whether c streams, counting the change.
func (c *conn) setStreaming(on bool) {
	if on == c.streaming {
		return
	}
	c.streaming = on
	if on {
		c.s.sched.streams(1)
	} else {
		c.s.sched.streams(-1)
	}
}
