package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/v6d-io/v6d-go/internal/protocol"
)

// How a connection reads (DESIGN.md, "Connections"):
//
//   - Busy: the connection's goroutine sleeps in poll(POLLIN) on its own
//     thread, then reads without blocking: one wake-up per request (a recv
//     sleeper is also woken whenever the client reads a reply). It never
//     spins on the socket instead of sleeping (docs/performance.md, "Why
//     nothing polls").
//   - Idle: the poll returns after Config.ParkAfter and the read finds
//     nothing; the connection then parks (park.go): its buffers
//     go back to the pool, its socket into the poller's epoll set, and its
//     goroutine waits on a channel without a thread.
//   - At most maxBlockingReaders connections block in recv at once
//     (Server.readers); the others read without blocking and park when
//     nothing is there, so that thousands of clients waking at once cannot
//     exhaust the daemon's threads.
//
// A frame, once its first byte has arrived, must be complete within
// Config.FrameTimeout (parked or not), else the connection is closed. Small
// frames are read through the connection's read buffer (readBufSize); a
// larger body is read straight into a buffer that grows as bytes arrive
// (never the announced size up front) and is charged to the server-wide
// budget Config.MaxInflightBytes; a frame that would go over it is drained and
// answered with NotEnoughMemory, and the connection stays in step.

// readBufSize is the size of a connection's read buffer: the read-ahead that
// catches pipelined requests, and the largest frame read through it.
const readBufSize = 64 << 10

// maxBlockingReaders bounds the connections blocked in recv at once, each on a
// thread of its own (Go keeps the threads it made, so this also bounds the
// daemon's threads).
const maxBlockingReaders = 64

// keepBody is the largest body buffer a connection keeps between frames.
const keepBody = 1 << 20

// readBufs holds read buffers of parked and closed connections.
var readBufs sync.Pool

// getReadBuf returns a read buffer from readBufs, or a new one.
func getReadBuf() *[]byte {
	if b, ok := readBufs.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, readBufSize)
	return &b
}

// errFrameTimeout is returned when a started frame is not complete within
// Config.FrameTimeout.
var errFrameTimeout = errors.New("server: frame not complete within the frame timeout")

// overBudgetError is returned by readFrame for a frame that was drained
// because receiving it would go over Config.MaxInflightBytes.
type overBudgetError struct{ size, budget int64 }

func (e *overBudgetError) Error() string {
	return fmt.Sprintf("a %d-byte request does not fit in the daemon's %d bytes for requests being received; retry later", e.size, e.budget)
}

// frameReader is a connection's read buffer. It has the methods of
// bufio.Reader that the connection uses (Read, Buffered, Peek); reads that
// find it empty wait as the connection does (conn.recv).
type frameReader struct {
	c        *conn
	buf      *[]byte // nil while parked: the buffer is back in readBufs
	r, w     int     // unread bytes are (*buf)[r:w]
	deadline time.Time
}

// Buffered returns the number of bytes received and not read yet.
func (f *frameReader) Buffered() int { return f.w - f.r }

// Peek returns the next n buffered bytes without consuming them; they are
// valid until the next read.
func (f *frameReader) Peek(n int) ([]byte, error) {
	if f.Buffered() < n {
		return nil, io.ErrShortBuffer
	}
	return (*f.buf)[f.r : f.r+n], nil
}

// Read reads what is buffered, else waits for the socket. Within a frame
// (handlers read inline blob bytes through it) the frame's deadline applies.
func (f *frameReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for f.Buffered() == 0 && len(p) >= readBufSize {
		if n, err := f.c.recv(p, f.deadline); n > 0 || err != nil {
			return n, err
		}
	}
	if f.Buffered() == 0 {
		if err := f.fill(1); err != nil {
			return 0, err
		}
	}
	n := copy(p, (*f.buf)[f.r:f.w])
	f.r += n
	return n, nil
}

// fill reads until at least need (≤ readBufSize) bytes are buffered.
func (f *frameReader) fill(need int) error {
	for f.w-f.r < need {
		if f.buf == nil || len(*f.buf) < readBufSize { // parking gave it back
			buf, n := getReadBuf(), 0
			if f.buf != nil {
				n = copy(*buf, (*f.buf)[f.r:f.w])
			}
			f.buf, f.r, f.w = buf, 0, n
		}
		buf := *f.buf
		if f.r == f.w {
			f.r, f.w = 0, 0
		} else if len(buf)-f.r < need {
			f.w = copy(buf, buf[f.r:f.w])
			f.r = 0
		}
		n, err := f.c.recv(buf[f.w:], f.deadline)
		if err != nil {
			return err
		}
		f.w += n
	}
	return nil
}

// discard consumes n bytes.
func (f *frameReader) discard(n int) error {
	for n > 0 {
		if f.Buffered() == 0 {
			if err := f.fill(1); err != nil {
				return err
			}
		}
		d := min(n, f.Buffered())
		f.r += d
		n -= d
	}
	return nil
}

// release gives the buffer back to the pool; bytes of a frame begun are
// kept in a buffer of their size, so that a parked connection holds what its
// client sent and no more.
func (f *frameReader) release() {
	if f.buf == nil || len(*f.buf) < readBufSize {
		return
	}
	n := f.Buffered()
	var kept *[]byte
	if n > 0 {
		b := make([]byte, n)
		copy(b, (*f.buf)[f.r:f.w])
		kept = &b
	}
	readBufs.Put(f.buf)
	f.buf, f.r, f.w = kept, 0, n
}

// setTimeouts bounds every wait for a request by ParkAfter (then the
// connection parks; by FrameTimeout when shorter, so that a frame's deadline
// is checked in time) and every blocking send by FrameTimeout (then it is
// closed): a client that never reads its replies holds a thread no longer
// than that.
func (c *conn) setTimeouts() error {
	c.reqWait = min(c.s.cfg.ParkAfter, c.s.cfg.FrameTimeout)
	snd := unix.NsecToTimeval(c.s.cfg.FrameTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(c.sock.Fd(), unix.SOL_SOCKET, unix.SO_SNDTIMEO, &snd); err != nil {
		return fmt.Errorf("server: set SO_SNDTIMEO: %w", err)
	}
	return nil
}

// recv reads what the socket has into p (len(p) > 0), waiting for it: on
// this thread while a blocking-reader slot is free and the client is not
// idle for ParkAfter, else parked. It returns 0 and no error after parking:
// parking gave the read buffer back, so p may be stale and the caller must
// retry with a fresh one. It fails with errFrameTimeout once deadline (zero:
// none) passes, io.EOF when the client closed.
func (c *conn) recv(p []byte, deadline time.Time) (int, error) {
	fd := c.sock.Fd()
	for {
		if len(c.out) > 0 && !c.flush(nil) {
			return 0, io.ErrClosedPipe
		}
		if c.s.readers.TryAcquire() {
			// Wait in poll, not in recv: a recv sleeper is woken each time
			// the client reads a reply (write space on this socket), poll's
			// only by a request (protocol.WaitReadable). Ready, timed out
			// or failed: the read below tells which.
			_, _ = protocol.WaitReadable(fd, c.reqWait)
			c.s.readers.Release()
		}
		n, err := c.recvSocket(fd, p)
		switch {
		case err == nil && n == 0:
			return 0, io.EOF
		case err == nil:
			return n, nil
		case errors.Is(err, unix.EINTR):
			continue
		case !errors.Is(err, unix.EAGAIN):
			return 0, err
		}
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return 0, errFrameTimeout
		}
		return 0, c.park(deadline)
	}
}

// readFrame reads the next request frame and returns its body, valid until
// the next call. The caller must call endFrame once done with the body.
func (c *conn) readFrame() ([]byte, error) {
	body, err := c.readFrameIn()
	if errors.Is(err, errFrameTimeout) && c.preAuth() && !time.Now().Before(c.registerBy) {
		return nil, errRegisterTimeout
	}
	return body, err
}

func (c *conn) readFrameIn() ([]byte, error) {
	f := c.r
	f.deadline = time.Time{}
	limit := uint64(c.s.cfg.MaxFrame)
	if c.preAuth() { // rpc.go
		f.deadline, limit = c.registerBy, preAuthMaxFrame
	}
	if f.Buffered() == 0 {
		if err := f.fill(1); err != nil { // idle: no deadline once registered
			return nil, err
		}
	}
	f.deadline = time.Now().Add(c.s.cfg.FrameTimeout)
	if c.preAuth() && c.registerBy.Before(f.deadline) {
		f.deadline = c.registerBy
	}
	if err := f.fill(8); err != nil {
		return nil, midFrame(err)
	}
	n := binary.LittleEndian.Uint64((*f.buf)[f.r:])
	if n > limit {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", protocol.ErrFrameTooLarge, n, limit)
	}
	f.r += 8
	if n > readBufSize {
		return c.readLargeBody(int(n))
	}
	if err := f.fill(int(n)); err != nil {
		return nil, midFrame(err)
	}
	// Copied out of the read buffer: a handler may read on (inline bytes).
	c.in = append(c.in[:0], (*f.buf)[f.r:f.r+int(n)]...)
	f.r += int(n)
	return c.in, nil
}

// readLargeBody reads a body of n bytes that does not fit the read buffer,
// growing its buffer as bytes arrive and charging it to the server's budget.
func (c *conn) readLargeBody(n int) ([]byte, error) {
	f := c.r
	charged := 0
	reserve := func(size int) bool {
		if !c.s.reserveInflight(int64(size - charged)) {
			return false
		}
		charged = size
		return true
	}
	body := c.in[:0]
	size := min(n, max(cap(body), 2*readBufSize))
	if !reserve(size) {
		return nil, c.drainFrame(n, 0, charged)
	}
	if cap(body) < size {
		body = make([]byte, 0, size)
	}
	k := min(n, f.Buffered())
	body = append(body, (*f.buf)[f.r:f.r+k]...)
	f.r += k
	for len(body) < n {
		if len(body) == cap(body) {
			size := min(n, 2*cap(body))
			if !reserve(size) {
				return nil, c.drainFrame(n, len(body), charged)
			}
			grown := make([]byte, len(body), size)
			copy(grown, body)
			body = grown
		}
		m, err := c.recv(body[len(body):min(n, cap(body))], f.deadline) // never the next request's bytes
		if err != nil {
			c.s.releaseInflight(int64(charged))
			return nil, midFrame(err)
		}
		body = body[:len(body)+m]
	}
	c.charged = int64(charged)
	return body, nil
}

// drainFrame consumes the rest of a frame of n bytes that is refused for
// the budget, got bytes of which were read, and releases what it charged.
func (c *conn) drainFrame(n, got, charged int) error {
	c.s.releaseInflight(int64(charged))
	if err := c.r.discard(n - got); err != nil {
		return midFrame(err)
	}
	return &overBudgetError{size: int64(n), budget: c.s.cfg.MaxInflightBytes}
}

// endFrame releases what readFrame charged for body and keeps a small
// enough body buffer for the next frame.
func (c *conn) endFrame(body []byte) {
	if c.charged > 0 {
		c.s.releaseInflight(c.charged)
		c.charged = 0
	}
	if cap(body) <= keepBody {
		c.in = body[:0]
	} else {
		c.in = nil
	}
}

// midFrame turns the end of the stream inside a frame into
// io.ErrUnexpectedEOF.
func midFrame(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// reserveInflight charges n bytes of frames being received to the
// server-wide budget, if they fit.
func (s *Server) reserveInflight(n int64) bool {
	for {
		cur := s.inflight.Load()
		if cur+n > s.cfg.MaxInflightBytes {
			return false
		}
		if s.inflight.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// releaseInflight returns n bytes reserveInflight charged.
func (s *Server) releaseInflight(n int64) { s.inflight.Add(-n) }
