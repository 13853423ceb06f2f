package client

import (
	"encoding/json"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// BlobView is one blob a get pinned: its id and its bytes, as BlobPointer
// gives them (read-only, or writable for an unsealed blob this client
// created). Data is valid while the client holds a reference to the blob.
type BlobView struct {
	ID   ids.ObjectID
	Data []byte
}

// GetObjectViews is GetObject that also appends to dst the view of every
// blob the get pinned (each blob once, in no particular order; the empty
// blob never), so that a caller that reads the blobs needs no BlobPointer
// per blob. The references, and their one Release(id), are GetObject's. A
// view is missing only when another goroutine released this get's references
// in between (a misuse); BlobPointer then fails for it as it would anyway.
//
// With into, the tree is handed to into (valid only during the call, which
// may run under the client's lock: into must not call the client) and not
// returned; a tree from the directory is then never copied in Go. With it
// comes the daemon's shape number of the tree (its directory record's), 0
// when the get did not learn it; TreeShapeOf turns either into this
// process's shape number.
func (c *Client) GetObjectViews(id ids.ObjectID, dst []BlobView, into func(tree []byte, shape uint64)) (json.RawMessage, []BlobView, error) {
	tree, err := c.getObject(id, into)
	if err != nil {
		return nil, dst, err
	}
	c.state.Lock()
	defer c.state.Unlock()
	if id.IsBlob() {
		return tree, c.state.appendViewLocked(dst, id), nil
	}
	if stack := c.state.objects[id]; len(stack) > 0 {
		for _, bid := range stack[len(stack)-1] {
			dst = c.state.appendViewLocked(dst, bid)
		}
	}
	return tree, dst, nil
}

// appendViewLocked appends the view of blob id when the client holds it, as
// BlobPointer answers. c.state must be held.
func (r *refs) appendViewLocked(dst []BlobView, id ids.ObjectID) []BlobView {
	if id == ids.EmptyBlob {
		return dst
	}
	b, ok := r.blobs[id]
	if !ok || (!b.owned && b.pins == 0) {
		return dst
	}
	if b.owned {
		return append(dst, BlobView{ID: id, Data: b.rw})
	}
	return append(dst, BlobView{ID: id, Data: b.ro})
}
