package client

import (
	"errors"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
)

// wire is the transport: the framed connection to the daemon and what
// arrives on it besides replies. Over a UNIX socket, fds follow some
// replies (the arenas, mapped once per process: regions) and a blob's
// bytes are a view of a mapping; over TCP nothing follows but bytes, and
// a blob's bytes are copied out of the stream (readBytes, remote.go). It
// reads replies ahead where no fd can follow (readahead.go) and the
// failures of pipelined puts that come ahead of a reply (pipelined.go).
// All of it is guarded by Client.mu.
type wire struct {
	conn      *protocol.Sock
	rbuf      []byte
	ahead     []byte // read-ahead of replies (readahead.go); bytes ahead[apos:aend] unread
	apos      int
	aend      int
	wbuf      []byte
	regions   map[int]*arena // daemon store_fd → arena
	closed    bool
	lost      error  // set once the connection broke
	exchanges uint64 // exchanges made (each reads every reply due)
	// Pipelined puts (pipelined.go): the failure read ahead of a reply,
	// not yet returned, and requests written ahead of them whose
	// acknowledgements are unread.
	putErr  *putError
	unacked []protocol.Request

	// noFds is set on a TCP connection (remote mode), where no fd ever
	// follows a reply: every reply is read ahead. bytesFollow is set for an
	// exchange whose reply blob bytes follow (readBytes, remote.go): what
	// was read ahead of them is theirs.
	noFds       bool
	bytesFollow bool

	// Set at Connect: onArena runs for each arena mapped (the tree cache
	// looks for the meta epoch), onLost once the connection breaks (the
	// directory stops answering); both with Client.mu held.
	onArena func(*arena)
	onLost  func()
}

// exchange writes the requests of ahead (releases), req and then the
// raw bytes of trailing (an inline create's blobs) in one write, reads the
// acknowledgements of ahead and then req's reply into reply, and receives
// the fds the reply announces. c.mu must be held.
// Every caller checked usableLocked (the fork check, a system call) just
// before; this checks again only what may have changed since.
func (w *wire) exchange(req protocol.Request, reply protocol.Reply, ahead []protocol.Request, trailing [][]byte) error {
	if w.closed {
		return ErrClosed
	}
	if w.lost != nil {
		return w.lost
	}
	if w.apos != w.aend {
		return w.lose(errBadReply("%d bytes came with no request", w.aend-w.apos))
	}
	readAhead := w.noFds || noFdsFollow(reply)
	w.wbuf = w.wbuf[:0]
	for _, r := range append(ahead, req) {
		if r == nil {
			continue
		}
		if err := w.encode(r); err != nil {
			return status.Errorf(status.Invalid, "encode %s: %v", r.RequestType(), err)
		}
	}
	w.exchanges++ // reads what pipelined puts failed with (pipelined.go)
	if len(trailing) == 0 {
		if _, err := w.conn.Write(w.wbuf); err != nil {
			return w.lose(err)
		}
	} else if err := w.conn.Writev(append([][]byte{w.wbuf}, trailing...)); err != nil {
		return w.lose(err)
	}
	for _, r := range w.unacked { // sent ahead of pipelined puts (pipelined.go)
		var ack protocol.AckReply
		if err := w.readReply(r, &ack, readAhead); err != nil && w.lost != nil {
			return err
		}
	}
	w.unacked = w.unacked[:0]
	for _, r := range ahead {
		var ack protocol.AckReply
		if err := w.readReply(r, &ack, readAhead); err != nil && w.lost != nil {
			return err
		} // an error reply to a release (upstream's daemon: a blob gone) leaves the stream in step
	}
	if err := w.readReply(req, reply, readAhead); err != nil {
		return err
	}
	if w.apos != w.aend && !w.bytesFollow {
		return w.lose(errBadReply("%d bytes came after the reply", w.aend-w.apos))
	}
	return nil
}

// readReply reads the reply to req into reply, and the fds it
// announces; with readAhead (see noFdsFollow), through the read-ahead
// buffer. c.mu must be held.
func (w *wire) readReply(req protocol.Request, reply protocol.Reply, readAhead bool) error {
	body, err := w.readFrame(readAhead)
	for err == nil && protocol.IsPipelinedError(body) {
		// A pipelined put failed (pipelined.go): the reply comes next.
		if err = w.notePipelinedError(body); err == nil {
			body, err = w.readFrame(readAhead)
		}
	}
	if err != nil {
		return w.lose(err)
	}
	if fatal, err := decodeReply(body, protocol.ReplyType(req.RequestType()), reply); err != nil {
		if fatal {
			return w.lose(err)
		}
		return err // an error reply: the connection is fine
	}
	if fds := announcedFds(reply); len(fds) > 0 {
		if err := w.receiveFds(fds); err != nil {
			return w.lose(err)
		}
	}
	return nil
}

// readFrame reads the next frame's body; with readAhead, through the
// read-ahead buffer (valid until the next read). c.mu must be held.
func (w *wire) readFrame(readAhead bool) ([]byte, error) {
	if readAhead {
		return w.readAhead(protocol.MaxReplyFrame)
	}
	body, err := protocol.ReadFrame(w.conn, w.rbuf, protocol.MaxReplyFrame)
	w.keepReadBuf(body)
	return body, err
}

// keepReadBuf keeps body, a reply read into w.rbuf or a grown
// replacement, as w.rbuf, unless it is huge.
func (w *wire) keepReadBuf(body []byte) {
	if cap(body) > cap(w.rbuf) && cap(body) <= 1<<20 {
		w.rbuf = body[:0]
	}
}

// encode appends the frame of req to w.wbuf.
func (w *wire) encode(req protocol.Request) error {
	buf, err := protocol.AppendRequest(w.wbuf, req.RequestType(), req)
	w.wbuf = buf
	return err
}

// lose marks the connection broken and returns the error for the call
// that found out: Timeout when the daemon did not answer in time, otherwise
// the ConnectionError every later call gets too. c.mu must be held.
func (w *wire) lose(cause error) error {
	if w.lost != nil {
		return w.lost
	}
	if w.onLost != nil {
		w.onLost()
	}
	if errors.Is(cause, protocol.ErrTimeout) {
		d := w.conn.Timeout()
		w.lost = status.Errorf(status.ConnectionError,
			"connection to vineyardd lost: an earlier call got no reply within %v; reconnect", d)
		return status.Errorf(status.Timeout,
			"vineyardd did not reply within %v (is it stopped or overloaded?); "+
				"the connection cannot be used any more", d)
	}
	w.lost = errLost(cause)
	return w.lost
}

// receiveFds receives one fd per entry of fds (daemon fd numbers) and
// maps it. An fd number already known gets its fd again only if the daemon
// decided to resend it; the new one replaces nothing and is dropped.
func (w *wire) receiveFds(fds []int) error {
	if len(fds) > 1024 {
		return errBadReply("%d fds announced", len(fds))
	}
	for _, key := range fds {
		fd, err := protocol.RecvFd(w.conn)
		if err != nil {
			return err
		}
		a, err := attachArena(fd)
		if err != nil {
			return err
		}
		if old, ok := w.regions[key]; ok {
			old.detach()
		}
		w.regions[key] = a
		if w.onArena != nil {
			w.onArena(a)
		}
	}
	return nil
}

// view returns the bytes a payload locates, from the read-only mapping
// or the writable one. c.mu must be held.
func (w *wire) view(p *protocol.Payload, writable bool) ([]byte, error) {
	if p.DataSize == 0 {
		return nil, nil
	}
	a, ok := w.regions[p.StoreFd]
	if !ok {
		return nil, errBadReply("blob %v lies in region %d, whose fd was never received", p.ObjectID, p.StoreFd)
	}
	return a.view(p.DataOffset, p.DataSize, writable)
}

// views maps every payload to its read-only view. c.mu must be held.
func (w *wire) views(ps []protocol.Payload) (map[ids.ObjectID][]byte, error) {
	views := make(map[ids.ObjectID][]byte, len(ps))
	return views, w.addViews(views, ps)
}

// addViews adds the views of ps to views, as viewsLocked makes them.
func (w *wire) addViews(views map[ids.ObjectID][]byte, ps []protocol.Payload) error {
	for i := range ps {
		p := &ps[i]
		if !p.ObjectID.IsBlob() {
			return errBadReply("payload id %v is not a blob id", p.ObjectID)
		}
		v, err := w.view(p, false)
		if err != nil {
			return err
		}
		views[p.ObjectID] = v
	}
	return nil
}
