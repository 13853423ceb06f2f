package client

import (
	"errors"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/status"
)

func usage(t *testing.T, c *Client) uint64 {
	t.Helper()
	st, err := c.InstanceStatus()
	if err != nil {
		t.Fatal(err)
	}
	return st.MemoryUsage
}

func TestLeaseKeepsDeletedBlobsUntilReleased(t *testing.T) {
	srv := startServer(t, 16<<20)
	a, b := connect(t, srv), connect(t, srv)
	id, bid := put(t, a, make([]byte, 1<<20))
	if err := a.Release(id); err != nil { // the putter's seal reference
		t.Fatal(err)
	}
	if _, _, err := b.Retain([]ids.ObjectID{bid}); code(err) != status.ObjectNotExists {
		t.Fatalf("retain of a blob not held: %v", err)
	}
	if _, err := b.GetObject(id); err != nil {
		t.Fatal(err)
	}
	before := b.Stats().RoundTrips
	lease, views, err := b.Retain([]ids.ObjectID{bid, ids.EmptyBlob, bid})
	if err != nil {
		t.Fatal(err)
	}
	if b.Stats().RoundTrips != before {
		t.Error("Retain made a round trip")
	}
	if len(views) != 3 || len(views[0]) != 1<<20 || views[1] != nil || !IsSharedMemory(uintptr(unsafe.Pointer(&views[2][0]))) {
		t.Fatalf("views %d, %d, %v", len(views), len(views[0]), views[1])
	}
	if err := b.Release(id); err != nil { // the get's reference: the lease still holds
		t.Fatal(err)
	}
	if b.Stats().RoundTrips != before {
		t.Error("a release that reaches no zero made a round trip")
	}
	full := usage(t, a)
	if _, err := a.Delete([]ids.ObjectID{id}, false, true, false); err != nil {
		t.Fatal(err)
	}
	if u := usage(t, a); u != full {
		t.Fatalf("usage %d after delete under a lease, want %d", u, full)
	}
	if err := lease.Release(); err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(); err != nil { // idempotent
		t.Fatal(err)
	}
	// Releases go out ahead of the client's next request or within a few
	// milliseconds (release.go, and cache.go for the tree cache's).
	for deadline := time.Now().Add(10 * time.Second); usage(t, a) >= full; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("usage %d after the lease, want below %d", usage(t, a), full)
		}
	}
	if _, _, err := b.BlobPointer(bid); code(err) != status.ObjectNotExists {
		t.Fatalf("blob still held: %v", err)
	}
}

func TestCloseWaitsForLeases(t *testing.T) {
	srv := startServer(t, 16<<20)
	a := connect(t, srv)
	b, err := Connect(srv.Socket())
	if err != nil {
		t.Fatal(err)
	}
	id, bid := put(t, a, []byte("still here"))
	if _, err := b.GetObject(id); err != nil {
		t.Fatal(err)
	}
	lease, views, err := b.Retain([]ids.ObjectID{bid})
	if err != nil {
		t.Fatal(err)
	}
	conns := func() int {
		st, err := a.InstanceStatus()
		if err != nil {
			t.Fatal(err)
		}
		return st.IPCConnections
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetObject(id); !errors.Is(err, ErrClosed) {
		t.Fatalf("get after close: %v", err)
	}
	if _, _, err := b.Retain([]ids.ObjectID{bid}); !errors.Is(err, ErrClosed) {
		t.Fatalf("retain after close: %v", err)
	}
	if conns() != 2 {
		t.Fatalf("%d connections: the closed client's must wait for its lease", conns())
	}
	if string(views[0]) != "still here" {
		t.Fatalf("view %q after close", views[0])
	}
	if err := lease.Release(); err != nil {
		t.Fatal(err)
	}
	// The daemon notices the disconnect on its own time.
	for deadline := time.Now().Add(10 * time.Second); conns() != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections after the last lease", conns())
		}
	}
	if err := b.Close(); err != nil { // still idempotent
		t.Fatal(err)
	}
}

func TestLeasesFromManyGoroutines(t *testing.T) {
	srv := startServer(t, 16<<20)
	a, b := connect(t, srv), connect(t, srv)
	id, bid := put(t, a, []byte("x"))
	if _, err := b.GetObject(id); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				l, _, err := b.Retain([]ids.ObjectID{bid})
				if err != nil {
					t.Error(err)
					return
				}
				if err := l.Release(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if n := b.Stats().Holds; n != 0 {
		t.Fatalf("%d leases left", n)
	}
	if _, _, err := b.BlobPointer(bid); err != nil {
		t.Fatalf("the get's own reference was lost: %v", err)
	}
}

func TestIsSharedMemory(t *testing.T) {
	srv := startServer(t, 16<<20)
	c := connect(t, srv)
	_, buf, err := c.CreateBuffer(128)
	if err != nil {
		t.Fatal(err)
	}
	local := make([]byte, 8)
	if !IsSharedMemory(uintptr(unsafe.Pointer(&buf[127]))) || IsSharedMemory(uintptr(unsafe.Pointer(&local[0]))) ||
		IsSharedMemory(0) {
		t.Fatal("IsSharedMemory is wrong")
	}
}
