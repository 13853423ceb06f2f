package peer

import (
	"context"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/peer/peertest"
)

// benchSink hands out one pre-faulted buffer per size, again and again, so
// the benchmark measures the transfer and not first-touch page faults (which
// the daemon avoids with --reserve-memory and by reusing freed memory).
type benchSink struct{ bufs map[uint64][]byte }

func (s *benchSink) Begin() (Transfer, error) { return benchTransfer{s}, nil }

type benchTransfer struct{ s *benchSink }

func (t benchTransfer) Alloc(_ ids.ObjectID, size uint64) ([]byte, error) {
	b, ok := t.s.bufs[size]
	if !ok {
		b = peertest.Prefault(int(size))
		t.s.bufs[size] = b
	}
	return b, nil
}

func (benchTransfer) Commit() ([]LocalBlob, error) { return []LocalBlob{{}}, nil }
func (benchTransfer) Abort()                       {}

var benchSizes = []struct {
	name string
	size int
}{{"1MiB", 1 << 20}, {"64MiB", 64 << 20}, {"1GiB", 1 << 30}}

// BenchmarkFetch measures Fetch over loopback against the physical floors
// of the same run: a raw loopback TCP copy of the same bytes into a
// pre-faulted buffer, and memcpy. Compare MB/s within one run only.
// grpc-streams=N is the default data path (raw data connections above
// RawAbove), chunks-streams=2 the bytes inside gRPC messages.
//
//	go test -run '^$' -bench Fetch -benchtime 3x ./internal/peer/
func BenchmarkFetch(b *testing.B) {
	for _, sz := range benchSizes {
		if testing.Short() && sz.size > 64<<20 {
			continue
		}
		// Made on first use, so that a -bench filter leaving out a size
		// does not pay for faulting its buffers in.
		var src *fakeSource
		var data, dst []byte
		prep := func() {
			if src == nil {
				src = newFakeSource()
				data = peertest.Prefault(sz.size)
				src.put(blobID(0), data)
				dst = peertest.Prefault(sz.size)
			}
		}
		req := []ids.ObjectID{blobID(0)}

		b.Run(sz.name+"/memcpy", func(b *testing.B) { prep(); peertest.BenchMemcpy(b, dst, data) })
		b.Run(sz.name+"/tcp", func(b *testing.B) { prep(); peertest.BenchTCP(b, data, dst) })
		for _, v := range []struct {
			name     string
			streams  int
			rawAbove int64
		}{{"grpc-streams=1", 1, 0}, {"grpc-streams=2", 2, 0}, {"grpc-streams=4", 4, 0}, {"chunks-streams=2", 2, -1}} {
			streams := v.streams
			b.Run(sz.name+"/"+v.name, func(b *testing.B) {
				prep()
				s, err := Listen(ServerConfig{SplitAbove: 8 << 20, RawAbove: v.rawAbove}, src)
				if err != nil {
					b.Fatal(err)
				}
				defer func() { _ = s.Close() }()
				c, err := NewClient(ClientConfig{MaxStreams: streams}, &benchSink{bufs: map[uint64][]byte{uint64(sz.size): dst}})
				if err != nil {
					b.Fatal(err)
				}
				defer func() { _ = c.Close() }()
				ctx := context.Background()
				if _, err := c.Fetch(ctx, s.Addr(), req); err != nil { // connect, warm up
					b.Fatal(err)
				}
				b.SetBytes(int64(sz.size))
				m := peertest.StartCPU(b)
				for b.Loop() {
					if _, err := c.Fetch(ctx, s.Addr(), req); err != nil {
						b.Fatal(err)
					}
				}
				m.Stop(b, sz.size)
			})
		}
	}
}

// BenchmarkFetchSmall measures the latency of fetching one 64-byte blob (one
// round trip: request out; header, chunk and status back) against a raw
// loopback TCP round trip of the same payload, in the same run.
func BenchmarkFetchSmall(b *testing.B) {
	const size = 64
	src := newFakeSource()
	data := pattern(5, size)
	src.put(blobID(0), data)
	b.Run("tcp", func(b *testing.B) { peertest.BenchTCP(b, data, make([]byte, size)) })
	// grpc is the default path (bytes in gRPC messages below RawAbove);
	// grpc-raw forces a raw data connection, to show its fixed cost (a TCP
	// connect and the ticket) against the round trip.
	for _, v := range []struct {
		name     string
		rawAbove int64
	}{{"grpc", 0}, {"grpc-raw", 1}} {
		b.Run(v.name, func(b *testing.B) {
			s, err := Listen(ServerConfig{RawAbove: v.rawAbove}, src)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			c, err := NewClient(ClientConfig{}, &benchSink{bufs: map[uint64][]byte{}})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = c.Close() }()
			ctx := context.Background()
			req := []ids.ObjectID{blobID(0)}
			if _, err := c.Fetch(ctx, s.Addr(), req); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := c.Fetch(ctx, s.Addr(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
