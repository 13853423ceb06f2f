// Package arrowc stores Arrow data in vineyard objects and hands it out
// through the Arrow C data interface, zero-copy.
//
// Put imports a caller's ArrowArray or ArrowArrayStream with arrow-go's cdata
// (zero copy), creates one blob per buffer in one round trip, copies each
// buffer once, and creates the whole tree of objects (one per array node,
// docs/protocol.md "Arrow objects") in a second round trip.
//
// Get decodes a metadata tree the client holds the blobs of, builds arrow-go
// arrays over the client's read-only mapping of those blobs and exports them
// with cdata: the exported buffers point into the shared arena. Each export
// takes a client.Lease on its blobs (no round trip); the lease is released
// when the last buffer of the export is freed, i.e. when the consumer has
// released everything it got, on whatever thread that happens. Release
// callbacks never enter Go in a child forked after the export, and schemas
// are freed in C.
//
// Exported structs are C memory (cgocheck2-clean): arrow-go allocates the
// scaffolding with malloc, buffers lie in the arena, schemas are built here
// with malloc.
package arrowc

/*
#include "cabi.h"
*/
import "C"

import (
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/v6d-io/v6d-go/internal/client"
	"github.com/v6d-io/v6d-go/internal/ids"
)

// Flags of PutArray and PutStream (V6D_ARROW_* in include/v6d.h).
const (
	// FlagRecordBatch stores a struct array as a vineyard::RecordBatch.
	FlagRecordBatch = 1
	// FlagChunked stores a stream as a vineyard::ChunkedArray, also when its
	// items are struct arrays.
	FlagChunked = 2
)

// PutArray stores the ArrowArray at array, of the type the ArrowSchema at
// schema describes, and returns the new object's id. The array is moved: it
// is released (and marked so) when PutArray returns, also on failure; the
// schema is only read. A struct array is stored as a StructArray, or as a
// RecordBatch with FlagRecordBatch. extra is a JSON object of scalar fields
// for the root of the tree, or nil. The client keeps no reference to what it
// stored.
func PutArray(c *client.Client, array, schema unsafe.Pointer, flags uint32, extra []byte) (ids.ObjectID, error) {
	a := (*C.struct_ArrowArray)(array)
	switch {
	case a == nil:
		return 0, errorf(ErrInvalidArgument, "ArrowArray is NULL")
	case a.release == nil:
		return 0, errorf(ErrInvalidArgument, "ArrowArray is released")
	}
	defer C.arrowc_release_array(a)
	body, err := extraFields(extra)
	if err != nil {
		return 0, err
	}
	f, err := schemaField(schema)
	if err != nil {
		return 0, err
	}
	if flags&FlagRecordBatch != 0 && f.format != "+s" {
		return 0, errorf(ErrInvalidArgument, "a record batch must be a struct array, not of format %q", f.format)
	}
	arr, err := importArray(a, f)
	if err != nil {
		return 0, err
	}
	defer arr.Release() // after the copy: releases the caller's array (outside any client lock)
	p := &plan{}
	o := &object{schema: f}
	var n *node
	if flags&FlagRecordBatch != 0 {
		o.typename = typeRecordBatch
		n, err = p.batch(f, arr.Data())
	} else {
		n, err = p.node(f, arr.Data())
	}
	if err != nil {
		return 0, err
	}
	o.items = []*node{n}
	return p.store(c, o, nil, body)
}

// PutStream consumes the ArrowArrayStream at stream to its end, releases it
// (also on failure), and stores its items: struct arrays as a
// vineyard::Table of record batches (unless FlagChunked), any other type as a
// vineyard::ChunkedArray. Two round trips, whatever the number of items.
// extra is as for PutArray.
func PutStream(c *client.Client, stream unsafe.Pointer, flags uint32, extra []byte) (ids.ObjectID, error) {
	s := (*C.struct_ArrowArrayStream)(stream)
	switch {
	case s == nil:
		return 0, errorf(ErrInvalidArgument, "ArrowArrayStream is NULL")
	case s.release == nil:
		return 0, errorf(ErrInvalidArgument, "ArrowArrayStream is released")
	}
	defer C.arrowc_stream_release(s)
	body, err := extraFields(extra)
	if err != nil {
		return 0, err
	}
	f, err := streamSchema(s)
	if err != nil {
		return 0, err
	}
	o := &object{typename: typeTable, schema: f}
	if flags&FlagChunked != 0 || f.format != "+s" {
		o.typename = typeChunkedArray
	}
	arrs, err := drain(s, f)
	defer func() {
		for _, a := range arrs {
			a.Release()
		}
	}()
	if err != nil {
		return 0, err
	}
	p := &plan{}
	for _, a := range arrs {
		var n *node
		if o.typename == typeTable {
			n, err = p.batch(f, a.Data())
		} else {
			n, err = p.node(f, a.Data())
		}
		if err != nil {
			return 0, err
		}
		o.items = append(o.items, n)
	}
	var empty *node
	if len(o.items) == 0 {
		if empty, err = p.emptyOf(f, o.typename == typeTable); err != nil {
			return 0, err
		}
	}
	return p.store(c, o, empty, body)
}

// streamSchema reads (and releases) the schema of a caller's stream.
func streamSchema(s *C.struct_ArrowArrayStream) (*field, error) {
	sc := (*C.struct_ArrowSchema)(C.calloc(1, C.sizeof_struct_ArrowSchema))
	defer C.free(unsafe.Pointer(sc))
	if rc := C.arrowc_stream_get_schema(s, sc); rc != 0 {
		return nil, streamError(s, "get_schema", rc)
	}
	defer C.arrowc_release_foreign_schema(sc)
	f, err := readSchema(sc, 0)
	if err != nil {
		return nil, err
	}
	if _, err := f.dataType(); err != nil {
		return nil, err
	}
	return f, nil
}

// drain imports every array of a caller's stream.
func drain(s *C.struct_ArrowArrayStream, f *field) ([]arrow.Array, error) {
	a := (*C.struct_ArrowArray)(C.calloc(1, C.sizeof_struct_ArrowArray))
	defer C.free(unsafe.Pointer(a))
	var out []arrow.Array
	for {
		if rc := C.arrowc_stream_get_next(s, a); rc != 0 {
			return out, streamError(s, "get_next", rc)
		}
		if a.release == nil {
			return out, nil
		}
		arr, err := importArray(a, f)
		if err != nil {
			return out, err
		}
		out = append(out, arr)
	}
}

func streamError(s *C.struct_ArrowArrayStream, call string, rc C.int) error {
	msg := "no message"
	if p := C.arrowc_stream_last_error(s); p != nil {
		msg = C.GoString(p)
	}
	return errorf(ErrArrow, "the stream's %s failed (errno %d): %s", call, int(rc), msg)
}

// GetArray gets object id (one round trip) and exports it into out and
// outSchema: an array, a record batch (as a struct array), or a table or
// chunked array of exactly one chunk. The buffers point into the shared
// arena; out's release callback (and that of every struct moved out of it)
// drops the references when the last is released.
func GetArray(c *client.Client, id ids.ObjectID, out, outSchema unsafe.Pointer) error {
	if err := checkOut(out, outSchema, true); err != nil {
		return err
	}
	return withObject(c, id, func(tree []byte) error { return ArrayFromMeta(c, tree, out, outSchema) })
}

// GetStream gets object id (one round trip) and exports it as a stream into
// out: the batches of a table, the chunks of a chunked array, or one item;
// of a vineyard::RecordBatchStream, the batches of its chunks as they come
// (the stream is opened for reading on c, and its first chunk pulled).
func GetStream(c *client.Client, id ids.ObjectID, out unsafe.Pointer) error {
	if err := checkOut(out, nil, false); err != nil {
		return err
	}
	return withObject(c, id, func(tree []byte) error {
		if isRecordBatchStream(tree) {
			return getLiveStream(c, id, (*C.struct_ArrowArrayStream)(out))
		}
		return StreamFromMeta(c, tree, out)
	})
}

// withObject gets object id (one round trip) and runs export on its tree
// while the get's references are held; the export takes its own.
func withObject(c *client.Client, id ids.ObjectID, export func(tree []byte) error) error {
	tree, err := c.GetObject(id)
	if err != nil {
		return err
	}
	defer c.Release(id) //nolint:errcheck // the export holds its own references
	return export(tree)
}

// ArrayFromMeta exports the object of a metadata (sub)tree, whose blobs the
// client holds (from GetObject), as GetArray does; no round trip.
func ArrayFromMeta(c *client.Client, tree []byte, out, outSchema unsafe.Pointer) error {
	if err := checkOut(out, outSchema, true); err != nil {
		return err
	}
	o, views, h, err := prepare(c, tree)
	if err != nil {
		return err
	}
	defer h.unref()
	if len(o.items) != 1 {
		return errorf(ErrNotArrow, "%s has %d chunks, not 1: get it as a stream (v6d_get_arrow_stream)",
			o.typename, len(o.items))
	}
	b := &builder{views: views, h: h}
	arr := b.array(o.items[0])
	defer arr.Release()
	exportArray(arr, o.items[0], out)
	exportSchema(o.schema, outSchema)
	return nil
}

// StreamFromMeta exports the object of a metadata (sub)tree, whose blobs the
// client holds, as GetStream does; no round trip.
func StreamFromMeta(c *client.Client, tree []byte, out unsafe.Pointer) error {
	if err := checkOut(out, nil, false); err != nil {
		return err
	}
	o, views, h, err := prepare(c, tree)
	if err != nil {
		return err
	}
	b := &builder{views: views, h: h}
	arrays := make([]arrow.Array, len(o.items))
	for i, n := range o.items {
		arrays[i] = b.array(n)
	}
	exportStream(o, arrays, h, (*C.struct_ArrowArrayStream)(out))
	return nil
}

// prepare decodes a tree, takes a lease on its blobs and validates every
// array against them. The caller owns the holder's construction hold.
func prepare(c *client.Client, tree []byte) (*object, [][]byte, *holder, error) {
	o, blobs, err := decodeObject(tree)
	if err != nil {
		return nil, nil, nil, err
	}
	lease, views, err := c.Retain(blobs)
	if err != nil {
		return nil, nil, nil, err
	}
	h := newHolder(lease)
	chk := &checker{views: views}
	for _, n := range o.items {
		if err := chk.check(n); err != nil {
			h.unref()
			return nil, nil, nil, err
		}
	}
	return o, views, h, nil
}

// checkOut checks output structs: not NULL, and not holding a live struct
// (which would leak).
func checkOut(out, outSchema unsafe.Pointer, wantSchema bool) error {
	if out == nil || (wantSchema && outSchema == nil) {
		return errorf(ErrInvalidArgument, "output struct is NULL")
	}
	live := false
	if wantSchema {
		live = (*C.struct_ArrowArray)(out).release != nil || (*C.struct_ArrowSchema)(outSchema).release != nil
	} else {
		live = (*C.struct_ArrowArrayStream)(out).release != nil
	}
	if live {
		return errorf(ErrInvalidArgument, "output struct holds a live Arrow struct: release it (or zero it) first")
	}
	return nil
}

// ReleaseArray calls the release callback of the ArrowArray at p, if it is
// not NULL and not released: how a put consumes its input on every path.
func ReleaseArray(p unsafe.Pointer) { C.arrowc_release_array((*C.struct_ArrowArray)(p)) }

// ReleaseStream calls the release callback of the ArrowArrayStream at p, if
// it is not NULL and not released.
func ReleaseStream(p unsafe.Pointer) { C.arrowc_stream_release((*C.struct_ArrowArrayStream)(p)) }
