package client

import (
	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
)

// Migrate returns the id of a local copy of id: id itself when the object is
// local; otherwise the daemon fetches the blobs of the remote persisted
// object from their owners over the peer service and stores a copy of its
// tree (new ids, same signature), or returns the copy it made earlier. On
// failure the error carries the status code (ConnectionError when the owner
// is unreachable, ObjectNotExists when the object or a blob is gone,
// NotEnoughMemory when the copy does not fit) and nothing of the copy stays.
func (c *Client) Migrate(id ids.ObjectID) (ids.ObjectID, error) {
	var reply protocol.MigrateObjectReply
	if err := c.call(&protocol.MigrateObjectRequest{ObjectID: id}, &reply); err != nil {
		return 0, err
	}
	return reply.ObjectID, nil
}
