package store

import (
	"strings"
	"testing"
	"time"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/meta"
)

// slowBackend is a meta.Local whose Persist tells entered (buffered), then
// waits until release is closed.
type slowBackend struct {
	*meta.Local
	entered, release chan struct{}
}

func (b *slowBackend) Persist(trees []meta.Tree) error {
	b.entered <- struct{}{}
	<-b.release
	return b.Local.Persist(trees)
}

// TestPersistDoesNotHoldTheStore: while the backend is busy persisting,
// other requests are served; an object deleted meanwhile has its tree taken
// back, and a label added meanwhile reaches the backend.
func TestPersistDoesNotHoldTheStore(t *testing.T) {
	sb := &slowBackend{Local: meta.NewLocal(0), entered: make(chan struct{}, 8)}
	s, err := New(Config{Size: 1 << 20, Backend: sb})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ss := s.NewSession()
	defer ss.Close()
	doomed := create(t, ss, `{"typename":"doomed"}`)
	labelled := create(t, ss, `{"typename":"labelled"}`)
	for _, tc := range []struct {
		id     ids.ObjectID
		during func()
		check  func()
	}{
		{doomed, func() { s.Delete([]ids.ObjectID{doomed}, DeleteOptions{}) }, func() {
			if _, ok := sb.Tree(doomed); ok {
				t.Fatal("the tree of an object deleted during its persist stays in the backend")
			}
		}},
		{labelled, func() {
			if err := s.Label(labelled, []string{"k"}, []string{"v"}); err != nil {
				t.Fatal(err)
			}
		}, func() {
			if tree, ok := sb.Tree(labelled); !ok || !strings.Contains(string(tree), `__labels`) {
				t.Fatalf("a label added during the persist is not in the backend: %s", tree)
			}
		}},
	} {
		sb.release = make(chan struct{})
		done := make(chan error, 1)
		go func() { done <- s.Persist(tc.id) }()
		select {
		case <-sb.entered:
		case <-time.After(30 * time.Second):
			t.Fatal("persist never reached the backend")
		}
		// The store answers while the backend is busy (it would deadlock
		// here if Persist held the store lock).
		if !s.Exists(tc.id) {
			t.Fatal("the object vanished")
		}
		tc.during()
		close(sb.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		for len(sb.entered) > 0 {
			<-sb.entered // the labelled case writes its tree again
		}
		tc.check()
		checkInvariants(t, s)
	}
}
