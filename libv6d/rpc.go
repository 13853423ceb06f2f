package main

/*
#include <stdint.h>
#include "v6d.h"
*/
import "C"

import (
	"github.com/v6d-io/v6d-go/internal/client"
)

//export v6dgo_connect_rpc
func v6dgo_connect_rpc(endpoint, secret *C.char, out *C.uint64_t, err *C.v6d_error) (st C.int32_t) {
	defer guard(err, &st)
	if st, ok := entry(err); !ok {
		return st
	}
	if out == nil {
		return fail(err, nullArg("out"))
	}
	var opts []client.Option
	if secret != nil {
		opts = append(opts, client.WithSecret(gostr(secret)))
	}
	c, e := client.ConnectRPC(gostr(endpoint), opts...)
	if e != nil {
		return fail(err, e)
	}
	*out = C.uint64_t(addHandle(c))
	return 0
}

//export v6dgo_is_rpc
func v6dgo_is_rpc(h C.uint64_t) (ok C.int32_t) {
	var st C.int32_t
	defer guard(nil, &st) // a fault poisons the library; the answer stays 0
	if poisoned.Load() {
		return 0
	}
	c, e := lookup(h)
	if e != nil || !c.IsRPC() {
		return 0
	}
	return 1
}
