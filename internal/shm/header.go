package shm

// The arena's first page is a header the daemon writes and clients read
// through their read-only mapping of the arena (docs/protocol.md, "Arena
// header"); blobs are allocated after it. This is the one definition of its
// layout, used by the daemon (internal/store) and the client
// (internal/client):
//
//	offset 0  magic  "v6d-go\x00\x01" (layout version 1)
//	offset 8  meta epoch, uint64, native byte order, written atomically
//	offset 16 pre-faulted end, uint64, native byte order, written atomically
//	offset 24 high-water mark, uint64, native byte order, written atomically
//
// The meta epoch grows whenever an object or blob is deleted or the metadata
// of an existing object changes (labels, persist, names). A client that
// cached a metadata tree under epoch e may reuse it, without a round trip,
// as long as the epoch still reads e.
//
// The pre-faulted end is a hint: the daemon's background pre-fault
// (store.Config.PrefaultAhead) made every page between the highest
// allocation and this arena offset resident. A client may map those pages
// into its own view ahead of need (a read of each, which costs no memory);
// it must not rely on it for anything else. 0: no pre-fault.
//
// The high-water mark, published with the pre-faulted end, is the highest
// end of any allocation when the daemon last published: the pre-faulted,
// never-used memory is what lies between the two. Also a hint, stale by the
// allocations made since; 0 from a daemon that does not publish it.
const (
	// HeaderSize is the size of the arena header: one page.
	HeaderSize = 4096
	// HeaderEpochOffset is the offset of the meta epoch in the arena.
	HeaderEpochOffset = 8
	// HeaderPrefaultedOffset is the offset of the pre-faulted end.
	HeaderPrefaultedOffset = 16
	// HeaderHighWaterOffset is the offset of the high-water mark.
	HeaderHighWaterOffset = 24
)

// HeaderMagic identifies the header layout; a client that finds anything
// else at offset 0 uses no epoch.
const HeaderMagic = "v6d-go\x00\x01"
