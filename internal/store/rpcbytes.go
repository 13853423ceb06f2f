package store

import "github.com/v6d-io/v6d-go/internal/ids"

// Access to blob bytes for the daemon's TCP listener, which moves them over
// the connection instead of handing out the arena (docs/cluster-rpc.md).

// Bytes returns the arena memory of an extent this session holds (from
// GetBuffers or CreateBuffers): valid while the session holds the blob's
// reference, or while the blob is its own and unsealed. The empty blob has
// none.
func (ss *Session) Bytes(e Extent) []byte {
	if e.ID == ids.EmptyBlob || e.Size == 0 {
		return nil
	}
	return ss.s.arena.Bytes()[e.Offset : e.Offset+e.Size : e.Offset+e.Size]
}

// OwnedBytes returns the arena memory of an unsealed blob this session
// created, for the session to fill; the errors are Seal's.
func (ss *Session) OwnedBytes(id ids.ObjectID) ([]byte, error) {
	if id == ids.EmptyBlob {
		return nil, nil
	}
	ss.s.mu.Lock()
	defer ss.s.mu.Unlock()
	b, err := ss.ownedLocked(id)
	if err != nil {
		return nil, err
	}
	return ss.Bytes(ss.s.extent(b)), nil
}
