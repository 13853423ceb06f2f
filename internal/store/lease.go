package store

import (
	"errors"

	"github.com/v6d-io/v6d-go/internal/alloc"
	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/status"
)

// Leases: puts in one round trip (docs/design.md, "One round trip for large
// puts").
//
// The daemon must place a blob before a client can write it, which cost a
// put two round trips (create_buffers, then create_data). A lease is a range
// of arena memory and a block of blob ids that a session holds: the client
// carves its new blobs out of both without asking (ascending offsets and
// ids), writes them, and names them (id, offset, size) in the create_data
// that seals them; AdoptLeaseBlobs checks every extent and turns it into an
// ordinary unsealed blob of the session. The range is one allocation of the
// allocator, so leased memory is never given to anyone else; the part of it
// below an adopted blob that no blob took goes back to the allocator at
// once, the rest stays leased. Lease replaces the lease (returning its
// unused rest) and Close returns it: a client that dies loses nothing but
// its lease.
//
// The extents of one adoption must lie in the lease's remaining range, in
// ascending order without overlap, and their ids in the remaining id block,
// ascending: so no extent can overlap a blob of this or any other session,
// nor one adopted before, and no id can be taken twice. Anything else is
// refused with Invalid before anything changes.

// leaseIDs is the size of the block of blob ids a lease carries; a new block
// is given when fewer than leaseIDsLow are left.
const (
	leaseIDs    = 1024
	leaseIDsLow = 256
)

// Lease describes a session's lease: the remaining range [Offset,
// Offset+Size) of the arena and the ids [FirstID, FirstID+IDs) not yet used.
// Size 0: no memory is leased.
type Lease struct {
	Offset  uint64
	Size    uint64
	FirstID ids.ObjectID
	IDs     uint64
}

// LeaseBlob is a blob a client carved from its lease.
type LeaseBlob struct {
	ID     ids.ObjectID
	Offset uint64
	Size   uint64
}

// lease is a session's lease: the range [off, end), one live allocation at
// off when off < end, and the ids [next, last] (next > last: none).
type lease struct {
	off, end   uint64
	next, last ids.ObjectID
}

// leaseCap bounds a lease beyond the size a client needs at once: an eighth
// of the arena, so a few clients holding leases cannot take it all.
func (s *Store) leaseCap() uint64 {
	return (s.alloc.Capacity() - HeaderSize) / 8
}

// Lease replaces the session's lease with one of want bytes (capped at an
// eighth of the arena, but never below need), or need bytes when want bytes
// are not free; the unused rest of the old lease goes back first. need 0
// makes the grant best effort: without memory the session ends with no
// leased memory and no error. want 0 only returns the rest. The lease gets a
// fresh block of ids when few are left.
func (ss *Session) Lease(want, need uint64) (Lease, error) {
	s := ss.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss.closed {
		return Lease{}, status.Errorf(status.Invalid, "the session is closed")
	}
	ss.returnLeaseLocked()
	want = max(min(want, s.leaseCap()), need)
	if want > 0 {
		off, err := s.alloc.Alloc(want)
		if err != nil && need > 0 {
			want = need
			off, err = s.sp.allocLocked(want) // waits for the spiller, if any
		}
		switch {
		case err == nil:
			size, _ := s.alloc.SizeOf(off)
			ss.lease.off, ss.lease.end = off, off+size
			s.leased += size
			// The pre-fault keeps the memory above the lease's start
			// resident: the lease is where this client writes next.
			s.pf.noteAllocLocked(off, 0)
			s.sp.noteUsageLocked()
		case need > 0 && errors.Is(err, alloc.ErrNotEnoughMemory):
			used, limit := s.usageLocked()
			return Lease{}, status.Errorf(status.NotEnoughMemory,
				"failed to lease %d bytes: %d of %d bytes are in use, %d leased%s", need, used, limit, s.leased,
				s.sp.noRoomLocked())
		case need > 0:
			return Lease{}, status.Errorf(status.Invalid, "cannot lease %d bytes: %v", need, err)
		}
	}
	if ss.lease.next == 0 || ss.lease.next > ss.lease.last || uint64(ss.lease.last-ss.lease.next) < leaseIDsLow {
		first := s.gen.BlobBlock(leaseIDs)
		ss.lease.next, ss.lease.last = first, first+leaseIDs-1
	}
	return ss.leaseLocked(), nil
}

// leaseLocked describes the session's lease.
func (ss *Session) leaseLocked() Lease {
	l := ss.lease
	out := Lease{Offset: l.off, Size: l.end - l.off}
	if l.next != 0 && l.next <= l.last {
		out.FirstID, out.IDs = l.next, uint64(l.last-l.next)+1
	}
	return out
}

// Leased returns the session's lease.
func (ss *Session) Leased() Lease {
	ss.s.mu.Lock()
	defer ss.s.mu.Unlock()
	return ss.leaseLocked()
}

// returnLeaseLocked gives the unused rest of the lease back to the
// allocator; the id block stays.
func (ss *Session) returnLeaseLocked() {
	s := ss.s
	if ss.lease.off < ss.lease.end {
		if !s.closed {
			_ = s.alloc.Free(ss.lease.off)
		}
		s.leased -= ss.lease.end - ss.lease.off
	}
	ss.lease.off, ss.lease.end = 0, 0
}

// AdoptLeaseBlobs turns blobs the client carved from its lease into unsealed
// blobs of the session, as CreateBuffers would have made them (the session
// holds a reference to each; seal them with CreateData's seal list). The
// blobs must be in ascending order of offset and id, lie in the lease's
// remaining range and id block, 64-byte aligned, non-empty and not
// overlapping; otherwise nothing changes and the error (Invalid) says
// what is wrong.
func (ss *Session) AdoptLeaseBlobs(bs []LeaseBlob) error {
	if len(bs) == 0 {
		return nil
	}
	if err := checkItems("lease blobs", len(bs)); err != nil {
		return err
	}
	s := ss.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ss.checkLeaseBlobsLocked(bs); err != nil {
		return err
	}
	ss.adoptLeaseBlobsLocked(bs)
	return nil
}

// adoptLeaseBlobsLocked is AdoptLeaseBlobs once checkLeaseBlobsLocked
// passed. s.mu must be held.
func (ss *Session) adoptLeaseBlobsLocked(bs []LeaseBlob) {
	s := ss.s
	l := &ss.lease
	cur := l.off // the start of the lease's allocation
	for _, lb := range bs {
		if lb.Offset > cur { // a gap no blob took: back to the allocator
			_ = s.alloc.Split(cur, lb.Offset)
			_ = s.alloc.Free(cur)
		}
		end := lb.Offset + roundUp(lb.Size)
		if end < l.end {
			_ = s.alloc.Split(lb.Offset, end)
		}
		cur = end
		s.pf.noteAllocLocked(lb.Offset, lb.Size)
		b := &blob{id: lb.ID, offset: lb.Offset, size: lb.Size, owner: ss}
		s.life.setStateLocked(b, stateUnsealed)
		s.blobs[b.id] = b
		ss.created[b.id] = b
		ss.addRefLocked(b)
		s.emitLocked(Event{Kind: EventCreated, ID: b.id, Size: b.size})
	}
	s.leased -= cur - l.off
	l.off = cur
	if l.off == l.end {
		l.off, l.end = 0, 0
	}
	l.next = bs[len(bs)-1].ID + 1
}

// checkLeaseBlobsLocked checks the blobs of an adoption against the lease.
func (ss *Session) checkLeaseBlobsLocked(bs []LeaseBlob) error {
	l := ss.lease
	if l.off == l.end {
		return status.Errorf(status.Invalid, "blob %v names leased memory, but this connection holds no lease "+
			"(never granted, or released)", bs[0].ID)
	}
	off, next := l.off, l.next
	for _, lb := range bs {
		switch {
		case lb.Size == 0:
			return status.Errorf(status.Invalid, "lease blob %v is empty (the empty blob is never leased)", lb.ID)
		case lb.Offset%alloc.Alignment != 0:
			return status.Errorf(status.Invalid, "lease blob %v at offset %d is not %d-byte aligned",
				lb.ID, lb.Offset, alloc.Alignment)
		case lb.Offset < off || lb.Offset >= l.end || lb.Size > l.end-lb.Offset:
			return status.Errorf(status.Invalid, "lease blob %v [%d, +%d) is not inside the lease's free part [%d, %d) "+
				"(outside the lease, overlapping another blob, or out of order)", lb.ID, lb.Offset, lb.Size, off, l.end)
		case lb.ID < next || lb.ID > l.last || next == 0:
			return status.Errorf(status.Invalid, "lease blob id %v is not one of the lease's unused ids", lb.ID)
		}
		if _, taken := ss.s.blobs[lb.ID]; taken {
			return status.Errorf(status.Invalid, "lease blob id %v is taken", lb.ID)
		}
		off, next = lb.Offset+roundUp(lb.Size), lb.ID+1
	}
	return nil
}

// roundUp rounds size up to the allocator's alignment.
func roundUp(size uint64) uint64 {
	return (size + alloc.Alignment - 1) &^ (alloc.Alignment - 1)
}

// Leased returns the bytes all sessions hold leased (counted as used by the
// allocator, not by Usage).
func (s *Store) Leased() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leased
}

// checkLeasesLocked adds the leases to the allocator's expected usage and
// checks their total (CheckInvariants).
func (part *checker) checkLeasesLocked(fail func(string, ...any), offsets map[uint64]ids.ObjectID) (used uint64, live int) {
	s := part.s
	var total uint64
	for ss := range s.sessions {
		l := ss.lease
		if l.off == l.end {
			continue
		}
		size, ok := s.alloc.SizeOf(l.off)
		if !ok || size != l.end-l.off {
			fail("%v leases [%d, %d), the allocator has %d bytes there (%v)", ss, l.off, l.end, size, ok)
			continue
		}
		if other, dup := offsets[l.off]; dup {
			fail("%v leases offset %d, which is blob %v's", ss, l.off, other)
		}
		if l.next != 0 && l.next <= l.last {
			if _, taken := s.blobs[l.next]; taken {
				fail("%v's next lease id %v is a live blob", ss, l.next)
			}
		}
		total += size
		live++
	}
	if total != s.leased {
		fail("sessions lease %d bytes, the store counts %d", total, s.leased)
	}
	return total, live
}
