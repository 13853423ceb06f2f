package peer

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// faultListener hands out connections that call onBytes once a connection
// has written more than after bytes (only on the first connection to do so,
// if once: that is the one carrying the bytes, a gRPC connection or a raw
// data connection).
type faultListener struct {
	net.Listener
	after   int64
	once    bool
	used    atomic.Bool
	onBytes func(c *faultConn)
}

func (l *faultListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	fc := &faultConn{Conn: c, closed: make(chan struct{}), after: l.after, onBytes: l.onBytes}
	if l.once {
		fc.fired = &l.used
	} else {
		fc.fired = new(atomic.Bool)
	}
	return fc, nil
}

type faultConn struct {
	net.Conn
	after   int64
	onBytes func(c *faultConn)
	written atomic.Int64
	fired   *atomic.Bool
	stall   atomic.Bool // writes block until Close
	closed  chan struct{}
	close   sync.Once
}

func (c *faultConn) Write(b []byte) (int, error) {
	if c.stall.Load() {
		<-c.closed
		return 0, net.ErrClosed
	}
	n, err := c.Conn.Write(b)
	if c.onBytes != nil && c.written.Add(int64(n)) > c.after && c.fired.CompareAndSwap(false, true) {
		c.onBytes(c)
	}
	return n, err
}

func (c *faultConn) Close() error {
	c.close.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// eachMode runs a test with raw data connections (the default) and with
// every byte inside gRPC messages.
func eachMode(t *testing.T, test func(t *testing.T, rawAbove int64)) {
	t.Run("raw", func(t *testing.T) { test(t, 0) })
	t.Run("chunks", func(t *testing.T) { test(t, -1) })
}

func bigSource(t *testing.T, size int) (*fakeSource, []ids.ObjectID, []byte) {
	t.Helper()
	src := newFakeSource()
	b := pattern(7, size)
	src.put(blobID(0), b)
	src.put(blobID(1), []byte("small"))
	return src, []ids.ObjectID{blobID(0), blobID(1)}, b
}

func mustFetch(t *testing.T, c *Client, sink *fakeSink, endpoint string, req []ids.ObjectID, want []byte) {
	t.Helper()
	got, err := c.Fetch(fetchCtx(t), endpoint, req)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if string(sink.get(got[0].ID)) != string(want) {
		t.Fatal("retry: bytes differ")
	}
}

// TestFaultOwnerKilled closes the source's server (every connection) in the
// middle of a stream: the fetch fails, nothing is committed, every pin and
// every allocated byte is released, and a retry against a new owner works.
func TestFaultOwnerKilled(t *testing.T) {
	eachMode(t, func(t *testing.T, rawAbove int64) {
		for _, streams := range []int{1, 4} {
			src, req, want := bigSource(t, 48<<20)
			sink := newFakeSink()
			var srv *Server
			srv = startServer(t, ServerConfig{RawAbove: rawAbove}, src, func(l net.Listener) net.Listener {
				return &faultListener{Listener: l, after: 8 << 20, onBytes: func(*faultConn) {
					go func() { _ = srv.Close() }()
				}}
			})
			c := newClient(t, ClientConfig{MaxStreams: streams}, sink)
			_, err := c.Fetch(fetchCtx(t), srv.Addr(), req)
			if err == nil {
				t.Fatal("fetch survived its owner")
			}
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("streams=%d: err = %v, want ErrUnavailable", streams, err)
			}
			checkClean(t, src, sink)
			if sink.committed.Load() != 0 {
				t.Fatal("partial commit")
			}
			srv2 := startServer(t, ServerConfig{RawAbove: rawAbove}, src, nil)
			mustFetch(t, c, sink, srv2.Addr(), req, want)
			checkClean(t, src, sink)
		}
	})
}

// TestFaultConnectionDropped closes the TCP connection under a live server
// mid-stream; a retry on the same endpoint works.
func TestFaultConnectionDropped(t *testing.T) {
	eachMode(t, func(t *testing.T, rawAbove int64) {
		src, req, want := bigSource(t, 40<<20)
		sink := newFakeSink()
		srv := startServer(t, ServerConfig{RawAbove: rawAbove}, src, func(l net.Listener) net.Listener {
			return &faultListener{Listener: l, after: 4 << 20, once: true, onBytes: func(c *faultConn) {
				_ = c.Close()
			}}
		})
		c := newClient(t, ClientConfig{}, sink)
		if _, err := c.Fetch(fetchCtx(t), srv.Addr(), req); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("err = %v, want ErrUnavailable", err)
		}
		checkClean(t, src, sink)
		mustFetch(t, c, sink, srv.Addr(), req, want)
		checkClean(t, src, sink)
	})
}

// TestFaultStalled makes the source's connection go silent (writes block, as
// on a network that drops packets): the client gives up after IdleTimeout
// with ErrStalled, and the source releases its pins although gRPC still
// holds chunks it cannot write.
func TestFaultStalled(t *testing.T) {
	eachMode(t, func(t *testing.T, rawAbove int64) {
		src, req, want := bigSource(t, 32<<20)
		sink := newFakeSink()
		srv := startServer(t, ServerConfig{RawAbove: rawAbove}, src, func(l net.Listener) net.Listener {
			return &faultListener{Listener: l, after: 2 << 20, once: true, onBytes: func(c *faultConn) {
				c.stall.Store(true)
			}}
		})
		c := newClient(t, ClientConfig{IdleTimeout: 500 * time.Millisecond}, sink)
		_, err := c.Fetch(fetchCtx(t), srv.Addr(), req)
		if !errors.Is(err, ErrStalled) {
			t.Fatalf("err = %v, want ErrStalled", err)
		}
		checkClean(t, src, sink)
		// The retry uses the default IdleTimeout: on a loaded machine (the race
		// detector, other builds) a healthy stream may pause longer than 500 ms.
		mustFetch(t, newClient(t, ClientConfig{}, sink), sink, srv.Addr(), req, want)
		checkClean(t, src, sink)
	})
}

// TestFaultNoServer fetches from a port nobody listens on.
func TestFaultNoServer(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	sink := newFakeSink()
	c := newClient(t, ClientConfig{IdleTimeout: 2 * time.Second}, sink)
	if _, err := c.Fetch(fetchCtx(t), addr, []ids.ObjectID{blobID(0)}); err == nil {
		t.Fatal("fetch from nowhere succeeded")
	}
	checkClean(t, newFakeSource(), sink)
}

// TestFaultOutOfMemory: the destination cannot allocate the second blob.
func TestFaultOutOfMemory(t *testing.T) {
	eachMode(t, func(t *testing.T, rawAbove int64) {
		src, req, want := bigSource(t, 20<<20)
		sink := newFakeSink()
		sink.limit = 20 << 20 // the first blob fits, the second does not
		srv := startServer(t, ServerConfig{RawAbove: rawAbove}, src, nil)
		c := newClient(t, ClientConfig{}, sink)
		_, err := c.Fetch(fetchCtx(t), srv.Addr(), req)
		if !errors.Is(err, errOOM) {
			t.Fatalf("err = %v, want the sink's error", err)
		}
		checkClean(t, src, sink)
		if sink.live.Load() != 0 {
			t.Fatal("allocation kept")
		}
		sink.limit = 0
		mustFetch(t, c, sink, srv.Addr(), req, want)
		checkClean(t, src, sink)
	})
}

// TestFaultDeletedMeanwhile deletes the blob on the owner after the first
// stream pinned it: the other streams' pins fail, so the fetch fails with
// ErrObjectNotExists and commits nothing.
func TestFaultDeletedMeanwhile(t *testing.T) {
	eachMode(t, func(t *testing.T, rawAbove int64) {
		src, req, want := bigSource(t, 40<<20)
		sink := newFakeSink()
		var armed atomic.Bool
		armed.Store(true)
		src.afterPin = func(int64) {
			if armed.CompareAndSwap(true, false) {
				src.del(blobID(0))
			}
		}
		srv := startServer(t, ServerConfig{RawAbove: rawAbove}, src, nil)
		c := newClient(t, ClientConfig{MaxStreams: 4}, sink)
		_, err := c.Fetch(fetchCtx(t), srv.Addr(), req)
		if !errors.Is(err, ErrObjectNotExists) {
			t.Fatalf("err = %v, want ErrObjectNotExists", err)
		}
		checkClean(t, src, sink)
		if _, err := c.Fetch(fetchCtx(t), srv.Addr(), req); !errors.Is(err, ErrObjectNotExists) {
			t.Fatalf("deleted blob: err = %v", err)
		}
		src.put(blobID(0), want)
		mustFetch(t, c, sink, srv.Addr(), req, want)
		checkClean(t, src, sink)
	})
}

// TestFaultCancelled cancels the caller's context mid-transfer.
func TestFaultCancelled(t *testing.T) {
	eachMode(t, func(t *testing.T, rawAbove int64) {
		src, req, _ := bigSource(t, 40<<20)
		sink := newFakeSink()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		srv := startServer(t, ServerConfig{RawAbove: rawAbove}, src, func(l net.Listener) net.Listener {
			return &faultListener{Listener: l, after: 4 << 20, onBytes: func(*faultConn) { cancel() }}
		})
		c := newClient(t, ClientConfig{}, sink)
		if _, err := c.Fetch(ctx, srv.Addr(), req); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		checkClean(t, src, sink)
	})
}
