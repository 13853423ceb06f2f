package server

import (
	"errors"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
)

// The barrier of pipelined puts (store.Session.Visible; docs/design.md,
// "Pipelined puts"). A handler that resolves ids its client did not create
// names them here (visibleIDs), and the connection calls the barrier
// before the handler runs: the handler looks once, and is never run again
// because it missed. Requests that only name what the connection created
// itself (seal, drop, shrink, release, its own pipelined puts) need no
// barrier: a connection's requests are handled in order. create_data and
// create_datas name members inside their trees: they call the barrier
// themselves when a member is missing (createData), once.
//
// The barrier asks each other connection whose client counted more
// pipelined puts than the daemon handled where its stream stands
// (store.Backlog, implemented here): a put that returned was written to
// the socket, so it lies in the socket's queue, in the read buffer, or in
// the request being handled. A connection that waits for bytes with an
// empty socket, or waits in a blocking request, holds none: its count
// costs nobody a wait.

// backlog is a connection's side of store.Backlog. Its fields are written
// by the connection's goroutine; rmu makes a read of the socket and the
// bookkeeping of what it read one step for the barrier's look.
type backlog struct {
	rmu      sync.Mutex
	received uint64 // bytes read from the socket (under rmu)
	idle     bool   // the last read found the socket empty (under rmu)
	handled  atomic.Uint64
	blocking atomic.Bool // in a blocking request (conn.wait)

	oneID [1]ids.ObjectID // visibleIDs' scratch
}

// visibleIDs returns the ids a request resolves that its client may not
// have created itself: the barrier runs for them before its handler. A
// single id is returned in the connection's scratch (no allocation per
// request), valid until the next call.
func (c *conn) visibleIDs(req protocol.Request) []ids.ObjectID {
	one := func(id ids.ObjectID) []ids.ObjectID {
		c.backlog.oneID[0] = id
		return c.backlog.oneID[:]
	}
	switch r := req.(type) {
	case *protocol.GetDataRequest:
		return r.ID
	case *protocol.DelDataRequest:
		return r.ID
	case *protocol.GetBuffersRequest:
		return r.IDs
	case *protocol.GetRemoteBuffersRequest:
		return r.IDs
	case *protocol.IncreaseReferenceCountRequest:
		return r.IDs
	case *protocol.ExistsRequest:
		return one(r.ID)
	case *protocol.PersistRequest:
		return one(r.ID)
	case *protocol.IfPersistRequest:
		return one(r.ID)
	case *protocol.LabelRequest:
		return one(r.ID)
	case *protocol.ShallowCopyRequest:
		return one(r.ID)
	case *protocol.PutNameRequest:
		return one(r.ObjectID)
	case *protocol.MigrateObjectRequest:
		return one(r.ObjectID)
	case *protocol.CreateStreamRequest:
		return one(r.ObjectID)
	case *protocol.PushNextStreamChunkRequest:
		return one(r.Chunk)
	}
	return nil
}

// recvSocket reads what the socket has into p without blocking, counting
// it as received; a read that finds nothing marks the connection idle and
// tells the barrier's waiters.
func (c *conn) recvSocket(fd int, p []byte) (int, error) {
	b := &c.backlog
	b.rmu.Lock()
	n, _, err := unix.Recvfrom(fd, p, unix.MSG_DONTWAIT)
	idle := false
	switch {
	case n > 0:
		b.received += uint64(n)
		b.idle = false
	case errors.Is(err, unix.EAGAIN):
		b.idle, idle = true, true
	}
	b.rmu.Unlock()
	if idle && c.sess != nil {
		c.sess.Progress()
	}
	return n, err
}

// frameHandled records that every request up to the read position was
// handled, and tells the barrier's waiters.
func (c *conn) frameHandled() {
	b := &c.backlog
	b.handled.Store(b.received - uint64(c.r.Buffered())) // received: this goroutine writes it
	c.sess.Progress()
}

// Mark is store.Backlog's: the bytes received plus those in the socket.
func (c *conn) Mark() uint64 {
	b := &c.backlog
	b.rmu.Lock()
	defer b.rmu.Unlock()
	return b.received + c.queued()
}

// Reached is store.Backlog's.
func (c *conn) Reached(mark uint64) bool {
	b := &c.backlog
	if b.blocking.Load() || b.handled.Load() >= mark {
		return true
	}
	b.rmu.Lock()
	defer b.rmu.Unlock()
	return b.idle && c.queued() == 0
}

// queued returns the bytes in the socket not read yet (0 when it cannot
// tell: the caller's other checks decide).
func (c *conn) queued() uint64 {
	n, err := unix.IoctlGetInt(c.sock.Fd(), unix.SIOCINQ)
	if err != nil || n < 0 {
		return 0
	}
	return uint64(n)
}
