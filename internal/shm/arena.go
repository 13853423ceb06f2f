// Package shm owns the daemon's shared memory: one memfd arena, created and
// mapped read-write by the daemon, whose fds are passed to clients that map
// it themselves: a read-only fd to readers (ReadOnlyFd), who can then map it
// read-only only, and the read-write fd to writers, to fill their own
// buffers.
//
// The arena never lives on /dev/shm (so container /dev/shm limits do not
// apply) and is sealed against shrinking and growing, so no process holding
// the fd can truncate it and make every other mapping fault with SIGBUS.
package shm

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// arenaName is the memfd name; it shows in /proc/PID/fd as "/memfd:vineyard-arena".
const arenaName = "vineyard-arena"

// arenaSeals are added right after sizing: the size is fixed for the life of
// the file, and no further seals (such as F_SEAL_WRITE) can be added by anyone.
const arenaSeals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL

// pageSize is the system page size.
var pageSize = uint64(os.Getpagesize())

// fallocate is unix.Fallocate; tests replace it to exercise Trim's fallback.
var fallocate = unix.Fallocate

// Arena is a sealed, fixed-size memfd and the daemon's read-write mapping of
// it, plus a second, read-only fd of the same file for clients that only
// read (ReadOnlyFd). The Arena owns both fds and the mapping; Close releases
// them.
//
// An Arena is safe for concurrent use. Close waits for Prefault and Trim calls
// in progress, but does not know who still uses Bytes: the caller must make
// sure nothing touches the daemon's view after Close.
type Arena struct {
	mu     sync.RWMutex // write-locked by Close only
	fd     int
	rofd   int // the same file opened O_RDONLY
	size   uint64
	data   []byte
	closed bool
}

// Create makes an arena of size bytes, rounded up to a multiple of the page
// size: a memfd named "vineyard-arena" (close-on-exec, sealable, and
// non-executable where the kernel supports MFD_NOEXEC_SEAL), truncated to that
// size, sealed with F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_SEAL, given mode 0400
// (so a process holding only the read-only fd cannot reopen it read-write
// through /proc, unless privileged), reopened read-only (ReadOnlyFd), and
// mapped MAP_SHARED read-write. Its pages are allocated on first touch; see
// Prefault. A partial failure releases whatever was created.
func Create(size uint64) (*Arena, error) {
	if size == 0 || size > math.MaxInt-pageSize {
		return nil, fmt.Errorf("%w: cannot create an arena of %d bytes", ErrBadSize, size)
	}
	size = (size + pageSize - 1) &^ (pageSize - 1)

	fd, data, err := sealedMemfd(arenaName, size, 0)
	if err != nil {
		return nil, fmt.Errorf("%w (a %d-byte arena)", err, size)
	}
	rofd, err := reopenReadOnly(fd)
	if err != nil {
		_ = unix.Munmap(data)
		unix.Close(fd)
		return nil, fmt.Errorf("shm: read-only reopen of a %d-byte arena: %w", size, err)
	}
	return &Arena{fd: fd, rofd: rofd, size: size, data: data}, nil
}

// reopenReadOnly opens the file fd refers to again, O_RDONLY and
// close-on-exec: a new open file description, through which no one can map
// the file writable (MAP_SHARED with PROT_WRITE fails with EACCES) or write
// it. A copy-on-write mapping (MAP_PRIVATE, as MapPrivate makes) is still
// allowed.
func reopenReadOnly(fd int) (int, error) {
	for {
		rofd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", fd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if !errors.Is(err, unix.EINTR) {
			return rofd, err
		}
	}
}

// Fd returns the arena's memfd, or -1 after Close. The Arena keeps ownership:
// the caller may pass it to clients (SCM_RIGHTS duplicates it) but must not
// close it. It is close-on-exec.
func (a *Arena) Fd() int {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		return -1
	}
	return a.fd
}

// ReadOnlyFd returns a second fd of the arena's memfd, opened O_RDONLY, or
// -1 after Close: the fd for clients that only read. Mapping it MAP_SHARED
// allows PROT_READ only, so such a client cannot change sealed objects
// through its mapping; MAP_PRIVATE copy-on-write views work. The Arena keeps
// ownership, as for Fd. It is close-on-exec.
func (a *Arena) ReadOnlyFd() int {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		return -1
	}
	return a.rofd
}

// Size returns the arena's size in bytes, a multiple of the page size. It
// never changes: the file is sealed against shrinking and growing.
func (a *Arena) Size() uint64 { return a.size }

// Bytes returns the daemon's read-write view of the whole arena, Size() bytes
// long. It is valid until Close; touching it afterwards faults. Bytes returns
// nil after Close.
func (a *Arena) Bytes() []byte {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.data
}

// Prefault allocates and maps every page of the arena now, so that no client
// pays for first touch later. It uses MADV_POPULATE_WRITE (Linux 5.14 and
// later) and, where that is unsupported, writes to one word of every page
// (an atomic add of zero, which keeps the contents). It takes about 1 µs per
// 4 KiB page and charges the pages to the daemon's memory cgroup. An error
// from MADV_POPULATE_WRITE other than EINVAL, such as ENOMEM, is returned.
func (a *Arena) Prefault() error {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		return ErrClosed
	}
	if err := populate(a.data); err != nil {
		return fmt.Errorf("shm: prefault of a %d-byte arena: %w", a.size, err)
	}
	return nil
}

// PrefaultRange makes the pages of [offset, offset+size) resident, as
// Prefault does for the whole arena, without changing their contents: it is
// safe while clients use the range. A range outside the arena fails with
// ErrOutOfBounds.
func (a *Arena) PrefaultRange(offset, size uint64) error {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		return ErrClosed
	}
	if offset > a.size || size > a.size-offset {
		return fmt.Errorf("%w: prefault of [%d, +%d) in a %d-byte arena", ErrOutOfBounds, offset, size, a.size)
	}
	start := offset &^ (pageSize - 1)
	end := min((offset+size+pageSize-1)&^(pageSize-1), a.size)
	if end <= start {
		return nil
	}
	if err := populate(a.data[start:end]); err != nil {
		return fmt.Errorf("shm: prefault of [%d, %d): %w", start, end, err)
	}
	return nil
}

// populate allocates and maps every page of b (page-aligned, shared)
// without changing its contents: MADV_POPULATE_WRITE, or where the kernel
// does not know it (before 5.14, EINVAL) a write to one word of every page.
func populate(b []byte) error {
	err := unix.Madvise(b, unix.MADV_POPULATE_WRITE)
	if errors.Is(err, unix.EINVAL) {
		touchPages(b)
		return nil
	}
	return err
}

// touchPages write-faults every page of b, which must be page-aligned, without
// changing its contents.
func touchPages(b []byte) {
	for off := uint64(0); off < uint64(len(b)); off += pageSize {
		atomic.AddUint64((*uint64)(unsafe.Pointer(&b[off])), 0)
	}
}

// Trim returns to the kernel the physical pages of the page-aligned interior
// of [offset, offset+size) and reports its length in bytes, an upper bound on
// the memory actually released (pages never touched cost nothing to begin
// with). The partial pages at either end are left alone. It punches a hole in
// the memfd (fallocate FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE), falling back
// to madvise MADV_REMOVE.
//
// Afterwards every process mapping the range reads zeros there and pays first
// touch again on write, so the caller must only trim memory nobody uses (free
// extents of the allocator). A range outside the arena fails with
// ErrOutOfBounds.
func (a *Arena) Trim(offset, size uint64) (released uint64, err error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		return 0, ErrClosed
	}
	if offset > a.size || size > a.size-offset {
		return 0, fmt.Errorf("%w: trim of [%d, +%d) in a %d-byte arena", ErrOutOfBounds, offset, size, a.size)
	}
	start := (offset + pageSize - 1) &^ (pageSize - 1)
	end := (offset + size) &^ (pageSize - 1)
	if end <= start {
		return 0, nil
	}
	err = fallocate(a.fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, int64(start), int64(end-start))
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		err = unix.Madvise(a.data[start:end], unix.MADV_REMOVE)
	}
	if err != nil {
		return 0, fmt.Errorf("shm: trim of [%d, %d): %w", start, end, err)
	}
	return end - start, nil
}

// Close unmaps the daemon's view and closes both fds of the memfd. The
// memory itself lives on while clients still map it or hold an fd. Close is idempotent;
// only the first call can fail.
func (a *Arena) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	a.closed = true
	var errs []error
	if err := unix.Munmap(a.data); err != nil {
		errs = append(errs, fmt.Errorf("shm: munmap of the arena: %w", err))
	}
	if err := unix.Close(a.fd); err != nil {
		errs = append(errs, fmt.Errorf("shm: close of the arena fd: %w", err))
	}
	if err := unix.Close(a.rofd); err != nil {
		errs = append(errs, fmt.Errorf("shm: close of the read-only arena fd: %w", err))
	}
	a.data, a.fd, a.rofd = nil, -1, -1
	return errors.Join(errs...)
}
