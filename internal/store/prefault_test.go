package store

import (
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// resident reports, for each page of [off, off+n) of the store's arena,
// whether it is in memory.
func resident(t *testing.T, s *Store, off, n uint64) []bool {
	t.Helper()
	vec := make([]byte, (n+4095)/4096)
	b := s.arena.Bytes()[off : off+n]
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(n), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	out := make([]bool, len(vec))
	for i, v := range vec {
		out[i] = v&1 != 0
	}
	return out
}

// waitPrefaulted waits until the pre-fault reached want, failing after a
// generous bound (the machine may be busy; the figure itself is a benchmark).
func waitPrefaulted(t *testing.T, s *Store, want uint64) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); s.Prefaulted() < want; {
		if time.Now().After(deadline) {
			t.Fatalf("pre-fault reached %d, want %d", s.Prefaulted(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPrefaultAhead(t *testing.T) {
	const ahead = 4 << 20
	s, err := New(Config{Size: 16 << 20, PrefaultAhead: ahead})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	defer checkInvariants(t, s)

	waitPrefaulted(t, s, HeaderSize+ahead)
	time.Sleep(10 * time.Millisecond) // it must stop there, not run on
	if got := s.Prefaulted(); got != HeaderSize+ahead {
		t.Fatalf("pre-faulted end %d, want %d", got, HeaderSize+ahead)
	}
	for i, r := range resident(t, s, HeaderSize, ahead) {
		if !r {
			t.Fatalf("page %d of the pre-faulted range is not resident", i)
		}
	}
	for i, r := range resident(t, s, HeaderSize+ahead+4096, 4<<20) {
		if r {
			t.Fatalf("page %d beyond the pre-faulted range is resident", i)
		}
	}

	// An allocation moves the high-water mark: the pre-fault follows, and
	// leaves what the client wrote alone.
	ss := s.NewSession()
	defer ss.Close()
	p, err := ss.CreateBuffer(6 << 20)
	if err != nil {
		t.Fatal(err)
	}
	data := s.arena.Bytes()[p.Offset : p.Offset+p.Size]
	for i := range data {
		data[i] = byte(i * 7)
	}
	waitPrefaulted(t, s, p.Offset+p.Size+ahead)
	for i := range data {
		if data[i] != byte(i*7) {
			t.Fatalf("byte %d changed under the pre-fault", i)
		}
	}

	// It never goes past the arena.
	if _, err := ss.CreateBuffer(8 << 20); err != nil {
		t.Fatal(err)
	}
	waitPrefaulted(t, s, s.arena.Size())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	<-s.prefaultDone // Close stopped it
}

func TestPrefaultOff(t *testing.T) {
	for _, cfg := range []Config{{Size: 1 << 20}, {Size: 1 << 20, PrefaultAhead: 1 << 20, Reserve: true}} {
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if s.prefaultDone != nil || s.Prefaulted() != 0 {
			t.Errorf("%+v: a pre-fault runs", cfg)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPrefaultAfterMemoryTrim(t *testing.T) {
	const ahead = 2 << 20
	s, err := New(Config{Size: 8 << 20, PrefaultAhead: ahead})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	waitPrefaulted(t, s, HeaderSize+ahead)
	if _, err := s.MemoryTrim(); err != nil {
		t.Fatal(err)
	}
	// The trim took the reserve back and the published end with it; the
	// pre-fault then makes it resident again.
	waitPrefaulted(t, s, HeaderSize+ahead)
	for i, r := range resident(t, s, HeaderSize, ahead) {
		if !r {
			t.Fatalf("page %d is not resident again after the trim", i)
		}
	}
}

// Small allocations do not wake the pre-fault each time: only when the
// high-water mark crosses a chunk boundary, and then it goes all the way.
func TestPrefaultWakesPerChunkNotPerAllocation(t *testing.T) {
	const ahead = 4 << 20
	s, err := New(Config{Size: 32 << 20, PrefaultAhead: ahead})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	waitPrefaulted(t, s, HeaderSize+ahead)
	ss := s.NewSession()
	defer ss.Close()
	runs := s.prefaultRuns.Load()
	for range 200 { // 200 x 4 KiB: no chunk boundary crossed
		if _, err := ss.CreateBuffer(4096); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond)
	if got := s.prefaultRuns.Load(); got != runs {
		t.Fatalf("200 small allocations ran the pre-fault %d times", got-runs)
	}
	p, err := ss.CreateBuffer(3 << 20) // crosses one
	if err != nil {
		t.Fatal(err)
	}
	waitPrefaulted(t, s, p.Offset+p.Size+ahead)
}
