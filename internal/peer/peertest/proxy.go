// Package peertest holds test tools for the peer data plane: a TCP proxy
// that forwards connections to a target and can cut them, to provoke a
// dropped network connection in the middle of a real transfer.
package peertest

import (
	"net"
	"sync"
	"sync/atomic"
)

// Proxy forwards every connection made to its loopback address to a target
// address, counting the bytes that flow back from the target. Cut closes
// every forwarded connection at once (both sides see it as a dropped
// connection); new connections are forwarded again afterwards, as when the
// network comes back. Safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string
	back   atomic.Int64 // bytes forwarded from the target

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	trigger int64  // run onBytes once back exceeds it; < 0: disarmed
	onBytes func() // the armed action
	closed  bool
	wg      sync.WaitGroup
}

// NewProxy listens on a free 127.0.0.1 port and forwards to target.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, trigger: -1}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's "host:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Forwarded returns how many bytes went from the target to the proxy's
// clients so far.
func (p *Proxy) Forwarded() int64 { return p.back.Load() }

// After arms f to run once, from a forwarding goroutine, right after the
// forwarded total from the target passes n bytes (the read that passes it,
// at most 64 KiB, is forwarded first); f must not block for long (Cut and a
// process kill are what tests pass).
func (p *Proxy) After(n int64, f func()) {
	p.mu.Lock()
	p.trigger, p.onBytes = n, f
	p.mu.Unlock()
}

// Cut closes every connection forwarded now.
func (p *Proxy) Cut() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
}

// Close stops accepting, cuts every connection and waits for the
// forwarding goroutines. Idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	in, err := p.ln.Accept()
	for ; err == nil; in, err = p.ln.Accept() {
		p.wg.Add(1)
		go p.forward(in)
	}
}

// forward connects in to the target and copies both ways until either end
// closes or the connection is cut.
func (p *Proxy) forward(in net.Conn) {
	defer p.wg.Done()
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = in.Close()
		return
	}
	if p.track(in, out) {
		p.wg.Add(2)
		go p.pipe(out, in, nil)
		go p.pipe(in, out, &p.back)
	}
}

// track registers both ends of a forwarded connection, or closes them when
// the proxy closed meanwhile.
func (p *Proxy) track(in, out net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = in.Close()
		_ = out.Close()
		return false
	}
	p.conns[in], p.conns[out] = struct{}{}, struct{}{}
	return true
}

// pipe copies src to dst until either fails, counting into n when set, then
// closes both.
func (p *Proxy) pipe(dst, src net.Conn, n *atomic.Int64) {
	defer p.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		k, err := src.Read(buf)
		if k > 0 {
			if _, werr := dst.Write(buf[:k]); werr != nil {
				break
			}
			if n != nil {
				p.count(n.Add(int64(k)))
			}
		}
		if err != nil { // io.EOF or a cut
			break
		}
	}
	_ = dst.Close()
	_ = src.Close()
}

// count runs the armed action once total passed its trigger.
func (p *Proxy) count(total int64) {
	p.mu.Lock()
	var f func()
	if p.trigger >= 0 && total > p.trigger {
		f, p.trigger, p.onBytes = p.onBytes, -1, nil
	}
	p.mu.Unlock()
	if f != nil {
		f()
	}
}
