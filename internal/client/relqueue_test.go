package client

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// queueWriter writes releases to a queue as v6d.h tells a caller to (with
// atomics, which Python's plain stores are on x86, so that -race follows).
type queueWriter struct {
	c *Client
	w []uint64
}

func newQueue(t *testing.T, c *Client, words int) *queueWriter {
	t.Helper()
	w := make([]uint64, words)
	if err := c.SetReleaseQueue(w); err != nil {
		t.Fatal(err)
	}
	return &queueWriter{c: c, w: w}
}

// release writes id; false when the ring is full (the caller then calls
// Release).
func (q *queueWriter) release(t testing.TB, id ids.ObjectID) bool {
	ring := uint64(len(q.w) - qSlots)
	tail := atomic.LoadUint64(&q.w[qTail])
	if tail-atomic.LoadUint64(&q.w[qHead]) >= ring {
		return false
	}
	atomic.StoreUint64(&q.w[qSlots+tail%ring], uint64(id))
	atomic.StoreUint64(&q.w[qTail], tail+1)
	if atomic.LoadUint64(&q.w[qArmed]) == 0 {
		if err := q.c.FlushReleaseQueue(); err != nil {
			t.Error(err)
		}
	}
	return true
}

// queueTicking reports whether the queue's timer is scheduled.
func (c *Client) queueTicking() bool {
	c.state.Lock()
	defer c.state.Unlock()
	return c.state.relq != nil && c.state.relq.ticking
}

// getHeld gets id on c and checks that it holds it.
func getHeld(t testing.TB, c *Client, id ids.ObjectID) {
	t.Helper()
	if _, err := c.GetObject(id); err != nil {
		t.Fatal(err)
	}
}

// waitReleased waits until c holds no pin slot, for at most a second.
func waitReleased(t testing.TB, c *Client) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for c.Stats().PinsInUse != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d pins still in use a second after their release was written", c.Stats().PinsInUse)
		}
		time.Sleep(time.Millisecond)
	}
}

// queuedGet: a daemon, a putter a, a getter b with a queue, and an object
// of a's that b got from the directory.
func queuedGet(t *testing.T) (a, b *Client, q *queueWriter, id ids.ObjectID) {
	t.Helper()
	srv := startServer(t, 16<<20)
	a, b = connect(t, srv), connect(t, srv)
	id, _ = put(t, a, []byte("queued"))
	q = newQueue(t, b, 64)
	getHeld(t, b, id)
	return a, b, q, id
}

func TestReleaseQueueTakenFirstAtTheNextCall(t *testing.T) {
	needAccel(t, AccelDirectory) // pins in use count the gets
	_, b, q, id := queuedGet(t)
	if b.Stats().PinsInUse != 1 {
		t.Fatalf("pins in use %d after a directory get, want 1", b.Stats().PinsInUse)
	}
	// Written with the queue armed: no call; the next call takes it first.
	atomic.StoreUint64(&q.w[qArmed], 1)
	q.release(t, id)
	if b.Stats().PinsInUse != 1 {
		t.Fatal("a written release was taken before any call")
	}
	b.TakeQueuedReleases()
	if n := b.Stats().PinsInUse; n != 0 {
		t.Fatalf("pins in use %d after the next call, want 0", n)
	}
	if err := b.Release(id); err == nil {
		t.Fatal("the release was taken twice: the id is still held")
	}
	if got := atomic.LoadUint64(&q.w[qHead]); got != 1 {
		t.Fatalf("head %d, want 1", got)
	}
}

func TestReleaseQueueTimerTakesWithoutACall(t *testing.T) {
	a, b, q, id := queuedGet(t)
	q.release(t, id) // not armed: it flushes, and arms
	if atomic.LoadUint64(&q.w[qArmed]) == 0 {
		t.Fatal("a flush left the queue unarmed")
	}
	id2, _ := put(t, a, []byte("timer 2"))
	getHeld(t, b, id2)
	q.release(t, id2) // armed: no call; the timer takes it
	waitReleased(t, b)
	// Two looks that find nothing stop the timer, and say so.
	deadline := time.Now().Add(time.Second)
	for atomic.LoadUint64(&q.w[qArmed]) != 0 || b.queueTicking() {
		if time.Now().After(deadline) {
			t.Fatal("the queue's timer still runs a second after its last release")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestReleaseQueueWrapsAndStopsAtAnUnwrittenSlot(t *testing.T) {
	needAccel(t, AccelDirectory) // pins in use count the gets
	srv := startServer(t, 16<<20)
	a, b := connect(t, srv), connect(t, srv)
	q := newQueue(t, b, qSlots+2) // a ring of two
	atomic.StoreUint64(&q.w[qArmed], 1)
	for i := range 5 {
		id, _ := put(t, a, []byte{byte(i)})
		getHeld(t, b, id)
		if !q.release(t, id) {
			t.Fatalf("release %d: the ring was full", i)
		}
		b.TakeQueuedReleases()
		if n := b.Stats().PinsInUse; n != 0 {
			t.Fatalf("release %d: pins in use %d", i, n)
		}
	}
	// A tail that runs ahead of its slot (a CPU that shows the tail first):
	// nothing is taken until the slot is written.
	id, _ := put(t, a, []byte("late"))
	getHeld(t, b, id)
	tail := atomic.LoadUint64(&q.w[qTail])
	atomic.StoreUint64(&q.w[qTail], tail+1)
	b.TakeQueuedReleases()
	if b.Stats().PinsInUse != 1 || atomic.LoadUint64(&q.w[qHead]) != tail {
		t.Fatal("an unwritten slot was taken")
	}
	atomic.StoreUint64(&q.w[qSlots+tail%2], uint64(id))
	b.TakeQueuedReleases()
	if b.Stats().PinsInUse != 0 {
		t.Fatal("the slot written late was not taken")
	}
}

func TestReleaseQueueRefusesBadMemory(t *testing.T) {
	srv := startServer(t, 16<<20)
	c := connect(t, srv)
	for _, w := range [][]uint64{make([]uint64, qSlots), {0, 0, 0, 0, 7}} {
		if err := c.SetReleaseQueue(w); err == nil {
			t.Fatalf("a queue of %v was taken", w)
		}
	}
	if err := c.FlushReleaseQueue(); err == nil {
		t.Fatal("a flush without a queue succeeded")
	}
}

func TestReleaseQueueClosed(t *testing.T) {
	srv := startServer(t, 16<<20)
	a := connect(t, srv)
	b, err := Connect(srv.Socket())
	if err != nil {
		t.Fatal(err)
	}
	id, _ := put(t, a, []byte("closed"))
	q := newQueue(t, b, 64)
	getHeld(t, b, id)
	atomic.StoreUint64(&q.w[qArmed], 1)
	q.release(t, id)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// Close took the last release and forgot the queue: it is no longer
	// armed, and nothing looks at it (the memory may go).
	if atomic.LoadUint64(&q.w[qArmed]) != 0 || atomic.LoadUint64(&q.w[qHead]) != 1 {
		t.Fatalf("after Close: armed %d, head %d", q.w[qArmed], q.w[qHead])
	}
	b.TakeQueuedReleases() // a no-op on a closed client
}

// TestReleaseQueueLosesNothing: writers (one at a time, as the GIL makes
// them) release while the timer starts and stops around them; every get is
// released in the end, with no call after the last write.
func TestReleaseQueueLosesNothing(t *testing.T) {
	srv := startServer(t, 64<<20)
	a, b := connect(t, srv), connect(t, srv)
	const n = 400
	objs := make([]ids.ObjectID, n)
	for i := range objs {
		objs[i], _ = put(t, a, []byte{byte(i), byte(i >> 8)})
	}
	q := newQueue(t, b, qSlots+16)
	var gil sync.Mutex
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < n; i += 4 {
				getHeld(t, b, objs[i])
				if i%7 == 0 {
					time.Sleep(3 * time.Millisecond) // let the timer stop now and then
				}
				gil.Lock()
				ok := q.release(t, objs[i])
				gil.Unlock()
				if !ok {
					if err := b.Release(objs[i]); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	waitReleased(t, b)
}
