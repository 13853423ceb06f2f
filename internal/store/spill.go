package store

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/v6d-io/v6d-go/internal/alloc"
	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/shm"
	"github.com/v6d-io/v6d-go/internal/status"
)

// Spilling (docs/design.md, "Spilling"). With Config.SpillPath set, a
// goroutine, the spiller, moves the bytes of sealed blobs nobody holds into
// files of that directory when the arena's usage goes over the upper mark,
// coldest first, until it is under the lower mark; a get of an object with
// spilled blobs loads them back before it answers. The spill files are a
// cache of this daemon's run: removed when their blob is deleted or loaded,
// and at start (stale ones of a daemon that died).
//
// What may spill: a sealed blob (not the empty one, not hollow) with no
// reference of any session (a get's, a pin's hold, a lease's adoption, a
// peer transfer's, a loader's), and no pin of a client in a pin page naming
// it or any object containing it. The first three are the store's refs;
// pins are read from the pin pages as a delete reads them: the spill is
// decided (EventSpilled retires the directory entries of the blob and of
// every object containing it), then the pages are read, and a blob found
// pinned is taken back (EventLoaded, with no I/O) before its memory is
// freed. A client that pins after the retirement sees it when it validates
// its pin and asks by round trip, which loads.
//
// The cold queue orders the candidates: a blob joins it at its back when
// its last reference goes (the daemon does not see gets from the directory,
// so "cold" means "released longest ago"). Entries are not removed when a
// blob is referenced again or deleted: the spiller skips an entry whose
// blob is not cold with the same tick, and the queue is compacted when it
// holds more than twice the live blobs.
//
// I/O is never done under Store.mu: the spiller takes a reference of its
// own session (Store.spill.sess, counted by CheckInvariants like any
// session's) on the blobs it writes or loads, so a delete meanwhile makes
// them zombies and the memory stays until the I/O is over.

// spiller is the store's part that moves blobs to files and back.
type spiller struct{ s *Store }

// Spill settings' defaults (Config).
const (
	DefaultSpillLowerRate = 0.3
	DefaultSpillUpperRate = 0.8
	// DefaultSpillWait is how long a put or a load waits for the spiller
	// to make room before it fails with NotEnoughMemory.
	DefaultSpillWait = 30 * time.Second
	// spillBatch bounds the bytes and blobs of one spill batch (one read
	// of the pin pages, one hold of the lock to commit).
	spillBatch      = 16 << 20
	spillBatchBlobs = 1024
	// spillPause is how long spilling rests after a write failed (a full
	// disk) before it tries again; a spill file removed ends it sooner.
	spillPause = time.Second
)

// spillState is the spiller's state, guarded by Store.mu unless said.
type spillState struct {
	files      *spillFiles
	lower      uint64 // bytes: a pass spills until usage is at most this
	upper      uint64 // bytes: usage at or above starts a pass
	wait       time.Duration
	sess       *Session      // the references of blobs being written or loaded
	cold       []coldEntry   // the cold queue, oldest first from coldHead
	head       int           // first entry of cold not yet taken
	tick       uint64        // the last cold tick given
	gen        uint64        // the last file generation given (spill files' names)
	demand     uint64        // bytes the waiting puts and loads need
	needMax    uint64        // the largest of them (0 when none waits)
	room       chan struct{} // closed (and replaced) at the end of each pass
	freed      uint64        // bytes freed by spills, ever (waiters compare)
	passes     uint64        // passes ended
	started    uint64        // passes started
	removeQ    []string      // files to remove, by the spiller, outside the lock
	diskErr    error         // the last write failure; nil once a write succeeds
	pausedTill time.Time     // no writes before this, after diskErr

	// What is spilled now, for status.
	blobs int
	bytes uint64
	// Counts, ever: blobs spilled, loaded.
	spilledN, loadedN uint64

	io   sync.WaitGroup // reads and writes of the arena in flight, without the lock (Close waits)
	kick chan struct{}  // buffered 1: run a pass
	stop chan struct{}
	done chan struct{}
}

// coldEntry is a blob that went cold at tick.
type coldEntry struct {
	b    *blob
	tick uint64
}

// loadWait is a load in progress: gets of the blob wait for done.
type loadWait struct {
	done chan struct{}
	err  error // set before done is closed
}

// startSpillLocked sets spilling up from cfg; the spill directory was
// checked and emptied of stale files by openSpillFiles.
func (part *spiller) start(cfg Config, files *spillFiles) {
	s := part.s
	limit := s.alloc.Capacity() - HeaderSize
	lower, upper := cfg.SpillLowerRate, cfg.SpillUpperRate
	if lower == 0 {
		lower = DefaultSpillLowerRate
	}
	if upper == 0 {
		upper = DefaultSpillUpperRate
	}
	wait := cfg.SpillWait
	if wait == 0 {
		wait = DefaultSpillWait
	}
	sp := &spillState{
		files: files,
		lower: uint64(lower * float64(limit)),
		upper: uint64(upper * float64(limit)),
		wait:  max(wait, 0),
		room:  make(chan struct{}),
		kick:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	sp.sess = &Session{s: s, refs: map[ids.ObjectID]*blob{}, created: map[ids.ObjectID]*blob{}}
	s.sessions[sp.sess] = struct{}{}
	s.spill = sp
	go part.run()
}

// CheckSpillRates checks spill marks given as fractions of the arena.
func CheckSpillRates(lower, upper float64) error {
	if lower < 0 || upper < 0 || lower > 1 || upper > 1 {
		return fmt.Errorf("spill rates must be within [0, 1]: lower %v, upper %v", lower, upper)
	}
	l, u := lower, upper
	if l == 0 {
		l = DefaultSpillLowerRate
	}
	if u == 0 {
		u = DefaultSpillUpperRate
	}
	if l > u {
		return fmt.Errorf("the spill lower rate %v is above the upper rate %v", l, u)
	}
	return nil
}

var errStoreClosed = status.Errorf(status.AlreadyStopped, "the daemon is stopping")

// waitIO waits for the reads and writes of the arena that loads and spills
// do without the lock; called by Close once the store is closed (no new
// ones start), before it unmaps the arena.
func (part *spiller) waitIO() {
	if sp := part.s.spill; sp != nil {
		sp.io.Wait()
	}
}

// stopSpill stops the spiller and waits for it.
func (part *spiller) stopSpill() {
	s := part.s
	s.mu.Lock()
	sp := s.spill
	s.mu.Unlock()
	if sp == nil {
		return
	}
	select {
	case <-sp.stop:
	default:
		close(sp.stop)
	}
	<-sp.done
}

// kickLocked asks the spiller for a pass.
func (sp *spillState) kickLocked() {
	select {
	case sp.kick <- struct{}{}:
	default:
	}
}

// noteUsageLocked starts a pass when usage reached the upper mark (called
// after an allocation).
func (part *spiller) noteUsageLocked() {
	s := part.s
	if sp := s.spill; sp != nil {
		if used, _ := s.usageLocked(); used >= sp.upper {
			sp.kickLocked()
		}
	}
}

// coldLocked puts b at the back of the cold queue: its last reference went.
func (part *spiller) coldLocked(b *blob) {
	sp := part.s.spill
	if sp == nil || b.state != stateSealed || b.hollow || b.id == ids.EmptyBlob {
		return
	}
	sp.tick++
	b.cold = sp.tick
	sp.cold = append(sp.cold, coldEntry{b: b, tick: sp.tick})
	if n := len(sp.cold) - sp.head; n > 1024 && n > 2*len(part.s.blobs) {
		part.compactLocked()
	}
}

// compactLocked drops the stale entries of the cold queue.
func (part *spiller) compactLocked() {
	sp := part.s.spill
	out := sp.cold[:0] // in place: an entry is written at or before where it is read
	for _, e := range sp.cold[sp.head:] {
		if spillable(e) {
			out = append(out, e)
		}
	}
	clear(sp.cold[len(out):]) // no pointers kept to blobs that may go
	sp.cold, sp.head = out, 0
}

// spillable reports whether the entry's blob may spill now, as far as the
// store knows (pins are read later).
func spillable(e coldEntry) bool {
	b := e.b
	return b.cold == e.tick && b.state == stateSealed && b.refs == 0 && !b.hollow
}

// run is the spiller's goroutine.
func (part *spiller) run() {
	s := part.s
	sp := s.spill
	defer close(sp.done)
	for {
		select {
		case <-sp.stop:
			return
		case <-sp.kick:
		}
		part.pass()
	}
}

// pass removes queued files, then spills batches while usage is above the
// goal, and wakes the waiters.
func (part *spiller) pass() {
	s := part.s
	sp := s.spill
	s.mu.Lock()
	defer s.mu.Unlock()
	sp.started++
	end := sp.tick // blobs that go cold during the pass wait for the next
	active := false
	for !s.closed {
		if len(sp.removeQ) > 0 {
			q := sp.removeQ
			sp.removeQ = nil
			s.mu.Unlock()
			for _, name := range q {
				_ = sp.files.remove(name)
			}
			s.mu.Lock()
			sp.pausedTill = time.Time{} // room on disk, perhaps
			continue
		}
		used, limit := s.usageLocked()
		goal := sp.lower
		if sp.demand > 0 && limit-min(sp.demand, limit) < goal {
			goal = limit - min(sp.demand, limit)
		}
		active = active || used >= sp.upper || sp.demand > 0
		// The bytes a waiter needs may be free but not in one piece: then
		// spill on, at least that much per batch, until they are.
		short := sp.demand > 0 && s.alloc.LargestFree() < sp.needMax
		if (used <= goal && !short) || !active || time.Now().Before(sp.pausedTill) {
			break
		}
		want := uint64(0)
		if used > goal {
			want = used - goal
		}
		if short {
			want = max(want, sp.needMax)
		}
		batch := part.pickLocked(want, end)
		if len(batch) == 0 {
			break
		}
		freed := sp.freed
		part.spillBatchLocked(batch)
		if sp.freed > freed {
			sp.wakeLocked() // a waiting put may fit now: it need not wait for the whole pass
		}
		if sp.diskErr != nil {
			break
		}
	}
	sp.passes++
	sp.wakeLocked()
}

// wakeLocked wakes the waiters of room (waitRoomLocked).
func (sp *spillState) wakeLocked() {
	close(sp.room)
	sp.room = make(chan struct{})
}

// pickLocked takes up to want bytes of cold blobs (at least one) off the
// queue for a batch, each referenced by the spiller's session.
func (part *spiller) pickLocked(want, end uint64) []*blob {
	s := part.s
	sp := s.spill
	var batch []*blob
	var bytes uint64
	for sp.head < len(sp.cold) && bytes < min(want, spillBatch) && len(batch) < spillBatchBlobs {
		e := sp.cold[sp.head]
		if e.tick > end {
			break
		}
		sp.cold[sp.head] = coldEntry{}
		sp.head++
		if !spillable(e) {
			continue
		}
		e.b.cold = 0
		sp.gen++
		e.b.gen = sp.gen
		sp.sess.addRefLocked(e.b)
		batch = append(batch, e.b)
		bytes += e.b.size
	}
	if sp.head == len(sp.cold) {
		sp.cold, sp.head = sp.cold[:0], 0
	}
	return batch
}

// spillBatchLocked writes the batch's blobs to files (without the lock),
// then commits those still spillable and not pinned. s.mu is held on entry
// and on return.
func (part *spiller) spillBatchLocked(batch []*blob) {
	s := part.s
	sp := s.spill
	type job struct {
		b    *blob
		data []byte
		err  error
	}
	jobs := make([]job, len(batch))
	for i, b := range batch {
		jobs[i] = job{b: b, data: s.arena.Bytes()[b.offset : b.offset+b.size]}
	}
	var werr error
	if s.closed {
		werr = errStoreClosed
	}
	sp.io.Add(1) // Close unmaps the arena only after the I/O
	s.mu.Unlock()
	for i := range jobs {
		if werr != nil {
			jobs[i].err = werr
			continue
		}
		if err := sp.files.write(jobs[i].b.id, jobs[i].b.gen, jobs[i].data); err != nil {
			jobs[i].err, werr = err, err
		}
	}
	sp.io.Done()
	s.mu.Lock()
	if werr != nil {
		sp.diskErr = werr
		sp.pausedTill = time.Now().Add(spillPause)
	} else {
		sp.diskErr = nil
	}
	// Decide: every blob written and still unheld but for the spiller is
	// spilled (its entries retire), then the pin pages are read.
	var decided []*blob
	var failed []*blob
	for _, j := range jobs {
		b := j.b
		if j.err == nil && b.state == stateSealed && b.refs == 1 {
			s.life.setStateLocked(b, stateSpilled)
			s.emitLocked(Event{Kind: EventSpilled, ID: b.id, Size: b.size})
			decided = append(decided, b)
			continue
		}
		failed = append(failed, b)
	}
	pinned := part.pinnedLocked(decided)
	for _, b := range decided {
		if pinned[b] {
			// Taken back: its bytes never left.
			s.life.setStateLocked(b, stateLoading)
			s.life.setStateLocked(b, stateSealed)
			s.emitLocked(Event{Kind: EventLoaded, ID: b.id, Size: b.size})
			failed = append(failed, b)
			continue
		}
		_ = s.alloc.Free(b.offset)
		b.disk = true
		sp.blobs++
		sp.bytes += b.size
		sp.spilledN++
		sp.freed += b.size
		sp.sess.releaseLocked(b.id)
	}
	for _, b := range failed {
		sp.removeQ = append(sp.removeQ, sp.files.name(b.id, b.gen))
		sp.sess.releaseLocked(b.id) // unheld, it goes to the back of the cold queue
	}
}

// pinnedLocked reads every pin page for the blobs of bl and every object
// containing them, and returns the blobs some pin names.
func (part *spiller) pinnedLocked(bl []*blob) map[*blob]bool {
	s := part.s
	if s.dir == nil || s.pinPages == 0 || len(bl) == 0 {
		return nil
	}
	owner := map[ids.ObjectID][]*blob{}
	for _, b := range bl {
		s.users.containersLocked(b.id, func(id ids.ObjectID, _ map[ids.ObjectID]int) {
			owner[id] = append(owner[id], b)
		})
	}
	want := make([]uint64, 0, len(owner))
	for id := range owner {
		want = append(want, uint64(id))
	}
	pinIDs := shm.NewPinIDs(want)
	out := map[*blob]bool{}
	for ss := range s.sessions {
		if ss.pins == nil {
			continue
		}
		ss.pins.Find(pinIDs, func(_, v uint64) {
			for _, b := range owner[ids.ObjectID(v)] {
				out[b] = true
			}
		})
	}
	return out
}

// freeSpilledLocked forgets the file of a spilled blob being freed.
func (part *spiller) freeSpilledLocked(b *blob) {
	sp := part.s.spill
	b.disk = false
	if sp == nil {
		return
	}
	sp.blobs--
	sp.bytes -= b.size
	sp.removeQ = append(sp.removeQ, sp.files.name(b.id, b.gen))
	sp.kickLocked()
}

// allocLocked allocates size bytes of the arena; when they are not free
// and spilling is on, it waits (releasing s.mu) while the spiller makes
// room, up to Config.SpillWait. Its error is alloc's.
func (part *spiller) allocLocked(size uint64) (uint64, error) {
	s := part.s
	off, err := s.alloc.Alloc(size)
	if err == nil || !errors.Is(err, alloc.ErrNotEnoughMemory) || s.spill == nil {
		return off, err
	}
	deadline := time.Now().Add(s.spill.wait)
	for part.waitRoomLocked(size, deadline) {
		if off, err = s.alloc.Alloc(size); err == nil {
			return off, nil
		}
	}
	return s.alloc.Alloc(size) // a delete may have made room meanwhile
}

// waitRoomLocked asks the spiller for need bytes and waits for its pass,
// releasing s.mu. It reports whether to try again: false when spilling is
// off or closed, the deadline passed, or the pass freed nothing.
func (part *spiller) waitRoomLocked(need uint64, deadline time.Time) bool {
	s := part.s
	sp := s.spill
	if sp == nil || s.closed {
		return false
	}
	left := time.Until(deadline)
	if left <= 0 {
		return false
	}
	// Only a pass that started after this call and freed nothing says
	// there is nothing to spill: one running now may have looked at its
	// candidates before they went cold.
	freed, mark := sp.freed, sp.started
	sp.demand += need
	sp.needMax = max(sp.needMax, need)
	defer func() {
		if sp.demand -= need; sp.demand == 0 {
			sp.needMax = 0
		}
	}()
	t := time.NewTimer(left)
	defer t.Stop()
	for {
		room := sp.room
		sp.kickLocked()
		s.mu.Unlock()
		timeout := false
		select {
		case <-room:
		case <-t.C:
			timeout = true
		}
		s.mu.Lock()
		switch {
		case s.closed:
			return false
		case sp.freed > freed:
			return true
		case timeout || sp.passes > mark:
			return false
		}
	}
}

// noRoomLocked describes, for a NotEnoughMemory error, what the spill
// directory holds and why it could not make room; "" without spilling.
func (part *spiller) noRoomLocked() string {
	sp := part.s.spill
	if sp == nil {
		return ""
	}
	s := part.s
	msg := fmt.Sprintf("; the spill directory %s holds %d blobs (%d bytes)", sp.files.dir, sp.blobs, sp.bytes)
	if sp.diskErr != nil {
		return msg + fmt.Sprintf(", and spilling is paused: %v", sp.diskErr)
	}
	msg += ", and the blobs in the arena are all held (referenced, pinned or being written)"
	if s.leased > 0 {
		msg += fmt.Sprintf(", %d bytes leased to clients", s.leased)
	}
	return msg + fmt.Sprintf("; the largest free extent is %d bytes", s.alloc.LargestFree())
}

// loadLocked makes every blob of bl resident: the spilled ones are loaded
// (allocating their memory, spilling others if needed), those being loaded
// by another get are waited for. s.mu is held on entry and on return but
// released meanwhile, so the caller must look at its blobs again. It
// returns the first error (a file missing or corrupt, no room).
func (part *spiller) loadLocked(bl []*blob) error {
	s := part.s
	sp := s.spill
	var mine []*blob
	var waits []*loadWait
	var firstErr error
	for _, b := range bl {
		switch b.state {
		case stateLoading:
			waits = append(waits, b.load)
			continue
		case stateSpilled:
		default:
			continue
		}
		if sp == nil {
			return status.Errorf(status.IOError, "blob %v is spilled but spilling is off", b.id)
		}
		off, err := part.allocLocked(b.size)
		if b.state != stateSpilled { // it changed while we waited for room
			if err == nil {
				_ = s.alloc.Free(off)
			}
			if b.state == stateLoading {
				waits = append(waits, b.load)
			}
			continue
		}
		if err != nil {
			used, limit := s.usageLocked()
			firstErr = status.Errorf(status.NotEnoughMemory,
				"cannot load spilled blob %v of %d bytes: %d of %d bytes are in use%s",
				b.id, b.size, used, limit, part.noRoomLocked())
			break
		}
		b.offset = off
		b.disk = false
		sp.blobs--
		sp.bytes -= b.size
		s.pf.noteAllocLocked(off, b.size)
		s.life.setStateLocked(b, stateLoading)
		b.load = &loadWait{done: make(chan struct{})}
		sp.sess.addRefLocked(b)
		mine = append(mine, b)
	}
	if len(mine) > 0 {
		errs := make([]error, len(mine))
		bufs := make([][]byte, len(mine))
		for i, b := range mine {
			bufs[i] = s.arena.Bytes()[b.offset : b.offset+b.size]
		}
		closed := s.closed
		sp.io.Add(1) // Close unmaps the arena only after the I/O
		s.mu.Unlock()
		for i, b := range mine {
			if closed {
				errs[i] = errStoreClosed
				continue
			}
			errs[i] = sp.files.read(b.id, b.gen, bufs[i])
		}
		sp.io.Done()
		s.mu.Lock()
		for i, b := range mine {
			err := errs[i]
			switch {
			case b.state == stateLoading && err == nil:
				s.life.setStateLocked(b, stateSealed)
				sp.loadedN++
				sp.removeQ = append(sp.removeQ, sp.files.name(b.id, b.gen))
				s.emitLocked(Event{Kind: EventLoaded, ID: b.id, Size: b.size})
			case b.state == stateLoading:
				// The file is bad: the blob stays spilled, each get fails.
				s.life.setStateLocked(b, stateSpilled)
				_ = s.alloc.Free(b.offset)
				b.disk = true
				sp.blobs++
				sp.bytes += b.size
			default: // deleted meanwhile: a zombie the release frees
				sp.removeQ = append(sp.removeQ, sp.files.name(b.id, b.gen))
			}
			if err != nil {
				err = status.Errorf(status.IOError, "cannot load spilled blob %v: %v", b.id, err)
				if firstErr == nil {
					firstErr = err
				}
			}
			b.load.err = err
			close(b.load.done)
			b.load = nil
			sp.sess.releaseLocked(b.id)
		}
		sp.kickLocked() // remove the loaded files
	}
	if len(waits) > 0 {
		s.mu.Unlock()
		for _, w := range waits {
			<-w.done
			if w.err != nil && firstErr == nil {
				firstErr = w.err
			}
		}
		s.mu.Lock()
	}
	return firstErr
}

// maxLoadRounds bounds how often a get loads its blobs again because
// another spill took them meanwhile.
const maxLoadRounds = 16

// needsLoad reports whether a blob of bl is not in the arena.
func needsLoad(bl []*blob) bool {
	for _, b := range bl {
		if b.state == stateSpilled || b.state == stateLoading {
			return true
		}
	}
	return false
}

// SpillStats is what the spill directory holds and has done.
type SpillStats struct {
	Enabled      bool
	Dir          string
	Blobs        int    // spilled now
	Bytes        uint64 // spilled now
	Spilled      uint64 // blobs spilled, ever
	Loaded       uint64 // blobs loaded back, ever
	Lower, Upper uint64 // the marks, in bytes
	DiskError    string // the last write failure; "" when none
}

// SpillStats returns the spill directory's state.
func (s *Store) SpillStats() SpillStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	sp := s.spill
	if sp == nil {
		return SpillStats{}
	}
	st := SpillStats{Enabled: true, Dir: sp.files.dir, Blobs: sp.blobs, Bytes: sp.bytes,
		Spilled: sp.spilledN, Loaded: sp.loadedN, Lower: sp.lower, Upper: sp.upper}
	if sp.diskErr != nil {
		st.DiskError = sp.diskErr.Error()
	}
	return st
}

// blobsOfIDsLocked returns the live blobs of the objects and blobs of idl.
func (s *Store) blobsOfIDsLocked(idl []ids.ObjectID) ([]*blob, error) {
	seen := map[ids.ObjectID]bool{}
	var bl []*blob
	for _, id := range idl {
		if !s.existsLocked(id) {
			return nil, status.Errorf(status.ObjectNotExists, "object %v does not exist", id)
		}
		bl = s.text.blobsOfLocked(bl, id, seen)
	}
	return bl, nil
}

// Evict spills the blobs of the objects idl now, those that may spill
// (sealed, held by nobody); the others stay. It fails when spilling is off
// or a write fails.
func (ss *Session) Evict(idl []ids.ObjectID) error {
	if err := checkItems("ids", len(idl)); err != nil {
		return err
	}
	s := ss.s
	s.mu.Lock()
	defer s.mu.Unlock()
	sp := s.spill
	if sp == nil {
		return status.Errorf(status.Invalid, "spilling is off: start the daemon with --spill-path")
	}
	bl, err := s.blobsOfIDsLocked(dedupe(idl))
	if err != nil {
		return err
	}
	var batch []*blob
	for _, b := range bl {
		if b.state == stateSealed && b.refs == 0 && !b.hollow && b.id != ids.EmptyBlob {
			b.cold = 0
			sp.gen++
			b.gen = sp.gen
			sp.sess.addRefLocked(b)
			batch = append(batch, b)
		}
	}
	for len(batch) > 0 {
		n := min(len(batch), spillBatchBlobs)
		s.sp.spillBatchLocked(batch[:n])
		batch = batch[n:]
		if sp.diskErr != nil {
			for _, b := range batch {
				sp.sess.releaseLocked(b.id)
			}
			return status.Errorf(status.IOError, "evict: %v", sp.diskErr)
		}
	}
	sp.kickLocked()
	return nil
}

// Load makes the objects idl resident, loading their spilled blobs; with
// pin, the session also takes a reference to each blob, so none spills
// until Unpin (or the session closes).
func (ss *Session) Load(idl []ids.ObjectID, pin bool) error {
	if err := checkItems("ids", len(idl)); err != nil {
		return err
	}
	s := ss.s
	s.mu.Lock()
	defer s.mu.Unlock()
	idl = dedupe(idl)
	for range maxLoadRounds {
		bl, err := s.blobsOfIDsLocked(idl)
		if err != nil {
			return err
		}
		if !needsLoad(bl) {
			if pin {
				for _, b := range bl {
					ss.addRefLocked(b)
				}
			}
			return nil
		}
		if err := s.sp.loadLocked(bl); err != nil {
			return err
		}
	}
	return errLoadRace
}

// Unpin drops the session's references to the blobs of idl (taken by Load
// with pin, or by gets).
func (ss *Session) Unpin(idl []ids.ObjectID) error {
	if err := checkItems("ids", len(idl)); err != nil {
		return err
	}
	s := ss.s
	s.mu.Lock()
	defer s.mu.Unlock()
	bl, err := s.blobsOfIDsLocked(dedupe(idl))
	if err != nil {
		return err
	}
	for _, b := range bl {
		ss.releaseLocked(b.id)
	}
	return nil
}

var errLoadRace = status.Errorf(status.NotEnoughMemory,
	"the object's blobs were spilled again while it was loaded, %d times: the arena is too small for it", maxLoadRounds)

// checkSpillLocked checks the spill counts against the blobs whose bytes
// are in files, and that those files exist (CheckInvariants).
func (part *checker) checkSpillLocked(fail func(string, ...any)) {
	s := part.s
	sp := s.spill
	n, bytes := 0, uint64(0)
	count := func(b *blob) {
		if !b.disk {
			return
		}
		n++
		bytes += b.size
		if sp == nil {
			fail("blob %v is spilled but spilling is off", b.id)
		}
	}
	for _, b := range s.blobs {
		count(b)
	}
	for _, b := range s.zombies {
		count(b)
	}
	if sp != nil && (n != sp.blobs || bytes != sp.bytes) {
		fail("%d blobs of %d bytes are spilled, the spill counts say %d of %d", n, bytes, sp.blobs, sp.bytes)
	}
}
