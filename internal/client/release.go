package client

import (
	"slices"
	"time"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
)

// releaseDelay bounds how long the daemon may learn late that this client
// dropped its last reference to a blob, when the client makes no request in
// between: until then the memory of a deleted blob stays allocated.
const releaseDelay = 2 * time.Millisecond

// Deferred releases. When a blob's local count reaches zero, Release does not
// make a round trip: it queues the blob, and the next exchange writes one
// release_request (with every queued id) ahead of its own request, in the
// same write, and reads its acknowledgement before its own reply. A timer
// sends the queue on its own if no exchange comes within releaseDelay.
//
// The daemon handles requests of a connection in order, so a release sent
// ahead of a get is applied before the get takes its references. A queued
// blob keeps its entry (no references) until it is sent; a get whose reply
// pins it again in the meantime removes it from the batch
// (takeReleasesLocked skips entries with references), so a reference the
// client counts is never released on the daemon.

// deferReleaseLocked queues blobs whose count reached zero. c.state must be
// held.
func (r *refs) deferReleaseLocked(zero []ids.ObjectID) {
	queue := zero[:0:0]
	for _, id := range zero {
		b, ok := r.blobs[id]
		if !ok {
			continue
		}
		r.unholdLocked(b) // its slot may go now (directory.go)
		if b.dirOnly {
			delete(r.blobs, id) // no daemon reference to release
			if len(r.spareBlobs) < maxSpares {
				r.spareBlobs = append(r.spareBlobs, b) // nothing else points to it
			}
			continue
		}
		queue = append(queue, id)
	}
	if len(queue) == 0 {
		return
	}
	r.pending = append(r.pending, queue...)
	if !r.flushArmed {
		r.flushArmed = true
		time.AfterFunc(releaseDelay, r.flush)
	}
}

// takeReleasesLocked empties the queue and returns the blobs to release now:
// those still at zero, whose entries it removes. c.state must be held.
func (r *refs) takeReleasesLocked() []ids.ObjectID {
	if len(r.pending) == 0 {
		return nil
	}
	out := r.pending[:0:0]
	for _, id := range r.pending {
		if b, ok := r.blobs[id]; ok && b.pins == 0 && b.cached == 0 && !b.owned {
			delete(r.blobs, id)
			b.drop()
			out = append(out, id)
		}
	}
	r.pending = r.pending[:0]
	return out
}

// releaseRequests are the requests that send the queued releases rel: one
// per protocol.MaxItems ids (a daemon refuses longer lists, and a refused
// release would keep the memory until the connection closes), or one per
// id when the daemon lacks release.ids (upstream's, which reads only
// object_id).
func (e extSet) releaseRequests(rel []ids.ObjectID) []protocol.Request {
	if len(rel) == 0 {
		return nil
	}
	if e.releaseIDs {
		var out []protocol.Request
		for part := range slices.Chunk(rel, protocol.MaxItems) {
			out = append(out, &protocol.ReleaseRequest{ObjectID: part[0], IDs: part[1:]})
		}
		return out
	}
	out := make([]protocol.Request, len(rel))
	for i, id := range rel {
		out[i] = &protocol.ReleaseRequest{ObjectID: id}
	}
	return out
}

// flushReleases sends the queue of c in an exchange of its own (the timer
// path, refs.flush).
func flushReleases(c *Client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state.Lock()
	c.state.flushArmed = false
	rel := c.state.takeReleasesLocked()
	c.state.Unlock()
	if len(rel) == 0 || c.usableLocked() != nil {
		return
	}
	reqs := c.ext.releaseRequests(rel)
	var reply protocol.AckReply
	_ = c.w.exchange(reqs[len(reqs)-1], &reply, reqs[:len(reqs)-1], nil)
}

// FlushReleases sends the queued releases now, if any, so the daemon frees
// what this client no longer references (tests and shutdown paths use it).
func (c *Client) FlushReleases() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usableLocked(); err != nil {
		return err
	}
	c.state.Lock()
	rel := c.state.takeReleasesLocked()
	nudge := c.state.slotsCleared
	c.state.slotsCleared = false
	c.state.Unlock()
	if len(rel) == 0 && nudge {
		rel = []ids.ObjectID{ids.EmptyBlob} // a request, so the daemon re-reads the pins (directory.go)
	}
	if len(rel) == 0 {
		return nil
	}
	reqs := c.ext.releaseRequests(rel)
	var reply protocol.AckReply
	c.roundTrips.Add(1)
	return c.w.exchange(reqs[len(reqs)-1], &reply, reqs[:len(reqs)-1], nil)
}
