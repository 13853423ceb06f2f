package main

/*
#include <stdlib.h>
#include "v6d.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/v6d-io/v6d-go/internal/client"
	"github.com/v6d-io/v6d-go/internal/status"
)

// handles maps the C handles of live clients; 0 is never issued.
var (
	handlesMu sync.Mutex
	handles   = map[uint64]*client.Client{}
	nextID    uint64
	poisoned  atomic.Bool
)

func addHandle(c *client.Client) uint64 {
	handlesMu.Lock()
	defer handlesMu.Unlock()
	nextID++
	handles[nextID] = c
	forkAttach(nextID, c)
	return nextID
}

func lookup(h C.uint64_t) (*client.Client, error) {
	handlesMu.Lock()
	defer handlesMu.Unlock()
	c, ok := handles[uint64(h)]
	if !ok {
		return nil, status.Errorf(status.InvalidHandle, "invalid client handle %d", uint64(h))
	}
	return c, nil
}

func removeHandle(h C.uint64_t) (*client.Client, error) {
	handlesMu.Lock()
	defer handlesMu.Unlock()
	c, ok := handles[uint64(h)]
	if !ok {
		return nil, status.Errorf(status.InvalidHandle, "invalid client handle %d", uint64(h))
	}
	delete(handles, uint64(h))
	forkDetach(uint64(h))
	return c, nil
}

// fail fills err (if given) and returns the status of e.
func fail(err *C.v6d_error, e error) C.int32_t {
	pe := status.AsError(e)
	if err != nil {
		if err.message != nil {
			C.free(unsafe.Pointer(err.message))
		}
		err.code = C.int32_t(pe.Code)
		err.message = C.CString(pe.Error())
	}
	return C.int32_t(pe.Code)
}

// result converts a Go error into a status, filling err on failure.
func result(err *C.v6d_error, e error) C.int32_t {
	if e == nil {
		return 0
	}
	return fail(err, e)
}

// guard recovers a panic in an export: it poisons the library and turns the
// call into V6D_INTERNAL. Use as `defer guard(err, &st)`.
func guard(err *C.v6d_error, st *C.int32_t) {
	if r := recover(); r != nil {
		poisoned.Store(true)
		fmt.Fprintf(os.Stderr, "libv6d: internal error: %v\n%s", r, debug.Stack())
		*st = fail(err, status.Errorf(status.Internal, "internal error: %v", r))
	}
}

// entry checks the poison flag; calls fail fast after an internal fault.
func entry(err *C.v6d_error) (C.int32_t, bool) {
	if poisoned.Load() {
		return fail(err, status.Errorf(status.Internal, "libv6d refuses calls after an internal error")), false
	}
	return 0, true
}

// cbytes copies b into malloc'ed memory the caller frees with v6d_free.
func cbytes(b []byte, out **C.char, outLen *C.size_t) {
	if out == nil {
		return
	}
	p := (*C.char)(C.malloc(C.size_t(len(b) + 1)))
	dst := unsafe.Slice((*byte)(unsafe.Pointer(p)), len(b)+1)
	copy(dst, b)
	dst[len(b)] = 0
	*out = p
	if outLen != nil {
		*outLen = C.size_t(len(b))
	}
}

func gostr(s *C.char) string {
	if s == nil {
		return ""
	}
	return C.GoString(s)
}

func main() {}
