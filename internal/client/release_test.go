package client

import (
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
)

// Queued releases go in requests of at most protocol.MaxItems ids, in
// order: a longer list is refused by the daemon, and a refused release
// keeps its memory until the connection closes. (More than MaxItems queue
// up when a process drops that many got values within releaseDelay.)
func TestReleaseRequestsFitTheLimit(t *testing.T) {
	c := &Client{}
	c.ext.releaseIDs = true
	rel := make([]ids.ObjectID, 2*protocol.MaxItems+3)
	for i := range rel {
		rel[i] = ids.ObjectID(i + 1)
	}
	var sent []ids.ObjectID
	reqs := c.ext.releaseRequests(rel)
	for _, r := range reqs {
		rr := r.(*protocol.ReleaseRequest)
		if n := len(rr.IDs) + 1; n > protocol.MaxItems {
			t.Fatalf("a release of %d ids, the daemon takes %d", n, protocol.MaxItems)
		}
		sent = append(append(sent, rr.ObjectID), rr.IDs...)
	}
	if len(reqs) != 3 || len(sent) != len(rel) {
		t.Fatalf("%d requests with %d ids, want 3 with %d", len(reqs), len(sent), len(rel))
	}
	for i, id := range sent {
		if id != rel[i] {
			t.Fatalf("id %d sent as %v, want %v", i, id, rel[i])
		}
	}
}
