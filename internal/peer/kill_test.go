package peer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/peer/peertest"
	"github.com/v6d-io/v6d-go/internal/sockcred/othertest"
)

// serverEnv, when set in the environment of the test binary, makes it a
// source process: it serves one blob of that many bytes (pattern 9) as
// blobID(0), prints its address and runs until killed.
const serverEnv = "V6D_PEER_TEST_SOURCE"

func TestMain(m *testing.M) {
	othertest.Main()
	if v := os.Getenv(serverEnv); v != "" {
		size, err := strconv.Atoi(v)
		if err != nil {
			panic(err)
		}
		src := newFakeSource()
		src.put(blobID(0), pattern(9, size))
		s, err := Listen(ServerConfig{}, src)
		if err != nil {
			panic(err)
		}
		fmt.Println(s.Addr())
		select {}
	}
	os.Exit(m.Run())
}

// startSourceProcess runs the test binary as a source process.
func startSourceProcess(t *testing.T, size int) (*exec.Cmd, string) {
	t.Helper()
	return peertest.StartSelf(t, fmt.Sprintf("%s=%d", serverEnv, size))
}

// countConn calls onBytes once more than after bytes were read from it.
type countConn struct {
	net.Conn
	after   int64
	read    atomic.Int64
	once    sync.Once
	onBytes func()
}

func (c *countConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if c.read.Add(int64(n)) > c.after {
		c.once.Do(c.onBytes)
	}
	return n, err
}

// TestFaultOwnerProcessKilled SIGKILLs the source process in the middle of
// a transfer: the fetch fails with ErrUnavailable, the destination frees
// everything it allocated, and a retry from a new source process works.
func TestFaultOwnerProcessKilled(t *testing.T) {
	const size = 64 << 20
	cmd, addr := startSourceProcess(t, size)
	sink := newFakeSink()
	var kill atomic.Bool
	kill.Store(true)
	c := newClient(t, ClientConfig{Dialer: func(ctx context.Context, a string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", a)
		if err != nil || !kill.Load() {
			return conn, err
		}
		return &countConn{Conn: conn, after: 8 << 20, onBytes: func() { _ = cmd.Process.Kill() }}, nil
	}}, sink)
	_, err := c.Fetch(fetchCtx(t), addr, []ids.ObjectID{blobID(0)})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	checkClean(t, newFakeSource(), sink)
	if sink.committed.Load() != 0 {
		t.Fatal("partial commit")
	}
	kill.Store(false)
	_, addr2 := startSourceProcess(t, size)
	got, err := c.Fetch(fetchCtx(t), addr2, []ids.ObjectID{blobID(0)})
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if string(sink.get(got[0].ID)) != string(pattern(9, size)) {
		t.Fatal("retry: bytes differ")
	}
	checkClean(t, newFakeSource(), sink)
}
