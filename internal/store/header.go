package store

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/v6d-io/v6d-go/internal/shm"
)

// epoch is the meta epoch in the arena header: it moves when a tree a
// client may have cached changes.
type epoch struct{ s *Store }

// The arena header's layout is defined in internal/shm (shm.HeaderSize, ...);
// these names keep the store's uses short.
const (
	// HeaderSize is the size of the arena header.
	HeaderSize = shm.HeaderSize
	// EpochOffset is the offset of the meta epoch in the arena.
	EpochOffset = shm.HeaderEpochOffset
)

// initHeader allocates the header at offset 0 and writes its magic.
func (part *epoch) initHeader() error {
	s := part.s
	off, err := s.alloc.Alloc(HeaderSize)
	if err != nil {
		return err
	}
	if off != 0 {
		panic("store: the arena header must be the first allocation")
	}
	s.hwm = HeaderSize
	if b := s.arena.Bytes(); len(b) >= HeaderSize {
		copy(b, shm.HeaderMagic)
		binary.NativeEndian.PutUint64(b[EpochOffset:], 0)
	}
	return nil
}

// epochWord returns the meta epoch in the arena, or nil without a mapping.
func (part *epoch) epochWord() *uint64 {
	s := part.s
	b := s.arena.Bytes()
	if len(b) < HeaderSize {
		return nil
	}
	return (*uint64)(unsafe.Pointer(&b[EpochOffset]))
}

// epochApply is the meta epoch's subscription to the store's events
// (events.go): the epoch moves when a tree a client may have cached
// changes or goes (a delete of what was never sealed changes no tree).
func (part *epoch) epochApply(e Event) {
	s := part.s
	switch e.Kind {
	case EventTreeChanged:
		s.ep.bumpEpochLocked()
	case EventDeleted:
		if e.Flags&FlagUnsealed == 0 {
			s.ep.bumpEpochLocked()
		}
	}
}

// bumpEpochLocked publishes that existing metadata changed, under s.mu and
// before the reply, so a client that sees the reply and then reads the
// epoch sees the new value.
func (part *epoch) bumpEpochLocked() {
	s := part.s
	if w := s.ep.epochWord(); w != nil && !s.closed {
		atomic.AddUint64(w, 1)
	}
}

// Epoch returns the current meta epoch.
func (s *Store) Epoch() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ep.epochLocked()
}

func (part *epoch) epochLocked() uint64 {
	s := part.s
	if w := s.ep.epochWord(); w != nil && !s.closed {
		return atomic.LoadUint64(w)
	}
	return 0
}
