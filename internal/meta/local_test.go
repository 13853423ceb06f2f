package meta

import (
	"errors"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
)

func TestLocal(t *testing.T) {
	l := NewLocal(7)
	if l.InstanceID() != 7 {
		t.Fatalf("instance %d", l.InstanceID())
	}
	content := []byte(`{"typename":"t"}`)
	if err := l.Persist([]Tree{{ID: 1, Content: content}}); err != nil {
		t.Fatal(err)
	}
	content[0] = 'x' // the backend keeps its own copy
	if got, ok := l.Tree(1); !ok || string(got) != `{"typename":"t"}` {
		t.Fatalf("tree %q %v", got, ok)
	}
	if err := l.PutName("n", 1); err != nil {
		t.Fatal(err)
	}
	if id, err := l.GetName("n"); err != nil || id != 1 {
		t.Fatalf("GetName: %v %v", id, err)
	}
	names, _ := l.ListNames()
	names["other"] = 2 // the caller's copy
	if _, err := l.GetName("other"); !errors.Is(err, ErrNameNotFound) {
		t.Fatalf("ListNames shares its map: %v", err)
	}
	if err := l.DropName("n"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.GetName("n"); !errors.Is(err, ErrNameNotFound) {
		t.Fatalf("dropped name: %v", err)
	}
	if err := l.Delete([]ids.ObjectID{1, 99}); err != nil {
		t.Fatal(err)
	}
	if _, ok := l.Tree(1); ok {
		t.Fatal("deleted tree kept")
	}
	if err := l.Close(); err != nil || l.Close() != nil {
		t.Fatal("Close is not idempotent")
	}
	if _, open := <-l.Changes(); open {
		t.Fatal("Changes delivered after Close")
	}
	if err := l.PutName("n", 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("PutName after Close: %v", err)
	}
}
