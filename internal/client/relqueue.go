package client

import (
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/status"
)

// Releases written to memory. A caller to whom a call costs more than the
// release itself (Python's ctypes: about 0.6 µs a call, against 0.2 µs for
// the whole release written to memory from Python) gives the client a queue
// in its own memory (SetReleaseQueue) and releases an id by writing it
// there, with no call. The client takes the queue's ids, as Release would,
// at the start of the caller's next call (TakeQueuedReleases, which libv6d
// runs first in every call with the client's handle), so a release is done
// before anything the caller does after it; and, while the queue is in use,
// on a timer every releaseDelay, so that a caller that makes no more calls
// still releases within a few milliseconds.
//
// The queue is words of the caller's memory: qTail the ids written (the
// caller's count), qHead the ids taken (the client's), qArmed nonzero while
// the timer runs, then a ring of ids. The caller writes an id (never 0) at
// qSlots + tail % ring, then tail+1 at qTail, and only when tail - head <
// ring; then it reads qArmed, and if it is 0 it calls FlushReleaseQueue
// (v6d_release_queue_flush), which takes the queue and starts the timer.
// One writer at a time: Python's writes run under the GIL, with no point
// between them where another thread may run.
//
// Why no written id is left behind: the timer stops only after a tick that
// found the queue empty has stored qArmed = 0 (an atomic exchange, a full
// barrier) and a tick releaseDelay later has found it empty again. A writer
// that read qArmed != 0 wrote its id before that read, so the store was
// visible long before that second tick reads qTail (a store buffer drains in
// nanoseconds, and a descheduled thread's drains when it is switched out);
// a writer that read 0 calls. The client zeroes each slot it takes, and
// stops at a slot that reads 0, so on a CPU that may show the tail before
// the id, a slot not yet visible is taken at the next look, not misread.
const (
	qTail  = 0
	qHead  = 1
	qArmed = 2
	qSlots = 4 // words before the ring (word 3 is reserved, 0)

	// MinReleaseQueueWords and MaxReleaseQueueWords bound a queue's size.
	MinReleaseQueueWords = qSlots + 1
	MaxReleaseQueueWords = qSlots + 1<<20
)

// releaseQueue is a caller's queue. Guarded by Client.state.
type releaseQueue struct {
	w       []uint64 // the caller's words
	ring    uint64   // len(w) - qSlots
	head    uint64   // ids taken; also at w[qHead]
	ticking bool     // a tick is scheduled
	idle    bool     // the last tick found nothing and cleared qArmed
}

// SetReleaseQueue makes words (at least MinReleaseQueueWords, at most
// MaxReleaseQueueWords, all zero) the client's release queue; it replaces
// an earlier one, whose ids it takes first. The memory must stay valid until
// Close returns or another queue replaces it.
func (c *Client) SetReleaseQueue(words []uint64) error {
	if err := c.check(); err != nil {
		return err
	}
	switch {
	case len(words) < MinReleaseQueueWords || len(words) > MaxReleaseQueueWords:
		return status.Errorf(status.Invalid, "a release queue has %d to %d words, not %d",
			MinReleaseQueueWords, MaxReleaseQueueWords, len(words))
	case uintptr(unsafe.Pointer(unsafe.SliceData(words)))%8 != 0:
		return status.Errorf(status.Invalid, "a release queue must be 8-byte aligned")
	}
	for _, w := range words {
		if w != 0 {
			return status.Errorf(status.Invalid, "a new release queue must be all zeros")
		}
	}
	c.state.Lock()
	defer c.state.Unlock()
	c.state.dropQueueLocked()
	c.state.relq = &releaseQueue{w: words, ring: uint64(len(words) - qSlots)}
	c.state.relqSeen.Store(c.state.relq)
	return nil
}

// TakeQueuedReleases releases the ids written to the release queue since
// the last look. Two loads when there are none.
func (c *Client) TakeQueuedReleases() {
	q := c.state.relqSeen.Load()
	if q == nil || atomic.LoadUint64(&q.w[qTail]) == atomic.LoadUint64(&q.w[qHead]) || c.check() != nil {
		return
	}
	c.state.Lock()
	defer c.state.Unlock()
	if c.state.relq == q && c.state.takeQueueLocked(q) > 0 {
		c.state.armQueueLocked(q)
	}
}

// FlushReleaseQueue releases the queued ids now and starts the timer that
// takes later ones: what a writer calls when it read qArmed == 0.
func (c *Client) FlushReleaseQueue() error {
	if err := c.check(); err != nil {
		return err
	}
	c.state.Lock()
	defer c.state.Unlock()
	q := c.state.relq
	if q == nil {
		return status.Errorf(status.Invalid, "the client has no release queue")
	}
	c.state.takeQueueLocked(q)
	c.state.armQueueLocked(q)
	return nil
}

// armQueueLocked stores qArmed and schedules a tick if none is. c.state
// must be held.
func (r *refs) armQueueLocked(q *releaseQueue) {
	q.idle = false
	atomic.StoreUint64(&q.w[qArmed], 1)
	if !q.ticking {
		q.ticking = true
		time.AfterFunc(releaseDelay, func() { r.tickQueue(q) })
	}
}

// tickQueue is the timer: it takes the queue, and stops after two looks in
// a row found nothing (see the top of this file).
func (r *refs) tickQueue(q *releaseQueue) {
	r.Lock()
	defer r.Unlock()
	if r.relq != q {
		q.ticking = false
		return // replaced or closed: the memory may be gone
	}
	switch {
	case r.takeQueueLocked(q) > 0:
		q.idle = false
		atomic.StoreUint64(&q.w[qArmed], 1)
	case !q.idle:
		q.idle = true
		atomic.SwapUint64(&q.w[qArmed], 0) // a full barrier: see the top of this file
	default:
		q.ticking = false
		return
	}
	time.AfterFunc(releaseDelay, func() { r.tickQueue(q) })
}

// takeQueueLocked releases the ids written since the last look and returns
// how many it took. c.state must be held.
func (r *refs) takeQueueLocked(q *releaseQueue) int {
	tail := atomic.LoadUint64(&q.w[qTail])
	if tail-q.head > q.ring { // not the protocol: nothing there can be trusted
		q.head = tail
		atomic.StoreUint64(&q.w[qHead], tail)
		return 0
	}
	n := 0
	for q.head != tail {
		slot := &q.w[qSlots+q.head%q.ring]
		id := atomic.LoadUint64(slot)
		if id == 0 {
			break // written, not yet visible here: the next look takes it
		}
		atomic.StoreUint64(slot, 0)
		q.head++
		n++
		_ = r.releaseLocked(ids.ObjectID(id)) // an id not held: nothing to do, and no one to tell
	}
	atomic.StoreUint64(&q.w[qHead], q.head)
	return n
}

// dropQueueLocked takes the last ids and forgets the queue, if any, whose
// memory the caller may free once Close returns (or the call that replaced
// it). c.state must be held.
func (r *refs) dropQueueLocked() {
	if q := r.relq; q != nil {
		r.takeQueueLocked(q)
		atomic.StoreUint64(&q.w[qArmed], 0)
		r.relq = nil
		r.relqSeen.Store(nil)
	}
}
