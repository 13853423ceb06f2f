// Package nice sets how the kernel schedules the process's threads: background
// work at the lowest CPU priority, and the daemon's threads under SCHED_BATCH.
package nice

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// Background locks the calling goroutine to its thread and lowers that
// thread's priority to the lowest (nice 19), for work that should use only
// CPU time nobody else wants (pre-faulting memory ahead of need). The
// goroutine must not unlock the thread: when it returns, the runtime ends
// the thread instead of reusing it at that priority. Errors are ignored:
// the work then runs at normal priority.
func Background() {
	runtime.LockOSThread()
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 19)
}
