package main

// #include "v6d.h"
import "C"

import (
	"github.com/v6d-io/v6d-go/internal/client"
	"github.com/v6d-io/v6d-go/internal/ids"
)

//export v6dgo_migrate
func v6dgo_migrate(h C.uint64_t, id C.uint64_t, copyID *C.uint64_t, err *C.v6d_error) C.int32_t {
	return with(h, err, func(c *client.Client) error {
		t, e := c.Migrate(ids.ObjectID(id))
		if e == nil && copyID != nil {
			*copyID = C.uint64_t(t)
		}
		return e
	})
}
