package peertest

import (
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// The physical floors the transfer benchmarks compare against in the same
// run (docs/cluster-data-plane.md, "Speed"): memcpy and a raw loopback TCP
// copy, and a CPU meter that reports cpu-ms/GB.

// Prefault returns n bytes with every page touched once, so a benchmark
// measures copies and not first-touch page faults.
func Prefault(n int) []byte {
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

// CPUMeter reports the CPU time of the whole process (both ends of an
// in-process transfer) per GB moved, as cpu-ms/GB: unlike MB/s it hardly
// moves when other processes load the machine, so it is the figure to
// compare between variants on a shared machine.
type CPUMeter struct{ start time.Duration }

// StartCPU resets b's timer and starts a meter.
func StartCPU(b *testing.B) *CPUMeter {
	b.ResetTimer()
	return &CPUMeter{start: cpuTime()}
}

// Stop reports cpu-ms/GB for b.N rounds of size bytes.
func (m *CPUMeter) Stop(b *testing.B, size int) {
	used := cpuTime() - m.start
	b.ReportMetric(float64(used.Milliseconds())/(float64(b.N)*float64(size)/1e9), "cpu-ms/GB")
}

// BenchMemcpy measures copy(dst, data).
func BenchMemcpy(b *testing.B, dst, data []byte) {
	b.SetBytes(int64(len(data)))
	m := StartCPU(b)
	for b.Loop() {
		copy(dst, data)
	}
	m.Stop(b, len(data))
}

// BenchTCP copies data over one loopback TCP connection into dst: the
// sender writes it in one call, the receiver reads it with io.ReadFull; a
// one-byte request starts each round, as a fetch's request does.
func BenchTCP(b *testing.B, data, dst []byte) {
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
	m := StartCPU(b)
	for b.Loop() {
		round()
	}
	m.Stop(b, len(data))
}
