package arrowc

/*
#include "cabi.h"
*/
import "C"

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime/cgo"
	"runtime/debug"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/cdata"
)

// LiveExports returns the number of exported Arrow structs (top-level
// arrays, schemas and streams) whose release callback has not run yet.
func LiveExports() int64 { return int64(C.arrowc_live()) }

// exportArray exports arr, built from n, into the ArrowArray at out
// (released or zeroed), and makes its release callbacks count and fork-safe.
func exportArray(arr arrow.Array, n *node, out unsafe.Pointer) {
	a := (*C.struct_ArrowArray)(out)
	cdata.ExportArrowArray(arr, (*cdata.CArrowArray)(out), nil)
	fixChildren(n, a)
	C.arrowc_wrap_array(a, 1)
}

// fixChildren restores the shape (offset, length, null count) of the
// children of struct and
// sparse union arrays: arrow-go exports them pre-sliced by the parent's
// offset and also exports the parent's offset, which a consumer applies
// again (the C data interface applies a parent's offset to its children).
func fixChildren(n *node, a *C.struct_ArrowArray) {
	if a.n_children != C.int64_t(len(n.children)) {
		return
	}
	kids := unsafe.Slice(a.children, a.n_children)
	for i, k := range kids {
		switch n.dt.ID() {
		case arrow.STRUCT, arrow.SPARSE_UNION:
			k.offset = C.int64_t(n.children[i].offset)
			k.length = C.int64_t(n.children[i].length)
			k.null_count = C.int64_t(n.children[i].nulls)
		}
		fixChildren(n.children[i], k)
	}
	if a.dictionary != nil && n.dict != nil {
		fixChildren(n.dict, a.dictionary)
	}
}

// exportSchema exports f into the ArrowSchema at out (released or zeroed),
// all in malloc'ed memory with a release callback in C: freeing a schema
// never enters Go.
func exportSchema(f *field, out unsafe.Pointer) {
	s := (*C.struct_ArrowSchema)(out)
	fillSchema(f, s)
	C.arrowc_count_schema(s)
}

func fillSchema(f *field, out *C.struct_ArrowSchema) {
	*out = C.struct_ArrowSchema{}
	out.format = C.CString(f.format)
	out.name = C.CString(f.name)
	out.metadata = encodeMetadata(f.metadata)
	out.flags = C.int64_t(f.flags)
	if n := len(f.children); n > 0 {
		ptrs := (**C.struct_ArrowSchema)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(uintptr(0)))))
		kids := unsafe.Slice(ptrs, n)
		for i, c := range f.children {
			kids[i] = (*C.struct_ArrowSchema)(C.calloc(1, C.sizeof_struct_ArrowSchema))
			fillSchema(c, kids[i])
		}
		out.children, out.n_children = ptrs, C.int64_t(n)
	}
	if f.dict != nil {
		out.dictionary = (*C.struct_ArrowSchema)(C.calloc(1, C.sizeof_struct_ArrowSchema))
		fillSchema(f.dict, out.dictionary)
	}
	out.release = (*[0]byte)(C.arrowc_release_schema)
}

// encodeMetadata returns the C data interface encoding of kvs in malloc'ed
// memory, or NULL for none.
func encodeMetadata(kvs []kv) *C.char {
	if len(kvs) == 0 {
		return nil
	}
	size := 4
	for _, p := range kvs {
		size += 8 + len(p.key) + len(p.value)
	}
	p := C.malloc(C.size_t(size))
	b := unsafe.Slice((*byte)(p), size)
	binary.NativeEndian.PutUint32(b, uint32(len(kvs)))
	i := 4
	for _, e := range kvs {
		for _, s := range [2]string{e.key, e.value} {
			binary.NativeEndian.PutUint32(b[i:], uint32(len(s)))
			i += 4 + copy(b[i+4:], s)
		}
	}
	return (*C.char)(p)
}

// stream is an ArrowArrayStream this package exports: the items of an object,
// built up front (no data is touched), handed out one by one.
type stream struct {
	mu     sync.Mutex
	schema *field
	items  []*node
	arrays []arrow.Array // not yet handed out (nil once handed out)
	next   int
	h      *holder
}

// exportStream exports the items of o into out; the stream owns arrays and
// the construction hold of h.
func exportStream(o *object, arrays []arrow.Array, h *holder, out *C.struct_ArrowArrayStream) {
	s := &stream{schema: o.schema, items: o.items, arrays: arrays, h: h}
	C.arrowc_init_stream(out, C.uintptr_t(cgo.NewHandle(arrowStream(s))))
}

// arrowStream is a stream this package exports: the items of an object
// (stream) or the chunks of a vineyard::RecordBatchStream (liveStream).
type arrowStream interface {
	getSchema(out unsafe.Pointer) error
	getNext(out unsafe.Pointer) error // leaves out zeroed at the end
	release()
}

// streamOf returns the Go stream of a stream this package exported, and its
// handle.
func streamOf(s *C.struct_ArrowArrayStream) (arrowStream, cgo.Handle, error) {
	h := cgo.Handle((*C.struct_arrowc_stream)(s.private_data).handle)
	st, ok := h.Value().(arrowStream)
	if !ok {
		return nil, h, errNotStream
	}
	return st, h, nil
}

// guarded runs fn, turning a panic into an error: a panic must never unwind
// through a C frame of the consumer.
func guarded(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(os.Stderr, "libv6d: internal error in an Arrow stream: %v\n%s", r, debug.Stack())
			err = fmt.Errorf("internal error: %v", r)
		}
	}()
	return fn()
}

func setStreamError(s *C.struct_ArrowArrayStream, err error) C.int {
	msg := err.Error()
	C.arrowc_set_stream_error(s, (*C.char)(unsafe.Pointer(unsafe.StringData(msg))), C.size_t(len(msg)))
	return C.int(5) // EIO
}

//export v6dArrowStreamGetSchema
func v6dArrowStreamGetSchema(s *C.struct_ArrowArrayStream, out *C.struct_ArrowSchema) C.int {
	err := guarded(func() error {
		st, _, err := streamOf(s)
		if err == nil {
			err = st.getSchema(unsafe.Pointer(out))
		}
		return err
	})
	if err != nil {
		return setStreamError(s, err)
	}
	return 0
}

//export v6dArrowStreamGetNext
func v6dArrowStreamGetNext(s *C.struct_ArrowArrayStream, out *C.struct_ArrowArray) C.int {
	err := guarded(func() error {
		st, _, err := streamOf(s)
		if err == nil {
			err = st.getNext(unsafe.Pointer(out))
		}
		return err
	})
	if err != nil {
		return setStreamError(s, err)
	}
	return 0
}

func (st *stream) getSchema(out unsafe.Pointer) error {
	exportSchema(st.schema, out)
	return nil
}

func (st *stream) getNext(out unsafe.Pointer) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.next == len(st.items) {
		return nil // out was zeroed: the end of the stream
	}
	arr := st.arrays[st.next]
	st.arrays[st.next] = nil
	exportArray(arr, st.items[st.next], out)
	arr.Release()
	st.next++
	return nil
}

func (st *stream) release() {
	st.mu.Lock()
	defer st.mu.Unlock()
	for i, a := range st.arrays {
		if a != nil {
			a.Release()
			st.arrays[i] = nil
		}
	}
	st.h.unref()
}

//export v6dArrowStreamRelease
func v6dArrowStreamRelease(s *C.struct_ArrowArrayStream) {
	_ = guarded(func() error {
		st, h, err := streamOf(s)
		if err != nil {
			return err
		}
		h.Delete()
		st.release()
		return nil
	})
}
