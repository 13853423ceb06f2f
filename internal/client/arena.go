package client

import (
	"fmt"
	"math"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/v6d-io/v6d-go/internal/shm"
	"github.com/v6d-io/v6d-go/internal/status"
)

// arenaKey identifies a shared-memory file across fds: the device and inode of
// the daemon's memfd, the same in every process and for every fd received.
type arenaKey struct {
	dev, ino uint64
}

// arena is this process's view of one daemon arena, shared by every Client of
// the process that received an fd of it, so that two clients of one daemon map
// it once and a pointer stays valid while any client still uses the arena.
//
// The daemon sends each client a read-only fd of the arena with its first
// get, and a read-write fd only with its first create, each once per
// connection. The read-only mapping is made when the first fd of either kind
// arrives; the writable one on the first create, and private views
// (private.go) on demand, from the fd the arena keeps open for its life. A
// process that has only read holds only the read-only fd, so it cannot map
// the arena writable; the first read-write fd to arrive replaces it (the
// upgrade), and the read-only mapping, with every view into it, stays.
type arena struct {
	key  arenaKey
	size uint64

	// Fields below are guarded by arenas.mu.
	refs     int          // clients (per region they received) using the arena
	ro       *shm.Mapping // PROT_READ, for every blob got
	rw       *shm.Mapping // PROT_READ|PROT_WRITE, nil until a create needs it
	fd       int          // kept for the writable mapping and private views
	writable bool         // fd is open read-write
	roB      []byte       // ro.Bytes(), cached
	rwB      []byte       // rw.Bytes(), cached
	created  uint64       // highest end of a large blob created here (pretouch.go)
	touched  uint64       // the pre-touch mapped the writable view up to here
	touching bool         // the pre-touch goroutine runs

	// unmap is held for reading by the pre-touch while it reads the
	// writable mapping without arenas.mu, and for writing to unmap.
	// Lock order: arenas.mu, then unmap.
	unmap sync.RWMutex
}

// arenas is the process-wide registry of mapped arenas.
var arenas = struct {
	mu sync.Mutex
	m  map[arenaKey]*arena
}{m: make(map[arenaKey]*arena)}

// attachArena takes ownership of fd, an arena fd received from the daemon
// (read-only or read-write), and returns the process's arena for it with one
// more reference. fd is closed now, or with the arena.
func attachArena(fd int) (*arena, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("fstat of received arena fd: %w", err)
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("fcntl of received arena fd: %w", err)
	}
	writable := flags&unix.O_ACCMODE == unix.O_RDWR
	key := arenaKey{dev: st.Dev, ino: st.Ino}

	arenas.mu.Lock()
	defer arenas.mu.Unlock()
	if a, ok := arenas.m[key]; ok {
		a.refs++
		if writable && !a.writable { // the upgrade: keep the writable fd
			a.fd, fd = fd, a.fd
			a.writable = true
		}
		_ = unix.Close(fd)
		return a, nil
	}
	if st.Size <= 0 || uint64(st.Size) > math.MaxInt {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("received arena fd has bad size %d", st.Size)
	}
	size := uint64(st.Size)
	ro, err := shm.Map(fd, size, false)
	if err != nil {
		_ = unix.Close(fd)
		return nil, err
	}
	a := &arena{key: key, size: size, refs: 1, ro: ro, fd: fd, writable: writable, roB: ro.Bytes()}
	arenas.m[key] = a
	return a, nil
}

// detach drops one reference; the last one unmaps the arena, invalidating
// every pointer into it.
func (a *arena) detach() {
	arenas.mu.Lock()
	defer arenas.mu.Unlock()
	a.refs--
	if a.refs > 0 {
		return
	}
	delete(arenas.m, a.key)
	a.unmap.Lock() // waits for a pre-touch chunk under way
	defer a.unmap.Unlock()
	_ = a.ro.Close()
	if a.rw != nil {
		_ = a.rw.Close()
	}
	if a.fd >= 0 {
		_ = unix.Close(a.fd)
		a.fd = -1
	}
	a.roB, a.rwB = nil, nil
}

// view returns the bytes [off, off+size) of the read-only mapping, or of the
// writable one (mapping it on first use) when writable is set. A range outside
// the arena is an error, never a panic: it comes from the daemon's reply.
func (a *arena) view(off, size uint64, writable bool) ([]byte, error) {
	if off > a.size || size > a.size-off {
		return nil, errBadReply("blob [%d, +%d) lies outside the %d-byte arena", off, size, a.size)
	}
	arenas.mu.Lock()
	defer arenas.mu.Unlock()
	b := a.roB
	if writable {
		if a.rw == nil {
			if a.fd < 0 {
				return nil, status.Errorf(status.IOError, "arena is no longer mapped")
			}
			if !a.writable {
				return nil, errBadReply("a writable blob in an arena whose read-write fd was never received")
			}
			rw, err := shm.Map(a.fd, a.size, true)
			if err != nil {
				return nil, status.Errorf(status.IOError, "map arena read-write: %v", err)
			}
			a.rw, a.rwB = rw, rw.Bytes()
		}
		b = a.rwB
	}
	if b == nil {
		return nil, status.Errorf(status.IOError, "arena is no longer mapped")
	}
	return b[off : off+size : off+size], nil
}

// mappedArenas returns how many arenas this process maps (for tests).
func mappedArenas() int {
	arenas.mu.Lock()
	defer arenas.mu.Unlock()
	return len(arenas.m)
}
