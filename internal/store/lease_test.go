package store

import (
	"fmt"
	"sync"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// TestLeasesConcurrent runs sessions that lease, carve, adopt, seal, create,
// delete and close at once (run it with -race): the invariants hold at the
// end, and with every session closed nothing is leased and only the objects
// left alive use memory.
func TestLeasesConcurrent(t *testing.T) {
	s, err := New(Config{Size: 64 << 20, PrefaultAhead: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	const workers, rounds = 6, 200
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ss := s.NewSession()
			defer func() { ss.Close() }()
			var l Lease
			next := uint64(0) // ids used from l.FirstID
			for r := range rounds {
				size := uint64(64 + (w*977+r*131)%5000)
				if l.Size < roundUp(size) || next >= l.IDs {
					var err error
					if l, err = ss.Lease(4*size, size); err != nil {
						errs <- fmt.Errorf("lease: %w", err)
						return
					}
					next = 0
				}
				lb := LeaseBlob{ID: l.FirstID + ids.ObjectID(next), Offset: l.Offset, Size: size}
				if err := ss.AdoptLeaseBlobs([]LeaseBlob{lb}); err != nil {
					errs <- fmt.Errorf("adopt %+v of %+v: %w", lb, l, err)
					return
				}
				next++
				l.Offset += roundUp(size)
				l.Size -= roundUp(size)
				tree := fmt.Sprintf(`{"typename":"t","b":{"id":"%v"}}`, lb.ID)
				c, err := ss.CreateData([]byte(tree), []ids.ObjectID{lb.ID})
				if err != nil {
					errs <- fmt.Errorf("create: %w", err)
					return
				}
				if r%3 != 0 {
					s.Delete([]ids.ObjectID{c.ID}, DeleteOptions{Deep: true})
				}
				_ = ss.Release(lb.ID)
				if r%50 == 49 { // a connection ends, another begins
					ss.Close()
					ss, l = s.NewSession(), Lease{}
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { // the checker reads while the workers write
		defer close(done)
		for range 50 {
			if err := s.CheckInvariants(); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	<-done
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if n := s.Leased(); n != 0 {
		t.Fatalf("%d bytes leased with every session closed", n)
	}
	s.Clear()
	if used, _ := s.Usage(); used != 0 {
		t.Fatalf("used %d after a clear", used)
	}
}

// TestLeaseIsPrefaulted: the background pre-fault keeps the memory of a
// lease resident, where its client writes next, not only what lies above
// the lease.
func TestLeaseIsPrefaulted(t *testing.T) {
	const ahead = 4 << 20
	s, err := New(Config{Size: 64 << 20, PrefaultAhead: ahead})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	defer checkInvariants(t, s)
	waitPrefaulted(t, s, HeaderSize+ahead)
	// Use up the pre-faulted memory, then lease beyond it.
	a := s.NewSession()
	defer a.Close()
	if _, err := a.CreateBuffer(ahead); err != nil {
		t.Fatal(err)
	}
	l, err := a.Lease(ahead, ahead)
	if err != nil {
		t.Fatal(err)
	}
	waitPrefaulted(t, s, l.Offset+l.Size)
	for i, r := range resident(t, s, l.Offset, l.Size) {
		if !r {
			t.Fatalf("page %d of the lease is not resident", i)
		}
	}
}
