package client

import (
	"sync"
	"sync/atomic"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// refs is the client's local state: the blobs it holds and how many times
// (blobs), the blob lists of objects got (objects), releases not yet sent
// (release.go), the tree cache (cache.go), the directory and pin page with
// the slot holds of directory gets (directory.go), and the caller's release
// queue (relqueue.go). Its mutex is the lock the package calls
// "Client.state": it is taken after Client.mu, and methods named ...Locked
// need it held. It asks nothing of the daemon itself: releases whose count
// reached zero go out with the client's next request, or through flush.
type refs struct {
	sync.Mutex
	blobs      map[ids.ObjectID]*blob
	objects    map[ids.ObjectID][][]ids.ObjectID // object → stack of pinned blob lists
	pending    []ids.ObjectID                    // blobs at zero, release not sent yet (release.go)
	flushArmed bool                              // a timer will send pending
	cache      treeCache                         // trees got recently (cache.go)
	dir        *dirState                         // gets without a round trip; nil: none (directory.go)
	// slotsCleared: a pin slot was cleared since the last FlushReleases;
	// the daemon notices at this connection's next request.
	slotsCleared bool
	relq         *releaseQueue                // releases written to memory (relqueue.go); nil: none
	spareBlobs   []*blob                      // entries of released directory gets, for reuse (directory.go)
	spareHolds   []*slotHold                  // holds whose last blob went, for reuse
	relqSeen     atomic.Pointer[releaseQueue] // relq, for a look without the lock

	epochOffset uint64                 // where the daemon publishes its meta epoch; 0: nowhere
	epoch       atomic.Pointer[uint64] // the meta epoch in the arena mapping, once mapped

	// Set by the client at Connect: flush sends the pending releases in
	// an exchange of its own (the timer's; it takes Client.mu); closed
	// and connected report whether the client was closed and whether its
	// daemon is there (Client.Connected), for the cache's check.
	flush     func()
	closed    func() bool
	connected func() bool
}
