// Package peerstore plugs an internal/store.Store into the peer data plane
// (internal/peer): a Source that pins blobs of the store and hands out views
// of its arena, and a Sink that allocates the copies of fetched blobs in it.
// The daemon (internal/server) and the tests of the data plane over real
// stores use these same adapters.
//
// Both take the store through a function, because the daemon starts its peer
// service before its store exists (the etcd registration publishes the bound
// address): until the function returns a store, every Pin and Begin fails
// with ErrNoStore.
package peerstore

import (
	"fmt"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/peer"
	"github.com/v6d-io/v6d-go/internal/status"
	"github.com/v6d-io/v6d-go/internal/store"
)

// ErrNoStore is returned by Pin and Begin before the store exists.
var ErrNoStore = status.Errorf(status.VineyardServerNotReady, "the daemon is starting")

// Source is the peer.Source over a store; Store returns it, or nil while
// there is none yet.
type Source struct{ Store func() *store.Store }

// Pin takes a session reference on every blob: a delete meanwhile hides the
// blob but frees its memory only when unpin closes the session. The views
// are the store's own arena mapping, valid until unpin. A missing blob gives
// an error wrapping peer.ErrObjectNotExists (and the store's
// ObjectNotExists status).
func (src Source) Pin(blobs []ids.ObjectID) ([][]byte, func(), error) {
	st := src.Store()
	if st == nil {
		return nil, nil, ErrNoStore
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

// Sink is the peer.Sink over a store; Store returns it, or nil while there
// is none yet.
type Sink struct{ Store func() *store.Store }

// Begin opens a transfer with a session of its own.
func (k Sink) Begin() (peer.Transfer, error) {
	st := k.Store()
	if st == nil {
		return nil, ErrNoStore
	}
	return &transfer{s: st, ss: st.NewSession()}, nil
}

// transfer allocates the copies of one fetch in one session, so that closing
// the session frees whatever was not sealed.
type transfer struct {
	s    *store.Store
	ss   *store.Session
	srcs []ids.ObjectID
	exts []store.Extent
}

// Alloc creates an unsealed buffer of size bytes for the copy of src and
// returns its arena memory. Its errors are the store's (NotEnoughMemory).
func (t *transfer) Alloc(src ids.ObjectID, size uint64) ([]byte, error) {
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
// closing the session frees the rest, so a failed Commit leaves nothing. The
// sealed copies are not referenced by anyone: the caller links them into a
// tree or deletes them.
func (t *transfer) Commit() ([]peer.LocalBlob, error) {
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
func (t *transfer) Abort() { t.ss.Close() }
