package main

/*
#include "v6d.h"
*/
import "C"

import "github.com/v6d-io/v6d-go/internal/status"

// The flag bits of include/v6d.h, taken from the header so they cannot
// drift. Each function refuses a bit it does not define with V6D_INVALID: a
// newer caller's flag must not be silently ignored by an older library.
const (
	getUnsafe uint32 = C.V6D_GET_UNSAFE

	deleteForce      uint32 = C.V6D_DELETE_FORCE
	deleteShallow    uint32 = C.V6D_DELETE_SHALLOW
	deleteMemoryTrim uint32 = C.V6D_DELETE_MEMORY_TRIM

	arrowRecordBatch uint32 = C.V6D_ARROW_RECORD_BATCH
	arrowChunked     uint32 = C.V6D_ARROW_CHUNKED
)

// The flags each function takes.
const (
	getBuffersFlags = getUnsafe
	getObjectFlags  = 0 // none yet: the parameter is reserved (v6d.h)
	deleteFlags     = deleteForce | deleteShallow | deleteMemoryTrim
	putArrayFlags   = arrowRecordBatch
	putStreamFlags  = arrowChunked
)

// checkFlags fails with Invalid if flags has a bit outside known.
func checkFlags(fn string, flags C.uint32_t, known uint32) error {
	if extra := uint32(flags) &^ known; extra != 0 {
		return status.Errorf(status.Invalid, "%s: unknown flags 0x%x (known: 0x%x)", fn, extra, known)
	}
	return nil
}
