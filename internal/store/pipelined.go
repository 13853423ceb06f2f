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
// counts the pipelined requests it handled (PipelinedDone). A connection
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
// other object can have it. All or nothing, as CreateInline; the session
// keeps no reference to the blobs. The lease moves past the blobs and root
// even when the tree is refused, as the client's view of it did.
func (ss *Session) CreateLeased(content json.RawMessage, blobs []LeaseBlob, root ids.ObjectID) (Created, error) {
	if len(blobs) == 0 {
		return Created{}, status.Errorf(status.Invalid, "a leased create needs at least one blob")
	}
	if err := checkItems("lease blobs", len(blobs)); err != nil {
		return Created{}, err
	}
	if len(content) == 0 || string(content) == "null" {
		return Created{}, status.Errorf(status.MetaTreeInvalid, "a leased create needs a tree")
	}
	s := ss.s
	s.mu.Lock()
	defer s.mu.Unlock()
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
	return ss.createInlineLocked(content, inline, root)
}

// PipelinedDone counts one pipelined request of the session handled,
// successful or not, in the session and in its pin page, and wakes
// AwaitPipelined's waiters (Changed) and the client's. Call it after the request's
// effects are in the store.
func (ss *Session) PipelinedDone() {
	s := ss.s
	s.mu.Lock()
	// The pin page tells the client too (shm.PinPage.SetHandled): a get of
	// its own put that the directory could not answer waits for it there.
	ss.piped++
	wake := ss.pins.SetHandled(ss.piped)
	s.notifyLocked()
	s.mu.Unlock()
	shm.WakeHandled(wake) // a system call: not under the store's lock
}

// AwaitPipelined waits (at most the pipeline wait, DefaultPipelineWait
// unless SetPipelineWait) until every other open
// session has handled the pipelined puts its client had counted when the
// call began, or closed. It returns false at once, without waiting, when no
// session had any in flight: a caller that missed an id then knows a retry
// cannot find it either.
func (ss *Session) AwaitPipelined() bool {
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
		s.mu.Unlock()
		return false
	}
	timer := time.NewTimer(time.Duration(pipelineWait.Load()))
	defer timer.Stop()
	for {
		ts = slices.DeleteFunc(ts, func(t target) bool { return t.ss.closed || t.ss.piped >= t.sent })
		if len(ts) == 0 {
			s.mu.Unlock()
			return true
		}
		woken := s.changedLocked()
		s.mu.Unlock()
		select {
		case <-woken:
		case <-timer.C:
			return true
		}
		s.mu.Lock()
	}
}
