package nice

import (
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Batch puts every thread of the process under SCHED_BATCH, each keeping
// its nice value, and returns how many it changed. A SCHED_BATCH thread
// gets the same share of the CPUs as before, but when it wakes it does not
// preempt the thread running on a busy CPU: it runs when a CPU falls idle or
// at the scheduler's next tick. When more clients stream requests than
// there are CPUs, a daemon's connection thread that a client's write wakes
// then stops evicting a client from its CPU every few requests; a lone
// client pays instead, when its write wakes the thread on its own CPU and
// it does not sleep (vineyardd --sched-batch; docs/performance.md,
// "December 5, late night").
//
// Threads made later inherit the policy from the thread that makes them, as
// every thread of a Go program is cloned from one of its threads; a thread
// made while Batch walks the process is caught by another walk. Threads
// under another policy than SCHED_NORMAL (set by someone on purpose) are
// left alone. Threads that end meanwhile are skipped.
func Batch() (int, error) {
	changed := 0
	for {
		n, err := batchWalk()
		changed += n
		if err != nil || n == 0 {
			return changed, err
		}
	}
}

// batchWalk sets SCHED_BATCH on the threads still under SCHED_NORMAL.
func batchWalk() (int, error) {
	d, err := os.Open("/proc/self/task")
	if err != nil {
		return 0, err
	}
	names, err := d.Readdirnames(-1)
	_ = d.Close()
	if err != nil {
		return 0, err
	}
	changed := 0
	for _, name := range names {
		tid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		attr, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			continue // ended since the listing
		}
		if attr.Policy != unix.SCHED_NORMAL {
			continue
		}
		attr.Policy = unix.SCHED_BATCH
		if err := unix.SchedSetAttr(tid, attr, 0); err != nil {
			if errors.Is(err, unix.ESRCH) {
				continue
			}
			return changed, err
		}
		changed++
	}
	return changed, nil
}
