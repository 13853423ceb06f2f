package server

import (
	"fmt"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/peer"
	"github.com/v6d-io/v6d-go/internal/status"
	"github.com/v6d-io/v6d-go/internal/store"
)

// The daemon's side of the peer data plane (internal/peer): a Source that
// pins blobs of its store and hands out views of its own arena mapping, and a
// Sink that allocates the copies of fetched blobs in that arena.

// storeSource is the peer.Source over the daemon's store.
type storeSource struct{ m *migrator }

// errNoStore is the answer to a fetch before the daemon's store exists.
var errNoStore = status.Errorf(status.VineyardServerNotReady, "the daemon is starting")

// Pin takes a session reference on every blob: a delete meanwhile hides the
// blob but frees its memory only when unpin closes the session.
func (src storeSource) Pin(blobs []ids.ObjectID) ([][]byte, func(), error) {
	st := src.m.store()
	if st == nil {
		return nil, nil, errNoStore
	}
	ss := st.NewSession()
	exts, err := ss.GetBuffers(blobs, false)
	if err != nil {
		ss.Close()
		if status.CodeOf(err) == status.ObjectNotExists {
			return nil, nil, fmt.Errorf("%w: %w", peer.ErrObjectNotExists, err)
		}
		return nil, nil, err
	}
	views := make([][]byte, len(blobs))
	for i, ext := range exts {
		views[i] = ss.Bytes(ext)
		if views[i] == nil {
			views[i] = []byte{}
		}
	}
	return views, ss.Close, nil
}

// storeSink is the peer.Sink over the daemon's store.
type storeSink struct{ m *migrator }

// Begin opens a transfer with a session of its own.
func (k storeSink) Begin() (peer.Transfer, error) {
	st := k.m.store()
	if st == nil {
		return nil, errNoStore
	}
	return &storeTransfer{s: st, ss: st.NewSession()}, nil
}

// storeTransfer allocates the copies of one fetch in one session, so that
// closing the session frees whatever was not sealed.
type storeTransfer struct {
	s    *store.Store
	ss   *store.Session
	srcs []ids.ObjectID
	exts []store.Extent
}

// Alloc creates an unsealed buffer of size bytes for the copy of src and
// returns its arena memory.
func (t *storeTransfer) Alloc(src ids.ObjectID, size uint64) ([]byte, error) {
	ext, err := t.ss.CreateBuffer(size)
	if err != nil {
		return nil, err
	}
	t.srcs = append(t.srcs, src)
	t.exts = append(t.exts, ext)
	if b := t.ss.Bytes(ext); b != nil {
		return b, nil
	}
	return []byte{}, nil
}

// Commit seals every copy; if one fails, the sealed ones are deleted and
// closing the session frees the rest. The sealed copies are not referenced by
// anyone: the caller links them into a tree or deletes them.
func (t *storeTransfer) Commit() ([]peer.LocalBlob, error) {
	defer t.ss.Close()
	out := make([]peer.LocalBlob, len(t.exts))
	var sealed []ids.ObjectID
	for i, ext := range t.exts {
		if ext.ID != ids.EmptyBlob {
			if err := t.ss.Seal(ext.ID); err != nil {
				t.s.Delete(sealed, store.DeleteOptions{})
				return nil, err
			}
			sealed = append(sealed, ext.ID)
		}
		out[i] = peer.LocalBlob{Source: t.srcs[i], ID: ext.ID, Size: ext.Size}
	}
	return out, nil
}

// Abort frees every buffer of the transfer (closing the session frees its
// unsealed buffers).
func (t *storeTransfer) Abort() { t.ss.Close() }
