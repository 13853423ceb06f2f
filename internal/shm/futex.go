package shm

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Futexes on words of shared mappings (not FUTEX_PRIVATE: the waiter and
// the waker are different processes).

// The futex operations (linux/futex.h); x/sys/unix does not name them.
const (
	futexWaitOp = 0
	futexWakeOp = 1
)

// futexWait sleeps while *addr == val, for at most timeout; a wake, a
// changed value or a fault end it. A signal does not: Go preempts
// goroutines with SIGURG, which would otherwise end a sleep early, so it
// sleeps again for what is left.
func futexWait(addr *uint32, val uint32, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for {
		ts := unix.NsecToTimespec(int64(timeout))
		_, _, e := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWaitOp, uintptr(val),
			uintptr(unsafe.Pointer(&ts)), 0, 0)
		if e != unix.EINTR {
			return
		}
		if timeout = time.Until(deadline); timeout <= 0 {
			return
		}
	}
}

// futexWake wakes every waiter on addr.
func futexWake(addr *uint32) {
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWakeOp, uintptr(1<<31-1), 0, 0, 0)
}
