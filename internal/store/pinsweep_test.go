package store

import (
	"fmt"
	"math/rand"
	"slices"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/shm"
)

// pinView gives ss a pin page and returns the client's writable view.
func pinView(t *testing.T, ss *Session) (*shm.PinView, []uint64) {
	t.Helper()
	fd, err := ss.AttachPins()
	if err != nil {
		t.Fatal(err)
	}
	m, err := shm.Map(fd, shm.PinPageSize, true)
	_ = unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	v, err := shm.NewPinView(m.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return v, wordsOf(m.Bytes())
}

// wordsOf is the client's view of a page as words.
func wordsOf(b []byte) []uint64 {
	return unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), len(b)/8)
}

// zombie reports whether blob id is deleted but its memory still held.
func zombie(s *Store, id ids.ObjectID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.zombies[id]
	return ok
}

// waitFor fails the test unless cond holds within 20 s (a bound for hangs).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestDeleteReadsOnlyShortPinPages: pages whose client claims every slot
// (filled with junk) are not read by a delete but after it, one per hold of
// the lock; a pin in such a page still keeps the deleted blob's memory
// until it is cleared, and a pin in a short page is found by the delete
// itself, as before.
func TestDeleteReadsOnlyShortPinPages(t *testing.T) {
	s, err := New(Config{Size: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	owner := s.NewSession()
	defer owner.Close()
	bid := blobOf(t, owner, 4096)
	obj := create(t, owner, fmt.Sprintf(`{"typename":"t","b":{"id":"%v"}}`, bid), bid)
	if err := owner.Release(bid); err != nil { // only pins keep it once deleted
		t.Fatal(err)
	}

	honest := s.NewSession()
	defer honest.Close()
	hv, _ := pinView(t, honest)
	hslot, _ := hv.Set(uint64(obj))

	const junkPages = 3
	var junkSessions []*Session
	var pinned []uint64 // the page whose junk hides a real pin of obj
	for i := range junkPages {
		ss := s.NewSession()
		t.Cleanup(ss.Close)
		_, w := pinView(t, ss)
		for j := 1; j <= shm.PinSlots; j++ {
			atomic.StoreUint64(&w[j], uint64(ids.ObjectID(j)|0x5a5a<<40))
		}
		atomic.StoreUint64(&w[0], shm.PinSlots) // the hint: every slot
		if i == 0 {
			atomic.StoreUint64(&w[60000], uint64(obj))
			pinned = w
		}
		junkSessions = append(junkSessions, ss)
	}

	readsNow, swept := s.pinReadsNow.Load(), s.sweepPages.Load()
	s.Delete([]ids.ObjectID{obj}, DeleteOptions{})
	if n := s.pinReadsNow.Load() - readsNow; n != 1 {
		t.Fatalf("the delete read %d pages itself, want only the short one", n)
	}
	if !honest.HasHolds() {
		t.Fatal("the pin of a short page was not found by the delete")
	}
	waitFor(t, "the sweep to read the long pages", s.pins.pinSweepIdle)
	if n := s.sweepPages.Load() - swept; n != junkPages {
		t.Fatalf("the sweep read %d pages, want %d", n, junkPages)
	}
	if !junkSessions[0].HasHolds() || junkSessions[1].HasHolds() {
		t.Fatal("the sweep did not turn the hidden pin into a hold of its session, or made one from junk")
	}
	checkInvariants(t, s)
	hv.Clear(hslot)
	honest.RescanPins()
	if !zombie(s, bid) {
		t.Fatal("the blob was freed while a long page still pins it")
	}
	atomic.StoreUint64(&pinned[60000], 0)
	junkSessions[0].RescanPins()
	if zombie(s, bid) {
		t.Fatal("the blob's memory is held although no pin names it any more")
	}
	checkInvariants(t, s)
}

// TestPinSweepProperty: random pins (in long junk-filled pages and short
// ones), clears, deletes and rescans. Whatever the order, the blob of a
// deleted object that a pin stored before its delete still names is never
// freed (it stays a zombie), and once every pin is cleared and the sweep
// is done, every deleted blob is freed.
func TestPinSweepProperty(t *testing.T) {
	s, err := New(Config{Size: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	owner := s.NewSession()
	t.Cleanup(owner.Close)
	rng := rand.New(rand.NewSource(3))
	type page struct {
		ss   *Session
		w    []uint64
		long bool
		pins map[uint64]ids.ObjectID // slot -> object
	}
	var pages []*page
	for i := range 6 {
		ss := s.NewSession()
		t.Cleanup(ss.Close)
		_, w := pinView(t, ss)
		p := &page{ss: ss, w: w, long: i%2 == 0, pins: map[uint64]ids.ObjectID{}}
		if p.long {
			for j := 1; j <= shm.PinSlots; j += 7 {
				atomic.StoreUint64(&w[j], uint64(j)|0x77<<48)
			}
			atomic.StoreUint64(&w[0], shm.PinSlots)
		}
		pages = append(pages, p)
	}
	blobOfObj := map[ids.ObjectID]ids.ObjectID{}
	var live, deleted []ids.ObjectID
	check := func(step int) {
		for _, p := range pages {
			for _, id := range p.pins {
				if slices.Contains(deleted, id) && !zombie(s, blobOfObj[id]) {
					t.Fatalf("step %d: the blob of %v was freed while a pin stored before its delete names it", step, id)
				}
			}
		}
	}
	for step := range 400 {
		switch r := rng.Intn(10); {
		case r < 3 || len(live) == 0:
			bid := blobOf(t, owner, 256)
			obj := create(t, owner, fmt.Sprintf(`{"typename":"t","b":{"id":"%v"}}`, bid), bid)
			if err := owner.Release(bid); err != nil {
				t.Fatal(err)
			}
			blobOfObj[obj] = bid
			live = append(live, obj)
		case r < 6:
			p := pages[rng.Intn(len(pages))]
			id := live[rng.Intn(len(live))]
			slot := uint64(1 + rng.Intn(900))
			if p.long {
				slot = uint64(1 + rng.Intn(shm.PinSlots))
			} else if atomic.LoadUint64(&p.w[0]) < slot {
				atomic.StoreUint64(&p.w[0], slot)
			}
			atomic.StoreUint64(&p.w[slot], uint64(id))
			p.pins[slot] = id
		case r < 7:
			p := pages[rng.Intn(len(pages))]
			for slot := range p.pins {
				atomic.StoreUint64(&p.w[slot], 0)
				delete(p.pins, slot)
				break
			}
			p.ss.RescanPins()
		default:
			i := rng.Intn(len(live))
			s.Delete([]ids.ObjectID{live[i]}, DeleteOptions{})
			deleted = append(deleted, live[i])
			live = slices.Delete(live, i, i+1)
		}
		check(step)
		if step%50 == 0 {
			checkInvariants(t, s)
		}
	}
	waitFor(t, "the sweep to finish", s.pins.pinSweepIdle)
	check(-1)
	for _, p := range pages {
		for slot := range p.pins {
			atomic.StoreUint64(&p.w[slot], 0)
		}
		p.pins = nil
		p.ss.RescanPins()
	}
	for _, id := range deleted {
		if zombie(s, blobOfObj[id]) {
			t.Fatalf("the blob of %v is still held with no pin left", id)
		}
	}
	checkInvariants(t, s)
}
