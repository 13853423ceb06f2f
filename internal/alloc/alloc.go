// Package alloc hands out offsets into the daemon's shared-memory arena.
//
// The allocator's bookkeeping lives entirely in the Go heap of the daemon,
// never in the arena itself, so no client writing to shared memory can corrupt
// it. Every offset is a multiple of Alignment and every allocation is rounded
// up to a multiple of Alignment.
//
// Placement is best fit: a request takes the smallest free extent that holds
// it, the lowest-addressed one among equals, and is carved from its start.
// Freed memory is coalesced with free neighbors at once, so the free extents
// are always maximal. Alloc and Free cost O(log n) in the number of free
// extents (expected, using a treap ordered by size), plus O(1) hash look-ups
// for the neighbors.
package alloc

import (
	"fmt"
	"slices"
)

// Alignment is the alignment of every offset and the granularity of sizes.
const Alignment = 64

// Allocator manages the offsets [0, Capacity()) of one arena.
//
// An Allocator is NOT safe for concurrent use: the caller (the store) must
// serialize every method call, including the read-only ones, with its own
// lock. The zero value is not usable; call New.
type Allocator struct {
	capacity uint64
	used     uint64

	live map[uint64]uint64 // offset → rounded size of each live allocation

	// The free extents, each indexed three ways.
	freeByOff map[uint64]uint64 // start → size
	freeByEnd map[uint64]uint64 // end (start+size) → start
	bySize    sizeTree          // (size, start)
}

// New returns an allocator for the offsets [0, capacity) with the whole range
// free. capacity is rounded down to a multiple of Alignment; a capacity below
// Alignment yields an allocator on which every Alloc fails.
func New(capacity uint64) *Allocator {
	capacity &^= Alignment - 1
	a := &Allocator{
		capacity:  capacity,
		live:      make(map[uint64]uint64),
		freeByOff: make(map[uint64]uint64),
		freeByEnd: make(map[uint64]uint64),
		bySize:    newSizeTree(),
	}
	if capacity > 0 {
		a.insertFree(0, capacity)
	}
	return a
}

// roundUp rounds size up to a multiple of Alignment. size must be at most
// the capacity, which leaves room for the rounding.
func roundUp(size uint64) uint64 {
	return (size + Alignment - 1) &^ (Alignment - 1)
}

// Alloc reserves size bytes, rounded up to a multiple of Alignment, and
// returns the offset of the first byte, a multiple of Alignment. The range
// stays reserved until Free.
//
// A size of 0 fails with ErrBadSize. A size larger than the capacity can never
// be satisfied: its error matches both ErrBadSize and ErrNotEnoughMemory. When
// no free extent is large enough the error matches ErrNotEnoughMemory and
// says how many bytes were asked for and are in use.
func (a *Allocator) Alloc(size uint64) (offset uint64, err error) {
	if size == 0 {
		return 0, fmt.Errorf("%w: cannot allocate 0 bytes", ErrBadSize)
	}
	if size > a.capacity {
		return 0, fmt.Errorf("%w: failed to allocate %d bytes: more than the capacity of %d bytes (%w)",
			ErrNotEnoughMemory, size, a.capacity, ErrBadSize)
	}
	rs := roundUp(size)
	k, ok := a.bySize.Ceil(extentKey{size: rs})
	if !ok {
		return 0, fmt.Errorf("%w: failed to allocate %d bytes: %d of %d bytes in use",
			ErrNotEnoughMemory, size, a.used, a.capacity)
	}
	a.removeFree(k.off, k.size)
	if k.size > rs {
		// The rest keeps the old extent's right neighbor, which was live
		// (free extents are maximal), so there is nothing to coalesce.
		a.insertFree(k.off+rs, k.size-rs)
	}
	a.live[k.off] = rs
	a.used += rs
	return k.off, nil
}

// Free releases the allocation that starts at offset and merges it with any
// free neighbors. An offset that is not the start of a live allocation
// (including a second Free of the same offset) fails with ErrUnknownOffset and
// changes nothing.
func (a *Allocator) Free(offset uint64) error {
	size, ok := a.live[offset]
	if !ok {
		return fmt.Errorf("%w: free of offset %d", ErrUnknownOffset, offset)
	}
	delete(a.live, offset)
	a.used -= size
	a.addFree(offset, size)
	return nil
}

// Shrink reduces the allocation at offset to newSize bytes, rounded up to a
// multiple of Alignment, keeping its offset and returning the tail to the free
// extents. newSize must be positive and at most the current (rounded) size,
// else Shrink fails with ErrBadSize; an offset that is not the start of a live
// allocation fails with ErrUnknownOffset. Neither failure changes anything.
func (a *Allocator) Shrink(offset, newSize uint64) error {
	size, ok := a.live[offset]
	if !ok {
		return fmt.Errorf("%w: shrink of offset %d", ErrUnknownOffset, offset)
	}
	if newSize == 0 || newSize > size {
		return fmt.Errorf("%w: cannot shrink the %d bytes at offset %d to %d bytes",
			ErrBadSize, size, offset, newSize)
	}
	rs := roundUp(newSize)
	if rs == size {
		return nil
	}
	a.live[offset] = rs
	a.used -= size - rs
	a.addFree(offset+rs, size-rs)
	return nil
}

// Split cuts the live allocation that starts at offset in two at at: the
// allocations [offset, at) and [at, end) are both live afterwards, each
// freed, shrunk or split on its own. at must be a multiple of Alignment
// strictly inside the allocation, else Split fails with ErrBadSize; an
// offset that is not the start of a live allocation fails with
// ErrUnknownOffset. Neither failure changes anything. It costs O(1): the
// store carves the blobs of a lease out of it this way.
func (a *Allocator) Split(offset, at uint64) error {
	size, ok := a.live[offset]
	if !ok {
		return fmt.Errorf("%w: split of offset %d", ErrUnknownOffset, offset)
	}
	if at <= offset || at >= offset+size || at%Alignment != 0 {
		return fmt.Errorf("%w: cannot split the %d bytes at offset %d at %d",
			ErrBadSize, size, offset, at)
	}
	a.live[offset] = at - offset
	a.live[at] = offset + size - at
	return nil
}

// SizeOf returns the rounded size of the live allocation that starts at
// offset, and false if there is none.
func (a *Allocator) SizeOf(offset uint64) (uint64, bool) {
	size, ok := a.live[offset]
	return size, ok
}

// Used returns the sum of the rounded sizes of all live allocations.
func (a *Allocator) Used() uint64 { return a.used }

// Capacity returns the size of the managed range: New's capacity rounded down
// to a multiple of Alignment.
func (a *Allocator) Capacity() uint64 { return a.capacity }

// Live returns the number of live allocations.
func (a *Allocator) Live() int { return len(a.live) }

// LargestFree returns the size of the largest free extent, which is the
// largest request Alloc can satisfy right now; Capacity()-Used() minus
// LargestFree() is a measure of fragmentation.
func (a *Allocator) LargestFree() uint64 {
	k, _ := a.bySize.Max()
	return k.size
}

// FreeExtents calls fn for every free extent in ascending order of offset.
// Extents are maximal: no two that fn sees are adjacent. The extents are
// collected before the first call, so fn sees the state at the time of the
// call even if it changes the allocator (the store uses this to trim memory).
// It costs O(n log n) in the number of free extents.
func (a *Allocator) FreeExtents(fn func(offset, size uint64)) {
	type extent struct{ off, size uint64 }
	exts := make([]extent, 0, len(a.freeByOff))
	for off, size := range a.freeByOff {
		exts = append(exts, extent{off, size})
	}
	slices.SortFunc(exts, func(x, y extent) int {
		switch {
		case x.off < y.off:
			return -1
		case x.off > y.off:
			return 1
		}
		return 0
	})
	for _, e := range exts {
		fn(e.off, e.size)
	}
}

// addFree makes [off, off+size) free, merging it with the free extents that
// end at off and start at off+size.
func (a *Allocator) addFree(off, size uint64) {
	if start, ok := a.freeByEnd[off]; ok {
		leftSize := off - start
		a.removeFree(start, leftSize)
		off, size = start, size+leftSize
	}
	if rightSize, ok := a.freeByOff[off+size]; ok {
		a.removeFree(off+size, rightSize)
		size += rightSize
	}
	a.insertFree(off, size)
}

// insertFree records [off, off+size) as a free extent without coalescing.
func (a *Allocator) insertFree(off, size uint64) {
	a.freeByOff[off] = size
	a.freeByEnd[off+size] = off
	a.bySize.Insert(extentKey{size: size, off: off})
}

// removeFree forgets the free extent [off, off+size).
func (a *Allocator) removeFree(off, size uint64) {
	delete(a.freeByOff, off)
	delete(a.freeByEnd, off+size)
	if !a.bySize.Delete(extentKey{size: size, off: off}) {
		panic(fmt.Sprintf("alloc: free extent [%d, %d) missing from the size index", off, off+size))
	}
}
