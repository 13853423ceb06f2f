package client

import (
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/status"
)

// TestGetObjectViews checks that the views a get returns are the pinned
// blobs' bytes, for an object (from the directory, and again from the tree
// cache of the same client), a blob id and a missing id, and that the
// references are GetObject's: one Release drops them.
func TestGetObjectViews(t *testing.T) {
	srv := startServer(t, 16<<20)
	a, b := connect(t, srv), connect(t, srv)
	id, bid := put(t, a, []byte("hello, views"))
	for round := 0; round < 2; round++ {
		tree, views, err := b.GetObjectViews(id, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(tree) == 0 || len(views) != 1 || views[0].ID != bid || string(views[0].Data) != "hello, views" {
			t.Fatalf("round %d: tree %s, views %+v", round, tree, views)
		}
		if err := b.Release(id); err != nil {
			t.Fatal(err)
		}
		if _, _, err := b.BlobPointer(bid); code(err) != status.ObjectNotExists {
			t.Fatalf("round %d: after release: %v", round, err)
		}
	}
	_, views, err := b.GetObjectViews(bid, make([]BlobView, 0, 4), nil)
	if err != nil || len(views) != 1 || views[0].ID != bid || string(views[0].Data) != "hello, views" {
		t.Fatalf("blob id: views %+v, %v", views, err)
	}
	if err := b.Release(bid); err != nil {
		t.Fatal(err)
	}
	if _, views, err = b.GetObjectViews(ids.EmptyBlob, nil, nil); err != nil || len(views) != 0 {
		t.Fatalf("empty blob: views %+v, %v", views, err)
	}
	if _, views, err = b.GetObjectViews(ids.ObjectID(12345), nil, nil); code(err) != status.ObjectNotExists || len(views) != 0 {
		t.Fatalf("missing id: views %+v, %v", views, err)
	}
}
