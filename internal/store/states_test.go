package store

import (
	"strings"
	"testing"
)

// TestStateEdges checks the transition table's use: an illegal change is
// refused and reported by CheckInvariants, as is a blob whose state does
// not match the map that holds it.
func TestStateEdges(t *testing.T) {
	s, err := New(Config{Size: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ss := s.NewSession()
	defer ss.Close()
	id := blobOf(t, ss, 64)
	s.mu.Lock()
	b := s.blobs[id]
	s.life.setStateLocked(b, stateFreed)  // legal: unsealed → freed
	s.life.setStateLocked(b, stateSealed) // illegal: freed → sealed, refused
	state := b.state
	s.mu.Unlock()
	if state != stateFreed {
		t.Fatalf("an illegal edge changed the state to %v", state)
	}
	err = s.CheckInvariants()
	for _, want := range []string{"illegal state change: blob " + id.String() + ": freed → sealed", "is freed but is among the live blobs"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("CheckInvariants: %v, want %q", err, want)
		}
	}
	s.mu.Lock()
	b.state, b.prev, s.badEdges = stateUnsealed, stateNone, nil // as it was, for the cleanup
	s.mu.Unlock()
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestStateTable checks the table: every state but none is reachable, and
// freed is final.
func TestStateTable(t *testing.T) {
	reached := map[blobState]bool{stateNone: true}
	for from := range numBlobStates {
		for to := range numBlobStates {
			if legalEdges[from][to] {
				reached[to] = true
			}
		}
		if from == stateFreed {
			for to := range numBlobStates {
				if legalEdges[from][to] {
					t.Fatalf("freed → %v is an edge", to)
				}
			}
		}
	}
	for st := range numBlobStates {
		if !reached[st] {
			t.Fatalf("state %v is unreachable", st)
		}
	}
}
