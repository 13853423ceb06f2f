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
func (c *Client) noteArenaLocked(a *arena) {
	off := c.epochOffset
	if off == 0 || c.epoch.Load() != nil || off%8 != 0 || off+8 > uint64(len(a.roB)) ||
		string(a.roB[:len(shm.HeaderMagic)]) != shm.HeaderMagic {
		return
	}
	c.epoch.Store((*uint64)(unsafe.Pointer(&a.roB[off])))
}

// readEpoch returns the daemon's meta epoch, and false when it has none (or
// the arena is not mapped yet): then nothing is cached.
func (c *Client) readEpoch() (uint64, bool) {
	w := c.epoch.Load()
	if w == nil {
		return 0, false
	}
	return atomic.LoadUint64(w), true
}

// validateCacheLocked drops the cache if the epoch moved. c.state must be
// held.
func (c *Client) validateCacheLocked() {
	if len(c.cache.entries) == 0 {
		return
	}
	if e, ok := c.readEpoch(); !ok || e != c.cache.epoch {
		c.dropCacheLocked()
		c.cache.epoch = e
	}
}

// dropCacheLocked drops every entry and the references they hold. c.state
// must be held.
func (c *Client) dropCacheLocked() {
	for id := range c.cache.entries {
		c.evictLocked(id)
	}
}

// evictLocked drops one entry. c.state must be held.
func (c *Client) evictLocked(id ids.ObjectID) {
	e := c.cache.entries[id]
	delete(c.cache.entries, id)
	var zero []ids.ObjectID
	for _, bid := range e.blobs {
		if b, ok := c.blobs[bid]; ok && b.cached > 0 {
			b.cached--
			if b.cached == 0 && b.pins == 0 {
				zero = append(zero, bid)
			}
		}
	}
	if len(zero) > 0 {
		c.deferReleaseLocked(zero)
	}
}

// cachedTreeLocked returns a copy of the cached tree of id, if the cache is
// valid and has it; with pin, it also takes the references a GetObject takes
// (released by Release(id)). c.state must be held.
func (c *Client) cachedTreeLocked(id ids.ObjectID, pin bool) ([]byte, bool) {
	if c.cache.dead.Load() { // the get goes to the lost connection and fails there
		c.dropCacheLocked()
		return nil, false
	}
	c.validateCacheLocked()
	e, ok := c.cache.entries[id]
	if !ok {
		return nil, false
	}
	e.used = time.Now()
	if pin {
		for _, bid := range e.blobs {
			c.blobs[bid].pins++ // the caller's reference; the entry exists: the cache holds one too
		}
		c.objects[id] = append(c.objects[id], append([]ids.ObjectID(nil), e.blobs...))
	}
	return append([]byte(nil), e.tree...), true
}

// cacheTreeLocked caches the tree of id, which the daemon read under epoch,
// and whose blobs the client holds. c.state must be held.
func (c *Client) cacheTreeLocked(id ids.ObjectID, tree []byte, blobs []ids.ObjectID, epoch uint64) {
	if _, ok := c.readEpoch(); !ok {
		return // no epoch to check entries against
	}
	if c.cache.entries == nil {
		c.cache.entries = make(map[ids.ObjectID]*cachedTree)
	}
	switch {
	case len(c.cache.entries) == 0:
		c.cache.epoch = epoch
	case epoch != c.cache.epoch:
		if now, _ := c.readEpoch(); now != epoch {
			return // the tree may be stale already
		}
		c.dropCacheLocked() // the entries are older than this tree
		c.cache.epoch = epoch
	}
	if _, ok := c.cache.entries[id]; ok {
		return
	}
	for _, bid := range blobs {
		b, ok := c.blobs[bid]
		if !ok || b.pins == 0 {
			return // not held: nothing keeps the bytes
		}
	}
	if len(c.cache.entries) >= cacheMax {
		c.evictOldestLocked()
	}
	for _, bid := range blobs {
		c.blobs[bid].cached++
	}
	c.cache.entries[id] = &cachedTree{tree: append([]byte(nil), tree...), blobs: blobs, used: time.Now()}
	if !c.cache.armed {
		c.cache.armed = true
		time.AfterFunc(cacheCheck, c.checkCache)
	}
}

// evictOldestLocked drops the least recently used entry. c.state must be
// held.
func (c *Client) evictOldestLocked() {
	var oldest ids.ObjectID
	var at time.Time
	for id, e := range c.cache.entries {
		if at.IsZero() || e.used.Before(at) {
			oldest, at = id, e.used
		}
	}
	c.evictLocked(oldest)
}

// checkCache runs on a timer while the cache is not empty: it drops the
// cache when the epoch moved, and entries unused for cacheIdle, so that
// references held for deleted objects go back soon even if the process makes
// no more requests.
func (c *Client) checkCache() {
	c.state.Lock()
	defer c.state.Unlock()
	if c.isClosed.Load() {
		c.cache.armed = false
		return
	}
	if !c.Connected() { // the daemon died: drop what it can no longer vouch for
		c.dropCacheLocked()
		c.cache.armed = false
		return
	}
	c.validateCacheLocked()
	now := time.Now()
	for id, e := range c.cache.entries {
		if now.Sub(e.used) > cacheIdle {
			c.evictLocked(id)
		}
	}
	if len(c.cache.entries) == 0 {
		c.cache.armed = false
		return
	}
	time.AfterFunc(cacheCheck, c.checkCache)
}
