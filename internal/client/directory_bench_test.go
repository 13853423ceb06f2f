package client

import (
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// BenchmarkGet: a get and release of an object another client put, from
// the directory and with the round trip.
func BenchmarkGet(b *testing.B) {
	srv := startServer(b, 64<<20)
	a := connect(b, srv)
	id, bid := put(b, a, make([]byte, 1024))
	for _, mode := range []struct {
		name string
		opts []Option
	}{{"directory", nil}, {"round-trip", []Option{WithoutDirectory()}}} {
		c, err := Connect(srv.Socket(), mode.opts...)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(mode.name+"/object", func(b *testing.B) {
			for range b.N {
				if _, err := c.GetObject(id); err != nil {
					b.Fatal(err)
				}
				if err := c.Release(id); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(mode.name+"/object-into", func(b *testing.B) { // as libv6d gets: the tree copied out under the lock
			var dst [4096]byte
			var room [8]BlobView
			into := func(tree []byte, _ uint64) { copy(dst[:], tree) }
			for range b.N {
				if _, _, err := c.GetObjectViews(id, room[:0], into); err != nil {
					b.Fatal(err)
				}
				if err := c.Release(id); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(mode.name+"/blob", func(b *testing.B) {
			for range b.N {
				if _, err := c.GetBuffers([]ids.ObjectID{bid}, false); err != nil {
					b.Fatal(err)
				}
				if err := c.Release(bid); err != nil {
					b.Fatal(err)
				}
			}
		})
		_ = c.Close()
	}
}

// BenchmarkConnected is the liveness check of every local answer.
func BenchmarkConnected(b *testing.B) {
	srv := startServer(b, 16<<20)
	c := connect(b, srv)
	for range b.N {
		if !c.Connected() {
			b.Fatal("not connected")
		}
	}
}
