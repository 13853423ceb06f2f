package protocol

import "github.com/v6d-io/v6d-go/internal/ids"

// MigrateObjectRequest asks the daemon for a local copy of an object whose
// blobs live on another instance (upstream's migrate_object_request; ours
// needs only the id: the daemon finds the owner in the metadata backend and
// fetches over the peer service). A local object is answered with its own id.
type MigrateObjectRequest struct {
	ObjectID ids.ObjectID `json:"object_id"`
}

// RequestType returns KindMigrateObject's wire type.
func (*MigrateObjectRequest) RequestType() string { return KindMigrateObject.String() }

// MigrateObjectReply answers migrate_object_request with the id of the local
// copy (or of the object itself when it was local).
type MigrateObjectReply struct {
	Header
	ObjectID ids.ObjectID `json:"object_id"`
}
