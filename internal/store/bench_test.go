package store

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// BenchmarkCreateData measures the daemon's side of a put of a small
// tensor: validating the tree, making the object, and the stored tree.
// benchStore returns a store, a session of it and a blob of 64 bytes that
// session created.
func benchStore(b *testing.B) (*Store, *Session, ids.ObjectID) {
	s, err := New(Config{Size: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	ss := s.NewSession()
	b.Cleanup(ss.Close)
	p, err := ss.CreateBuffer(64)
	if err != nil {
		b.Fatal(err)
	}
	return s, ss, p.ID
}

func BenchmarkCreateData(b *testing.B) {
	s, ss, bid := benchStore(b)
	if err := ss.Seal(bid); err != nil {
		b.Fatal(err)
	}
	tree := json.RawMessage(fmt.Sprintf(`{"typename":"vineyard::Tensor<int64>","shape_":"[1]","order_":"C",`+
		`"value_type_":"int64","value_type_meta_":"<i8","partition_index_":"[]","nbytes":8,"buffer_":{"id":"%v"}}`, bid))
	if _, err := ss.CreateData(tree, nil); err != nil { // keeps the blob through the deletes below
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		c, err := ss.CreateData(tree, nil)
		if err != nil {
			b.Fatal(err)
		}
		s.Delete([]ids.ObjectID{c.ID}, DeleteOptions{})
	}
}

// BenchmarkGetData measures the daemon's side of a get: the stored tree and
// the payloads of its blobs.
func BenchmarkGetData(b *testing.B) {
	_, ss, bid := benchStore(b)
	tree := json.RawMessage(fmt.Sprintf(`{"typename":"vineyard::Tensor<int64>","shape_":"[1]","buffer_":{"id":"%v"}}`, bid))
	c, err := ss.CreateData(tree, []ids.ObjectID{bid})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := ss.GetDataWithBuffers([]ids.ObjectID{c.ID}); err != nil {
			b.Fatal(err)
		}
	}
}

// fillStore creates n objects in ss, each a tensor over a blob of its own,
// and returns their ids.
func fillStore(tb testing.TB, ss *Session, n int) []ids.ObjectID {
	tb.Helper()
	out := make([]ids.ObjectID, n)
	for i := range out {
		out[i] = putTensor(tb, ss)
	}
	return out
}

// putTensor creates a sealed 64-byte blob and a tensor object over it; the
// session keeps no reference to the blob.
func putTensor(tb testing.TB, ss *Session) ids.ObjectID {
	p, err := ss.CreateBuffer(64)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := ss.CreateData(json.RawMessage(`{"typename":"vineyard::Tensor<int64>","shape_":"[8]","buffer_":{"id":"`+
		p.ID.String()+`"}}`), []ids.ObjectID{p.ID})
	if err != nil {
		tb.Fatal(err)
	}
	if err := ss.Release(p.ID); err != nil {
		tb.Fatal(err)
	}
	return c.ID
}

var storeSizes = []int{1_000, 10_000, 100_000}

// BenchmarkDelete measures one deep delete of a tensor and its blob in a
// store of n objects. The cost per op must not grow with n.
func BenchmarkDelete(b *testing.B) {
	for _, n := range storeSizes {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			s, err := New(Config{Size: 256 << 20})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			ss := s.NewSession()
			defer ss.Close()
			fillStore(b, ss, n)
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				id := putTensor(b, ss)
				b.StartTimer()
				s.Delete([]ids.ObjectID{id}, DeleteOptions{Deep: true})
			}
		})
	}
}

// BenchmarkClear measures Clear of a store of n objects (and their n
// blobs); the ns/object figure must stay flat as n grows. Run it with a
// small -benchtime (e.g. 3x): every op refills the store.
func BenchmarkClear(b *testing.B) {
	for _, n := range storeSizes {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			s, err := New(Config{Size: 256 << 20})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			ss := s.NewSession()
			defer ss.Close()
			for b.Loop() {
				b.StopTimer()
				fillStore(b, ss, n)
				b.StartTimer()
				s.Clear()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/object")
		})
	}
}

// BenchmarkGetRelease measures a round-trip get of a resident tensor and
// the release of its blob, with spilling off and on: what spilling adds to
// a get that needs no load (a state test per blob, a cold-queue entry per
// release).
func BenchmarkGetRelease(b *testing.B) {
	for _, spill := range []bool{false, true} {
		b.Run(fmt.Sprintf("spill=%v", spill), func(b *testing.B) {
			cfg := Config{Size: 64 << 20}
			if spill {
				cfg.SpillPath = b.TempDir() + "/spill"
			}
			s, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			ss := s.NewSession()
			b.Cleanup(ss.Close)
			id := putTensor(b, ss)
			_, exts, _, err := ss.GetDataWithBuffers([]ids.ObjectID{id})
			if err != nil {
				b.Fatal(err)
			}
			bid := exts[0].ID
			_ = ss.Release(bid)
			b.ReportAllocs()
			for b.Loop() {
				if _, _, _, err := ss.GetDataWithBuffers([]ids.ObjectID{id}); err != nil {
					b.Fatal(err)
				}
				_ = ss.Release(bid)
			}
		})
	}
}
