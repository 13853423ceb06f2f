package store

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/v6d-io/v6d-go/internal/alloc"
	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/meta"
)

// checker runs the checks of CheckInvariants, each over one part of the
// store's bookkeeping.
type checker struct{ s *Store }

// CheckInvariants checks the store's bookkeeping against itself and returns
// every violation found (nil if none). It holds the store lock and costs
// O(size of the store): it is meant for tests and fuzzing, not for serving.
//
// What it checks:
//   - references: each blob's refs equals the number of open sessions that
//     hold it, and sessions hold only live blobs or zombies;
//   - every blob's state is one of the table's, reached by an edge of the
//     table (states.go), and matches the map that holds it: live blobs are
//     unsealed, sealed, spilled or loading, zombies (deleted, still
//     referenced) are zombies and referenced; no illegal change was tried;
//   - unsealed blobs are owned by an open session that lists them, sealed
//     ones by none;
//   - names point at live, persisted objects that list them, and back;
//   - the reverse index: users of every live object and blob are exactly the
//     live objects that have it as a member (counting links), and every
//     member of a live object is live;
//   - directory entries name live objects and sealed blobs, a reader finds
//     each, and each record equals what publishing it now would write (the
//     tree and the blob extents: no published tree is stale); holds
//     are counted: holdCount is the number of holds of open sessions;
//   - allocator usage equals the header plus the extents of live blobs,
//     zombies and the sessions' leases, each blob and lease its own
//     allocation (a blob's large enough for its size), and the leases add
//     up to the store's count of leased bytes.
func (s *Store) CheckInvariants() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(format, args...))
	}
	s.chk.checkRefsLocked(fail)
	s.chk.checkNamesLocked(fail)
	s.chk.checkIndexLocked(fail)
	s.chk.checkIDIndexLocked(fail)
	s.chk.checkAllocLocked(fail)
	s.chk.checkDirectoryLocked(fail)
	s.chk.checkStatesLocked(fail)
	s.chk.checkSpillLocked(fail)
	return errors.Join(errs...)
}

// checkRefsLocked checks references, zombies and ownership.
func (part *checker) checkRefsLocked(fail func(string, ...any)) {
	s := part.s
	held := map[*blob]int{}
	for ss := range s.sessions {
		if ss.closed {
			fail("closed %v is still open in the store", ss)
		}
		for id, b := range ss.refs {
			held[b]++
			if b.id != id {
				fail("%v holds %v under id %v", ss, b.id, id)
			}
			if s.blobs[id] != b && s.zombies[id] != b {
				fail("%v holds %v, which is neither live nor a zombie", ss, id)
			}
		}
		for id, h := range ss.holds {
			for _, b := range h.blobs {
				held[b]++ // a hold (a pin of a deleted id) counts one reference per blob
				if s.blobs[b.id] != b && s.zombies[b.id] != b {
					fail("%v holds %v for the pin of %v, which is neither live nor a zombie", ss, b.id, id)
				}
			}
		}
		for id, b := range ss.created {
			if s.blobs[id] != b || b.state != stateUnsealed || b.owner != ss {
				fail("%v lists %v as its unsealed blob, but it is not (%v)", ss, id, b.state)
			}
		}
	}
	for id, b := range s.blobs {
		if b.refs != held[b] {
			fail("blob %v counts %d references, sessions hold %d", id, b.refs, held[b])
		}
		if _, ok := s.zombies[id]; ok {
			fail("blob %v is both live and a zombie", id)
		}
		if b.state == stateUnsealed {
			if b.owner == nil || b.owner.created[id] != b {
				fail("unsealed blob %v has no owner that lists it", id)
			} else if _, open := s.sessions[b.owner]; !open {
				fail("unsealed blob %v is owned by a closed session", id)
			}
		} else if b.owner != nil {
			fail("sealed blob %v still has an owner", id)
		}
	}
	for id, b := range s.zombies {
		if b.refs != held[b] || b.refs <= 0 {
			fail("zombie %v counts %d references, sessions hold %d", id, b.refs, held[b])
		}
	}
	if _, ok := s.blobs[ids.EmptyBlob]; ok {
		fail("the empty blob is stored")
	}
}

// checkNamesLocked checks names both ways, and, with the local backend,
// that the persisted trees are those of the live persisted objects.
func (part *checker) checkNamesLocked(fail func(string, ...any)) {
	s := part.s
	names, err := s.meta.ListNames()
	if err != nil {
		if !s.closed && !errors.Is(err, meta.ErrEtcd) { // etcd may be down
			fail("list names: %v", err)
		}
		return
	}
	part.checkNameIndexLocked(fail)
	_, alone := s.meta.(*meta.Local)
	for name, id := range names {
		o, ok := s.objects[id]
		if !ok && !alone {
			// A cluster's names may point at objects of other instances,
			// or at objects deleted since by their owner.
			continue
		}
		if !ok {
			fail("name %q points at %v, which is not a live object", name, id)
			continue
		}
		// In a cluster, another daemon may have set the name a moment ago,
		// and the watch not yet reported it (applyNameLocked).
		if _, ok := o.names[name]; !ok && alone {
			fail("name %q points at %v, which does not list it", name, id)
		}
		if !o.persisted {
			fail("name %q points at transient %v", name, id)
		}
	}
	if !alone {
		// Another daemon may have moved or dropped a name an object here
		// lists, and the watch not yet reported it (applyNameLocked).
		return
	}
	for id, o := range s.objects {
		for name := range o.names {
			if names[name] != id {
				fail("%v lists name %q, which points at %v", id, name, names[name])
			}
		}
	}
	local, ok := s.meta.(*meta.Local)
	if !ok {
		return // other backends share trees of other daemons
	}
	for _, id := range local.Trees() {
		if o, ok := s.objects[id]; !ok || !o.persisted {
			fail("the backend keeps a tree of %v, which is not a live persisted object", id)
		}
	}
	for id, o := range s.objects {
		if _, ok := local.Tree(id); o.persisted && !ok {
			fail("persisted %v has no tree in the backend", id)
		}
	}
}

// checkIndexLocked recomputes the reverse index from the members of live
// objects and compares.
func (part *checker) checkIndexLocked(fail func(string, ...any)) {
	s := part.s
	want := map[ids.ObjectID]map[ids.ObjectID]int{}
	for id, o := range s.objects {
		if o.id != id {
			fail("object %v is stored under %v", o.id, id)
		}
		for _, m := range o.members {
			if m.id == ids.EmptyBlob {
				continue
			}
			if !s.existsLocked(m.id) {
				if o.isGlobal() {
					continue // a partition on another instance, which may be gone since
				}
				fail("member %q (%v) of live %v does not exist", m.key, m.id, id)
				continue
			}
			if want[m.id] == nil {
				want[m.id] = map[ids.ObjectID]int{}
			}
			want[m.id][id]++
		}
	}
	same := func(target ids.ObjectID, got map[ids.ObjectID]int) {
		exp := want[target]
		if len(got) != len(exp) {
			fail("%v has %d users in the index, %d in fact", target, len(got), len(exp))
			return
		}
		for u, n := range exp {
			if got[u] != n {
				fail("%v: user %v has %d links in the index, %d in fact", target, u, got[u], n)
			}
		}
	}
	for id, o := range s.objects {
		same(id, o.users)
	}
	for id, b := range s.blobs {
		same(id, b.users)
	}
}

// checkAllocLocked checks that the allocator's usage is the header plus the
// extents of live blobs and zombies.
func (part *checker) checkAllocLocked(fail func(string, ...any)) {
	s := part.s
	if s.closed {
		return
	}
	used, live := uint64(HeaderSize), 1
	offsets := map[uint64]ids.ObjectID{}
	count := func(b *blob) {
		if b.id == ids.EmptyBlob {
			fail("the empty blob is stored")
			return
		}
		if b.disk {
			if b.state != stateSpilled && b.state != stateZombie {
				fail("blob %v is %v but its bytes are in a spill file", b.id, b.state)
			}
			return
		}
		if b.state == stateSpilled {
			fail("blob %v is spilled but has no spill file", b.id)
		}
		if b.hollow {
			if b.size != 0 {
				fail("blob %v owns no memory but has %d bytes", b.id, b.size)
			}
			return
		}
		size, ok := s.alloc.SizeOf(b.offset)
		if !ok {
			fail("blob %v at offset %d has no allocation", b.id, b.offset)
			return
		}
		if other, dup := offsets[b.offset]; dup {
			fail("blobs %v and %v share offset %d", other, b.id, b.offset)
		}
		offsets[b.offset] = b.id
		if size < b.size || size >= b.size+alloc.Alignment && b.size > 0 {
			fail("blob %v of %d bytes has an allocation of %d", b.id, b.size, size)
		}
		used += size
		live++
	}
	for _, b := range s.blobs {
		count(b)
	}
	for _, b := range s.zombies {
		count(b)
	}
	lused, llive := s.chk.checkLeasesLocked(fail, offsets)
	used += lused
	live += llive
	if s.alloc.Used() != used || s.alloc.Live() != live {
		fail("allocator has %d bytes in %d allocations, blobs account for %d bytes in %d",
			s.alloc.Used(), s.alloc.Live(), used, live)
	}
}

// checkDirectoryLocked checks the directory's entries and the hold count.
func (part *checker) checkDirectoryLocked(fail func(string, ...any)) {
	s := part.s
	holds := 0
	for ss := range s.sessions {
		holds += len(ss.holds)
	}
	if holds != s.holdCount {
		fail("sessions have %d holds, the store counts %d", holds, s.holdCount)
	}
	if s.dir == nil || s.closed { // a closed directory is unmapped
		return
	}
	view, err := s.dir.d.View()
	if err != nil {
		fail("directory: %v", err)
		return
	}
	for id, e := range s.dir.entries {
		if !s.pub.localTreeLocked(id, 0) {
			fail("directory entry %v names no live local object or sealed blob", id)
			continue
		}
		rec, slot, _, ok := view.Lookup(uint64(id), maxDirRecord)
		if !ok || slot != e.slot {
			fail("directory entry %v (slot %d) is not found by a reader (%v, slot %d)", id, e.slot, ok, slot)
			continue
		}
		tree, extents := s.pub.recordLocked(id)
		if !bytes.Equal(rec.Tree, tree) || !slices.Equal(rec.Blobs, extents) {
			fail("the directory's record of %v is stale: it holds %s %v, the tree is now %s %v",
				id, rec.Tree, rec.Blobs, tree, extents)
		}
	}
}

// checkNameIndexLocked checks that Store.listedBy names exactly the local
// objects whose o.names list each name.
func (part *checker) checkNameIndexLocked(fail func(string, ...any)) {
	s := part.s
	listed := 0
	for id, o := range s.objects {
		for name := range o.names {
			listed++
			if _, ok := s.listedBy[name][id]; !ok {
				fail("%v lists name %q, which the name index does not record", id, name)
			}
		}
	}
	indexed := 0
	for name, by := range s.listedBy {
		if len(by) == 0 {
			fail("the name index keeps an empty set for %q", name)
		}
		indexed += len(by)
	}
	if indexed != listed {
		fail("the name index records %d listings, the objects list %d", indexed, listed)
	}
}
