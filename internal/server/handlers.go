package server

import (
	"errors"
	"slices"
	"time"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/shm"
	"github.com/v6d-io/v6d-go/internal/status"
	"github.com/v6d-io/v6d-go/internal/store"
)

// Version is the protocol version the daemon reports: the upstream release
// whose protocol and layouts it speaks (upstream's clients compare it with
// their own and warn on a mismatch).
const Version = "0.24.2"

// handler answers one decoded request of a connection through rs
// (responder.go: a reply with the fds sent after it, none, or a deferred
// answer; frames pushed ahead of it), or returns the error to answer with.
// Handlers run only for registered connections, except register's own, and
// never see a request that failed to decode. A handler of a request with
// trailing bytes may consume them (conn.readTrailing); handleFrame discards
// whatever it leaves.
type handler func(c *conn, req protocol.Request, rs *responder) error

// answers adapts a handler of one request type to the table's signature.
func answers[R protocol.Request](f func(c *conn, r R, rs *responder) error) handler {
	return func(c *conn, req protocol.Request, rs *responder) error {
		r, ok := req.(R)
		if !ok {
			return errMisrouted(req)
		}
		return f(c, r, rs)
	}
}

// on adapts a handler of one request type that answers with a reply (and
// the fds after it) or an error.
func on[R protocol.Request](f func(c *conn, r R) (protocol.Reply, []int, error)) handler {
	return func(c *conn, req protocol.Request, rs *responder) error {
		r, ok := req.(R)
		if !ok {
			return errMisrouted(req)
		}
		reply, fds, err := f(c, r)
		if err != nil {
			return err
		}
		rs.Reply(reply, fds)
		return nil
	}
}

// acked adapts a handler whose reply is a plain acknowledgement.
func acked[R protocol.Request](f func(c *conn, r R) error) handler {
	return func(c *conn, req protocol.Request, rs *responder) error {
		r, ok := req.(R)
		if !ok {
			return errMisrouted(req)
		}
		if err := f(c, r); err != nil {
			return err
		}
		rs.Reply(&protocol.AckReply{}, nil)
		return nil
	}
}

// errMisrouted is a handler's error for a request of another type: a bug
// in the handler table, answered as one.
func errMisrouted(req protocol.Request) error {
	return status.Errorf(status.UnknownError, "internal error: %s went to the wrong handler", req.RequestType())
}

// errExit is returned by the exit_request handler: the connection closes
// without a reply.
var errExit = errors.New("server: the client said goodbye")

// handlers is the one table of request handlers, indexed by kind and shared
// by every listener; TestEveryRequestHandled checks it covers every kind.
var handlers = [protocol.NumKinds]handler{
	protocol.KindRegister: on(func(c *conn, r *protocol.RegisterRequest) (protocol.Reply, []int, error) {
		if err := c.authenticate(r); err != nil {
			return nil, nil, err
		}
		c.registered = true
		c.upstream = len(r.Extensions) == 0
		reply := &protocol.RegisterReply{
			IPCSocket:       c.s.cfg.Socket,
			RPCEndpoint:     c.s.rpcEndpoint(),
			InstanceID:      c.s.store.InstanceID(),
			Version:         Version,
			MetaEpochOffset: shm.HeaderEpochOffset,
			StoreMatch:      true,
			Extensions:      protocol.Extensions,
		}
		var fds []int
		if slices.Contains(r.Extensions, protocol.ExtDirectory) {
			reply.Directory, fds = c.directoryFds()
		}
		return reply, fds, nil
	}),
	protocol.KindExit: func(*conn, protocol.Request, *responder) error { return errExit },

	protocol.KindCreateBuffer: on(func(c *conn, r *protocol.CreateBufferRequest) (protocol.Reply, []int, error) {
		e, err := c.sess.CreateBuffer(r.Size)
		if err != nil {
			return nil, nil, err
		}
		one := []protocol.Payload{payloadOf(e)}
		fds := c.arenaFds(one...) // points one[0] at the fd to map
		p := one[0]
		fd := -1
		if len(fds) > 0 {
			fd = fds[0]
		}
		return &protocol.CreateBufferReply{ID: p.ObjectID, Created: p, Fd: fd}, fds, nil
	}),
	protocol.KindCreateBuffers: on(func(c *conn, r *protocol.CreateBuffersRequest) (protocol.Reply, []int, error) {
		if r.Num != 0 && r.Num != len(r.Sizes) {
			return nil, nil, status.Errorf(status.Invalid, "num %d does not match %d sizes", r.Num, len(r.Sizes))
		}
		if r.Lease {
			return c.createBuffersLease(r)
		}
		es, err := c.sess.CreateBuffers(r.Sizes)
		if err != nil {
			return nil, nil, err
		}
		ps := payloadsOf(es)
		out := &protocol.BuffersReply{Payloads: ps, Num: len(ps), IDs: make([]ids.ObjectID, len(ps))}
		for i, p := range ps {
			out.IDs[i] = p.ObjectID
		}
		out.Fds = c.arenaFds(ps...)
		return out, out.Fds, nil
	}),
	protocol.KindSeal: acked(func(c *conn, r *protocol.SealRequest) error { return c.sess.Seal(r.ObjectID) }),
	protocol.KindGetBuffers: on(func(c *conn, r *protocol.GetBuffersRequest) (protocol.Reply, []int, error) {
		es, err := c.sess.GetBuffers(r.IDs, r.Unsafe)
		if err != nil {
			return nil, nil, err
		}
		ps := payloadsOf(es)
		out := &protocol.BuffersReply{Payloads: ps, Num: len(ps)}
		out.Fds = c.arenaFds(ps...)
		return out, out.Fds, nil
	}),
	protocol.KindDropBuffer: acked(func(c *conn, r *protocol.DropBufferRequest) error { return c.sess.DropBuffer(r.ID) }),
	protocol.KindShrinkBuffer: acked(func(c *conn, r *protocol.ShrinkBufferRequest) error {
		return c.sess.ShrinkBuffer(r.ID, r.Size)
	}),
	protocol.KindRelease: acked(func(c *conn, r *protocol.ReleaseRequest) error {
		return c.sess.Release(append(r.IDs, r.ObjectID)...)
	}),
	protocol.KindIncreaseReferenceCount: acked(func(c *conn, r *protocol.IncreaseReferenceCountRequest) error {
		return c.sess.IncreaseReferenceCount(r.IDs)
	}),
	protocol.KindEvict: acked(func(c *conn, r *protocol.EvictRequest) error { return c.sess.Evict(r.IDs) }),
	protocol.KindLoad:  acked(func(c *conn, r *protocol.LoadRequest) error { return c.sess.Load(r.IDs, r.Pin) }),
	protocol.KindUnpin: acked(func(c *conn, r *protocol.UnpinRequest) error { return c.sess.Unpin(r.IDs) }),

	protocol.KindCreateData: on((*conn).createData),
	protocol.KindCreateDatas: on(func(c *conn, r *protocol.CreateDatasRequest) (protocol.Reply, []int, error) {
		if r.Num != 0 && r.Num != len(r.Contents) {
			return nil, nil, status.Errorf(status.Invalid, "num %d does not match %d contents", r.Num, len(r.Contents))
		}
		created, err := c.sess.CreateDatas(r.Contents, r.Seal)
		if err != nil {
			return nil, nil, err
		}
		out := &protocol.CreateDatasReply{Num: len(created)}
		for _, cr := range created {
			out.IDs = append(out.IDs, cr.ID)
			out.Signatures = append(out.Signatures, cr.Signature)
			out.InstanceIDs = append(out.InstanceIDs, c.s.store.InstanceID())
		}
		return out, nil, nil
	}),
	protocol.KindGetData: answers((*conn).getData),
	protocol.KindListData: on(func(c *conn, r *protocol.ListDataRequest) (protocol.Reply, []int, error) {
		_ = c.s.syncRemote() // best effort: with etcd away, list what this daemon has
		content, err := c.s.store.List(r.Pattern, r.Regex, r.Limit)
		if err != nil {
			return nil, nil, err
		}
		return &protocol.GetDataReply{Content: content}, nil, nil
	}),
	protocol.KindDelData:              on(delData),
	protocol.KindDelDataWithFeedbacks: on(delData),
	protocol.KindExists: on(func(c *conn, r *protocol.ExistsRequest) (protocol.Reply, []int, error) {
		_ = c.syncIfMissing(false, []ids.ObjectID{r.ID}) // best effort: answers what is known
		return &protocol.ExistsReply{Exists: c.s.store.Exists(r.ID)}, nil, nil
	}),
	protocol.KindPersist: acked(func(c *conn, r *protocol.PersistRequest) error { return c.s.store.Persist(r.ID) }),
	protocol.KindIfPersist: on(func(c *conn, r *protocol.IfPersistRequest) (protocol.Reply, []int, error) {
		p, err := c.s.store.IfPersist(r.ID)
		return &protocol.IfPersistReply{Persist: p}, nil, err
	}),
	protocol.KindLabel: acked(func(c *conn, r *protocol.LabelRequest) error {
		return c.s.store.Label(r.ID, r.Keys, r.Values)
	}),
	protocol.KindShallowCopy: on(func(c *conn, r *protocol.ShallowCopyRequest) (protocol.Reply, []int, error) {
		id, err := c.s.store.ShallowCopy(r.ID, r.Extra)
		return &protocol.ShallowCopyReply{TargetID: id}, nil, err
	}),

	protocol.KindPutName: acked(func(c *conn, r *protocol.PutNameRequest) error {
		return c.s.store.PutName(r.Name, r.ObjectID)
	}),
	protocol.KindGetName: on((*conn).getName),
	protocol.KindListName: on(func(c *conn, r *protocol.ListNameRequest) (protocol.Reply, []int, error) {
		names, err := c.s.store.ListNames(r.Pattern, r.Regex, r.Limit)
		if err != nil {
			return nil, nil, err
		}
		return &protocol.ListNameReply{Size: len(names), Names: names}, nil, nil
	}),
	protocol.KindDropName: acked(func(c *conn, r *protocol.DropNameRequest) error {
		return c.s.store.DropName(r.Name)
	}),

	protocol.KindClear: acked(func(c *conn, _ *protocol.ClearRequest) error {
		c.s.store.Clear()
		return nil
	}),
	protocol.KindMemoryTrim: on(func(c *conn, _ *protocol.MemoryTrimRequest) (protocol.Reply, []int, error) {
		trimmed, err := c.s.store.MemoryTrim()
		return &protocol.MemoryTrimReply{Trimmed: trimmed}, nil, err
	}),
	protocol.KindInstanceStatus: on(func(c *conn, _ *protocol.InstanceStatusRequest) (protocol.Reply, []int, error) {
		return &protocol.InstanceStatusReply{Meta: c.s.m.instanceStatus(c.s)}, nil, nil
	}),
	protocol.KindClusterMeta: on((*conn).clusterMeta),

	protocol.KindDebug: acked(func(*conn, *protocol.DebugRequest) error { return nil }),

	protocol.KindCreateRemoteBuffer:  on(createRemoteBuffer),
	protocol.KindCreateRemoteBuffers: on(createRemoteBuffersMany),
	protocol.KindGetRemoteBuffers:    answers(getRemoteBuffers),
	protocol.KindFillBuffers:         acked(fillBuffers),

	protocol.KindCreateStream:        acked((*conn).createStream),
	protocol.KindOpenStream:          acked((*conn).openStream),
	protocol.KindGetNextStreamChunk:  on((*conn).getStreamChunk),
	protocol.KindPushNextStreamChunk: acked((*conn).pushStreamChunk),
	protocol.KindPullNextStreamChunk: on((*conn).pullStreamChunk),
	protocol.KindStopStream:          acked((*conn).stopStream),
	protocol.KindDropStream:          acked((*conn).dropStream),
}

// delData deletes objects. For upstream's client (conn.upstream), which
// never releases, it also drops the references the connection holds to the
// blobs deleted: upstream's daemon frees on delete, and that client relies on
// it. Readers on other connections keep theirs, so none of them ever sees
// the memory reused; the deleting client's own views of the deleted object
// may, as with upstream's daemon.
func delData(c *conn, r *protocol.DelDataRequest) (protocol.Reply, []int, error) {
	deleted, removed := c.s.store.DeleteCounted(r.ID, store.DeleteOptions{Force: r.Force, Deep: r.Deep, MemoryTrim: r.MemoryTrim})
	if deleted == nil {
		deleted = []ids.ObjectID{}
	}
	if c.upstream && len(deleted) > 0 {
		if err := c.sess.Release(deleted...); err != nil {
			return nil, nil, err
		}
	}
	return &protocol.DelDataReply{DeletedBids: deleted, Deleted: &removed}, nil, nil
}

// createData stores a metadata tree; with inline blobs (a request with
// trailing bytes) it first reads their bytes straight into the arena.
func (c *conn) createData(r *protocol.CreateDataRequest) (protocol.Reply, []int, error) {
	if r.ID != 0 {
		return c.createLeased(r)
	}
	if len(r.Inline) > 0 {
		if len(r.LeaseBlobs) > 0 {
			return nil, nil, status.Errorf(status.Invalid, "create_data takes either inline or lease blobs, not both")
		}
		return c.createInline(r)
	}
	if err := c.adoptLeaseBlobs(r.LeaseBlobs); err != nil {
		return nil, nil, err
	}
	created, err := c.sess.CreateData(r.Content, r.Seal)
	if status.CodeOf(err) == status.ObjectNotExists && len(r.Seal) == 0 {
		// A member may be the put of another connection not handled yet
		// (the barrier, for the members this handler cannot name before
		// it parses the tree) or an object persisted elsewhere a moment
		// ago (the partitions of a global object: catch up with etcd).
		// The create changed nothing (it is all or nothing, and sealed
		// nothing): look once more if either could bring the member.
		waited := c.sess.Visible(nil)
		synced := c.s.etcd != nil && c.s.syncRemote() == nil
		if waited || synced {
			created, err = c.sess.CreateData(r.Content, r.Seal)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	out := &protocol.CreateDataReply{ID: created.ID, Signature: created.Signature, InstanceID: c.s.store.InstanceID()}
	if r.WithContent {
		out.Content, _ = c.s.store.Tree(created.ID)
	}
	c.renewLease(r, out)
	return out, nil, nil
}

func (c *conn) getData(r *protocol.GetDataRequest, rs *responder) error {
	st := c.s.store
	serr := c.syncIfMissing(r.SyncRemote, r.ID)
	if r.Wait {
		if _, err := c.wait(-1, func() (bool, store.WaitKey, error) {
			for _, id := range r.ID {
				if !st.Exists(id) {
					return false, store.WaitKey{ID: id}, nil
				}
			}
			return true, store.WaitKey{}, nil
		}); err != nil {
			return err
		}
	}
	if !r.WithBuffers {
		content, _, err := st.GetData(r.ID)
		if err != nil {
			return err
		}
		rs.Reply(&protocol.GetDataReply{Content: content, SyncError: errText(serr)}, nil)
		return nil
	}
	content, extents, shapes, epoch, err := c.sess.GetDataWithShapes(r.ID)
	if err != nil {
		return err
	}
	payloads := payloadsOf(extents)
	out := &protocol.GetDataReply{Content: content, Payloads: payloads, MetaEpoch: &epoch, Shapes: shapes,
		SyncError: errText(serr)}
	if !c.passFds { // no fds: the bytes follow the reply (rpc_transfer.go)
		return rs.replyThenBytes(protocol.KindGetData, out, extents)
	}
	out.Fds = c.arenaFds(payloads...)
	rs.Reply(out, out.Fds)
	return nil
}

func (c *conn) getName(r *protocol.GetNameRequest) (protocol.Reply, []int, error) {
	st := c.s.store
	if !r.Wait {
		id, err := st.GetName(r.Name)
		return &protocol.GetNameReply{ObjectID: id}, nil, err
	}
	timeout := time.Duration(-1)
	if r.TimeoutMs != nil { // in [0, protocol.MaxTimeoutMs]: checked at decode
		timeout = time.Duration(*r.TimeoutMs) * time.Millisecond
	}
	var id ids.ObjectID
	found, err := c.wait(timeout, func() (bool, store.WaitKey, error) {
		var err error
		id, err = st.GetName(r.Name)
		return err == nil, store.WaitKey{Name: r.Name}, nil
	})
	if err != nil {
		return nil, nil, err
	}
	if !found {
		return nil, nil, status.Errorf(status.Timeout, "timed out after %v waiting for name %q", timeout, r.Name)
	}
	return &protocol.GetNameReply{ObjectID: id}, nil, nil
}
