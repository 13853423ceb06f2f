package peer

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// The raw data path (docs/cluster-data-plane.md, "Raw data connections").
//
// gRPC-go frames every message in HTTP/2 DATA frames of at most 16 KiB and
// copies each byte twice in user space besides our codec, which held a large
// fetch to ~1/3 of a plain loopback socket. So, unless TLS is on, a stream
// carrying at least RawAbove bytes moves its bytes over a plain TCP
// connection to the same port: the stream's header (sent on the
// authenticated gRPC stream) carries a one-time random ticket; the client
// connects, sends rawMagic and the ticket, and the server writes the
// stream's byte ranges in order straight from the pinned arena with write(2)
// (the client reads them straight into the destination blob). The gRPC
// stream stays open for the status; pins, sizes, plans, errors and timeouts
// are those of the gRPC path.

// rawMagic opens a raw data connection; a gRPC client opens with the HTTP/2
// preface and a TLS client with a handshake record, never with these bytes.
const rawMagic = "V6DRAW01"

// ticketLen is the length of a raw data connection's ticket.
const ticketLen = 16

// DefaultRawAbove is the size of a stream's bytes from which it uses a raw
// data connection (ServerConfig.RawAbove).
const DefaultRawAbove = 2 << 20

// rawStep is how many bytes one write or read of a raw connection moves
// before the deadlines are renewed.
const rawStep = 4 << 20

// sniffTimeout bounds the wait for a new connection's first bytes.
const sniffTimeout = 10 * time.Second

type ticket [ticketLen]byte

func newTicket() (ticket, error) {
	var t ticket
	_, err := rand.Read(t[:])
	return t, err
}

// prefixConn is a connection whose first bytes were already read.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// sniffListener sorts the connections of the peer port: raw data
// connections go to claim, everything else to gRPC through Accept.
type sniffListener struct {
	net.Listener
	claim func(t ticket, c net.Conn)

	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	mu    sync.Mutex
	err   error                 // the inner listener's error, once it failed
	open  map[net.Conn]struct{} // connections being sniffed
}

func newSniffListener(l net.Listener, claim func(ticket, net.Conn)) *sniffListener {
	s := &sniffListener{Listener: l, claim: claim, conns: make(chan net.Conn), done: make(chan struct{}), open: map[net.Conn]struct{}{}}
	go s.run()
	return s
}

func (l *sniffListener) run() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			// As gRPC's own accept loop: retry what the system calls
			// temporary (EMFILE, ENFILE, ...), after a pause.
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			l.mu.Lock()
			l.err = err
			l.mu.Unlock()
			_ = l.Close()
			return
		}
		l.mu.Lock()
		select {
		case <-l.done:
			l.mu.Unlock()
			_ = c.Close()
			return
		default:
		}
		l.open[c] = struct{}{}
		l.mu.Unlock()
		go l.sniff(c)
	}
}

// sniff reads the first bytes of c and hands it on.
func (l *sniffListener) sniff(c net.Conn) {
	var head [len(rawMagic) + ticketLen]byte
	_ = c.SetReadDeadline(time.Now().Add(sniffTimeout))
	n, peeked, err := peek(c, head[:len(rawMagic)])
	if !peeked {
		n, err = io.ReadFull(c, head[:len(rawMagic)])
	}
	raw := err == nil && string(head[:n]) == rawMagic
	if raw {
		if peeked {
			_, err = io.ReadFull(c, head[:])
		} else {
			_, err = io.ReadFull(c, head[len(rawMagic):])
		}
	}
	l.mu.Lock()
	delete(l.open, c)
	l.mu.Unlock()
	if err != nil {
		_ = c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if raw {
		var t ticket
		copy(t[:], head[len(rawMagic):])
		l.claim(t, c)
		return
	}
	if !peeked {
		c = &prefixConn{Conn: c, r: io.MultiReader(bytes.NewReader(head[:n]), c)}
	}
	select {
	case l.conns <- c:
	case <-l.done:
		_ = c.Close()
	}
}

// peek fills b with the first bytes of c without consuming them, when c is
// a *net.TCPConn: gRPC then gets the connection itself, on which it sets
// socket options (TCP_USER_TIMEOUT) that a wrapper would silently lose.
// peeked is false for any other kind of connection (tests wrap them).
func peek(c net.Conn, b []byte) (n int, peeked bool, err error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return 0, false, nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	until := time.Now().Add(sniffTimeout)
	for {
		var rerr error
		err = rc.Read(func(fd uintptr) bool {
			n, _, rerr = syscall.Recvfrom(int(fd), b, syscall.MSG_PEEK)
			return !errors.Is(rerr, syscall.EAGAIN)
		})
		switch {
		case err != nil:
			return n, true, err
		case rerr != nil:
			return 0, true, rerr
		case n == 0:
			return 0, true, io.EOF
		case n == len(b):
			return n, true, nil
		case time.Now().After(until):
			return n, true, os.ErrDeadlineExceeded
		}
		// Part of the first bytes arrived: wait for the rest.
		time.Sleep(time.Millisecond)
	}
}

// Accept returns the next connection that is not a raw data connection.
func (l *sniffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.err != nil {
			return nil, l.err
		}
		return nil, net.ErrClosed
	}
}

// Close closes the listener and every connection still being sniffed.
func (l *sniffListener) Close() error {
	var err error
	l.once.Do(func() {
		l.mu.Lock()
		close(l.done)
		for c := range l.open {
			_ = c.Close()
		}
		l.mu.Unlock()
		err = l.Listener.Close()
	})
	return err
}

// rawClaims matches raw data connections with the streams waiting for them.
type rawClaims struct {
	mu      sync.Mutex
	waiting map[ticket]chan net.Conn
}

// expect registers a new ticket; the returned channel gets its connection.
// done must be called once the stream stops waiting.
func (r *rawClaims) expect() (ticket, <-chan net.Conn, func(), error) {
	t, err := newTicket()
	if err != nil {
		return t, nil, nil, fmt.Errorf("peer: ticket: %w", err)
	}
	ch := make(chan net.Conn, 1)
	r.mu.Lock()
	if r.waiting == nil {
		r.waiting = map[ticket]chan net.Conn{}
	}
	r.waiting[t] = ch
	r.mu.Unlock()
	done := func() {
		r.mu.Lock()
		delete(r.waiting, t)
		r.mu.Unlock()
		select {
		case c := <-ch: // claimed after the stream gave up
			_ = c.Close()
		default:
		}
	}
	return t, ch, done, nil
}

// claim hands c to the stream holding t, once; an unknown ticket gets the
// connection closed without a byte.
func (r *rawClaims) claim(t ticket, c net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch, ok := r.waiting[t]
	if !ok {
		_ = c.Close()
		return
	}
	delete(r.waiting, t)
	// Under the lock, so that done, which deletes the ticket under it
	// first, finds the connection in ch or it never gets there. ch is
	// buffered and only ever sent to once.
	ch <- c
}

// sendRaw writes the pieces of views over c, in order. ctx ending closes c.
func sendRaw(ctx context.Context, c net.Conn, pieces [][]byte, timeout time.Duration) error {
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	for _, b := range pieces {
		for len(b) > 0 {
			n := min(len(b), rawStep)
			_ = c.SetWriteDeadline(time.Now().Add(timeout))
			if _, err := c.Write(b[:n]); err != nil {
				if ctx.Err() != nil {
					return context.Cause(ctx)
				}
				return err
			}
			b = b[n:]
		}
	}
	return nil
}
