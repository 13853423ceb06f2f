package client

import (
	"bytes"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/v6d-io/v6d-go/internal/server"
)

// syncBuffer is a bytes.Buffer safe for the daemon's logger.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestPinPageLimit: each directory connection maps a pin page in the
// daemon, and the kernel caps a process's mappings (vm.max_map_count). At
// the limit (simulated by a small Config.MaxPinPages) a new connection gets
// no directory and gets by round trip, correctly; the daemon says so once;
// a page freed by a closed connection is given to the next one.
func TestPinPageLimit(t *testing.T) {
	needAccel(t, AccelDirectory)
	var logs syncBuffer
	srv := startServerWith(t, server.Config{
		Size:        16 << 20,
		MaxPinPages: 2,
		Logger:      slog.New(slog.NewTextHandler(&logs, nil)),
	})
	a, b := connect(t, srv), connect(t, srv)
	if !a.Stats().Directory || !b.Stats().Directory {
		t.Fatal("the connections within the limit got no directory")
	}
	id, _ := put(t, a, []byte("over the limit"))
	for range 3 {
		c := connect(t, srv)
		if c.Stats().Directory {
			t.Fatal("a connection past MaxPinPages got a pin page")
		}
		before := c.Stats().RoundTrips
		tree, err := c.GetObject(id)
		if err != nil || !strings.Contains(string(tree), id.String()) {
			t.Fatalf("get past the limit: %s %v", tree, err)
		}
		if c.Stats().RoundTrips == before {
			t.Fatal("a client without a directory got without a round trip")
		}
	}
	if n := strings.Count(logs.String(), "no pin page for a new connection"); n != 1 {
		t.Fatalf("the limit was logged %d times, want once:\n%s", n, logs.String())
	}
	_ = b.Close()
	// The page of the closed connection is free again once the daemon has
	// seen the close: a new connection gets a directory (eventually: the
	// close is handled asynchronously).
	deadline := time.Now().Add(20 * time.Second) // a bound for hangs
	for {
		c := connect(t, srv)
		got := c.Stats().Directory
		_ = c.Close()
		if got {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pin page of a closed connection was never given to a new one")
		}
		time.Sleep(10 * time.Millisecond)
	}
	checkStore(t, srv)
}

// TestDefaultConnectionsWithinMappingLimit: the default connection limit
// leaves room below the kernel's mapping limit.
func TestDefaultConnectionsWithinMappingLimit(t *testing.T) {
	cfg := server.Defaults()
	budget := server.MappingBudget()
	if raw, err := os.ReadFile("/proc/sys/vm/max_map_count"); err == nil {
		if limit, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil && budget >= limit {
			t.Fatalf("the mapping budget %d is not below vm.max_map_count %d", budget, limit)
		}
	}
	if cfg.MaxConnections > budget || cfg.MaxPinPages != budget {
		t.Fatalf("defaults: %d connections, %d pin pages; the mapping budget is %d",
			cfg.MaxConnections, cfg.MaxPinPages, budget)
	}
}
