package nice

import (
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// SetBatch puts every thread of the process under SCHED_BATCH (on), or back
// under SCHED_NORMAL (off), each keeping its nice value, and returns how
// many it changed. A SCHED_BATCH thread gets the same share of the CPUs as
// before, but when it wakes it does not preempt the thread running on a busy
// CPU: it runs when a CPU falls idle or at the scheduler's next tick. When
// more clients stream requests than there are CPUs, a daemon's connection
// thread that a client's write wakes then stops evicting a client from its
// CPU every few requests; a lone client pays instead, when its write wakes
// the thread on its own CPU and it does not sleep (server/sched.go;
// docs/performance.md, "December 5, late night").
//
// Threads made later inherit the policy from the thread that makes them, as
// every thread of a Go program is cloned from one of its threads; a thread
// made while SetBatch walks the process is caught by another walk. Threads
// under another policy (set by someone on purpose) are left alone. Threads
// that end meanwhile are skipped.
func SetBatch(on bool) (int, error) {
	from, to := uint32(unix.SCHED_NORMAL), uint32(unix.SCHED_BATCH)
	if !on {
		from, to = to, from
	}
	changed := 0
	for {
		n, err := walk(from, to)
		changed += n
		if err != nil || n == 0 {
			return changed, err
		}
	}
}

// walk moves the threads under policy from to policy to.
func walk(from, to uint32) (int, error) {
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
		if attr.Policy != from {
			continue
		}
		attr.Policy = to
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
