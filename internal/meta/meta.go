// Package meta holds the metadata backends of the store: where the trees of
// persisted objects and the names live beyond one daemon's object table.
//
// The store keeps every object it serves in memory; a Backend receives what
// must be shared or kept: the tree of each object when it is persisted, its
// deletion, and the names. Local keeps them in memory (one daemon, the
// default); an etcd backend will keep them in etcd so every daemon of a
// cluster sees them, and report what other daemons change through Changes.
//
// Locking: the store calls a Backend while holding its own lock (all but
// Persist, GetName and ListNames), so a Backend must never call back into
// the store, and should not block for long (Local never blocks; Etcd is
// bounded by its timeout and fails at once while etcd is known down). Lock
// order: store.Store.mu, then the backend's own locks.
//
// Consistency: a change the store makes locally first and cannot undo (the
// deletion of persisted objects and their names, the rewrite of a persisted
// tree) is never lost by a backend that cannot reach its storage: it is
// queued and written when the storage answers again (Pending counts what
// waits). The others (Persist, PutName, DropName) fail and the store
// changes nothing.
package meta

import (
	"errors"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// ErrNameNotFound is returned by GetName for an unknown name.
var ErrNameNotFound = errors.New("meta: name not found")

// ErrClosed is returned by every method of a closed backend.
var ErrClosed = errors.New("meta: backend is closed")

// ErrEtcd wraps every failure to reach or use etcd; the message names the
// endpoints.
var ErrEtcd = errors.New("meta: etcd")

// ErrNameTaken is returned by PutName when another instance set the name
// first (two instances racing for one name: exactly one wins).
var ErrNameTaken = errors.New("meta: name taken")

// Tree is the metadata of one persisted object: its own fields, with each
// member written as a link {"id":"o…"} (members are persisted as their own
// trees).
type Tree struct {
	ID      ids.ObjectID
	Content []byte // a JSON object; the backend keeps its own copy
}

// ChangeKind says what a Change reports.
type ChangeKind int

const (
	// Persisted reports a tree persisted (or updated) by another daemon.
	Persisted ChangeKind = iota + 1
	// Deleted reports a persisted object deleted by another daemon: one of
	// another instance, or one of this instance deleted through another.
	Deleted
	// NamePut reports a name set (or moved) by another daemon.
	NamePut
	// NameDropped reports a name dropped by another daemon.
	NameDropped
	// Progress reports that every change up to Revision has been delivered.
	Progress
)

// Change is one update made elsewhere, for the store to apply.
type Change struct {
	Kind ChangeKind
	ID   ids.ObjectID // the object (Persisted, Deleted, NamePut)
	Name string       // the name (NamePut, NameDropped)
	Tree []byte       // the tree (Persisted)
	// Revision, when not 0, is etcd's revision: every change up to it has
	// been delivered once this one is. 0 says nothing about progress.
	Revision int64
}

// Backend is where the store keeps persisted trees and names. Methods are
// safe for concurrent use. Errors other than ErrNameNotFound mean the
// backend could not do what was asked (for etcd: unreachable, conflict).
type Backend interface {
	// InstanceID returns the id of this daemon's instance, which the store
	// stamps on every object and uses for new ids.
	InstanceID() uint64
	// Persist records trees, replacing earlier versions of the same ids.
	Persist(trees []Tree) error
	// Delete forgets the persisted trees of ids; unknown ids are ignored.
	// The store deleted the objects already: a backend that cannot reach
	// its storage now queues the deletion and writes it when it can (see
	// Pending); an error means it was refused (a closed backend). An id
	// another instance made is that instance's object deleted through this
	// one (upstream's cluster-wide delete): the backend also tells the
	// owner, whose Changes report it as Deleted, so that it deletes the
	// object, members and blobs, where they live.
	Delete(idl []ids.ObjectID) error
	// Update replaces the trees of objects persisted before, after their
	// fields changed (a label, a name moved): queued like Delete. An error
	// means it was refused (a tree too large, a closed backend).
	Update(trees []Tree) error
	// PutName points name at id, moving it if it pointed elsewhere.
	PutName(name string, id ids.ObjectID) error
	// GetName resolves a name, or fails with ErrNameNotFound.
	GetName(name string) (ids.ObjectID, error)
	// DropName removes a name; an unknown name is not an error. It fails
	// (nothing changed) when the backend cannot reach its storage.
	DropName(name string) error
	// DropNameOf removes name if it still points at id (the names of a
	// deleted object): queued like Delete.
	DropNameOf(name string, id ids.ObjectID) error
	// Pending returns how many changes (Delete, Update, DropNameOf) wait
	// for the backend's storage to answer again.
	Pending() int
	// ListNames returns every name; the map is the caller's.
	ListNames() (map[string]ids.ObjectID, error)
	// Changes returns the updates other daemons make, in order. A backend
	// with no other daemons (Local) returns a channel that never delivers.
	// The channel is closed by Close.
	Changes() <-chan Change
	// Close releases the backend; it is idempotent.
	Close() error
}
