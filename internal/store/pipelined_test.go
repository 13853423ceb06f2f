package store

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/shm"
	"github.com/v6d-io/v6d-go/internal/status"
)

// leasingSession returns a 16 MiB store and a session of it, closed when
// the test ends.
func leasingSession(t *testing.T) (*Store, *Session) {
	t.Helper()
	s, err := New(Config{Size: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ss := s.NewSession()
	t.Cleanup(ss.Close)
	return s, ss
}

// pinningSession is leasingSession with a pin page, the client's view of
// it, and a lease of 1 MiB; all go when the test ends.
func pinningSession(t *testing.T) (*Store, *Session, *shm.PinView, Lease) {
	t.Helper()
	s, ss := leasingSession(t)
	pins, _ := pinView(t, ss)
	l, err := ss.Lease(1<<20, 4096)
	if err != nil {
		t.Fatal(err)
	}
	return s, ss, pins, l
}

// CreateLeased takes the object's id from the lease's block, above the
// blobs', and refuses any other without changing anything.
func TestCreateLeasedIDs(t *testing.T) {
	s, ss := leasingSession(t)
	l, err := ss.Lease(1<<20, 4096)
	if err != nil {
		t.Fatal(err)
	}
	tree := []byte(`{"typename":"t","a":{"inline":0}}`)
	blob := func(i uint64) []LeaseBlob {
		return []LeaseBlob{{ID: l.FirstID + ids.ObjectID(i), Offset: l.Offset + 64*i, Size: 10}}
	}
	for name, tc := range map[string]struct {
		blobs []LeaseBlob
		root  ids.ObjectID
	}{
		"a blob id":                {blob(0), l.FirstID + 1},
		"the blob's own value":     {blob(0), l.FirstID &^ ids.BlobBit},
		"below the blob's":         {blob(1), l.FirstID &^ ids.BlobBit},
		"past the block":           {blob(0), (l.FirstID + ids.ObjectID(l.IDs)) &^ ids.BlobBit},
		"zero":                     {blob(0), 0},
		"a blob outside the lease": {[]LeaseBlob{{ID: l.FirstID, Offset: l.Offset + l.Size, Size: 10}}, (l.FirstID + 1) &^ ids.BlobBit},
	} {
		if _, err := ss.CreateLeased(tree, tc.blobs, tc.root, false); status.CodeOf(err) != status.Invalid {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got := ss.Leased(); got != l {
		t.Fatalf("refused creates changed the lease: %+v, was %+v", got, l)
	}
	root := (l.FirstID + 1) &^ ids.BlobBit
	c, err := ss.CreateLeased(tree, blob(0), root, false)
	if err != nil || c.ID != root || len(c.Inline) != 1 || c.Inline[0] != l.FirstID {
		t.Fatalf("create: %+v, %v", c, err)
	}
	stored, ok := s.Tree(root)
	if !ok || !strings.Contains(string(stored), l.FirstID.String()) {
		t.Fatalf("tree %s, %v", stored, ok)
	}
	// Both ids are used: neither can be taken again.
	if _, err := ss.CreateLeased(tree, blob(1), root, false); status.CodeOf(err) != status.Invalid {
		t.Fatalf("the same object id twice: %v", err)
	}
	if _, err := ss.CreateLeased([]byte(`{"a":{"inline":0}}`), blob(3), (l.FirstID+4)&^ids.BlobBit, false); status.CodeOf(err) != status.MetaTreeInvalid {
		t.Fatalf("a tree without typename: %v", err)
	}
	if n := ss.refs; len(n) != 0 {
		t.Fatalf("the session holds %d references after leased creates", len(n))
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// A pipelined put that the daemon refuses after adopting its blobs holds
// their memory while its client pins the root (it answered a get of its own
// put before the daemon counted it), as a delete holds pinned blobs; the
// memory goes once the pin does. A successful one is counted handled with
// its effects, and its signature is the root's own value.
func TestPipelinedFailureHeldWhilePinned(t *testing.T) {
	s, ss, pins, l := pinningSession(t)
	used0, _ := s.Usage()

	bad, root := []byte(`{"typename":"t","a":{"inline":1}}`), (l.FirstID+1)&^ids.BlobBit
	slot, _ := pins.Set(uint64(root))
	_, err := ss.CreateLeased(bad, []LeaseBlob{{ID: l.FirstID, Offset: l.Offset, Size: 4000}}, root, true)
	if status.CodeOf(err) != status.MetaTreeInvalid {
		t.Fatalf("a tree naming a blob it does not have: %v", err)
	}
	if pins.Handled() != 1 {
		t.Fatalf("handled %d pipelined puts, want 1", pins.Handled())
	}
	if used, _ := s.Usage(); used != used0+4032 || !ss.HasHolds() {
		t.Fatalf("the refused put's memory: %d bytes used (was %d), holds %v", used, used0, ss.HasHolds())
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	pins.Clear(slot)
	ss.RescanPins()
	if used, _ := s.Usage(); used != used0 || ss.HasHolds() {
		t.Fatalf("after the pin went: %d bytes used (was %d), holds %v", used, used0, ss.HasHolds())
	}

	// Unpinned, a refused put frees at once; a good one is counted too.
	_, err = ss.CreateLeased(bad, []LeaseBlob{{ID: l.FirstID + 2, Offset: l.Offset + 4032, Size: 10}},
		(l.FirstID+3)&^ids.BlobBit, true)
	if status.CodeOf(err) != status.MetaTreeInvalid || ss.HasHolds() {
		t.Fatalf("unpinned refused put: %v, holds %v", err, ss.HasHolds())
	}
	good := (l.FirstID + 5) &^ ids.BlobBit
	if _, err := ss.CreateLeased([]byte(`{"typename":"t","a":{"inline":0}}`),
		[]LeaseBlob{{ID: l.FirstID + 4, Offset: l.Offset + 8192, Size: 10}}, good, true); err != nil {
		t.Fatal(err)
	}
	tree, _ := s.Tree(good)
	if pins.Handled() != 3 || !strings.Contains(string(tree), fmt.Sprintf(`"signature":%d,`, uint64(good))) {
		t.Fatalf("handled %d, tree %s", pins.Handled(), tree)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// A delete turns a pin into a hold that lasts while the slot the pin was
// seen in keeps the id: a new pin of the deleted id elsewhere (a client's
// attempt, which it drops when it finds the entry retired) does not keep
// the memory, and neither does the slot once it holds another id.
func TestHoldFollowsItsSlot(t *testing.T) {
	s, ss, pins, l := pinningSession(t)
	used0, _ := s.Usage()
	tree := []byte(`{"typename":"t","a":{"inline":0}}`)
	put := func(i uint64) ids.ObjectID {
		root := (l.FirstID + ids.ObjectID(2*i+1)) &^ ids.BlobBit
		blobs := []LeaseBlob{{ID: l.FirstID + ids.ObjectID(2*i), Offset: l.Offset + 4096*i, Size: 4000}}
		if _, err := ss.CreateLeased(tree, blobs, root, false); err != nil {
			t.Fatal(err)
		}
		return root
	}
	x, y := put(0), put(1)
	used1, _ := s.Usage()

	a, _ := pins.Set(uint64(x))
	s.Delete([]ids.ObjectID{x}, DeleteOptions{})
	if !ss.HasHolds() {
		t.Fatal("a pinned object was deleted without a hold")
	}
	b, _ := pins.Set(uint64(x)) // a pin attempt after the delete
	pins.Clear(a)
	pins.Set(uint64(y)) // slot a, taken again for another id
	ss.RescanPins()
	if ss.HasHolds() {
		t.Fatalf("the hold outlived its slot (%d now holds %v, %d holds the deleted id)", a, y, b)
	}
	if used, _ := s.Usage(); used != used1-4032 || used < used0 {
		t.Fatalf("%d bytes used after the hold went, %d before the delete", used, used1)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// fakeBacklog is a connection's stream as a test says it stands: the
// requests before mark are handled once handled is set.
type fakeBacklog struct {
	mu      sync.Mutex
	mark    uint64
	handled uint64
	marks   int // calls of Mark
}

func (b *fakeBacklog) Mark() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.marks++
	return b.mark
}

func (b *fakeBacklog) Reached(mark uint64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.handled >= mark
}

// The barrier waits for another session's pipelined put only while that
// session's connection holds requests it has not handled, and then until
// it handled them: a put sent is found, a count raised with nothing sent
// (a forged submitted word) costs nobody a wait.
func TestVisibleWaitsOnlyForABacklog(t *testing.T) {
	s, ss, pins, l := pinningSession(t)
	b := &fakeBacklog{}
	ss.SetBacklog(b)
	reader := s.NewSession()
	defer reader.Close()
	missing := ids.ObjectID(0x1234)

	// No count raised: no wait, and the backlog is not even asked.
	if reader.Visible([]ids.ObjectID{missing}) || b.marks != 0 {
		t.Fatal("the barrier waited, or asked, with no put counted")
	}
	// A forged count, nothing unhandled on the connection: no wait.
	for range 1000 {
		pins.Submit()
	}
	if reader.Visible([]ids.ObjectID{missing}) || s.BarrierWaits() != 0 {
		t.Fatal("a count with no request behind it made another session wait")
	}
	// A put in the connection's backlog: the barrier waits until it is
	// handled, and the id is found after.
	b.mu.Lock()
	b.mark = 100
	b.mu.Unlock()
	tree := []byte(`{"typename":"t","a":{"inline":0}}`)
	root := (l.FirstID + 1) &^ ids.BlobBit
	done := make(chan bool)
	go func() { done <- reader.Visible([]ids.ObjectID{root}) }()
	for s.BarrierWaits() == 0 { // the barrier has begun waiting
		runtime.Gosched()
	}
	if _, err := ss.CreateLeased(tree, []LeaseBlob{{ID: l.FirstID, Offset: l.Offset, Size: 64}}, root, true); err != nil {
		t.Fatal(err)
	}
	if !<-done {
		t.Fatal("the barrier did not wait for a put in the backlog")
	}
	if !s.Exists(root) {
		t.Fatal("the put is not visible after the barrier")
	}
	// Handled through the mark: a miss does not wait any more.
	b.mu.Lock()
	b.handled = 100
	b.mu.Unlock()
	if reader.Visible([]ids.ObjectID{missing}) {
		t.Fatal("the barrier waited for a backlog already handled")
	}
}
