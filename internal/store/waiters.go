package store

// waiters is who waits for the store to change (Changed), woken by the
// events that can end a wait (waiters.apply) and by what is no object's
// event: a session closed, a pipelined request handled, the backend's
// revision applied. Guarded by Store.mu.
type waiters struct {
	changed chan struct{} // closed at the next wake-up; nil: nobody waits
}

// apply is the waiters' subscription to the store's events (events.go): a
// wait is for an object or blob to appear or be sealed, or for a name.
func (w *waiters) apply(e Event) {
	switch e.Kind {
	case EventCreated, EventSealed, EventNamed:
		w.broadcast()
	case EventTreeChanged, EventDeleted:
		if e.Flags&FlagRemote != 0 {
			w.broadcast()
		}
	}
}

// channel returns the channel closed at the next wake-up. It is made only
// when somebody waits, so a put with no waiter allocates none.
func (w *waiters) channel() <-chan struct{} {
	if w.changed == nil {
		w.changed = make(chan struct{})
	}
	return w.changed
}

// broadcast wakes every waiter.
func (w *waiters) broadcast() {
	if w.changed != nil {
		close(w.changed)
		w.changed = nil
	}
}
