package main

/*
#include <stdint.h>
typedef struct v6d_error v6d_error; // defined in exports.go's preamble
*/
import "C"

import (
	"unsafe"

	"github.com/v6d-io/v6d-go/internal/arrowc"
	"github.com/v6d-io/v6d-go/internal/client"
	"github.com/v6d-io/v6d-go/internal/ids"
)

// The Arrow C data interface of include/v6d.h. The structs are passed as
// void*: the header declares them, and Go needs no layout of its own here.

func putID(id *C.uint64_t) error {
	if id == nil {
		return nullArg("id")
	}
	return nil
}

//export v6d_put_arrow_array
func v6d_put_arrow_array(h C.uint64_t, array, schema unsafe.Pointer, flags C.uint32_t, extra *C.char, id *C.uint64_t, err *C.v6d_error) C.int32_t {
	defer arrowc.ReleaseArray(array) // moved on every path, also a bad handle
	return with(h, err, func(c *client.Client) error {
		if e := putID(id); e != nil {
			return e
		}
		oid, e := arrowc.PutArray(c, array, schema, uint32(flags), jsonArg(extra, 0))
		if e == nil {
			*id = C.uint64_t(oid)
		}
		return e
	})
}

//export v6d_put_arrow_stream
func v6d_put_arrow_stream(h C.uint64_t, stream unsafe.Pointer, flags C.uint32_t, extra *C.char, id *C.uint64_t, err *C.v6d_error) C.int32_t {
	defer arrowc.ReleaseStream(stream) // consumed on every path, also a bad handle
	return with(h, err, func(c *client.Client) error {
		if e := putID(id); e != nil {
			return e
		}
		oid, e := arrowc.PutStream(c, stream, uint32(flags), jsonArg(extra, 0))
		if e == nil {
			*id = C.uint64_t(oid)
		}
		return e
	})
}

//export v6d_get_arrow_array
func v6d_get_arrow_array(h C.uint64_t, id C.uint64_t, out, outSchema unsafe.Pointer, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		return arrowc.GetArray(c, ids.ObjectID(id), out, outSchema)
	})
}

//export v6d_get_arrow_stream
func v6d_get_arrow_stream(h C.uint64_t, id C.uint64_t, out unsafe.Pointer, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		return arrowc.GetStream(c, ids.ObjectID(id), out)
	})
}

//export v6d_arrow_array_from_meta
func v6d_arrow_array_from_meta(h C.uint64_t, js *C.char, n C.size_t, out, outSchema unsafe.Pointer, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		if js == nil {
			return nullArg("json")
		}
		return arrowc.ArrayFromMeta(c, jsonArg(js, n), out, outSchema)
	})
}

//export v6d_arrow_stream_from_meta
func v6d_arrow_stream_from_meta(h C.uint64_t, js *C.char, n C.size_t, out unsafe.Pointer, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		if js == nil {
			return nullArg("json")
		}
		return arrowc.StreamFromMeta(c, jsonArg(js, n), out)
	})
}

//export v6d_is_shared_memory
func v6d_is_shared_memory(h C.uint64_t, address unsafe.Pointer, out *C.int32_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		if out == nil {
			return nullArg("out")
		}
		setBool(out, client.IsSharedMemory(uintptr(address)))
		return nil
	})
}

//export v6d_arrow_exports
func v6d_arrow_exports() C.int64_t { return C.int64_t(arrowc.LiveExports()) }
