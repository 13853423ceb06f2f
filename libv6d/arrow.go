package main

/*
#include "v6d.h"
*/
import "C"

import (
	"unsafe"

	"github.com/v6d-io/v6d-go/internal/arrowc"
	"github.com/v6d-io/v6d-go/internal/client"
	"github.com/v6d-io/v6d-go/internal/ids"
)

// The Arrow C data interface of include/v6d.h. The exports take the header's
// struct types (so v6d.c checks them); package arrowc gets them as
// unsafe.Pointer, since it includes the same header.

func putID(id *C.uint64_t) error {
	if id == nil {
		return nullArg("id")
	}
	return nil
}

//export v6dgo_put_arrow_array
func v6dgo_put_arrow_array(h C.uint64_t, array *C.struct_ArrowArray, schema *C.struct_ArrowSchema, flags C.uint32_t, extra *C.char, id *C.uint64_t, err *C.v6d_error) C.int32_t {
	defer arrowc.ReleaseArray(unsafe.Pointer(array)) // moved on every path, also a bad handle
	return with(h, err, func(c *client.Client) error {
		if e := putID(id); e != nil {
			return e
		}
		if e := checkFlags("v6d_put_arrow_array", flags, putArrayFlags); e != nil {
			return e
		}
		oid, e := arrowc.PutArray(c, unsafe.Pointer(array), unsafe.Pointer(schema), uint32(flags), jsonArg(extra, 0))
		if e == nil {
			*id = C.uint64_t(oid)
		}
		return e
	})
}

//export v6dgo_put_arrow_stream
func v6dgo_put_arrow_stream(h C.uint64_t, stream *C.struct_ArrowArrayStream, flags C.uint32_t, extra *C.char, id *C.uint64_t, err *C.v6d_error) C.int32_t {
	defer arrowc.ReleaseStream(unsafe.Pointer(stream)) // consumed on every path, also a bad handle
	return with(h, err, func(c *client.Client) error {
		if e := putID(id); e != nil {
			return e
		}
		if e := checkFlags("v6d_put_arrow_stream", flags, putStreamFlags); e != nil {
			return e
		}
		oid, e := arrowc.PutStream(c, unsafe.Pointer(stream), uint32(flags), jsonArg(extra, 0))
		if e == nil {
			*id = C.uint64_t(oid)
		}
		return e
	})
}

//export v6dgo_get_arrow_array
func v6dgo_get_arrow_array(h C.uint64_t, id C.uint64_t, out *C.struct_ArrowArray, outSchema *C.struct_ArrowSchema, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		return arrowc.GetArray(c, ids.ObjectID(id), unsafe.Pointer(out), unsafe.Pointer(outSchema))
	})
}

//export v6dgo_get_arrow_stream
func v6dgo_get_arrow_stream(h C.uint64_t, id C.uint64_t, out *C.struct_ArrowArrayStream, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		return arrowc.GetStream(c, ids.ObjectID(id), unsafe.Pointer(out))
	})
}

//export v6dgo_arrow_array_from_meta
func v6dgo_arrow_array_from_meta(h C.uint64_t, js *C.char, n C.size_t, out *C.struct_ArrowArray, outSchema *C.struct_ArrowSchema, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		if js == nil {
			return nullArg("json")
		}
		return arrowc.ArrayFromMeta(c, jsonArg(js, n), unsafe.Pointer(out), unsafe.Pointer(outSchema))
	})
}

//export v6dgo_arrow_stream_from_meta
func v6dgo_arrow_stream_from_meta(h C.uint64_t, js *C.char, n C.size_t, out *C.struct_ArrowArrayStream, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		if js == nil {
			return nullArg("json")
		}
		return arrowc.StreamFromMeta(c, jsonArg(js, n), unsafe.Pointer(out))
	})
}

//export v6dgo_is_shared_memory
func v6dgo_is_shared_memory(h C.uint64_t, address unsafe.Pointer, out *C.int32_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		if out == nil {
			return nullArg("out")
		}
		setBool(out, client.IsSharedMemory(uintptr(address)))
		return nil
	})
}

//export v6dgo_arrow_exports
func v6dgo_arrow_exports() C.int64_t { return C.int64_t(arrowc.LiveExports()) }
