package server

import (
	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
	"github.com/v6d-io/v6d-go/internal/store"
)

// Leases (protocol.ExtLease, store/lease.go): a client carves its new blobs
// from arena memory and ids the daemon leased to its connection, and names
// them in the create_data that seals them, so a put is one round trip.

// leaseBlobs turns a request's (id, offset, size) triples into the store's
// lease blobs (the decoder checked the list is whole triples).
func leaseBlobs(v []uint64) []store.LeaseBlob {
	out := make([]store.LeaseBlob, len(v)/3)
	for i := range out {
		out[i] = store.LeaseBlob{ID: ids.ObjectID(v[3*i]), Offset: v[3*i+1], Size: v[3*i+2]}
	}
	return out
}

// adoptLeaseBlobs makes the blobs a request names from the connection's
// lease unsealed blobs of its session.
func (c *conn) adoptLeaseBlobs(v []uint64) error {
	if len(v) == 0 {
		return nil
	}
	if !c.passFds {
		return status.Errorf(status.Invalid, "leases need a connection over the UNIX socket")
	}
	return c.sess.AdoptLeaseBlobs(leaseBlobs(v))
}

// grantLease replaces the connection's lease (see Session.Lease) and
// describes it for the reply, with the read-write fd when the client does
// not have it yet (returned, to send after the reply).
func (c *conn) grantLease(want, need uint64) (*protocol.LeaseGrant, []int, error) {
	if !c.passFds {
		return nil, nil, status.Errorf(status.Invalid, "leases need a connection over the UNIX socket")
	}
	l, err := c.sess.Lease(want, need)
	if err != nil {
		return nil, nil, err
	}
	rw := []protocol.Payload{{StoreFd: 0}} // an unsealed payload: the read-write fd
	fds := c.arenaFds(rw...)
	return &protocol.LeaseGrant{Offset: l.Offset, Size: l.Size, StoreFd: rw[0].StoreFd,
		FirstID: l.FirstID, IDs: l.IDs}, fds, nil
}

// createBuffersLease answers a create_buffers request with a lease: the
// blobs carved from the old lease, then the buffers asked for, then the new
// lease.
func (c *conn) createBuffersLease(r *protocol.CreateBuffersRequest) (protocol.Reply, []int, error) {
	if err := c.adoptLeaseBlobs(r.LeaseBlobs); err != nil {
		return nil, nil, err
	}
	out := &protocol.BuffersReply{Payloads: []protocol.Payload{}}
	if len(r.Sizes) > 0 {
		es, err := c.sess.CreateBuffers(r.Sizes)
		if err != nil {
			return nil, nil, err
		}
		out.Payloads = payloadsOf(es)
		out.IDs = make([]ids.ObjectID, len(out.Payloads))
		for i, p := range out.Payloads {
			out.IDs[i] = p.ObjectID
		}
	}
	out.Num = len(out.Payloads)
	out.Fds = c.arenaFds(out.Payloads...)
	if r.LeaseKeep {
		return out, out.Fds, nil
	}
	grant, fds, err := c.grantLease(r.LeaseSize, r.LeaseNeed)
	if err != nil {
		c.unsend(out.Fds)
		for _, p := range out.Payloads {
			_ = c.sess.DropBuffer(p.ObjectID)
		}
		return nil, nil, err
	}
	out.Lease = grant
	out.Fds = append(out.Fds, fds...)
	return out, out.Fds, nil
}

// renewLease gives a create_data reply the new lease its request asked for,
// best effort: only a client that holds the read-write fd gets one here.
func (c *conn) renewLease(r *protocol.CreateDataRequest, out *protocol.CreateDataReply) {
	if r.LeaseSize == 0 || !c.passFds || c.sentArena&sentReadWrite == 0 {
		return
	}
	if grant, _, err := c.grantLease(r.LeaseSize, 0); err == nil {
		out.Lease = grant
	}
}

// createLeased answers a put into leased memory with the client's id
// (protocol.ExtPipelined): no reply when pipelined (handleFrame).
func (c *conn) createLeased(r *protocol.CreateDataRequest) (protocol.Reply, []int, error) {
	if !c.passFds {
		return nil, nil, status.Errorf(status.Invalid, "leases need a connection over the UNIX socket")
	}
	created, err := c.sess.CreateLeased(r.Content, leaseBlobs(r.LeaseBlobs), r.ID, r.Pipelined)
	c.pipedCounted = r.Pipelined
	if err != nil || r.Pipelined {
		if r.Pipelined {
			c.notePipelined()
		}
		return nil, nil, err
	}
	return &protocol.CreateDataReply{ID: created.ID, Signature: created.Signature,
		InstanceID: c.s.store.InstanceID(), InlineIDs: created.Inline}, nil, nil
}
