package spin

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestParseRunning(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		okay bool
	}{
		{"0.50 0.40 0.30 3/250 12345\n", 3, true},
		{"4.99 3.68 4.60 12/194 8538\n", 12, true},
		{"0.50 0.40 0.30 /250 1\n", 0, false},
		{"0.50 0.40 0.30 3", 3, false},
		{"garbage", 0, false},
		{"", 0, false},
	} {
		n, ok := parseRunning([]byte(tc.in))
		if n != tc.n || ok != tc.okay {
			t.Errorf("parseRunning(%q) = %d, %v; want %d, %v", tc.in, n, ok, tc.n, tc.okay)
		}
	}
}

func TestPoll(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	if Poll(fds[0], 200*time.Microsecond) {
		t.Fatal("Poll reported data on an empty socket")
	}
	if _, err := unix.Write(fds[1], []byte{1}); err != nil {
		t.Fatal(err)
	}
	// With data there, Poll reports it unless no CPU is free (it then
	// does not look at all); the byte must still be there either way.
	got := Poll(fds[0], time.Millisecond)
	if !got && Idle() {
		t.Log("the machine got busy between Idle and Poll")
	}
	var b [1]byte
	if n, _, err := unix.Recvfrom(fds[0], b[:], unix.MSG_DONTWAIT); n != 1 || err != nil {
		t.Fatalf("the byte Poll saw is gone: %d, %v", n, err)
	}
	unix.Close(fds[1])
	if Poll(fds[0], 0) {
		t.Fatal("Poll with no time polled")
	}
}

// TestVerdictStands checks that a reading of the load stands for recheck:
// once a poller was preempted (free false), nobody polls, data or not,
// until the count is read again.
func TestVerdictStands(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	if _, err := unix.Write(fds[1], []byte{1}); err != nil {
		t.Fatal(err)
	}
	defer readAt.Store(0) // the next Idle reads the count again
	readAt.Store(int64(time.Since(clock)) + 1)
	free.Store(false)
	if Idle() || Poll(fds[0], time.Millisecond) {
		t.Fatal("polled although a poller was preempted since the last reading")
	}
	readAt.Store(0)
	if got, want := Idle(), readIdle(); got != want {
		t.Logf("the load changed between two readings: %v, %v", got, want)
	}
	if _, ok := involuntary(); !ok {
		t.Fatal("getrusage(RUSAGE_THREAD) failed: a poll could not see its preemption")
	}
}

// BenchmarkIdle is the cost of one decision: a cached verdict, re-read
// from /proc/loadavg once per recheck.
func BenchmarkIdle(b *testing.B) {
	for b.Loop() {
		Idle()
	}
}

// BenchmarkReadIdle is the cost of one reading of /proc/loadavg (~1-2 µs).
func BenchmarkReadIdle(b *testing.B) {
	for b.Loop() {
		readIdle()
	}
}

// BenchmarkInvoluntary is the cost of one check for preemption while
// polling.
func BenchmarkInvoluntary(b *testing.B) {
	for b.Loop() {
		involuntary()
	}
}
