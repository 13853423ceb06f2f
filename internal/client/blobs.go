package client

import (
	"slices"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
)

// Buffer is a blob this client created: its id and its writable bytes.
type Buffer struct {
	ID   ids.ObjectID
	Data []byte
}

// CreateBuffer creates an unsealed blob of size bytes and returns its id and
// a writable view of it, valid until the blob is sealed and released, aborted,
// or the client closed. Only this client may write it. size 0 gives the empty
// blob (ids.EmptyBlob) and a nil slice, without a round trip.
func (c *Client) CreateBuffer(size uint64) (ids.ObjectID, []byte, error) {
	if size == 0 {
		return ids.EmptyBlob, nil, c.check()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.accels) > 0 {
		c.oneSize[0] = size // an interface call's argument escapes: no slice made per call
		bufs, ok, err := c.accels.buffers(c.oneSize[:])
		if err != nil || ok {
			if err != nil {
				return 0, nil, err
			}
			return bufs[0].ID, bufs[0].Data, nil
		}
	}
	reply := protocol.CreateBufferReply{Fd: -1}
	if err := c.callLocked(&protocol.CreateBufferRequest{Size: size}, &reply); err != nil {
		return 0, nil, err
	}
	if reply.Created.ObjectID != reply.ID || reply.Created.DataSize != size {
		return 0, nil, errBadReply("created %v of %d bytes, asked %v of %d",
			reply.Created.ObjectID, reply.Created.DataSize, reply.ID, size)
	}
	bufs, err := c.d.adopt([]protocol.Payload{reply.Created})
	if err != nil {
		return 0, nil, err
	}
	return bufs[0].ID, bufs[0].Data, nil
}

// CreateBuffers creates len(sizes) unsealed blobs in one round trip, as
// CreateBuffer does for each (one per protocol.MaxItems sizes, the most a
// request carries; if one fails, those made before it are dropped). A size
// of 0 gives the empty blob.
func (c *Client) CreateBuffers(sizes []uint64) ([]Buffer, error) {
	if len(sizes) > protocol.MaxItems {
		out := make([]Buffer, 0, len(sizes))
		for part := range slices.Chunk(sizes, protocol.MaxItems) {
			bufs, err := c.CreateBuffers(part)
			if err != nil {
				made := make([]ids.ObjectID, 0, len(out))
				for _, b := range out {
					if b.ID != ids.EmptyBlob {
						made = append(made, b.ID)
					}
				}
				c.mu.Lock()
				ours{c}.rollbackLocked(made)
				c.mu.Unlock()
				return nil, err
			}
			out = append(out, bufs...)
		}
		return out, nil
	}
	var nonEmpty []uint64
	for _, s := range sizes {
		if s != 0 {
			nonEmpty = append(nonEmpty, s)
		}
	}
	out := make([]Buffer, len(sizes))
	if len(nonEmpty) == 0 {
		for i := range out {
			out[i].ID = ids.EmptyBlob
		}
		return out, c.check()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var reply protocol.BuffersReply
	if len(c.accels) > 0 {
		bufs, ok, err := c.accels.buffers(nonEmpty)
		if err != nil {
			return nil, err
		}
		if ok {
			return spreadBuffers(out, sizes, bufs), nil
		}
	}
	req := &protocol.CreateBuffersRequest{Num: len(nonEmpty), Sizes: nonEmpty}
	if err := c.callLocked(req, &reply); err != nil {
		return nil, err
	}
	if len(reply.Payloads) != len(nonEmpty) {
		return nil, errBadReply("%d payloads for %d buffers", len(reply.Payloads), len(nonEmpty))
	}
	for i, p := range reply.Payloads {
		if p.DataSize != nonEmpty[i] {
			return nil, errBadReply("buffer %d has %d bytes, asked %d", i, p.DataSize, nonEmpty[i])
		}
	}
	bufs, err := c.d.adopt(reply.Payloads)
	if err != nil {
		return nil, err
	}
	return spreadBuffers(out, sizes, bufs), nil
}

// spreadBuffers fills out (one per size) with bufs (one per non-zero size)
// and the empty blob for the zeros.
func spreadBuffers(out []Buffer, sizes []uint64, bufs []Buffer) []Buffer {
	j := 0
	for i, s := range sizes {
		if s == 0 {
			out[i].ID = ids.EmptyBlob
			continue
		}
		out[i] = bufs[j]
		j++
	}
	return out
}

// adopt records newly created blobs and returns their writable
// views. c.mu must be held.
func (o ours) adopt(ps []protocol.Payload) ([]Buffer, error) {
	c := o.c
	out := make([]Buffer, len(ps))
	entries := make([]*blob, len(ps))
	for i := range ps {
		p := &ps[i]
		if !p.ObjectID.IsBlob() {
			return nil, errBadReply("created id %v is not a blob id", p.ObjectID)
		}
		rw, err := c.w.view(p, true)
		if err != nil {
			return nil, err
		}
		ro, err := c.w.view(p, false)
		if err != nil {
			return nil, err
		}
		out[i] = Buffer{ID: p.ObjectID, Data: rw}
		entries[i] = &blob{ro: ro, rw: rw, owned: true}
	}
	c.state.Lock()
	for i, b := range entries {
		c.state.blobs[out[i].ID] = b
	}
	c.state.Unlock()
	for i := range ps {
		if p := &ps[i]; p.DataSize > 0 {
			if a, ok := c.w.regions[p.StoreFd]; ok {
				a.pretouch(p.DataOffset + p.DataSize)
			}
		}
	}
	return out, nil
}

// Seal makes a blob this client created immutable and readable by others. The
// writable view must not be written afterwards. The client holds a reference
// to the blob until Release. Sealing the empty blob does nothing.
func (c *Client) Seal(id ids.ObjectID) error {
	if id == ids.EmptyBlob {
		return c.check()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.d.seal(id)
}

// seal is Seal of ours: seal_request.
func (o ours) seal(id ids.ObjectID) error {
	c := o.c
	var reply protocol.AckReply
	if err := c.callLocked(&protocol.SealRequest{ObjectID: id}, &reply); err != nil {
		return err
	}
	c.state.Lock()
	c.state.sealedLocked(id)
	c.state.Unlock()
	return nil
}

// sealedLocked records that id was sealed by this client, which gives it a
// reference. c.state must be held.
func (r *refs) sealedLocked(id ids.ObjectID) {
	b, ok := r.blobs[id]
	if !ok {
		// Sealed by us but unknown locally (cannot happen with a correct
		// daemon): hold it without a view so that Release balances.
		b = &blob{}
		r.blobs[id] = b
	}
	b.owned, b.rw = false, nil
	b.pins++
	b.dirOnly = false
}

// Abort drops an unsealed blob this client created; its memory is freed and
// its views must no longer be used. A sealed blob is ObjectSealed. Aborting
// the empty blob does nothing.
func (c *Client) Abort(id ids.ObjectID) error {
	if id == ids.EmptyBlob {
		return c.check()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var reply protocol.AckReply
	if err := c.callLocked(&protocol.DropBufferRequest{ID: id}, &reply); err != nil {
		return err
	}
	c.state.Lock()
	if b, ok := c.state.blobs[id]; ok {
		b.drop()
	}
	delete(c.state.blobs, id)
	c.state.Unlock()
	return nil
}

// Shrink shrinks an unsealed blob this client created to size bytes; it never
// grows. The views BlobPointer returns are shortened accordingly.
func (c *Client) Shrink(id ids.ObjectID, size uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var reply protocol.AckReply
	if err := c.callLocked(&protocol.ShrinkBufferRequest{ID: id, Size: size}, &reply); err != nil {
		return err
	}
	c.state.Lock()
	defer c.state.Unlock()
	if b, ok := c.state.blobs[id]; ok {
		if size < uint64(len(b.ro)) {
			b.ro = b.ro[:size:size]
		}
		if size < uint64(len(b.rw)) {
			b.rw = b.rw[:size:size]
		}
	}
	return nil
}

// GetBuffers returns read-only views of the given blobs, in one round trip.
// Each view lies in a PROT_READ mapping: writing it faults. Every blob must
// exist and, unless unsafe, be sealed; otherwise nothing is got. Each id
// counts one reference (also when repeated) that Release must drop; while
// held, the bytes never change, even if the blob is deleted. The empty blob
// gives a nil view and needs no release.
func (c *Client) GetBuffers(idl []ids.ObjectID, unsafe bool) ([][]byte, error) {
	want := make([]ids.ObjectID, 0, len(idl))
	seen := make(map[ids.ObjectID]bool, len(idl))
	for _, id := range idl {
		if id != ids.EmptyBlob && !seen[id] {
			seen[id] = true
			want = append(want, id)
		}
	}
	out := make([][]byte, len(idl))
	if len(want) == 0 {
		return out, c.check()
	}
	if err := c.liveLocal(); err != nil {
		return out, err
	}
	if c.state.getHeld(idl, out) || c.state.accelGetBuffers(c.accels, idl, out) {
		return out, nil
	}
	// A copy for the dialect (an interface call's argument escapes), so
	// that the caller's list, often Get's one id, is made on its stack.
	if err := c.d.getBuffers(slices.Clone(idl), want, unsafe, out); err != nil {
		return nil, err
	}
	return out, nil
}

// getBuffers is GetBuffers of ours: get_buffers, one per
// protocol.MaxItems blobs (the most a request carries).
func (o ours) getBuffers(idl, want []ids.ObjectID, unsafe bool, out [][]byte) error {
	c := o.c
	c.mu.Lock()
	defer c.mu.Unlock()
	views := make(map[ids.ObjectID][]byte, len(want))
	for part := range slices.Chunk(want, protocol.MaxItems) {
		var reply protocol.BuffersReply
		err := c.callLocked(&protocol.GetBuffersRequest{IDs: part, Unsafe: unsafe}, &reply)
		if err == nil {
			err = c.w.addViews(views, reply.Payloads)
		}
		if err != nil {
			// The parts before took a reference to each of their blobs:
			// counted and dropped as a get's, so those the client held
			// before keep theirs (the daemon keeps one per connection).
			c.state.Lock()
			got := make([]ids.ObjectID, 0, len(views))
			for id, v := range views {
				c.state.pinLocked(id, v)
				got = append(got, id)
			}
			c.state.undoGetLocked(got)
			c.state.Unlock()
			return err
		}
	}
	for _, id := range want {
		if _, ok := views[id]; !ok {
			return status.Errorf(status.ObjectNotExists, "blob %v was not returned", id)
		}
	}
	c.state.Lock()
	defer c.state.Unlock()
	for i, id := range idl {
		if id == ids.EmptyBlob {
			continue
		}
		out[i] = views[id]
		c.state.pinLocked(id, views[id])
	}
	return nil
}

// getHeld answers GetBuffers without a round trip when the client already
// holds a reference to every blob of idl (pins > 0): the daemon holds one for
// this connection, so the bytes stay valid, and the count goes up locally.
// It reports whether it did; out receives the views.
// The caller checked liveLocal.
func (r *refs) getHeld(idl []ids.ObjectID, out [][]byte) bool {
	r.Lock()
	defer r.Unlock()
	r.validateCacheLocked() // references the cache holds for deleted blobs go first
	for _, id := range idl {
		if b, ok := r.blobs[id]; id != ids.EmptyBlob && (!ok || b.pins == 0 || b.ro == nil) {
			return false
		}
	}
	for i, id := range idl {
		if id != ids.EmptyBlob {
			b := r.blobs[id]
			b.pins++
			out[i] = b.ro
		}
	}
	return true
}

// Get returns a read-only view of one blob, as GetBuffers does.
func (c *Client) Get(id ids.ObjectID) ([]byte, error) {
	out, err := c.GetBuffers([]ids.ObjectID{id}, false)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// pinLocked adds one local reference to a blob the daemon just gave this
// connection a reference to. c.state must be held.
func (r *refs) pinLocked(id ids.ObjectID, ro []byte) {
	if id == ids.EmptyBlob {
		return
	}
	b, ok := r.blobs[id]
	if !ok {
		b = &blob{}
		r.blobs[id] = b
	}
	if b.ro == nil {
		b.ro = ro
	}
	b.pins++
	b.dirOnly = false // the daemon holds a reference now
}

// BlobPointer returns the view of a blob this client holds (got, or created
// and not yet aborted) without a round trip and without a new reference: the
// writable view for an unsealed blob this client created (writable true),
// else the read-only one. A blob not held is ObjectNotExists. It never waits
// behind another goroutine's exchange.
func (c *Client) BlobPointer(id ids.ObjectID) (data []byte, writable bool, err error) {
	if err := c.check(); err != nil {
		return nil, false, err
	}
	if id == ids.EmptyBlob {
		return nil, false, nil
	}
	c.state.Lock()
	defer c.state.Unlock()
	b, ok := c.state.blobs[id]
	if !ok || (!b.owned && b.pins == 0) {
		return nil, false, errNotHeld(id)
	}
	if b.owned {
		return b.rw, true, nil
	}
	return b.ro, false, nil
}

// Release drops one reference taken by Get, GetBuffers, Seal, GetObject or
// CreateMetadata. For a blob id it drops one of the blob's references; for
// any other object id, the references the last GetObject or CreateMetadata of
// that id took. When a blob's count reaches 0 the daemon is told, not at once
// but ahead of the client's next request or within releaseDelay (see
// release.go), so a release costs no round trip of its own; from then on the
// memory of a deleted blob may be reused: its views must no longer be read.
// Releasing an id not held is ObjectNotExists; releasing the empty blob does
// nothing.
func (c *Client) Release(id ids.ObjectID) error {
	if err := c.check(); err != nil || id == ids.EmptyBlob {
		return err
	}
	c.state.Lock()
	defer c.state.Unlock()
	return c.state.releaseLocked(id)
}

// releaseLocked is Release. c.state must be held.
func (r *refs) releaseLocked(id ids.ObjectID) error {
	blobs, err := r.toReleaseLocked(id)
	if err != nil {
		return err
	}
	if zero := r.unpinLocked(id, blobs); len(zero) > 0 {
		r.deferReleaseLocked(zero)
	}
	return nil
}

// toReleaseLocked returns the blobs one Release of id drops a reference to.
// c.state must be held.
func (r *refs) toReleaseLocked(id ids.ObjectID) ([]ids.ObjectID, error) {
	if id.IsBlob() {
		if b, ok := r.blobs[id]; ok && b.pins > 0 {
			return []ids.ObjectID{id}, nil
		}
		return nil, errNotHeld(id)
	}
	stack := r.objects[id]
	if len(stack) == 0 {
		return nil, errNotHeld(id)
	}
	return stack[len(stack)-1], nil
}

// unpinLocked drops the references of one Release of id, and returns the
// blobs whose count reached zero; their entries stay until the deferred
// release is sent, so that a get in between can take them again. c.state
// must be held.
func (r *refs) unpinLocked(id ids.ObjectID, blobs []ids.ObjectID) (zero []ids.ObjectID) {
	if !id.IsBlob() {
		stack := r.objects[id]
		if len(stack) <= 1 {
			delete(r.objects, id)
		} else {
			r.objects[id] = stack[:len(stack)-1]
		}
	}
	for _, bid := range blobs {
		b, ok := r.blobs[bid]
		if !ok || b.pins == 0 {
			continue // already released through its own id
		}
		b.pins--
		if b.pins == 0 && b.cached == 0 {
			zero = append(zero, bid)
		}
	}
	return zero
}

// accelGetBuffers answers GetBuffers from the accelerators a (the
// directory), each entry of idl counting one reference; it reports false,
// having taken nothing, when they cannot answer for every blob.
func (r *refs) accelGetBuffers(a accelList, idl []ids.ObjectID, out [][]byte) bool {
	if len(a) == 0 {
		return false
	}
	r.Lock()
	defer r.Unlock()
	for i, id := range idl {
		if id == ids.EmptyBlob {
			continue
		}
		_, bids, ok := a.get(id, true)
		if !ok || len(bids) != 1 || bids[0] != id {
			if ok { // not a blob's record: give back what it took
				r.undoGetLocked(bids)
			}
			for _, got := range idl[:i] {
				if got != ids.EmptyBlob {
					r.undoGetLocked([]ids.ObjectID{got})
				}
			}
			clear(out)
			return false
		}
		out[i] = r.blobs[id].ro
	}
	return true
}

// undoGetLocked drops one count of each blob. c.state must be held.
func (r *refs) undoGetLocked(bids []ids.ObjectID) {
	if zero := r.unpinLocked(ids.EmptyBlob, bids); len(zero) > 0 {
		r.deferReleaseLocked(zero)
	}
}
