package store

import (
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/v6d-io/v6d-go/internal/nice"
	"github.com/v6d-io/v6d-go/internal/shm"
)

// prefaulter keeps never-allocated arena memory resident ahead of the
// allocations (prefault.go).
type prefaulter struct{ s *Store }

// The background pre-fault (Config.PrefaultAhead). The first write to a page
// of the arena costs 15-30 µs on the project's VMs (the kernel allocates and
// zeroes it, and the hypervisor backs it), so a put into memory no put
// touched before ran at first-touch speed (~0.5-1.5 GB/s) instead of memcpy
// speed. The allocator places blobs best fit, lowest address first, so
// memory no allocation ever had lies above the highest end of any
// allocation (the high-water mark, Store.hwm); a goroutine keeps the
// PrefaultAhead bytes above it resident (up to a chunk short between the
// mark's crossings of a chunk boundary), in chunks of prefaultChunk, off the
// request path, on a thread of the lowest priority (nice 19: it gets the CPU
// time nobody else wants) and idle at least as long as it works (at most
// half a CPU).
// It publishes how far it got in the arena header
// (shm.HeaderPrefaultedOffset), with the mark it worked from
// (shm.HeaderHighWaterOffset), so that a client can map those pages into
// its own view before it writes them (internal/client, pretouch.go): a page
// the daemon made resident still costs each process a minor fault to map.
//
// MemoryTrim returns the reserve to the kernel with every free extent; the
// published end goes back to the high-water mark and the pre-fault starts
// over from there (the reserve is what the flag asks for). A delete with
// trim frees memory below the high-water mark, which the pre-fault never
// touches.

// prefaultChunk is the bytes pre-faulted at a time.
const prefaultChunk = 2 << 20

// noteAllocLocked raises the high-water mark past a new allocation and wakes
// the pre-fault when the mark crossed a multiple of prefaultStep. Waking it
// on every allocation cost small puts a goroutine wake-up, a one-page
// MADV_POPULATE_WRITE and a timer each (~1.7 futex calls and 0.4 madvise
// per put); so the reserve above the mark may run up to a step short until
// the next crossing.
func (part *prefaulter) noteAllocLocked(off, size uint64) {
	s := part.s
	if end := off + size; end > s.hwm {
		crossed := s.prefaultStep > 0 && end/s.prefaultStep != s.hwm/s.prefaultStep
		s.hwm = end
		if crossed {
			select {
			case s.prefaultKick <- struct{}{}:
			default:
			}
		}
	}
}

// restartPrefaultLocked makes the pre-fault start over from the high-water
// mark, after memory above it was trimmed. Callers hold s.mu.
func (part *prefaulter) restartPrefaultLocked() {
	s := part.s
	if s.prefaultKick == nil {
		return
	}
	s.prefaultGen++
	s.pf.publishPrefaultedLocked(s.hwm)
	select {
	case s.prefaultKick <- struct{}{}:
	default:
	}
}

// startPrefault starts the background pre-fault of ahead bytes.
func (part *prefaulter) startPrefault(ahead uint64) {
	s := part.s
	s.prefaultStep = min(prefaultChunk, ahead)
	s.prefaultKick = make(chan struct{}, 1)
	s.prefaultStop = make(chan struct{})
	s.prefaultDone = make(chan struct{})
	go s.pf.prefaultLoop(ahead)
}

// stopPrefault stops the background pre-fault and waits for it; s.mu must
// not be held.
func (part *prefaulter) stopPrefault() {
	s := part.s
	if s.prefaultStop == nil {
		return
	}
	s.prefaultOnce.Do(func() { close(s.prefaultStop) })
	<-s.prefaultDone
}

// prefaultLoop is the pre-fault goroutine. It works towards a target taken
// when it starts and at each wake-up (a kick), not after every chunk:
// chasing the mark as it moves would make a page-sized chunk per small put.
func (part *prefaulter) prefaultLoop(ahead uint64) {
	s := part.s
	defer close(s.prefaultDone)
	nice.Background()
	size := s.arena.Size()
	var done, gen uint64 // every page in [hwm, done) is resident, as of gen
	s.mu.Lock()
	target := min(size, s.hwm+ahead)
	s.mu.Unlock()
	for {
		s.mu.Lock()
		hwm, closed := s.hwm, s.closed
		if s.prefaultGen != gen {
			gen, done = s.prefaultGen, hwm
		}
		s.mu.Unlock()
		if closed {
			return
		}
		done = max(done, hwm)
		if done >= target {
			select {
			case <-s.prefaultKick:
				s.mu.Lock()
				target = min(size, s.hwm+ahead)
				s.mu.Unlock()
				continue
			case <-s.prefaultStop:
				return
			}
		}
		end := min(done+prefaultChunk, target)
		start := time.Now()
		if err := s.arena.PrefaultRange(done, end-done); err != nil {
			return // ENOMEM, or the arena closed: stay out of the way
		}
		s.prefaultRuns.Add(1)
		s.mu.Lock()
		if s.prefaultGen == gen { // else trimmed meanwhile: start over
			done = end
			s.pf.publishPrefaultedLocked(done)
		}
		s.mu.Unlock()
		// Rest as long as the chunk took: at most half a CPU.
		select {
		case <-time.After(time.Since(start)):
		case <-s.prefaultStop:
			return
		}
	}
}

// publishPrefaultedLocked stores the pre-faulted end and the high-water
// mark in the arena header. Callers hold s.mu.
func (part *prefaulter) publishPrefaultedLocked(end uint64) {
	s := part.s
	b := s.arena.Bytes()
	if s.closed || len(b) < HeaderSize {
		return
	}
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&b[shm.HeaderHighWaterOffset])), s.hwm)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&b[shm.HeaderPrefaultedOffset])), end)
}

// Prefaulted returns how far the background pre-fault got: the arena offset
// below which every page is resident or was allocated (0 without pre-fault).
func (s *Store) Prefaulted() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.arena.Bytes()
	if s.closed || len(b) < HeaderSize {
		return 0
	}
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&b[shm.HeaderPrefaultedOffset])))
}
