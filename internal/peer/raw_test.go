package peer

import (
	"io"
	"net"
	"testing"
)

// TestPeekLeavesBytes: the listener reads a TCP connection's first bytes
// without consuming them, so gRPC gets the *net.TCPConn itself (with its
// socket options) and still reads the HTTP/2 preface.
func TestPeekLeavesBytes(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lis.Close() }()
	go func() {
		c, err := net.Dial("tcp", lis.Addr().String())
		if err != nil {
			return
		}
		defer func() { _ = c.Close() }()
		_, _ = c.Write([]byte("PRI * HTTP/2.0"))
		_, _ = c.Read(make([]byte, 1)) // until the test closes its side
	}()
	c, err := lis.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	var head [len(rawMagic)]byte
	n, peeked, err := peek(c, head[:])
	if err != nil || !peeked || n != len(head) || string(head[:]) != "PRI * HT" {
		t.Fatalf("peek: %q, %v, %v", head[:n], peeked, err)
	}
	all := make([]byte, len("PRI * HTTP/2.0"))
	if _, err := io.ReadFull(c, all); err != nil || string(all) != "PRI * HTTP/2.0" {
		t.Fatalf("read after peek: %q, %v", all, err)
	}
	// A connection that is not TCP is read instead (prefixConn).
	a, b := net.Pipe()
	defer func() { _, _ = a.Close(), b.Close() }()
	if _, peeked, _ := peek(a, head[:]); peeked {
		t.Fatal("peeked a pipe")
	}
}
