package client

import (
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/shm"
)

// The tree cache. Objects are immutable, so the tree of an object got once
// can serve the next get of the same id without a round trip, as long as
// nothing changed it and it was not deleted. The daemon publishes a meta
// epoch in its arena's header (docs/protocol.md, "Arena header") that grows
// on every delete and every change to an existing object's metadata; the
// cache is valid while the epoch reads what it read before the cached trees
// were fetched, and is dropped whole when it changes.
//
// Each cached tree holds one local reference to each of its blobs, so the
// blobs cannot be freed (and their memory reused) while the cache serves
// them. Those references are what a deleted object's memory waits for, so
// the cache never keeps them long: it is checked against the epoch on every
// use and every cacheCheck while it is not empty, and entries unused for
// cacheIdle are dropped. Once the daemon is gone (Client.Connected, also
// asked by the periodic check) the cache serves nothing.

const (
	cacheMax   = 256                    // trees kept
	cacheCheck = 10 * time.Millisecond  // epoch check while the cache is not empty
	cacheIdle  = 500 * time.Millisecond // an entry unused this long is dropped
)

// treeCache is guarded by Client.state.
type treeCache struct {
	epoch   uint64 // the epoch the entries are valid for
	entries map[ids.ObjectID]*cachedTree
	armed   bool        // the check timer runs
	dead    atomic.Bool // the daemon is gone (Connected saw it): serve nothing
}

type cachedTree struct {
	tree  []byte         // the caller gets copies
	blobs []ids.ObjectID // each referenced once by the cache
	used  time.Time
}

// noteArenaLocked finds the meta epoch in a newly mapped arena, if the daemon
// advertised one and the header is there. c.mu must be held.
func (r *refs) noteArenaLocked(a *arena) {
	off := r.epochOffset
	if off == 0 || r.epoch.Load() != nil || off%8 != 0 || off+8 > uint64(len(a.roB)) ||
		string(a.roB[:len(shm.HeaderMagic)]) != shm.HeaderMagic {
		return
	}
	r.epoch.Store((*uint64)(unsafe.Pointer(&a.roB[off])))
}

// readEpoch returns the daemon's meta epoch, and false when it has none (or
// the arena is not mapped yet): then nothing is cached.
func (r *refs) readEpoch() (uint64, bool) {
	w := r.epoch.Load()
	if w == nil {
		return 0, false
	}
	return atomic.LoadUint64(w), true
}

// validateCacheLocked drops the cache if the epoch moved. c.state must be
// held.
func (r *refs) validateCacheLocked() {
	if len(r.cache.entries) == 0 {
		return
	}
	if e, ok := r.readEpoch(); !ok || e != r.cache.epoch {
		r.dropCacheLocked()
		r.cache.epoch = e
	}
}

// dropCacheLocked drops every entry and the references they hold. c.state
// must be held.
func (r *refs) dropCacheLocked() {
	for id := range r.cache.entries {
		r.evictLocked(id)
	}
}

// evictLocked drops one entry. c.state must be held.
func (r *refs) evictLocked(id ids.ObjectID) {
	e := r.cache.entries[id]
	delete(r.cache.entries, id)
	var zero []ids.ObjectID
	for _, bid := range e.blobs {
		if b, ok := r.blobs[bid]; ok && b.cached > 0 {
			b.cached--
			if b.cached == 0 && b.pins == 0 {
				zero = append(zero, bid)
			}
		}
	}
	if len(zero) > 0 {
		r.deferReleaseLocked(zero)
	}
}

// cachedTreeLocked returns a copy of the cached tree of id, if the cache is
// valid and has it; with pin, it also takes the references a GetObject takes
// (released by Release(id)). c.state must be held.
func (r *refs) cachedTreeLocked(id ids.ObjectID, pin bool) ([]byte, bool) {
	if r.cache.dead.Load() { // the get goes to the lost connection and fails there
		r.dropCacheLocked()
		return nil, false
	}
	r.validateCacheLocked()
	e, ok := r.cache.entries[id]
	if !ok {
		return nil, false
	}
	e.used = time.Now()
	if pin {
		for _, bid := range e.blobs {
			r.blobs[bid].pins++ // the caller's reference; the entry exists: the cache holds one too
		}
		r.objects[id] = append(r.objects[id], append([]ids.ObjectID(nil), e.blobs...))
	}
	return append([]byte(nil), e.tree...), true
}

// cacheTreeLocked caches the tree of id, which the daemon read under epoch,
// and whose blobs the client holds. c.state must be held.
func (r *refs) cacheTreeLocked(id ids.ObjectID, tree []byte, blobs []ids.ObjectID, epoch uint64) {
	if _, ok := r.readEpoch(); !ok {
		return // no epoch to check entries against
	}
	if r.cache.entries == nil {
		r.cache.entries = make(map[ids.ObjectID]*cachedTree)
	}
	switch {
	case len(r.cache.entries) == 0:
		r.cache.epoch = epoch
	case epoch != r.cache.epoch:
		if now, _ := r.readEpoch(); now != epoch {
			return // the tree may be stale already
		}
		r.dropCacheLocked() // the entries are older than this tree
		r.cache.epoch = epoch
	}
	if _, ok := r.cache.entries[id]; ok {
		return
	}
	for _, bid := range blobs {
		b, ok := r.blobs[bid]
		if !ok || b.pins == 0 {
			return // not held: nothing keeps the bytes
		}
	}
	if len(r.cache.entries) >= cacheMax {
		r.evictOldestLocked()
	}
	for _, bid := range blobs {
		r.blobs[bid].cached++
	}
	r.cache.entries[id] = &cachedTree{tree: append([]byte(nil), tree...), blobs: blobs, used: time.Now()}
	if !r.cache.armed {
		r.cache.armed = true
		time.AfterFunc(cacheCheck, r.checkCache)
	}
}

// evictOldestLocked drops the least recently used entry. c.state must be
// held.
func (r *refs) evictOldestLocked() {
	var oldest ids.ObjectID
	var at time.Time
	for id, e := range r.cache.entries {
		if at.IsZero() || e.used.Before(at) {
			oldest, at = id, e.used
		}
	}
	r.evictLocked(oldest)
}

// checkCache runs on a timer while the cache is not empty: it drops the
// cache when the epoch moved, and entries unused for cacheIdle, so that
// references held for deleted objects go back soon even if the process makes
// no more requests.
func (r *refs) checkCache() {
	r.Lock()
	defer r.Unlock()
	if r.closed() {
		r.cache.armed = false
		return
	}
	if !r.connected() { // the daemon died: drop what it can no longer vouch for
		r.dropCacheLocked()
		r.cache.armed = false
		return
	}
	r.validateCacheLocked()
	now := time.Now()
	for id, e := range r.cache.entries {
		if now.Sub(e.used) > cacheIdle {
			r.evictLocked(id)
		}
	}
	if len(r.cache.entries) == 0 {
		r.cache.armed = false
		return
	}
	time.AfterFunc(cacheCheck, r.checkCache)
}
