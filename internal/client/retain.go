package client

import (
	"sync/atomic"
	"unsafe"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// A Lease keeps blobs this client holds pinned, and the client's connection
// and mappings alive, until Release: it is how memory handed to a foreign
// owner (an exported Arrow array whose release callback may run on any
// thread, at any time) stays valid without a round trip to take it.
//
// Taking a lease costs no round trip: it adds one local reference to blobs the
// client already holds. Releasing it drops those references; a blob whose
// count reaches zero is released to the daemon as Release does (deferred, see
// release.go). A live lease counts as a live private view (private.go): Close
// closes the client for new calls at once but keeps the connection (and so
// the daemon's references) and the arena mapping until the last lease or view
// is gone.
type Lease struct {
	c     *Client
	blobs []ids.ObjectID
	done  atomic.Bool
}

// Retain takes a lease on blobs, which this client must hold (got with Get,
// GetBuffers or GetObject, or sealed by it, and not released since): each
// gains one local reference (once, however often it is listed). It
// returns the lease and the read-only view of each entry of blobs (nil for
// the empty blob), valid until the lease is released. A blob not held is
// ObjectNotExists and nothing is retained. It never waits behind another
// goroutine's exchange.
func (c *Client) Retain(blobs []ids.ObjectID) (*Lease, [][]byte, error) {
	if err := c.check(); err != nil {
		return nil, nil, err
	}
	views := make([][]byte, len(blobs))
	c.state.Lock()
	defer c.state.Unlock()
	for i, id := range blobs {
		if id == ids.EmptyBlob {
			continue
		}
		b, ok := c.state.blobs[id]
		if !ok || b.pins == 0 || b.owned {
			return nil, nil, errNotHeld(id)
		}
		views[i] = b.ro
	}
	if !holdOpen(c) {
		return nil, nil, ErrClosed
	}
	kept := make([]ids.ObjectID, 0, len(blobs))
	seen := make(map[ids.ObjectID]bool, len(blobs))
	for _, id := range blobs {
		if id != ids.EmptyBlob && !seen[id] {
			seen[id] = true
			c.state.blobs[id].pins++ // c.state is held: the blob cannot be released meanwhile
			kept = append(kept, id)
		}
	}
	return &Lease{c: c, blobs: kept}, views, nil
}

// Release drops the lease's references; blobs whose count reaches zero are
// released to the daemon (deferred, as Release does), and when this is the
// last lease or private view of a client closed meanwhile, the client
// disconnects. Release is idempotent and safe from any goroutine or thread.
// In a forked child it does nothing (the connection is the parent's) and
// returns ErrForked, without taking any lock another thread might have held
// at fork time.
func (l *Lease) Release() error {
	if l == nil || !l.done.CompareAndSwap(false, true) {
		return nil
	}
	c := l.c
	if c.forked() {
		return ErrForked
	}
	c.state.Lock()
	if zero := c.state.unpinLocked(ids.EmptyBlob, l.blobs); len(zero) > 0 { // a blob id: no object stack to pop
		c.state.deferReleaseLocked(zero)
	}
	c.state.Unlock()
	if dropHold(c) {
		finishClose(c)
	}
	return nil
}

// holdOpen counts one more live hold (a lease) on c, which keeps a Close
// from disconnecting; it reports false if c is closed already. views.mu is a
// leaf lock (private.go).
func holdOpen(c *Client) bool {
	views.mu.Lock()
	defer views.mu.Unlock()
	if c.isClosed.Load() { // Close decides under views.mu whether to wait
		return false
	}
	views.live[c]++
	return true
}

// dropHold drops a hold of c and reports whether it was the last of a client
// whose Close waits for it.
func dropHold(c *Client) bool {
	views.mu.Lock()
	defer views.mu.Unlock()
	views.live[c]--
	if views.live[c] > 0 {
		return false
	}
	finish := views.closing[c]
	delete(views.live, c)
	delete(views.closing, c)
	return finish
}

// IsSharedMemory reports whether addr points into an arena this process maps
// (its read-only or its writable mapping), through any client.
func IsSharedMemory(addr uintptr) bool {
	arenas.mu.Lock()
	defer arenas.mu.Unlock()
	for _, a := range arenas.m {
		if within(a.roB, addr, 1) != nil || within(a.rwB, addr, 1) != nil {
			return true
		}
	}
	return false
}

// within returns the part of b at [addr, addr+n), or nil when b does not
// hold all of it (n > 0).
func within(b []byte, addr uintptr, n uint64) []byte {
	if len(b) == 0 {
		return nil
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if addr < start || addr-start >= uintptr(len(b)) || n > uint64(len(b))-uint64(addr-start) {
		return nil
	}
	return b[addr-start : uint64(addr-start)+n]
}
