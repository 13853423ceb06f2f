package server

import (
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/store"
)

// payloadOf turns a store extent into the wire's payload.
func payloadOf(e store.Extent) protocol.Payload {
	return protocol.Payload{
		ObjectID:   e.ID,
		StoreFd:    e.Fd,
		DataOffset: e.Offset,
		DataSize:   e.Size,
		MapSize:    e.MapSize,
		Pointer:    e.Pointer,
		IsSealed:   e.Sealed,
		IsOwner:    e.Owner,
	}
}

// payloadsOf turns store extents into the wire's payloads.
func payloadsOf(es []store.Extent) []protocol.Payload {
	out := make([]protocol.Payload, len(es))
	for i, e := range es {
		out[i] = payloadOf(e)
	}
	return out
}
