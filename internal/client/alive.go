package client

import (
	"errors"

	"golang.org/x/sys/unix"
)

// Connected reports whether the connection to the daemon is alive: false
// once the client is closed, used in a forked child, its connection was
// lost (a call failed on it), or the daemon hung up (a daemon that died
// closes its end; a poll of the socket that never waits sees it). It never
// blocks: while another call holds the connection it only polls.
//
// A true answer may be stale at once (the daemon may die right after); a
// false one is final, and from then on the tree cache answers no get: each
// goes to the connection and fails there with ConnectionError. The cache's
// periodic check (cacheCheck) asks too, so a cached get also fails soon
// after the daemon died when nobody asked.
func (c *Client) Connected() bool {
	ok := false
	switch {
	case c.forked() || c.isClosed.Load():
	case c.mu.TryLock():
		ok = !c.w.closed && c.w.lost == nil && !hungUp(c.w.conn.Fd())
		c.mu.Unlock()
	default:
		// A call is in flight, or Close runs. Close marks isClosed before
		// it closes the socket, so checking it after the poll makes a poll
		// of a closed (or reused) descriptor harmless.
		ok = !hungUp(c.w.conn.Fd()) && !c.isClosed.Load()
	}
	if !ok {
		c.state.cache.dead.Store(true) // the tree cache answers no more (cache.go)
	}
	return ok
}

// hungUp reports whether the peer of the socket fd closed it, or the socket
// is in error, without waiting.
func hungUp(fd int) bool {
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
	for {
		n, err := unix.Poll(p, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return true
		}
		return n > 0 && p[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0
	}
}
