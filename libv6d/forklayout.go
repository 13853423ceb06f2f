package main

/*
#include <stdint.h>
#include <stdlib.h>
#include "dirlayout.h"

void v6dshim_fork_attach(uint64_t handle, uintptr_t dir, size_t dir_size, uintptr_t arena,
                         size_t arena_size, uintptr_t pins, size_t pin_size);
void v6dshim_fork_detach(uint64_t handle);
*/
import "C"

import (
	"unsafe"

	"github.com/v6d-io/v6d-go/internal/client"
	"github.com/v6d-io/v6d-go/internal/shm"
)

// The reader for forked children (forkread.c) reads the directory and pin
// pages through its own copy of their layout (dirlayout.h); each constant
// must equal internal/shm's. Each line below converts both differences to
// an unsigned constant, which fails to compile when one is negative: the
// package builds only while the two agree.
const (
	_ = uint64(C.V6D_DIR_MAGIC_WORD-shm.DirMagicWord) + uint64(shm.DirMagicWord-C.V6D_DIR_MAGIC_WORD)
	_ = uint64(C.V6D_DIR_HEADER_SIZE-shm.DirHeaderSize) + uint64(shm.DirHeaderSize-C.V6D_DIR_HEADER_SIZE)
	_ = uint64(C.V6D_DIR_ENTRY_SIZE-shm.DirEntrySize) + uint64(shm.DirEntrySize-C.V6D_DIR_ENTRY_SIZE)
	_ = uint64(C.V6D_DIR_MAX_PROBE-shm.DirMaxProbe) + uint64(shm.DirMaxProbe-C.V6D_DIR_MAX_PROBE)
	_ = uint64(C.V6D_DIR_RECORD_HEADER-shm.DirRecordHeader) + uint64(shm.DirRecordHeader-C.V6D_DIR_RECORD_HEADER)
	_ = uint64(C.V6D_DIR_BLOB_SIZE-shm.DirBlobSize) + uint64(shm.DirBlobSize-C.V6D_DIR_BLOB_SIZE)
	_ = uint64(C.V6D_FORK_SLOT_FIRST-shm.ForkSlotFirst) + uint64(shm.ForkSlotFirst-C.V6D_FORK_SLOT_FIRST)
	_ = uint64(C.V6D_FORK_SLOT_LAST-shm.ForkSlotLast) + uint64(shm.ForkSlotLast-C.V6D_FORK_SLOT_LAST)
	_ = uint64(C.V6D_FORK_PID_OFFSET-shm.ForkPidOffset) + uint64(shm.ForkPidOffset-C.V6D_FORK_PID_OFFSET)
	_ = uint64(C.V6D_FORK_WORDS_END-shm.ForkWordsEnd) + uint64(shm.ForkWordsEnd-C.V6D_FORK_WORDS_END)
)

// forkAttach records where client h's mappings lie, for its forked
// children (forkread.c). handlesMu must be held.
func forkAttach(h uint64, c *client.Client) {
	dir, pins, arena, ok := c.ForkView()
	if !ok {
		return
	}
	C.v6dshim_fork_attach(C.uint64_t(h), addr(dir), C.size_t(len(dir)), addr(arena), C.size_t(len(arena)),
		addr(pins), C.size_t(len(pins)))
}

// forkDetach forgets client h's mappings, before it closes. handlesMu must
// be held.
func forkDetach(h uint64) { C.v6dshim_fork_detach(C.uint64_t(h)) }

// addr is the address of a mapping (memory outside Go's heap).
func addr(b []byte) C.uintptr_t { return C.uintptr_t(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }
