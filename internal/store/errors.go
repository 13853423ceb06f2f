package store

import "github.com/v6d-io/v6d-go/internal/protocol"

// Errors of the store. Each carries the Vineyard status code a client sees;
// test for them with errors.Is.
var (
	// ErrObjectNotExists is returned when an id or name is unknown.
	ErrObjectNotExists = &protocol.Error{Code: protocol.ObjectNotExists}
	// ErrObjectSealed is returned when an operation needs an unsealed blob.
	ErrObjectSealed = &protocol.Error{Code: protocol.ObjectSealed}
	// ErrObjectNotSealed is returned when a blob must be sealed first.
	ErrObjectNotSealed = &protocol.Error{Code: protocol.ObjectNotSealed}
	// ErrObjectIsBlob is returned when an operation does not apply to blobs.
	ErrObjectIsBlob = &protocol.Error{Code: protocol.ObjectIsBlob}
	// ErrMetaTreeInvalid is returned for a malformed metadata tree.
	ErrMetaTreeInvalid = &protocol.Error{Code: protocol.MetaTreeInvalid}
	// ErrNotEnoughMemory is returned when the arena cannot hold an allocation.
	ErrNotEnoughMemory = &protocol.Error{Code: protocol.NotEnoughMemory}
	// ErrInvalid is returned for a request that is not allowed.
	ErrInvalid = &protocol.Error{Code: protocol.Invalid}
)
