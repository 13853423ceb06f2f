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
// AwaitPipelined waits until every other session has handled what its
// client had sent when the wait began, so a get that happens after a put
// returned always finds it.

// DefaultPipelineWait bounds AwaitPipelined: a client that counts puts it
// never sends (a bug, or a process stopped between counting and writing)
// delays other connections' misses by at most this long.
const DefaultPipelineWait = 2 * time.Second

// pipelineWait is the bound in use (SetPipelineWait).
var pipelineWait atomic.Int64

func init() { pipelineWait.Store(int64(DefaultPipelineWait)) }

// SetPipelineWait sets the bound of AwaitPipelined (tests) and returns the
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
// waiters are woken after the lock (AwaitPipelined, the client's own gets).
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
// AwaitPipelined's waiters (Changed) once the lock goes; it returns the
// futex to wake after unlocking, for the client's threads. s.mu must be
// held.
func (ss *Session) pipelinedDoneLocked() *uint32 {
	// The pin page tells the client too (shm.PinPage.SetHandled): a get of
	// its own put that the directory could not answer waits for it there.
	ss.piped++
	ss.s.pipedAll.Add(1)
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
		s.dropUnsealedLocked(b)
	}
	if len(held) > 0 {
		s.addHoldLocked(ss, root, &hold{blobs: held, slots: slots})
	}
}

// PipelinedHandled is the count of pipelined requests handled, of every
// session: what a caller about to look an id up passes to AwaitPipelined.
func (s *Store) PipelinedHandled() uint64 { return s.pipedAll.Load() }

// AwaitPipelined waits (at most the pipeline wait, DefaultPipelineWait
// unless SetPipelineWait) until every other open
// session has handled the pipelined puts its client had counted when the
// call began, or closed. since is PipelinedHandled from before the caller
// looked its id up. It returns false at once, without waiting, when no
// session has any in flight and none was handled since then: a caller that
// missed an id then knows a retry cannot find it either. (Without since, a
// put handled between the caller's miss and this call went unseen: the
// caller answered "does not exist" for an object that did.)
func (ss *Session) AwaitPipelined(since uint64) bool {
	s := ss.s
	type target struct {
		ss   *Session
		sent uint64
	}
	s.mu.Lock()
	var ts []target
	for o := range s.sessions {
		if o == ss || o.pins == nil {
			continue
		}
		if sent := o.pins.Submitted(); sent > o.piped {
			ts = append(ts, target{o, sent})
		}
	}
	if len(ts) == 0 {
		handled := s.pipedAll.Load() != since
		s.mu.Unlock()
		return handled
	}
	timer := time.NewTimer(time.Duration(pipelineWait.Load()))
	defer timer.Stop()
	for {
		ts = slices.DeleteFunc(ts, func(t target) bool { return t.ss.closed || t.ss.piped >= t.sent })
		if len(ts) == 0 {
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
