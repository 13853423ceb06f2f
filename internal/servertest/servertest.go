// Package servertest starts real daemons in-process for the tests of other
// packages (internal/client, internal/arrowc, ...): server.Start on a UNIX
// socket in a temp directory of its own, waited for, and closed with the
// test. The tests of internal/server itself cannot import it (it imports
// server) and have the same helper, startCfg, in conns_test.go.
package servertest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/v6d-io/v6d-go/internal/server"
)

// DefaultSize is the arena of a server whose Config.Size is zero.
const DefaultSize = 16 << 20

// Start starts a server of cfg and returns it once it accepts connections;
// it is closed, and its directory removed, when the test ends. A cfg.Socket
// of "" becomes s.sock in a fresh directory under $TMPDIR (short enough for
// a socket path, unlike t.TempDir's), a cfg.Size of 0 DefaultSize. A server
// that does not start fails the test.
func Start(tb testing.TB, cfg server.Config) *server.Server {
	tb.Helper()
	if cfg.Socket == "" {
		cfg.Socket = filepath.Join(Dir(tb), "s.sock")
	}
	if cfg.Size == 0 {
		cfg.Size = DefaultSize
	}
	srv, err := server.Start(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = srv.Close() })
	<-srv.Ready()
	return srv
}

// StartRPC is Start with the TCP listener on a free loopback port; a
// secret of "" requires none.
func StartRPC(tb testing.TB, cfg server.Config, secret string) *server.Server {
	tb.Helper()
	cfg.RPCEndpoint = "127.0.0.1:0"
	if secret != "" {
		cfg.RPCSecret = []byte(secret)
	}
	return Start(tb, cfg)
}

// Dir returns a fresh directory under $TMPDIR, removed when the test ends:
// a place for a socket whose path must fit in 107 bytes.
func Dir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "v6d-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
