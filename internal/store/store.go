// Package store holds what the daemon stores: blobs in the shared arena,
// metadata trees, names, and the references each connection holds.
//
// Lifecycle is stricter than upstream's: a Session (one per connection) that
// closes releases every reference it held and frees its unsealed blobs; a
// deleted blob still referenced by a session is hidden at once but its memory
// is reused only after the last reference is released.
//
// Persisted trees and names are kept by a metadata backend (internal/meta,
// Config.Backend; meta.Local by default): the store routes persist, names
// and the delete of persisted objects through it, and keeps the objects it
// serves in its own table. The persisted objects of other instances (a
// cluster backend reports them through Changes; a goroutine applies them)
// are readable metadata here: get_meta, exists and list see them, their
// blobs stay on their own instance.
//
// Every store operation costs O(what it touches), never O(size of the
// store): objects and blobs keep their users (a reverse index of member
// links), so delete walks only what it deletes, and Clear works in batches,
// releasing the lock between them.
//
// Locking: one mutex, Store.mu, guards all state; no method calls out while
// holding it except into the allocator and arena, which take no locks, and
// into the metadata backend, which takes only its own locks and never calls
// back (lock order: Store.mu, then the backend's).
package store

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/v6d-io/v6d-go/internal/alloc"
	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/meta"
	"github.com/v6d-io/v6d-go/internal/shm"
	"github.com/v6d-io/v6d-go/internal/status"
)

// Config configures a Store.
type Config struct {
	// Size is the arena's size in bytes, the limit of all blob memory.
	Size uint64
	// Reserve pre-faults the whole arena at start.
	Reserve bool
	// PrefaultAhead is how many bytes of never-allocated arena memory a
	// background goroutine keeps resident above the highest allocation
	// (prefault.go); 0: none.
	PrefaultAhead uint64
	// InstanceID is this daemon's instance id, stamped on every object.
	InstanceID uint64
	// Backend keeps persisted trees and names; nil means a meta.Local of
	// InstanceID. The store owns it from New on and closes it in Close. A
	// given Backend's InstanceID replaces Config.InstanceID.
	Backend meta.Backend
	// MaxReplyBytes bounds the replies the store builds (get_data, list,
	// get_buffers): a request whose reply would be larger fails with
	// status.Invalid instead. 0 means DefaultMaxReplyBytes.
	MaxReplyBytes uint64
	// NoDirectory turns off the directory (directory.go): every get then
	// takes a round trip.
	NoDirectory bool
	// DirectoryEntries is how many objects and blobs the directory can
	// name at once (it rounds up to a power of two); DirectoryEntriesFor(Size)
	// when zero. Past that, gets of the rest take a round trip.
	DirectoryEntries uint64
	// Observer, when set, receives every event of the store (events.go),
	// under its lock: a metrics sink.
	Observer Observer
	// DirectoryFull, when set, is called the first time an object finds no
	// room in the directory, with how many entries it holds; under the
	// store's lock, so it must not call the store.
	DirectoryFull func(entries int)
	// MaxPinPages bounds the sessions given a pin page (AttachPins) at
	// once: each page is one mapping of the daemon, and the kernel caps
	// those (vm.max_map_count); 0 means no bound. Past it AttachPins fails
	// with ErrPinPagesFull and the session's client gets by round trip.
	MaxPinPages int
	// SpillPath, when set, turns spilling on (spill.go): the directory of
	// the spill files, checked and emptied of stale ones by New.
	SpillPath string
	// SpillLowerRate and SpillUpperRate are the spill marks, fractions of
	// Size: at or above the upper, the spiller spills until usage is at
	// most the lower; DefaultSpillLowerRate and DefaultSpillUpperRate when 0.
	SpillLowerRate, SpillUpperRate float64
	// SpillWait bounds how long a put or a load waits for the spiller to
	// make room before NotEnoughMemory; DefaultSpillWait when 0, no wait
	// when negative.
	SpillWait time.Duration
}

// DefaultMaxReplyBytes is the reply-size limit when Config.MaxReplyBytes is 0.
const DefaultMaxReplyBytes = 256 << 20

// MaxItemsPerRequest bounds the items (sizes, ids, trees) of one request;
// more fail with status.Invalid. It keeps what one small request can make
// the daemon allocate bounded.
const MaxItemsPerRequest = 65536

// extentBytes is a generous estimate of the size of one extent in a reply
// (a payload on the wire), for the reply-size limit.
const extentBytes = 256

// Store is the object store of one daemon. It is safe for concurrent use.
type Store struct {
	instance uint64
	maxReply uint64
	arena    *shm.Arena
	base     uint64 // daemon-side address of the arena, reported in payloads
	gen      *ids.Generator
	meta     meta.Backend // persisted trees and names; called under mu
	// barriers counts the calls of Session.Visible waiting, read without
	// the lock by Session.Progress.
	barriers atomic.Int32

	mu           sync.Mutex
	alloc        *alloc.Allocator
	blobs        map[ids.ObjectID]*blob               // live blobs, sealed or not
	zombies      map[ids.ObjectID]*blob               // deleted blobs still referenced
	objects      map[ids.ObjectID]*object             // live non-blob objects
	listedBy     map[string]map[ids.ObjectID]struct{} // the local objects whose o.names list each name (names.go)
	remote       map[ids.ObjectID]*remoteObject       // persisted objects of other instances
	metaRev      int64                                // the backend's revision applied (Sync)
	waiters      waiters                              // who waits for a change (waiters.go)
	observer     Observer                             // Config.Observer; nil: none
	sessions     map[*Session]struct{}                // open sessions
	closed       bool
	badEdges     []string // illegal blob state changes refused (states.go), for CheckInvariants
	barrierWaits uint64   // calls of Session.Visible that waited (tests)
	nameVisits   uint64   // objects a cluster name change looked at (applyNameLocked; tests)

	leased      uint64 // bytes the sessions' leases hold (lease.go)
	hwm         uint64 // the highest end of any allocation so far (prefault.go)
	prefaultGen uint64 // bumped when trimmed memory may lie above hwm (prefault.go)

	// The background pre-fault (prefault.go); nil channels without one.
	prefaultKick chan struct{}
	prefaultStep uint64        // the pre-fault wakes when hwm crosses a multiple of it (prefault.go)
	prefaultRuns atomic.Uint64 // chunks the pre-fault made resident (for tests)
	prefaultStop chan struct{}
	prefaultDone chan struct{}
	prefaultOnce sync.Once

	// The parts of the store, one concept each, sharing its state and lock.
	pub    publisher
	pins   pinHolds
	chk    checker
	pf     prefaulter
	ep     epoch
	cl     cluster
	users  userIndex
	shapec shapeCache
	build  treeBuilder
	text   treeWriter
	life   blobLife
	rtext  remoteTrees
	sp     spiller

	spill *spillState // spilling (spill.go); nil: off

	clearHook func()  // tests: runs between Clear's batches, without mu
	listHook  func()  // tests: runs between List's batches, without mu
	idx       idIndex // every id in order, for List (idindex.go)
	listSeen  uint64  // ids List visited (tests: a list costs what it returns)

	shapes map[string]*shape // trees built before, by text (shape.go)

	dir       *directory // gets without a round trip; nil: none (directory.go)
	holdCount int        // holds of all sessions (directory.go)
	pinPages  int        // sessions with a pin page (directory.go)

	// The deferred pin scans (pinsweep.go).
	sweep        *Session     // holds the blobs of deleted ids until their scan ends; nil until needed
	sweepJobs    []*sweepJob  // queued for the next pass
	sweepCur     *sweepPass   // the pass being read; nil: none
	sweepRunning bool         // sweepPins runs
	sweepPages   atomic.Int64 // pages the sweep read (tests)
	pinReadsNow  atomic.Int64 // pages deletes read themselves (tests)
	maxPinPages  int          // Config.MaxPinPages
	rescanArmed  bool         // the pin rescan timer runs
}

// New creates the arena and an empty store. On error, it closes
// cfg.Backend.
func New(cfg Config) (*Store, error) {
	backend := cfg.Backend
	if backend == nil {
		backend = meta.NewLocal(cfg.InstanceID)
	}
	s, err := open(cfg, backend)
	if err != nil {
		_ = backend.Close()
		return nil, err
	}
	return s, nil
}

func open(cfg Config, backend meta.Backend) (*Store, error) {
	if cfg.Size < alloc.Alignment {
		return nil, fmt.Errorf("store: size %d is too small", cfg.Size)
	}
	cfg.InstanceID = backend.InstanceID()
	arena, err := shm.Create(cfg.Size + HeaderSize)
	if err != nil {
		return nil, err
	}
	if cfg.Reserve {
		if err := arena.Prefault(); err != nil {
			_ = arena.Close()
			return nil, err
		}
	}
	s := &Store{
		instance: cfg.InstanceID,
		maxReply: cfg.MaxReplyBytes,
		arena:    arena,
		gen:      ids.NewGenerator(cfg.InstanceID),
		meta:     backend,
		alloc:    alloc.New(arena.Size()),
		blobs:    make(map[ids.ObjectID]*blob),
		zombies:  make(map[ids.ObjectID]*blob),
		objects:  make(map[ids.ObjectID]*object),
		listedBy: make(map[string]map[ids.ObjectID]struct{}),
		remote:   make(map[ids.ObjectID]*remoteObject),
		sessions: make(map[*Session]struct{}),
		observer: cfg.Observer,
	}
	s.pub = publisher{s}
	s.pins = pinHolds{s}
	s.chk = checker{s}
	s.pf = prefaulter{s}
	s.ep = epoch{s}
	s.cl = cluster{s}
	s.users = userIndex{s}
	s.shapec = shapeCache{s}
	s.build = treeBuilder{s}
	s.text = treeWriter{s}
	s.life = blobLife{s}
	s.rtext = remoteTrees{s}
	s.sp = spiller{s}
	if s.maxReply == 0 {
		s.maxReply = DefaultMaxReplyBytes
	}
	if b := arena.Bytes(); len(b) > 0 {
		s.base = uint64(uintptrOf(b))
	}
	if err := s.ep.initHeader(); err != nil {
		_ = arena.Close()
		return nil, err
	}
	if !cfg.NoDirectory {
		entries := cfg.DirectoryEntries
		if entries == 0 {
			entries = DirectoryEntriesFor(cfg.Size)
		}
		s.dir = openDirectory(entries)
		if s.dir != nil {
			s.dir.full = cfg.DirectoryFull
		}
		s.maxPinPages = cfg.MaxPinPages
	}
	if cfg.SpillPath != "" {
		if err := CheckSpillRates(cfg.SpillLowerRate, cfg.SpillUpperRate); err != nil {
			s.closeDir()
			_ = arena.Close()
			return nil, fmt.Errorf("store: %w", err)
		}
		files, err := openSpillFiles(cfg.SpillPath)
		if err != nil {
			s.closeDir()
			_ = arena.Close()
			return nil, err
		}
		s.mu.Lock()
		s.sp.start(cfg, files)
		s.mu.Unlock()
	}
	go s.cl.follow(backend.Changes())
	if cfg.PrefaultAhead > 0 && !cfg.Reserve {
		s.pf.startPrefault(cfg.PrefaultAhead)
	}
	return s, nil
}

// Close unmaps the arena. Clients that mapped it keep their mappings. Close is
// idempotent; the store must not be used afterwards.
func (s *Store) Close() error {
	s.pf.stopPrefault()
	s.sp.stopSpill()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.sp.waitIO() // loads and spills in flight read or write the arena
	s.mu.Lock()
	defer s.mu.Unlock()
	var dirErr error
	if s.dir != nil {
		dirErr = s.dir.d.Close()
	}
	return errors.Join(s.meta.Close(), s.arena.Close(), dirErr)
}

// closeDir closes the directory of a store that failed to open.
func (s *Store) closeDir() {
	if s.dir != nil {
		_ = s.dir.d.Close()
	}
}

// InstanceID returns the instance id of the store.
func (s *Store) InstanceID() uint64 { return s.instance }

// Usage returns the bytes allocated to blobs and the limit (the arena's size
// without its header). Memory the sessions lease (lease.go) is not in used:
// it holds no object yet (Leased counts it), but nobody else can have it.
func (s *Store) Usage() (used, limit uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usageLocked()
}

func (s *Store) usageLocked() (used, limit uint64) {
	return s.alloc.Used() - HeaderSize - s.leased, s.alloc.Capacity() - HeaderSize
}

// MemoryTrim returns the pages of every free extent to the kernel and reports
// whether anything was released.
func (s *Store) MemoryTrim() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var released uint64
	var firstErr error
	s.alloc.FreeExtents(func(off, size uint64) {
		n, err := s.arena.Trim(off, size)
		released += n
		if err != nil && firstErr == nil {
			firstErr = err
		}
	})
	s.pf.restartPrefaultLocked()
	return released > 0, firstErr
}

// Extent locates a blob for a client: where its bytes lie in the arena and
// how to map them. The server turns it into the wire's payload.
type Extent struct {
	ID      ids.ObjectID
	Fd      int    // the arena's memfd (owned by the store), -1 for the empty blob
	Offset  uint64 // of the bytes, from the arena's start
	Size    uint64
	MapSize uint64 // the arena's size, for mapping it whole
	Pointer uint64 // the daemon's address of the bytes, reported as upstream does
	Sealed  bool
	Owner   bool // the daemon owns the memory (false only for the empty blob)
}

// extent describes blob b for a client.
func (s *Store) extent(b *blob) Extent {
	if b.id == ids.EmptyBlob {
		return Extent{ID: b.id, Fd: -1, Sealed: true}
	}
	return Extent{
		ID:      b.id,
		Fd:      s.arena.Fd(),
		Offset:  b.offset,
		Size:    b.size,
		MapSize: s.arena.Size(),
		Pointer: s.base + b.offset,
		Sealed:  b.state != stateUnsealed,
		Owner:   true,
	}
}

// checkItems fails a request of n items when n exceeds MaxItemsPerRequest.
func checkItems(what string, n int) error {
	if n > MaxItemsPerRequest {
		return status.Errorf(status.Invalid, "%d %s in one request, at most %d", n, what, MaxItemsPerRequest)
	}
	return nil
}

// checkReplyLocked fails a reply that would be larger than the limit.
func (s *Store) checkReplyLocked(size uint64) error {
	if size > s.maxReply {
		return status.Errorf(status.Invalid,
			"the reply would exceed %d bytes (the daemon's reply limit); ask for fewer objects", s.maxReply)
	}
	return nil
}

// dedupe returns idl without repeated ids, in first-seen order.
func dedupe(idl []ids.ObjectID) []ids.ObjectID {
	if len(idl) < 2 {
		return idl
	}
	seen := make(map[ids.ObjectID]struct{}, len(idl))
	out := make([]ids.ObjectID, 0, len(idl))
	for _, id := range idl {
		if _, dup := seen[id]; !dup {
			seen[id] = struct{}{}
			out = append(out, id)
		}
	}
	return out
}
