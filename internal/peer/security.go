package peer

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	gpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/v6d-io/v6d-go/internal/sockcred"
)

// secretKey is the call metadata that carries the shared secret.
const secretKey = "v6d-peer-secret"

// TLSFiles names PEM files. On a server, Cert and Key are its certificate and
// CA, when set, is the CA that must have signed every client's certificate
// (mutual TLS). On a client, CA verifies the server, and Cert/Key, when set,
// are the client certificate presented to a server that asks for one.
type TLSFiles struct {
	Cert, Key, CA string
	// ServerName overrides the name a client checks in the server's
	// certificate (default: the host of the endpoint).
	ServerName string
}

func (f TLSFiles) enabled() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

func loadPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("peer: tls ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("peer: tls ca %s: no PEM certificate in it", file)
	}
	return pool, nil
}

func (f TLSFiles) serverConfig() (*tls.Config, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, fmt.Errorf("peer: tls needs both a certificate and a key")
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("peer: tls key pair: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	if f.CA != "" {
		if cfg.ClientCAs, err = loadPool(f.CA); err != nil {
			return nil, err
		}
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

func (f TLSFiles) clientConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, ServerName: f.ServerName}
	if f.CA != "" {
		pool, err := loadPool(f.CA)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if f.Cert != "" || f.Key != "" {
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("peer: tls key pair: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// isLoopback reports whether a listen address (host:port) binds only the
// loopback interface. An empty host or a wildcard binds every interface.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && LoopbackHost(host)
}

// LoopbackHost reports whether host names only this machine's loopback:
// "localhost" or a loopback IP. An empty host, a wildcard or any other name
// is taken as reachable from the network. The daemon's TCP listener applies
// the same rule.
func LoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// secretCreds sends the shared secret with every call. Without TLS it
// travels in clear text; docs/cluster-data-plane.md says when that is enough.
type secretCreds struct{ secret string }

// GetRequestMetadata returns the secret as call metadata.
func (c secretCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{secretKey: c.secret}, nil
}

// RequireTransportSecurity is false: the secret may be used without TLS.
func (secretCreds) RequireTransportSecurity() bool { return false }

// authCheck is the stream interceptor of every server: no call is served to
// a peer that did not prove who it is (docs/security.md).
//
//   - With a shared secret, the call must carry it (secretCheck).
//   - Else with a TLS CA, the handshake already required a client
//     certificate signed by it.
//   - Else the caller must be a process of this machine run by this
//     daemon's user or root, the users its 0600 UNIX socket lets in: the
//     kernel says who created the client's socket (internal/sockcred). Two
//     daemons of one user on one host need no configuration; daemons of
//     several hosts or users need a secret or mutual TLS.
func authCheck(cfg *ServerConfig) grpc.StreamServerInterceptor {
	if cfg.Secret != "" {
		return secretCheck(cfg.Secret)
	}
	if cfg.TLS.CA != "" {
		return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			return handler(srv, ss)
		}
	}
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		p, ok := gpeer.FromContext(ss.Context())
		if !ok {
			return status.Error(codes.Unauthenticated, "peer: no caller address")
		}
		local, ok1 := p.LocalAddr.(*net.TCPAddr)
		remote, ok2 := p.Addr.(*net.TCPAddr)
		if !ok1 || !ok2 {
			return status.Error(codes.Unauthenticated, "peer: the caller is not on a TCP connection")
		}
		if err := sockcred.CheckAddrs(local, remote); err != nil {
			return status.Errorf(codes.Unauthenticated,
				"peer: this daemon's peer service has no shared secret or TLS CA, so it serves only daemons of this "+
					"machine run by its user or root (%v); give both daemons --peer-secret-file", err)
		}
		return handler(srv, ss)
	}
}

// secretCheck is a stream interceptor that lets a call through only with the
// shared secret, compared in constant time (of digests, so the length of the
// secret does not leak either).
func secretCheck(secret string) grpc.StreamServerInterceptor {
	want := sha256.Sum256([]byte(secret))
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		md, _ := metadata.FromIncomingContext(ss.Context())
		got := md.Get(secretKey)
		ok := 0
		if len(got) == 1 {
			sum := sha256.Sum256([]byte(got[0]))
			ok = subtle.ConstantTimeCompare(sum[:], want[:])
		}
		if ok != 1 {
			return status.Error(codes.Unauthenticated, "peer: missing or wrong shared secret")
		}
		return handler(srv, ss)
	}
}

func transportCreds(f TLSFiles, server bool) (credentials.TransportCredentials, error) {
	var cfg *tls.Config
	var err error
	if server {
		cfg, err = f.serverConfig()
	} else {
		cfg, err = f.clientConfig()
	}
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(cfg), nil
}
