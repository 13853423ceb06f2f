package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// poller watches the sockets of parked connections: connections idle for
// longer than Config.ParkAfter, or that found no free blocking-reader slot
// (Server.readers). A parked connection's goroutine waits on its wake channel,
// which holds no OS thread, and has dropped its buffers; one goroutine, the
// only thread the poller holds, waits in epoll_wait for all of them.
//
// Every socket is registered EPOLLONESHOT: an event disarms it, so exactly one
// wake-up goes to the connection, which re-arms the socket (arm) the next time
// it parks. A wake-up can be stale (the connection stopped waiting because its
// frame timed out or the server stopped, then the event came); the
// connection's read loop treats every wake-up as "try reading again", so a
// stale one costs one failed non-blocking read.
type poller struct {
	epfd   int
	stopfd int // an eventfd: writing it makes run return
	done   chan struct{}

	mu     sync.Mutex
	conns  map[int32]*conn // by fd: every connection whose socket is in the set
	parked atomic.Int64    // connections waiting in park (for tests and status)
	parks  atomic.Int64    // times a connection parked, ever (for tests)
	held   atomic.Int64    // bytes of buffers the parked connections hold
}

func newPoller() (*poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("server: epoll_create1: %w", err)
	}
	stopfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		_ = unix.Close(epfd)
		return nil, fmt.Errorf("server: eventfd: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(stopfd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, stopfd, &ev); err != nil {
		_ = unix.Close(epfd)
		_ = unix.Close(stopfd)
		return nil, fmt.Errorf("server: epoll_ctl: %w", err)
	}
	p := &poller{epfd: epfd, stopfd: stopfd, done: make(chan struct{}), conns: make(map[int32]*conn)}
	go p.run()
	return p, nil
}

// run delivers readiness events to the parked connections until close.
func (p *poller) run() {
	defer close(p.done)
	events := make([]unix.EpollEvent, 256)
	for {
		n, err := unix.EpollWait(p.epfd, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return // only EBADF or EINVAL: the set is gone
		}
		p.mu.Lock()
		for _, ev := range events[:n] {
			if int(ev.Fd) == p.stopfd {
				p.mu.Unlock()
				return
			}
			if c := p.conns[ev.Fd]; c != nil {
				select {
				case c.wake <- struct{}{}:
				default: // a wake-up is pending already
				}
			}
		}
		p.mu.Unlock()
	}
}

// arm puts c's socket into the set (again), for one readiness event.
func (p *poller) arm(c *conn) error {
	return p.armFor(c, unix.EPOLLIN|unix.EPOLLRDHUP)
}

// watchHangup puts c's socket into the set (again) for one event of its
// client going away (a hang-up or an error), not for bytes to read: for a
// connection waiting in a blocking request (conn.wait), whose client
// sends nothing meanwhile. The event, if any comes, is a wake-up of c;
// a later park re-arms the socket for reading.
func (p *poller) watchHangup(c *conn) error {
	return p.armFor(c, unix.EPOLLRDHUP)
}

// armFor puts c's socket into the set (again) for one event of events
// (EPOLLHUP and EPOLLERR are always reported).
func (p *poller) armFor(c *conn, events uint32) error {
	fd := c.sock.Fd()
	ev := unix.EpollEvent{Events: events | unix.EPOLLONESHOT, Fd: int32(fd)}
	p.mu.Lock()
	defer p.mu.Unlock()
	op := unix.EPOLL_CTL_MOD
	if p.conns[int32(fd)] != c {
		op = unix.EPOLL_CTL_ADD
	}
	if err := unix.EpollCtl(p.epfd, op, fd, &ev); err != nil {
		return fmt.Errorf("server: park connection: epoll_ctl: %w", err)
	}
	p.conns[int32(fd)] = c
	return nil
}

// forget takes c's socket out of the set; it must be called before the
// socket is closed, so that a new socket reusing the fd number is never
// mistaken for c.
func (p *poller) forget(c *conn) {
	fd := c.sock.Fd()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns[int32(fd)] == c {
		delete(p.conns, int32(fd))
		_ = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	}
}

// park waits, holding no thread, until c's socket is readable, deadline
// passes (errFrameTimeout; zero: never) or the server stops. It first drops
// the connection's buffers, so that a parked connection costs its goroutine
// and little else.
func (c *conn) park(deadline time.Time) error {
	c.setStreaming(false) // idle for ParkAfter, or no reader slot: no longer a stream (sched.go)
	c.r.release()
	c.in = nil
	c.out = nil // empty: recv flushed it
	select {
	case <-c.wake: // a stale wake-up of an earlier park
	default:
	}
	if err := c.s.poller.arm(c); err != nil {
		return err
	}
	held := int64(cap(c.in) + cap(c.out))
	if c.r.buf != nil {
		held += int64(cap(*c.r.buf))
	}
	c.s.poller.parks.Add(1)
	c.s.poller.parked.Add(1)
	c.s.poller.held.Add(held)
	defer func() {
		c.s.poller.parked.Add(-1)
		c.s.poller.held.Add(-held)
	}()
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-c.wake:
		return nil
	case <-timeout:
		return errFrameTimeout
	case <-c.s.ctx.Done():
		return net.ErrClosed
	}
}

// close stops run and releases the set. Every connection must be gone.
func (p *poller) close() {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	_, _ = unix.Write(p.stopfd, one[:])
	<-p.done
	_ = unix.Close(p.epfd)
	_ = unix.Close(p.stopfd)
}
