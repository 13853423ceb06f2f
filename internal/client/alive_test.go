package client

import (
	"testing"
	"time"

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
	srv := startServer(t, 16<<20)
	c := connect(t, srv)
	if !c.Connected() {
		t.Fatal("Connected is false on a fresh client")
	}
	id, _ := put(t, c, []byte("abc"))
	for i := range 2 {
		before := c.RoundTrips()
		if _, err := c.GetObject(id); err != nil {
			t.Fatal(err)
		}
		if i == 1 && c.RoundTrips() != before {
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
	c := connect(t, startServer(t, 16<<20))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if c.Connected() {
		t.Fatal("Connected is true after Close")
	}
}
