package client

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// The hot paths of a client against an in-process daemon. Client and daemon
// share the process (and its scheduler), so absolute times differ from a
// separate daemon's; allocations and relative costs carry over.

func BenchmarkExists(b *testing.B) {
	c := connect(b, startServer(b, 64<<20))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Exists(1); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGetObject(b *testing.B) {
	c := connect(b, startServer(b, 64<<20))
	id, _ := put(b, c, bytes.Repeat([]byte{1}, 8))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.GetObject(id); err != nil {
			b.Fatal(err)
		}
		if err := c.Release(id); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPut(b *testing.B) {
	c := connect(b, startServer(b, 64<<20))
	b.ReportAllocs()
	for b.Loop() {
		bid, buf, err := c.CreateBuffer(8)
		if err != nil {
			b.Fatal(err)
		}
		copy(buf, "12345678")
		tree := fmt.Sprintf(`{"typename":"vineyard::Tensor<uint8>","shape_":"[8]","buffer_":{"id":"%v"}}`, bid)
		id, _, err := c.CreateMetadata([]byte(tree), []ids.ObjectID{bid})
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Release(id); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Delete([]ids.ObjectID{id}, false, true, false); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPutInline(b *testing.B) {
	c := connect(b, startServer(b, 64<<20))
	tree := []byte(`{"typename":"vineyard::Tensor<int64>","value_type_":"int64","shape_":"[1]","order_":"\"C\"","buffer_":{"inline":0}}`)
	data := [][]byte{[]byte("12345678")}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := c.CreateInline(tree, data); err != nil {
			b.Fatal(err)
		}
	}
}
