package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// listIDs returns the ids of a List reply, in the reply's order.
func listIDs(t *testing.T, raw []byte) []ids.ObjectID {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	var out []ids.ObjectID
	if _, err := dec.Token(); err != nil { // {
		t.Fatalf("list reply %s: %v", raw, err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		id, err := ids.Parse(tok.(string))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestListCostsWhatItReturns: a list with a limit visits about limit ids,
// whatever the size of the store; a list that must visit them all releases
// the store lock between batches, and other operations run in between.
func TestListCostsWhatItReturns(t *testing.T) {
	s, err := New(Config{Size: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ss := s.NewSession()
	defer ss.Close()
	const n = 5 * listBatch
	for i := range n {
		create(t, ss, fmt.Sprintf(`{"typename":"vineyard::Common","i":%d}`, i))
	}
	rare := create(t, ss, `{"typename":"vineyard::Rare"}`)
	for _, pattern := range []string{"*", "vineyard::Common", "vineyard::*"} {
		before := s.listSeen
		got := listIDs(t, mustList(t, s, pattern, 10))
		if len(got) != 10 || !slices.IsSorted(got) {
			t.Fatalf("list %q limit 10: %v", pattern, got)
		}
		if seen := s.listSeen - before; seen > 10 {
			t.Fatalf("list %q limit 10 visited %d ids of %d", pattern, seen, n+1)
		}
	}

	// The rare typename is last: the list visits everything, in batches,
	// and the lock is free between them.
	other := s.NewSession()
	defer other.Close()
	batches, free := 0, 0
	var madeDuring []ids.ObjectID
	s.listHook = func() {
		batches++
		if s.mu.TryLock() {
			free++
			s.mu.Unlock()
		}
		madeDuring = append(madeDuring, create(t, other, `{"typename":"vineyard::During"}`))
	}
	got := listIDs(t, mustList(t, s, "vineyard::Rare", 0))
	s.listHook = nil
	if len(got) != 1 || got[0] != rare {
		t.Fatalf("list of the rare typename: %v, want [%v]", got, rare)
	}
	if batches < n/listBatch || free != batches {
		t.Fatalf("%d batches, the lock free between %d of them; want at least %d, all free", batches, free, n/listBatch)
	}
	if got := listIDs(t, mustList(t, s, "vineyard::During", 0)); !slices.Equal(got, madeDuring) {
		t.Fatalf("objects made between the batches: listed %v, made %v", got, madeDuring)
	}
	checkInvariants(t, s)
}

func mustList(t *testing.T, s *Store, pattern string, limit uint64) []byte {
	t.Helper()
	raw, err := s.List(pattern, false, limit)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestListMatchesAFullScan: whatever was created, sealed and deleted, a
// list with any pattern and limit returns what a scan of the whole store
// sorted by id would (the list's behaviour before the index).
func TestListMatchesAFullScan(t *testing.T) {
	s := newStore(t)
	ss := s.NewSession()
	defer ss.Close()
	rng := rand.New(rand.NewSource(1))
	typenames := []string{"a::X", "a::Y", "b::Z"}
	var live []ids.ObjectID
	for range 3000 {
		switch r := rng.Intn(10); {
		case r < 5:
			live = append(live, create(t, ss, fmt.Sprintf(`{"typename":%q}`, typenames[rng.Intn(3)])))
		case r < 7:
			bid := blobOf(t, ss, 8)
			if rng.Intn(2) == 0 {
				if err := ss.Seal(bid); err != nil {
					t.Fatal(err)
				}
			}
			live = append(live, bid)
		case len(live) > 0:
			i := rng.Intn(len(live))
			s.Delete([]ids.ObjectID{live[i]}, DeleteOptions{})
			live = slices.Delete(live, i, i+1)
		}
	}
	for _, pattern := range []string{"*", "a::*", "b::Z", "vineyard::Blob", "none", "?::[XZ]"} {
		match, err := compileMatcher(pattern, false)
		if err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		var want []ids.ObjectID
		for id, o := range s.objects {
			if match(o.typename) {
				want = append(want, id)
			}
		}
		if match(BlobTypename) {
			for id, b := range s.blobs {
				if b.state != stateUnsealed {
					want = append(want, id)
				}
			}
		}
		s.mu.Unlock()
		slices.Sort(want)
		for _, limit := range []uint64{0, 1, 7, uint64(len(want)), uint64(len(want)) + 1} {
			got := listIDs(t, mustList(t, s, pattern, limit))
			w := want
			if limit > 0 && uint64(len(w)) > limit {
				w = w[:limit]
			}
			if !slices.Equal(got, w) {
				t.Fatalf("list %q limit %d: %d ids, want %d\n got %v\nwant %v", pattern, limit, len(got), len(w), got, w)
			}
		}
	}
}

// TestIDIndex: random inserts and removes (in order and not, repeated)
// against a sorted set, and scans from random points.
func TestIDIndex(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	var x idIndex
	ref := map[ids.ObjectID]bool{}
	next := ids.ObjectID(1 << 30)
	for step := range 200000 {
		var id ids.ObjectID
		switch r := rng.Intn(10); {
		case r < 5: // mostly ascending, as new ids are
			next += ids.ObjectID(rng.Intn(3))
			id = next
		case r < 7:
			id = ids.ObjectID(rng.Int63n(int64(next)))
		default:
			id = next - ids.ObjectID(rng.Intn(5000))
		}
		if rng.Intn(3) == 0 {
			x.remove(id)
			delete(ref, id)
		} else {
			x.insert(id)
			ref[id] = true
		}
		if step%20000 == 0 || step == 199999 {
			want := make([]ids.ObjectID, 0, len(ref))
			for id := range ref {
				want = append(want, id)
			}
			slices.Sort(want)
			var got []ids.ObjectID
			from := ids.ObjectID(0)
			for {
				nx, end := x.scan(from, 1+rng.Intn(700), func(id ids.ObjectID) bool { got = append(got, id); return true })
				if end {
					break
				}
				from = nx
			}
			if x.n != len(ref) || !slices.Equal(got, want) {
				t.Fatalf("step %d: index holds %d (counts %d), want %d", step, len(got), x.n, len(want))
			}
			for i, c := range x.chunks {
				if len(c) == 0 || len(c) > 2*idChunk || x.lasts[i] != c[len(c)-1] {
					t.Fatalf("step %d: chunk %d of %d ids, last %v", step, i, len(c), x.lasts[i])
				}
			}
		}
	}
}
