package peer

import "github.com/v6d-io/v6d-go/internal/ids"

// Source is implemented by the owning daemon. Pin pins the given sealed blobs
// so that none of their memory is freed or reused until unpin is called, and
// returns views[i] of exactly the bytes of blobs[i]. The views are read-only
// to this package. unpin is called exactly once, when the stream that pinned
// them ends (see finish in server.go for why that is safe on failure). On
// error nothing stays pinned; a blob that does not exist must give an error
// wrapping ErrObjectNotExists. The memory of the views must stay mapped
// until Server.Close returned.
type Source interface {
	Pin(blobs []ids.ObjectID) (views [][]byte, unpin func(), err error)
}

// Sink is implemented by the requesting daemon. Begin opens one Transfer for
// one Fetch call; concurrent fetches call it concurrently.
type Sink interface {
	Begin() (Transfer, error)
}

// Transfer allocates the destination blobs of one Fetch. Alloc returns a
// writable slice of exactly size bytes in the destination arena for the copy
// of blob src; it is called from one goroutine, before any byte is written.
// The streams of a split fetch write disjoint parts of one allocation from
// different goroutines; all writing has stopped before Commit or Abort is
// called. Commit is called once every byte of every allocation has arrived:
// it seals the copies and returns them in Alloc order. Abort frees everything
// allocated so far; it is called instead of Commit on any failure. Exactly
// one of Commit and Abort is called, so a Commit that fails must itself free
// what was allocated.
type Transfer interface {
	Alloc(src ids.ObjectID, size uint64) ([]byte, error)
	Commit() ([]LocalBlob, error)
	Abort()
}

// LocalBlob is one fetched blob: Source is the id on the owner, ID the id of
// the sealed copy in the destination, Size its length in bytes.
type LocalBlob struct {
	Source ids.ObjectID
	ID     ids.ObjectID
	Size   uint64
}
