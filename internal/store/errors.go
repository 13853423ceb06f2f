package store

import "github.com/v6d-io/v6d-go/internal/status"

// Errors of the store. Each carries the Vineyard status code a client sees;
// test for them with errors.Is.
var (
	// errNoDirectory is returned by AttachPins when the store publishes no
	// directory (Config.NoDirectory) or the session has pins already.
	errNoDirectory = &status.Error{Code: status.Invalid, Message: "the daemon publishes no directory"}
	// ErrPinPagesFull is returned by AttachPins when Config.MaxPinPages
	// sessions have a pin page already.
	ErrPinPagesFull = &status.Error{Code: status.Invalid, Message: "the daemon maps as many pin pages as it may"}
	// ErrObjectNotExists is returned when an id or name is unknown.
	ErrObjectNotExists = &status.Error{Code: status.ObjectNotExists}
	// ErrObjectSealed is returned when an operation needs an unsealed blob.
	ErrObjectSealed = &status.Error{Code: status.ObjectSealed}
	// ErrObjectNotSealed is returned when a blob must be sealed first.
	ErrObjectNotSealed = &status.Error{Code: status.ObjectNotSealed}
	// ErrObjectIsBlob is returned when an operation does not apply to blobs.
	ErrObjectIsBlob = &status.Error{Code: status.ObjectIsBlob}
	// ErrMetaTreeInvalid is returned for a malformed metadata tree.
	ErrMetaTreeInvalid = &status.Error{Code: status.MetaTreeInvalid}
	// ErrNotEnoughMemory is returned when the arena cannot hold an allocation.
	ErrNotEnoughMemory = &status.Error{Code: status.NotEnoughMemory}
	// ErrInvalid is returned for a request that is not allowed.
	ErrInvalid = &status.Error{Code: status.Invalid}
)
