package client

import (
	"encoding/json"
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
