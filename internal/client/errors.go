package client

import (
	"fmt"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/status"
)

// Every error a Client returns is a *status.Error (so it carries a status
// code for the C ABI), possibly wrapping a cause. The ones the client makes
// itself, rather than relaying from the daemon, are these.

// ErrClosed is returned by every method of a Client after Close.
var ErrClosed = &status.Error{Code: status.ConnectionError, Message: "client is closed"}

// ErrForked is returned by every method of a Client used in a process other
// than the one that connected it: the connection belongs to the parent.
var ErrForked = &status.Error{
	Code: status.Forked,
	Message: "client used after fork(); use the spawn or forkserver start method, " +
		"or connect in the child",
}

// errNotHeld is returned by Release and BlobPointer for an id this client
// holds no reference to.
func errNotHeld(id ids.ObjectID) error {
	return status.Errorf(status.ObjectNotExists, "%v is not held by this client", id)
}

// errLost is returned once the connection to the daemon broke (the daemon
// died, or sent something the client cannot follow); the client stays unusable
// except for Close.
func errLost(cause error) error {
	return status.Errorf(status.ConnectionError, "connection to vineyardd lost: %v", cause)
}

// errBadReply reports a reply the client cannot make sense of.
func errBadReply(format string, args ...any) error {
	return &status.Error{Code: status.Invalid, Message: "malformed reply: " + fmt.Sprintf(format, args...)}
}
