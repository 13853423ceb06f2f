package client

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/server"
)

// Remote (TCP) put and get bandwidth over loopback against a raw loopback
// TCP copy of the same size in the same run (docs/cluster-rpc.md): the goal
// is at least 0.7x of raw. The daemon runs in-process with its arena
// pre-faulted; the raw copy reads into one reused buffer, the remote get
// into memory of its own (recently freed copies are reused, as in any
// client that gets repeatedly). A put is one create_remote_buffers round
// trip, a get one get_remote_buffers round trip (the release of the previous
// get rides ahead of it), the raw copy one write and a one-byte answer.
//
//	go test -run '^$' -bench Remote -benchtime 5x ./internal/client/

var remoteBenchSizes = []int{1 << 20, 16 << 20, 256 << 20, 1 << 30}

func benchServer(b *testing.B, size uint64) *server.Server {
	b.Helper()
	dir, err := os.MkdirTemp("", "v6d-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	srv, err := server.Start(server.Config{Socket: filepath.Join(dir, "s.sock"), Size: size, ReserveMemory: true,
		RPCEndpoint: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Close() })
	<-srv.Ready()
	return srv
}

func BenchmarkRemote(b *testing.B) {
	srv := benchServer(b, (1<<30)+(64<<20))
	c := connectRPCTest(b, srv)
	for _, n := range remoteBenchSizes {
		data := randomBytes(n)
		b.Run(fmt.Sprintf("raw-tcp/%dMiB", n>>20), func(b *testing.B) { benchRawTCP(b, data) })
		b.Run(fmt.Sprintf("put/%dMiB", n>>20), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				bids, err := c.CreateRemoteBuffers([][]byte{data})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer() // the delete is not part of a put
				if _, err := c.Delete(bids, true, false, false); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
		bids, err := c.CreateRemoteBuffers([][]byte{data})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("get/%dMiB", n>>20), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				if _, err := c.GetBuffers(bids, false); err != nil {
					b.Fatal(err)
				}
				// Deferred, as always: sent ahead of the next get, in its write.
				if err := c.Release(bids[0]); err != nil {
					b.Fatal(err)
				}
			}
		})
		if _, err := c.Delete(bids, true, false, false); err != nil {
			b.Fatal(err)
		}
	}
}

// benchRawTCP copies data over a loopback TCP connection into a reused
// buffer and waits for a one-byte acknowledgement: the floor of a transfer.
// Both ends use protocol.Sock (blocking system calls), as client and daemon
// do.
func benchRawTCP(b *testing.B, data []byte) {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	done := make(chan error, 1)
	go func() {
		nc, err := ln.AcceptTCP()
		if err != nil {
			done <- err
			return
		}
		sc, err := protocol.SockOf(nc)
		if err != nil {
			done <- err
			return
		}
		defer func() { _ = sc.Close() }()
		buf := make([]byte, len(data))
		for i := 0; i < len(buf); i += 4096 {
			buf[i] = 1 // touched before the clock starts
		}
		for {
			if _, err := io.ReadFull(sc, buf); err != nil {
				done <- nil
				return
			}
			if _, err := sc.Write([]byte{1}); err != nil {
				done <- err
				return
			}
		}
	}()
	cc, err := protocol.DialTCP(ln.Addr().String(), 0)
	if err != nil {
		b.Fatal(err)
	}
	var ack [1]byte
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := cc.Write(data); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(cc, ack[:]); err != nil {
			b.Fatal(err)
		}
	}
	_ = cc.Close()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
