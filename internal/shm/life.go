package shm

import (
	"errors"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The daemon's life word: how a client learns that the daemon died by
// reading memory instead of making a system call (a get without a round
// trip otherwise polls its socket, ~1 µs here, to never answer from a dead
// daemon's directory).
//
// It is the first 4 bytes of the directory's header word 4. A thread of the
// daemon that does nothing else (Life) stores its thread id there and
// registers the word with the kernel as a robust futex it holds
// (set_robust_list). When that thread ends for any reason (the daemon
// exits, crashes or is SIGKILLed), the kernel sets the word's
// FUTEX_OWNER_DIED bit while it tears the process down, before it closes
// the daemon's sockets: a client that reads the bit set has the same answer
// a poll of its socket would give, no later. A word of 0 means the daemon
// did not register one (clients then poll). When the directory closes, the
// thread unregisters the word and ends; the word is left 0.
//
// The kernel's list lives in the daemon's private memory, not in the
// directory, so no daemon address is ever visible to clients.
const (
	lifeWord = 4 // header word

	// futexOwnerDied is the bit the kernel sets in a dead holder's word.
	futexOwnerDied = 0x40000000
	futexTIDMask   = 0x3fffffff
)

// LifeState is what a directory's life word says.
type LifeState int

const (
	// LifeUnknown means the daemon keeps no life word: ask the socket.
	LifeUnknown LifeState = iota
	// LifeAlive means the thread holding the word runs.
	LifeAlive
	// LifeDead means the daemon's process ended.
	LifeDead
)

// robustList is the kernel's struct robust_list_head with its one entry
// (struct robust_list): a circular list head → entry → head.
type robustList struct {
	head struct {
		next          uintptr // the entry
		futexOffset   int64   // word address − entry address
		listOpPending uintptr
	}
	entry struct {
		next uintptr // back to the head
	}
}

// Life starts the thread that holds d's life word, and returns at once;
// Close stops it. Errors (a kernel without robust futexes) leave the word
// 0: clients then poll their sockets.
func (d *Directory) Life() error {
	if d.life != nil {
		return nil
	}
	started := make(chan error, 1)
	stop := make(chan struct{})
	done := make(chan struct{})
	go holdLife(&d.w[lifeWord], started, stop, done)
	if err := <-started; err != nil {
		<-done
		return err
	}
	d.life = &lifeThread{stop: stop, done: done}
	return nil
}

type lifeThread struct {
	stop, done chan struct{}
}

// end stops the thread and waits until it unregistered the word.
func (t *lifeThread) end() {
	close(t.stop)
	<-t.done
}

// holdLife runs on its own thread until stop closes: it registers word (a
// uint64 whose first 4 bytes are the futex) in a robust list of its own.
func holdLife(word *uint64, started chan<- error, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	// The list must not move and is read by the kernel only: memory of its
	// own, outside Go's heap.
	mem, err := unix.Mmap(-1, 0, int(unsafe.Sizeof(robustList{})), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		started <- err
		return
	}
	defer func() { _ = unix.Munmap(mem) }()
	l := (*robustList)(unsafe.Pointer(unsafe.SliceData(mem)))
	futex := (*uint32)(unsafe.Pointer(word)) // the word's first 4 bytes, as readers read them
	head, entry := uintptr(unsafe.Pointer(&l.head)), uintptr(unsafe.Pointer(&l.entry))
	l.head.next = entry
	l.head.futexOffset = int64(uintptr(unsafe.Pointer(futex))) - int64(entry)
	l.entry.next = head
	atomic.StoreUint32(futex, uint32(unix.Gettid())&futexTIDMask)
	if _, _, e := unix.RawSyscall(unix.SYS_SET_ROBUST_LIST, head, unsafe.Sizeof(l.head), 0); e != 0 {
		atomic.StoreUint32(futex, 0)
		started <- errors.Join(errors.New("shm: set_robust_list"), e)
		return
	}
	started <- nil
	<-stop
	// An empty list, then no word: the thread's end writes nothing.
	l.head.next = head
	_, _, _ = unix.RawSyscall(unix.SYS_SET_ROBUST_LIST, 0, unsafe.Sizeof(l.head), 0)
	atomic.StoreUint32(futex, 0)
}

// Life reports what the directory's life word says.
func (v *DirectoryView) Life() LifeState {
	w := atomic.LoadUint32((*uint32)(unsafe.Pointer(&v.w[lifeWord])))
	switch {
	case w == 0:
		return LifeUnknown
	case w&futexOwnerDied != 0:
		return LifeDead
	default:
		return LifeAlive
	}
}
