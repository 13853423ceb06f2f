package main

/*
#include "v6d.h"
*/
import "C"

import (
	"unsafe"

	"github.com/v6d-io/v6d-go/internal/client"
	"github.com/v6d-io/v6d-go/internal/ids"
)

//export v6dgo_map_private
func v6dgo_map_private(h C.uint64_t, id C.uint64_t, data **C.uint8_t, size *C.uint64_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		if data == nil {
			return nullArg("data")
		}
		b, e := c.MapPrivate(ids.ObjectID(id))
		if e != nil {
			return e
		}
		*data = ptrOf(b)
		if size != nil {
			*size = C.uint64_t(len(b))
		}
		return nil
	})
}

//export v6dgo_unmap_private
func v6dgo_unmap_private(data *C.uint8_t, err *C.v6d_error) (st C.int32_t) {
	defer guard(err, &st)
	if st, ok := entry(err); !ok {
		return st
	}
	return result(err, client.UnmapPrivate(uintptr(unsafe.Pointer(data))))
}

//export v6dgo_pretouch
func v6dgo_pretouch(data unsafe.Pointer, size C.uint64_t, err *C.v6d_error) (st C.int32_t) {
	defer guard(err, &st)
	if st, ok := entry(err); !ok {
		return st
	}
	return result(err, client.Pretouch(uintptr(data), uint64(size)))
}

//export v6dgo_private_views
func v6dgo_private_views() C.int64_t { return C.int64_t(client.PrivateViews()) }
