package main

// #include "v6d.h"
import "C"

import (
	"time"

	"github.com/v6d-io/v6d-go/internal/client"
	"github.com/v6d-io/v6d-go/internal/ids"
)

// The stream functions of v6d.h (ABI 8): thin shims over internal/client.

//export v6dgo_create_stream
func v6dgo_create_stream(h C.uint64_t, id C.uint64_t, readers C.int32_t, capacity C.int32_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		return c.CreateStream(ids.ObjectID(id), client.StreamOptions{Readers: int(readers), Capacity: int(capacity)})
	})
}

//export v6dgo_open_stream
func v6dgo_open_stream(h C.uint64_t, id C.uint64_t, mode C.int32_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error { return c.OpenStream(ids.ObjectID(id), int(mode)) })
}

//export v6dgo_push_chunk
func v6dgo_push_chunk(h C.uint64_t, stream C.uint64_t, chunk C.uint64_t, timeoutMs C.int64_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		timeout := time.Duration(-1)
		if timeoutMs >= 0 {
			timeout = time.Duration(timeoutMs) * time.Millisecond
		}
		return c.PushChunk(ids.ObjectID(stream), ids.ObjectID(chunk), timeout)
	})
}

//export v6dgo_pull_chunk
func v6dgo_pull_chunk(h C.uint64_t, stream C.uint64_t, chunk *C.uint64_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		if chunk == nil {
			return nullArg("chunk")
		}
		id, e := c.PullChunk(ids.ObjectID(stream))
		if e != nil {
			return e
		}
		*chunk = C.uint64_t(id)
		return nil
	})
}

//export v6dgo_new_buffer_chunk
func v6dgo_new_buffer_chunk(h C.uint64_t, stream C.uint64_t, size C.uint64_t, id *C.uint64_t, data **C.uint8_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		if id == nil || data == nil {
			return nullArg("id and data")
		}
		bid, buf, e := c.NewBufferChunk(ids.ObjectID(stream), uint64(size))
		if e != nil {
			return e
		}
		*id = C.uint64_t(bid)
		*data = ptrOf(buf)
		return nil
	})
}

//export v6dgo_stop_stream
func v6dgo_stop_stream(h C.uint64_t, stream C.uint64_t, failed C.int32_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error { return c.StopStream(ids.ObjectID(stream), failed != 0) })
}

//export v6dgo_drop_stream
func v6dgo_drop_stream(h C.uint64_t, stream C.uint64_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error { return c.DropStream(ids.ObjectID(stream)) })
}
