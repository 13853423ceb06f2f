package client

import (
	"encoding/binary"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/v6d-io/v6d-go/internal/shm"
	"github.com/v6d-io/v6d-go/internal/status"
)

// waitDisconnected polls Connected until it reports the daemon gone.
func waitDisconnected(t *testing.T, c *Client) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.Connected() {
		if time.Now().After(deadline) {
			t.Fatal("Connected still true after the daemon stopped")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestConnectedReportsADeadDaemon(t *testing.T) {
	needAccel(t, AccelDirectory)
	srv := startServer(t, 16<<20)
	c := connect(t, srv)
	if !c.Connected() {
		t.Fatal("Connected is false on a fresh client")
	}
	id, _ := put(t, c, []byte("abc"))
	for i := range 2 {
		before := c.Stats().RoundTrips
		if _, err := c.GetObject(id); err != nil {
			t.Fatal(err)
		}
		if i == 1 && c.Stats().RoundTrips != before {
			t.Fatal("the second get was not answered from the cache")
		}
		if err := c.Release(id); err != nil {
			t.Fatal(err)
		}
	}
	if !c.Connected() {
		t.Fatal("Connected is false while the daemon runs")
	}

	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	waitDisconnected(t, c)
	// The cache holds the tree, but a dead daemon's tree is not served.
	if _, err := c.GetObject(id); status.CodeOf(err) != status.ConnectionError {
		t.Fatalf("GetObject after the daemon died: %v, want ConnectionError", err)
	}
	if _, err := c.GetMetadata(id); status.CodeOf(err) != status.ConnectionError {
		t.Fatalf("GetMetadata after the daemon died: %v, want ConnectionError", err)
	}
	if c.Connected() {
		t.Fatal("Connected came back")
	}
}

func TestConnectedAfterClose(t *testing.T) {
	needAccel(t, AccelDirectory)
	c := connect(t, startServer(t, 16<<20))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if c.Connected() {
		t.Fatal("Connected is true after Close")
	}
}

// A daemon that drops a connection while it runs (here for a frame over the
// limit, written past the client) revokes the connection's pin page: the
// client answers no more gets from the directory, although the daemon's life
// word still says it runs.
func TestDroppedConnectionAnswersNoDirectoryGet(t *testing.T) {
	needAccel(t, AccelDirectory)
	srv := startServer(t, 16<<20)
	a, b := connect(t, srv), connect(t, srv)
	id, _ := put(t, a, []byte("revoked"))
	if _, err := b.GetObject(id); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(id); err != nil {
		t.Fatal(err)
	}
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], 1<<62)
	if _, err := unix.Write(b.w.conn.Fd(), hdr[:]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		b.state.Lock()
		defer b.state.Unlock()
		return b.state.dir.pins.Revoked()
	})
	b.state.Lock()
	life := b.state.dir.view.Life()
	b.state.Unlock()
	if life != shm.LifeAlive {
		t.Fatalf("the daemon's life word says %v, want alive", life)
	}
	if _, err := b.GetObject(id); status.CodeOf(err) != status.ConnectionError {
		t.Fatalf("GetObject on a dropped connection: %v, want ConnectionError", err)
	}
	if _, err := a.GetObject(id); err != nil { // the daemon and other connections go on
		t.Fatal(err)
	}
}
