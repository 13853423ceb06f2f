package store

import "fmt"

// blobLife moves blobs between states (states.go): every change of a
// blob's state, its retirement and the return of its memory go through it.
type blobLife struct{ s *Store }

// blobState is where a blob is in its life. Which map holds a blob follows
// from it: Store.blobs the live states (unsealed, sealed, spilled,
// loading), Store.zombies a zombie, none a freed blob.
//
//	unsealed ──seal──▶ sealed ──spill──▶ spilled ──load──▶ loading
//	    │                │ ▲                 │                │
//	    │                │ └──────loaded─────┼────────────────┘
//	    ├─drop, close─┐  ├─delete (referenced)─▶ zombie ─last release─▶ freed
//	    └─────────────┴──┴─delete (unreferenced)────────────────────────▶ freed
//
// A spilled or loading blob that is deleted goes the way of a sealed one.
// A load that fails (its file missing or corrupt) goes back from loading
// to spilled; a spill found pinned after it was decided goes spilled →
// loading → sealed at once (spill.go). Whether a blob owns arena memory (hollow: shrunk to 0) and
// whether its pages go back to the kernel when it is freed (trim) are not
// states: they are what the blob holds and how it will be freed.
type blobState uint8

const (
	stateNone     blobState = iota // not made yet: the state before the first
	stateUnsealed                  // its creator writes it; owner set
	stateSealed                    // immutable; readable by every session
	stateSpilled                   // its bytes are in its spill file, not in the arena
	stateLoading                   // its bytes come back into the arena
	stateZombie                    // deleted, still referenced: hidden, memory kept
	stateFreed                     // its memory went back to the allocator

	numBlobStates
)

var blobStateNames = [numBlobStates]string{
	stateNone: "none", stateUnsealed: "unsealed", stateSealed: "sealed", stateSpilled: "spilled",
	stateLoading: "loading", stateZombie: "zombie", stateFreed: "freed",
}

func (st blobState) String() string {
	if st < numBlobStates {
		return blobStateNames[st]
	}
	return fmt.Sprintf("state(%d)", uint8(st))
}

// legalEdges is the transition table: legalEdges[from][to].
var legalEdges = [numBlobStates][numBlobStates]bool{
	stateNone:     {stateUnsealed: true},
	stateUnsealed: {stateSealed: true, stateZombie: true, stateFreed: true},
	stateSealed:   {stateSpilled: true, stateZombie: true, stateFreed: true},
	stateSpilled:  {stateLoading: true, stateZombie: true, stateFreed: true},
	stateLoading:  {stateSealed: true, stateSpilled: true, stateZombie: true, stateFreed: true},
	stateZombie:   {stateFreed: true},
}

// live reports whether a blob in state st is visible (in Store.blobs).
func (st blobState) live() bool {
	return st == stateUnsealed || st == stateSealed || st == stateSpilled || st == stateLoading
}

// readable reports whether a blob in state st can be read by any session:
// sealed, and in the arena.
func (st blobState) readable() bool { return st == stateSealed }

// setStateLocked moves b to state to: the one place a blob's state
// changes. An edge the table does not allow is a bug in the store: it is
// refused, recorded, and reported by CheckInvariants, not a crash of the
// daemon.
func (part *blobLife) setStateLocked(b *blob, to blobState) {
	s := part.s
	from := b.state
	if from >= numBlobStates || to >= numBlobStates || !legalEdges[from][to] {
		if len(s.badEdges) < 16 {
			s.badEdges = append(s.badEdges, fmt.Sprintf("blob %v: %v → %v", b.id, from, to))
		}
		return
	}
	b.prev, b.state = from, to
}

// checkStatesLocked checks that every blob's state is legal, was reached by
// a legal edge, and matches the map that holds it (CheckInvariants).
func (part *checker) checkStatesLocked(fail func(string, ...any)) {
	s := part.s
	for _, e := range s.badEdges {
		fail("illegal state change: %s", e)
	}
	check := func(b *blob, where string, ok func(blobState) bool) {
		if b.state >= numBlobStates || b.prev >= numBlobStates || !legalEdges[b.prev][b.state] {
			fail("blob %v is %v, reached from %v: not an edge of the table", b.id, b.state, b.prev)
		}
		if !ok(b.state) {
			fail("blob %v is %v but is among the %s blobs", b.id, b.state, where)
		}
	}
	for _, b := range s.blobs {
		check(b, "live", blobState.live)
	}
	for _, b := range s.zombies {
		check(b, "zombie", func(st blobState) bool { return st == stateZombie })
	}
	if emptyBlob.state != stateSealed {
		fail("the empty blob is %v", emptyBlob.state)
	}
}
