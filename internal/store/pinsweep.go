package store

import (
	"runtime"
	"slices"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/shm"
)

// Deferred pin scans. A delete reads every pin page for pins of what it
// deletes (holdPinnedLocked), under the store lock. A page is as long as
// its client says (its hint, which the client writes): an honest client
// uses a few slots, but a client that claims all 65,531 of them, filled with
// junk, made every delete read them, and a thousand such connections made
// each delete take 157 ms and stall every client as long (issue 32).
//
// So a delete reads at once only the pages whose hint is at most pinScanNow
// words; the others it leaves to sweepPins, which reads them afterwards,
// one page per hold of the lock, for all the deletes queued when its pass
// began at once (a stream of deletes costs one pass at a time, not one per
// delete). Until then, the sweep session holds the
// blobs of each deleted id (one reference each, as a hold does), so no
// memory a pin may still reach is freed; a pin the sweep finds becomes a
// hold of its own session, as at delete time, and when the last page of
// the delete is read the sweep drops its own holds (the memory nothing
// else holds is freed then). A delete's cost under the lock is then its
// own ids' plus at most pinScanNow words per page, whatever other
// connections wrote: long pages cost the sweep, in the background, and
// only delay when the memory of deleted blobs is reused.
//
// The order argument of holdPinnedLocked holds: the entries were retired
// before the delete decided which pages to read, so a pin stored later is
// never used, and a pin stored before is still in its slot when the sweep
// reads the page (or its client cleared it, and needs no hold).

// pinScanNow is the longest page (in slots, by the client's hint) a delete
// reads itself.
const pinScanNow = 1024

// sweepJob is the deferred part of one delete: the pages to read and the
// ids to look for.
type sweepJob struct {
	gone  []uint64       // the ids to look for
	idl   []ids.ObjectID // the ids whose blobs the sweep session holds
	pages []*Session
}

// sweepPass is the sweep's current read: the jobs queued when it began,
// merged, so every page is read once per pass however many deletes wait.
type sweepPass struct {
	ids   shm.PinIDs
	idl   []ids.ObjectID
	pages []*Session
}

// deferPinScanLocked makes the sweep session hold the blobs of the ids of
// order and queues the read of pages. s.mu is held, before the delete
// takes anything apart.
func (part *pinHolds) deferPinScanLocked(gone []uint64, order []ids.ObjectID, pages []*Session) {
	s := part.s
	if s.sweep == nil {
		s.sweep = &Session{s: s, refs: map[ids.ObjectID]*blob{}, created: map[ids.ObjectID]*blob{}}
		s.sessions[s.sweep] = struct{}{}
	}
	job := &sweepJob{gone: gone, pages: pages}
	for _, id := range order {
		if _, held := s.sweep.holds[id]; held {
			continue
		}
		var kept []*blob
		for _, b := range s.text.blobsOfLocked(nil, id, map[ids.ObjectID]bool{}) {
			if b.id != ids.EmptyBlob {
				b.refs++
				kept = append(kept, b)
			}
		}
		if len(kept) > 0 {
			s.pins.addHoldLocked(s.sweep, id, &hold{blobs: kept})
			job.idl = append(job.idl, id)
		}
	}
	if len(job.idl) == 0 {
		return
	}
	s.sweepJobs = append(s.sweepJobs, job)
	if !s.sweepRunning {
		s.sweepRunning = true
		go s.pins.sweepPins()
	}
}

// sweepPins reads the queued pages, one per hold of the store lock, until
// no job is left or the store closes.
func (part *pinHolds) sweepPins() {
	s := part.s
	for s.pins.sweepStep() {
		runtime.Gosched()
	}
}

// sweepStep starts a pass with the queued jobs, reads one page of it, or
// ends it; false when there is nothing left to do.
func (part *pinHolds) sweepStep() bool {
	s := part.s
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.sweepCur
	if s.closed || (p == nil && len(s.sweepJobs) == 0) {
		s.sweepRunning = false
		return false
	}
	if p == nil {
		var gone []uint64
		seen := map[*Session]bool{}
		p = &sweepPass{}
		for _, job := range s.sweepJobs {
			gone = append(gone, job.gone...)
			p.idl = append(p.idl, job.idl...)
			for _, ss := range job.pages {
				if !seen[ss] {
					seen[ss] = true
					p.pages = append(p.pages, ss)
				}
			}
		}
		p.ids = shm.NewPinIDs(gone)
		s.sweepJobs = nil
		s.sweepCur = p
		return true
	}
	if len(p.pages) > 0 {
		ss := p.pages[0]
		p.pages = p.pages[1:]
		if !ss.closed && ss.pins != nil {
			ss.pins.Find(p.ids, func(slot, v uint64) { s.pins.holdSweptLocked(ss, ids.ObjectID(v), slot) })
			s.sweepPages.Add(1)
		}
		return true
	}
	for _, id := range p.idl {
		if _, ok := s.sweep.holds[id]; ok {
			s.pins.dropHoldLocked(s.sweep, id)
		}
	}
	s.sweepCur = nil
	return true
}

// holdSweptLocked is holdLocked for a pin the sweep found: the id's tree is
// gone, its blobs are those the sweep holds for it.
func (part *pinHolds) holdSweptLocked(ss *Session, id ids.ObjectID, slot uint64) {
	s := part.s
	if h, ok := ss.holds[id]; ok {
		h.slots = append(h.slots, slot)
		return
	}
	sh, ok := s.sweep.holds[id]
	if !ok {
		return
	}
	bl := slices.Clone(sh.blobs)
	for _, b := range bl {
		b.refs++
	}
	s.pins.addHoldLocked(ss, id, &hold{blobs: bl, slots: []uint64{slot}})
}

// pinSweepIdle reports whether no deferred pin scan is queued or running
// (tests).
func (part *pinHolds) pinSweepIdle() bool {
	s := part.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sweepJobs) == 0 && s.sweepCur == nil
}

// PinSweepIdle reports whether no deferred pin scan is queued or running
// (tests: the sweep's own holds count in Holds until its pass ends).
func (s *Store) PinSweepIdle() bool { return s.pins.pinSweepIdle() }
