package main

/*
#include "v6d.h"
*/
import "C"

import (
	"github.com/v6d-io/v6d-go/internal/client"
)

//export v6dgo_set_timeout
func v6dgo_set_timeout(h C.uint64_t, timeoutMs C.int64_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		d, e := client.MillisTimeout(int64(timeoutMs))
		if e != nil {
			return e
		}
		return c.SetTimeout(d)
	})
}

//export v6dgo_get_timeout
func v6dgo_get_timeout(h C.uint64_t, timeoutMs *C.int64_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		if timeoutMs == nil {
			return nullArg("timeout_ms")
		}
		*timeoutMs = C.int64_t(c.Timeout().Milliseconds())
		return nil
	})
}
