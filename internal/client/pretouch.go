package client

import (
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/v6d-io/v6d-go/internal/nice"
	"github.com/v6d-io/v6d-go/internal/shm"
	"github.com/v6d-io/v6d-go/internal/status"
)

// Pre-touch: mapping, ahead of need, the arena pages the daemon pre-faulted.
//
// The daemon keeps never-used arena memory resident in the background
// (store.Config.PrefaultAhead) and publishes how far in the arena header
// (shm.HeaderPrefaultedOffset), with the high-water mark it worked from
// (shm.HeaderHighWaterOffset). A resident page still costs each process a
// fault to map into its own view: ~0.2-0.4 µs per page on the project's VMs
// even 16 at a time, as much as copying the page, so a put into such memory
// ran at ~0.55x warm memcpy. So once this process creates a large blob, a
// goroutine maps the pre-faulted, never-used memory above the high-water mark
// and above its own blobs, up to the published end (waiting for the daemon
// while it goes on): it reads one word per faultAround bytes through the
// writable mapping, and a read fault on a shared mapping maps up to 16
// resident pages at once, writable, and never allocates what the daemon did
// not pre-fault. The next large puts then write pages already mapped. How
// much it maps is what the daemon's --prefault-ahead sizes (not memory other
// processes' objects hold below the mark), up to pretouchMost past the mark
// or its blobs: the page tables cost a process 2 MiB per GiB it maps. It
// runs off the request path (at nice 19 only when NiceEnv asks), in chunks of
// pretouchChunk, holding a.unmap (which keeps the mapping alive), and stops
// when it reaches its end; a create (a put above the inline size) starts it
// again. At the default 64 MiB of pre-fault it costs ~1000 faults, a few
// milliseconds of one CPU per process.

// NiceEnv names the variable that, set to "1", runs the pre-touch on a
// thread lowered to nice 19 (nice.Background), so that it takes only CPU
// time nobody else wants. Off by default: the library lives in its user's
// process and changes the scheduling of none of that process's threads
// unless asked (read at each start of the pre-touch).
const NiceEnv = "VINEYARD_CLIENT_NICE"

// pretouchThread prepares the pre-touch goroutine's thread: nice 19 when
// NiceEnv asks, else nothing.
func pretouchThread() {
	if os.Getenv(NiceEnv) == "1" {
		nice.Background()
	}
}

const (
	pretouchChunk = 256 << 10
	// pretouchPatience is how long the pre-touch waits for the daemon's
	// pre-fault to go further before it ends.
	pretouchPatience = 500 * time.Millisecond
)

// pretouch notes a created blob ending at end (arena offset) and starts the
// pre-touch goroutine if it is not running and the daemon pre-faulted pages
// above what it mapped (else a put into reused memory would start a thread). Callers must not hold arenas.mu.
func (a *arena) pretouch(end uint64) {
	arenas.mu.Lock()
	defer arenas.mu.Unlock()
	a.created = max(a.created, end)
	if !a.touching && a.prefaultedLocked() > a.pretouchFromLocked() {
		a.touching = true
		go a.pretouchLoop()
	}
}

// prefaultedLocked returns the pre-faulted end the daemon published, 0 when
// the arena has no header. arenas.mu must be held.
func (a *arena) prefaultedLocked() uint64 {
	return a.headerWordLocked(shm.HeaderPrefaultedOffset)
}

// pretouchFromLocked returns where the pre-touch goes on: above what it
// mapped, the blobs this process created and the daemon's high-water mark.
// arenas.mu must be held.
func (a *arena) pretouchFromLocked() uint64 {
	return max(a.touched, a.pretouchBaseLocked())
}

// pretouchBaseLocked returns where the memory to map ahead begins: the
// higher of the daemon's high-water mark and this process's highest blob.
// arenas.mu must be held.
func (a *arena) pretouchBaseLocked() uint64 {
	return max(a.created, a.headerWordLocked(shm.HeaderHighWaterOffset))
}

// headerWordLocked reads the arena header's uint64 at off, 0 when the arena
// has no header. arenas.mu must be held.
func (a *arena) headerWordLocked(off int) uint64 {
	b := a.roB
	if len(b) < shm.HeaderSize || string(b[:len(shm.HeaderMagic)]) != shm.HeaderMagic {
		return 0
	}
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&b[off])))
}

// pretouchLoop maps pages in chunks until there is nothing left to map.
// When it catches up with the daemon's pre-fault, it waits for more, backing
// off, up to pretouchPatience without progress.
func (a *arena) pretouchLoop() {
	pretouchThread()
	var waited, nap time.Duration
	for {
		switch a.pretouchChunk(waited >= pretouchPatience) {
		case touchedSome:
			waited, nap = 0, 0
		case waitDaemon:
			nap = min(max(2*nap, time.Millisecond), 32*time.Millisecond)
			time.Sleep(nap)
			waited += nap
		case touchDone:
			return
		}
	}
}

// pretouchMost bounds what one process maps ahead (32 MiB of page tables),
// whatever --prefault-ahead the daemon runs with; a variable for tests.
var pretouchMost uint64 = 16 << 30

// What pretouchChunk did.
const (
	touchedSome = iota // mapped a chunk
	waitDaemon         // caught up with the daemon's pre-fault
	touchDone          // reached its end, or stopped; touching is false
)

// pretouchChunk maps the next chunk. With stop, it ends the pre-touch
// instead of waiting for the daemon. It holds arenas.mu only to pick the
// chunk, and a.unmap (read) while it reads, so that a client's get or create
// never waits behind its page faults (nor behind it being descheduled).
func (a *arena) pretouchChunk(stop bool) int {
	arenas.mu.Lock()
	from := a.pretouchFromLocked()
	limit := min(uint64(len(a.rwB)), a.pretouchBaseLocked()+pretouchMost)
	to := min(a.prefaultedLocked(), limit)
	if a.refs <= 0 || a.rwB == nil || from >= limit || (from >= to && stop) {
		a.touching = false
		arenas.mu.Unlock()
		return touchDone
	}
	if from >= to {
		arenas.mu.Unlock()
		return waitDaemon
	}
	end := min(from+pretouchChunk, to)
	a.touched = end
	b := a.rwB
	a.unmap.RLock() // lock order: arenas.mu, then a.unmap
	arenas.mu.Unlock()
	defer a.unmap.RUnlock()
	touch(b[from:end], faultAround) // one read per window maps its resident pages
	return touchedSome
}

// faultAround is the step of Pretouch's reads: Linux maps the resident pages
// of the fault_around_bytes-aligned window around a read fault on a shared
// mapping (64 KiB by default), not only the page read.
const faultAround = 64 << 10

// Pretouch maps the pages of [addr, addr+n) into this process before a copy
// writes them: it reads one word every faultAround bytes, and each read fault
// maps up to 16 pages at once, writable. A copy into pages this process never
// mapped otherwise takes one fault per page; on the project's VMs the reads
// cost about a quarter of those faults (docs/performance.md, "Cold puts").
// Pages already mapped cost a load each. The range must lie in a writable
// arena mapping of this process (a blob this process created); the mapping
// cannot be unmapped while the reads run. A page the daemon did not make
// resident is allocated by its read, as the copy would have.
func Pretouch(addr uintptr, n uint64) error {
	if n == 0 {
		return nil
	}
	arenas.mu.Lock()
	var b []byte
	var owner *arena
	for _, a := range arenas.m {
		if b = within(a.rwB, addr, n); b != nil {
			owner = a
			break
		}
	}
	if owner == nil {
		arenas.mu.Unlock()
		return status.Errorf(status.Invalid, "pretouch: %#x (+%d bytes) is not in a writable arena mapping of this process", addr, n)
	}
	owner.unmap.RLock() // lock order: arenas.mu, then a.unmap
	arenas.mu.Unlock()
	defer owner.unmap.RUnlock()
	touch(b, faultAround)
	return nil
}

// touch reads one aligned word at the start of b and at every step-aligned
// address inside it (step a power of two).
func touch(b []byte, step uintptr) {
	base := unsafe.Pointer(unsafe.SliceData(b))
	start := uintptr(base)
	for p := start &^ 3; p < start+uintptr(len(b)); p = (p + step) &^ (step - 1) {
		atomic.LoadUint32((*uint32)(unsafe.Add(base, int(p)-int(start))))
	}
}

// populate maps [off, off+size) of the writable mapping ahead of the puts
// that will write it: a new lease of small puts (leaser.ensure), which
// does not start the pre-touch. Each of its pages this process never mapped
// would otherwise cost its first put a fault (~1-2 µs here, 16 for a put of
// 64 KiB); one read per faultAround window maps them a window at a time,
// and costs a load per window when they are mapped already. The caller
// holds a reference to the arena (the lease's), so it stays mapped.
func (a *arena) populate(off, size uint64) {
	if rw, err := a.view(off, size, true); err == nil {
		touch(rw, faultAround)
	}
}
