package server

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/store"
)

// conn is one client connection. Its goroutine owns every field.
type conn struct {
	s          *Server
	nc         *net.UnixConn
	r          *bufio.Reader // clients never send fds, so reading ahead is safe
	sess       *store.Session
	registered bool
	sentArena  bool // the arena fd went to this client already
	out        []byte
	in         []byte
}

func newConn(s *Server, nc *net.UnixConn) *conn {
	return &conn{s: s, nc: nc, r: bufio.NewReaderSize(nc, 64<<10)}
}

// serve reads requests until the client goes away, then releases everything
// the connection held.
func (c *conn) serve() {
	c.sess = c.s.store.NewSession()
	defer func() {
		c.sess.Close()
		_ = c.nc.Close()
	}()
	for {
		body, err := protocol.ReadFrame(c.r, c.in, c.s.cfg.MaxFrame)
		if err != nil {
			if errors.Is(err, protocol.ErrFrameTooLarge) {
				c.s.log.Warn("closing connection: frame too large", "err", err)
			} else if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.s.log.Debug("closing connection", "err", err)
			}
			return
		}
		if cap(body) > cap(c.in) && cap(body) <= 1<<20 {
			c.in = body[:0]
		}
		if !c.handleFrame(body) {
			return
		}
	}
}

// handleFrame answers one request; it returns false when the connection must
// close.
func (c *conn) handleFrame(body []byte) bool {
	wire, req, err := protocol.DecodeRequest(body)
	if err != nil {
		return c.writeError(err)
	}
	if _, ok := req.(*protocol.ExitRequest); ok {
		return false
	}
	if !c.registered {
		if _, ok := req.(*protocol.RegisterRequest); !ok {
			return c.writeError(protocol.Errorf(protocol.Invalid, "the connection is not registered yet"))
		}
	}
	reply, fds, err := c.dispatch(req)
	if err != nil {
		return c.writeError(err)
	}
	if reply == nil {
		return true
	}
	reply.ReplyHeader().Type = protocol.ReplyType(wire)
	return c.write(reply, fds)
}

// writeError sends an error reply.
func (c *conn) writeError(err error) bool {
	frame, at := protocol.BeginFrame(c.out[:0])
	frame = append(frame, protocol.EncodeError(err)...)
	protocol.EndFrame(frame, at)
	c.out = frame
	return c.send(frame, nil)
}

// write sends a reply and then the fds it announced.
func (c *conn) write(reply protocol.Reply, fds []int) bool {
	body, err := marshal(reply)
	if err != nil {
		return c.writeError(protocol.Errorf(protocol.UnknownError, "encode reply: %v", err))
	}
	frame, at := protocol.BeginFrame(c.out[:0])
	frame = append(frame, body...)
	protocol.EndFrame(frame, at)
	c.out = frame
	return c.send(frame, fds)
}

func (c *conn) send(frame []byte, fds []int) bool {
	if _, err := c.nc.Write(frame); err != nil {
		return false
	}
	if len(fds) > 0 {
		if err := protocol.SendFds(c.nc, fds); err != nil {
			c.s.log.Warn("send fd failed", "err", err)
			return false
		}
	}
	if cap(c.out) > 1<<20 {
		c.out = nil
	}
	return true
}

// arenaFds returns the fds to send with a reply that refers to the arena:
// the arena fd the first time, nothing afterwards.
func (c *conn) arenaFds(payloads ...protocol.Payload) []int {
	if c.sentArena {
		return []int{}
	}
	for _, p := range payloads {
		if p.StoreFd >= 0 {
			c.sentArena = true
			return []int{p.StoreFd}
		}
	}
	return []int{}
}

// alive reports whether the client is still connected, without consuming
// anything it sent.
func (c *conn) alive() bool {
	raw, err := c.nc.SyscallConn()
	if err != nil {
		return false
	}
	ok := true
	_ = raw.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		if n == 0 && err == nil {
			ok = false // orderly shutdown
		} else if err != nil && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
			ok = false
		}
	})
	return ok
}

// wait blocks until check succeeds, the timeout passes (negative: never), the
// client disconnects or the server stops. It returns check's last result.
func (c *conn) wait(timeout time.Duration, check func() (bool, error)) (bool, error) {
	var deadline <-chan time.Time
	if timeout >= 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C
	}
	c.s.addWaiting(1)
	defer c.s.addWaiting(-1)
	poll := time.NewTicker(250 * time.Millisecond)
	defer poll.Stop()
	for {
		changed := c.s.store.Changed()
		done, err := check()
		if done || err != nil {
			return done, err
		}
		select {
		case <-changed:
		case <-deadline:
			return check()
		case <-poll.C:
			if !c.alive() {
				return false, protocol.Errorf(protocol.ConnectionError, "client went away")
			}
		case <-c.s.ctx.Done():
			return false, protocol.Errorf(protocol.AlreadyStopped, "the daemon is shutting down")
		}
	}
}

var hostname, _ = os.Hostname()
