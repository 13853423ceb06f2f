package server

import "github.com/v6d-io/v6d-go/internal/protocol"

// arenaSent records which of the arena's fds a connection has sent.
type arenaSent uint8

const (
	sentReadOnly  arenaSent = 1 << iota // the O_RDONLY fd, for reading sealed blobs
	sentReadWrite                       // the O_RDWR fd, for filling new buffers
)

// arenaFds returns the fds to send with a reply that refers to the arena,
// and points each payload at the fd the client must map it through: a
// sealed blob (anything got) at the read-only fd, an unsealed one (a buffer
// the client just created, to fill) at the read-write fd. Each fd goes to a
// client once, with the first reply that needs it, so a client that only
// reads never receives a writable fd (issue 14, "Immutability"); it gets one
// with its first create. The two fds have different numbers, so clients
// that key their mappings by store_fd, as upstream's do, map each fd with
// its own protection.
//
// It rewrites StoreFd of payloads in place: the reply must carry the same
// slice. An unsealed blob got with unsafe is pointed at the read-write fd.
// A transport that passes no fds (TCP) gets none and its payloads are left
// as they are.
func (c *conn) arenaFds(payloads ...protocol.Payload) []int {
	fds := []int{}
	if !c.passFds {
		return fds
	}
	ro, rw := c.s.store.ArenaReadOnlyFd(), c.s.store.ArenaFd()
	for i := range payloads {
		p := &payloads[i]
		if p.StoreFd < 0 {
			continue // the empty blob: nothing to map
		}
		fd, bit := rw, sentReadWrite
		if p.IsSealed {
			fd, bit = ro, sentReadOnly
		}
		p.StoreFd = fd
		if c.sentArena&bit == 0 {
			c.sentArena |= bit
			fds = append(fds, fd)
		}
	}
	return fds
}

// unsend forgets that fds (a result of arenaFds) went to the client: the
// reply that was to carry them was not sent.
func (c *conn) unsend(fds []int) {
	for _, fd := range fds {
		switch fd {
		case c.s.store.ArenaReadOnlyFd():
			c.sentArena &^= sentReadOnly
		case c.s.store.ArenaFd():
			c.sentArena &^= sentReadWrite
		}
	}
}

// directoryFds gives the connection its pin page and returns what
// register_reply.directory announces and the fds that follow it: the
// arena's read-only fd (counted as sent), the directory's and the pin
// page's, which is closed once sent (conn.closeAfterSend). Nothing (nil)
// on a transport without fds, or when the store has no directory: the
// client then gets with round trips.
func (c *conn) directoryFds() (*protocol.DirectoryFds, []int) {
	if !c.passFds {
		return nil, nil
	}
	dir := c.s.store.DirectoryFd()
	if dir < 0 {
		return nil, nil
	}
	pins, err := c.sess.AttachPins()
	if err != nil {
		// Config.MaxPinPages, or the kernel's mapping limit: this client
		// gets by round trip, as with no directory. Said once.
		if c.s.pinsFull.CompareAndSwap(false, true) {
			c.s.log.Warn("no pin page for a new connection: it and the next ones past the limit get objects by round trip "+
				"(each directory connection maps a page; see --max-connections and vm.max_map_count)",
				"max_pin_pages", c.s.cfg.MaxPinPages, "error", err)
		}
		return nil, nil
	}
	ro := c.s.store.ArenaReadOnlyFd()
	c.sentArena |= sentReadOnly
	c.closeAfterSend = append(c.closeAfterSend, pins)
	return &protocol.DirectoryFds{StoreFd: ro, DirectoryFd: dir, PinsFd: pins}, []int{ro, dir, pins}
}
