package server

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/store"
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

// startMetrics starts a bench server with its metrics listener on (the
// requests then timed into the duration histograms) or off.
func startMetrics(b *testing.B, on bool) *Server {
	cfg := Config{MaxFrame: 1 << 16}
	if on {
		cfg.MetricsEndpoint = "127.0.0.1:0"
	}
	return startCfg(b, cfg)
}

// metricsModes are the sub-benchmarks comparing the request path with the
// metrics listener off and on.
var metricsModes = []struct {
	name string
	on   bool
}{{"metrics=off", false}, {"metrics=on", true}}

// BenchmarkDispatch measures handleFrame (decode, dispatch, encode, write)
// for the requests of a put and a get, with the metrics listener off and on.
func BenchmarkDispatch(b *testing.B) {
	for _, mm := range metricsModes {
		b.Run(mm.name, func(b *testing.B) {
			c := benchConn(b, startMetrics(b, mm.on))
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
		})
	}
}

// BenchmarkPutInline measures handleFrame for the put of a small NumPy
// array as the Python client sends it: one create_data of a tensor tree
// with its 8-byte blob inline (read from the socket), then the release of
// the blob the create took, as the client's next request carries it; with
// the metrics listener off and on.
func BenchmarkPutInline(b *testing.B) {
	for _, mm := range metricsModes {
		b.Run(mm.name, func(b *testing.B) { benchPutInline(b, startMetrics(b, mm.on)) })
	}
}

func benchPutInline(b *testing.B, s *Server) {
	c, peer := benchConnPeer(b, s)
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

// BenchmarkPutPipelined measures handleFrame for a pipelined put of a 1 KiB
// NumPy array as the Python client sends it (protocol.ExtPipelined): a
// create_data naming a blob carved from the lease and the object's id, no
// reply; every 64 puts a del_data of them, as the harness's loops delete.
func BenchmarkPutPipelined(b *testing.B) {
	c := benchConn(b, start(b))
	c.passFds = true
	const batch = 64
	var l store.Lease
	var next ids.ObjectID
	var off uint64
	frames := make([][]byte, 0, batch)
	del := make([]byte, 0, 64*batch)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if i%batch == 0 {
			b.StopTimer()
			if len(frames) > 0 {
				if !c.handleFrame(del) {
					b.Fatal("del_data failed")
				}
			}
			var err error
			if l, err = c.sess.Lease(batch<<10, batch<<10); err != nil {
				b.Fatal(err)
			}
			next, off = l.FirstID, l.Offset
			frames, del = frames[:0], append(del[:0], `{"type":"del_data_request","id":[`...)
			for j := 0; j < batch; j++ {
				id := next &^ ids.BlobBit
				frames = append(frames, fmt.Appendf(nil, `{"type":"create_data_request","content":{"typename":`+
					`"vineyard::Tensor<double>","shape_":"[128]","partition_index_":"[]","order_":"\"C\"",`+
					`"value_type_":"float","value_type_meta_":"<f8","nbytes":1024,"buffer_":{"inline":0}},`+
					`"lease_blobs":[%d,%d,1024],"id":%d,"pipelined":true}`, uint64(next), off, uint64(id+1)))
				if j > 0 {
					del = append(del, ',')
				}
				del = strconv.AppendUint(del, uint64(id+1), 10)
				next += 2
				off += 1024
			}
			del = append(del, `],"force":false,"deep":true,"fastpath":false}`...)
			b.StartTimer()
		}
		if !c.handleFrame(frames[i%batch]) {
			b.Fatalf("connection closed at %d", i)
		}
	}
}
