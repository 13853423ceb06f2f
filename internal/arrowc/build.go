package arrowc

import (
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/v6d-io/v6d-go/internal/client"
)

// holder keeps one export's lease (its blobs pinned, its client open) while
// anything uses it: each buffer built over the lease's views counts one, and
// so does whoever builds or streams (the "construction hold"). When the count
// reaches zero the lease is released. It is the memory.Allocator of those
// buffers: arrow-go calls Free when a buffer's last reference goes, which
// happens inside the release callback of the last exported struct using it.
type holder struct {
	n     atomic.Int64
	lease *client.Lease
}

// newHolder returns a holder with the construction hold taken.
func newHolder(l *client.Lease) *holder {
	h := &holder{lease: l}
	h.n.Store(1)
	return h
}

// Allocate never happens: buffers over the arena are immutable. Handing Go
// memory to C would break the cgo rules, so this is a bug if reached.
func (*holder) Allocate(int) []byte { panic("arrowc: allocation from an arena buffer") }

// Reallocate never happens either (see Allocate).
func (*holder) Reallocate(int, []byte) []byte { panic("arrowc: reallocation of an arena buffer") }

// Free drops the count of one buffer.
func (h *holder) Free([]byte) { h.unref() }

func (h *holder) ref() { h.n.Add(1) }

func (h *holder) unref() {
	if h.n.Add(-1) == 0 {
		_ = h.lease.Release() // nobody to tell: the daemon is told, or the client is gone
	}
}

// builder makes arrow-go arrays over the views of an export's blobs. Nodes
// must have passed the checker first: arrow-go panics on inconsistent data.
type builder struct {
	views [][]byte
	h     *holder
}

func (b *builder) buffer(i int) *memory.Buffer {
	if i < 0 || len(b.views[i]) == 0 {
		return nil
	}
	b.h.ref()
	return memory.NewBufferWithAllocator(b.views[i], b.h)
}

// data returns the array data of n; the caller owns one reference.
func (b *builder) data(n *node) *array.Data {
	l := layoutOf(n.dt)
	var bufs []*memory.Buffer
	switch {
	case n.dt.ID() == arrow.RUN_END_ENCODED:
		bufs = []*memory.Buffer{}
	case l.goNone:
	default:
		if l.goSlot0 {
			bufs = append(bufs, nil)
		}
		for k, i := range n.bufs {
			buf := b.buffer(i)
			if buf == nil && l.variadic && k >= len(l.specs) {
				// arrow-go reads the length of every data buffer of a view
				// array: an empty one must be a buffer, not nil.
				buf = memory.NewBufferBytes(nil)
			}
			bufs = append(bufs, buf)
		}
	}
	children := make([]arrow.ArrayData, len(n.children))
	for i, c := range n.children {
		children[i] = b.data(c)
	}
	var d *array.Data
	if n.dict != nil {
		dict := b.data(n.dict)
		d = array.NewDataWithDictionary(n.dt, int(n.length), bufs, int(n.nulls), int(n.offset), dict)
		dict.Release()
	} else {
		d = array.NewData(n.dt, int(n.length), bufs, children, int(n.nulls), int(n.offset))
	}
	for _, buf := range bufs {
		if buf != nil {
			buf.Release()
		}
	}
	for _, c := range children {
		c.Release()
	}
	return d
}

// array returns the array of n; the caller owns it.
func (b *builder) array(n *node) arrow.Array {
	d := b.data(n)
	defer d.Release()
	return array.MakeFromData(d)
}
