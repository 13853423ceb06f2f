package client

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
)

// TestTreeOfSaysWhenEtcdWasAway: a missing id is ObjectNotExists; when the
// daemon could not catch up with etcd, the message says so.
func TestTreeOfSaysWhenEtcdWasAway(t *testing.T) {
	id := ids.ObjectID(0x1234)
	for _, tc := range []struct {
		sync, want string
	}{
		{"", "does not exist"},
		{"etcd: deadline exceeded", "could not catch up with etcd to look for it on the others: etcd: deadline exceeded"},
	} {
		_, err := treeOf(&protocol.GetDataReply{Content: json.RawMessage(`{}`), SyncError: tc.sync}, id)
		if status.CodeOf(err) != status.ObjectNotExists || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("sync error %q: %v", tc.sync, err)
		}
	}
	tree, err := treeOf(&protocol.GetDataReply{Content: json.RawMessage(`{"o0000000000001234":{"a":1}}`),
		SyncError: "x"}, id)
	if err != nil || string(tree) != `{"a":1}` {
		t.Errorf("a present id: %s, %v", tree, err)
	}
}

// A delete of more ids than a request takes (protocol.MaxItems) goes in
// parts with the result of one request: without deep or force, an object
// a later part's object used is deleted by another pass once that object
// is gone, not kept.
func TestDeleteLongListNested(t *testing.T) {
	srv := startServer(t, 64<<20)
	c := connect(t, srv)
	inner, innerBlob := put(t, c, []byte("inner"))
	outer, err := c.Create([]byte(fmt.Sprintf(`{"typename":"vineyard::Tuple","__elements_-size":1,"__elements_-0":{"id":"%v"}}`, inner)), nil)
	if err != nil {
		t.Fatal(err)
	}
	// inner in the first part, outer in the second; ids nothing has between.
	idl := []ids.ObjectID{inner}
	for i := range protocol.MaxItems {
		idl = append(idl, ids.ObjectID(0x7000_0000_0000_0000+uint64(i)))
	}
	idl = append(idl, outer)
	deleted, err := c.Delete(idl, false, false, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []ids.ObjectID{inner, outer, innerBlob} {
		if ok, err := c.Exists(id); ok || err != nil {
			t.Fatalf("%v exists after the delete (%v); deleted blobs %v", id, err, deleted)
		}
	}
	if !slices.Equal(deleted, []ids.ObjectID{innerBlob}) {
		t.Fatalf("deleted blobs %v, want %v", deleted, innerBlob)
	}
	checkStore(t, srv)
}
