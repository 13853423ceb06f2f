package store

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"
)

// The arena's first page is a header the daemon writes and clients read
// through their read-only mapping of the arena (docs/protocol.md, "Arena
// header"); blobs are allocated after it.
//
//	offset 0  magic  "v6d-go\x00\x01" (layout version 1)
//	offset 8  meta epoch, uint64, native byte order, written atomically
//
// The meta epoch grows whenever an object or blob is deleted or the metadata
// of an existing object changes (labels, persist, names). A client that
// cached a metadata tree under epoch e may reuse it, without a round trip,
// as long as the epoch still reads e.
const (
	// HeaderSize is the size of the arena header.
	HeaderSize = 4096
	// EpochOffset is the offset of the meta epoch in the arena.
	EpochOffset = 8
)

// headerMagic identifies the header layout.
var headerMagic = [8]byte{'v', '6', 'd', '-', 'g', 'o', 0, 1}

// initHeader allocates the header at offset 0 and writes its magic.
func (s *Store) initHeader() error {
	off, err := s.alloc.Alloc(HeaderSize)
	if err != nil {
		return err
	}
	if off != 0 {
		panic("store: the arena header must be the first allocation")
	}
	if b := s.arena.Bytes(); len(b) >= HeaderSize {
		copy(b, headerMagic[:])
		binary.NativeEndian.PutUint64(b[EpochOffset:], 0)
	}
	return nil
}

// epochWord returns the meta epoch in the arena, or nil without a mapping.
func (s *Store) epochWord() *uint64 {
	b := s.arena.Bytes()
	if len(b) < HeaderSize {
		return nil
	}
	return (*uint64)(unsafe.Pointer(&b[EpochOffset]))
}

// bumpEpochLocked publishes that existing metadata changed. Callers hold
// s.mu and call it before replying, so a client that sees the reply and then
// reads the epoch sees the new value.
func (s *Store) bumpEpochLocked() {
	if w := s.epochWord(); w != nil && !s.closed {
		atomic.AddUint64(w, 1)
	}
}

// Epoch returns the current meta epoch.
func (s *Store) Epoch() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epochLocked()
}

func (s *Store) epochLocked() uint64 {
	if w := s.epochWord(); w != nil && !s.closed {
		return atomic.LoadUint64(w)
	}
	return 0
}
