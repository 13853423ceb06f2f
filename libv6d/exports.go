// Package main is libv6d.so: //export shims for include/v6d.h over
// internal/client. It holds no logic of its own.
//
// The Go exports are named v6dgo_*; v6d.c defines the public v6d_* functions
// against include/v6d.h and forwards to them, so the compiler checks every
// export against the header (the package's CFLAGS make a mismatch an error).
// Only v6d_* leaves the library (v6d.map). Every cgo preamble includes v6d.h
// rather than copying its types. libv6d/v6d.h is a symlink to include/v6d.h:
// Go's build cache hashes the headers of the package directory only, so a
// changed header would otherwise not rebuild (and recheck) the library.
package main

/*
#cgo CFLAGS: -Wall -Wextra -Werror -Wconversion
#include <stdlib.h>
#include "v6d.h"
*/
import "C"

import (
	"encoding/json"
	"sync"
	"unsafe"

	"github.com/v6d-io/v6d-go/internal/client"
	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
)

// with runs fn on the client of handle h, with panic and poison guards.
func with(h C.uint64_t, err *C.v6d_error, fn func(c *client.Client) error) (st C.int32_t) {
	defer guard(err, &st)
	if st, ok := entry(err); !ok {
		return st
	}
	c, e := lookup(h)
	if e != nil {
		return fail(err, e)
	}
	c.TakeQueuedReleases() // releases written since the last call come first
	return result(err, fn(c))
}

func ptrOf(b []byte) *C.uint8_t {
	if len(b) == 0 {
		return nil
	}
	return (*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(b)))
}

func idsOf(p *C.uint64_t, n C.size_t) []ids.ObjectID {
	if n == 0 || p == nil {
		return nil
	}
	src := unsafe.Slice((*uint64)(unsafe.Pointer(p)), int(n))
	out := make([]ids.ObjectID, len(src))
	for i, v := range src {
		out[i] = ids.ObjectID(v)
	}
	return out
}

func nullArg(name string) error {
	return status.Errorf(status.Invalid, "%s must not be NULL", name)
}

// version is set at build time from the VERSION file (-X main.version=...).
var version = "dev"

var versionC = sync.OnceValue(func() *C.char { return C.CString(version) })

//export v6dgo_version
func v6dgo_version() *C.char { return versionC() }

var (
	namesMu sync.Mutex
	names   = map[int32]*C.char{}
)

//export v6dgo_status_name
func v6dgo_status_name(code C.int32_t) *C.char {
	namesMu.Lock()
	defer namesMu.Unlock()
	if p, ok := names[int32(code)]; ok {
		return p
	}
	p := C.CString(status.Code(code).String()) // kept for the life of the process
	names[int32(code)] = p
	return p
}

//export v6dgo_open_handles
func v6dgo_open_handles() C.int64_t {
	handlesMu.Lock()
	defer handlesMu.Unlock()
	return C.int64_t(len(handles))
}

//export v6dgo_connect
func v6dgo_connect(socket *C.char, out *C.uint64_t, err *C.v6d_error) (st C.int32_t) {
	defer guard(err, &st)
	if st, ok := entry(err); !ok {
		return st
	}
	if out == nil {
		return fail(err, nullArg("out"))
	}
	c, e := client.Connect(gostr(socket))
	if e != nil {
		return fail(err, e)
	}
	*out = C.uint64_t(addHandle(c))
	return 0
}

//export v6dgo_disconnect
func v6dgo_disconnect(h C.uint64_t, err *C.v6d_error) (st C.int32_t) {
	defer guard(err, &st)
	c, e := removeHandle(h)
	if e != nil {
		return fail(err, e)
	}
	return result(err, c.Close())
}

//export v6dgo_connected
func v6dgo_connected(h C.uint64_t) (ok C.int32_t) {
	var st C.int32_t
	defer guard(nil, &st) // a fault poisons the library; the answer stays 0
	if poisoned.Load() {
		return 0
	}
	c, e := lookup(h)
	if e != nil || !c.Connected() {
		return 0
	}
	return 1
}

//export v6dgo_instance_id
func v6dgo_instance_id(h C.uint64_t, out *C.uint64_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		if out == nil {
			return nullArg("instance_id")
		}
		*out = C.uint64_t(c.InstanceID())
		return nil
	})
}

//export v6dgo_instance_status
func v6dgo_instance_status(h C.uint64_t, out **C.char, outLen *C.size_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		st, e := c.InstanceStatus()
		if e != nil {
			return e
		}
		b, e := json.Marshal(struct {
			protocol.InstanceStatus
			Version string `json:"version"` // from register_reply, no round trip
		}{st, c.DaemonVersion()})
		if e != nil {
			return e
		}
		cbytes(b, out, outLen)
		return nil
	})
}

//export v6dgo_cluster_meta
func v6dgo_cluster_meta(h C.uint64_t, out **C.char, outLen *C.size_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		b, e := c.ClusterMeta()
		if e == nil {
			cbytes(b, out, outLen)
		}
		return e
	})
}

//export v6dgo_create_buffer
func v6dgo_create_buffer(h C.uint64_t, size C.uint64_t, id *C.uint64_t, data **C.uint8_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		if id == nil {
			return nullArg("id")
		}
		bid, buf, e := c.CreateBuffer(uint64(size))
		if e != nil {
			return e
		}
		*id = C.uint64_t(bid)
		if data != nil {
			*data = ptrOf(buf)
		}
		return nil
	})
}

//export v6dgo_create_buffers
func v6dgo_create_buffers(h C.uint64_t, n C.size_t, sizes *C.uint64_t, outIDs *C.uint64_t, datas **C.uint8_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		if n == 0 {
			return nil
		}
		if sizes == nil || outIDs == nil {
			return nullArg("sizes and ids")
		}
		sz := unsafe.Slice((*uint64)(unsafe.Pointer(sizes)), int(n))
		bufs, e := c.CreateBuffers(append([]uint64(nil), sz...))
		if e != nil {
			return e
		}
		idOut := unsafe.Slice(outIDs, int(n))
		var dataOut []*C.uint8_t
		if datas != nil {
			dataOut = unsafe.Slice(datas, int(n))
		}
		for i, b := range bufs {
			idOut[i] = C.uint64_t(b.ID)
			if dataOut != nil {
				dataOut[i] = ptrOf(b.Data)
			}
		}
		return nil
	})
}

//export v6dgo_seal
func v6dgo_seal(h C.uint64_t, id C.uint64_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error { return c.Seal(ids.ObjectID(id)) })
}

//export v6dgo_abort
func v6dgo_abort(h C.uint64_t, id C.uint64_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error { return c.Abort(ids.ObjectID(id)) })
}

//export v6dgo_shrink
func v6dgo_shrink(h C.uint64_t, id C.uint64_t, size C.uint64_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error { return c.Shrink(ids.ObjectID(id), uint64(size)) })
}

//export v6dgo_get
func v6dgo_get(h C.uint64_t, id C.uint64_t, data **C.uint8_t, size *C.uint64_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		b, e := c.Get(ids.ObjectID(id))
		if e != nil {
			return e
		}
		if data != nil {
			*data = ptrOf(b)
		}
		if size != nil {
			*size = C.uint64_t(len(b))
		}
		return nil
	})
}

//export v6dgo_get_buffers
func v6dgo_get_buffers(h C.uint64_t, n C.size_t, idp *C.uint64_t, flags C.uint32_t, datas **C.uint8_t, sizes *C.uint64_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		if e := checkFlags("v6d_get_buffers", flags, getBuffersFlags); e != nil {
			return e
		}
		if n == 0 {
			return nil
		}
		if idp == nil {
			return nullArg("ids")
		}
		bufs, e := c.GetBuffers(idsOf(idp, n), uint32(flags)&getUnsafe != 0)
		if e != nil {
			return e
		}
		for i, b := range bufs {
			if datas != nil {
				unsafe.Slice(datas, int(n))[i] = ptrOf(b)
			}
			if sizes != nil {
				unsafe.Slice(sizes, int(n))[i] = C.uint64_t(len(b))
			}
		}
		return nil
	})
}

//export v6dgo_release
func v6dgo_release(h C.uint64_t, id C.uint64_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error { return c.Release(ids.ObjectID(id)) })
}

//export v6dgo_release_queue
func v6dgo_release_queue(h C.uint64_t, words *C.uint64_t, n C.size_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		if words == nil {
			return nullArg("words")
		}
		if n > client.MaxReleaseQueueWords {
			return status.Errorf(status.Invalid, "a release queue has at most %d words, not %d", client.MaxReleaseQueueWords, uint64(n))
		}
		return c.SetReleaseQueue(unsafe.Slice((*uint64)(unsafe.Pointer(words)), int(n)))
	})
}

//export v6dgo_release_queue_flush
func v6dgo_release_queue_flush(h C.uint64_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error { return c.FlushReleaseQueue() })
}

func jsonArg(p *C.char, n C.size_t) []byte {
	if p == nil {
		return nil
	}
	if n == 0 {
		return []byte(C.GoString(p))
	}
	return C.GoBytes(unsafe.Pointer(p), C.int(n))
}

//export v6dgo_create_metadata
func v6dgo_create_metadata(h C.uint64_t, js *C.char, n C.size_t, seal *C.uint64_t, nSeal C.size_t, id *C.uint64_t, metaOut **C.char, metaLen *C.size_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		if js == nil || id == nil {
			return nullArg("json and id")
		}
		if metaOut == nil { // the stored tree is not wanted: it need not cross the socket
			oid, e := c.Create(jsonArg(js, n), idsOf(seal, nSeal))
			if e == nil {
				*id = C.uint64_t(oid)
			}
			return e
		}
		oid, tree, e := c.CreateMetadata(jsonArg(js, n), idsOf(seal, nSeal))
		if e != nil {
			return e
		}
		*id = C.uint64_t(oid)
		cbytes(tree, metaOut, metaLen)
		return nil
	})
}

//export v6dgo_put_inline
func v6dgo_put_inline(h C.uint64_t, js *C.char, n C.size_t, count C.size_t, datas *unsafe.Pointer, sizes *C.uint64_t, blobIDs *C.uint64_t, id *C.uint64_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		if count == 0 || datas == nil || sizes == nil {
			return nullArg("datas and sizes")
		}
		ptrs := unsafe.Slice(datas, int(count))
		lens := unsafe.Slice((*uint64)(unsafe.Pointer(sizes)), int(count))
		bufs := make([][]byte, count)
		var total uint64
		for i, p := range ptrs {
			if total += lens[i]; total > client.MaxInline {
				return status.Errorf(status.Invalid, "more than %d bytes to put inline", client.MaxInline)
			}
			if lens[i] > 0 {
				if p == nil {
					return nullArg("datas[i] of a non-empty buffer")
				}
				bufs[i] = unsafe.Slice((*byte)(p), int(lens[i])) // C memory, read during the call only
			}
		}
		oid, bids, e := c.CreateInline(jsonArg(js, n), bufs)
		if e != nil {
			return e
		}
		if blobIDs != nil {
			out := unsafe.Slice(blobIDs, int(count))
			for i, b := range bids {
				out[i] = C.uint64_t(b)
			}
		}
		if id != nil {
			*id = C.uint64_t(oid)
		}
		return nil
	})
}

//export v6dgo_get_metadata
func v6dgo_get_metadata(h C.uint64_t, id C.uint64_t, out **C.char, outLen *C.size_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		tree, e := c.GetMetadata(ids.ObjectID(id))
		if e == nil {
			cbytes(tree, out, outLen)
		}
		return e
	})
}

//export v6dgo_get_object
func v6dgo_get_object(h C.uint64_t, id C.uint64_t, flags C.uint32_t, out **C.char, outLen *C.size_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		if e := checkFlags("v6d_get_object", flags, getObjectFlags); e != nil {
			return e
		}
		tree, e := c.GetObject(ids.ObjectID(id))
		if e == nil {
			cbytes(tree, out, outLen)
		}
		return e
	})
}

//export v6dgo_blob_pointer
func v6dgo_blob_pointer(h C.uint64_t, id C.uint64_t, data **C.uint8_t, size *C.uint64_t, writable *C.int32_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		b, w, e := c.BlobPointer(ids.ObjectID(id))
		if e != nil {
			return e
		}
		if data != nil {
			*data = ptrOf(b)
		}
		if size != nil {
			*size = C.uint64_t(len(b))
		}
		if writable != nil {
			*writable = 0
			if w {
				*writable = 1
			}
		}
		return nil
	})
}

//export v6dgo_list
func v6dgo_list(h C.uint64_t, pattern *C.char, regex C.int32_t, limit C.uint64_t, out **C.char, outLen *C.size_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		b, e := c.List(gostr(pattern), regex != 0, uint64(limit))
		if e == nil {
			cbytes(b, out, outLen)
		}
		return e
	})
}

//export v6dgo_delete
func v6dgo_delete(h C.uint64_t, n C.size_t, idp *C.uint64_t, flags C.uint32_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		if e := checkFlags("v6d_delete", flags, deleteFlags); e != nil {
			return e
		}
		if n == 0 {
			return nil
		}
		if idp == nil {
			return nullArg("ids")
		}
		f := uint32(flags)
		_, e := c.Delete(idsOf(idp, n), f&deleteForce != 0, f&deleteShallow == 0, f&deleteMemoryTrim != 0)
		return e
	})
}

// spillIDs checks the ids of v6d_evict, v6d_load and v6d_unpin.
func spillIDs(n C.size_t, idp *C.uint64_t) ([]ids.ObjectID, error) {
	if n == 0 {
		return nil, nil
	}
	if idp == nil {
		return nil, nullArg("ids")
	}
	if n > protocol.MaxItems {
		return nil, status.Errorf(status.Invalid, "%d ids, at most %d", n, protocol.MaxItems)
	}
	return idsOf(idp, n), nil
}

//export v6dgo_evict
func v6dgo_evict(h C.uint64_t, n C.size_t, idp *C.uint64_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		idl, e := spillIDs(n, idp)
		if e != nil {
			return e
		}
		return c.Evict(idl)
	})
}

//export v6dgo_load
func v6dgo_load(h C.uint64_t, n C.size_t, idp *C.uint64_t, pin C.int32_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		idl, e := spillIDs(n, idp)
		if e != nil {
			return e
		}
		return c.Load(idl, pin != 0)
	})
}

//export v6dgo_unpin
func v6dgo_unpin(h C.uint64_t, n C.size_t, idp *C.uint64_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		idl, e := spillIDs(n, idp)
		if e != nil {
			return e
		}
		return c.Unpin(idl)
	})
}

func setBool(p *C.int32_t, v bool) {
	if p == nil {
		return
	}
	*p = 0
	if v {
		*p = 1
	}
}

//export v6dgo_exists
func v6dgo_exists(h C.uint64_t, id C.uint64_t, out *C.int32_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		ok, e := c.Exists(ids.ObjectID(id))
		setBool(out, ok)
		return e
	})
}

//export v6dgo_persist
func v6dgo_persist(h C.uint64_t, id C.uint64_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error { return c.Persist(ids.ObjectID(id)) })
}

//export v6dgo_if_persist
func v6dgo_if_persist(h C.uint64_t, id C.uint64_t, out *C.int32_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		ok, e := c.IfPersist(ids.ObjectID(id))
		setBool(out, ok)
		return e
	})
}

//export v6dgo_shallow_copy
func v6dgo_shallow_copy(h C.uint64_t, id C.uint64_t, extra *C.char, target *C.uint64_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		var raw json.RawMessage
		if extra != nil {
			raw = json.RawMessage(C.GoString(extra))
		}
		t, e := c.ShallowCopy(ids.ObjectID(id), raw)
		if e == nil && target != nil {
			*target = C.uint64_t(t)
		}
		return e
	})
}

//export v6dgo_label
func v6dgo_label(h C.uint64_t, id C.uint64_t, key, value *C.char, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		if key == nil || value == nil {
			return nullArg("key and value")
		}
		return c.Label(ids.ObjectID(id), []string{C.GoString(key)}, []string{C.GoString(value)})
	})
}

//export v6dgo_put_name
func v6dgo_put_name(h C.uint64_t, id C.uint64_t, name *C.char, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		if name == nil {
			return nullArg("name")
		}
		return c.PutName(ids.ObjectID(id), C.GoString(name))
	})
}

//export v6dgo_get_name
func v6dgo_get_name(h C.uint64_t, name *C.char, wait C.int32_t, timeoutMs C.int64_t, id *C.uint64_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		if name == nil || id == nil {
			return nullArg("name and id")
		}
		timeout, e := client.WaitMillis(int64(timeoutMs))
		if e != nil && wait != 0 {
			return e
		}
		oid, e := c.GetName(C.GoString(name), wait != 0, timeout)
		if e == nil {
			*id = C.uint64_t(oid)
		}
		return e
	})
}

//export v6dgo_drop_name
func v6dgo_drop_name(h C.uint64_t, name *C.char, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		if name == nil {
			return nullArg("name")
		}
		return c.DropName(C.GoString(name))
	})
}

//export v6dgo_list_names
func v6dgo_list_names(h C.uint64_t, pattern *C.char, regex C.int32_t, limit C.uint64_t, out **C.char, outLen *C.size_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		m, e := c.ListNames(gostr(pattern), regex != 0, uint64(limit))
		if e != nil {
			return e
		}
		b, e := json.Marshal(m)
		if e == nil {
			cbytes(b, out, outLen)
		}
		return e
	})
}

//export v6dgo_clear
func v6dgo_clear(h C.uint64_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error { return c.Clear() })
}

//export v6dgo_memory_trim
func v6dgo_memory_trim(h C.uint64_t, trimmed *C.int32_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		ok, e := c.MemoryTrim()
		setBool(trimmed, ok)
		return e
	})
}
