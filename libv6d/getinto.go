package main

// #include "v6d.h"
import "C"

import (
	"unsafe"

	"github.com/v6d-io/v6d-go/internal/client"
	"github.com/v6d-io/v6d-go/internal/ids"
)

//export v6dgo_get_object_into
func v6dgo_get_object_into(h C.uint64_t, id C.uint64_t, flags C.uint32_t, out *C.char, capacity C.size_t,
	outLen *C.size_t, maxBlobs C.size_t, blobIDs *C.uint64_t, datas **C.uint8_t, sizes *C.uint64_t,
	nBlobs *C.size_t, err *C.v6d_error) C.int32_t {
	return getInto("v6d_get_object_into", h, id, flags, out, capacity, outLen, maxBlobs, blobIDs, datas, sizes,
		nBlobs, nil, err)
}

//export v6dgo_get_object_shaped
func v6dgo_get_object_shaped(h C.uint64_t, id C.uint64_t, flags C.uint32_t, out *C.char, capacity C.size_t,
	outLen *C.size_t, maxBlobs C.size_t, blobIDs *C.uint64_t, datas **C.uint8_t, sizes *C.uint64_t,
	nBlobs *C.size_t, shape *C.uint64_t, err *C.v6d_error) C.int32_t {
	if shape == nil {
		return with(h, err, func(*client.Client) error { return nullArg("shape") })
	}
	return getInto("v6d_get_object_shaped", h, id, flags, out, capacity, outLen, maxBlobs, blobIDs, datas, sizes,
		nBlobs, shape, err)
}

// getInto is v6d_get_object_into, and v6d_get_object_shaped when shape is
// not nil.
func getInto(name string, h C.uint64_t, id C.uint64_t, flags C.uint32_t, out *C.char, capacity C.size_t,
	outLen *C.size_t, maxBlobs C.size_t, blobIDs *C.uint64_t, datas **C.uint8_t, sizes *C.uint64_t,
	nBlobs *C.size_t, shape *C.uint64_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		if e := checkFlags(name, flags, getObjectFlags); e != nil {
			return e
		}
		switch {
		case outLen == nil:
			return nullArg("len")
		case nBlobs == nil:
			return nullArg("n_blobs")
		case out == nil && capacity > 0:
			return nullArg("json")
		case maxBlobs > 0 && (blobIDs == nil || datas == nil || sizes == nil):
			return nullArg("blob_ids, datas and sizes")
		}
		// The tree goes straight into the caller's room (a directory's is
		// never copied in Go), while the get holds it.
		var treeLen int
		var treeShape uint64
		into := func(tree []byte, daemonShape uint64) {
			treeLen = len(tree)
			if shape != nil {
				treeShape = c.TreeShapeOf(daemonShape, tree)
			}
			if len(tree) > 0 && uint64(len(tree)) <= uint64(capacity) {
				copy(unsafe.Slice((*byte)(unsafe.Pointer(out)), len(tree)), tree)
			}
		}
		var room [8]client.BlobView
		_, views, e := c.GetObjectViews(ids.ObjectID(id), room[:0], into)
		if e != nil {
			return e
		}
		*outLen = C.size_t(treeLen)
		*nBlobs = C.size_t(len(views))
		if shape != nil {
			*shape = C.uint64_t(treeShape)
		}
		if uint64(treeLen) > uint64(capacity) || uint64(len(views)) > uint64(maxBlobs) {
			return nil // the caller compares and asks again with more room
		}
		if len(views) > 0 {
			n := len(views)
			idOut, dataOut, sizeOut := unsafe.Slice(blobIDs, n), unsafe.Slice(datas, n), unsafe.Slice(sizes, n)
			for i, v := range views {
				idOut[i] = C.uint64_t(v.ID)
				dataOut[i] = ptrOf(v.Data)
				sizeOut[i] = C.uint64_t(len(v.Data))
			}
		}
		return nil
	})
}
