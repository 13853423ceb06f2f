package store

import (
	"sort"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// DeleteOptions are upstream's delete flags.
type DeleteOptions struct {
	Force      bool // also delete every object that uses a deleted one
	Deep       bool // delete members too, unless still used elsewhere
	MemoryTrim bool // return freed pages to the kernel
}

// usersOfLocked returns the objects that have id as a member.
func (s *Store) usersOfLocked(id ids.ObjectID) []ids.ObjectID {
	if id.IsBlob() {
		var out []ids.ObjectID
		if b, ok := s.blobs[id]; !ok || b.users == 0 {
			return nil
		}
		for oid, o := range s.objects {
			for _, m := range o.members {
				if m.id == id {
					out = append(out, oid)
					break
				}
			}
		}
		return out
	}
	o, ok := s.objects[id]
	if !ok {
		return nil
	}
	out := make([]ids.ObjectID, 0, len(o.users))
	for u := range o.users {
		out = append(out, u)
	}
	return out
}

// Delete deletes objects with upstream's rules and returns the ids of the
// blobs it deleted. Missing ids are ignored. A blob another session still
// references disappears at once but keeps its memory until the last release.
func (s *Store) Delete(idl []ids.ObjectID, opt DeleteOptions) []ids.ObjectID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deleteLocked(idl, opt)
}

func (s *Store) deleteLocked(idl []ids.ObjectID, opt DeleteOptions) []ids.ObjectID {
	set := map[ids.ObjectID]bool{}
	var queue []ids.ObjectID
	add := func(id ids.ObjectID) {
		if id == ids.EmptyBlob || set[id] || !s.existsLocked(id) {
			return
		}
		if b, ok := s.blobs[id]; ok && !b.sealed {
			return // unsealed blobs belong to their creator (drop_buffer)
		}
		set[id] = true
		queue = append(queue, id)
	}
	for _, id := range idl {
		add(id)
	}
	if opt.Force {
		// Upward closure: everything that uses a deleted object goes too.
		for i := 0; i < len(queue); i++ {
			for _, u := range s.usersOfLocked(queue[i]) {
				add(u)
			}
		}
	} else {
		// A root still used by an object outside the set is kept.
		for changed := true; changed; {
			changed = false
			for id := range set {
				for _, u := range s.usersOfLocked(id) {
					if !set[u] {
						delete(set, id)
						changed = true
						break
					}
				}
			}
		}
	}
	// Downward: members (all with deep, blobs only without) whose every user
	// is being deleted. Iterate to a fixpoint: shared members become
	// deletable once all their users are in.
	for changed := true; changed; {
		changed = false
		for id := range set {
			o, ok := s.objects[id]
			if !ok {
				continue
			}
			for _, m := range o.members {
				if set[m.id] || m.id == ids.EmptyBlob || !s.existsLocked(m.id) {
					continue
				}
				if !opt.Deep && !m.id.IsBlob() {
					continue
				}
				all := true
				for _, u := range s.usersOfLocked(m.id) {
					if !set[u] {
						all = false
						break
					}
				}
				if all {
					set[m.id] = true
					changed = true
				}
			}
		}
	}
	var deleted []ids.ObjectID
	for id := range set {
		if id.IsBlob() {
			if b, ok := s.blobs[id]; ok {
				s.retireLocked(b, opt.MemoryTrim)
				deleted = append(deleted, id)
			}
			continue
		}
		o := s.objects[id]
		for _, m := range o.members {
			if mo, ok := s.objects[m.id]; ok {
				if mo.users[id]--; mo.users[id] <= 0 {
					delete(mo.users, id)
				}
			} else if b, ok := s.blobs[m.id]; ok && b.users > 0 {
				b.users--
			}
		}
		for name := range o.names {
			delete(s.names, name)
		}
		delete(s.objects, id)
	}
	if len(set) > 0 {
		s.bumpEpochLocked()
	}
	sort.Slice(deleted, func(i, j int) bool { return deleted[i] < deleted[j] })
	return deleted
}

// Clear deletes every object and sealed blob (force, deep) and trims memory.
func (s *Store) Clear() {
	s.mu.Lock()
	all := make([]ids.ObjectID, 0, len(s.objects)+len(s.blobs))
	for id := range s.objects {
		all = append(all, id)
	}
	for id, b := range s.blobs {
		if b.sealed {
			all = append(all, id)
		}
	}
	s.deleteLocked(all, DeleteOptions{Force: true, Deep: true, MemoryTrim: true})
	s.mu.Unlock()
	_, _ = s.MemoryTrim()
}
