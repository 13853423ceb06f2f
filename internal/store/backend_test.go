package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/meta"
	"github.com/v6d-io/v6d-go/internal/status"
)

// failingBackend is a meta.Local whose Persist and PutName fail while fail
// is set.
type failingBackend struct {
	*meta.Local
	fail bool
}

var errBackendDown = errors.New("backend down")

func (f *failingBackend) Persist(trees []meta.Tree) error {
	if f.fail {
		return errBackendDown
	}
	return f.Local.Persist(trees)
}

func (f *failingBackend) PutName(name string, id ids.ObjectID) error {
	if f.fail {
		return errBackendDown
	}
	return f.Local.PutName(name, id)
}

// TestBackendRouting checks that persist, names and the delete of persisted
// objects go through Config.Backend, and that a failing backend changes
// nothing in the store.
func TestBackendRouting(t *testing.T) {
	local := meta.NewLocal(42)
	s, err := New(Config{Size: 1 << 20, InstanceID: 1, Backend: local})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if s.InstanceID() != 42 {
		t.Fatalf("instance %d, want the backend's 42", s.InstanceID())
	}
	ss := s.NewSession()
	defer ss.Close()
	bid := blobOf(t, ss, 64)
	child := create(t, ss, fmt.Sprintf(`{"typename":"c","b":{"id":"%v"}}`, bid), bid)
	root := create(t, ss, fmt.Sprintf(`{"typename":"r","c":{"id":"%v"}}`, child))
	if err := s.Persist(root); err != nil {
		t.Fatal(err)
	}
	for _, id := range []ids.ObjectID{root, child} {
		raw, ok := local.Tree(id)
		var tree map[string]any
		if !ok || json.Unmarshal(raw, &tree) != nil || tree["transient"] != false {
			t.Fatalf("backend tree of %v: %s", id, raw)
		}
	}
	raw, _ := local.Tree(root)
	var link struct {
		C map[string]any `json:"c"`
	}
	if err := json.Unmarshal(raw, &link); err != nil || len(link.C) != 1 || link.C["id"] != child.String() {
		t.Fatalf("members are not stored as links: %s", raw)
	}
	if _, ok := local.Tree(bid); ok {
		t.Fatal("a blob was persisted")
	}
	if err := s.PutName("n", root); err != nil {
		t.Fatal(err)
	}
	if id, err := local.GetName("n"); err != nil || id != root {
		t.Fatalf("name not in the backend: %v %v", id, err)
	}
	checkInvariants(t, s)
	s.Delete([]ids.ObjectID{root}, DeleteOptions{Deep: true})
	if _, ok := local.Tree(root); ok {
		t.Fatal("the tree of a deleted object stays in the backend")
	}
	if _, err := local.GetName("n"); !errors.Is(err, meta.ErrNameNotFound) {
		t.Fatalf("the name of a deleted object stays in the backend: %v", err)
	}
	checkInvariants(t, s)
}

func TestBackendFailureChangesNothing(t *testing.T) {
	fb := &failingBackend{Local: meta.NewLocal(0)}
	s, err := New(Config{Size: 1 << 20, Backend: fb})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ss := s.NewSession()
	defer ss.Close()
	id := create(t, ss, `{"typename":"t","m":{"typename":"inner"}}`)
	before, _ := s.Tree(id)
	fb.fail = true
	if err := s.Persist(id); status.CodeOf(err) != status.IOError {
		t.Fatalf("persist with the backend down: %v", err)
	}
	if p, _ := s.IfPersist(id); p {
		t.Fatal("persisted although the backend failed")
	}
	if after, _ := s.Tree(id); string(after) != string(before) {
		t.Fatalf("a failed persist changed the tree:\n%s\n%s", before, after)
	}
	fb.fail = false
	if err := s.Persist(id); err != nil {
		t.Fatal(err)
	}
	fb.fail = true
	if err := s.PutName("n", id); status.CodeOf(err) != status.IOError {
		t.Fatalf("put name with the backend down: %v", err)
	}
	if _, err := s.GetName("n"); status.CodeOf(err) != status.ObjectNotExists {
		t.Fatalf("a failed put name is visible: %v", err)
	}
	checkInvariants(t, s)
}
