package store

import (
	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/status"
)

// CheckChunk reports whether id can be a chunk of a stream
// (internal/streams): an object this instance holds, or a sealed blob.
// It fails with ObjectNotExists or ObjectNotSealed, naming the id.
func (s *Store) CheckChunk(id ids.ObjectID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.existsLocked(id) {
		return status.Errorf(status.ObjectNotExists, "stream chunk %v does not exist", id)
	}
	if id.IsBlob() {
		if b, _ := s.lookupBlobLocked(id); b.state == stateUnsealed {
			return status.Errorf(status.ObjectNotSealed, "stream chunk %v is not sealed", id)
		}
	}
	return nil
}

// IsObject reports whether id is an object (not a blob) this instance holds
// or knows from another instance: what a stream's id must be.
func (s *Store) IsObject(id ids.ObjectID) bool {
	if id.IsBlob() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rtext.knownLocked(id)
}
