package store

import (
	"encoding/json"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// TestWaitsWakeOnlyTheirKey checks that an event wakes the waits of its
// key and no other, and that stopped waits leave nothing behind.
func TestWaitsWakeOnlyTheirKey(t *testing.T) {
	s := newStore(t)
	ss := s.NewSession()
	defer ss.Close()
	o := create(t, ss, `{"typename":"t"}`)
	if err := s.Persist(o); err != nil {
		t.Fatal(err)
	}
	other := ids.ObjectID(0x1234)
	nameA, stopA := s.Watch(WaitKey{Name: "a"})
	nameB, stopB := s.Watch(WaitKey{Name: "b"})
	nameA2, stopA2 := s.Watch(WaitKey{Name: "a"})
	id, stopID := s.Watch(WaitKey{ID: other})
	woken := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	if _, err := ss.CreateData(json.RawMessage(`{"typename":"u"}`), nil); err != nil {
		t.Fatal(err)
	}
	if woken(nameA) || woken(nameB) || woken(id) {
		t.Fatal("a put woke waits of other keys")
	}
	if err := s.PutName("a", o); err != nil {
		t.Fatal(err)
	}
	if !woken(nameA) || !woken(nameA2) {
		t.Fatal("naming a did not wake the waits of a")
	}
	if woken(nameB) || woken(id) {
		t.Fatal("naming a woke waits of other keys")
	}
	for _, stop := range []func(){stopA, stopA2, stopB, stopID} {
		stop()
	}
	if n := s.Waits(); n != 0 {
		t.Fatalf("%d keys still have waits after every wait stopped", n)
	}
	// A wait for a blob ends when it is created.
	_, stop := s.Watch(WaitKey{ID: other})
	stop()
	if n := s.Waits(); n != 0 {
		t.Fatalf("%d keys still have waits", n)
	}
}
