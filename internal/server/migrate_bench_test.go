package server

import (
	"testing"
	"time"

	"github.com/v6d-io/v6d-go/internal/client"
	"github.com/v6d-io/v6d-go/internal/etcdtest"
	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/store"

	"github.com/v6d-io/v6d-go/internal/peer"
	"github.com/v6d-io/v6d-go/internal/peer/peertest"
)

// Migration between two real daemons (in this process, each with its own
// arena, store and peer service, on an in-process etcd), driven through the
// client API over B's socket, against the physical floors of the same run:
// memcpy and a raw loopback TCP copy of the same size. make bench-transfer
// runs it; docs/performance.md ("Transfer between daemons") reads it.
//
//	go test -run '^$' -bench Migrate -benchtime 3x ./internal/server/

// benchDaemon starts a daemon of the benchmark's cluster with the daemon's
// default background pre-fault (vineyardd's --prefault-ahead).
func benchDaemon(b *testing.B, etcd *etcdtest.Server, size uint64) *Server {
	b.Helper()
	return clusterServerPrefault(b, etcd, size, 0)
}

// migrateOnce migrates id through cl and deletes the copy again (untimed),
// so that the next round transfers again into reused memory.
func migrateOnce(b *testing.B, s *Server, cl *client.Client, id ids.ObjectID) {
	cp, err := cl.Migrate(id)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	s.store.Delete([]ids.ObjectID{cp}, store.DeleteOptions{Deep: true})
	b.StartTimer()
}

func BenchmarkMigrate(b *testing.B) {
	sizes := []struct {
		name string
		size int
	}{{"1MiB", 1 << 20}, {"64MiB", 64 << 20}, {"1GiB", 1 << 30}}
	etcd := etcdtest.Run(b)
	a := benchDaemon(b, etcd, 1<<30+96<<20)
	dst := benchDaemon(b, etcd, 1<<30+96<<20)
	cl, err := client.Connect(dst.Socket())
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	for _, sz := range sizes {
		if testing.Short() && sz.size > 64<<20 {
			continue
		}
		// Made on first use, so that a -bench filter leaving out a size
		// does not pay for storing and faulting in its bytes.
		var id ids.ObjectID
		prep := func(b *testing.B) {
			if id == 0 {
				var err error
				if id, err = storeTensor(a, sz.size, func(p []byte) { bigPattern(p, 7) }); err != nil {
					b.Fatal(err)
				}
				synced(b, dst)
			}
		}
		var data, into []byte
		floor := func() {
			if data == nil {
				data, into = peertest.Prefault(sz.size), peertest.Prefault(sz.size)
			}
		}
		b.Run(sz.name+"/memcpy", func(b *testing.B) { floor(); peertest.BenchMemcpy(b, into, data) })
		b.Run(sz.name+"/tcp", func(b *testing.B) { floor(); peertest.BenchTCP(b, data, into) })
		data, into = nil, nil
		// peer.DefaultMaxStreams is one of these: one per core, at most 4.
		// chunks-streams=2 keeps the bytes inside gRPC messages (no raw data
		// connections: peer.ClientConfig.NoRaw), the path before them.
		for _, v := range []struct {
			name    string
			streams int
			noRaw   bool
		}{{"migrate-streams=1", 1, false}, {"migrate-streams=2", 2, false}, {"migrate-streams=4", 4, false}, {"migrate-chunks-streams=2", 2, true}} {
			b.Run(sz.name+"/"+v.name, func(b *testing.B) {
				prep(b)
				setPeerClient(b, dst, peer.ClientConfig{MaxStreams: v.streams, NoRaw: v.noRaw})
				migrateOnce(b, dst, cl, id) // connect; the destination's memory touched once
				b.SetBytes(int64(sz.size))
				m := peertest.StartCPU(b)
				for b.Loop() {
					migrateOnce(b, dst, cl, id)
				}
				m.Stop(b, sz.size)
			})
		}
		if id != 0 {
			a.store.Delete([]ids.ObjectID{id}, store.DeleteOptions{Deep: true})
		}
	}
}

// BenchmarkMigrateColdDestination migrates 256 MiB into a daemon started
// afresh (without background pre-fault) for every round: the copy lands in
// never-touched memory, as the first migrations into a new daemon do, so it
// pays the first-touch page faults that BenchmarkMigrate's reused memory
// does not.
func BenchmarkMigrateColdDestination(b *testing.B) {
	const size = 256 << 20
	etcd := etcdtest.Run(b)
	a := benchDaemon(b, etcd, size+32<<20)
	id, err := storeTensor(a, size, func(p []byte) { bigPattern(p, 7) })
	if err != nil {
		b.Fatal(err)
	}
	// raw is the default data path, chunks the bytes inside gRPC messages
	// (peer.ClientConfig.NoRaw): they fault the destination's pages in the
	// kernel's copy and in the client's decode respectively.
	for _, v := range []struct {
		name  string
		noRaw bool
	}{{"raw", false}, {"chunks", true}} {
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				b.StopTimer()
				dst := clusterServer(b, etcd, size+32<<20) // no background pre-fault
				setPeerClient(b, dst, peer.ClientConfig{NoRaw: v.noRaw})
				synced(b, dst)
				b.StartTimer()
				if _, err := dst.Migrate(b.Context(), id); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				_ = dst.Close()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkMigrateSmall measures the latency of migrating a 64-byte tensor
// (the daemon's fetch is one peer round trip) in round trips of the client
// to its own daemon: the rt metric divides it by a migrate of a local
// object, which the daemon answers at once.
func BenchmarkMigrateSmall(b *testing.B) {
	etcd := etcdtest.Run(b)
	a := benchDaemon(b, etcd, 64<<20)
	dst := benchDaemon(b, etcd, 64<<20)
	cl, err := client.Connect(dst.Socket())
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	id, err := storeTensor(a, 64, func(p []byte) { copy(p, pattern(3, 64)) })
	if err != nil {
		b.Fatal(err)
	}
	local, err := storeTensor(dst, 64, func(p []byte) { copy(p, pattern(4, 64)) })
	if err != nil {
		b.Fatal(err)
	}
	synced(b, dst)
	// roundTrip is the mean time of a migrate of a local object.
	roundTrip := func(b *testing.B) float64 {
		const n = 2000
		start := time.Now()
		for range n {
			if _, err := cl.Migrate(local); err != nil {
				b.Fatal(err)
			}
		}
		return float64(time.Since(start).Nanoseconds()) / n
	}
	b.Run("local-round-trip", func(b *testing.B) {
		for b.Loop() {
			if _, err := cl.Migrate(local); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("remote", func(b *testing.B) {
		rt := roundTrip(b)
		migrateOnce(b, dst, cl, id)
		b.ResetTimer()
		for b.Loop() {
			migrateOnce(b, dst, cl, id)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/rt, "rt")
	})
}
