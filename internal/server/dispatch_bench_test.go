package server

import (
	"io"
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/v6d-io/v6d-go/internal/protocol"
)

// benchConn returns a connection of s served in-process over a socketpair,
// with a goroutine draining the replies on the other end.
func benchConn(tb testing.TB, s *Server) *conn {
	c, _ := benchConnPeer(tb, s)
	return c
}

// benchConnPeer is benchConn that also returns the client's end of the
// socket, for writing the bytes that follow a request.
func benchConnPeer(tb testing.TB, s *Server) (*conn, *os.File) {
	tb.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	nc, err := net.FileConn(os.NewFile(uintptr(fds[0]), "bench"))
	if err != nil {
		tb.Fatal(err)
	}
	sock, err := protocol.SockOf(nc.(*net.UnixConn))
	if err != nil {
		tb.Fatal(err)
	}
	peer := os.NewFile(uintptr(fds[1]), "peer")
	go func() { _, _ = io.Copy(io.Discard, peer) }()
	c := newConn(s, sock)
	c.sess = s.store.NewSession()
	tb.Cleanup(func() {
		c.sess.Close()
		_ = sock.Close()
		_ = peer.Close()
	})
	if !c.handleFrame([]byte(`{"type":"register_request","version":"0.24.0"}`)) {
		tb.Fatal("register failed")
	}
	return c, peer
}

// BenchmarkDispatch measures handleFrame (decode, dispatch, encode, write)
// for the requests of a put and a get.
func BenchmarkDispatch(b *testing.B) {
	c := benchConn(b, start(b))
	for _, bc := range []struct{ name, body string }{
		{"exists", `{"type":"exists_request","id":1}`},
		{"release", `{"type":"release_request","object_id":1,"ids":[2,3]}`},
		{"get_data", `{"type":"get_data_request","id":[1],"sync_remote":false,"wait":false,"with_buffers":true}`},
		{"create_data", `{"type":"create_data_request","content":{"typename":"vineyard::Scalar","value_":"1","transient":true}}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			body := []byte(bc.body)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if !c.handleFrame(body) {
					b.Fatal("connection closed")
				}
			}
		})
	}
}

// BenchmarkPutInline measures handleFrame for the put of a small NumPy
// array as the Python client sends it: one create_data of a tensor tree
// with its 8-byte blob inline (read from the socket), then the release of
// the blob the create took, as the client's next request carries it.
func BenchmarkPutInline(b *testing.B) {
	c, peer := benchConnPeer(b, start(b))
	body := []byte(`{"type":"create_data_request","content":{"typename": "vineyard::Tensor<int64>", ` +
		`"shape_": "[1]", "partition_index_": "[]", "order_": "\"C\"", "value_type_": "int64", ` +
		`"value_type_meta_": "<i8", "nbytes": 8, "buffer_": {"inline": 0}},"inline":[8]}`)
	data := make([]byte, 8)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := peer.Write(data); err != nil {
			b.Fatal(err)
		}
		if !c.handleFrame(body) {
			b.Fatalf("connection closed at %d", i)
		}
		if i%1024 == 1023 {
			b.StopTimer()
			c.sess.Close() // drop what the puts hold, as a client's deletes would
			c.sess = c.s.store.NewSession()
			b.StartTimer()
		}
	}
}
