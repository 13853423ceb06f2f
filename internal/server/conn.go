package server

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
	"github.com/v6d-io/v6d-go/internal/store"
)

// requestSpin is how long a connection polls for the client's next request
// before its goroutine sleeps in a blocking read (protocol.Sock.Poll), when
// the client's last request came that soon after the reply before it: a
// client making calls in a row (a Python loop spends tens of microseconds
// between them) finds the daemon awake, and a connection whose client
// pauses does not spin at all. At most half the CPUs spin at once
// (Server.spinners): spinners beyond that starve the clients they wait for.
const requestSpin = 100 * time.Microsecond

// conn is one client connection. Its goroutine owns every field; the
// Server closes sock (under Server.mu) once the goroutine is done, and may
// shut it down at any time to stop it.
type conn struct {
	s          *Server
	sock       *protocol.Sock
	r          *frameReader // clients never send fds, so reading ahead is safe
	sess       *store.Session
	registered bool
	sentArena  bool // the arena fd went to this client already
	out        []byte
	in         []byte        // the body buffer kept between frames (read.go)
	charged    int64         // bytes of the current frame charged to Server.inflight
	spin       bool          // poll for the next request before blocking (recv)
	wake       chan struct{} // the poller's wake-up while parked (park.go)
}

func newConn(s *Server, sock *protocol.Sock) *conn {
	c := &conn{s: s, sock: sock, wake: make(chan struct{}, 1)}
	c.r = &frameReader{c: c}
	return c
}

// serve reads requests until the client goes away, then releases everything
// the connection held. How it reads and waits is described in read.go.
func (c *conn) serve() {
	c.sess = c.s.store.NewSession()
	defer c.sess.Close()
	defer c.r.release()
	if err := c.setTimeouts(); err != nil {
		c.s.log.Warn("closing connection", "err", err)
		return
	}
	var answered time.Time // when the last reply went out
	spin := false          // the client's last request came soon after the reply before it
	for {
		c.spin = spin
		body, err := c.readFrame()
		c.spin = false
		if !answered.IsZero() {
			spin = time.Since(answered) < requestSpin
		}
		var over *overBudgetError
		switch {
		case err == nil:
		case errors.As(err, &over):
			if !c.writeError(status.Errorf(status.NotEnoughMemory, "%v", over)) {
				return
			}
			continue
		case errors.Is(err, protocol.ErrFrameTooLarge):
			c.s.log.Warn("closing connection: frame too large", "err", err)
			return
		case errors.Is(err, errFrameTimeout):
			c.s.log.Warn("closing connection: frame timeout", "timeout", c.s.cfg.FrameTimeout)
			c.writeError(status.Errorf(status.Invalid, "request frame not complete within %v; closing the connection", c.s.cfg.FrameTimeout))
			c.flush(nil)
			return
		case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed):
			return
		default:
			c.s.log.Debug("closing connection", "err", err)
			return
		}
		ok := c.handleFrame(body)
		c.endFrame(body)
		if !ok {
			return
		}
		answered = time.Now()
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
	if cd, ok := req.(*protocol.CreateDataRequest); ok && len(cd.Inline) > 0 {
		return c.handleInline(wire, cd)
	}
	if !c.registered {
		if _, ok := req.(*protocol.RegisterRequest); !ok {
			return c.writeError(errNotRegistered)
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
	frame, at := protocol.BeginFrame(c.out)
	frame = append(frame, protocol.EncodeError(err)...)
	protocol.EndFrame(frame, at)
	c.out = frame
	return c.send(nil)
}

// write sends a reply and then the fds it announced.
func (c *conn) write(reply protocol.Reply, fds []int) bool {
	start := len(c.out)
	frame, at := protocol.BeginFrame(c.out)
	frame, err := protocol.AppendReply(frame, reply)
	if err != nil {
		c.out = frame[:start]
		return c.writeError(status.Errorf(status.UnknownError, "encode reply: %v", err))
	}
	protocol.EndFrame(frame, at)
	c.out = frame
	return c.send(fds)
}

// send sends the replies in c.out, then fds. When the client pipelined
// another complete request (the client library sends its deferred releases
// ahead of a request), the reply waits to go out with the next one: one
// write, one wake-up of the client instead of one per reply.
func (c *conn) send(fds []int) bool {
	if len(fds) == 0 && c.frameBuffered() {
		return true
	}
	return c.flush(fds)
}

// flush writes the replies in c.out, then fds.
func (c *conn) flush(fds []int) bool {
	if len(c.out) > 0 {
		if _, err := c.sock.Write(c.out); err != nil {
			return false
		}
	}
	c.out = c.out[:0]
	if cap(c.out) > 1<<20 {
		c.out = nil
	}
	if len(fds) > 0 {
		if err := protocol.SendFds(c.sock, fds); err != nil {
			c.s.log.Warn("send fd failed", "err", err)
			return false
		}
	}
	return true
}

// frameBuffered reports whether a whole request frame has been read ahead.
func (c *conn) frameBuffered() bool {
	n := c.r.Buffered()
	if n < 8 {
		return false
	}
	hdr, err := c.r.Peek(8)
	return err == nil && uint64(n-8) >= binary.LittleEndian.Uint64(hdr)
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
	var b [1]byte
	n, _, err := unix.Recvfrom(c.sock.Fd(), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	if n == 0 && err == nil {
		return false // orderly shutdown
	}
	return err == nil || errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR)
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
	c.flush(nil) // replies held back for pipelined requests go out before waiting
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
				return false, status.Errorf(status.ConnectionError, "client went away")
			}
		case <-c.s.ctx.Done():
			return false, status.Errorf(status.AlreadyStopped, "the daemon is shutting down")
		}
	}
}

var hostname, _ = os.Hostname()
