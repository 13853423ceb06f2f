package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/jsonscan"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/shm"
	"github.com/v6d-io/v6d-go/internal/status"
)

// Pipelined puts (protocol.ExtPipelined; docs/design.md, "Pipelined puts";
// the daemon's side is store/pipelined.go). A small put with a tree
// (CreateInline) carves its blobs from the lease, copies the bytes into
// them, names the object with the next id of the lease's block (blob bit
// cleared), counts the request in the pin page and writes it: no reply is
// awaited, so the put costs a copy and a write instead of a round trip. The
// daemon handles the request in order with the connection's others, so
// this client's later requests see the object; another process that learns
// the id and asks the daemon before it read the request finds the daemon
// waiting for it (store.Session.Visible). A failure comes back as a
// protocol.PipelinedError frame ahead of the next reply; CreateInline
// returns it from the next put (takePutErrorLocked), whether or not
// the pipeline is on then. Every syncEvery-th put
// waits for its reply, so failures are read at least that often.

const (
	// syncEvery: one put in this many waits for its reply. 256, not 64:
	// each wait idles the client while the daemon catches up, and at 64 the
	// put + get loop ran 5-8% slower at 1, 2 and 4 clients (means of three
	// rounds; docs/performance.md, "December 5, night"). The daemon's
	// failure frames (id, code and a message of under 250 bytes) of 256
	// puts take about a third of a socket's default 208 KiB buffer.
	syncEvery = 256
	// leasePuts: a small put's lease holds this many puts of its size.
	leasePuts = 64
	// pipelinedLease bounds the lease a pipelined put asks for beyond two
	// puts of its size (see leaseWant).
	pipelinedLease = 4 << 20
	// maxPipelinedTree bounds the tree of a pipelined put: a larger frame
	// is read by the daemon through its request budget, which may refuse
	// it with an ordinary error reply.
	maxPipelinedTree = 16 << 10
)

// afterPipelinedWrite, when set (tests), runs once a pipelined put was
// written, before it returns.
var afterPipelinedWrite func(id ids.ObjectID)

// putError is a failure of a pipelined put, read ahead of a reply.
type putError struct {
	id    ids.ObjectID
	err   error
	count int // failures in all since the last one was returned
}

// notePipelinedError records the PipelinedError frame body. c.mu must
// be held.
func (w *wire) notePipelinedError(body []byte) error {
	var pe protocol.PipelinedError
	if err := json.Unmarshal(body, &pe); err != nil {
		return errBadReply("malformed pipelined_error frame: %v", err)
	}
	if w.putErr == nil {
		w.putErr = &putError{id: pe.ID, err: status.Errorf(pe.Code, "%s", pe.Message)}
	}
	w.putErr.count++
	return nil
}

// takePutError returns (once) the failure of an earlier pipelined
// put, nil if none. c.mu must be held.
func (w *wire) takePutError() error {
	pe := w.putErr
	if pe == nil {
		return nil
	}
	w.putErr = nil
	more := ""
	if pe.count > 1 {
		more = fmt.Sprintf(" (and %d more puts failed)", pe.count-1)
	}
	return status.Errorf(status.CodeOf(pe.err),
		"an earlier put, of object %v, failed after it returned%s: %s", pe.id, more, status.AsError(pe.err).Message)
}

// pipeline is the pipelined-put accelerator (put), and it waits for its
// puts in flight when a get misses (settle). Its fields are guarded by
// Client.mu.
type pipeline struct {
	plain
	c     *Client
	lease *leaser
	own   *ownPuts // gets of these puts (ownput.go); nil: off
	// How many puts were written since the exchange numbered at (the
	// client's exchanges): the reply of one in syncEvery is read.
	since int
	at    uint64
	// verdict is what the last put's tree allows (verdict).
	verdict treeVerdict
	// A put's request and blob triples, reused: both are encoded into
	// Client.wbuf before the put returns and never read after it (the
	// request points at the last put's tree until the next put
	// overwrites it).
	req     protocol.CreateDataRequest
	triples []uint64
}

// leaseWant is the lease a pipelined put of total bytes asks for when its
// lease is short: leasePuts puts (small puts), at most pipelinedLease bytes,
// and never less than two puts (leaseFactor).
func leaseWant(total uint64) uint64 {
	return max(min(leasePuts*total, pipelinedLease), leaseFactor*total)
}

// sinceSync returns how many puts were written since the last exchange.
func (p *pipeline) sinceSync() int {
	if p.at != p.c.w.exchanges {
		p.since, p.at = 0, p.c.w.exchanges
	}
	return p.since
}

// put is CreateInline through the lease: the blobs are carved and written
// here and the object named with an id of the lease, in one request that,
// unless a reply is due (syncEvery), is pipelined, with the releases the
// client deferred ahead of it. It declines a put that cannot go that way
// (no pin page, an empty blob, a large tree or one the daemon may refuse,
// buffers carved and not yet named): the plain inline put runs.
func (p *pipeline) put(tree []byte, data [][]byte) (id ids.ObjectID, bids []ids.ObjectID, ok bool, err error) {
	c, l := p.c, p.lease
	if len(tree) > maxPipelinedTree || len(l.pending) > 0 || len(data) >= leaseIDsLow {
		return 0, nil, false, nil
	}
	v := p.verdictFor(tree, len(data))
	if !v.pipelineable {
		return 0, nil, false, nil
	}
	var total uint64
	for _, d := range data {
		if len(d) == 0 {
			return 0, nil, false, nil // the empty blob is never leased
		}
		total += roundUp(uint64(len(d)))
	}
	c.state.Lock()
	var pins *shm.PinView
	if c.state.dir != nil && !c.state.dir.lost {
		pins = c.state.dir.pins
	}
	c.state.Unlock()
	if pins == nil {
		return 0, nil, false, nil
	}
	// A lease holds leasePuts puts of this size, at most pipelinedLease
	// bytes unless two puts need more: renewing it (a round trip) costs one
	// put in leasePuts at most for small puts, and a client of medium puts
	// reuses the memory its deleted puts freed instead of walking through a
	// lease of memory it never mapped (docs/performance.md, "Medium puts").
	a, ok, err := l.ensure(total, uint64(len(data))+1, leaseWant(total), total >= fillChunk)
	if !ok || err != nil {
		return 0, nil, false, err
	}
	triples := p.triples[:0]
	bids = make([]ids.ObjectID, len(data))
	for i, d := range data {
		size := uint64(len(d))
		rw, err := a.view(l.off, size, true)
		if err != nil {
			return 0, nil, false, err
		}
		fillBlob(rw, d)
		bids[i] = l.next
		triples = append(triples, uint64(l.next), l.off, size)
		l.off += roundUp(size)
		l.next++
		l.ids--
	}
	if total >= fillChunk {
		// As a create does: the blobs' end is noted and the pre-touch of
		// what the daemon pre-faulted above them starts, for the next
		// large puts (pretouch.go).
		a.pretouch(l.off)
	}
	id = l.next &^ ids.BlobBit
	l.next++
	l.ids--
	p.triples = triples
	req := &p.req
	*req = protocol.CreateDataRequest{Content: tree, LeaseBlobs: triples, ID: id}
	if p.sinceSync()+1 >= syncEvery {
		var reply protocol.CreateDataReply
		if err := c.callLocked(req, &reply); err != nil {
			return 0, nil, true, err
		}
		if reply.ID != id {
			return 0, nil, true, errBadReply("create_data with id %v created %v", id, reply.ID)
		}
		return id, bids, true, nil
	}
	req.Pipelined = true
	// Releases the client deferred go ahead, as with any request; their
	// acknowledgements are read before the next exchange's (unacked).
	c.state.Lock()
	c.state.validateCacheLocked()
	rel := c.state.takeReleasesLocked()
	c.state.Unlock()
	ahead := c.ext.releaseRequests(rel)
	c.w.wbuf = c.w.wbuf[:0]
	for _, r := range append(ahead, req) {
		if err := c.w.encode(r); err != nil {
			return 0, nil, true, status.Errorf(status.Invalid, "encode %s: %v", r.RequestType(), err)
		}
	}
	c.w.unacked = append(c.w.unacked, ahead...)
	seq := pins.Submit() // before the write: a reader that learns the id waits for it
	if _, err := c.w.conn.Write(c.w.wbuf); err != nil {
		return 0, nil, true, c.w.lose(err)
	}
	if afterPipelinedWrite != nil {
		afterPipelinedWrite(id)
	}
	p.since++
	if p.own != nil {
		c.state.Lock()
		p.own.note(id, seq, v, triples) // a get of it needs no daemon (ownput.go)
		c.state.Unlock()
	}
	return id, bids, true, nil
}

// treeVerdict is what pipelineable and ownTreeable said of a tree put with
// n blobs. tree is the verdict's own copy, never written: own puts share it.
type treeVerdict struct {
	tree         []byte
	n            int
	pipelineable bool
	own          *ownShape // for gets of own puts (ownput.go); nil when ownTreeable refuses
}

// verdictFor returns the verdict on tree for a put of n blobs. Both
// checks scan the whole tree, about a microsecond of a small put's ten, and
// a program's puts of small arrays send one tree text per dtype and shape
// (the Python client caches it), so the last verdict is kept and reused
// while the tree and n are the same. c.mu must be held.
func (p *pipeline) verdictFor(tree []byte, n int) *treeVerdict {
	v := &p.verdict
	if v.n == n && v.tree != nil && bytes.Equal(v.tree, tree) {
		return v
	}
	*v = treeVerdict{tree: slices.Clone(tree), n: n, pipelineable: pipelineable(tree, n, 0)}
	if v.pipelineable && p.own != nil && ownTreeable(tree, n) {
		v.own = &ownShape{tree: v.tree}
	}
	return v
}

// Limits of the daemon's tree builder (store/meta.go) that pipelineable
// applies, conservatively.
const (
	maxTypenameBytes  = 1024
	maxPipelinedDepth = 64
	blobTypename      = "vineyard::Blob"
)

// pipelineable reports whether the daemon accepts tree as the tree of a
// put of n blobs, as far as the tree alone tells: every object has a plain
// typename (not a blob's), and every member object is {"inline": i} for one
// of the n blobs or a new object, at most maxPipelinedDepth deep. A member
// that links an existing object by id is not: the object may be gone when
// the daemon reads the put, so such a put waits for its reply. Repeated
// keys are all checked (the daemon keeps the last).
func pipelineable(tree []byte, n, depth int) bool {
	if depth > maxPipelinedDepth {
		return false
	}
	typename, ok := false, true
	err := jsonscan.ObjectFieldBytes(tree, func(key, raw []byte) error {
		switch {
		case string(key) == "typename":
			typename = plainTypename(raw)
			ok = ok && typename
		case len(raw) > 0 && raw[0] == '{':
			ok = ok && pipelineableMember(raw, n, depth)
		}
		return nil
	})
	return err == nil && ok && typename
}

// pipelineableMember is pipelineable for the member object raw.
func pipelineableMember(raw []byte, n, depth int) bool {
	var inline, id []byte
	_ = jsonscan.ObjectFieldBytes(raw, func(key, v []byte) error {
		switch string(key) {
		case "inline":
			inline = v
		case "id":
			id = v
		}
		return nil
	})
	if inline != nil {
		i, err := strconv.Atoi(string(inline))
		return err == nil && i >= 0 && i < n
	}
	return id == nil && pipelineable(raw, n, depth+1)
}

// plainTypename reports whether raw is a JSON string of plain ASCII, not
// empty, not too long and not a blob's typename.
func plainTypename(raw []byte) bool {
	n := len(raw)
	if n < 3 || n-2 > maxTypenameBytes || raw[0] != '"' || raw[n-1] != '"' {
		return false
	}
	for _, c := range raw[1 : n-1] {
		if c < 0x20 || c >= 0x80 || c == '\\' || c == '"' {
			return false
		}
	}
	return string(raw[1:n-1]) != blobTypename
}

// ownPutSlice bounds one sleep of settle between looks at whether
// the daemon is still there.
const ownPutSlice = 20 * time.Millisecond

// settle waits until the daemon has handled this client's pipelined
// puts, when some are in flight, and reports whether it waited and they are
// all handled. A get that the directory could not answer may be of one of
// them, which the daemon publishes as it handles it: the directory is then
// worth a second look, and the get needs no round trip (which would have
// waited behind those puts all the same). The client sleeps on the pin
// page's handled futex (shm.PinView.BeginWait), at most for its timeout,
// and not at all once the daemon is gone or no longer honours the page.
// c.state is held except during the sleep, which needs no mapping; a page
// unmapped meanwhile (Close) ends the wait. Callers hold no lock.
func (p *pipeline) settle() bool {
	c := p.c
	timeout := time.Duration(c.timeout.Load())
	start := time.Now()
	c.state.Lock()
	defer c.state.Unlock()
	d := c.state.dir
	if d == nil {
		return false
	}
	target := d.pins.Submitted()
	if d.pins.Handled() >= target {
		return false
	}
	for {
		addr, val, done := d.pins.BeginWait(target)
		if done {
			return true
		}
		c.state.Unlock()
		shm.SleepHandled(addr, val, ownPutSlice)
		c.state.Lock()
		if c.state.dir != d {
			return false // closed meanwhile: the waiting word went with the page
		}
		d.pins.EndWait()
		if d.lost || d.view.Life() != shm.LifeAlive || d.pins.Revoked() || timeout > 0 && time.Since(start) > timeout {
			return false
		}
	}
}
