package store

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/v6d-io/v6d-go/internal/alloc"
	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/shm"
	"github.com/v6d-io/v6d-go/internal/status"
)

// blob is a range of the arena.
type blob struct {
	id     ids.ObjectID
	offset uint64
	size   uint64               // bytes the client asked for (the allocation may be larger)
	state  blobState            // where it is in its life (states.go); changed by setStateLocked only
	prev   blobState            // the state before, for CheckInvariants
	owner  *Session             // the creator, while unsealed
	refs   int                  // sessions holding a reference
	users  map[ids.ObjectID]int // objects that have this blob as a member (nil: none)
	trim   bool                 // return the pages to the kernel when finally freed
	hollow bool                 // shrunk to 0 bytes: owns no arena memory any more

	// Spilling (spill.go).
	disk bool      // its bytes are in its spill file, not in the arena (spilled; or a zombie of a spilled blob)
	cold uint64    // the tick it joined the cold queue with; 0: not in it
	gen  uint64    // the generation of its spill file
	load *loadWait // the load in progress (loading)
}

// emptyBlob is the zero-length blob: it always exists and owns no memory.
var emptyBlob = &blob{id: ids.EmptyBlob, state: stateSealed, prev: stateUnsealed}

// Session is one connection's view of the store: the references it holds and
// the unsealed blobs it created. A Session is used by one goroutine at a time.
type Session struct {
	s       *Store
	refs    map[ids.ObjectID]*blob // at most one reference per blob
	created map[ids.ObjectID]*blob // unsealed blobs this session created
	lease   lease                  // memory and ids the client carves blobs from (lease.go)
	closed  bool
	pins    *shm.PinPage           // the client's pin slots; nil: none (directory.go)
	holds   map[ids.ObjectID]*hold // pins of deleted ids (directory.go)
	nholds  atomic.Int32           // len(holds), read without the lock (HasHolds)
	piped   uint64                 // pipelined requests handled (pipelined.go); under s.mu
	backlog Backlog                // its connection's stream (pipelined.go); nil: none
}

// NewSession opens a session. The caller MUST call Close when the connection
// ends, whatever the reason.
func (s *Store) NewSession() *Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := &Session{s: s, refs: make(map[ids.ObjectID]*blob), created: make(map[ids.ObjectID]*blob)}
	s.sessions[ss] = struct{}{}
	return ss
}

// Close releases every reference of the session and frees its unsealed
// blobs. It is idempotent.
func (ss *Session) Close() {
	s := ss.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss.closed {
		return
	}
	ss.closed = true
	delete(s.sessions, ss)
	for _, b := range ss.created {
		s.life.dropUnsealedLocked(b)
	}
	ss.returnLeaseLocked()
	for id := range ss.refs {
		ss.releaseLocked(id)
	}
	ss.closePinsLocked()
	s.waiters.broadcast() // Visible stops waiting for this session
}

// addRefLocked gives the session a reference to b (at most one).
func (ss *Session) addRefLocked(b *blob) {
	if b.id == ids.EmptyBlob {
		return
	}
	if _, ok := ss.refs[b.id]; ok {
		return
	}
	ss.refs[b.id] = b
	b.refs++
}

// releaseLocked drops the session's reference to id, freeing a deleted
// blob's memory when it was the last.
func (ss *Session) releaseLocked(id ids.ObjectID) bool {
	b, ok := ss.refs[id]
	if !ok {
		return false
	}
	delete(ss.refs, id)
	b.refs--
	if b.refs == 0 {
		if b.state == stateZombie {
			ss.s.life.freeLocked(b)
		} else {
			ss.s.sp.coldLocked(b)
		}
	}
	return true
}

// freeLocked returns b's memory (a blob deleted and no longer referenced)
// to the allocator.
func (part *blobLife) freeLocked(b *blob) {
	s := part.s
	if b.state == stateZombie {
		delete(s.zombies, b.id)
	}
	s.life.setStateLocked(b, stateFreed)
	if b.disk {
		s.sp.freeSpilledLocked(b)
		s.emitLocked(Event{Kind: EventFreed, ID: b.id, Size: b.size})
		return
	}
	if b.id == ids.EmptyBlob || b.hollow || s.closed {
		return
	}
	if !b.trim {
		_ = s.alloc.Free(b.offset)
	} else {
		size, _ := s.alloc.SizeOf(b.offset)
		_ = s.alloc.Free(b.offset)
		_, _ = s.arena.Trim(b.offset, size)
	}
	s.emitLocked(Event{Kind: EventFreed, ID: b.id, Size: b.size})
}

// retireLocked removes b from view; its memory goes when no session holds it.
func (part *blobLife) retireLocked(b *blob, trim bool) {
	s := part.s
	delete(s.blobs, b.id)
	if b.owner != nil {
		delete(b.owner.created, b.id)
		b.owner = nil
	}
	b.trim = trim
	if b.refs == 0 {
		s.life.freeLocked(b)
		return
	}
	s.life.setStateLocked(b, stateZombie)
	s.zombies[b.id] = b
}

// dropUnsealedLocked frees an unsealed blob of a closing or aborting session.
func (part *blobLife) dropUnsealedLocked(b *blob) {
	s := part.s
	owner := b.owner
	s.life.retireLocked(b, false)
	s.emitIDLocked(EventDeleted, b.id, FlagUnsealed)
	if owner != nil {
		owner.releaseLocked(b.id)
	}
}

// allocLocked allocates an unsealed blob owned by the session.
func (ss *Session) allocLocked(size uint64) (*blob, error) {
	s := ss.s
	if size == 0 {
		return emptyBlob, nil
	}
	off, err := s.sp.allocLocked(size)
	if err != nil {
		if errors.Is(err, alloc.ErrNotEnoughMemory) {
			used, limit := s.usageLocked()
			if s.leased > 0 {
				return nil, status.Errorf(status.NotEnoughMemory,
					"failed to allocate %d bytes: %d of %d bytes are in use, %d more leased to clients%s",
					size, used, limit, s.leased, s.sp.noRoomLocked())
			}
			return nil, status.Errorf(status.NotEnoughMemory,
				"failed to allocate %d bytes: %d of %d bytes are in use%s", size, used, limit, s.sp.noRoomLocked())
		}
		return nil, status.Errorf(status.Invalid, "cannot allocate %d bytes: %v", size, err)
	}
	s.pf.noteAllocLocked(off, size)
	s.sp.noteUsageLocked()
	b := &blob{id: s.gen.Blob(), offset: off, size: size, owner: ss}
	s.life.setStateLocked(b, stateUnsealed)
	s.blobs[b.id] = b
	ss.created[b.id] = b
	ss.addRefLocked(b)
	s.emitLocked(Event{Kind: EventCreated, ID: b.id, Size: size})
	return b, nil
}

// CreateBuffer allocates an unsealed blob of size bytes owned by the session,
// which also holds a reference to it. Size 0 gives the empty blob.
func (ss *Session) CreateBuffer(size uint64) (Extent, error) {
	s := ss.s
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := ss.allocLocked(size)
	if err != nil {
		return Extent{}, err
	}
	return s.extent(b), nil
}

// CreateBuffers allocates several blobs; on failure none is left allocated.
func (ss *Session) CreateBuffers(sizes []uint64) ([]Extent, error) {
	if err := checkItems("sizes", len(sizes)); err != nil {
		return nil, err
	}
	s := ss.s
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Extent, 0, len(sizes))
	made := make([]*blob, 0, len(sizes))
	for _, size := range sizes {
		b, err := ss.allocLocked(size)
		if err != nil {
			for _, m := range made {
				if m != emptyBlob {
					s.life.dropUnsealedLocked(m)
				}
			}
			return nil, err
		}
		made = append(made, b)
		out = append(out, s.extent(b))
	}
	return out, nil
}

// ownedLocked returns the unsealed blob id created by this session.
func (ss *Session) ownedLocked(id ids.ObjectID) (*blob, error) {
	b, ok := ss.s.blobs[id]
	if !ok {
		return nil, status.Errorf(status.ObjectNotExists, "blob %v does not exist", id)
	}
	if b.state != stateUnsealed {
		return nil, status.Errorf(status.ObjectSealed, "blob %v is already sealed", id)
	}
	if b.owner != ss {
		return nil, status.Errorf(status.Invalid, "blob %v was created by another connection", id)
	}
	return b, nil
}

// sealLocked seals an unsealed blob this session created (the directory
// publishes it).
func (ss *Session) sealLocked(id ids.ObjectID) error {
	return ss.sealFlagsLocked(id, 0)
}

// sealMemberLocked seals an unsealed blob this session created as a member
// of an object created in the same call (FlagInTree): the directory does
// not publish it, the object's record lists it (a get of such a blob's id
// takes the round trip). Publishing is a tenth of a small put's daemon
// time.
func (ss *Session) sealMemberLocked(id ids.ObjectID) error {
	return ss.sealFlagsLocked(id, FlagInTree)
}

func (ss *Session) sealFlagsLocked(id ids.ObjectID, f EventFlags) error {
	if id == ids.EmptyBlob {
		return nil
	}
	b, err := ss.ownedLocked(id)
	if err != nil {
		return err
	}
	s := ss.s
	s.life.setStateLocked(b, stateSealed)
	b.owner = nil
	delete(ss.created, id)
	ss.addRefLocked(b)
	ss.s.emitIDLocked(EventSealed, id, f)
	return nil
}

// Seal makes a blob this session created immutable; the session keeps its
// reference.
func (ss *Session) Seal(id ids.ObjectID) error {
	ss.s.mu.Lock()
	defer ss.s.mu.Unlock()
	return ss.sealLocked(id)
}

// DropBuffer frees an unsealed blob this session created.
func (ss *Session) DropBuffer(id ids.ObjectID) error {
	s := ss.s
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := ss.ownedLocked(id)
	if err != nil {
		return err
	}
	s.life.dropUnsealedLocked(b)
	return nil
}

// ShrinkBuffer shrinks an unsealed blob this session created, keeping its
// offset, and returns the cut tail to the allocator at once (the allocation
// shrinks to size rounded up to alloc.Alignment). Shrinking to 0 frees the
// whole allocation: the blob stays, with no memory. The client must not
// write past the new size afterwards: that memory may already belong to
// another blob.
func (ss *Session) ShrinkBuffer(id ids.ObjectID, size uint64) error {
	s := ss.s
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := ss.ownedLocked(id)
	if err != nil {
		return err
	}
	if size > b.size {
		return status.Errorf(status.Invalid, "cannot grow blob %v from %d to %d bytes", id, b.size, size)
	}
	if size == b.size {
		return nil
	}
	if size == 0 {
		if err := s.alloc.Free(b.offset); err != nil {
			return status.Errorf(status.Invalid, "shrink blob %v: %v", id, err)
		}
		b.hollow = true
	} else if err := s.alloc.Shrink(b.offset, size); err != nil {
		return status.Errorf(status.Invalid, "shrink blob %v: %v", id, err)
	}
	b.size = size
	return nil
}

// lookupBlobLocked returns a live blob.
func (s *Store) lookupBlobLocked(id ids.ObjectID) (*blob, bool) {
	if id == ids.EmptyBlob {
		return emptyBlob, true
	}
	b, ok := s.blobs[id]
	return b, ok
}

// GetBuffers returns the extents of blobs and takes a reference to each.
// Every blob must exist and be sealed, unless unsafe. A repeated id gives one
// extent.
func (ss *Session) GetBuffers(idl []ids.ObjectID, unsafe bool) ([]Extent, error) {
	idl = dedupe(idl)
	if err := checkItems("ids", len(idl)); err != nil {
		return nil, err
	}
	s := ss.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkReplyLocked(uint64(len(idl)) * extentBytes); err != nil {
		return nil, err
	}
	got := make([]*blob, 0, len(idl))
	for round := 0; ; round++ {
		got = got[:0]
		for _, id := range idl {
			b, ok := s.lookupBlobLocked(id)
			if !ok {
				return nil, status.Errorf(status.ObjectNotExists, "blob %v does not exist", id)
			}
			if b.state == stateUnsealed && !unsafe {
				return nil, status.Errorf(status.ObjectNotSealed, "blob %v is not sealed", id)
			}
			got = append(got, b)
		}
		if !needsLoad(got) {
			break
		}
		if round == maxLoadRounds {
			return nil, errLoadRace
		}
		if err := s.sp.loadLocked(got); err != nil {
			return nil, err
		}
	}
	out := make([]Extent, len(got))
	for i, b := range got {
		ss.addRefLocked(b)
		out[i] = s.extent(b)
	}
	return out, nil
}

// IncreaseReferenceCount takes a reference to each existing blob.
func (ss *Session) IncreaseReferenceCount(idl []ids.ObjectID) error {
	s := ss.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range idl {
		b, ok := s.lookupBlobLocked(id)
		if !ok {
			return status.Errorf(status.ObjectNotExists, "blob %v does not exist", id)
		}
		ss.addRefLocked(b)
	}
	return nil
}

// Release drops the session's references to blobs. Releasing a blob the
// session holds no reference to is not an error (upstream behaves the same).
func (ss *Session) Release(idl ...ids.ObjectID) error {
	ss.s.mu.Lock()
	defer ss.s.mu.Unlock()
	for _, id := range idl {
		ss.releaseLocked(id)
	}
	return nil
}

// String describes the session for logs.
func (ss *Session) String() string {
	return fmt.Sprintf("session(refs=%d, unsealed=%d)", len(ss.refs), len(ss.created))
}
