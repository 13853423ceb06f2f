package client

import (
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// BenchmarkStreamPingPong measures a chunk's way from one client's push to
// another's pull: each iteration is a chunk there and one back over two
// streams (ns/op is two hops); compare BenchmarkExists, one round trip.
func BenchmarkStreamPingPong(b *testing.B) {
	srv := startServer(b, 64<<20)
	a, e := connect(b, srv), connect(b, srv)
	there, _, err := a.CreateMetadata([]byte(`{"typename":"vineyard::RecordBatchStream"}`), nil)
	if err != nil {
		b.Fatal(err)
	}
	back, _, err := a.CreateMetadata([]byte(`{"typename":"vineyard::RecordBatchStream"}`), nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range []ids.ObjectID{there, back} {
		if err := a.CreateStream(s, StreamOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	// A chunk is deleted once read: every push takes a fresh one, made
	// before the timer starts.
	chunks, echoes := make([]ids.ObjectID, b.N), make([]ids.ObjectID, b.N)
	for i := range b.N {
		chunks[i], _ = put(b, a, []byte("12345678"))
		echoes[i], _ = put(b, e, []byte("87654321"))
	}
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			if _, err := e.PullChunk(there); err != nil {
				done <- nil
				return
			}
			if err := e.PushChunk(back, echoes[i], -1); err != nil {
				done <- err
				return
			}
		}
	}()
	b.ResetTimer()
	for i := range b.N {
		if err := a.PushChunk(there, chunks[i], -1); err != nil {
			b.Fatal(err)
		}
		if _, err := a.PullChunk(back); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := a.StopStream(there, false); err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
