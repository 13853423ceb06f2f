package peer

import (
	"bytes"
	"errors"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
)

func TestFetch(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sizes   []int
		streams int
	}{
		{"one small", []int{100}, 4},
		{"empty blob", []int{0, 5}, 4},
		{"below pooling threshold", []int{1024, 1025}, 4},
		{"chunk edges", []int{DefaultChunkSize - 1, DefaultChunkSize, DefaultChunkSize + 1}, 4},
		{"many", []int{1, 2, 3, 4096, 70000, 300000, 17}, 4},
		{"split over streams", []int{5 << 20, 20<<20 + 12345, 3}, 4},
		{"split, one stream allowed", []int{20<<20 + 7}, 1},
		{"split, three streams", []int{30 << 20}, 3},
	} {
		for _, mode := range []struct {
			name     string
			rawAbove int64
		}{{"raw", 0}, {"chunks", -1}} {
			t.Run(tc.name+"/"+mode.name, func(t *testing.T) {
				src, sink := newFakeSource(), newFakeSink()
				var want [][]byte
				var req []ids.ObjectID
				for i, n := range tc.sizes {
					b := pattern(byte(i), n)
					src.put(blobID(i), b)
					want = append(want, b)
					req = append(req, blobID(i))
				}
				s := startServer(t, ServerConfig{RawAbove: mode.rawAbove}, src, nil)
				c := newClient(t, ClientConfig{MaxStreams: tc.streams}, sink)
				got, err := c.Fetch(fetchCtx(t), s.Addr(), req)
				if err != nil {
					t.Fatal(err)
				}
				// Streams of at least RawAbove bytes use a raw data connection
				// unless it is turned off (every stream of these cases carries
				// at least RawAbove bytes when the whole does).
				total := 0
				for _, n := range tc.sizes {
					total += n
				}
				raw := s.rawServed.Load()
				if (raw > 0) != (total >= DefaultRawAbove && mode.rawAbove == 0) {
					t.Errorf("%d streams over raw data connections", raw)
				}
				if len(got) != len(req) {
					t.Fatalf("%d blobs back, want %d", len(got), len(req))
				}
				for i, lb := range got {
					if lb.Source != req[i] || lb.Size != uint64(tc.sizes[i]) || !lb.ID.IsBlob() {
						t.Errorf("blob %d: %+v", i, lb)
					}
					if !bytes.Equal(sink.get(lb.ID), want[i]) {
						t.Errorf("blob %d: bytes differ", i)
					}
				}
				checkClean(t, src, sink)
			})
		}
	}
}

// TestFetchSplitUsesStreams checks that a large fetch is really served by
// several streams, each pinning its blobs.
func TestFetchSplitUsesStreams(t *testing.T) {
	src, sink := newFakeSource(), newFakeSink()
	src.put(blobID(0), pattern(1, 40<<20))
	s := startServer(t, ServerConfig{}, src, nil)
	c := newClient(t, ClientConfig{MaxStreams: 4}, sink)
	if _, err := c.Fetch(fetchCtx(t), s.Addr(), []ids.ObjectID{blobID(0)}); err != nil {
		t.Fatal(err)
	}
	if n := src.total.Load(); n != 4 {
		t.Errorf("%d pins, want one per stream (4)", n)
	}
	checkClean(t, src, sink)
}

func TestFetchBadRequest(t *testing.T) {
	src, sink := newFakeSource(), newFakeSink()
	src.put(blobID(0), []byte("x"))
	s := startServer(t, ServerConfig{}, src, nil)
	c := newClient(t, ClientConfig{}, sink)
	for name, req := range map[string][]ids.ObjectID{
		"none":      nil,
		"duplicate": {blobID(0), blobID(0)},
		"not blob":  {ids.ObjectID(5)},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := c.Fetch(fetchCtx(t), s.Addr(), req)
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("err = %v, want ErrBadRequest", err)
			}
		})
	}
	if _, err := c.Fetch(fetchCtx(t), "", []ids.ObjectID{blobID(0)}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("empty endpoint: err = %v", err)
	}
	checkClean(t, src, sink)
}

func TestFetchNotFound(t *testing.T) {
	src, sink := newFakeSource(), newFakeSink()
	src.put(blobID(0), []byte("here"))
	s := startServer(t, ServerConfig{}, src, nil)
	c := newClient(t, ClientConfig{}, sink)
	_, err := c.Fetch(fetchCtx(t), s.Addr(), []ids.ObjectID{blobID(0), blobID(1)})
	if !errors.Is(err, ErrObjectNotExists) {
		t.Fatalf("err = %v, want ErrObjectNotExists", err)
	}
	checkClean(t, src, sink)
	if sink.committed.Load() != 0 {
		t.Fatal("something was committed")
	}
	// The blob that exists is still fetchable on the same client.
	got, err := c.Fetch(fetchCtx(t), s.Addr(), []ids.ObjectID{blobID(0)})
	if err != nil || string(sink.get(got[0].ID)) != "here" {
		t.Fatalf("retry: %v", err)
	}
	checkClean(t, src, sink)
}

func TestServerConfigErrors(t *testing.T) {
	src := newFakeSource()
	for name, cfg := range map[string]ServerConfig{
		"chunk too big": {ChunkSize: MaxChunkSize + 1},
		"tls no key":    {TLS: TLSFiles{Cert: "x"}},
		"small window":  {StreamWindow: 1000},
		"negative buf":  {BufferSize: -1},
	} {
		if _, err := NewServer(cfg, src); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := NewServer(ServerConfig{}, nil); err == nil {
		t.Error("nil source: no error")
	}
	if _, err := NewClient(ClientConfig{ConnWindow: 1}, newFakeSink()); err == nil {
		t.Error("client with a small window: no error")
	}
	if _, err := NewClient(ClientConfig{}, nil); err == nil {
		t.Error("nil sink: no error")
	}
}
