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
	return s, ss, p.ObjectID
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
		ss.GetDataWithBuffers([]ids.ObjectID{c.ID})
	}
}
