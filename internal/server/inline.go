package server

import (
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
)

var errNotRegistered = status.Errorf(status.Invalid, "the connection is not registered yet")

// createInline answers a create_data request whose new blobs' bytes follow
// its frame (docs/protocol.md, "inline"): it reads them straight into the
// arena, then creates the blobs and the object. handleFrame has checked the
// registration and the total, and consumes whatever bytes this leaves unread
// when it fails.
func (c *conn) createInline(r *protocol.CreateDataRequest) (protocol.Reply, []int, error) {
	if len(r.Seal) > 0 {
		return nil, nil, status.Errorf(status.Invalid, "create_data takes either seal or inline blobs, not both")
	}
	blobs, err := c.sess.AllocInline(r.Inline)
	if err != nil {
		return nil, nil, err
	}
	for _, b := range blobs {
		if err := c.readTrailing(b.Data); err != nil {
			c.sess.DropInline(blobs)
			return nil, nil, err
		}
	}
	created, err := c.sess.CreateInline(r.Content, blobs)
	if err != nil {
		return nil, nil, err
	}
	reply := &protocol.CreateDataReply{ID: created.ID, Signature: created.Signature,
		InstanceID: c.s.store.InstanceID(), InlineIDs: created.Inline}
	if r.WithContent && created.ID != 0 {
		reply.Content, _ = c.s.store.Tree(created.ID)
	}
	return reply, nil, nil
}
