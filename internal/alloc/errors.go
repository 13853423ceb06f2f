package alloc

import "errors"

// ErrNotEnoughMemory is returned by Alloc when no free extent is large enough
// for the request. The wrapping error says how much was asked for and how much
// of the arena is in use.
var ErrNotEnoughMemory = errors.New("alloc: not enough memory")

// ErrUnknownOffset is returned by Free and Shrink when the
// offset is not the start of a live allocation (never allocated, already
// freed, or pointing into the middle of an allocation).
var ErrUnknownOffset = errors.New("alloc: unknown offset")

// ErrBadSize is returned by Alloc for a size of 0 or one larger than the
// capacity, and by Shrink for a new size of 0 or one larger than the current
// size of the allocation.
var ErrBadSize = errors.New("alloc: bad size")
