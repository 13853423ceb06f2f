// Package etcdlaunch starts an etcd for a daemon when none answers at its
// endpoint, as upstream vineyardd does with --etcd_cmd: the daemon that
// launched it owns the process and stops it when it stops.
//
// Only an endpoint of this machine is launched (loopback, "localhost" or one
// of this host's addresses); an etcd elsewhere (a Kubernetes service) is the
// cluster's to run, and the daemon waits for it as for any etcd. The etcd is
// launched with etcd's own flags (--data-dir, --listen-client-urls,
// --advertise-client-urls, --listen-peer-urls, --initial-advertise-peer-urls,
// --initial-cluster, --initial-cluster-state new, --name), a single member
// whose client URL is the endpoint; cmd/v6d-etcd accepts the same flags, so
// tests launch it in etcd's place.
package etcdlaunch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNotLocal is returned by Ensure for an endpoint of another machine.
var ErrNotLocal = errors.New("etcdlaunch: the endpoint is not on this machine")

// Config says what to launch.
type Config struct {
	// Cmd is the etcd executable (a path, or a name looked up in PATH).
	Cmd string
	// Endpoint is the client URL the launched etcd serves (http:// only).
	Endpoint string
	// DataDir is etcd's data directory; a temporary one, removed by Stop,
	// when empty.
	DataDir string
	// Timeout bounds the wait for the launched etcd to accept connections.
	Timeout time.Duration
	// Logger receives what was launched and, at debug level, etcd's output.
	Logger *slog.Logger
}

// Process is a launched etcd. Stop ends it.
type Process struct {
	cmd     *exec.Cmd
	tmp     string // the temporary data directory to remove, or ""
	exited  chan struct{}
	tail    *tailBuffer
	stopped sync.Once
}

// answerTimeout bounds the probe of an endpoint.
const answerTimeout = time.Second

// Answers reports whether something accepts TCP connections at the
// endpoint's host and port.
func Answers(endpoint string) bool {
	hp, err := hostPort(endpoint)
	if err != nil {
		return false
	}
	c, err := net.DialTimeout("tcp", hp, answerTimeout)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// Ensure launches etcd at cfg.Endpoint unless something answers there
// already: it returns (nil, nil) when one answers, the running Process once
// the launched one accepts connections, ErrNotLocal (wrapped) for an
// endpoint of another machine, or the reason it could not start (with the
// end of etcd's output). The caller MUST Stop a returned Process.
func Ensure(cfg Config) (*Process, error) {
	if Answers(cfg.Endpoint) {
		return nil, nil
	}
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || u.Scheme != "http" || u.Port() == "" {
		return nil, fmt.Errorf("etcdlaunch: cannot launch etcd at %q: want an http://HOST:PORT endpoint", cfg.Endpoint)
	}
	if !isLocal(u.Hostname()) {
		return nil, fmt.Errorf("%w: %s", ErrNotLocal, cfg.Endpoint)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	peer, err := freePort(u.Hostname())
	if err != nil {
		return nil, fmt.Errorf("etcdlaunch: a peer port on %s: %w", u.Hostname(), err)
	}
	p := &Process{exited: make(chan struct{}), tail: &tailBuffer{max: 4 << 10}}
	dir := cfg.DataDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "vineyard-etcd-"); err != nil {
			return nil, fmt.Errorf("etcdlaunch: %w", err)
		}
		p.tmp = dir
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("etcdlaunch: data directory: %w", err)
	}
	client := "http://" + net.JoinHostPort(u.Hostname(), u.Port())
	peerURL := "http://" + net.JoinHostPort(u.Hostname(), strconv.Itoa(peer))
	name := "vineyard-etcd-" + u.Port()
	p.cmd = exec.Command(cfg.Cmd, "--name", name, "--data-dir", dir,
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", name+"="+peerURL, "--initial-cluster-state", "new")
	var out = p.tail
	if cfg.Logger.Enabled(context.Background(), slog.LevelDebug) {
		p.tail.also = os.Stderr
	}
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.Env = append(os.Environ(), "ETCD_LOG_LEVEL=warn")
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a ^C to the daemon's group is the daemon's to pass on
	if err := p.cmd.Start(); err != nil {
		p.removeTmp()
		return nil, fmt.Errorf("etcdlaunch: start %s: %w", cfg.Cmd, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	cfg.Logger.Info("no etcd answered: launched one", "cmd", cfg.Cmd, "endpoint", client, "data_dir", dir,
		"pid", p.cmd.Process.Pid)
	deadline := time.Now().Add(cfg.Timeout)
	for !Answers(client) {
		select {
		case <-p.exited:
			p.removeTmp()
			return nil, fmt.Errorf("etcdlaunch: %s exited before serving %s: %s", cfg.Cmd, client, p.tail.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("etcdlaunch: %s did not serve %s within %v: %s", cfg.Cmd, client, cfg.Timeout, p.tail.String())
		}
	}
	return p, nil
}

// stopGrace is how long Stop waits after SIGTERM before SIGKILL.
const stopGrace = 10 * time.Second

// Stop ends the launched etcd (SIGTERM, then SIGKILL after a grace period)
// and removes its temporary data directory. It is idempotent.
func (p *Process) Stop() {
	if p == nil {
		return
	}
	p.stopped.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(stopGrace):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		p.removeTmp()
	})
}

// Pid returns the launched etcd's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

func (p *Process) removeTmp() {
	if p.tmp != "" {
		_ = os.RemoveAll(p.tmp)
	}
}

// hostPort returns the "host:port" of a URL or of a bare "host:port".
func hostPort(endpoint string) (string, error) {
	if u, err := url.Parse(endpoint); err == nil && u.Host != "" {
		if u.Port() == "" {
			return net.JoinHostPort(u.Hostname(), "2379"), nil
		}
		return u.Host, nil
	}
	if _, _, err := net.SplitHostPort(endpoint); err != nil {
		return "", err
	}
	return endpoint, nil
}

// isLocal reports whether host names this machine: localhost, a loopback
// address or an address of one of its interfaces.
func isLocal(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	if ip.IsLoopback() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// freePort returns a TCP port free on host now.
func freePort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	addr, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		return 0, fmt.Errorf("a TCP listener on %s has the address %v", host, ln.Addr())
	}
	return addr.Port, nil
}

// tailBuffer keeps the last max bytes written to it (etcd's output, for an
// error message), and copies them to also when set.
type tailBuffer struct {
	mu   sync.Mutex
	max  int
	b    []byte
	also *os.File
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.also != nil {
		_, _ = t.also.Write(p)
	}
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.b))
	if s == "" {
		return "(no output)"
	}
	return s
}
