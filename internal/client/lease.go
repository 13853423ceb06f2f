package client

import (
	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
)

// Leases (protocol.ExtLease; the daemon's side is store/lease.go): the
// daemon leases this connection a range of the arena and a block of blob
// ids. CreateBuffers carves its blobs from them without a round trip (the
// blob is this client's to write at once) and remembers them as pending;
// the next request names them to the daemon: the create_data that seals them
// carries them (so a put is that one round trip), and any other request
// goes behind a create_buffers "lease_keep" in the same write, so the daemon
// knows a blob before it reads a request about it. When the lease is short,
// CreateBuffers asks for a new one (the round trip create_buffers cost
// before), and a create_data asks for the next in its reply when what is
// left is less than the put it seals: a client putting values of one size
// in a row makes one round trip per put.

const (
	// leaseMin is the least a client asks to lease.
	leaseMin = 1 << 20
	// leaseFactor: a new lease holds this many puts of the size that needed it.
	leaseFactor = 2
	// leaseIDsLow is the fewest unused ids a lease the daemon grants holds
	// (store.leaseIDsLow): a create of more blobs does not use the lease.
	leaseIDsLow = 256
)

// leaser is the lease accelerator: it carves buffers (buffers), names
// them to the daemon ahead of the next request (ahead) and takes the
// renewal a create_data reply carries (created). Its fields are guarded by
// Client.mu.
type leaser struct {
	plain
	c        *Client
	off, end uint64 // the free part of the lease, arena offsets
	fd       int    // the daemon's fd number of its arena (Client.regions)
	next     ids.ObjectID
	ids      uint64   // unused ids from next
	pending  []uint64 // (id, offset, size) of blobs carved, not yet named
	carved   uint64   // bytes carved since the last create_data
}

// set records a lease grant from a reply.
func (l *leaser) set(g *protocol.LeaseGrant) {
	l.off, l.end, l.fd = g.Offset, g.Offset+g.Size, g.StoreFd
	l.next, l.ids = g.FirstID, g.IDs
}

// forget drops the lease: the daemon took it back, or may have.
func (l *leaser) forget() { l.off, l.end = 0, 0 }

// buffers creates buffers of sizes (none 0) from the lease, leasing anew
// first when the lease is short. It declines when the lease cannot serve
// them (too many ids): the plain create_buffers runs.
func (l *leaser) buffers(sizes []uint64) (out []Buffer, ok bool, err error) {
	c := l.c
	var total uint64
	for _, s := range sizes {
		total += roundUp(s)
	}
	// Carving asks nothing of the daemon: make sure it is there, as a get
	// answered without it does.
	if err := c.usableLocked(); err != nil {
		return nil, false, err
	}
	if err := c.liveLocal(); err != nil {
		return nil, false, err
	}
	a, ok, err := l.ensure(total, uint64(len(sizes)), leaseFactor*total, true)
	if !ok || err != nil {
		return nil, false, err
	}
	out = make([]Buffer, len(sizes))
	entries := make([]*blob, len(sizes))
	for i, size := range sizes {
		off := l.off
		rw, err := a.view(off, size, true)
		if err != nil {
			return nil, false, err
		}
		ro, err := a.view(off, size, false)
		if err != nil {
			return nil, false, err
		}
		id := l.next
		l.pending = append(l.pending, uint64(id), off, size)
		l.off += roundUp(size)
		l.next++
		l.ids--
		out[i] = Buffer{ID: id, Data: rw}
		entries[i] = &blob{ro: ro, rw: rw, owned: true}
	}
	l.carved += total
	c.state.Lock()
	for i, b := range entries {
		c.state.blobs[out[i].ID] = b
	}
	c.state.Unlock()
	a.pretouch(l.off)
	return out, true, nil
}

// ensure makes sure the lease holds total bytes and n ids, leasing anew
// (a round trip) when it does not, and returns the arena it lies in. ok is
// false when the lease cannot serve them (more ids than a renewal
// promises, or the daemon granted less): the caller creates the blobs
// another way. A new lease is of want bytes (at least leaseMin). With
// pretouch, it starts the background pre-touch of what the daemon
// pre-faulted (pretouch.go), which buffers the caller fills want; a small
// put writes a page or two and would only pay for mapping the reserve on a
// busy machine. c.mu must be held.
func (l *leaser) ensure(total, n, want uint64, pretouch bool) (a *arena, ok bool, err error) {
	c := l.c
	if n > leaseIDsLow {
		return nil, false, nil // more ids than a renewal promises: the old way
	}
	if l.end-l.off < total || l.ids < n {
		want = max(want, leaseMin)
		var reply protocol.BuffersReply
		req := &protocol.CreateBuffersRequest{Sizes: []uint64{}, Lease: true, LeaseSize: want, LeaseNeed: total}
		if err := c.callLocked(req, &reply); err != nil {
			// The daemon may have taken the old lease back before it
			// failed: never carve from it again.
			l.forget()
			return nil, false, err
		}
		if reply.Lease == nil {
			return nil, false, errBadReply("create_buffers with a lease: no lease in the reply")
		}
		l.set(reply.Lease)
		if l.end-l.off < total || l.ids < n {
			return nil, false, nil
		}
		if a, ok := c.w.regions[l.fd]; ok && pretouch {
			a.pretouch(l.off) // map what the daemon pre-faulted of the lease
		} else if ok {
			a.populate(l.off, l.end-l.off)
		}
	}
	a, found := c.w.regions[l.fd]
	if !found {
		return nil, false, errBadReply("the lease lies in region %d, whose fd was never received", l.fd)
	}
	return a, true, nil
}

// ahead gives req the blobs carved from the lease that the daemon does not
// know yet, and returns a request to send ahead of req for those req
// cannot carry (nil if none).
func (l *leaser) ahead(req protocol.Request) protocol.Request {
	if len(l.pending) == 0 {
		return nil
	}
	pending := l.pending
	l.pending = nil
	switch r := req.(type) {
	case *protocol.CreateDataRequest:
		if len(r.Inline) == 0 {
			r.LeaseBlobs = pending
			if left := l.end - l.off; left < l.carved {
				r.LeaseSize = max(leaseFactor*l.carved, leaseMin)
			}
			l.carved = 0
			return nil
		}
	case *protocol.CreateBuffersRequest:
		if r.Lease {
			r.LeaseBlobs = pending
			return nil
		}
	}
	return &protocol.CreateBuffersRequest{Sizes: []uint64{}, Lease: true, LeaseKeep: true, LeaseBlobs: pending}
}

// created takes the lease a create_data reply carries, when the request
// asked for one. A reply without one, to a request that asked, leaves the
// client without a lease: the daemon may have taken the old one back.
func (l *leaser) created(req *protocol.CreateDataRequest, reply *protocol.CreateDataReply) {
	if req.LeaseSize == 0 || req.Pipelined {
		return
	}
	g := reply.Lease
	if g == nil {
		l.forget()
		return
	}
	l.set(g)
	if a, ok := l.c.w.regions[g.StoreFd]; ok {
		a.pretouch(g.Offset)
	}
}

// giveBack returns the lease to the daemon; blobs carved from it stay.
func (l *leaser) giveBack() error {
	var reply protocol.BuffersReply
	err := l.c.callLocked(&protocol.CreateBuffersRequest{Sizes: []uint64{}, Lease: true}, &reply)
	l.forget() // returned, or in doubt: never carve from it again
	if err != nil {
		return err
	}
	if reply.Lease != nil {
		l.set(reply.Lease)
	}
	return nil
}

// ReleaseLease returns the memory leased to this client to the daemon (it
// is otherwise returned when the client closes or leases anew); blobs
// carved from it stay. The next create leases again. Without leases (an
// upstream or remote daemon, AccelLease off) it does nothing.
func (c *Client) ReleaseLease() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usableLocked(); err != nil {
		return err
	}
	for _, a := range c.accels {
		if err := a.giveBack(); err != nil {
			return err
		}
	}
	return nil
}

// roundUp rounds a blob size up to the daemon's allocation unit, the
// alignment of every blob a lease holds.
func roundUp(size uint64) uint64 {
	return (size + protocol.BlobAlignment - 1) &^ (protocol.BlobAlignment - 1)
}
