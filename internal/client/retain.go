package client

import (
	"os"
	"sync/atomic"
	"unsafe"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
)

// A Lease keeps blobs this client holds pinned, and the client's connection
// and mappings alive, until Release: it is how memory handed to a foreign
// owner (an exported Arrow array whose release callback may run on any
// thread, at any time) stays valid without a round trip to take it.
//
// Taking a lease costs no round trip: it adds one local reference to blobs the
// client already holds. Releasing it drops those references; a blob whose
// count reaches zero is released to the daemon, as Release does. While any
// lease is live, Close closes the client for new calls but keeps the
// connection (and so the daemon's references) and the arena mapping until the
// last lease is released.
type Lease struct {
	c     *Client
	blobs []ids.ObjectID
	done  atomic.Bool
}

// Retain takes a lease on blobs, which this client must hold (got with Get,
// GetBuffers or GetObject, or sealed by it, and not released since): each
// gains one local reference. It returns the lease and the read-only view of
// each blob (nil for the empty blob), valid until the lease is released. A
// blob not held is ObjectNotExists and nothing is retained. Ids may repeat;
// each occurrence counts.
func (c *Client) Retain(blobs []ids.ObjectID) (*Lease, [][]byte, error) {
	if err := c.check(); err != nil {
		return nil, nil, err
	}
	views := make([][]byte, len(blobs))
	c.state.Lock()
	defer c.state.Unlock()
	if c.isClosed.Load() { // checked under state: Close decides on leases under it
		return nil, nil, ErrClosed
	}
	for i, id := range blobs {
		if id == ids.EmptyBlob {
			continue
		}
		b, ok := c.blobs[id]
		if !ok || b.pins == 0 || b.owned {
			return nil, nil, errNotHeld(id)
		}
		views[i] = b.ro
	}
	kept := make([]ids.ObjectID, 0, len(blobs))
	seen := make(map[ids.ObjectID]bool, len(blobs))
	for _, id := range blobs {
		if id != ids.EmptyBlob && !seen[id] {
			seen[id] = true
			c.blobs[id].pins++
			kept = append(kept, id)
		}
	}
	c.leases++
	return &Lease{c: c, blobs: kept}, views, nil
}

// Release drops the lease's references; blobs whose count reaches zero are
// released to the daemon (a round trip each), and when this is the last lease
// of a client closed meanwhile, the client is closed for real. Release is
// idempotent and safe from any goroutine or thread. In a forked child it does
// nothing (the connection is the parent's) and returns ErrForked, without
// taking any lock another thread might have held at fork time.
func (l *Lease) Release() error {
	if l == nil || !l.done.CompareAndSwap(false, true) {
		return nil
	}
	c := l.c
	if os.Getpid() != c.pid {
		return ErrForked
	}
	err := c.releaseBlobs(l.blobs)
	c.state.Lock()
	c.leases--
	last := c.leases == 0 && c.pending
	if last {
		c.pending = false
	}
	c.state.Unlock()
	if last {
		c.mu.Lock()
		defer c.mu.Unlock()
		if e := c.shutdownLocked(); err == nil {
			err = e
		}
	}
	return err
}

// releaseBlobs drops one reference to each of blobs, as Release does for an
// object, also after Close (the connection stays open while leases live).
func (c *Client) releaseBlobs(blobs []ids.ObjectID) error {
	// The empty blob is a blob id: there is no object stack to pop.
	return c.drop(ids.EmptyBlob, func() ([]ids.ObjectID, error) { return blobs, nil }, c.exchangeLocked)
}

// releaseZeroLocked tells the daemon that the client's counts of blobs
// reached zero, one release_request each, through call (callLocked, or
// exchangeLocked for a closed client's leases). c.mu must be held.
func (c *Client) releaseZeroLocked(zero []ids.ObjectID, call func(protocol.Request, protocol.Reply) error) error {
	var first error
	for _, bid := range zero {
		var reply protocol.AckReply
		if err := call(&protocol.ReleaseRequest{ObjectID: bid}, &reply); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Leases returns the number of live leases of the client (for tests).
func (c *Client) Leases() int {
	c.state.Lock()
	defer c.state.Unlock()
	return c.leases
}

// IsSharedMemory reports whether addr points into an arena this process maps
// (its read-only or its writable mapping), through any client.
func IsSharedMemory(addr uintptr) bool {
	arenas.mu.Lock()
	defer arenas.mu.Unlock()
	for _, a := range arenas.m {
		for _, b := range [][]byte{a.roB, a.rwB} {
			if len(b) == 0 {
				continue
			}
			start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
			if addr >= start && addr-start < uintptr(len(b)) {
				return true
			}
		}
	}
	return false
}
