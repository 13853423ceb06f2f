package server

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
	"github.com/v6d-io/v6d-go/internal/store"
)

// conn is one client connection. Its goroutine owns every field; the
// Server closes sock (under Server.mu) once the goroutine is done, and may
// shut it down at any time to stop it.
type conn struct {
	s          *Server
	sock       *protocol.Sock
	r          *frameReader // clients never send fds, so reading ahead is safe
	sess       *store.Session
	registered bool
	passFds    bool      // the transport passes fds (UNIX sockets); else none is ever sent
	secret     []byte    // not empty: register must present it (rpc.go)
	tcp        *tcpPeer  // a TCP client's addresses (rpc.go); nil on the UNIX socket
	registerBy time.Time // a TCP client must have registered by then (rpc.go)
	sentArena  arenaSent // which arena fds went to this client already (fds.go)
	// closeAfterSend are fds the connection owns until they are sent (a
	// pin page's, fds.go): flush closes them after sending.
	closeAfterSend []int
	trailing       uint64 // bytes of the current request still unread on the stream
	pipedCounted   bool   // the current pipelined request was counted handled (createLeased)
	out            []byte
	in             []byte        // the body buffer kept between frames (read.go)
	charged        int64         // bytes of the current frame charged to Server.inflight
	reqWait        time.Duration // how long a wait for a request may last (setTimeouts)
	wake           chan struct{} // the poller's wake-up while parked (park.go)
	// Whether the client streams pipelined puts (sched.go): the window
	// of the last put counted and the puts counted in it.
	streaming  bool
	pipeWindow int64
	pipePuts   int

	rs responder // answers the current request (responder.go)

	// upstream is set for a client that registered without naming our
	// extensions: upstream's client, which never sends release_request. The
	// references its seals and gets took are released when it deletes the
	// objects (delData; docs/protocol.md, "Upstream clients").
	upstream bool

	backlog backlog // where its stream stands, for the barrier (backlog.go)

	// writing maps a stream to the blob get_next_stream_chunk handed out
	// last to this writer, still unsealed (streams.go).
	writing map[ids.ObjectID]ids.ObjectID
}

// newConn returns a connection of a UNIX-socket client, which gets the
// arena fd. Other listeners serve the same handlers with passFds false.
func newConn(s *Server, sock *protocol.Sock) *conn {
	c := &conn{s: s, sock: sock, wake: make(chan struct{}, 1), passFds: true}
	c.r = &frameReader{c: c}
	return c
}

// serve reads requests until the client goes away, then releases everything
// the connection held. How it reads and waits is described in read.go.
func (c *conn) serve() {
	c.sess = c.s.store.NewSession()
	c.sess.SetBacklog(c)
	defer c.sess.Close()
	defer c.leaveStreams() // before the session closes: chunks it held go first
	defer c.setStreaming(false)
	defer c.closeSent() // fds never sent (the client went away first)
	defer c.r.release()
	if err := c.setTimeouts(); err != nil {
		c.s.log.Warn("closing connection", "err", err)
		return
	}
	for {
		body, err := c.readFrame()
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
			if c.preAuth() {
				c.closeWithError(status.Errorf(status.Invalid,
					"%v: a client must register (register_request) before it sends anything larger; closing the connection", err))
			}
			return
		case errors.Is(err, errRegisterTimeout):
			c.s.log.Warn("closing connection: no registration in time", "timeout", c.s.cfg.RegisterTimeout, "client", c.tcp.remote)
			c.closeWithError(status.Errorf(status.ConnectionFailed,
				"no register_request within %v of connecting; closing the connection", c.s.cfg.RegisterTimeout))
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
		c.frameHandled()
		if !ok {
			return
		}
	}
}

// handleFrame answers one request; it returns false when the connection must
// close. Every request goes through the handler table; the bytes a request
// announces after its frame (protocol.Frame.Trailing) are always consumed,
// whether its fields decoded, it was allowed and its handler succeeded or
// not, so they are never read as requests. When their count cannot be known
// or is over the frame limit, the connection closes with an error instead.
func (c *conn) handleFrame(body []byte) bool {
	start := c.s.m.begin()
	f, err := protocol.DecodeRequest(body)
	if errors.Is(err, protocol.ErrUnframed) {
		return c.closeWithError(status.Errorf(status.Invalid, "%v", err))
	}
	if limit := c.trailingLimit(f.Kind); f.Trailing > limit {
		return c.closeWithError(status.Errorf(status.Invalid,
			"%s announces %d bytes after its frame, limit %d", f.Wire, f.Trailing, limit))
	}
	if f.Trailing > 0 && c.preAuth() {
		return c.closeWithError(status.Errorf(status.Invalid,
			"%s announces %d bytes after its frame before the client registered; closing the connection", f.Wire, f.Trailing))
	}
	c.trailing = f.Trailing
	c.s.m.requests.Inc(int(f.Kind))
	var reply protocol.Reply
	var fds []int
	switch {
	case err != nil:
	case !c.registered && f.Kind != protocol.KindRegister && f.Kind != protocol.KindExit:
		err = errNotRegistered
	default:
		if c.sess.HasHolds() {
			c.sess.RescanPins() // pins cleared since count as released by this request
		}
		if idl := c.visibleIDs(f.Req); len(idl) > 0 {
			c.sess.Visible(idl) // before the handler looks (backlog.go)
		}
		reply, fds, err = c.answer(f.Kind, f.Req)
	}
	if c.trailing > 0 {
		if _, derr := io.CopyN(io.Discard, c.r, int64(c.trailing)); derr != nil {
			return false // the client went away mid-request
		}
		c.trailing = 0
	}
	c.s.m.done(f.Kind, start)
	if p := pipelined(f.Req); p != nil {
		// No reply: the client does not wait for one. A failure goes out
		// as a frame the client reads ahead of its next reply. One that
		// reached the store was counted there, with its effects.
		if !c.pipedCounted {
			c.sess.PipelinedDone()
		}
		c.pipedCounted = false
		switch {
		case errors.Is(err, errExit):
			return false
		case err != nil:
			c.s.m.requestError(err)
			return c.writeFrame(protocol.EncodePipelinedError(p.ID, err))
		case len(c.out) > 0: // an earlier failure's frame, held while this request was buffered
			return c.send(nil)
		}
		return true
	}
	c.noteRequest() // sched.go
	switch {
	case errors.Is(err, errExit):
		return false
	case err != nil:
		return c.writeError(err)
	case reply == nil: // the handler answered None
		return true
	}
	reply.ReplyHeader().Type = f.Kind.Reply()
	return c.write(reply, fds)
}

// answer runs the handler of kind for req through the connection's
// responder and returns its answer: the reply (nil for none), its fds, or
// the error to send.
func (c *conn) answer(kind protocol.Kind, req protocol.Request) (protocol.Reply, []int, error) {
	c.rs.c = c
	return c.rs.answer(kind, req)
}

// readTrailing reads the next len(dst) of the current request's trailing
// bytes into dst.
func (c *conn) readTrailing(dst []byte) error {
	if uint64(len(dst)) > c.trailing {
		return status.Errorf(status.Invalid, "reading %d bytes past the request's trailing bytes", len(dst))
	}
	n, err := io.ReadFull(c.r, dst)
	c.trailing -= uint64(n)
	if err != nil {
		return status.Errorf(status.ConnectionError, "reading the request's trailing bytes: %v", err)
	}
	return nil
}

// closeWithError sends an error reply and reports that the connection must
// close.
func (c *conn) closeWithError(err error) bool {
	c.writeError(err)
	c.flush(nil)
	return false
}

// writeError sends an error reply.
func (c *conn) writeError(err error) bool {
	c.s.m.requestError(err)
	return c.writeFrame(protocol.EncodeError(err))
}

// writeFrame sends body as a frame.
func (c *conn) writeFrame(body []byte) bool {
	frame, at := protocol.BeginFrame(c.out)
	frame = append(frame, body...)
	protocol.EndFrame(frame, at)
	c.out = frame
	return c.send(nil)
}

// pipelined returns req when it is a pipelined create_data (answered only
// when it fails), else nil.
func pipelined(req protocol.Request) *protocol.CreateDataRequest {
	if r, ok := req.(*protocol.CreateDataRequest); ok && r != nil && r.Pipelined {
		return r
	}
	return nil
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
	if n := len(frame) - at - 8; n > c.s.cfg.MaxReplyBytes {
		c.out = frame[:start]
		c.unsend(fds) // the fds did not go out with it
		if cap(c.out) > 1<<20 {
			c.out = nil
		}
		return c.writeError(status.Errorf(status.Invalid,
			"the reply would be %d bytes, over the daemon's limit of %d: ask for less at a time", n, c.s.cfg.MaxReplyBytes))
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
		err := protocol.SendFds(c.sock, fds)
		c.closeSent()
		if err != nil {
			c.s.log.Warn("send fd failed", "err", err)
			return false
		}
	}
	return true
}

// closeSent closes the fds the connection owned until they were sent.
func (c *conn) closeSent() {
	for _, fd := range c.closeAfterSend {
		_ = unix.Close(fd)
	}
	c.closeAfterSend = c.closeAfterSend[:0]
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
// check reports, when its condition does not hold, the key whose event may
// change that (store.Store.Watch): the wait wakes for that key only. That
// the client went away is learnt from the poller (a hang-up of the socket,
// poller.watchHangup), not by polling.
func (c *conn) wait(timeout time.Duration, check func() (bool, store.WaitKey, error)) (bool, error) {
	return c.waitFor(timeout, func() (bool, <-chan struct{}, func(), error) {
		done, key, err := check()
		if done || err != nil {
			return done, nil, nil, err
		}
		woken, stop := c.s.store.Watch(key)
		// Checked again once watched: an event between the first check
		// and Watch would otherwise be missed.
		if done, _, err := check(); done || err != nil {
			stop()
			return done, nil, nil, err
		}
		return false, woken, stop, nil
	})
}

// waitFor is wait with the channel to sleep on chosen by check: when its
// condition does not hold, check returns a channel closed when it may
// (a store key's, or a stream's: internal/streams) and, if not nil, a
// stop function called once the wait on it ends.
func (c *conn) waitFor(timeout time.Duration, check func() (bool, <-chan struct{}, func(), error)) (bool, error) {
	stopped := func(stop func()) {
		if stop != nil {
			stop()
		}
	}
	// A condition that holds already costs no set-up (no watch of the
	// socket, no timer): a push with room, a pull of a buffered chunk.
	done, _, stop, err := check()
	stopped(stop)
	if done || err != nil {
		return done, err
	}
	var deadline <-chan time.Time
	if timeout >= 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C
	}
	c.flush(nil) // replies held back for pipelined requests go out before waiting
	c.s.addWaiting(1)
	defer c.s.addWaiting(-1)
	c.backlog.blocking.Store(true) // its client sends nothing until the reply: no put waits behind it
	defer c.backlog.blocking.Store(false)
	c.sess.Progress()
	select {
	case <-c.wake: // a stale wake-up of an earlier park
	default:
	}
	if err := c.s.poller.watchHangup(c); err != nil {
		return false, err
	}
	for {
		done, woken, stop, err := check()
		if done || err != nil {
			stopped(stop)
			return done, err
		}
		select {
		case <-woken:
			stopped(stop)
		case <-deadline:
			stopped(stop)
			done, _, stop, err := check()
			stopped(stop)
			return done, err
		case <-c.wake:
			stopped(stop)
			if !c.alive() {
				return false, status.Errorf(status.ConnectionError, "client went away")
			}
			// It sent bytes and shut down its side: watching again would
			// wake at once, forever. The wait goes on without the watch;
			// the reply's write finds out.
		case <-c.s.ctx.Done():
			stopped(stop)
			return false, status.Errorf(status.AlreadyStopped, "the daemon is shutting down")
		}
	}
}

var hostname, _ = os.Hostname()
