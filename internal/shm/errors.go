package shm

import "errors"

// ErrBadSize is returned by Create and Map for a size of 0, one too large to
// map in this address space, and by Map for a size larger than the file.
var ErrBadSize = errors.New("shm: bad size")

// ErrClosed is returned by the methods of an Arena or Mapping after Close.
var ErrClosed = errors.New("shm: closed")

// ErrOutOfBounds is returned by Trim for a range that does not lie inside the
// arena.
var ErrOutOfBounds = errors.New("shm: range out of bounds")
