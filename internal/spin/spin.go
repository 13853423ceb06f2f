// Package spin decides whether a thread waiting for a socket may poll it on
// its CPU instead of sleeping, and does the polling.
//
// Polling saves the wake-up of a sleeping thread (tens of microseconds on a
// virtual machine whose CPU went idle) but holds a CPU. That is free while a
// CPU is idle and costly when another thread is waiting for one: then the
// poller delays the very peer it waits for. So a waiter polls only while no
// runnable thread of the machine is left without a CPU, judged by two
// signals:
//
//   - the kernel's count of runnable threads (/proc/loadavg, fourth field,
//     the caller included) is at most the number of CPUs. Reading it costs
//     1-2 µs of kernel time (the kernel formats the whole file), so one
//     reading stands for the whole process for recheck;
//   - while polling, the poller's thread was not preempted (its count of
//     involuntary context switches, getrusage RUSAGE_THREAD, about 0.3 µs,
//     checked every checkEvery): a preemption means a runnable thread wanted
//     this CPU. The poll then ends, and nobody in the process polls until the
//     next reading of the count.
//
// With one client calling in a row on two CPUs, the client and the daemon
// each hold one CPU and both poll, as before; with more busy clients than
// free CPUs nobody polls, and every CPU does the clients' work.
package spin

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// checkEvery is how often a poll checks whether its thread was preempted.
const checkEvery = 10 * time.Microsecond

// recheck is how long one reading of the count of runnable threads stands
// for every poller of the process.
const recheck = time.Millisecond

var (
	loadOnce sync.Once
	loadFd   = -1
	ncpu     = runtime.NumCPU()

	clock  = time.Now() // the origin of readAt
	readAt atomic.Int64 // when the count was last read, in ns since clock, plus 1; 0: never
	free   atomic.Bool  // what that reading said; false once a poller was preempted since
)

// Idle reports whether a CPU is free for the caller to poll on: at the
// latest reading (at most recheck old) the machine had no runnable thread
// beyond one per CPU, the caller counted, and no poller of the process was
// preempted since. Where /proc/loadavg cannot be read it reports true
// (polling stays bounded by the callers' own limits and by preemption).
func Idle() bool {
	now := int64(time.Since(clock)) + 1
	if at := readAt.Load(); at != 0 && now-at < int64(recheck) {
		return free.Load()
	}
	readAt.Store(now) // two threads may both read: the later result stands
	f := readIdle()
	free.Store(f)
	return f
}

// readIdle reads the count of runnable threads and reports whether it is at
// most the number of CPUs.
func readIdle() bool {
	loadOnce.Do(func() {
		fd, err := unix.Open("/proc/loadavg", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			loadFd = fd
		}
	})
	if loadFd < 0 {
		return true
	}
	var b [128]byte
	n, err := unix.Pread(loadFd, b[:], 0)
	if err != nil {
		return true
	}
	running, ok := parseRunning(b[:n])
	return !ok || running <= ncpu
}

// parseRunning returns the number of runnable threads in the contents of
// /proc/loadavg ("0.50 0.40 0.30 3/250 12345"): the number before '/'.
func parseRunning(b []byte) (int, bool) {
	fields := 0
	for i := 0; i < len(b); i++ {
		if b[i] == ' ' {
			fields++
			if fields == 3 {
				n, digits := 0, 0
				for i++; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
					n = n*10 + int(b[i]-'0')
					digits++
				}
				return n, digits > 0 && i < len(b) && b[i] == '/'
			}
		}
	}
	return 0, false
}

// involuntary returns the calling thread's count of involuntary context
// switches (preemptions), and whether it could be read.
func involuntary() (int64, bool) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0, false
	}
	return ru.Nivcsw, true
}

// Poll waits up to limit for data (or the end of the stream, or an error) to
// be readable on the socket fd, polling without blocking while Idle holds,
// and reports whether some is there. It returns false at once when no CPU is
// free, and as soon as its thread is preempted (a runnable thread wanted the
// CPU; Idle then reports false until the next reading): the caller then
// blocks in its read as usual.
func Poll(fd int, limit time.Duration) bool {
	if limit <= 0 || !Idle() {
		return false
	}
	runtime.LockOSThread() // the count of preemptions is the thread's
	defer runtime.UnlockOSThread()
	before, counted := involuntary()
	var b [1]byte
	start := time.Now()
	check := start.Add(checkEvery)
	for {
		_, _, err := unix.Recvfrom(fd, b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		if err == nil || (!errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR)) {
			return true // data, end of file or an error: the read reports it
		}
		now := time.Now()
		if now.Sub(start) >= limit {
			return false
		}
		if counted && now.After(check) {
			if n, ok := involuntary(); ok && n != before {
				free.Store(false)
				return false
			}
			check = now.Add(checkEvery)
		}
	}
}
