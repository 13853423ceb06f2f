// Package streams keeps the daemon's streams: for each stream object, the
// ordered log of its chunks (ordinary sealed objects or blobs), its writer,
// its readers and whether it ended.
//
// A stream has one writer and a fixed number of reader slots (one, as
// upstream; more when its creator asks, each slot then seeing every chunk).
// A slot is a position in the log: the next chunk to hand out, and whether
// the chunk before it is still held (handed out, not yet given back by the
// next pull). The chunks before every slot's position are consumed: the
// registry hands them back to the caller to delete, as upstream deletes a
// chunk once its reader pulled the next. The log holds at most the
// stream's capacity of chunks not consumed: a writer pushing past it waits.
//
// The registry changes state only; it never blocks and never calls out.
// An operation that cannot proceed returns a channel closed at the
// stream's next change of the kind the caller waits for (a chunk, the end,
// room in the log): the caller sleeps on it and calls again (the server's
// conn.waitFor, with the client's hang-up and a deadline). Waits are per
// stream, never registry-wide.
//
// Owners are the connections: any comparable value. When one goes away,
// Leave fails the streams it was writing (its readers then get
// StreamFailed once the log is read) and frees its reader slots, giving
// back the chunks they held; a reader taking a freed slot goes on from
// where the slot stood.
//
// Lock order: Registry.mu, then nothing (the caller calls the store after
// the registry returns).
package streams

import (
	"sync"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/status"
)

// Owner identifies a connection: the server passes its *conn.
type Owner any

// Open modes, as upstream numbers them (StreamOpenMode).
const (
	ModeRead  = 1
	ModeWrite = 2
)

// Limits of a stream's options.
const (
	// MaxReaders is the largest number of reader slots a stream may have.
	MaxReaders = 64
	// MaxCapacity is the largest number of chunks a stream may buffer.
	MaxCapacity = 1 << 16
	// DefaultCapacity is the number of chunks a stream buffers when
	// neither its creator nor the daemon's configuration says.
	DefaultCapacity = 16
)

// Options are a stream's settings, chosen when it is created.
type Options struct {
	// Readers is the number of reader slots, each seeing every chunk;
	// 0 means 1 (upstream's single reader).
	Readers int
	// Capacity is how many chunks not yet consumed the stream holds
	// before its writer waits; 0 means the registry's default.
	Capacity int
}

// Checker is what the registry asks of the store, without its lock held.
type Checker interface {
	// IsObject reports whether id is an object (not a blob) the store knows.
	IsObject(id ids.ObjectID) bool
}

type phase uint8

const (
	running phase = iota
	drained       // stopped by its writer: readers get StreamDrained at the end of the log
	failed        // stopped with failure, or its writer went away: StreamFailed at the end
)

// slot is one reader's position in the log.
type slot struct {
	owner Owner // nil: free
	next  uint64
	held  bool // the chunk at next-1 is handed out and not yet given back
}

// pos is the first chunk the slot may still need.
func (sl *slot) pos() uint64 {
	if sl.held {
		return sl.next - 1
	}
	return sl.next
}

// Stream is one stream's state. Its fields are guarded by Registry.mu.
type Stream struct {
	id       ids.ObjectID
	capacity int
	slots    []slot
	chunks   []ids.ObjectID // chunks[i] is chunk number base+i
	base     uint64
	writer   Owner
	phase    phase
	dropped  bool
	data     chan struct{} // closed at the next chunk, end, drop or writer's departure; nil: nobody waits
	room     chan struct{} // closed when the log shrinks, and at the end or drop; nil: nobody waits
}

// ID returns the stream's id.
func (st *Stream) ID() ids.ObjectID { return st.id }

// Registry holds the streams of one daemon. Its methods are safe for
// concurrent use.
type Registry struct {
	mu       sync.Mutex
	check    Checker
	capacity int
	streams  map[ids.ObjectID]*Stream
	owned    map[Owner]map[*Stream]struct{} // the streams each owner writes or reads
}

// New returns an empty registry; capacity is the default capacity of a
// stream (0: DefaultCapacity).
func New(check Checker, capacity int) *Registry {
	if capacity <= 0 {
		capacity = DefaultCapacity
	}
	return &Registry{
		check:    check,
		capacity: min(capacity, MaxCapacity),
		streams:  make(map[ids.ObjectID]*Stream),
		owned:    make(map[Owner]map[*Stream]struct{}),
	}
}

// Create makes the object id a stream. The object must exist and not be a
// blob; a stream of that id must not exist already (ObjectExists).
func (r *Registry) Create(id ids.ObjectID, opt Options) error {
	if opt.Readers < 0 || opt.Readers > MaxReaders {
		return status.Errorf(status.Invalid, "a stream takes 1 to %d readers, not %d", MaxReaders, opt.Readers)
	}
	if opt.Capacity < 0 || opt.Capacity > MaxCapacity {
		return status.Errorf(status.Invalid, "a stream's capacity is 1 to %d chunks, not %d", MaxCapacity, opt.Capacity)
	}
	if id.IsBlob() {
		return status.Errorf(status.ObjectIsBlob, "a blob (%v) cannot be a stream: create its metadata first", id)
	}
	if !r.check.IsObject(id) {
		return status.Errorf(status.ObjectNotExists, "cannot create stream %v: no such object (create its metadata first)", id)
	}
	readers := max(opt.Readers, 1)
	capacity := opt.Capacity
	if capacity == 0 {
		capacity = r.capacity
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.streams[id]; ok {
		return status.Errorf(status.ObjectExists, "failed to create the stream as it already exists: %v", id)
	}
	r.streams[id] = &Stream{
		id: id, capacity: capacity, slots: make([]slot, readers),
	}
	return nil
}

// Get returns the stream id, or ObjectNotExists.
func (r *Registry) Get(id ids.ObjectID) (*Stream, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st, ok := r.streams[id]
	if !ok {
		return nil, status.Errorf(status.ObjectNotExists, "stream %v does not exist (not created, or dropped)", id)
	}
	return st, nil
}

// Open opens st for reading (ModeRead: takes a free reader slot) or writing
// (ModeWrite: becomes its writer). An owner that already reads or writes
// it, or a stream with no free slot or a writer already, gets StreamOpened.
func (r *Registry) Open(o Owner, st *Stream, mode int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st.dropped {
		return errDropped(st)
	}
	switch mode {
	case ModeRead:
		if st.slotOf(o) != nil {
			return status.Errorf(status.StreamOpened, "stream %v is already open for reading on this connection", st.id)
		}
		if r.takeSlotLocked(o, st) == nil {
			return status.Errorf(status.StreamOpened, "stream %v has %d reader(s) already", st.id, len(st.slots))
		}
	case ModeWrite:
		if st.writer != nil {
			return status.Errorf(status.StreamOpened, "stream %v has a writer already", st.id)
		}
		if st.phase != running {
			return status.Errorf(status.InvalidStreamState, "stream %v is stopped", st.id)
		}
		st.writer = o
		r.ownLocked(o, st)
	default:
		return status.Errorf(status.Invalid, "a stream opens for reading (%d) or writing (%d), not %d", ModeRead, ModeWrite, mode)
	}
	return nil
}

// Push appends chunk to st's log. The owner must be its writer, or become
// it when it has none (upstream's writers may push without opening). When
// the log is full it appends nothing and returns a channel closed when
// there may be room: the caller waits, then calls again.
func (r *Registry) Push(o Owner, st *Stream, chunk ids.ObjectID) (<-chan struct{}, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.writableLocked(o, st); err != nil {
		return nil, err
	}
	if len(st.chunks) >= st.capacity {
		return channel(&st.room), nil
	}
	r.appendLocked(st, chunk)
	return nil, nil
}

// Append appends chunk whatever the log holds: a chunk the daemon sealed
// for the writer as the stream stops (upstream's get_next_stream_chunk).
func (r *Registry) Append(o Owner, st *Stream, chunk ids.ObjectID) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.writableLocked(o, st); err != nil {
		return err
	}
	r.appendLocked(st, chunk)
	return nil
}

func (r *Registry) writableLocked(o Owner, st *Stream) error {
	if st.dropped {
		return errDropped(st)
	}
	if st.phase != running {
		return status.Errorf(status.InvalidStreamState, "stream %v is stopped: no more chunks may be pushed", st.id)
	}
	switch st.writer {
	case nil:
		st.writer = o
		r.ownLocked(o, st)
	case o:
	default:
		return status.Errorf(status.InvalidStreamState, "stream %v is written by another connection", st.id)
	}
	return nil
}

func (r *Registry) appendLocked(st *Stream, chunk ids.ObjectID) {
	st.chunks = append(st.chunks, chunk)
	wake(&st.data)
}

// Pull gives back the chunk the owner's slot held and hands out the next
// one. A reader that did not open st takes a free slot (upstream's readers
// may pull without opening). At the end of the log of a stopped stream it
// fails with StreamDrained (finished) or StreamFailed (failed, its writer
// gone, or dropped). When no chunk is there yet it returns a channel
// closed at the stream's next change: the caller waits, then calls again.
// consumed lists the chunks no slot needs any more: the caller deletes
// them.
func (r *Registry) Pull(o Owner, st *Stream) (chunk ids.ObjectID, wait <-chan struct{}, consumed []ids.ObjectID, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st.dropped {
		return 0, nil, nil, errDropped(st)
	}
	sl := st.slotOf(o)
	if sl == nil {
		if sl = r.takeSlotLocked(o, st); sl == nil {
			return 0, nil, nil, status.Errorf(status.StreamOpened, "stream %v has %d reader(s) already", st.id, len(st.slots))
		}
	}
	if sl.held {
		sl.held = false
		consumed = st.consumeLocked()
	}
	if sl.next < st.base+uint64(len(st.chunks)) {
		chunk = st.chunks[sl.next-st.base]
		sl.next++
		sl.held = true
		return chunk, nil, consumed, nil
	}
	switch st.phase {
	case drained:
		return 0, nil, consumed, status.Errorf(status.StreamDrained, "Stream drained: no more chunks")
	case failed:
		return 0, nil, consumed, status.Errorf(status.StreamFailed, "Stream failed: stream %v was stopped with failure or its writer went away", st.id)
	}
	return 0, channel(&st.data), consumed, nil
}

// Stop ends st: finished (its readers get StreamDrained after the last
// chunk) or failed (StreamFailed). Stopping a stopped stream fails with
// InvalidStreamState, as upstream.
func (r *Registry) Stop(st *Stream, fail bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st.dropped {
		return errDropped(st)
	}
	if st.phase != running {
		return status.Errorf(status.InvalidStreamState, "Stream already stopped")
	}
	st.phase = drained
	if fail {
		st.phase = failed
	}
	wake(&st.data)
	wake(&st.room)
	return nil
}

// Drop removes st: whoever waits on it gets StreamFailed, and every chunk
// of its log is returned for the caller to delete.
func (r *Registry) Drop(st *Stream) (consumed []ids.ObjectID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st.dropped {
		return nil
	}
	st.dropped = true
	if st.phase == running {
		st.phase = failed
	}
	delete(r.streams, st.id)
	for o, set := range r.owned {
		if _, ok := set[st]; ok {
			delete(set, st)
			if len(set) == 0 {
				delete(r.owned, o)
			}
		}
	}
	consumed = st.chunks
	st.chunks = nil
	wake(&st.data)
	wake(&st.room)
	return consumed
}

// Leave forgets the owner: the running streams it writes fail (their
// readers get StreamFailed once they read the log), and its reader slots
// are freed, the chunks they held given back. It returns the chunks no
// slot needs any more, for the caller to delete.
func (r *Registry) Leave(o Owner) (consumed []ids.ObjectID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for st := range r.owned[o] {
		if st.writer == o {
			st.writer = nil
			if st.phase == running {
				st.phase = failed
				wake(&st.data)
				wake(&st.room)
			}
		}
		if sl := st.slotOf(o); sl != nil {
			sl.owner = nil
			if sl.held {
				sl.held = false
				consumed = append(consumed, st.consumeLocked()...)
			}
		}
	}
	delete(r.owned, o)
	return consumed
}

// Writer returns st's writer, nil when it has none (not yet, or gone).
func (r *Registry) Writer(st *Stream) Owner {
	r.mu.Lock()
	defer r.mu.Unlock()
	return st.writer
}

// Len returns the number of streams (tests and status).
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.streams)
}

// Buffered returns how many chunks st holds that some slot still needs.
func (r *Registry) Buffered(st *Stream) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(st.chunks)
}

func (st *Stream) slotOf(o Owner) *slot {
	for i := range st.slots {
		if st.slots[i].owner == o {
			return &st.slots[i]
		}
	}
	return nil
}

func (r *Registry) takeSlotLocked(o Owner, st *Stream) *slot {
	for i := range st.slots {
		if st.slots[i].owner == nil {
			st.slots[i].owner = o
			r.ownLocked(o, st)
			return &st.slots[i]
		}
	}
	return nil
}

func (r *Registry) ownLocked(o Owner, st *Stream) {
	set := r.owned[o]
	if set == nil {
		set = make(map[*Stream]struct{}, 1)
		r.owned[o] = set
	}
	set[st] = struct{}{}
}

// consumeLocked drops the chunks before every slot's position from the
// log and returns them; the writer is woken when the log shrank.
func (st *Stream) consumeLocked() []ids.ObjectID {
	low := st.base + uint64(len(st.chunks))
	for i := range st.slots {
		low = min(low, st.slots[i].pos())
	}
	n := int(low - st.base)
	if n <= 0 {
		return nil
	}
	out := append([]ids.ObjectID(nil), st.chunks[:n]...)
	st.chunks = append(st.chunks[:0], st.chunks[n:]...)
	st.base = low
	wake(&st.room)
	return out
}

// channel returns the channel closed at the next wake of *ch, made when
// somebody first waits: a push nobody waits for allocates nothing.
func channel(ch *chan struct{}) <-chan struct{} {
	if *ch == nil {
		*ch = make(chan struct{})
	}
	return *ch
}

// wake closes *ch, if anybody waits on it.
func wake(ch *chan struct{}) {
	if *ch != nil {
		close(*ch)
		*ch = nil
	}
}

func errDropped(st *Stream) error {
	return status.Errorf(status.StreamFailed, "Stream failed: stream %v was dropped", st.id)
}
