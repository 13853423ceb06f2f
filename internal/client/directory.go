package client

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/shm"
	"github.com/v6d-io/v6d-go/internal/status"
)

// Gets without a round trip (docs/design.md). A daemon that has the
// directory sends, with register_reply, its read-only fd, the arena's
// read-only fd and a pin page of this connection. A get of an id the
// directory holds copies its record (tree and blob extents), stores the id
// in a free pin slot, and checks that the entry did not change meanwhile;
// then the daemon frees none of its blobs until the slot is cleared, and
// the get made no round trip. Any failed step (no entry, an entry being
// written or changed, no free slot) falls back to the round trip.
//
// Locally a blob got this way is counted like any other (blob.pins); its
// bytes are backed by a slot hold (blob.hold) instead of a daemon
// reference when the client held no reference to it before. A hold lasts
// while any blob it backs is counted: when the last count of such a blob
// goes (Release, UnmapPrivate, a lease), the blob leaves its hold, and the
// hold's slot is cleared when no blob is left in it. Clearing a slot is the
// release: no message.

// NoDirectoryEnv names the variable that, set to a non-empty value, makes Connect ask for no
// directory (WithoutDirectory): every get takes the round trip. For
// measurements and for comparing both paths.
const NoDirectoryEnv = "VINEYARD_NO_DIRECTORY"

// maxDirRecord bounds the record a lookup copies (the daemon publishes none
// larger; see store).
const maxDirRecord = 64 << 10

// WithoutDirectory makes Connect ask the daemon for no directory: every get
// takes a round trip, as with upstream's daemon.
func WithoutDirectory() Option {
	return func(o *options) { o.noDirectory = true }
}

// dirState is a client's directory and pin page. Guarded by Client.state.
type dirState struct {
	view   *shm.DirectoryView
	dirMap *shm.Mapping
	pinMap *shm.Mapping
	pins   *shm.PinView
	arena  *arena // the arena the extents lie in
	lost   bool   // the connection was lost (loseLocked): no answer without the daemon
	// The last lookup's copy (shm.DirectoryView.LookupInto), reused: a
	// get allocates no record.
	words []uint64
	blobs []shm.DirBlob
	// shape is the daemon's shape number of the tree the last get
	// answered (its record's; 0 for one of this client's own puts).
	shape uint64
}

// slotHold is one pin slot and the number of blobs it backs.
type slotHold struct {
	slot uint64
	refs int
}

// receiveDirectory receives the fds register_reply.directory announces,
// maps the arena among the regions, and returns the directory set up; nil
// when mapping it failed (gets take round trips). A failed receive is an
// error: the connection is out of step. c.mu must be held.
func (w *wire) receiveDirectory(d *protocol.DirectoryFds) (*dirState, error) {
	var fds [3]int
	for i := range fds {
		fd, err := protocol.RecvFd(w.conn)
		if err != nil {
			for _, f := range fds[:i] {
				_ = unix.Close(f)
			}
			return nil, err
		}
		fds[i] = fd
	}
	a, err := attachArena(fds[0]) // owns fds[0] from here
	if err != nil {
		_ = unix.Close(fds[1])
		_ = unix.Close(fds[2])
		return nil, err
	}
	if old, ok := w.regions[d.StoreFd]; ok {
		old.detach()
	}
	w.regions[d.StoreFd] = a
	if w.onArena != nil {
		w.onArena(a)
	}
	st, err := openDirectory(fds[1], fds[2])
	_ = unix.Close(fds[1])
	_ = unix.Close(fds[2])
	if err != nil {
		return nil, nil // no directory: round trips
	}
	st.arena = a
	return st, nil
}

// openDirectory maps the directory (read-only) and the pin page
// (read-write). A forked child inherits both, with the arena: libv6d's
// reader for children (libv6d/forkread.c, ForkView) reads them without Go.
// The caller keeps the fds.
func openDirectory(dirFd, pinFd int) (*dirState, error) {
	size, err := shm.FileSize(dirFd)
	if err != nil {
		return nil, err
	}
	dm, err := shm.Map(dirFd, size, false)
	if err != nil {
		return nil, err
	}
	view, err := shm.NewDirectoryView(dm.Bytes())
	if err != nil {
		_ = dm.Close()
		return nil, err
	}
	// A daemon of another version may make pages of another size: the
	// view places the daemon's words from the page's end (NewPinView
	// refuses sizes out of bounds, before anything is mapped).
	psize, err := shm.FileSize(pinFd)
	if err == nil && (psize < shm.MinPinPageSize || psize > shm.MaxPinPageSize) {
		err = fmt.Errorf("pin page of %d bytes, want %d to %d", psize, shm.MinPinPageSize, shm.MaxPinPageSize)
	}
	if err != nil {
		_ = dm.Close()
		return nil, err
	}
	pm, err := shm.Map(pinFd, psize, true)
	if err != nil {
		_ = dm.Close()
		return nil, err
	}
	pins, err := shm.NewPinView(pm.Bytes())
	if err != nil {
		_ = dm.Close()
		_ = pm.Close()
		return nil, err
	}
	return &dirState{view: view, dirMap: dm, pinMap: pm, pins: pins}, nil
}

// ForkView returns the mappings a reader in a forked child of this process
// reads (libv6d/forkread.c; docs/design.md, "Reading in a forked child"):
// the daemon's directory (read-only), this connection's pin page
// (read-write) and the arena the directory's extents lie in (read-only).
// ok is false without a directory. They stay mapped until Close.
func (c *Client) ForkView() (dir, pins, arena []byte, ok bool) {
	c.state.Lock()
	defer c.state.Unlock()
	d := c.state.dir
	if d == nil || d.arena == nil {
		return nil, nil, nil, false
	}
	arenas.mu.Lock()
	arena = d.arena.roB
	arenas.mu.Unlock()
	return d.dirMap.Bytes(), d.pinMap.Bytes(), arena, arena != nil
}

// closeDirectoryLocked unmaps the directory and the pin page. c.state must
// be held.
func (r *refs) closeDirectoryLocked() {
	if r.dir == nil {
		return
	}
	_ = r.dir.dirMap.Close()
	_ = r.dir.pinMap.Close()
	r.dir = nil
}

// liveLocal is the check of a get the client may answer without the
// daemon (tree cache, held blobs, directory): the daemon must still be
// there, so that a dead daemon's memory is never served.
//
// Without a system call while the daemon keeps a life word (shm.Life): the
// daemon's process runs, and it still honours this connection's pins.
// Otherwise, or when either says no, the socket is polled as Connected does.
func (c *Client) liveLocal() error {
	if err := c.check(); err != nil {
		return err
	}
	c.state.Lock()
	d := c.state.dir
	alive := d != nil && !d.lost && d.view.Life() == shm.LifeAlive && !d.pins.Revoked()
	c.state.Unlock()
	if alive {
		return nil
	}
	if c.Connected() {
		return nil
	}
	if c.forked() {
		return ErrForked
	}
	if c.mu.TryLock() { // the error a lost connection recorded, if it can be had without waiting
		err := c.usableLocked()
		c.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return status.Errorf(status.ConnectionError,
		"the connection to vineyardd at %s is lost (the daemon stopped or hung up); connect again", c.socket)
}

// directory is the accelerator of gets from the daemon's directory. Its
// state, c.state.dir, is the client's: the pin page and the life word serve the
// other accelerators and the liveness check too.
type directory struct {
	plain
	c *Client
}

// get answers a get of id from the directory: its tree, and with pin, the
// blobs of the tree counted once each (as a get with buffers counts them)
// and backed by a pin slot where nothing backed them yet. It declines
// (nothing taken) when the directory cannot answer. The tree may lie in the
// directory's lookup buffer: it is valid while c.state is held and no other
// lookup runs, and a caller that keeps it copies it. c.state must be held.
func (d *directory) get(id ids.ObjectID, pin bool) ([]byte, []ids.ObjectID, bool) {
	c := d.c
	st := c.state.dir
	if st == nil || c.state.cache.dead.Load() || st.pins.Revoked() { // revoked: pins protect nothing
		return nil, nil, false
	}
	rec, slot, seq, ok := st.view.LookupInto(uint64(id), maxDirRecord, st.words, st.blobs)
	if !ok {
		return nil, nil, false
	}
	st.words, st.blobs = rec.Words, rec.Blobs
	if !pin {
		st.shape = rec.Shape
		return rec.Tree, nil, true
	}
	return d.pin(id, rec, 0, slot, seq)
}

// pin pins the blobs of rec, the record of id: it stores id in a pin slot,
// then checks that the record still stands: for a record of the directory
// (own 0), that its entry's seq at slot is still seq; for one of this
// client's pipelined puts (ownput.go), that the daemon has not handled put
// number own yet, and if it has, the directory answers. c.state must be
// held.
func (d *directory) pin(id ids.ObjectID, rec shm.Record, own, slot, seq uint64) ([]byte, []ids.ObjectID, bool) {
	c := d.c
	st := c.state.dir
	st.shape = rec.Shape
	var room [8][]byte // views of the first blobs, without an allocation
	views := room[:0]
	for _, eb := range rec.Blobs {
		bid := ids.ObjectID(eb.ID)
		if !bid.IsBlob() || bid == ids.EmptyBlob {
			return nil, nil, false
		}
		v, err := st.arena.view(eb.Offset, eb.Size, false)
		if err != nil {
			return nil, nil, false
		}
		views = append(views, v)
	}
	k, ok := st.pins.Set(uint64(id))
	if !ok {
		return nil, nil, false
	}
	switch {
	case own != 0 && st.pins.Handled() >= own:
		// Handled meanwhile: it may be deleted already. The directory
		// answers now, as for any other id.
		st.pins.Clear(k)
		return d.get(id, true)
	case own == 0 && st.view.Seq(slot) != seq: // retired or changed: the pin may be too late
		st.pins.Clear(k)
		return nil, nil, false
	}
	h := c.state.newHoldLocked(k)
	bids := make([]ids.ObjectID, len(rec.Blobs))
	for i, eb := range rec.Blobs {
		bid := ids.ObjectID(eb.ID)
		bids[i] = bid
		b, ok := c.state.blobs[bid]
		if !ok {
			b = c.state.newDirBlobLocked()
			c.state.blobs[bid] = b
		}
		if b.ro == nil {
			b.ro = views[i]
		}
		if b.pins == 0 && b.cached == 0 && b.hold == nil {
			b.hold = h // nothing else backs it
			h.refs++
		}
		b.pins++
	}
	if h.refs == 0 {
		st.pins.Clear(k) // every blob was backed already
	}
	c.dirGets.Add(1)
	if own != 0 {
		c.ownGets.Add(1)
	}
	return rec.Tree, bids, true
}

// unholdLocked drops a blob's hold; the last blob of a hold clears its slot.
// c.state must be held.
func (r *refs) unholdLocked(b *blob) {
	h := b.hold
	if h == nil {
		return
	}
	b.hold = nil
	if h.refs--; h.refs == 0 {
		if r.dir != nil {
			r.dir.pins.Clear(h.slot)
			r.slotsCleared = true
		}
		if len(r.spareHolds) < maxSpares {
			r.spareHolds = append(r.spareHolds, h) // no blob names it any more
		}
	}
}

// maxSpares bounds each list of spare structs a client keeps for reuse.
const maxSpares = 256

// A directory get makes a blob entry and a hold, which its release drops:
// the client reuses them, so that a get and its release allocate nothing
// that a young process's heap would pay a page fault for.

// newHoldLocked returns a hold of slot with no references. c.state must be
// held.
func (r *refs) newHoldLocked(slot uint64) *slotHold {
	if n := len(r.spareHolds); n > 0 {
		h := r.spareHolds[n-1]
		r.spareHolds = r.spareHolds[:n-1]
		*h = slotHold{slot: slot}
		return h
	}
	return &slotHold{slot: slot}
}

// newDirBlobLocked returns the entry of a blob got from the directory.
// c.state must be held.
func (r *refs) newDirBlobLocked() *blob {
	if n := len(r.spareBlobs); n > 0 {
		b := r.spareBlobs[n-1]
		r.spareBlobs = r.spareBlobs[:n-1]
		*b = blob{dirOnly: true}
		return b
	}
	return &blob{dirOnly: true}
}
