package shm

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Mapping is a client's view of an arena whose fd it received from the daemon.
// The Mapping owns the mapping but not the fd: the caller may close the fd as
// soon as Map returns, and the mapping stays valid until Close.
//
// A Mapping is safe for concurrent use, but Close does not know who still uses
// Bytes: the caller must make sure nothing touches the view after Close.
type Mapping struct {
	mu     sync.Mutex
	data   []byte
	closed bool
}

// Map maps the first size bytes of the file fd refers to, MAP_SHARED, with
// PROT_READ, or PROT_READ|PROT_WRITE when writable. Writing through a
// read-only mapping kills the process with SIGSEGV; that is how readers are
// kept from changing sealed objects. size must be positive and at most the
// file's size (FileSize), so the mapping can never fault with SIGBUS on an
// arena, whose size is sealed; a larger size fails with ErrBadSize.
func Map(fd int, size uint64, writable bool) (*Mapping, error) {
	if size == 0 || size > math.MaxInt {
		return nil, fmt.Errorf("%w: cannot map %d bytes", ErrBadSize, size)
	}
	fileSize, err := FileSize(fd)
	if err != nil {
		return nil, err
	}
	if size > fileSize {
		return nil, fmt.Errorf("%w: cannot map %d bytes of a %d-byte file", ErrBadSize, size, fileSize)
	}
	prot := unix.PROT_READ
	if writable {
		prot |= unix.PROT_WRITE
	}
	data, err := unix.Mmap(fd, 0, int(size), prot, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shm: mmap of %d bytes (writable %v): %w", size, writable, err)
	}
	return &Mapping{data: data}, nil
}

// Bytes returns the mapped memory. It is valid until Close; touching it
// afterwards faults. Writing to it faults unless the mapping is writable.
// Bytes returns nil after Close.
func (m *Mapping) Bytes() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.data
}

// Base returns the address of the first mapped byte, or 0 after Close. An
// object at arena offset off lives at Base()+off in this process.
func (m *Mapping) Base() uintptr {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.data == nil {
		return 0
	}
	return uintptr(unsafe.Pointer(unsafe.SliceData(m.data)))
}

// Close unmaps the memory. It is idempotent; only the first call can fail.
func (m *Mapping) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	data := m.data
	m.data = nil
	if err := unix.Munmap(data); err != nil {
		return fmt.Errorf("shm: munmap: %w", err)
	}
	return nil
}

// FileSize returns the size of the file fd refers to (fstat's st_size), so a
// client can map all of the arena it received.
func FileSize(fd int) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, fmt.Errorf("shm: fstat of fd %d: %w", fd, err)
	}
	if st.Size < 0 {
		return 0, errors.New("shm: fstat reported a negative size")
	}
	return uint64(st.Size), nil
}
