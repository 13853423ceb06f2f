package store

import (
	"encoding/json"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// recorder is an Observer that keeps every event.
type recorder struct{ events []Event }

func (r *recorder) StoreEvent(e Event) { r.events = append(r.events, e) }

// take returns the events since the last take.
func (r *recorder) take() []Event {
	out := r.events
	r.events = nil
	return out
}

// TestEventsOfALifecycle checks the events a put, a name, a delete and a
// release emit, in order.
func TestEventsOfALifecycle(t *testing.T) {
	rec := &recorder{}
	s, err := New(Config{Size: 1 << 20, Observer: rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	t.Cleanup(func() { checkInvariants(t, s) })
	ss := s.NewSession()
	defer ss.Close()
	reader := s.NewSession()
	defer reader.Close()

	b := blobOf(t, ss, 64)
	created, err := ss.CreateData(json.RawMessage(`{"typename":"t","b":{"id":"`+b.String()+`"}}`), []ids.ObjectID{b})
	if err != nil {
		t.Fatal(err)
	}
	o := created.ID
	want := []Event{
		{Kind: EventCreated, ID: b, Size: 64},
		{Kind: EventSealed, ID: b},
		{Kind: EventCreated, ID: o},
	}
	expectEvents(t, "put", rec.take(), want)

	if err := s.Persist(o); err != nil {
		t.Fatal(err)
	}
	if err := s.PutName("n", o); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, "persist and name", rec.take(), []Event{
		{Kind: EventTreeChanged, ID: o},
		{Kind: EventTreeChanged, ID: o},
		{Kind: EventNamed, ID: o, Name: "n"},
	})

	if _, err := reader.GetBuffers([]ids.ObjectID{b}, false); err != nil {
		t.Fatal(err)
	}
	if err := ss.Release(b); err != nil {
		t.Fatal(err)
	}
	s.Delete([]ids.ObjectID{o}, DeleteOptions{})
	expectEvents(t, "delete", rec.take(), []Event{
		{Kind: EventDeleted, ID: o},
		{Kind: EventDeleted, ID: b},
		{Kind: EventUnnamed, ID: o, Name: "n"},
	})
	if err := reader.Release(b); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, "last release", rec.take(), []Event{{Kind: EventFreed, ID: b, Size: 64}})

	u, err := ss.CreateBuffer(32)
	if err != nil {
		t.Fatal(err)
	}
	if err := ss.DropBuffer(u.ID); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, "drop", rec.take(), []Event{
		{Kind: EventCreated, ID: u.ID, Size: 32},
		{Kind: EventDeleted, ID: u.ID, Flags: FlagUnsealed},
		{Kind: EventFreed, ID: u.ID, Size: 32},
	})
}

func expectEvents(t *testing.T, what string, got, want []Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: events %+v, want %+v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: event %d is %+v, want %+v (all: %+v)", what, i, got[i], want[i], got)
		}
	}
}

// TestEventCounts checks the counting Observer.
func TestEventCounts(t *testing.T) {
	var c EventCounts
	s, err := New(Config{Size: 1 << 20, Observer: &c})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ss := s.NewSession()
	defer ss.Close()
	if _, err := ss.CreateData(json.RawMessage(`{"typename":"t"}`), []ids.ObjectID{blobOf(t, ss, 8)}); err != nil {
		t.Fatal(err)
	}
	if c.Count(EventCreated) != 2 || c.Count(EventSealed) != 1 || c.Count(EventFreed) != 0 {
		t.Fatalf("counts: created %d sealed %d freed %d", c.Count(EventCreated), c.Count(EventSealed), c.Count(EventFreed))
	}
	if EventCreated.String() != "created" || EventKind(200).String() != "unknown" {
		t.Fatal("kind names")
	}
}
