package store

import "github.com/v6d-io/v6d-go/internal/ids"

// waiters is who waits for the store to change. Waits register per key
// (Watch: an object or blob id, or a name) and are woken only by the
// events of that key (waiters.apply); an event of a key nobody waits for
// costs a length check. What is no object's event wakes the store-wide
// channel (broadcast): a session closed or a pipelined request handled
// (Session.Visible), the backend's revision applied (Sync). Guarded by
// Store.mu.
type waiters struct {
	changed chan struct{}           // closed at the next broadcast; nil: nobody waits
	keys    map[WaitKey]*keyWaiters // waits by key; nil until the first
}

// WaitKey names what a wait is for: an object or blob (ID) or a name
// (Name, with ID 0).
type WaitKey struct {
	ID   ids.ObjectID
	Name string
}

// keyWaiters are the waits of one key: they share a channel, closed at
// the key's next event.
type keyWaiters struct {
	ch chan struct{}
	n  int // registered waits not yet stopped
}

// apply is the waiters' subscription to the store's events (events.go): a
// wait is for an object or blob to appear (here or, persisted, on another
// instance) or be sealed, or for a name to point somewhere.
func (w *waiters) apply(e Event) {
	if len(w.keys) == 0 {
		return
	}
	switch e.Kind {
	case EventCreated, EventSealed:
		w.wake(WaitKey{ID: e.ID})
	case EventTreeChanged:
		if e.Flags&FlagRemote != 0 {
			w.wake(WaitKey{ID: e.ID})
		}
	case EventNamed:
		w.wake(WaitKey{Name: e.Name})
	}
}

// wake ends the current waits of k.
func (w *waiters) wake(k WaitKey) {
	if kw := w.keys[k]; kw != nil {
		close(kw.ch)
		delete(w.keys, k)
	}
}

// Watch registers a wait for k and returns a channel closed at the next
// event of k (the object or blob k.ID created, sealed, or persisted by
// another instance; the name k.Name set or moved) and a stop function the
// caller MUST call when it stops waiting, woken or not. A waiter watches,
// checks its condition, and waits only if it does not hold: an event
// between the check and the wait is not lost.
func (s *Store) Watch(k WaitKey) (<-chan struct{}, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &s.waiters
	if w.keys == nil {
		w.keys = map[WaitKey]*keyWaiters{}
	}
	kw := w.keys[k]
	if kw == nil {
		kw = &keyWaiters{ch: make(chan struct{})}
		w.keys[k] = kw
	}
	kw.n++
	return kw.ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if kw.n--; kw.n == 0 && w.keys[k] == kw {
			delete(w.keys, k) // nobody waits for k any more
		}
	}
}

// Waits returns how many keys have waits registered (tests).
func (s *Store) Waits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiters.keys)
}

// channel returns the channel closed at the next broadcast. It is made
// only when somebody waits, so a put with no waiter allocates none.
func (w *waiters) channel() <-chan struct{} {
	if w.changed == nil {
		w.changed = make(chan struct{})
	}
	return w.changed
}

// broadcast wakes every waiter of the store-wide channel.
func (w *waiters) broadcast() {
	if w.changed != nil {
		close(w.changed)
		w.changed = nil
	}
}
