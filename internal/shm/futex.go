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
// signal, a changed value or a fault all end it.
func futexWait(addr *uint32, val uint32, timeout time.Duration) {
	ts := unix.NsecToTimespec(int64(timeout))
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWaitOp, uintptr(val),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// futexWake wakes every waiter on addr.
func futexWake(addr *uint32) {
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWakeOp, uintptr(1<<31-1), 0, 0, 0)
}
