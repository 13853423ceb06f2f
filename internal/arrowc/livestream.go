package arrowc

//#include "cabi.h"
import "C"

import (
	"errors"
	"runtime/cgo"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/v6d-io/v6d-go/internal/client"
	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/status"
)

// typeRecordBatchStream is upstream's typename of a stream of record
// batches (internal/streams; python/vineyard/io/recordbatch.py).
const typeRecordBatchStream = "vineyard::RecordBatchStream"

// liveStream is an ArrowArrayStream over a vineyard::RecordBatchStream: each
// get_next pulls the stream's next chunk (waiting for the writer) and hands
// out its batches, zero-copy, each holding its own references. The first
// chunk is pulled when the stream is made, for its schema. The end of the
// stream (StreamDrained) is the end of the Arrow stream; a failed stream is
// an error of get_next.
type liveStream struct {
	mu      sync.Mutex
	c       *client.Client
	id      ids.ObjectID
	schema  *field
	pending []arrow.Array // batches of the chunk pulled last not yet handed out
	items   []*node
	h       *holder // the holder of pending's chunk, or nil
	done    bool
}

// getLiveStream opens the stream id for reading (a connection already
// reading it goes on) and exports it into out.
func getLiveStream(c *client.Client, id ids.ObjectID, out *C.struct_ArrowArrayStream) error {
	if err := c.OpenStream(id, client.StreamRead); err != nil && status.CodeOf(err) != status.StreamOpened {
		return err
	}
	s := &liveStream{c: c, id: id}
	if err := s.pullLocked(); err != nil {
		return err
	}
	if s.schema == nil { // ended before its first chunk: no columns
		s.schema = &field{format: "+s"}
	}
	C.arrowc_init_stream(out, C.uintptr_t(cgo.NewHandle(arrowStream(s))))
	return nil
}

// pullLocked pulls the next chunk into pending, or sets done at the end.
func (s *liveStream) pullLocked() error {
	s.dropLocked()
	chunk, err := s.c.PullChunk(s.id)
	if status.CodeOf(err) == status.StreamDrained {
		s.done = true
		return nil
	}
	if err != nil {
		return err
	}
	tree, err := s.c.GetObject(chunk)
	if err != nil {
		return err
	}
	defer s.c.Release(chunk) //nolint:errcheck // the batches hold their own references
	o, views, h, err := prepare(s.c, tree)
	if err != nil {
		return err
	}
	if o.typename != typeRecordBatch && o.typename != typeTable {
		h.unref()
		return errorf(ErrNotArrow, "chunk %v of stream %v is a %s, not a record batch or table", chunk, s.id, o.typename)
	}
	if s.schema == nil {
		s.schema = o.schema
	}
	b := &builder{views: views, h: h}
	for _, n := range o.items {
		s.pending = append(s.pending, b.array(n))
	}
	s.items, s.h = o.items, h
	return nil
}

// dropLocked releases the batches not handed out and the chunk's hold.
func (s *liveStream) dropLocked() {
	for _, a := range s.pending {
		a.Release()
	}
	s.pending, s.items = nil, nil
	if s.h != nil {
		s.h.unref()
		s.h = nil
	}
}

func (s *liveStream) getSchema(out unsafe.Pointer) error {
	exportSchema(s.schema, out)
	return nil
}

func (s *liveStream) getNext(out unsafe.Pointer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.pending) == 0 {
		if s.done {
			return nil // out was zeroed: the end of the stream
		}
		if err := s.pullLocked(); err != nil {
			return err
		}
	}
	arr, n := s.pending[0], s.items[0]
	s.pending, s.items = s.pending[1:], s.items[1:]
	exportArray(arr, n, out)
	arr.Release()
	return nil
}

func (s *liveStream) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropLocked()
}

// isRecordBatchStream reports whether tree is a vineyard::RecordBatchStream's.
func isRecordBatchStream(tree []byte) bool {
	r, err := decodeRaw(tree)
	return err == nil && r.typename == typeRecordBatchStream
}

var errNotStream = errors.New("not a stream of libv6d")
