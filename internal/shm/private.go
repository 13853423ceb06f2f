package shm

import (
	"fmt"
	"math"

	"golang.org/x/sys/unix"
)

// MapPrivate maps the pages holding [offset, offset+size) of the file fd
// refers to, MAP_PRIVATE with PROT_READ|PROT_WRITE: a copy-on-write view.
// Reads share the file's physical pages (nothing is copied); the first write
// to a page gives this mapping a copy of that page, made by the kernel, which
// never reaches the file or any other mapping. Writing never faults fatally.
//
// Pages not yet written keep showing the file, so the caller must keep the
// range unchanged (the blob pinned, never freed or reused) while the mapping
// lives. Nothing is faulted in: the cost does not depend on size.
//
// It returns the Mapping, which owns the whole page-aligned range and is
// released by Close, and the size bytes of the range itself. The range must
// be non-empty and lie inside the file (so the view cannot fault with
// SIGBUS), else ErrBadSize or ErrOutOfBounds. The fd may be closed as soon as
// MapPrivate returns.
func MapPrivate(fd int, offset, size uint64) (*Mapping, []byte, error) {
	if size == 0 {
		return nil, nil, fmt.Errorf("%w: cannot map an empty range", ErrBadSize)
	}
	fileSize, err := FileSize(fd)
	if err != nil {
		return nil, nil, err
	}
	if offset > fileSize || size > fileSize-offset {
		return nil, nil, fmt.Errorf("%w: [%d, +%d) of a %d-byte file", ErrOutOfBounds, offset, size, fileSize)
	}
	start := offset &^ (pageSize - 1)
	end := (offset + size + pageSize - 1) &^ (pageSize - 1)
	if end-start > math.MaxInt || start > math.MaxInt64 {
		return nil, nil, fmt.Errorf("%w: cannot map %d bytes", ErrBadSize, end-start)
	}
	// The end may pass the file's size when that is not page-aligned; the
	// bytes handed out never do (checked above), so no access reaches past it.
	data, err := unix.Mmap(fd, int64(start), int(end-start), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
	if err != nil {
		return nil, nil, fmt.Errorf("shm: private mmap of [%d, %d): %w", start, end, err)
	}
	lo := offset - start
	return &Mapping{data: data}, data[lo : lo+size : lo+size], nil
}
