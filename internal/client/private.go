package client

import (
	"sync"
	"unsafe"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/shm"
	"github.com/v6d-io/v6d-go/internal/status"
)

// Private views: a copy-on-write mapping of one blob, for consumers (such as
// torch) that cannot be handed read-only memory. Reads share the store's
// pages; a write copies the page it touches into the process and never reaches
// the store or another reader.
//
// A view holds its own reference to the blob for as long as it is mapped: a
// page not yet written still shows the arena, so the blob's memory must not
// be freed or reused under it. That reference belongs to the connection, so
// a Client closed while views are live keeps its connection open (and its
// mappings) until the last of them is unmapped; Close returns at once and the
// client refuses every other call.
//
// views.mu is a leaf: it is taken after Client.mu, Client.state and arenas.mu,
// and nothing else is taken while it is held.
var views = struct {
	mu      sync.Mutex
	byAddr  map[uintptr]*privateView // by the address of the view's first byte
	live    map[*Client]int          // live views per client
	closing map[*Client]bool         // closed clients waiting for their last view
}{
	byAddr:  make(map[uintptr]*privateView),
	live:    make(map[*Client]int),
	closing: make(map[*Client]bool),
}

// privateView is one mapping made by MapPrivate.
type privateView struct {
	c  *Client
	id ids.ObjectID
	m  *shm.Mapping
}

// MapPrivate maps a copy-on-write view of blob id, which the client must hold
// (got, or sealed by it), and returns exactly the blob's bytes. The slice is
// writable: reads share the store's physical pages (no copy, nothing faulted
// in up front, so the cost does not depend on size); the first write to a
// 4 KiB page copies that page into this process. Writes never reach the store
// or any other reader.
//
// The view takes a reference to the blob of its own (local, no round trip),
// so it stays valid, and the blob's memory is never reused, until
// UnmapPrivate, even after the caller's own Release or Close. Each call makes
// a new mapping. The empty blob and non-blob ids are Invalid, an unsealed
// blob ObjectNotSealed, a blob not held ObjectNotExists. It never waits behind
// another goroutine's exchange.
func (c *Client) MapPrivate(id ids.ObjectID) ([]byte, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if c.IsRPC() {
		return nil, errNeedsShm("a private view (MapPrivate)")
	}
	if id == ids.EmptyBlob || !id.IsBlob() {
		return nil, status.Errorf(status.Invalid, "%v is not a blob with bytes to map", id)
	}
	c.state.Lock()
	defer c.state.Unlock()
	b, ok := c.state.blobs[id]
	if ok && b.pins == 0 && b.owned {
		return nil, status.Errorf(status.ObjectNotSealed, "blob %v is not sealed yet", id)
	}
	if !ok || b.pins == 0 || len(b.ro) == 0 {
		return nil, errNotHeld(id)
	}
	m, data, err := mapPrivate(b.ro)
	if err != nil {
		return nil, err
	}
	views.mu.Lock()
	if c.isClosed.Load() {
		// Close has decided already whether to wait for views; too late.
		views.mu.Unlock()
		_ = m.Close()
		return nil, ErrClosed
	}
	views.byAddr[uintptr(unsafe.Pointer(unsafe.SliceData(data)))] = &privateView{c: c, id: id, m: m}
	views.live[c]++
	views.mu.Unlock()
	b.pins++ // c.state is held: the blob cannot be released meanwhile
	return data, nil
}

// mapPrivate maps a copy-on-write view of ro, a view into an arena of the
// process.
func mapPrivate(ro []byte) (*shm.Mapping, []byte, error) {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(ro)))
	arenas.mu.Lock()
	defer arenas.mu.Unlock()
	for _, a := range arenas.m {
		if len(a.roB) == 0 {
			continue
		}
		base := uintptr(unsafe.Pointer(unsafe.SliceData(a.roB)))
		if p < base || p-base >= uintptr(len(a.roB)) {
			continue
		}
		if a.fd < 0 {
			break
		}
		m, data, err := shm.MapPrivate(a.fd, uint64(p-base), uint64(len(ro)))
		if err != nil {
			return nil, nil, status.Errorf(status.IOError, "map a private view: %v", err)
		}
		return m, data, nil
	}
	return nil, nil, status.Errorf(status.IOError, "arena is no longer mapped")
}

// UnmapPrivate unmaps the view MapPrivate returned whose first byte is at p,
// then drops the view's reference to its blob (telling the daemon if it was
// the client's last). The view must not be touched afterwards. It needs no
// client: it works after Close, and the last view of a closed client
// finishes its Close. An address that is not a live view's first byte is
// Invalid and changes nothing.
func UnmapPrivate(p uintptr) error {
	views.mu.Lock()
	v, ok := views.byAddr[p]
	if !ok {
		views.mu.Unlock()
		return status.Errorf(status.Invalid, "%#x is not a live private view (already unmapped?)", p)
	}
	delete(views.byAddr, p)
	views.live[v.c]--
	last := views.live[v.c] == 0
	finish := last && views.closing[v.c]
	if last {
		delete(views.live, v.c)
		delete(views.closing, v.c)
	}
	views.mu.Unlock()

	// Unmap before the reference goes: the memory may be reused after it.
	err := v.m.Close()
	if finish {
		finishClose(v.c)
	} else if e := v.c.Release(v.id); e != nil && status.CodeOf(e) != status.ConnectionError {
		// A closed or broken connection has released everything already.
		return e
	}
	if err != nil {
		return status.Errorf(status.IOError, "unmap private view: %v", err)
	}
	return nil
}

// PrivateViews returns the number of live private views in the process (for
// leak checks in tests).
func PrivateViews() int {
	views.mu.Lock()
	defer views.mu.Unlock()
	return len(views.byAddr)
}

// waitForViews is called by Close once the client is marked closed: it
// reports whether private views of c are live, in which case the last
// UnmapPrivate finishes the Close. c.mu must be held.
func waitForViews(c *Client) bool {
	views.mu.Lock()
	defer views.mu.Unlock()
	if views.live[c] == 0 {
		return false
	}
	views.closing[c] = true
	return true
}

// finishClose disconnects a closed client c whose last private view is
// gone.
func finishClose(c *Client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.disconnectLocked()
}
