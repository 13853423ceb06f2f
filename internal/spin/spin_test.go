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

// BenchmarkIdle is the cost of one decision (docs/performance.md: ~1 µs).
func BenchmarkIdle(b *testing.B) {
	for b.Loop() {
		Idle()
	}
}
