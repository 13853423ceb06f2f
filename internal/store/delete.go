package store

import (
	"iter"
	"runtime"
	"slices"
	"sort"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// userIndex is the reverse index of member links: the users of every
// object and blob.
type userIndex struct{ s *Store }

// DeleteOptions are upstream's delete flags.
type DeleteOptions struct {
	Force      bool // also delete every object that uses a deleted one
	Deep       bool // delete members too, unless still used elsewhere
	MemoryTrim bool // return freed pages to the kernel
}

// The reverse index: every live object and blob keeps users, the objects that
// have it as a member (object id → number of member links), maintained by
// linkLocked and unlinkLocked when an object is inserted or deleted. Delete
// walks it, so a delete costs O(what it deletes and their links), never
// O(size of the store).

// usersOfLocked returns the objects that have id as a member (user → number
// of links), nil for an unknown id, for the empty blob and for an object or
// blob nothing has as a member. The map is the
// index itself: callers must not change it.
func (part *userIndex) usersOfLocked(id ids.ObjectID) map[ids.ObjectID]int {
	s := part.s
	if id.IsBlob() {
		if b, ok := s.blobs[id]; ok {
			return b.users
		}
		return nil
	}
	if o, ok := s.objects[id]; ok {
		return o.users
	}
	return nil
}

// containersLocked calls visit once for id and once for every object that
// contains it, directly or through other members (its users, recursively).
func (part *userIndex) containersLocked(id ids.ObjectID, visit func(id ids.ObjectID, users map[ids.ObjectID]int)) {
	seen := map[ids.ObjectID]bool{}
	var walk func(ids.ObjectID)
	walk = func(id ids.ObjectID) {
		if seen[id] {
			return
		}
		seen[id] = true
		users := part.usersOfLocked(id)
		visit(id, users)
		for u := range users {
			walk(u)
		}
	}
	walk(id)
}

// linkLocked records that user has id as a member.
func (part *userIndex) linkLocked(user, id ids.ObjectID) {
	s := part.s
	if id.IsBlob() {
		b, ok := s.blobs[id]
		if !ok {
			return // the empty blob: never deleted, so never indexed
		}
		if b.users == nil {
			b.users = make(map[ids.ObjectID]int, 1)
		}
		b.users[user]++
		return
	}
	if o, ok := s.objects[id]; ok {
		if o.users == nil {
			o.users = make(map[ids.ObjectID]int, 1)
		}
		o.users[user]++
	}
}

// unlinkLocked undoes one linkLocked(user, id); a member already deleted is
// skipped.
func (part *userIndex) unlinkLocked(user, id ids.ObjectID) {
	s := part.s
	users := s.users.usersOfLocked(id)
	if users == nil {
		return
	}
	if users[user]--; users[user] <= 0 {
		delete(users, user)
	}
}

// Delete deletes objects with upstream's rules and returns the ids of the
// blobs it deleted. Missing ids are ignored. A blob another session still
// references disappears at once but keeps its memory until the last release.
// It costs O(what it deletes and their member links).
func (s *Store) Delete(idl []ids.ObjectID, opt DeleteOptions) []ids.ObjectID {
	blobs, _ := s.DeleteCounted(idl, opt)
	return blobs
}

// DeleteCounted is Delete that also returns how many ids (objects and
// blobs) it removed: a client deleting a list in several requests knows
// from it whether another pass could remove more (client.Delete).
func (s *Store) DeleteCounted(idl []ids.ObjectID, opt DeleteOptions) (blobs []ids.ObjectID, removed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deleteLocked(idl, opt)
}

// deletion is one delete in progress: the set of ids it will delete, and the
// same ids in the order they joined it.
type deletion struct {
	s     *Store
	set   map[ids.ObjectID]bool
	order []ids.ObjectID
}

func (s *Store) deleteLocked(idl []ids.ObjectID, opt DeleteOptions) (blobs []ids.ObjectID, removed int) {
	d := s.planDeleteLocked(idl, opt)
	blobs = d.apply(opt.MemoryTrim, false)
	return blobs, len(d.order) + s.cl.deleteRemoteLocked(idl)
}

// planDeleteLocked decides what a delete of idl removes, changing nothing.
func (s *Store) planDeleteLocked(idl []ids.ObjectID, opt DeleteOptions) *deletion {
	d := &deletion{s: s, set: make(map[ids.ObjectID]bool, len(idl))}
	for _, id := range idl {
		d.add(id)
	}
	if opt.Force {
		d.addUsers()
	} else {
		d.keepUsedRoots()
	}
	d.addMembers(opt.Deep)
	return d
}

// add puts id into the set, unless it is missing, the empty blob, unsealed or
// already in.
func (d *deletion) add(id ids.ObjectID) {
	if id == ids.EmptyBlob || d.set[id] || !d.s.existsLocked(id) {
		return
	}
	if b, ok := d.s.blobs[id]; ok && b.state == stateUnsealed {
		return // unsealed blobs belong to their creator (drop_buffer)
	}
	d.set[id] = true
	d.order = append(d.order, id)
}

// addUsers closes the set upward (force): everything that uses a deleted
// object goes too.
func (d *deletion) addUsers() {
	for i := 0; i < len(d.order); i++ {
		for u := range d.s.users.usersOfLocked(d.order[i]) {
			d.add(u)
		}
	}
}

// keepUsedRoots drops from the set every root still used by an object
// outside it (without force). Dropping a root makes its members in the set
// used from outside too, so they are checked again: a worklist, each link
// visited a bounded number of times.
func (d *deletion) keepUsedRoots() {
	queue := append([]ids.ObjectID(nil), d.order...)
	for len(queue) > 0 {
		id := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if !d.set[id] || !d.usedOutside(id) {
			continue
		}
		delete(d.set, id)
		if o, ok := d.s.objects[id]; ok {
			for _, m := range o.members {
				if d.set[m.id] {
					queue = append(queue, m.id)
				}
			}
		}
	}
	kept := d.order[:0]
	for _, id := range d.order {
		if d.set[id] {
			kept = append(kept, id)
		}
	}
	d.order = kept
}

// usedOutside reports whether an object outside the set uses id.
func (d *deletion) usedOutside(id ids.ObjectID) bool {
	for u := range d.s.users.usersOfLocked(id) {
		if !d.set[u] {
			return true
		}
	}
	return false
}

// addMembers closes the set downward: a member (any with deep, blobs only
// without) joins once every one of its users is in the set. Each member
// counts its users in the set as they join, so a member shared by many
// deleted objects costs one step per link, not one scan of its users per
// link.
func (d *deletion) addMembers(deep bool) {
	inSet := map[ids.ObjectID]int{} // member → its distinct users in the set
	for i := 0; i < len(d.order); i++ {
		o, ok := d.s.objects[d.order[i]]
		if !ok {
			continue
		}
		for m := range distinctMembers(o.members) {
			if d.set[m.id] || (!deep && !m.id.IsBlob()) {
				continue
			}
			users := d.s.users.usersOfLocked(m.id)
			if users == nil {
				continue // missing or the empty blob
			}
			if inSet[m.id]++; inSet[m.id] == len(users) {
				d.add(m.id)
			}
		}
	}
}

// distinctMembers yields each id of members once, in order (the same object
// may be a member under several keys): a look at the earlier members for a
// few, a set for many, so an object of 100,000 members costs 100,000 steps,
// not 5 billion (a put of a list that long took seconds in the daemon).
func distinctMembers(members []member) iter.Seq[member] {
	return func(yield func(member) bool) {
		if len(members) <= 16 {
			for j, m := range members {
				if !slices.ContainsFunc(members[:j], func(e member) bool { return e.id == m.id }) && !yield(m) {
					return
				}
			}
			return
		}
		seen := make(map[ids.ObjectID]struct{}, len(members))
		for _, m := range members {
			if _, dup := seen[m.id]; dup {
				continue
			}
			seen[m.id] = struct{}{}
			if !yield(m) {
				return
			}
		}
	}
}

// apply deletes the set and returns the deleted blobs, sorted. trim returns
// the freed pages to the kernel; with trimLater, a blob freed now is left
// for the caller to trim in one pass and only a blob still referenced (freed
// at its last release) is marked for trimming.
func (d *deletion) apply(trim, trimLater bool) []ids.ObjectID {
	s := d.s
	for _, id := range d.order {
		s.emitIDLocked(EventDeleted, id, 0) // the directory retires the entries first
	}
	s.pins.holdPinnedLocked(d.order) // before anything is freed
	var deleted, persisted []ids.ObjectID
	for _, id := range d.order {
		if id.IsBlob() {
			if b, ok := s.blobs[id]; ok {
				s.life.retireLocked(b, trim && (!trimLater || b.refs > 0))
				deleted = append(deleted, id)
			}
			continue
		}
		if o, ok := s.objects[id]; ok && o.persisted {
			persisted = append(persisted, id)
		}
		s.removeObjectLocked(id)
	}
	if len(persisted) > 0 {
		// The objects are gone here: the backend writes their deletion now
		// or queues it until it can (meta.Backend); it fails only once
		// closed, when the store is closing and its lease goes anyway.
		_ = s.meta.Delete(persisted)
	}
	sort.Slice(deleted, func(i, j int) bool { return deleted[i] < deleted[j] })
	return deleted
}

// removeObjectLocked removes a non-blob object, its member links and its
// names.
func (s *Store) removeObjectLocked(id ids.ObjectID) {
	o, ok := s.objects[id]
	if !ok {
		return
	}
	for _, m := range o.members {
		s.users.unlinkLocked(id, m.id)
	}
	for name := range o.names {
		// Queued like the trees' deletion (apply), and only while the name
		// still points here: one moved by another daemon meanwhile stays.
		_ = s.meta.DropNameOf(name, id)
	}
	delete(s.objects, id)
	for name := range o.names {
		s.unlistNameLocked(o, name)
		s.emitLocked(Event{Kind: EventUnnamed, ID: id, Name: name})
	}
}

// clearBatch is how many ids Clear deletes per hold of the store lock.
const clearBatch = 1024

// Clear deletes every object and sealed blob (force, deep) and trims memory.
// It works in batches and releases the store lock between them, so other
// sessions are served while a large store is cleared; objects created while
// it runs may survive it.
func (s *Store) Clear() {
	s.mu.Lock()
	all := make([]ids.ObjectID, 0, len(s.objects)+len(s.blobs))
	for id := range s.objects {
		all = append(all, id)
	}
	for id, b := range s.blobs {
		if b.state != stateUnsealed {
			all = append(all, id)
		}
	}
	s.mu.Unlock()
	// In creation order, blobs are mostly freed next to the extent freed
	// before them, so the allocator merges instead of indexing a new
	// free extent per blob.
	slices.Sort(all)
	opt := DeleteOptions{Force: true, Deep: true}
	for len(all) > 0 {
		n := min(clearBatch, len(all))
		s.mu.Lock()
		s.planDeleteLocked(all[:n], opt).apply(true, true)
		s.mu.Unlock()
		all = all[n:]
		if s.clearHook != nil {
			s.clearHook()
		}
		runtime.Gosched()
	}
	_, _ = s.MemoryTrim()
}
