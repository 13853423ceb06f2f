package nice

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestBackgroundLowersOnlyItsThread(t *testing.T) {
	before, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 1)
	go func() {
		Background() // never unlocked: the runtime ends this thread when the goroutine returns
		// getpriority returns 20 - nice for PRIO_PROCESS on Linux.
		p, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
		if err != nil {
			p = -1
		}
		got <- p
	}()
	if p := <-got; p != 20-19 {
		t.Fatalf("the background thread's getpriority = %d, want %d (nice 19)", p, 20-19)
	}
	after, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("the process's priority changed from %d to %d", before, after)
	}
}
