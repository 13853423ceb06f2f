// Package server is the daemon: it owns the store, listens on the IPC socket
// and serves Vineyard's client protocol.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/v6d-io/v6d-go/internal/etcdlaunch"
	"github.com/v6d-io/v6d-go/internal/meta"
	"github.com/v6d-io/v6d-go/internal/metrics"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
	"github.com/v6d-io/v6d-go/internal/store"
	"github.com/v6d-io/v6d-go/internal/streams"
)

// Server is a running daemon. Start returns it once it listens; Close stops it.
type Server struct {
	cfg   Config
	log   *slog.Logger
	store *store.Store
	etcd  *meta.Etcd // the store's backend with Config.Meta "etcd", else nil (cluster.go)
	// launched is the etcd Start launched (Config.EtcdCmd), stopped by
	// Close after the store; nil when none was.
	launched *etcdlaunch.Process
	ln       *net.UnixListener
	rpcLn    *net.TCPListener // nil without Config.RPCEndpoint (rpc.go)
	ctx      context.Context
	cancel   context.CancelFunc

	ready     chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	errMu     sync.Mutex
	err       error

	mu       sync.Mutex
	conns    map[*conn]struct{}
	rpcConns int // the TCP connections among conns (rpc.go)
	wg       sync.WaitGroup
	refusing slots // connections refused and draining (refuse)

	m       *serverMetrics // in Config.Metrics (metrics.go)
	metrics *metricsServer // the HTTP listener of Config.MetricsEndpoint, or nil (httpd.go)

	readers  slots        // connections blocked in recv on a thread of their own (read.go)
	inflight atomic.Int64 // bytes of frames being received, within cfg.MaxInflightBytes
	pinsFull atomic.Bool  // the warning that pin pages ran out was logged (fds.go)
	poller   *poller      // the epoll set of parked connections (park.go)
	sched    *schedPolicy // Config.SchedBatch (sched.go)
	migr     *migrator    // the peer service and migrations (migrate.go)
	streams  *streams.Registry
}

// slots is a counting semaphore that never blocks.
type slots struct {
	n, max atomic.Int32
}

// TryAcquire takes a slot if one is free.
func (s *slots) TryAcquire() bool {
	for {
		n := s.n.Load()
		if n >= s.max.Load() {
			return false
		}
		if s.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Release frees a slot TryAcquire took.
func (s *slots) Release() { s.n.Add(-1) }

// Start validates cfg, creates the arena and starts serving. On error nothing
// is left behind (no socket file, no arena).
func Start(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rpcLn, err := listenRPC(cfg.RPCEndpoint)
	if err != nil {
		return nil, err
	}
	m := newServerMetrics(cfg.Metrics, cfg.MetricsEndpoint != "")
	// The peer service listens before etcd too (its store comes later).
	migr, err := startMigrator(&cfg, m)
	if err != nil {
		if rpcLn != nil {
			_ = rpcLn.Close()
		}
		return nil, err
	}
	metricsLn, err := listenMetrics(cfg.MetricsEndpoint)
	if err != nil {
		migr.close()
		if rpcLn != nil {
			_ = rpcLn.Close()
		}
		return nil, err
	}
	launched, err := launchEtcd(cfg)
	if err != nil {
		migr.close()
		if rpcLn != nil {
			_ = rpcLn.Close()
		}
		if metricsLn != nil {
			_ = metricsLn.Close()
		}
		return nil, err
	}
	closeRPC := func() {
		migr.close()
		if rpcLn != nil {
			_ = rpcLn.Close()
		}
		if metricsLn != nil {
			_ = metricsLn.Close()
		}
		launched.Stop()
	}
	// Opened after the TCP listener, so that the registration publishes
	// the port it bound; before the store, which then owns it.
	etcd, err := openEtcd(cfg, publishedRPCEndpoint(rpcLn), migr.endpoint())
	if err != nil {
		closeRPC()
		return nil, err
	}
	scfg := cfg.storeConfig()
	scfg.Observer = m
	if etcd != nil {
		scfg.Backend = etcd // the store owns it from here: it closes it on error and in Close
	}
	st, err := store.New(scfg)
	if err != nil {
		closeRPC()
		return nil, fmt.Errorf("server: %w", err)
	}
	ln, err := listen(cfg.Socket, cfg.SocketMode)
	if err != nil {
		_ = st.Close()
		closeRPC()
		return nil, err
	}
	pl, err := newPoller()
	if err != nil {
		_ = ln.Close()
		_ = st.Close()
		closeRPC()
		return nil, err
	}
	migr.setStore(st)
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		migr:     migr,
		rpcLn:    rpcLn,
		poller:   pl,
		cfg:      cfg,
		log:      cfg.Logger,
		store:    st,
		etcd:     etcd,
		launched: launched,
		ln:       ln,
		ctx:      ctx,
		cancel:   cancel,
		ready:    make(chan struct{}),
		done:     make(chan struct{}),
		conns:    make(map[*conn]struct{}),
		m:        m,
		streams:  streams.New(st, cfg.StreamCapacity),
	}
	m.srv.Store(s)
	s.readers.max.Store(maxBlockingReaders)
	s.refusing.max.Store(maxRefusing)
	s.sched = newSchedPolicy(cfg.SchedBatch, cfg.Logger.Warn)
	s.wg.Add(1)
	go s.acceptLoop()
	if rpcLn != nil {
		s.wg.Add(1)
		go s.rpcAcceptLoop()
	}
	if metricsLn != nil {
		s.metrics = s.startMetrics(metricsLn)
	}
	close(s.ready)
	used, limit := st.Usage()
	s.log.Info("vineyardd ready", "socket", cfg.Socket, "rpc", s.RPCEndpoint(), "metrics", s.MetricsEndpoint(),
		"size", limit, "used", used,
		"meta", cfg.Meta, "instance", st.InstanceID())
	return s, nil
}

// listen binds the socket, refusing a path another daemon serves and
// replacing a stale socket file.
func listen(path string, mode os.FileMode) (*net.UnixListener, error) {
	if err := makeSocketDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("server: %s exists and is not a socket", path)
		}
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			_ = c.Close()
			return nil, fmt.Errorf("server: another daemon is serving %s", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("server: remove stale socket: %w", err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("server: listen on %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(path, mode); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("server: chmod socket: %w", err)
	}
	return ln, nil
}

// Ready is closed once the server accepts connections.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Done is closed once the server has stopped.
func (s *Server) Done() <-chan struct{} { return s.done }

// Err returns the error that stopped the server (the accept loop died), or
// nil while it runs and after a Close that nothing forced.
func (s *Server) Err() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.err
}

// Socket returns the IPC socket path.
func (s *Server) Socket() string { return s.cfg.Socket }

// Store returns the server's store (for tests and status).
func (s *Server) Store() *store.Store { return s.store }

// Close stops accepting, closes every connection, removes the socket and
// unmaps the arena. It is idempotent and safe to call concurrently.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		_ = s.ln.Close()
		if s.rpcLn != nil {
			_ = s.rpcLn.Close()
		}
		s.metrics.close()
		s.mu.Lock()
		for c := range s.conns {
			_ = c.sock.Shutdown() // its goroutine's read returns
		}
		s.mu.Unlock()
		s.wg.Wait()
		s.poller.close()
		s.sched.close()
		s.migr.close() // before the store: its streams hold pins
		_ = s.store.Close()
		s.launched.Stop()
		close(s.done)
		s.log.Info("vineyardd stopped", "socket", s.cfg.Socket)
	})
	return s.Err()
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.AcceptUnix()
		if err != nil {
			if s.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			if acceptRetryable(err) {
				s.log.Warn("accept failed, retrying", "err", err)
				time.Sleep(10 * time.Millisecond)
				continue
			}
			s.fail(fmt.Errorf("server: accept on %s: %w", s.cfg.Socket, err))
			return
		}
		if s.full(false) {
			s.refuse(nc, listenerNameIPC, s.cfg.MaxConnections)
			continue
		}
		sock, err := protocol.SockOf(nc)
		if err != nil {
			s.log.Warn("accept failed", "err", err)
			continue
		}
		if !s.serveConn(newConn(s, sock)) {
			return
		}
	}
}

// full reports whether the listener (TCP or UNIX) has its most connections
// open: Config.MaxRPCConnections or Config.MaxConnections. Each listener has
// its own, so that clients who have not even authenticated on TCP can
// never take the UNIX socket's.
func (s *Server) full(tcp bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tcp {
		return s.rpcConns >= s.cfg.MaxRPCConnections
	}
	return len(s.conns)-s.rpcConns >= s.cfg.MaxConnections
}

// serveConn serves c on a goroutine of its own, from any listener; it
// returns false (and closes c's socket) when the server is stopping.
func (s *Server) serveConn(c *conn) bool {
	s.mu.Lock()
	if s.ctx.Err() != nil {
		s.mu.Unlock()
		_ = c.sock.Close()
		return false
	}
	s.conns[c] = struct{}{}
	if c.tcp != nil {
		s.rpcConns++
	}
	if c.tcp != nil {
		s.m.accepted.Inc(listenerRPC)
	} else {
		s.m.accepted.Inc(listenerIPC)
	}
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		c.serve()
		// Closed under mu, so that Close never shuts down an fd number
		// that was closed and reused.
		s.mu.Lock()
		delete(s.conns, c)
		if c.tcp != nil {
			s.rpcConns--
		}
		s.poller.forget(c)
		_ = c.sock.Close()
		s.mu.Unlock()
	}()
	return true
}

// acceptRetryable reports whether an accept error is passing (out of fds or
// memory for now, a connection aborted before it was accepted, a timeout):
// the accept loop retries those and dies of any other.
func acceptRetryable(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []error{unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM, unix.ECONNABORTED, unix.EINTR, unix.EAGAIN, unix.EPROTO} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// fail records the error that stops the server, reported by Err, and stops
// it: Done is closed once it has stopped.
func (s *Server) fail(err error) {
	s.errMu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.errMu.Unlock()
	s.log.Error("vineyardd stopping", "err", err)
	go func() { _ = s.Close() }() // not here: Close waits for the caller
}

// The listeners' names in the refusal's message.
const (
	listenerNameIPC = "UNIX socket"
	listenerNameRPC = "TCP listener"
)

// maxRefusing bounds the refused connections that linger (refuse) at once;
// beyond it a refused connection is closed at once.
const maxRefusing = 64

// refuseLinger is how long a refused connection may linger.
const refuseLinger = time.Second

// refuse answers a connection over its listener's limit with an error frame
// and closes it. The frame is small and the socket new, so the write does
// not wait; the deadline is there for safety. So that the client reads the
// reason (and not "broken pipe" or a reset when its register_request arrives
// at a closed socket), the connection is then shut down for writing only and
// what the client sends is read and dropped until it closes or
// refuseLinger passes, on at most maxRefusing goroutines.
func (s *Server) refuse(nc net.Conn, listener string, limit int) {
	if listener == listenerNameRPC {
		s.m.refused.Inc(listenerRPC)
	} else {
		s.m.refused.Inc(listenerIPC)
	}
	s.log.Warn("refusing connection: too many connections", "listener", listener, "max", limit)
	err := status.Errorf(status.ConnectionError, "vineyardd: too many connections on its %s (limit %d); try again later",
		listener, limit)
	_ = nc.SetDeadline(time.Now().Add(refuseLinger))
	_, _ = nc.Write(protocol.AppendFrame(nil, protocol.EncodeError(err)))
	cw, ok := nc.(interface{ CloseWrite() error })
	if !ok || !s.refusing.TryAcquire() {
		_ = nc.Close()
		return
	}
	go func() {
		defer s.refusing.Release()
		_ = cw.CloseWrite()
		_, _ = io.CopyN(io.Discard, nc, 1<<20)
		_ = nc.Close()
	}()
}

// connections returns the number of open client connections.
func (s *Server) connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *Server) addWaiting(n int) { s.m.waiting.Add(int64(n)) }

func (s *Server) waitingCount() int { return int(s.m.waiting.Value()) }

// Metrics returns the registry of the server's metrics (Config.Metrics).
func (s *Server) Metrics() *metrics.Registry { return s.cfg.Metrics }
