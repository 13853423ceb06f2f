package arrowc

import (
	"fmt"

	"github.com/v6d-io/v6d-go/internal/status"
)

// Errors of the package. Each carries the Vineyard status code a C or Python
// caller sees; test for them with errors.Is.
var (
	// ErrNotImplemented is returned for an Arrow type the stored layout does
	// not support.
	ErrNotImplemented = &status.Error{Code: status.NotImplemented}
	// ErrInvalidLayout is returned for a metadata tree that does not describe
	// a valid Arrow object (wrong fields, buffers too short, bad formats).
	ErrInvalidLayout = &status.Error{Code: status.MetaTreeInvalid}
	// ErrInvalidArgument is returned for a NULL or released C struct, or flags
	// that do not fit the data.
	ErrInvalidArgument = &status.Error{Code: status.Invalid}
	// ErrArrow is returned when Arrow data given to a put is malformed, or a
	// stream's callback fails.
	ErrArrow = &status.Error{Code: status.ArrowError}
	// ErrNotArrow is returned when the object got is not an Arrow object, or
	// not one that fits the call (several chunks asked as one array).
	ErrNotArrow = &status.Error{Code: status.ObjectTypeError}
)

// errorf returns an error with the code of sentinel and a message.
func errorf(sentinel *status.Error, format string, args ...any) error {
	return &status.Error{Code: sentinel.Code, Message: fmt.Sprintf(format, args...)}
}
