package servertest

import (
	"net"
	"testing"

	"github.com/v6d-io/v6d-go/internal/server"
)

func TestStart(t *testing.T) {
	var srv *server.Server
	t.Run("inner", func(t *testing.T) {
		srv = StartRPC(t, server.Config{}, "")
		for _, addr := range [][2]string{{"unix", srv.Socket()}, {"tcp", srv.RPCEndpoint()}} {
			c, err := net.Dial(addr[0], addr[1])
			if err != nil {
				t.Fatalf("%s %s: %v", addr[0], addr[1], err)
			}
			_ = c.Close()
		}
		if _, limit := srv.Store().Usage(); limit != DefaultSize {
			t.Fatalf("arena %d, want %d", limit, DefaultSize)
		}
	})
	select {
	case <-srv.Done():
	default:
		t.Fatal("the server outlived its test")
	}
}
