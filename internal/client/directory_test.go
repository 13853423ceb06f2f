package client

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/server"
	"github.com/v6d-io/v6d-go/internal/shm"
	"github.com/v6d-io/v6d-go/internal/status"
)

// checkStore fails the test on any violation of the store's bookkeeping.
func checkStore(t testing.TB, srv *server.Server) {
	t.Helper()
	if err := srv.Store().CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

func TestDirectoryGetsWithoutRoundTrip(t *testing.T) {
	needAccel(t, AccelDirectory)
	srv := startServer(t, 16<<20)
	a, b := connect(t, srv), connect(t, srv)
	if !b.Stats().Directory {
		t.Fatal("the client got no directory")
	}
	id, bid := put(t, a, []byte("hello, directory"))
	before := b.Stats().RoundTrips
	tree, err := b.GetObject(id)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := b.GetMetadata(id)
	if err != nil || !bytes.Equal(meta, tree) {
		t.Fatalf("metadata %s (%v), tree %s", meta, err, tree)
	}
	want, err := a.GetMetadata(id)
	if err != nil || !bytes.Equal(want, tree) {
		t.Fatalf("the directory's tree %s differs from the daemon's %s (%v)", tree, want, err)
	}
	data, _, err := b.BlobPointer(bid)
	if err != nil || string(data) != "hello, directory" {
		t.Fatalf("BlobPointer = %q, %v", data, err)
	}
	blob, err := b.Get(bid) // held: no round trip either
	if err != nil || string(blob) != "hello, directory" {
		t.Fatalf("Get = %q, %v", blob, err)
	}
	if b.Stats().PinsInUse != 1 {
		t.Fatalf("%d pin slots in use, want 1", b.Stats().PinsInUse)
	}
	if err := b.Release(bid); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(id); err != nil {
		t.Fatal(err)
	}
	if n := b.Stats().RoundTrips - before; n != 0 {
		t.Fatalf("get, metadata, blob get and releases took %d round trips, want 0", n)
	}
	if b.Stats().PinsInUse != 0 {
		t.Fatalf("%d pin slots in use after the release, want 0", b.Stats().PinsInUse)
	}
	if _, _, err := b.BlobPointer(bid); code(err) != status.ObjectNotExists {
		t.Fatalf("blob still held after release: %v", err)
	}

	// A blob by its own id, from a third client: one slot, no round trip.
	c := connect(t, srv)
	before = c.Stats().RoundTrips
	got, err := c.GetBuffers([]ids.ObjectID{bid, ids.EmptyBlob, bid}, false)
	if err != nil || string(got[0]) != "hello, directory" || got[1] != nil || string(got[2]) != "hello, directory" {
		t.Fatalf("GetBuffers = %q, %v", got, err)
	}
	for range 2 {
		if err := c.Release(bid); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Release(bid); code(err) != status.ObjectNotExists {
		t.Fatalf("third release: %v", err)
	}
	if n := c.Stats().RoundTrips - before; n != 0 || c.Stats().PinsInUse != 0 {
		t.Fatalf("blob gets took %d round trips, %d slots left", n, c.Stats().PinsInUse)
	}

	// Without the directory, as before: one round trip.
	old, err := Connect(srv.Socket(), WithoutDirectory())
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	before = old.Stats().RoundTrips
	if _, err := old.GetObject(id); err != nil {
		t.Fatal(err)
	}
	if n := old.Stats().RoundTrips - before; n != 1 || old.Stats().Directory {
		t.Fatalf("get without the directory took %d round trips", n)
	}
	checkStore(t, srv)
}

func TestDirectoryPinOutlivesDelete(t *testing.T) {
	needAccel(t, AccelDirectory)
	srv := startServer(t, 16<<20)
	a, b := connect(t, srv), connect(t, srv)
	want := bytes.Repeat([]byte{7}, 64<<10)
	id, bid := put(t, a, want)
	if err := a.Release(id); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetObject(id); err != nil {
		t.Fatal(err)
	}
	view, _, err := b.BlobPointer(bid)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Delete([]ids.ObjectID{id}, false, true, false); err != nil {
		t.Fatal(err)
	}
	if srv.Store().Holds() != 1 {
		t.Fatalf("the delete made %d holds of the pin, want 1", srv.Store().Holds())
	}
	checkStore(t, srv)
	used, _ := srv.Store().Usage()
	refillFreed(t, a)
	if !bytes.Equal(view, want) {
		t.Fatal("a deleted blob's memory was reused under a pin")
	}
	// A get after the delete misses the directory and fails at the daemon.
	if _, err := b.GetObject(id); code(err) != status.ObjectNotExists {
		t.Fatalf("get of a deleted object: %v", err)
	}
	used2, _ := srv.Store().Usage()
	if err := b.Release(id); err != nil {
		t.Fatal(err)
	}
	if err := b.FlushReleases(); err != nil { // the daemon re-reads the pins at the next request
		t.Fatal(err)
	}
	after, _ := srv.Store().Usage()
	if used2-after != 64<<10 || srv.Store().Holds() != 0 {
		t.Fatalf("the last release did not free the deleted blob: %d -> %d (%d before reuse), %d holds",
			used2, after, used, srv.Store().Holds())
	}
	checkStore(t, srv)
}

func TestDirectoryPinsGoWithTheConnection(t *testing.T) {
	needAccel(t, AccelDirectory)
	srv := startServer(t, 16<<20)
	a := connect(t, srv)
	b, err := Connect(srv.Socket())
	if err != nil {
		t.Fatal(err)
	}
	id, _ := put(t, a, bytes.Repeat([]byte{3}, 8192))
	if err := a.Release(id); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetObject(id); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Delete([]ids.ObjectID{id}, false, true, false); err != nil {
		t.Fatal(err)
	}
	if used, _ := srv.Store().Usage(); used == 0 || srv.Store().Holds() != 1 {
		t.Fatalf("pinned memory freed by the delete (used %d, %d holds)", used, srv.Store().Holds())
	}
	// The client goes away without releasing (as a killed one would): its
	// connection's close drops the hold.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Exists(id); err != nil { // the daemon has handled b's close by now
		t.Fatal(err)
	}
	waitFor(t, func() bool { used, _ := srv.Store().Usage(); return used == 0 })
	if srv.Store().Holds() != 0 {
		t.Fatalf("%d holds left", srv.Store().Holds())
	}
	checkStore(t, srv)
}

func TestDirectoryFallbacks(t *testing.T) {
	needAccel(t, AccelDirectory)
	srv := startServer(t, 64<<20)
	a, b := connect(t, srv), connect(t, srv)

	// A changed tree (persist) is retired: the get takes the round trip and
	// sees the new tree.
	id, _ := put(t, a, []byte("x"))
	if err := a.Persist(id); err != nil {
		t.Fatal(err)
	}
	before := b.Stats().RoundTrips
	tree, err := b.GetObject(id)
	if err != nil || !bytes.Contains(tree, []byte(`"transient":false`)) {
		t.Fatalf("tree after persist: %s, %v", tree, err)
	}
	if n := b.Stats().RoundTrips - before; n != 1 {
		t.Fatalf("get of a changed object took %d round trips, want 1", n)
	}
	if err := b.Release(id); err != nil {
		t.Fatal(err)
	}

	checkStore(t, srv)
}

// A process holding tens of thousands of got values still gets without a
// round trip (pin pages had 8,187 slots; a get past them took 80-95 µs
// instead of 5-6); with every slot taken, gets take the round trip, and a
// delete of what they hold keeps it until they are released.
func TestDirectoryPinsMany(t *testing.T) {
	needAccel(t, AccelDirectory)
	srv := startServerWith(t, server.Config{Size: 256 << 20, DirectoryEntries: 1 << 18})
	a, b := connect(t, srv), connect(t, srv)
	var objs []ids.ObjectID
	const many = 20_000 // held without a round trip
	held := max(shm.ClientPinSlots, many) + 90
	for i := range held {
		id, bid := put(t, a, []byte(fmt.Sprint(i)))
		_ = a.Release(bid)
		objs = append(objs, id)
	}
	before := b.Stats().RoundTrips
	for i, id := range objs {
		if _, err := b.GetObject(id); err != nil {
			t.Fatal(err)
		}
		if i+1 == many {
			if n := b.Stats().RoundTrips - before; n != 0 {
				t.Fatalf("holding %d got values, gets took %d round trips", many, n)
			}
		}
	}
	if n := b.Stats().RoundTrips - before; n != 90 || b.Stats().PinsInUse != shm.ClientPinSlots {
		t.Fatalf("%d held gets took %d round trips with %d slots in use", held, n, b.Stats().PinsInUse)
	}
	deleted, err := a.Delete(objs, false, true, false) // more ids than a request takes
	if err != nil || len(deleted) != held || !slices.IsSorted(deleted) {
		t.Fatalf("deleted %d blobs (sorted %v) of %d objects: %v", len(deleted), slices.IsSorted(deleted), held, err)
	}
	checkStore(t, srv)
	// b's page is longer than a delete reads itself: the daemon's sweep reads
	// it afterwards, holding every deleted id until its pass ends, and turns
	// b's pins into holds of b (store/pinsweep.go).
	waitFor(t, srv.Store().PinSweepIdle)
	if n := srv.Store().Holds(); n != shm.ClientPinSlots {
		t.Fatalf("%d holds after the sweep, want one per pinned slot (%d)", n, shm.ClientPinSlots)
	}
	for _, id := range objs {
		if err := b.Release(id); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.FlushReleases(); err != nil {
		t.Fatal(err)
	}
	if b.Stats().PinsInUse != 0 || srv.Store().Holds() != 0 {
		t.Fatalf("%d slots, %d holds left", b.Stats().PinsInUse, srv.Store().Holds())
	}
	checkStore(t, srv)
}

// payload returns n bytes derived from seed, with its CRC in the first 4.
func payload(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b[4:])
	binary.LittleEndian.PutUint32(b, crc32.ChecksumIEEE(b[4:]))
	return b
}

// TestDirectoryRace: readers get objects from the directory while a deleter
// deletes them and an allocator refills the freed memory; every read is
// checksummed while pinned. Run under -race.
func TestDirectoryRace(t *testing.T) {
	needAccel(t, AccelDirectory)
	srv := startServer(t, 64<<20)
	const (
		readers = 4
		objects = 64
		rounds  = 300
	)
	writer := connect(t, srv)
	var mu sync.Mutex
	live := []ids.ObjectID{}
	addObject := func(seed int64) {
		id, bid := put(t, writer, payload(seed, 512+int(seed%4096)))
		_ = writer.Release(bid)
		_ = writer.Release(id)
		mu.Lock()
		live = append(live, id)
		mu.Unlock()
	}
	for i := range objects {
		addObject(int64(i))
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var dirGets, misses atomic.Int64
	errs := make(chan error, readers+2)
	var clients []*Client
	for r := range readers {
		c := connect(t, srv)
		clients = append(clients, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(r)))
			for !stop.Load() {
				mu.Lock()
				id := live[rng.Intn(len(live))]
				mu.Unlock()
				tree, err := c.GetObject(id)
				if code(err) == status.ObjectNotExists {
					misses.Add(1)
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				bid, err := blobOf(tree)
				if err != nil {
					errs <- err
					return
				}
				data, _, err := c.BlobPointer(bid)
				if err != nil {
					errs <- err
					return
				}
				for range 4 { // while the others run
					if binary.LittleEndian.Uint32(data) != crc32.ChecksumIEEE(data[4:]) {
						errs <- fmt.Errorf("checksum mismatch in pinned blob %v of %v", bid, id)
						return
					}
					runtime.Gosched()
				}
				if err := c.Release(id); err != nil {
					errs <- err
					return
				}
			}
			dirGets.Add(int64(c.Stats().DirectoryGets))
		}()
	}
	deleter := connect(t, srv)
	filler := connect(t, srv)
	seed := int64(objects)
	for round := range rounds {
		mu.Lock()
		i := round % len(live)
		victim := live[i]
		live = append(live[:i], live[i+1:]...)
		mu.Unlock()
		if _, err := deleter.Delete([]ids.ObjectID{victim}, false, true, false); err != nil {
			t.Fatal(err)
		}
		// Reuse the memory at once: a reader of freed memory sees garbage.
		for range 4 {
			bid, buf, err := filler.CreateBuffer(4096)
			if err != nil {
				t.Fatal(err)
			}
			for j := range buf {
				buf[j] = byte(round)
			}
			if err := filler.Abort(bid); err != nil {
				t.Fatal(err)
			}
		}
		addObject(seed)
		seed++
		if round%50 == 0 {
			checkStore(t, srv)
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if dirGets.Load() == 0 {
		t.Fatal("no get came from the directory")
	}
	t.Logf("%d gets from the directory, %d of deleted objects", dirGets.Load(), misses.Load())
	checkStore(t, srv)
	if _, err := deleter.Delete(live, false, true, false); err != nil {
		t.Fatal(err)
	}
	for _, c := range append(clients, writer, deleter, filler) { // round-trip gets (fallbacks) left deferred releases
		if err := c.FlushReleases(); err != nil {
			t.Fatal(err)
		}
	}
	srv.Store().RescanPins()
	if used, _ := srv.Store().Usage(); used != 0 || srv.Store().Holds() != 0 {
		t.Fatalf("%d bytes, %d holds left after every delete and release", used, srv.Store().Holds())
	}
}

// blobOf returns the id of the buffer_ member of a tree put made.
func blobOf(tree []byte) (ids.ObjectID, error) {
	i := bytes.Index(tree, []byte(`"buffer_":{"id":"`))
	if i < 0 {
		return 0, fmt.Errorf("no buffer_ in %s", tree)
	}
	s := tree[i+len(`"buffer_":{"id":"`):]
	return ids.Parse(string(s[:17]))
}

// waitFor waits up to 10 s for cond, for effects of another goroutine
// (the daemon handling a closed connection).
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10 s")
		}
	}
}

// A store of more objects than the 65,536 entries every directory had
// until December 4: with a 1 GiB arena the directory names 262,144, so a
// get of the last of 80,000 objects needs no round trip (it took one
// before, ~20x a directory get's time from Python).
func TestDirectoryHoldsManyObjects(t *testing.T) {
	needAccel(t, AccelDirectory)
	srv := startServer(t, 1<<30)
	a, b := connect(t, srv), connect(t, srv)
	const n = 80000
	var last, lastBlob ids.ObjectID
	for i := range n {
		last, lastBlob = putPipelined(t, a, 8, byte(i))
	}
	// A round trip: the daemon handles a connection's requests in order, so
	// every put is handled (and published) once it is answered.
	if ok, err := a.Exists(last); err != nil || !ok {
		t.Fatalf("exists: %v, %v", ok, err)
	}
	before, gets := b.Stats().RoundTrips, b.Stats().DirectoryGets
	if _, err := b.GetObject(last); err != nil {
		t.Fatal(err)
	}
	if trips, dir := b.Stats().RoundTrips-before, b.Stats().DirectoryGets-gets; trips != 0 || dir != 1 {
		t.Fatalf("a get of the %d-th object took %d round trips (%d from the directory), want 0 (1)", n, trips, dir)
	}
	checkBlob(t, b, lastBlob, 8, byte((n-1)&0xff))
}

// TestDirectoryTreesOutliveTheNextGet: a lookup copies records into a
// buffer the next lookup reuses, so what GetObject and GetMetadata return
// must be the caller's own; GetObjectViews with into sees the tree only
// during the call, and copies nothing of it.
func TestDirectoryTreesOutliveTheNextGet(t *testing.T) {
	needAccel(t, AccelDirectory)
	srv := startServer(t, 16<<20)
	a, b := connect(t, srv), connect(t, srv)
	idA, _ := put(t, a, []byte("the first object"))
	idB, _ := put(t, a, []byte("another, longer object of a longer tree"))
	treeA, err := b.GetObject(idA)
	if err != nil {
		t.Fatal(err)
	}
	metaA, err := b.GetMetadata(idA)
	if err != nil {
		t.Fatal(err)
	}
	wantA := string(treeA)
	var intoB string
	if _, _, err := b.GetObjectViews(idB, nil, func(tree []byte, _ uint64) { intoB = string(tree) }); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetMetadata(idB); err != nil {
		t.Fatal(err)
	}
	if b.Stats().DirectoryGets < 2 {
		t.Fatalf("%d gets from the directory, want the test's 2", b.Stats().DirectoryGets)
	}
	if string(treeA) != wantA || string(metaA) != wantA {
		t.Fatalf("a tree changed under a later get:\n%s\n%s\nwant %s", treeA, metaA, wantA)
	}
	if !strings.Contains(intoB, idB.String()) {
		t.Fatalf("into got %q, not the tree of %v", intoB, idB)
	}
}
