package server

import (
	"io"
	"math"

	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
)

var errNotRegistered = status.Errorf(status.Invalid, "the connection is not registered yet")

// handleInline answers a create_data request whose new blobs' bytes follow
// its frame (docs/protocol.md, "inline"): it reads them straight into the
// arena, then creates the blobs and the object. The bytes are always
// consumed, also when the request fails, so the stream stays in step; a
// total above the frame limit closes the connection instead, as an
// oversized frame does.
func (c *conn) handleInline(wire string, r *protocol.CreateDataRequest) bool {
	var total uint64
	for _, n := range r.Inline {
		if n > math.MaxInt64-total {
			total = math.MaxInt64
			break
		}
		total += n
	}
	if total > uint64(c.s.cfg.MaxFrame) {
		c.writeError(status.Errorf(status.Invalid, "%d inline bytes, limit %d", total, c.s.cfg.MaxFrame))
		c.flush(nil)
		return false
	}
	drain := func(err error) bool {
		if _, derr := io.CopyN(io.Discard, c.r, int64(total)); derr != nil {
			return false
		}
		return c.writeError(err)
	}
	switch {
	case !c.registered:
		return drain(errNotRegistered)
	case len(r.Seal) > 0:
		return drain(status.Errorf(status.Invalid, "create_data takes either seal or inline blobs, not both"))
	}
	blobs, err := c.sess.AllocInline(r.Inline)
	if err != nil {
		return drain(err)
	}
	for _, b := range blobs {
		if _, err := io.ReadFull(c.r, b.Data); err != nil {
			c.sess.DropInline(blobs)
			return false // the client went away mid-request
		}
	}
	created, err := c.sess.CreateInline(r.Content, blobs)
	if err != nil {
		return c.writeError(err)
	}
	reply := &protocol.CreateDataReply{ID: created.ID, Signature: created.Signature,
		InstanceID: c.s.store.InstanceID(), InlineIDs: created.Inline}
	if r.WithContent && created.ID != 0 {
		reply.Content, _ = c.s.store.Tree(created.ID)
	}
	reply.Type = protocol.ReplyType(wire)
	return c.write(reply, nil)
}
