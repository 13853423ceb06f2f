package peer

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/shm"
	"github.com/v6d-io/v6d-go/internal/status"
	"github.com/v6d-io/v6d-go/internal/store"
)

// These adapters are the blueprint of the daemon's: a Source and a Sink over
// a real internal/store, reaching the arena through a mapping of its memfd as
// clients do. Tests below run the peer service between two real stores and
// check the stores' own usage figures.

type arenaView struct {
	once sync.Once
	m    *shm.Mapping
	err  error
}

func (v *arenaView) bytes(fd int, ext store.Extent, writable bool) ([]byte, error) {
	v.once.Do(func() { v.m, v.err = shm.Map(fd, ext.MapSize, writable) })
	if v.err != nil {
		return nil, v.err
	}
	return v.m.Bytes()[ext.Offset : ext.Offset+ext.Size : ext.Offset+ext.Size], nil
}

type storeSource struct {
	s    *store.Store
	view arenaView
}

// Pin takes a session reference on every blob: a delete meanwhile hides the
// blob but frees its memory only when the session releases it.
func (src *storeSource) Pin(blobs []ids.ObjectID) ([][]byte, func(), error) {
	ss := src.s.NewSession()
	exts, err := ss.GetBuffers(blobs, false)
	if err != nil {
		ss.Close()
		if status.CodeOf(err) == status.ObjectNotExists {
			return nil, nil, fmt.Errorf("%w: %w", ErrObjectNotExists, err)
		}
		return nil, nil, err
	}
	views := make([][]byte, len(blobs))
	for i, ext := range exts {
		if ext.Size == 0 {
			continue
		}
		if views[i], err = src.view.bytes(src.s.ArenaReadOnlyFd(), ext, false); err != nil {
			ss.Close()
			return nil, nil, err
		}
	}
	return views, ss.Close, nil
}

type storeSink struct {
	s    *store.Store
	view arenaView
}

func (k *storeSink) Begin() (Transfer, error) {
	return &storeTransfer{k: k, ss: k.s.NewSession()}, nil
}

type storeTransfer struct {
	k    *storeSink
	ss   *store.Session
	srcs []ids.ObjectID
	exts []store.Extent
}

func (t *storeTransfer) Alloc(src ids.ObjectID, size uint64) ([]byte, error) {
	ext, err := t.ss.CreateBuffer(size)
	if err != nil {
		return nil, err
	}
	t.srcs = append(t.srcs, src)
	t.exts = append(t.exts, ext)
	if size == 0 {
		return []byte{}, nil
	}
	return t.k.view.bytes(t.k.s.ArenaFd(), ext, true)
}

// Commit seals every copy; if one fails, the sealed ones are deleted and
// closing the session frees the rest, so a failed Commit leaves nothing.
func (t *storeTransfer) Commit() ([]LocalBlob, error) {
	defer t.ss.Close()
	out := make([]LocalBlob, len(t.exts))
	var sealed []ids.ObjectID
	for i, ext := range t.exts {
		if ext.ID != ids.EmptyBlob {
			if err := t.ss.Seal(ext.ID); err != nil {
				t.k.s.Delete(sealed, store.DeleteOptions{})
				return nil, err
			}
			sealed = append(sealed, ext.ID)
		}
		out[i] = LocalBlob{Source: t.srcs[i], ID: ext.ID, Size: ext.Size}
	}
	return out, nil
}

// Abort: closing the session frees every unsealed buffer it created.
func (t *storeTransfer) Abort() { t.ss.Close() }

func newStore(t *testing.T, size uint64) *store.Store {
	t.Helper()
	s, err := store.New(store.Config{Size: size, InstanceID: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// putBlob stores b as a sealed blob of s.
func putBlob(t *testing.T, s *store.Store, b []byte) ids.ObjectID {
	t.Helper()
	ss := s.NewSession()
	defer ss.Close()
	ext, err := ss.CreateBuffer(uint64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	m, err := shm.Map(s.ArenaFd(), ext.MapSize, true)
	if err != nil {
		t.Fatal(err)
	}
	copy(m.Bytes()[ext.Offset:], b)
	_ = m.Close()
	if err := ss.Seal(ext.ID); err != nil {
		t.Fatal(err)
	}
	return ext.ID
}

func readBlob(t *testing.T, s *store.Store, id ids.ObjectID) []byte {
	t.Helper()
	src := &storeSource{s: s}
	views, unpin, err := src.Pin([]ids.ObjectID{id})
	if err != nil {
		t.Fatal(err)
	}
	defer unpin()
	return append([]byte(nil), views[0]...)
}

func used(s *store.Store) uint64 { u, _ := s.Usage(); return u }

// TestStoreToStore fetches blobs between two real stores, then provokes the
// faults and checks the destination store's usage is back where it was.
func TestStoreToStore(t *testing.T) {
	owner := newStore(t, 256<<20)
	dest := newStore(t, 96<<20)
	sizes := []int{1, 4096, 3<<20 + 5, 40 << 20}
	var req []ids.ObjectID
	var want [][]byte
	for i, n := range sizes {
		b := pattern(byte(i+20), n)
		want = append(want, b)
		req = append(req, putBlob(t, owner, b))
	}
	src := &storeSource{s: owner}
	srv := startServer(t, ServerConfig{}, src, nil)
	c := newClient(t, ClientConfig{MaxStreams: 4}, &storeSink{s: dest})

	got, err := c.Fetch(fetchCtx(t), srv.Addr(), req)
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
		_, err := c.Fetch(fetchCtx(t), srv.Addr(), []ids.ObjectID{req[3], putBlob(t, owner, pattern(1, 40<<20))})
		if status.CodeOf(err) != status.NotEnoughMemory {
			t.Fatalf("err = %v, want NotEnoughMemory", err)
		}
		if u := used(dest); u != base {
			t.Fatalf("destination uses %d bytes after the failure, %d before", u, base)
		}
	})

	t.Run("connection dropped", func(t *testing.T) {
		srv2 := startServer(t, ServerConfig{}, src, func(l net.Listener) net.Listener {
			return &faultListener{Listener: l, after: 4 << 20, once: true, onBytes: func(c *faultConn) { _ = c.Close() }}
		})
		if _, err := c.Fetch(fetchCtx(t), srv2.Addr(), req); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("err = %v", err)
		}
		if u := used(dest); u != base {
			t.Fatalf("destination uses %d bytes after the failure, %d before", u, base)
		}
	})

	t.Run("deleted on the owner meanwhile", func(t *testing.T) {
		victim := putBlob(t, owner, pattern(9, 40<<20))
		ownerBase := used(owner)
		var armed atomic.Bool
		armed.Store(true)
		hook := &hookSource{Source: src, after: func() {
			if armed.CompareAndSwap(true, false) {
				owner.Delete([]ids.ObjectID{victim}, store.DeleteOptions{})
			}
		}}
		srv3 := startServer(t, ServerConfig{}, hook, nil)
		_, err := c.Fetch(fetchCtx(t), srv3.Addr(), []ids.ObjectID{victim})
		if !errors.Is(err, ErrObjectNotExists) {
			t.Fatalf("err = %v, want ErrObjectNotExists", err)
		}
		if u := used(dest); u != base {
			t.Fatalf("destination uses %d bytes after the failure, %d before", u, base)
		}
		// Once the first stream's pin is released, the owner frees the blob.
		eventually(t, "owner frees the deleted blob", func() bool { return used(owner) == ownerBase-40<<20 })
	})

	// Retry after all that.
	got2, err := c.Fetch(fetchCtx(t), srv.Addr(), req[:2])
	if err != nil || string(readBlob(t, dest, got2[1].ID)) != string(want[1]) {
		t.Fatalf("retry: %v", err)
	}
}

// hookSource runs after once each Pin succeeded.
type hookSource struct {
	Source
	after func()
}

func (h *hookSource) Pin(blobs []ids.ObjectID) ([][]byte, func(), error) {
	v, u, err := h.Source.Pin(blobs)
	if err == nil {
		h.after()
	}
	return v, u, err
}
