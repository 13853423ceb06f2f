package store

import (
	"slices"
	"time"

	"github.com/v6d-io/v6d-go/internal/alloc"
	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/shm"
	"github.com/v6d-io/v6d-go/internal/tree"
)

// pinHolds turns the pins of deleted ids into holds and drops them when
// the pins go (directory.go).
type pinHolds struct{ s *Store }

// publisher keeps the directory's entries equal to the store's trees: it
// publishes and retires records as the events say (directory.go).
type publisher struct{ s *Store }

// The directory (shm/directory.go has its layout and protocol; docs/design.md,
// "Gets without a round trip", the argument). The store publishes an entry
// for every sealed blob and for the root of every object created whose tree
// is local (no member of another instance) and small, so that a client gets
// it without asking; it retires entries before anything they name changes
// or is freed.
//
// Clients pin what they got from the directory in their connection's pin
// page (a Session's pins), without telling the daemon. A delete retires the
// entries of what it deletes, then reads every pin page: each pin of a
// deleted id becomes a hold of that session (Session.holds), which counts
// one reference on each blob of the id, like a session's own references, so
// the memory is freed only after the pin is gone. A hold remembers the slots
// its id was seen in: no new pin of a retired id is ever used (the client
// checks the entry after it pins), so the hold lasts while one of those
// slots still holds the id, which a rescan checks with a load per slot, not
// a read of the whole page. A timer rescans the holds every pinRescan, and
// a request of the session rescans its own first; closing a session drops
// all of its holds.

const (
	// The directory's entry slots: one per dirArenaPerEntry of arena, at
	// least dirMinEntries and by default at most dirMaxEntries (32 MiB of
	// slots, all resident from the start: shm.CreateDirectory).
	dirArenaPerEntry = 4 << 10
	dirMinEntries    = 1 << 16
	dirMaxEntries    = 1 << 20
	// MaxDirectoryEntries is the most entries a directory can be asked for.
	MaxDirectoryEntries = 1 << 24
	// dirRecordPerEntry sizes the record area (pages allocated as written):
	// a record is an object's tree and blob extents, 300-600 bytes for a
	// tensor or a column.
	dirRecordPerEntry = 1 << 10
	maxDirRecord      = 64 << 10 // larger records are not published: the round trip serves them
	maxDirDepth       = 64       // deeper trees are not published
	pinRescan         = 5 * time.Millisecond
)

// directory is the store's side of the directory. Guarded by Store.mu.
type directory struct {
	d       *shm.Directory
	recs    *alloc.Allocator // offsets in the record area
	recOff  uint64
	entries map[ids.ObjectID]dirEntry
	full    func(entries int) // Config.DirectoryFull; nil once called

	// Scratch of publishLocked, reused: a record is copied into the
	// directory, so nothing it builds outlives the call.
	tree    []byte
	blobs   []*blob
	extents []shm.DirBlob
	seen    map[ids.ObjectID]bool

	// shapes numbers the shapes of the trees published (internal/tree):
	// each record carries its tree's number, so that a client keys what
	// it made of one tree (the Python get plans) by it without reading
	// the text.
	shapes *tree.Shapes
}

// The bounds of a directory's shape table (tree.Shapes): when either is
// reached it starts over; numbers given before are not given again.
const (
	maxTreeShapes     = 4096
	maxTreeShapeBytes = 16 << 20
)

type dirEntry struct {
	slot, off uint64
}

// DirectoryEntriesFor returns the directory's default entry count for an
// arena of size bytes (Config.DirectoryEntries): one entry per
// dirArenaPerEntry bytes of arena, within [dirMinEntries, dirMaxEntries], so
// that a store of many small objects still gets them without a round trip.
func DirectoryEntriesFor(size uint64) uint64 {
	return min(max(size/dirArenaPerEntry, dirMinEntries), dirMaxEntries)
}

// openDirectory creates a directory of entries slots (at most
// MaxDirectoryEntries); nil (no directory) on failure: gets then take the
// round trip.
func openDirectory(entries uint64) *directory {
	entries = min(entries, MaxDirectoryEntries)
	d, err := shm.CreateDirectory(entries, entries*dirRecordPerEntry)
	if err != nil {
		return nil
	}
	_ = d.Life() // without it, clients poll their sockets before directory gets
	off, size := d.RecordArea()
	return &directory{d: d, recs: alloc.New(size), recOff: off, entries: map[ids.ObjectID]dirEntry{},
		shapes: tree.NewShapes(maxTreeShapes, maxTreeShapeBytes)}
}

// DirectoryFd returns the read-only fd of the directory, owned by the
// store, or -1 when there is none.
func (s *Store) DirectoryFd() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dir == nil || s.closed {
		return -1
	}
	return s.dir.d.ReadOnlyFd()
}

// AttachPins gives the session a pin page and returns its read-write fd,
// which the caller sends to the client and then closes. It fails when the
// store has no directory, when Config.MaxPinPages sessions have one
// (ErrPinPagesFull), or the page cannot be made (the kernel's mapping
// limit).
func (ss *Session) AttachPins() (int, error) {
	s := ss.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dir == nil || ss.closed || ss.pins != nil {
		return -1, errNoDirectory
	}
	if s.maxPinPages > 0 && s.pinPages >= s.maxPinPages {
		return -1, ErrPinPagesFull
	}
	p, fd, err := shm.CreatePinPage()
	if err != nil {
		return -1, err
	}
	ss.pins = p
	s.pinPages++
	return fd, nil
}

// apply is the directory's subscription to the store's events (events.go):
// a sealed blob and the root of a created tree are published, an entry
// whose tree changed (or any tree containing it) or that is deleted is
// retired. s.mu is held.
func (dir *directory) apply(s *Store, e Event) {
	switch e.Kind {
	case EventCreated:
		if !e.ID.IsBlob() && e.Flags&FlagInTree == 0 {
			s.pub.publishLocked(e.ID)
		}
	case EventSealed:
		if e.Flags&FlagInTree == 0 {
			s.pub.publishLocked(e.ID)
		}
	case EventTreeChanged:
		if e.Flags&FlagRemote == 0 {
			s.pub.treeChangedLocked(e.ID)
		}
	case EventDeleted:
		s.pub.unpublishLocked(e.ID)
	case EventSpilled:
		s.pub.treeChangedLocked(e.ID)
	case EventLoaded:
		s.pub.loadedLocked(e.ID)
	}
}

// loadedLocked publishes blob id, back in the arena, and the objects
// without users that contain it (their records went when it spilled), if
// all of their blobs are resident now.
func (part *publisher) loadedLocked(id ids.ObjectID) {
	s := part.s
	s.pub.publishLocked(id)
	s.users.containersLocked(id, func(id ids.ObjectID, users map[ids.ObjectID]int) {
		if len(users) == 0 && !id.IsBlob() {
			s.pub.publishLocked(id)
		}
	})
}

// publishLocked publishes id (a sealed blob, or an object whose tree is
// local), unless it is published already, too large, or the directory full.
func (part *publisher) publishLocked(id ids.ObjectID) {
	s := part.s
	dir := s.dir
	if dir == nil || s.closed || id == ids.EmptyBlob {
		return
	}
	if _, ok := dir.entries[id]; ok || !s.pub.localTreeLocked(id, 0) {
		return
	}
	text, extents := s.pub.recordLocked(id)
	size := shm.RecordSize(len(text), len(extents))
	if size > maxDirRecord {
		return
	}
	off, err := dir.recs.Alloc(size)
	if err != nil {
		dir.noteFull()
		return
	}
	dir.d.WriteRecord(dir.recOff+off, uint64(id), text, s.shapec.treeShapeLocked(id, text), extents)
	slot, ok := dir.d.Publish(uint64(id), dir.recOff+off, size)
	if !ok {
		_ = dir.recs.Free(off)
		dir.noteFull()
		return
	}
	dir.entries[id] = dirEntry{slot: slot, off: off}
}

// recordLocked returns what the record of id holds when published now: its
// tree as get_data returns it and the extents of its blobs. Both are the
// directory's scratch, valid until the next call.
func (part *publisher) recordLocked(id ids.ObjectID) ([]byte, []shm.DirBlob) {
	s := part.s
	dir := s.dir
	if dir.seen == nil {
		dir.seen = map[ids.ObjectID]bool{}
	}
	dir.tree = s.text.appendTreeLocked(dir.tree[:0], id)
	dir.blobs = s.text.blobsOfLocked(dir.blobs[:0], id, dir.seen)
	if len(dir.seen) > 64 { // clearing a large map costs its size each time
		dir.seen = nil
	} else {
		clear(dir.seen)
	}
	extents := dir.extents[:0]
	for _, b := range dir.blobs {
		if b.id != ids.EmptyBlob {
			extents = append(extents, shm.DirBlob{ID: uint64(b.id), Offset: b.offset, Size: b.size})
		}
	}
	clear(dir.blobs) // no pointers kept to blobs that may go
	dir.extents = extents
	tree := dir.tree
	if cap(dir.tree) > 2*maxDirRecord { // one huge tree: do not keep its buffer
		dir.tree = nil
	}
	return tree, extents
}

// noteFull tells Config.DirectoryFull, once, that an object found no room:
// its gets, and those of every object after it that finds none, take a
// round trip, about 20 times a directory get's time from Python.
func (dir *directory) noteFull() {
	if f := dir.full; f != nil {
		dir.full = nil
		f(len(dir.entries))
	}
}

// localTreeLocked reports whether id is a live sealed blob, or a live
// object whose members are, recursively: a tree the directory may hold.
func (part *publisher) localTreeLocked(id ids.ObjectID, depth int) bool {
	s := part.s
	if depth > maxDirDepth {
		return false
	}
	if id.IsBlob() {
		b, ok := s.lookupBlobLocked(id)
		return ok && b.state.readable() && !b.hollow
	}
	o, ok := s.objects[id]
	if !ok || o.isGlobal() {
		return false
	}
	for m := range distinctMembers(o.members) {
		if !s.pub.localTreeLocked(m.id, depth+1) {
			return false
		}
	}
	return true
}

// unpublishLocked retires the entry of id, if any. Readers that copied it
// see the change when they validate.
func (part *publisher) unpublishLocked(id ids.ObjectID) {
	s := part.s
	dir := s.dir
	if dir == nil {
		return
	}
	e, ok := dir.entries[id]
	if !ok {
		return
	}
	delete(dir.entries, id)
	if !s.closed {
		dir.d.Retire(e.slot)
	}
	_ = dir.recs.Free(e.off)
}

// treeChangedLocked retires the entries of id and of every object whose
// tree contains it (its users, recursively): their published trees are
// stale. Called after an existing object's fields change.
func (part *publisher) treeChangedLocked(id ids.ObjectID) {
	s := part.s
	if s.dir == nil || len(s.dir.entries) == 0 {
		return
	}
	s.users.containersLocked(id, func(id ids.ObjectID, _ map[ids.ObjectID]int) {
		s.pub.unpublishLocked(id)
	})
}

// holdPinnedLocked is the second step of a delete of the ids of order,
// after their EventDeleted retired their entries: it turns every pin of
// one of them into a hold (holdLocked), before anything is freed. The order
// matters: a client that pins after the entry is retired sees the
// retirement when it validates its pin, and a pin stored before it is seen
// here.
func (part *pinHolds) holdPinnedLocked(order []ids.ObjectID) {
	s := part.s
	if s.dir == nil {
		return
	}
	gone := make([]uint64, len(order))
	for i, id := range order {
		gone[i] = uint64(id)
	}
	pinIDs := shm.NewPinIDs(gone) // once, for every session's page
	var later []*Session
	for ss := range s.sessions {
		if ss.pins == nil || ss == s.sweep {
			continue
		}
		if ss.pins.Hint() > pinScanNow {
			later = append(later, ss) // pinsweep.go: read after, one page per hold of the lock
			continue
		}
		ss.pins.Find(pinIDs, func(slot, v uint64) { s.pins.holdLocked(ss, ids.ObjectID(v), slot) })
		s.pinReadsNow.Add(1)
	}
	if len(later) > 0 {
		s.pins.deferPinScanLocked(gone, order, later)
	}
}

// hold is what a session's pin of a deleted id keeps: a reference on each
// of the id's blobs, while one of the slots the pin was seen in still holds
// the id.
type hold struct {
	blobs []*blob
	slots []uint64
}

// holdLocked gives ss a hold on the blobs of id (one reference each), once,
// and has it watch slot.
func (part *pinHolds) holdLocked(ss *Session, id ids.ObjectID, slot uint64) {
	s := part.s
	if h, ok := ss.holds[id]; ok {
		h.slots = append(h.slots, slot)
		return
	}
	bl := s.text.blobsOfLocked(nil, id, map[ids.ObjectID]bool{})
	kept := bl[:0]
	for _, b := range bl {
		if b.id != ids.EmptyBlob {
			b.refs++
			kept = append(kept, b)
		}
	}
	if len(kept) > 0 {
		s.pins.addHoldLocked(ss, id, &hold{blobs: kept, slots: []uint64{slot}})
	}
}

// addHoldLocked gives ss the hold of id, its blobs each already counted one
// reference for it, and has the holds rescanned until it goes.
func (part *pinHolds) addHoldLocked(ss *Session, id ids.ObjectID, h *hold) {
	s := part.s
	if ss.holds == nil {
		ss.holds = map[ids.ObjectID]*hold{}
	}
	ss.holds[id] = h
	ss.nholds.Add(1)
	s.holdCount++
	if !s.rescanArmed {
		s.rescanArmed = true
		time.AfterFunc(pinRescan, s.pins.rescanPins)
	}
}

// dropHoldLocked drops a hold, freeing deleted blobs nothing else holds.
func (part *pinHolds) dropHoldLocked(ss *Session, id ids.ObjectID) {
	s := part.s
	for _, b := range ss.holds[id].blobs {
		b.refs--
		if b.refs == 0 {
			if b.state == stateZombie {
				s.life.freeLocked(b)
			} else {
				s.sp.coldLocked(b)
			}
		}
	}
	delete(ss.holds, id)
	ss.nholds.Add(-1)
	s.holdCount--
}

// rescanPins drops the holds whose pins are gone; it runs on a timer while
// there are holds.
func (part *pinHolds) rescanPins() {
	s := part.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.rescanArmed = false
		return
	}
	s.pins.rescanLocked()
	if s.holdCount == 0 {
		s.rescanArmed = false
		return
	}
	time.AfterFunc(pinRescan, s.pins.rescanPins)
}

// rescanLocked drops every hold no pin names any more.
func (part *pinHolds) rescanLocked() {
	s := part.s
	for ss := range s.sessions {
		if len(ss.holds) == 0 || ss == s.sweep { // the sweep's holds go with their scan (pinsweep.go)
			continue
		}
		ss.rescanLocked()
	}
}

// rescanLocked drops the session's holds whose slots no longer hold their
// ids.
func (ss *Session) rescanLocked() {
	for id, h := range ss.holds {
		if !slices.ContainsFunc(h.slots, func(slot uint64) bool { return ss.pins.Holds(slot, uint64(id)) }) {
			ss.s.pins.dropHoldLocked(ss, id)
		}
	}
}

// HasHolds reports, without the store lock, whether the session holds
// memory for pins of deleted ids. The server then calls RescanPins before
// each request, so a client's cleared pins count as released by its next
// request, as deferred releases do.
func (ss *Session) HasHolds() bool { return ss.nholds.Load() > 0 }

// RescanPins drops the session's holds whose pins were cleared.
func (ss *Session) RescanPins() {
	ss.s.mu.Lock()
	defer ss.s.mu.Unlock()
	if !ss.closed {
		ss.rescanLocked()
	}
}

// RescanPins drops the holds whose pins are gone now, as the timer does
// (tests).
func (s *Store) RescanPins() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pins.rescanLocked()
}

// Holds returns the number of holds of all sessions (tests).
func (s *Store) Holds() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holdCount
}

// Published returns the number of directory entries (tests).
func (s *Store) Published() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dir == nil {
		return 0
	}
	return len(s.dir.entries)
}

// closePinsLocked drops the session's holds and its pin page: a client that
// died loses its pins with its connection.
func (ss *Session) closePinsLocked() {
	ss.pins.Revoke() // first: the client stops pinning before any hold goes
	for id := range ss.holds {
		ss.s.pins.dropHoldLocked(ss, id)
	}
	if ss.pins != nil {
		ss.s.pinPages--
	}
	ss.pins.Close()
	ss.pins = nil
}
