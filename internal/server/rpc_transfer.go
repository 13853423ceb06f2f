package server

import (
	"time"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
	"github.com/v6d-io/v6d-go/internal/store"
)

// Blob bytes on the connection (protocol/remote.go, docs/cluster-rpc.md).
// They are read from the socket straight into the arena and written from the
// arena straight to the socket, in chunks of bulkChunk: the daemon never
// holds a copy of a blob. Each chunk must arrive (or drain) within
// Config.FrameTimeout, so a large transfer is bounded by its progress, not
// its total time.

// bulkChunk is the most bytes one read or write of blob bytes moves.
const bulkChunk = 8 << 20

// trailingLimit is the most bytes a request of kind may announce after its
// frame: the arena's size for the blob transfers, whose bytes go straight
// into it; Config.MaxFrame for the others (an inline create).
func (c *conn) trailingLimit(kind protocol.Kind) uint64 {
	switch kind {
	case protocol.KindCreateRemoteBuffer, protocol.KindCreateRemoteBuffers, protocol.KindFillBuffers:
		_, limit := c.s.store.Usage()
		return limit
	}
	return uint64(c.s.cfg.MaxFrame)
}

// readBulk fills dst with the request's trailing bytes, chunk by chunk.
func (c *conn) readBulk(dst []byte) error {
	for len(dst) > 0 {
		n := min(len(dst), bulkChunk)
		c.r.deadline = time.Now().Add(c.s.cfg.FrameTimeout)
		if err := c.readTrailing(dst[:n]); err != nil {
			return err
		}
		dst = dst[n:]
	}
	return nil
}

// createRemoteBuffers answers create_remote_buffer(s)_request: it reads the
// blobs' bytes into new blobs, then seals them. The connection keeps no
// reference to them, as after an inline create.
func (c *conn) createRemoteBuffers(sizes []uint64) ([]protocol.Payload, error) {
	blobs, err := c.sess.AllocInline(sizes)
	if err != nil {
		return nil, err
	}
	for _, b := range blobs {
		if err := c.readBulk(b.Data); err != nil {
			c.sess.DropInline(blobs)
			return nil, err
		}
	}
	created, err := c.sess.CreateInline(nil, blobs)
	if err != nil {
		return nil, err
	}
	out := make([]protocol.Payload, len(created.Inline))
	for i, id := range created.Inline {
		out[i] = protocol.Payload{ObjectID: id, StoreFd: -1, DataSize: sizes[i], IsSealed: true, IsOwner: true}
	}
	return out, nil
}

func createRemoteBuffer(c *conn, r *protocol.CreateRemoteBufferRequest) (protocol.Reply, []int, error) {
	ps, err := c.createRemoteBuffers([]uint64{r.Size})
	if err != nil {
		return nil, nil, err
	}
	return &protocol.CreateBufferReply{ID: ps[0].ObjectID, Created: ps[0], Fd: -1}, nil, nil
}

func createRemoteBuffersMany(c *conn, r *protocol.CreateRemoteBuffersRequest) (protocol.Reply, []int, error) {
	ps, err := c.createRemoteBuffers(r.Sizes)
	if err != nil {
		return nil, nil, err
	}
	out := &protocol.BuffersReply{Payloads: ps, Num: len(ps), IDs: make([]ids.ObjectID, len(ps)), Fds: []int{}}
	for i, p := range ps {
		out.IDs[i] = p.ObjectID
	}
	return out, nil, nil
}

// getRemoteBuffers answers get_remote_buffers_request: get_buffers' reply
// (the connection takes a reference to each blob, as a get does), then the
// bytes of each blob.
func getRemoteBuffers(c *conn, r *protocol.GetRemoteBuffersRequest, rs *responder) error {
	es, err := c.sess.GetBuffers(r.IDs, r.Unsafe)
	if err != nil {
		return err
	}
	ps := payloadsOf(es)
	return rs.replyThenBytes(protocol.KindGetRemoteBuffers, &protocol.BuffersReply{Payloads: ps, Num: len(ps), Fds: []int{}}, es)
}

// fillBuffers answers fill_buffers_request: it copies the bytes that follow
// into unsealed blobs this connection created.
func fillBuffers(c *conn, r *protocol.FillBuffersRequest) error {
	for i, id := range r.IDs {
		dst, err := c.sess.OwnedBytes(id)
		if err != nil {
			return err
		}
		if r.Sizes[i] > uint64(len(dst)) {
			return status.Errorf(status.Invalid, "fill of %d bytes into blob %v of %d", r.Sizes[i], id, len(dst))
		}
		if err := c.readBulk(dst[:r.Sizes[i]]); err != nil {
			return err
		}
	}
	return nil
}

// replyThenBytes sends reply (of kind's reply type), then the bytes of es
// in order, from the arena. The connection holds a reference to each blob,
// so their memory stays theirs while it is written. A reply that cannot be
// encoded or is too large is an error reply, and no bytes follow it. It
// answers None, having sent the answer; errExit when the client went away.
func (rs *responder) replyThenBytes(kind protocol.Kind, reply protocol.Reply, es []store.Extent) error {
	c := rs.c
	reply.ReplyHeader().Type = kind.Reply()
	start := len(c.out)
	frame, at := protocol.BeginFrame(c.out)
	frame, err := protocol.AppendReply(frame, reply)
	if err != nil {
		c.out = frame[:start]
		return status.Errorf(status.UnknownError, "encode reply: %v", err)
	}
	if n := len(frame) - at - 8; n > c.s.cfg.MaxReplyBytes {
		c.out = frame[:start]
		return status.Errorf(status.Invalid,
			"the reply would be %d bytes, over the daemon's limit of %d: ask for less at a time", n, c.s.cfg.MaxReplyBytes)
	}
	protocol.EndFrame(frame, at)
	c.out = frame
	// The frame (and whatever replies were waiting) goes in one writev with
	// the first bulkChunk bytes, so that the client's read of the reply
	// finds the bytes behind it: one wake-up, where a write of the frame
	// alone woke it for the frame and again for the bytes.
	bufs := [][]byte{c.out}
	room := bulkChunk
	for _, e := range es {
		data := c.sess.Bytes(e)
		for len(data) > 0 {
			n := min(len(data), room)
			bufs = append(bufs, data[:n])
			data, room = data[n:], room-n
			if room == 0 {
				if err := c.sock.Writev(bufs); err != nil {
					return errExit
				}
				bufs, room = bufs[:0], bulkChunk
			}
		}
	}
	if len(bufs) > 0 {
		if err := c.sock.Writev(bufs); err != nil {
			return errExit
		}
	}
	c.out = c.out[:0]
	if cap(c.out) > 1<<20 {
		c.out = nil
	}
	rs.None()
	return nil
}
