package store

import (
	"sync/atomic"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// The apply path. Every change of what the store holds (a blob allocated,
// sealed, deleted or freed; an object created or deleted; a tree changed; a
// name set or dropped) is made by a mutator and then announced by one call,
// emitLocked, with a typed Event. The views derived from the store's state
// follow the events and nothing else: the directory publishes and retires
// entries (directory.go), the meta epoch in the arena header moves
// (header.go), waiters wake (waiters.go) and Config.Observer counts. No
// mutator calls any of them by hand.
//
// The contract of an event:
//   - it is delivered under Store.mu, synchronously, in the order the
//     changes were made, to every subscriber before emitLocked returns, so a
//     reply sent after the mutator returned reflects it;
//   - it is emitted after the change it reports, with two exceptions:
//     EventDeleted is emitted when a delete is decided, before the id's tree
//     and blobs are taken apart in the same hold of the lock (the directory
//     must retire the entry before the delete reads the pin pages, and the
//     pin scan needs the tree to find the blobs a pin holds); EventSpilled
//     likewise comes before the pin pages are read and the blob's memory
//     freed (spill.go);
//   - a subscriber must not call the store, block, or keep the Event past
//     the call; it may read the store's state under the lock it already
//     holds. Delivering one costs a switch and no allocation.
//
// The metadata backend is not a subscriber: its calls stay in the mutators,
// whose replies carry its errors.

// EventKind is the kind of an Event.
type EventKind uint8

// The event kinds.
const (
	// EventCreated: a blob was allocated (unsealed) or adopted from a
	// lease, or an object was inserted.
	EventCreated EventKind = iota + 1
	// EventSealed: a blob became immutable.
	EventSealed
	// EventTreeChanged: the tree of an existing object changed (a label, a
	// name, persisted), or the persisted tree of another instance's object
	// appeared or changed (FlagRemote).
	EventTreeChanged
	// EventNamed: Name now points at ID (0: at another instance's object,
	// or a name reported by the cluster).
	EventNamed
	// EventUnnamed: Name no longer points at ID.
	EventUnnamed
	// EventDeleted: ID leaves view (see the contract above for when).
	EventDeleted
	// EventFreed: the memory of blob ID went back to the allocator.
	EventFreed
	// EventSpilled: a blob's spill was decided (spill.go): its bytes are
	// in its file and its memory goes unless a pin is found, which a
	// following EventLoaded reports. Emitted, like EventDeleted, before
	// the pin pages are read, so the directory retires the entries first.
	// EventLoaded: a spilled blob is back in the arena.
	EventSpilled
	EventLoaded

	numEventKinds
)

var eventNames = [numEventKinds]string{
	EventCreated: "created", EventSealed: "sealed", EventTreeChanged: "tree_changed",
	EventNamed: "named", EventUnnamed: "unnamed", EventDeleted: "deleted", EventFreed: "freed",
	EventSpilled: "spilled", EventLoaded: "loaded",
}

// String returns the kind's name, as metrics label it.
func (k EventKind) String() string {
	if k < numEventKinds && eventNames[k] != "" {
		return eventNames[k]
	}
	return "unknown"
}

// EventFlags qualify an Event.
type EventFlags uint8

const (
	// FlagInTree marks a blob sealed or an object inserted as a part of a tree
	// created by the same call, whose root's directory record lists it;
	// it is not published on its own (a get of it takes the round trip).
	FlagInTree EventFlags = 1 << iota
	// FlagRemote marks the persisted object of another instance.
	FlagRemote
	// FlagUnsealed marks the EventDeleted of a blob that was never sealed (dropped
	// by its creator, or its session closed): nobody else could see it.
	FlagUnsealed
)

// Event is one change of the store, delivered under its lock.
type Event struct {
	Kind  EventKind
	Flags EventFlags
	ID    ids.ObjectID
	Size  uint64 // bytes of a blob: EventCreated, EventFreed
	Name  string // EventNamed, EventUnnamed
}

// Observer receives every Event of a store (Config.Observer), a metrics
// sink. StoreEvent is called under the store's lock, in order: it must be
// cheap, must not call the store and must not keep e.
type Observer interface {
	StoreEvent(e Event)
}

// EventCounts is an Observer that counts events by kind; its counts may
// be read at any time, without the store's lock.
type EventCounts struct {
	n [numEventKinds]atomic.Uint64
}

// StoreEvent counts e.
func (c *EventCounts) StoreEvent(e Event) {
	if e.Kind < numEventKinds {
		c.n[e.Kind].Add(1)
	}
}

// Count returns how many events of kind k were counted.
func (c *EventCounts) Count(k EventKind) uint64 {
	if k < numEventKinds {
		return c.n[k].Load()
	}
	return 0
}

// emitLocked delivers e to the store's subscribers, in a fixed order: the
// directory (before anything could read a stale entry), the ordered id
// index (idindex.go), the epoch, the
// waiters, the observer. s.mu must be held.
func (s *Store) emitLocked(e Event) {
	if s.dir != nil {
		s.dir.apply(s, e)
	}
	s.idx.apply(s, e)
	s.ep.epochApply(e)
	s.waiters.apply(e)
	if s.observer != nil {
		s.observer.StoreEvent(e)
	}
}

// emitIDLocked emits an event of kind k about id, with no other field.
func (s *Store) emitIDLocked(k EventKind, id ids.ObjectID, f EventFlags) {
	s.emitLocked(Event{Kind: k, Flags: f, ID: id})
}
