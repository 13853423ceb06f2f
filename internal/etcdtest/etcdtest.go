// Package etcdtest runs a real, single-member etcd server in-process (from
// go.etcd.io/etcd/server/v3/embed) for tests and for the cmd/v6d-etcd
// helper: it listens on free 127.0.0.1 ports, keeps its data in a given
// directory, and can be stopped and started again on the same directory and
// ports, the way an etcd that goes down and comes back behaves.
package etcdtest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

// StartTimeout bounds how long Start and Restart wait for the server to be
// ready.
const StartTimeout = 30 * time.Second

// Server is one embedded etcd member. Its methods are safe for concurrent
// use.
type Server struct {
	dir        string
	clientURL  url.URL
	peerURL    url.URL
	metricsURL url.URL
	tls        TLS

	mu sync.Mutex
	e  *embed.Etcd // nil while stopped
}

// Start starts a member keeping its data in dir (created if missing), on
// free ports of 127.0.0.1. The caller MUST call Stop.
func Start(dir string) (*Server, error) { return StartAt(dir, 0, 0) }

// Run starts a server in a temporary directory of t, fails t if it cannot,
// and stops it when t ends.
func Run(t testing.TB) *Server {
	t.Helper()
	s, err := Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// TLS names PEM files of a member that serves its clients over TLS.
type TLS struct {
	// CertFile and KeyFile are the server's certificate and key.
	CertFile, KeyFile string
	// CAFile, when set, must have signed every client's certificate.
	CAFile string
}

// StartTLS is Start with clients served over TLS (an https:// Endpoint).
func StartTLS(dir string, t TLS) (*Server, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	s := &Server{
		dir:        dir,
		clientURL:  url.URL{Scheme: "https", Host: fmt.Sprintf("127.0.0.1:%d", ports[0])},
		peerURL:    url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[1])},
		metricsURL: url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[2])},
		tls:        t,
	}
	if err := s.Restart(); err != nil {
		return nil, err
	}
	return s, nil
}

// StartAt is Start on the given client and peer ports (0: a free one), for
// a process that restarts etcd where its clients expect it.
func StartAt(dir string, clientPort, peerPort int) (*Server, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	if clientPort != 0 {
		ports[0] = clientPort
	}
	if peerPort != 0 {
		ports[1] = peerPort
	}
	s := &Server{
		dir:        dir,
		clientURL:  url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[0])},
		peerURL:    url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[1])},
		metricsURL: url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[2])},
	}
	if err := s.Restart(); err != nil {
		return nil, err
	}
	return s, nil
}

// Endpoint returns the client URL, "http://127.0.0.1:port"; it stays the same
// across Stop and Restart.
func (s *Server) Endpoint() string { return s.clientURL.String() }

// Dir returns the data directory.
func (s *Server) Dir() string { return s.dir }

// Restart starts the member again on the same directory and ports after
// Stop (Start calls it the first time). It is a no-op while running.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.e != nil {
		return nil
	}
	cfg := embed.NewConfig()
	cfg.Name = "v6d-etcdtest"
	cfg.Dir = s.dir
	cfg.ListenClientUrls = []url.URL{s.clientURL}
	cfg.AdvertiseClientUrls = []url.URL{s.clientURL}
	cfg.ListenPeerUrls = []url.URL{s.peerURL}
	cfg.AdvertisePeerUrls = []url.URL{s.peerURL}
	cfg.ListenMetricsUrls = []url.URL{s.metricsURL}
	cfg.InitialCluster = cfg.Name + "=" + s.peerURL.String()
	if s.tls.CertFile != "" {
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: s.tls.CertFile, KeyFile: s.tls.KeyFile,
			TrustedCAFile: s.tls.CAFile, ClientCertAuth: s.tls.CAFile != ""}
	}
	cfg.LogLevel = "fatal" // its shutdown logs errors; failures reach us as errors
	cfg.LogOutputs = []string{"stderr"}
	var e *embed.Etcd
	var err error
	// A port just released by Stop can take a moment to be free again.
	for try := 0; ; try++ {
		e, err = embed.StartEtcd(cfg)
		if err == nil || try == 50 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("etcdtest: start etcd on %s: %w", s.clientURL.String(), err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("etcdtest: etcd on %s failed: %w", s.clientURL.String(), err)
	case <-time.After(StartTimeout):
		e.Server.Stop()
		e.Close()
		return errors.New("etcdtest: etcd took too long to start")
	}
	s.e = e
	return nil
}

// Stop stops the member; its data stays in Dir for Restart. It is
// idempotent.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.e == nil {
		return
	}
	s.e.Close()
	s.e = nil
}

// Err returns a channel that reports a fatal error of the running member,
// or nil while stopped.
func (s *Server) Err() <-chan error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.e == nil {
		return nil
	}
	return s.e.Err()
}

// freePorts returns n distinct ports that were free on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	out := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("etcdtest: free port: %w", err)
		}
		ls = append(ls, l)
		addr, ok := l.Addr().(*net.TCPAddr)
		if !ok {
			return nil, fmt.Errorf("etcdtest: free port: unexpected address %v", l.Addr())
		}
		out = append(out, addr.Port)
	}
	return out, nil
}
