package peer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/peer/peertest"
)

// fakeSource is a Source over Go slices that counts pins.
type fakeSource struct {
	mu    sync.Mutex
	blobs map[ids.ObjectID][]byte
	pins  atomic.Int64 // pins held now
	total atomic.Int64 // Pin calls that succeeded
	// afterPin, when set, runs after every successful Pin (under no lock).
	afterPin func(n int64)
}

func newFakeSource() *fakeSource { return &fakeSource{blobs: map[ids.ObjectID][]byte{}} }

func (s *fakeSource) put(id ids.ObjectID, b []byte) {
	s.mu.Lock()
	s.blobs[id] = b
	s.mu.Unlock()
}

func (s *fakeSource) del(id ids.ObjectID) {
	s.mu.Lock()
	delete(s.blobs, id)
	s.mu.Unlock()
}

func (s *fakeSource) Pin(blobs []ids.ObjectID) ([][]byte, func(), error) {
	s.mu.Lock()
	views := make([][]byte, len(blobs))
	for i, id := range blobs {
		b, ok := s.blobs[id]
		if !ok {
			s.mu.Unlock()
			return nil, nil, fmt.Errorf("%w: %v", ErrObjectNotExists, id)
		}
		views[i] = b
	}
	s.mu.Unlock()
	s.pins.Add(1)
	n := s.total.Add(1)
	var once atomic.Bool
	unpin := func() {
		if !once.CompareAndSwap(false, true) {
			panic("unpin called twice")
		}
		s.pins.Add(-1)
	}
	if s.afterPin != nil {
		s.afterPin(n)
	}
	return views, unpin, nil
}

var errOOM = errors.New("fake sink: not enough memory")

// fakeSink is a Sink that counts the bytes it has allocated and not freed.
type fakeSink struct {
	limit     int64 // 0: no limit
	live      atomic.Int64
	committed atomic.Int64
	open      atomic.Int64 // transfers neither committed nor aborted
	mu        sync.Mutex
	stored    map[ids.ObjectID][]byte
	next      atomic.Uint64
}

func newFakeSink() *fakeSink { return &fakeSink{stored: map[ids.ObjectID][]byte{}} }

func (s *fakeSink) Begin() (Transfer, error) {
	s.open.Add(1)
	return &fakeTransfer{s: s}, nil
}

type fakeTransfer struct {
	s     *fakeSink
	srcs  []ids.ObjectID
	bufs  [][]byte
	ended bool
}

func (t *fakeTransfer) Alloc(src ids.ObjectID, size uint64) ([]byte, error) {
	if t.ended {
		panic("Alloc after end")
	}
	if t.s.limit > 0 && t.s.live.Load()+int64(size) > t.s.limit {
		return nil, errOOM
	}
	t.s.live.Add(int64(size))
	b := make([]byte, size)
	t.srcs = append(t.srcs, src)
	t.bufs = append(t.bufs, b)
	return b, nil
}

func (t *fakeTransfer) Commit() ([]LocalBlob, error) {
	if t.ended {
		panic("Commit after end")
	}
	t.ended = true
	t.s.open.Add(-1)
	out := make([]LocalBlob, len(t.bufs))
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	for i, b := range t.bufs {
		id := ids.ObjectID(t.s.next.Add(1)) | ids.BlobBit
		t.s.stored[id] = b
		t.s.committed.Add(int64(len(b)))
		out[i] = LocalBlob{Source: t.srcs[i], ID: id, Size: uint64(len(b))}
	}
	return out, nil
}

func (t *fakeTransfer) Abort() {
	if t.ended {
		panic("Abort after end")
	}
	t.ended = true
	t.s.open.Add(-1)
	for _, b := range t.bufs {
		t.s.live.Add(-int64(len(b)))
	}
	t.bufs = nil
}

func (s *fakeSink) get(id ids.ObjectID) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stored[id]
}

// checkClean fails the test unless every pin was released and the sink holds
// exactly what was committed, with no transfer left open.
func checkClean(t *testing.T, src *fakeSource, sink *fakeSink) {
	t.Helper()
	eventually(t, "pins released", func() bool { return src.pins.Load() == 0 })
	if n := sink.open.Load(); n != 0 {
		t.Errorf("%d transfers left open", n)
	}
	if live, c := sink.live.Load(), sink.committed.Load(); live != c {
		t.Errorf("sink holds %d bytes, committed %d: %d bytes leaked", live, c, live-c)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	peertest.Eventually(t, what, cond)
}

func pattern(seed byte, n int) []byte { return peertest.Pattern(seed, n) }

func blobID(i int) ids.ObjectID { return ids.ObjectID(0x1000+i) | ids.BlobBit }

// startServer serves src on a free loopback port (through wrap, if set) and
// closes it at the end of the test.
func startServer(t *testing.T, cfg ServerConfig, src Source, wrap func(net.Listener) net.Listener) *Server {
	t.Helper()
	s, err := NewServer(cfg, src)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		lis = wrap(lis)
	}
	go func() { _ = s.Serve(lis) }()
	eventually(t, "server address", func() bool { return s.Addr() != "" })
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newClient(t *testing.T, cfg ClientConfig, sink Sink) *Client {
	t.Helper()
	c, err := NewClient(cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func fetchCtx(t *testing.T) context.Context { return peertest.Context(t) }
