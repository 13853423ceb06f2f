package server

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
	"github.com/v6d-io/v6d-go/internal/store"
)

// Version is the protocol version the daemon reports (upstream's numbering).
const Version = "0.24.0"

func ack() protocol.Reply { return &protocol.AckReply{} }

// dispatch runs one decoded request. It returns the reply (nil for none) and
// the fds to send after it.
func (c *conn) dispatch(req protocol.Request) (protocol.Reply, []int, error) {
	s, st, sess := c.s, c.s.store, c.sess
	switch r := req.(type) {
	case *protocol.RegisterRequest:
		c.registered = true
		return &protocol.RegisterReply{
			IPCSocket:       s.cfg.Socket,
			InstanceID:      st.InstanceID(),
			Version:         Version,
			MetaEpochOffset: store.EpochOffset,
			StoreMatch:      true,
		}, nil, nil

	case *protocol.CreateBufferRequest:
		e, err := sess.CreateBuffer(r.Size)
		if err != nil {
			return nil, nil, err
		}
		p := payloadOf(e)
		fds := c.arenaFds(p)
		fd := -1
		if len(fds) > 0 {
			fd = fds[0]
		}
		return &protocol.CreateBufferReply{ID: p.ObjectID, Created: p, Fd: fd}, fds, nil

	case *protocol.CreateBuffersRequest:
		if r.Num != 0 && r.Num != len(r.Sizes) {
			return nil, nil, status.Errorf(status.Invalid, "num %d does not match %d sizes", r.Num, len(r.Sizes))
		}
		es, err := sess.CreateBuffers(r.Sizes)
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

	case *protocol.SealRequest:
		return ack(), nil, sess.Seal(r.ObjectID)

	case *protocol.GetBuffersRequest:
		es, err := sess.GetBuffers(r.IDs, r.Unsafe)
		if err != nil {
			return nil, nil, err
		}
		ps := payloadsOf(es)
		out := &protocol.BuffersReply{Payloads: ps, Num: len(ps)}
		out.Fds = c.arenaFds(ps...)
		return out, out.Fds, nil

	case *protocol.DropBufferRequest:
		return ack(), nil, sess.DropBuffer(r.ID)

	case *protocol.ShrinkBufferRequest:
		return ack(), nil, sess.ShrinkBuffer(r.ID, r.Size)

	case *protocol.ReleaseRequest:
		return ack(), nil, sess.Release(append(r.IDs, r.ObjectID)...)

	case *protocol.IncreaseReferenceCountRequest:
		return ack(), nil, sess.IncreaseReferenceCount(r.IDs)

	case *protocol.CreateDataRequest:
		created, err := sess.CreateData(r.Content, r.Seal)
		if err != nil {
			return nil, nil, err
		}
		out := &protocol.CreateDataReply{ID: created.ID, Signature: created.Signature, InstanceID: st.InstanceID()}
		if r.WithContent {
			out.Content, _ = st.Tree(created.ID)
		}
		return out, nil, nil

	case *protocol.CreateDatasRequest:
		if r.Num != 0 && r.Num != len(r.Contents) {
			return nil, nil, status.Errorf(status.Invalid, "num %d does not match %d contents", r.Num, len(r.Contents))
		}
		created, err := sess.CreateDatas(r.Contents, r.Seal)
		if err != nil {
			return nil, nil, err
		}
		out := &protocol.CreateDatasReply{Num: len(created)}
		for _, cr := range created {
			out.IDs = append(out.IDs, cr.ID)
			out.Signatures = append(out.Signatures, cr.Signature)
			out.InstanceIDs = append(out.InstanceIDs, st.InstanceID())
		}
		return out, nil, nil

	case *protocol.GetDataRequest:
		return c.getData(r)

	case *protocol.ListDataRequest:
		content, err := st.List(r.Pattern, r.Regex, r.Limit)
		if err != nil {
			return nil, nil, err
		}
		return &protocol.GetDataReply{Content: content}, nil, nil

	case *protocol.DelDataRequest:
		deleted := st.Delete(r.ID, store.DeleteOptions{Force: r.Force, Deep: r.Deep, MemoryTrim: r.MemoryTrim})
		if deleted == nil {
			deleted = []ids.ObjectID{}
		}
		return &protocol.DelDataReply{DeletedBids: deleted}, nil, nil

	case *protocol.ExistsRequest:
		return &protocol.ExistsReply{Exists: st.Exists(r.ID)}, nil, nil

	case *protocol.PersistRequest:
		return ack(), nil, st.Persist(r.ID)

	case *protocol.IfPersistRequest:
		p, err := st.IfPersist(r.ID)
		return &protocol.IfPersistReply{Persist: p}, nil, err

	case *protocol.LabelRequest:
		return ack(), nil, st.Label(r.ID, r.Keys, r.Values)

	case *protocol.ShallowCopyRequest:
		id, err := st.ShallowCopy(r.ID, r.Extra)
		return &protocol.ShallowCopyReply{TargetID: id}, nil, err

	case *protocol.PutNameRequest:
		return ack(), nil, st.PutName(r.Name, r.ObjectID)

	case *protocol.GetNameRequest:
		return c.getName(r)

	case *protocol.ListNameRequest:
		names, err := st.ListNames(r.Pattern, r.Regex, r.Limit)
		if err != nil {
			return nil, nil, err
		}
		return &protocol.ListNameReply{Size: len(names), Names: names}, nil, nil

	case *protocol.DropNameRequest:
		st.DropName(r.Name)
		return ack(), nil, nil

	case *protocol.ClearRequest:
		st.Clear()
		return ack(), nil, nil

	case *protocol.MemoryTrimRequest:
		trimmed, err := st.MemoryTrim()
		return &protocol.MemoryTrimReply{Trimmed: trimmed}, nil, err

	case *protocol.InstanceStatusRequest:
		used, limit := st.Usage()
		return &protocol.InstanceStatusReply{Meta: protocol.InstanceStatus{
			InstanceID:       st.InstanceID(),
			Deployment:       s.cfg.Deployment,
			MemoryUsage:      used,
			MemoryLimit:      limit,
			DeferredRequests: s.waitingCount(),
			IPCConnections:   s.connections(),
		}}, nil, nil

	case *protocol.ClusterMetaRequest:
		meta, err := json.Marshal(map[string]any{
			fmt.Sprintf("i%d", st.InstanceID()): map[string]any{
				"instance_id":  st.InstanceID(),
				"hostid":       hostname,
				"hostname":     hostname,
				"nodename":     hostname,
				"ipc_socket":   s.cfg.Socket,
				"rpc_endpoint": "",
				"timestamp":    time.Now().UnixMilli(),
			},
		})
		return &protocol.ClusterMetaReply{Meta: meta}, nil, err

	case *protocol.DebugRequest:
		return ack(), nil, nil
	}
	return nil, nil, status.Errorf(status.NotImplemented, "%s is not implemented", req.RequestType())
}

func (c *conn) getData(r *protocol.GetDataRequest) (protocol.Reply, []int, error) {
	st := c.s.store
	if r.Wait {
		if _, err := c.wait(-1, func() (bool, error) {
			for _, id := range r.ID {
				if !st.Exists(id) {
					return false, nil
				}
			}
			return true, nil
		}); err != nil {
			return nil, nil, err
		}
	}
	if !r.WithBuffers {
		content, _, err := st.GetData(r.ID)
		return &protocol.GetDataReply{Content: content}, nil, err
	}
	content, extents, epoch, err := c.sess.GetDataWithBuffers(r.ID)
	if err != nil {
		return nil, nil, err
	}
	payloads := payloadsOf(extents)
	out := &protocol.GetDataReply{Content: content, Payloads: payloads, MetaEpoch: &epoch}
	out.Fds = c.arenaFds(payloads...)
	return out, out.Fds, nil
}

func (c *conn) getName(r *protocol.GetNameRequest) (protocol.Reply, []int, error) {
	st := c.s.store
	if !r.Wait {
		id, err := st.GetName(r.Name)
		return &protocol.GetNameReply{ObjectID: id}, nil, err
	}
	timeout := time.Duration(-1)
	if r.TimeoutMs != nil && *r.TimeoutMs >= 0 {
		timeout = time.Duration(*r.TimeoutMs) * time.Millisecond
	}
	var id ids.ObjectID
	found, err := c.wait(timeout, func() (bool, error) {
		var err error
		id, err = st.GetName(r.Name)
		return err == nil, nil
	})
	if err != nil {
		return nil, nil, err
	}
	if !found {
		return nil, nil, status.Errorf(status.Timeout, "timed out after %v waiting for name %q", timeout, r.Name)
	}
	return &protocol.GetNameReply{ObjectID: id}, nil, nil
}
