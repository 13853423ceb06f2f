package store

import (
	"strings"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/status"
)

// CreateLeased takes the object's id from the lease's block, above the
// blobs', and refuses any other without changing anything.
func TestCreateLeasedIDs(t *testing.T) {
	s, err := New(Config{Size: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ss := s.NewSession()
	defer ss.Close()
	l, err := ss.Lease(1<<20, 4096)
	if err != nil {
		t.Fatal(err)
	}
	tree := []byte(`{"typename":"t","a":{"inline":0}}`)
	blob := func(i uint64) []LeaseBlob {
		return []LeaseBlob{{ID: l.FirstID + ids.ObjectID(i), Offset: l.Offset + 64*i, Size: 10}}
	}
	for name, tc := range map[string]struct {
		blobs []LeaseBlob
		root  ids.ObjectID
	}{
		"a blob id":                {blob(0), l.FirstID + 1},
		"the blob's own value":     {blob(0), l.FirstID &^ ids.BlobBit},
		"below the blob's":         {blob(1), l.FirstID &^ ids.BlobBit},
		"past the block":           {blob(0), (l.FirstID + ids.ObjectID(l.IDs)) &^ ids.BlobBit},
		"zero":                     {blob(0), 0},
		"a blob outside the lease": {[]LeaseBlob{{ID: l.FirstID, Offset: l.Offset + l.Size, Size: 10}}, (l.FirstID + 1) &^ ids.BlobBit},
	} {
		if _, err := ss.CreateLeased(tree, tc.blobs, tc.root); status.CodeOf(err) != status.Invalid {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got := ss.Leased(); got != l {
		t.Fatalf("refused creates changed the lease: %+v, was %+v", got, l)
	}
	root := (l.FirstID + 1) &^ ids.BlobBit
	c, err := ss.CreateLeased(tree, blob(0), root)
	if err != nil || c.ID != root || len(c.Inline) != 1 || c.Inline[0] != l.FirstID {
		t.Fatalf("create: %+v, %v", c, err)
	}
	stored, ok := s.Tree(root)
	if !ok || !strings.Contains(string(stored), l.FirstID.String()) {
		t.Fatalf("tree %s, %v", stored, ok)
	}
	// Both ids are used: neither can be taken again.
	if _, err := ss.CreateLeased(tree, blob(1), root); status.CodeOf(err) != status.Invalid {
		t.Fatalf("the same object id twice: %v", err)
	}
	if _, err := ss.CreateLeased([]byte(`{"a":{"inline":0}}`), blob(3), (l.FirstID+4)&^ids.BlobBit); status.CodeOf(err) != status.MetaTreeInvalid {
		t.Fatalf("a tree without typename: %v", err)
	}
	if n := ss.refs; len(n) != 0 {
		t.Fatalf("the session holds %d references after leased creates", len(n))
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
