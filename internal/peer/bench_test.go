package peer

import (
	"context"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/v6d-io/v6d-go/internal/ids"
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
		b = prefault(int(size))
		t.s.bufs[size] = b
	}
	return b, nil
}

func (benchTransfer) Commit() ([]LocalBlob, error) { return []LocalBlob{{}}, nil }
func (benchTransfer) Abort()                       {}

func prefault(n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 4096 {
		b[i] = 1
	}
	return b
}

// cpuTime is the user+system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuMeter reports the CPU time of both ends per GB moved (cpu-ms/GB):
// unlike MB/s it hardly moves when other processes load the machine, so
// it is the figure to compare between variants on a shared machine.
type cpuMeter struct{ start time.Duration }

func startCPU(b *testing.B) *cpuMeter {
	b.ResetTimer()
	return &cpuMeter{start: cpuTime()}
}

func (m *cpuMeter) stop(b *testing.B, size int) {
	used := cpuTime() - m.start
	b.ReportMetric(float64(used.Milliseconds())/(float64(b.N)*float64(size)/1e9), "cpu-ms/GB")
}

var benchSizes = []struct {
	name string
	size int
}{{"1MiB", 1 << 20}, {"64MiB", 64 << 20}, {"1GiB", 1 << 30}}

// BenchmarkFetch measures Fetch over loopback against the physical floors
// of the same run: a raw loopback TCP copy of the same bytes into a
// pre-faulted buffer, and memcpy. Compare MB/s within one run only.
//
//	go test -run '^$' -bench Fetch -benchtime 3x ./internal/peer/
func BenchmarkFetch(b *testing.B) {
	for _, sz := range benchSizes {
		if testing.Short() && sz.size > 64<<20 {
			continue
		}
		src := newFakeSource()
		data := prefault(sz.size)
		src.put(blobID(0), data)
		dst := prefault(sz.size)
		req := []ids.ObjectID{blobID(0)}

		b.Run(sz.name+"/memcpy", func(b *testing.B) {
			b.SetBytes(int64(sz.size))
			m := startCPU(b)
			for b.Loop() {
				copy(dst, data)
			}
			m.stop(b, sz.size)
		})
		b.Run(sz.name+"/tcp", func(b *testing.B) { benchTCP(b, data, dst) })
		for _, streams := range []int{1, 2, 4} {
			b.Run(fmt.Sprintf("%s/grpc-streams=%d", sz.name, streams), func(b *testing.B) {
				s, err := Listen(ServerConfig{SplitAbove: 8 << 20}, src)
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
				m := startCPU(b)
				for b.Loop() {
					if _, err := c.Fetch(ctx, s.Addr(), req); err != nil {
						b.Fatal(err)
					}
				}
				m.stop(b, sz.size)
			})
		}
	}
}

// benchTCP copies data over one loopback TCP connection into dst: the
// sender writes it in one call, the receiver reads it with io.ReadFull; a
// one-byte acknowledgement ends each round, as Fetch's end of stream does.
func benchTCP(b *testing.B, data, dst []byte) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = lis.Close() }()
	go func() {
		conn, err := lis.Accept()
		if err != nil {
			return
		}
		defer func() { _ = conn.Close() }()
		var req [1]byte
		for {
			if _, err := io.ReadFull(conn, req[:]); err != nil {
				return
			}
			if _, err := conn.Write(data); err != nil {
				return
			}
		}
	}()
	conn, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	round := func() {
		if _, err := conn.Write([]byte{1}); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(conn, dst); err != nil {
			b.Fatal(err)
		}
	}
	round()
	b.SetBytes(int64(len(data)))
	m := startCPU(b)
	for b.Loop() {
		round()
	}
	m.stop(b, len(data))
}

// BenchmarkFetchSmall measures the latency of fetching one 64-byte blob (one
// round trip: request out; header, chunk and status back) against a raw
// loopback TCP round trip of the same payload, in the same run.
func BenchmarkFetchSmall(b *testing.B) {
	const size = 64
	src := newFakeSource()
	data := pattern(5, size)
	src.put(blobID(0), data)
	b.Run("tcp", func(b *testing.B) { benchTCP(b, data, make([]byte, size)) })
	b.Run("grpc", func(b *testing.B) {
		s, err := Listen(ServerConfig{}, src)
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
