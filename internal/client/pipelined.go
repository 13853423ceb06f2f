package client

import (
	"encoding/json"
	"fmt"
	"strconv"

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
// waiting for it (AwaitPipelined). A failure comes back as a
// protocol.PipelinedError frame ahead of the next reply; CreateInline
// returns it from the next put (takePutErrorLocked). Every syncEvery-th put
// waits for its reply, so failures are read at least that often.

const (
	// syncEvery: one put in this many waits for its reply.
	syncEvery = 64
	// maxPipelinedTree bounds the tree of a pipelined put: a larger frame
	// is read by the daemon through its request budget, which may refuse
	// it with an ordinary error reply.
	maxPipelinedTree = 16 << 10
)

// beforePipelinedWrite, when set (tests), runs between counting a pipelined
// put and writing it.
var beforePipelinedWrite func(id ids.ObjectID)

// putError is a failure of a pipelined put, read ahead of a reply.
type putError struct {
	id    ids.ObjectID
	err   error
	count int // failures in all since the last one was returned
}

// notePipelinedErrorLocked records the PipelinedError frame body. c.mu must
// be held.
func (c *Client) notePipelinedErrorLocked(body []byte) error {
	var pe protocol.PipelinedError
	if err := json.Unmarshal(body, &pe); err != nil {
		return errBadReply("malformed pipelined_error frame: %v", err)
	}
	if c.putErr == nil {
		c.putErr = &putError{id: pe.ID, err: status.Errorf(pe.Code, "%s", pe.Message)}
	}
	c.putErr.count++
	return nil
}

// takePutErrorLocked returns (once) the failure of an earlier pipelined
// put, nil if none. c.mu must be held.
func (c *Client) takePutErrorLocked() error {
	pe := c.putErr
	if pe == nil {
		return nil
	}
	c.putErr = nil
	more := ""
	if pe.count > 1 {
		more = fmt.Sprintf(" (and %d more puts failed)", pe.count-1)
	}
	return status.Errorf(status.CodeOf(pe.err),
		"an earlier put, of object %v, failed after it returned%s: %s", pe.id, more, status.AsError(pe.err).Message)
}

// createLeased is CreateInline through the lease: the blobs are carved and
// written here and the object named with an id of the lease, in one request
// that, unless a reply is due (syncEvery, or releases to send first), is
// pipelined. ok is false when this put cannot go that way (no lease or pin
// page, an empty blob, a large tree or one the daemon may refuse, buffers
// carved and not yet named): the caller puts the old way. c.mu must be held.
func (c *Client) createLeasedLocked(tree []byte, data [][]byte) (id ids.ObjectID, bids []ids.ObjectID, ok bool, err error) {
	if !c.ext.pipelined || !c.ext.lease || c.remote || len(tree) == 0 || len(tree) > maxPipelinedTree ||
		len(c.lease.pending) > 0 || len(data) >= leaseIDsLow || !pipelineable(tree, len(data), 0) {
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
	if c.dir != nil && !c.dir.lost {
		pins = c.dir.pins
	}
	queued := len(c.pending) > 0
	c.state.Unlock()
	if pins == nil {
		return 0, nil, false, nil
	}
	a, ok, err := c.ensureLeaseLocked(total, uint64(len(data))+1)
	if !ok || err != nil {
		return 0, nil, false, err
	}
	l := &c.lease
	triples := make([]uint64, 0, 3*len(data))
	bids = make([]ids.ObjectID, len(data))
	for i, d := range data {
		size := uint64(len(d))
		rw, err := a.view(l.off, size, true)
		if err != nil {
			return 0, nil, false, err
		}
		copy(rw, d)
		bids[i] = l.next
		triples = append(triples, uint64(l.next), l.off, size)
		l.off += roundUp(size)
		l.next++
		l.ids--
	}
	id = l.next &^ ids.BlobBit
	l.next++
	l.ids--
	a.pretouch(l.off)
	req := &protocol.CreateDataRequest{Content: tree, LeaseBlobs: triples, ID: id}
	if c.sincePipelineSync+1 >= syncEvery || queued {
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
	c.wbuf = c.wbuf[:0]
	if err := c.encode(req); err != nil {
		return 0, nil, true, status.Errorf(status.Invalid, "encode create_data: %v", err)
	}
	pins.Submit() // before the write: a reader that learns the id waits for it
	if beforePipelinedWrite != nil {
		beforePipelinedWrite(id)
	}
	if _, err := c.conn.Write(c.wbuf); err != nil {
		return 0, nil, true, c.loseLocked(err)
	}
	c.sincePipelineSync++
	return id, bids, true, nil
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
