package server

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/v6d-io/v6d-go/internal/peer"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/sockcred"
	"github.com/v6d-io/v6d-go/internal/status"
)

// The TCP ("RPC") listener (docs/cluster-rpc.md). It serves the same
// protocol through the same handler table and connection machinery
// (parking, limits, frame timeout) as the UNIX socket; its connections only
// differ in that they never receive fds (passFds false), so blob bytes
// travel on the connection (rpc_transfer.go), and that register_request
// must authenticate the client before anything else is served:
//
//   - with a secret configured (Config.RPCSecret), by carrying it;
//   - else, by coming from a process of this machine run by the daemon's
//     user or root, the users the 0600 UNIX socket lets in: the kernel says
//     who created the client's socket (internal/sockcred), as SO_PEERCRED
//     does on the UNIX socket. No configuration, no file to read;
//   - or by reaching the port at all with Config.RPCInsecure.
//
// docs/security.md gives the reasons.

// DefaultRPCPort is upstream's default --rpc_socket_port.
const DefaultRPCPort = 9600

// validateRPC checks the TCP listener's settings: a valid endpoint, and a
// secret (or RPCInsecure) when it is not bound to loopback only.
func (c *Config) validateRPC() error {
	if c.RPCEndpoint == "" {
		if len(c.RPCSecret) > 0 || c.RPCInsecure {
			return fmt.Errorf("%w: an RPC secret or --rpc-insecure without an RPC endpoint", ErrBadConfig)
		}
		return nil
	}
	host, port, err := net.SplitHostPort(c.RPCEndpoint)
	if err != nil {
		return fmt.Errorf("%w: rpc endpoint %q is not host:port: %w", ErrBadConfig, c.RPCEndpoint, err)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || (p == 0 && port != "0") {
		return fmt.Errorf("%w: rpc port %q is not a port number (0-65535)", ErrBadConfig, port)
	}
	if !peer.LoopbackHost(host) && len(c.RPCSecret) == 0 && !c.RPCInsecure {
		return fmt.Errorf("%w: the RPC listener on %q is reachable from other machines: give it a secret "+
			"(--rpc-auth-file) or accept anyone who can reach the port with --rpc-insecure", ErrBadConfig, c.RPCEndpoint)
	}
	return nil
}

// listenRPC binds the TCP listener of endpoint; nil, nil for "".
func listenRPC(endpoint string) (*net.TCPListener, error) {
	if endpoint == "" {
		return nil, nil
	}
	addr, err := net.ResolveTCPAddr("tcp", endpoint)
	if err != nil {
		return nil, fmt.Errorf("server: rpc endpoint %s: %w", endpoint, err)
	}
	ln, err := net.ListenTCP("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("server: listen on %s: %w", endpoint, err)
	}
	return ln, nil
}

// RPCEndpoint returns the "host:port" TCP clients connect to (with the port
// actually bound), or "" without a TCP listener. A listener on every
// interface is reported under the machine's host name.
func (s *Server) RPCEndpoint() string {
	if s.rpcLn == nil {
		return ""
	}
	addr, ok := s.rpcLn.Addr().(*net.TCPAddr)
	if !ok {
		return s.rpcLn.Addr().String()
	}
	host := addr.IP.String()
	if addr.IP.IsUnspecified() && hostname != "" {
		host = hostname
	}
	return net.JoinHostPort(host, strconv.Itoa(addr.Port))
}

// rpcConnections returns the number of open TCP client connections.
func (s *Server) rpcConnections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rpcConns
}

// rpcAcceptLoop accepts TCP clients until the listener closes.
func (s *Server) rpcAcceptLoop() {
	defer s.wg.Done()
	for {
		nc, err := s.rpcLn.AcceptTCP()
		if err != nil {
			if s.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			if acceptRetryable(err) {
				s.log.Warn("rpc accept failed, retrying", "err", err)
				time.Sleep(10 * time.Millisecond)
				continue
			}
			s.fail(fmt.Errorf("server: accept on %s: %w", s.RPCEndpoint(), err))
			return
		}
		if s.full(true) {
			s.refuse(nc, listenerNameRPC, s.cfg.MaxRPCConnections)
			continue
		}
		_ = nc.SetNoDelay(true)
		peer := &tcpPeer{}
		peer.local, _ = nc.LocalAddr().(*net.TCPAddr)
		peer.remote, _ = nc.RemoteAddr().(*net.TCPAddr)
		sock, err := protocol.SockOf(nc)
		if err != nil {
			s.log.Warn("rpc accept failed", "err", err)
			continue
		}
		c := newConn(s, sock)
		c.passFds = false
		c.secret = s.cfg.RPCSecret
		c.tcp = peer
		c.registerBy = time.Now().Add(s.cfg.RegisterTimeout)
		if !s.serveConn(c) {
			return
		}
	}
}

// Limits before authentication (docs/security.md): a TCP connection must
// register within Config.RegisterTimeout of its accept; until it has, no
// frame above preAuthMaxFrame is read (so it never draws on
// Config.MaxInflightBytes) and a request with bytes after its frame closes
// the connection instead of having them read. Each refusal is a reply that
// says why, then the connection closes.

// preAuthMaxFrame is the largest frame read from a TCP client before it has
// registered: a register_request with a long secret fits many times over.
const preAuthMaxFrame = 4 << 10

// preAuth reports whether c is a TCP connection that has not registered
// yet.
func (c *conn) preAuth() bool { return c.tcp != nil && !c.registered }

// errRegisterTimeout is returned by readFrame when a TCP client did not
// register within Config.RegisterTimeout.
var errRegisterTimeout = errors.New("server: no registration within the register timeout")

// tcpPeer are the addresses of a TCP client's connection.
type tcpPeer struct{ local, remote *net.TCPAddr }

// errAuth is the reply to a registration without the right secret.
var errAuth = status.Errorf(status.ConnectionFailed,
	"vineyardd: wrong or missing RPC secret (register_request's password); closing the connection")

// authenticate checks a registration of a TCP client (see the top of this
// file); UNIX clients passed the socket's mode already. A secret is compared
// in constant time. On a refusal it answers with the reason and returns
// errExit, so that the connection closes: a client gets one guess per
// connection.
func (c *conn) authenticate(r *protocol.RegisterRequest) error {
	if c.tcp == nil {
		return nil
	}
	var refusal error
	switch {
	case len(c.secret) > 0:
		if subtle.ConstantTimeCompare([]byte(r.Password), c.secret) == 1 {
			return nil
		}
		c.s.log.Warn("refusing rpc client: wrong or missing secret", "client", c.tcp.remote)
		refusal = errAuth
	case c.s.cfg.RPCInsecure:
		return nil
	default:
		err := sockcred.CheckAddrs(c.tcp.local, c.tcp.remote)
		if err == nil {
			return nil
		}
		c.s.log.Warn("refusing rpc client", "client", c.tcp.remote, "err", err)
		refusal = status.Errorf(status.ConnectionFailed,
			"vineyardd: this daemon has no RPC secret, so it serves over TCP only clients of this machine run by "+
				"its own user or root (%v); connect through the UNIX socket, or run the daemon with --rpc-auth-file "+
				"and present that secret; closing the connection", err)
	}
	c.writeError(refusal)
	c.flush(nil)
	return errExit
}
