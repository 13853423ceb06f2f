package client

import (
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Fork detection without a system call. A forked child must get ErrForked
// before it touches anything of its parent's connection (the directory,
// the pin slots, the socket), and every get checks it, so it must be cheap:
// getpid is a system call (about 0.3 µs here, several per get). Instead the
// process keeps a token in a page marked MADV_WIPEONFORK, which a child
// sees zeroed; each client remembers the token of the process that made it,
// so a client is used in its own process exactly when the page still holds
// its token. Where the kernel lacks MADV_WIPEONFORK (before 4.14), clients
// compare getpid.
//
// Through libv6d no forked child gets this far: the C shim (libv6d/v6d.c)
// refuses every call in a child forked from the process that loaded the
// library with V6D_FORKED before entering Go, since the Go runtime does not
// survive fork() and entering it there can hang. This check is for Go callers
// of the package and stays as a second line.

var forkMark struct {
	once sync.Once
	word *uint64 // in the wipe-on-fork page; nil: unsupported
}

// processToken returns this process's token for a new client (0: use
// getpid). A child's first client sets a new one: its parent's clients'
// tokens no longer match.
func processToken() uint64 {
	forkMark.once.Do(func() {
		page, err := unix.Mmap(-1, 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return
		}
		if unix.Madvise(page, unix.MADV_WIPEONFORK) != nil {
			_ = unix.Munmap(page)
			return
		}
		forkMark.word = (*uint64)(unsafe.Pointer(&page[0]))
	})
	w := forkMark.word
	if w == nil {
		return 0
	}
	if v := atomic.LoadUint64(w); v != 0 {
		return v
	}
	token := uint64(time.Now().UnixNano())<<1 | 1 ^ uint64(os.Getpid())<<40
	atomic.CompareAndSwapUint64(w, 0, token)
	return atomic.LoadUint64(w)
}

// forked reports whether the client is used in a process forked from the one
// that made it.
func (c *Client) forked() bool {
	if c.token != 0 {
		return atomic.LoadUint64(forkMark.word) != c.token
	}
	return os.Getpid() != c.pid
}
