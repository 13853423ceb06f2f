package peer

import (
	"context"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	gpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Bounds on what one peer can make the server hold (docs/cluster-data-plane.md,
// "Bounds"): a request is served each of its blobs' bytes at most once
// (fetch), at most ServerConfig.MaxPeerStreams streams of one peer IP are
// served at once, and a stream that makes no progress for
// ServerConfig.StallTimeout, because its client stopped reading, has its
// connection closed, which ends the handler and releases its pins.
//
// gRPC blocks a handler's SendMsg while the stream's flow-control window
// is shut, and has no way to end one stream from its handler while it is
// blocked there, so the watchdog closes the stream's TCP connection. A
// client that stalls one stream loses the others of that connection too:
// they belong to the same misbehaving peer.

// trackListener records the server's open connections by remote address,
// so that the watchdog of a stream can close its connection.
type trackListener struct {
	net.Listener
	s *Server
}

// Accept accepts a connection and records it until it is closed.
func (l *trackListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, s: l.s, key: c.RemoteAddr().String()}
	l.s.mu.Lock()
	l.s.conns[tc.key] = tc
	l.s.mu.Unlock()
	return tc, nil
}

type trackedConn struct {
	net.Conn
	s    *Server
	key  string
	once sync.Once
}

// Close forgets the connection and closes it.
func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.s.mu.Lock()
		if c.s.conns[c.key] == net.Conn(c) {
			delete(c.s.conns, c.key)
		}
		c.s.mu.Unlock()
	})
	return c.Conn.Close()
}

// watch is the admission and the watchdog of one stream.
type watch struct {
	s     *Server
	ip    string
	timer *time.Timer
}

// admit counts a stream against its peer's cap and arms its watchdog.
func (s *Server) admit(ctx context.Context) (*watch, error) {
	p, ok := gpeer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return nil, status.Error(codes.Internal, "peer: no caller address")
	}
	ip := p.Addr.String()
	if a, ok := p.Addr.(*net.TCPAddr); ok {
		ip = a.IP.String()
	}
	key := p.Addr.String()
	s.mu.Lock()
	if s.active[ip] >= s.cfg.MaxPeerStreams {
		s.mu.Unlock()
		return nil, status.Errorf(codes.ResourceExhausted,
			"peer: %s has %d fetch streams open, the most one peer may have at once", ip, s.cfg.MaxPeerStreams)
	}
	s.active[ip]++
	s.mu.Unlock()
	w := &watch{s: s, ip: ip}
	stall := s.cfg.StallTimeout
	w.timer = time.AfterFunc(stall, func() {
		s.mu.Lock()
		c := s.conns[key]
		s.mu.Unlock()
		if c != nil {
			_ = c.Close()
		}
	})
	return w, nil
}

// progress notes that the stream moved: gRPC took a message.
func (w *watch) progress() { w.timer.Reset(w.s.cfg.StallTimeout) }

// done ends the stream's admission and watchdog.
func (w *watch) done() {
	w.timer.Stop()
	w.s.mu.Lock()
	if w.s.active[w.ip]--; w.s.active[w.ip] <= 0 {
		delete(w.s.active, w.ip)
	}
	w.s.mu.Unlock()
}
