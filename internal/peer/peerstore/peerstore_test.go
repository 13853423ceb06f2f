package peerstore

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/peer"
	"github.com/v6d-io/v6d-go/internal/peer/peertest"
	"github.com/v6d-io/v6d-go/internal/status"
	"github.com/v6d-io/v6d-go/internal/store"
)

// The peer service between two real stores through these adapters: the
// bytes arrive, and each fault leaves the destination store's own usage
// figure where it was. The daemon-level tests (owner killed, connection
// dropped under a real migrate) are in internal/server.

func newStore(t *testing.T, size uint64) *store.Store {
	t.Helper()
	s, err := store.New(store.Config{Size: size, InstanceID: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func of(s *store.Store) func() *store.Store { return func() *store.Store { return s } }

// putBlob stores b as a sealed blob of s.
func putBlob(t *testing.T, s *store.Store, b []byte) ids.ObjectID {
	t.Helper()
	ss := s.NewSession()
	defer ss.Close()
	ext, err := ss.CreateBuffer(uint64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	copy(ss.Bytes(ext), b)
	if err := ss.Seal(ext.ID); err != nil {
		t.Fatal(err)
	}
	return ext.ID
}

func readBlob(t *testing.T, s *store.Store, id ids.ObjectID) []byte {
	t.Helper()
	views, unpin, err := Source{of(s)}.Pin([]ids.ObjectID{id})
	if err != nil {
		t.Fatal(err)
	}
	defer unpin()
	return append([]byte(nil), views[0]...)
}

func used(s *store.Store) uint64 { u, _ := s.Usage(); return u }

// serve starts a peer server for src on a free loopback port.
func serve(t *testing.T, src peer.Source) *peer.Server {
	t.Helper()
	srv, err := peer.Listen(peer.ServerConfig{}, src)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// TestNoStore: before the store exists, both sides refuse with ErrNoStore.
func TestNoStore(t *testing.T) {
	none := func() *store.Store { return nil }
	if _, _, err := (Source{none}).Pin([]ids.ObjectID{ids.EmptyBlob}); !errors.Is(err, ErrNoStore) {
		t.Fatalf("Pin: %v", err)
	}
	if _, err := (Sink{none}).Begin(); !errors.Is(err, ErrNoStore) {
		t.Fatalf("Begin: %v", err)
	}
}

// TestStoreToStore fetches blobs between two real stores, then provokes the
// faults and checks the destination store's usage is back where it was.
func TestStoreToStore(t *testing.T) {
	owner := newStore(t, 256<<20)
	dest := newStore(t, 96<<20)
	sizes := []int{1, 4096, 3<<20 + 5, 40 << 20}
	var req []ids.ObjectID
	var want [][]byte
	for i, n := range sizes {
		b := peertest.Pattern(byte(i+20), n)
		want = append(want, b)
		req = append(req, putBlob(t, owner, b))
	}
	src := Source{of(owner)}
	srv := serve(t, src)
	proxy, err := peertest.NewProxy(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	c, err := peer.NewClient(peer.ClientConfig{MaxStreams: 4}, Sink{of(dest)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })

	got, err := c.Fetch(peertest.Context(t), srv.Addr(), req)
	if err != nil {
		t.Fatal(err)
	}
	var total uint64
	for i, lb := range got {
		if string(readBlob(t, dest, lb.ID)) != string(want[i]) {
			t.Fatalf("blob %d differs", i)
		}
		total += lb.Size
	}
	base := used(dest)
	if base < total {
		t.Fatalf("destination uses %d bytes, fetched %d", base, total)
	}

	t.Run("out of memory", func(t *testing.T) {
		// 96 MiB arena, ~44 MiB used: a second copy of 40 MiB + 40 MiB fails.
		_, err := c.Fetch(peertest.Context(t), srv.Addr(), []ids.ObjectID{req[3], putBlob(t, owner, peertest.Pattern(1, 40<<20))})
		if status.CodeOf(err) != status.NotEnoughMemory {
			t.Fatalf("err = %v, want NotEnoughMemory", err)
		}
		if u := used(dest); u != base {
			t.Fatalf("destination uses %d bytes after the failure, %d before", u, base)
		}
	})

	t.Run("connection dropped", func(t *testing.T) {
		proxy.After(4<<20, proxy.Cut)
		if _, err := c.Fetch(peertest.Context(t), proxy.Addr(), req); !errors.Is(err, peer.ErrUnavailable) {
			t.Fatalf("err = %v", err)
		}
		if u := used(dest); u != base {
			t.Fatalf("destination uses %d bytes after the failure, %d before", u, base)
		}
		// The connection is back: the same client fetches through it.
		got, err := c.Fetch(peertest.Context(t), proxy.Addr(), req[2:3])
		if err != nil || string(readBlob(t, dest, got[0].ID)) != string(want[2]) {
			t.Fatalf("retry through the proxy: %v", err)
		}
		dest.Delete([]ids.ObjectID{got[0].ID}, store.DeleteOptions{})
	})

	t.Run("deleted on the owner meanwhile", func(t *testing.T) {
		victim := putBlob(t, owner, peertest.Pattern(9, 40<<20))
		ownerBase := used(owner)
		var armed atomic.Bool
		armed.Store(true)
		hook := &hookSource{Source: src, after: func() {
			if armed.CompareAndSwap(true, false) {
				owner.Delete([]ids.ObjectID{victim}, store.DeleteOptions{})
			}
		}}
		_, err := c.Fetch(peertest.Context(t), serve(t, hook).Addr(), []ids.ObjectID{victim})
		if !errors.Is(err, peer.ErrObjectNotExists) {
			t.Fatalf("err = %v, want ErrObjectNotExists", err)
		}
		if u := used(dest); u != base {
			t.Fatalf("destination uses %d bytes after the failure, %d before", u, base)
		}
		// Once the first stream's pin is released, the owner frees the blob.
		peertest.Eventually(t, "owner frees the deleted blob", func() bool { return used(owner) == ownerBase-40<<20 })
	})

	// Retry after all that.
	got2, err := c.Fetch(peertest.Context(t), srv.Addr(), req[:2])
	if err != nil || string(readBlob(t, dest, got2[1].ID)) != string(want[1]) {
		t.Fatalf("retry: %v", err)
	}
}

// hookSource runs after once each Pin succeeded.
type hookSource struct {
	peer.Source
	after func()
}

func (h *hookSource) Pin(blobs []ids.ObjectID) ([][]byte, func(), error) {
	v, u, err := h.Source.Pin(blobs)
	if err == nil {
		h.after()
	}
	return v, u, err
}

// A fetch of a blob the owner spilled loads it back first: the peer gets
// its bytes.
func TestSourceLoadsSpilledBlobs(t *testing.T) {
	s, err := store.New(store.Config{Size: 1 << 20, InstanceID: 1, SpillPath: t.TempDir() + "/spill"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	want := make([]byte, 100<<10)
	for i := range want {
		want[i] = byte(i * 13)
	}
	id := putBlob(t, s, want)
	ss := s.NewSession()
	defer ss.Close()
	if err := ss.Evict([]ids.ObjectID{id}); err != nil {
		t.Fatal(err)
	}
	if st := s.SpillStats(); st.Blobs != 1 {
		t.Fatalf("not spilled: %+v", st)
	}
	filler := make([]byte, len(want)) // reuses the memory the spill freed
	for i := range filler {
		filler[i] = 0xff
	}
	putBlob(t, s, filler)
	if got := readBlob(t, s, id); string(got) != string(want) {
		t.Fatal("the fetch of a spilled blob read other bytes")
	}
	if st := s.SpillStats(); st.Blobs != 0 || st.Loaded != 1 {
		t.Fatalf("not loaded: %+v", st)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
