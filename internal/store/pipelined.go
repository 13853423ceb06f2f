package store

import (
	"encoding/json"
	"slices"
	"sync/atomic"
	"time"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/shm"
	"github.com/v6d-io/v6d-go/internal/status"
)

// Pipelined puts (docs/design.md, "Pipelined puts"): a client that has a
// lease and a pin page writes a small put into memory carved from its
// lease, names the object with an id of its lease's block, sends the
// create_data and goes on without waiting for a reply. Before it writes the
// request it counts it in its pin page (shm.PinPage.Submitted); the daemon
// counts the pipelined requests it handled (pipelinedDoneLocked). A connection
// that cannot find an id may be asking for one that such a put carries and
// the daemon has not read yet (its producer returned, told this process
// the id, and the request still sits in the producer's socket):
// Session.Visible, the barrier the handlers resolving ids call before they
// look, waits until every other session has handled what its client had
// sent when the wait began, so a get that happens after a put returned
// always finds it.

// DefaultPipelineWait bounds the barrier (Session.Visible), a backstop: a
// session is waited for only while its connection holds requests it has
// not handled (Backlog), which takes as long as handling them.
const DefaultPipelineWait = 2 * time.Second

// pipelineWait is the bound in use (SetPipelineWait).
var pipelineWait atomic.Int64

func init() { pipelineWait.Store(int64(DefaultPipelineWait)) }

// SetPipelineWait sets the bound of Session.Visible (tests) and returns the
// previous one.
func SetPipelineWait(d time.Duration) time.Duration {
	return time.Duration(pipelineWait.Swap(int64(d)))
}

// CreateLeased is a put in one request: it adopts blobs carved from the
// session's lease (as AdoptLeaseBlobs), seals them and creates the object of
// content as the id root, whose {"inline": i} members are blobs[i]. root is
// an id of the lease's block with the blob bit cleared, above every blob's;
// the daemon's generator never hands out the value of a leased id, so no
// other object can have it, and it is the object's signature too unless
// content gives one (so the client knows the whole tree it made; see
// client/ownput.go). All or nothing, as CreateInline; the session keeps no
// reference to the blobs. The lease moves past the blobs and root even when
// the tree is refused, as the client's view of it did.
//
// A pipelined request (no reply awaited) is counted handled in the session
// and its pin page under the same lock as its effects, after them (so a
// client that sees the count finds the object in the directory), and
// waiters are woken after the lock (Session.Visible, the client's own gets).
// Its client may have answered a get of root from what it sent, pinning
// root, while the count was lower: when the tree is then refused, the
// count is stored first and the blobs are not freed but held under root
// until that pin goes (holdFailedLocked).
func (ss *Session) CreateLeased(content json.RawMessage, blobs []LeaseBlob, root ids.ObjectID, pipelined bool) (Created, error) {
	s := ss.s
	s.mu.Lock()
	var wake *uint32
	counted := !pipelined
	count := func() {
		if !counted {
			wake, counted = ss.pipelinedDoneLocked(), true
		}
	}
	defer func() {
		count()
		s.mu.Unlock()
		shm.WakeHandled(wake) // a system call: not under the store's lock
	}()
	if len(blobs) == 0 {
		return Created{}, status.Errorf(status.Invalid, "a leased create needs at least one blob")
	}
	if err := checkItems("lease blobs", len(blobs)); err != nil {
		return Created{}, err
	}
	if len(content) == 0 || string(content) == "null" {
		return Created{}, status.Errorf(status.MetaTreeInvalid, "a leased create needs a tree")
	}
	if ss.closed {
		return Created{}, status.Errorf(status.Invalid, "the session is closed")
	}
	if err := ss.checkLeaseBlobsLocked(blobs); err != nil {
		return Created{}, err
	}
	last := blobs[len(blobs)-1].ID
	switch l := &ss.lease; {
	case root.IsBlob() || root == 0:
		return Created{}, status.Errorf(status.Invalid, "%v is not an object id (a leased create's id)", root)
	case root|ids.BlobBit <= last || root|ids.BlobBit > l.last:
		return Created{}, status.Errorf(status.Invalid,
			"object id %v of a leased create is not one of the lease's unused ids after its blobs", root)
	}
	if _, taken := s.objects[root]; taken {
		return Created{}, status.Errorf(status.Invalid, "object id %v is taken", root)
	}
	ss.adoptLeaseBlobsLocked(blobs)
	ss.lease.next = root | ids.BlobBit + 1
	inline := make([]ids.ObjectID, len(blobs))
	for i, b := range blobs {
		inline[i] = b.ID
	}
	var onFail func()
	if pipelined {
		onFail = func() {
			count() // before the pin page is read
			ss.holdFailedLocked(root, inline)
		}
	}
	return ss.createInlineLocked(content, inline, root, onFail)
}

// PipelinedDone counts one pipelined request of the session handled that
// CreateLeased did not count (one refused before it ran), as
// pipelinedDoneLocked, and wakes the waiters.
func (ss *Session) PipelinedDone() {
	s := ss.s
	s.mu.Lock()
	wake := ss.pipelinedDoneLocked()
	s.mu.Unlock()
	shm.WakeHandled(wake) // a system call: not under the store's lock
}

// pipelinedDoneLocked counts one pipelined request of the session handled,
// successful or not, in the session and in its pin page, and wakes
// the barrier's waiters (Session.Visible) once the lock goes; it returns the
// futex to wake after unlocking, for the client's threads. s.mu must be
// held.
func (ss *Session) pipelinedDoneLocked() *uint32 {
	// The pin page tells the client too (shm.PinPage.SetHandled): a get of
	// its own put that the directory could not answer waits for it there.
	ss.piped++
	wake := ss.pins.SetHandled(ss.piped)
	ss.s.waiters.broadcast()
	return wake
}

// holdFailedLocked is the end of a pipelined put whose tree was refused
// after its blobs were adopted (still unsealed, the session's): each is
// dropped as any refused put's, but when the client pins root (it answered
// a get of its own put before the daemon had counted it handled) the blobs
// are held under root first, as a delete holds pinned blobs, so that their
// memory is not reused while the client reads it. The count was stored
// before the pin page is read here (CreateLeased): a client that pinned
// root and then saw the lower count pinned before this reads the page.
// s.mu must be held.
func (ss *Session) holdFailedLocked(root ids.ObjectID, inline []ids.ObjectID) {
	s := ss.s
	var slots []uint64
	ss.pins.Find(shm.NewPinIDs([]uint64{uint64(root)}), func(slot, _ uint64) { slots = append(slots, slot) })
	pinned := len(slots) > 0
	var held []*blob
	for _, id := range inline {
		b, ok := ss.created[id]
		if !ok {
			continue
		}
		if pinned {
			b.refs++ // the hold's reference
			held = append(held, b)
		}
		s.life.dropUnsealedLocked(b)
	}
	if len(held) > 0 {
		s.pins.addHoldLocked(ss, root, &hold{blobs: held, slots: slots})
	}
}

// Backlog is what the barrier of pipelined puts (Session.Visible) asks of
// another session's connection, which only the server knows: where its
// stream stands. The barrier trusts a client's submitted word only as far
// as its connection has bytes it has not handled: a count its client
// raised without sending a request (a forged word, or a process stopped
// in between) then costs no other connection anything. Both methods are
// called under the store's lock: they must not call the store, and take
// only locks the connection never holds while it calls the store.
type Backlog interface {
	// Mark returns the offset in the connection's stream of the end of
	// what its client has sent so far, read by the daemon or not.
	Mark() uint64
	// Reached reports whether every request that lies wholly before
	// mark was handled, or the connection holds no complete request it
	// has not handled (it waits for more bytes, or in a blocking request,
	// after which its client sends nothing).
	Reached(mark uint64) bool
}

// SetBacklog gives the session its connection's Backlog (the server does,
// before the first request). A session without one is waited for as far
// as its submitted word says (tests of the store alone).
func (ss *Session) SetBacklog(b Backlog) {
	ss.s.mu.Lock()
	defer ss.s.mu.Unlock()
	ss.backlog = b
}

// Progress tells the barrier's waiters that the session's connection
// moved: it handled a request, found nothing more to read, or began a
// blocking wait. It costs an atomic load when nobody waits.
func (ss *Session) Progress() {
	s := ss.s
	if s.barriers.Load() == 0 {
		return
	}
	s.mu.Lock()
	s.waiters.broadcast()
	s.mu.Unlock()
}

// Visible is the barrier of pipelined puts (docs/design.md, "Pipelined
// puts"): a handler that resolves ids its client did not create calls it
// before it looks them up. It returns at once when every id of idl is
// known here (idl nil: never); otherwise it waits until every other
// session's connection has handled the pipelined puts its client may have
// returned from before Visible was called, so a get that happens after a
// put returned finds the object. A session is waited for only while its
// client's submitted word is above what the daemon handled AND its
// connection holds requests it has not handled (Backlog): a put that
// returned has been written to the socket. The wait ends when each such
// session handled its backlog as of the call, handled as many puts as it
// claimed, or closed, when every id became known, or after the pipeline
// wait (DefaultPipelineWait). It reports whether it waited.
func (ss *Session) Visible(idl []ids.ObjectID) bool {
	s := ss.s
	type target struct {
		ss         *Session
		sent, mark uint64
	}
	s.mu.Lock()
	known := func() bool {
		if idl == nil {
			return false
		}
		for _, id := range idl {
			if !s.rtext.knownLocked(id) {
				return false
			}
		}
		return true
	}
	if known() {
		s.mu.Unlock()
		return false
	}
	var ts []target
	for o := range s.sessions {
		if o == ss || o.pins == nil {
			continue
		}
		sent := o.pins.Submitted()
		if sent <= o.piped {
			continue
		}
		t := target{ss: o, sent: sent}
		if o.backlog != nil {
			if t.mark = o.backlog.Mark(); o.backlog.Reached(t.mark) {
				continue // nothing unhandled: the count is no put it sent
			}
		}
		ts = append(ts, t)
	}
	if len(ts) == 0 {
		s.mu.Unlock()
		return false
	}
	s.barrierWaits++
	s.barriers.Add(1)
	defer s.barriers.Add(-1)
	timer := time.NewTimer(time.Duration(pipelineWait.Load()))
	defer timer.Stop()
	for {
		ts = slices.DeleteFunc(ts, func(t target) bool {
			return t.ss.closed || t.ss.piped >= t.sent || t.ss.backlog != nil && t.ss.backlog.Reached(t.mark)
		})
		if len(ts) == 0 || known() {
			s.mu.Unlock()
			return true
		}
		woken := s.waiters.channel()
		s.mu.Unlock()
		select {
		case <-woken:
		case <-timer.C:
			return true
		}
		s.mu.Lock()
	}
}

// BarrierWaits returns how many calls of Visible waited for another
// session (tests).
func (s *Store) BarrierWaits() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.barrierWaits
}
