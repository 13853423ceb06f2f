package meta

import (
	"maps"
	"sync"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// Local is the in-memory Backend of a daemon alone: nothing is shared, and
// nothing survives the process. The zero value is not usable; call NewLocal.
type Local struct {
	instance uint64
	changes  chan Change // never written; closed by Close

	mu     sync.Mutex
	trees  map[ids.ObjectID][]byte
	names  map[string]ids.ObjectID
	closed bool
}

var _ Backend = (*Local)(nil)

// NewLocal returns an empty local backend for the given instance.
func NewLocal(instance uint64) *Local {
	return &Local{
		instance: instance,
		changes:  make(chan Change),
		trees:    make(map[ids.ObjectID][]byte),
		names:    make(map[string]ids.ObjectID),
	}
}

// InstanceID returns the instance given to NewLocal.
func (l *Local) InstanceID() uint64 { return l.instance }

// Persist records copies of the trees.
func (l *Local) Persist(trees []Tree) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	for _, t := range trees {
		l.trees[t.ID] = append([]byte(nil), t.Content...)
	}
	return nil
}

// Delete forgets the trees of idl.
func (l *Local) Delete(idl []ids.ObjectID) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	for _, id := range idl {
		delete(l.trees, id)
	}
	return nil
}

// Update replaces the trees (Local never queues).
func (l *Local) Update(trees []Tree) error { return l.Persist(trees) }

// Pending returns 0: Local never queues.
func (l *Local) Pending() int { return 0 }

// Tree returns the persisted tree of id (the backend's copy: the caller
// must not change it) and whether there is one.
func (l *Local) Tree(id ids.ObjectID) ([]byte, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.trees[id]
	return t, ok
}

// Trees returns the ids of every persisted tree.
func (l *Local) Trees() []ids.ObjectID {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]ids.ObjectID, 0, len(l.trees))
	for id := range l.trees {
		out = append(out, id)
	}
	return out
}

// PutName points name at id.
func (l *Local) PutName(name string, id ids.ObjectID) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.names[name] = id
	return nil
}

// GetName resolves name.
func (l *Local) GetName(name string) (ids.ObjectID, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	id, ok := l.names[name]
	if !ok {
		return 0, ErrNameNotFound
	}
	return id, nil
}

// DropName removes name.
func (l *Local) DropName(name string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	delete(l.names, name)
	return nil
}

// DropNameOf removes name if it points at id.
func (l *Local) DropNameOf(name string, id ids.ObjectID) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if cur, ok := l.names[name]; ok && cur == id {
		delete(l.names, name)
	}
	return nil
}

// ListNames returns a copy of every name.
func (l *Local) ListNames() (map[string]ids.ObjectID, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	return maps.Clone(l.names), nil
}

// Changes returns a channel that never delivers (there is no other daemon)
// and is closed by Close.
func (l *Local) Changes() <-chan Change { return l.changes }

// Close marks the backend closed and closes Changes; it is idempotent.
func (l *Local) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.changes)
	}
	return nil
}
