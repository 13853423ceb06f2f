package client

import (
	"runtime"
	"sync"
)

// Filling a put's blobs (docs/performance.md, "Medium puts"). A pipelined
// put copies its bytes into the arena inside the one call that puts it, so
// the pre-touch that used to be a call per chunk (v6d_pretouch from Python)
// happens here: each fillChunk piece of the destination is mapped first
// (touch: one read per faultAround window, which maps up to 16 resident
// pages at once, where the copy's writes would fault page by page), then
// copied. Pages already mapped cost a load per window. A fill of
// fillParallel bytes or more is split over a few goroutines, which pays for
// memory the process maps for the first time (faults run in parallel);
// below that the goroutines' start and wake-ups cost more than they save.

const (
	fillChunk    = 1 << 20
	fillParallel = 16 << 20
	fillWorkers  = 4
)

// fillBlob copies src into dst (len(dst) >= len(src)), a writable view of this
// process's arena mapping that the caller keeps mapped.
func fillBlob(dst, src []byte) {
	n := len(src)
	if n < fillChunk {
		copy(dst, src)
		return
	}
	workers := min(fillWorkers, runtime.GOMAXPROCS(0), n/(fillParallel/fillWorkers))
	if n < fillParallel || workers < 2 {
		fillRange(dst[:n], src)
		return
	}
	per := (n/workers + fillChunk - 1) &^ (fillChunk - 1)
	var wg sync.WaitGroup
	for off := per; off < n; off += per {
		end := min(off+per, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			fillRange(dst[off:end], src[off:end])
		}()
	}
	fillRange(dst[:per], src[:per])
	wg.Wait()
}

// fillRange maps and copies src into dst (of the same length) a chunk at
// a time.
func fillRange(dst, src []byte) {
	for off := 0; off < len(src); off += fillChunk {
		end := min(off+fillChunk, len(src))
		touch(dst[off:end], faultAround)
		copy(dst[off:end], src[off:end])
	}
}
