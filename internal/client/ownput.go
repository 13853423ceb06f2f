package client

import (
	"slices"
	"strconv"
	"strings"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/jsonscan"
	"github.com/v6d-io/v6d-go/internal/jsontext"
	"github.com/v6d-io/v6d-go/internal/shm"
)

// Gets of one's own pipelined puts (docs/design.md, "Pipelined puts"). A
// client that gets an object it has just put, before the daemon read the
// put, would wait for the daemon (pipeline.settle): a wake-up of the daemon and
// one back, most of such a put+get's cost. But the client knows all of that
// object: the tree the daemon makes of a put is a function of what the put
// says (CreateLeased: the id and signature are the root's value, the
// instance is the daemon's), and its blobs lie in memory the client wrote.
// So a get of such an object is answered from the put itself, and pinned
// like a directory get: the pin slot names the id before the client loads
// the handled count (shm.PinView.Handled). Either the count is still below
// the put's, and then the daemon has not handled it: no delete can have
// freed the blobs (another connection's delete of an id it does not know
// waits for the puts in flight, store.AwaitPipelined; this client's own
// come after the put), and the delete that comes later reads the pin page
// after the daemon stored the count (both under the store's lock), so it
// sees the pin and holds the blobs. Or the count reached the put's, and the
// get looks in the directory, as any other. A put the daemon refuses after
// such a get has its blobs held while the pin lasts
// (store.Session.holdFailedLocked), and the failure comes back from the next
// put, as any pipelined put's.
//
// Only trees whose tree the client can rebuild byte for byte are answered
// this way (ownTemplate): one object whose members are all blobs of the put,
// keys of plain ASCII. TestOwnTreeIsTheDaemons checks the rebuild against
// the daemon's for trees of every shape the rules touch.

// ownPut is a pipelined put of this client, perhaps not yet handled.
type ownPut struct {
	seq   uint64        // the submitted count that includes it
	shape *ownShape     // its tree as sent, shared with the puts of the same text
	blobs []shm.DirBlob // its blobs, in the order {"inline": i} counts them
}

// ownShape is a tree text that pipelined puts sent (treeVerdict), and the
// template of the tree the daemon makes of it, made at the first get of
// such a put: the puts of one text differ only in their ids and blob sizes.
// tmpl and bad are guarded by c.state.
type ownShape struct {
	tree []byte // the client's copy, never written
	tmpl *ownTemplate
	bad  bool // newOwnTemplate refused the text
}

// ownPuts is the accelerator of gets of this client's pipelined puts
// that the daemon may not have handled yet. The pipeline notes each put
// (note); get answers from them. Its fields are guarded by Client.state.
type ownPuts struct {
	plain
	c    *Client
	dir  *directory // pins what get answers, and answers once handled
	puts map[ids.ObjectID]*ownPut
}

// maxOwnPuts bounds the puts remembered, and so the prune each put makes
// (prune walks them all). The daemon is rarely more than a few puts
// behind; a get of a put past the bound waits for the daemon, as one from
// another process does.
const maxOwnPuts = 128

// note remembers a pipelined put just written, whose tree v judged
// (pipeline.verdictFor), and forgets those the daemon handled. c.state
// must be held.
func (o *ownPuts) note(id ids.ObjectID, seq uint64, v *treeVerdict, triples []uint64) {
	d := o.c.dir
	if d == nil {
		return
	}
	o.prune(d.pins.Handled())
	if len(o.puts) >= maxOwnPuts || v.own == nil {
		return
	}
	op := &ownPut{seq: seq, shape: v.own, blobs: make([]shm.DirBlob, len(triples)/3)}
	for i := range op.blobs {
		op.blobs[i] = shm.DirBlob{ID: triples[3*i], Offset: triples[3*i+1], Size: triples[3*i+2]}
	}
	if o.puts == nil {
		o.puts = map[ids.ObjectID]*ownPut{}
	}
	o.puts[id] = op
}

// prune forgets the puts the daemon handled: handled is its count.
// c.state must be held.
func (o *ownPuts) prune(handled uint64) {
	for id, op := range o.puts {
		if op.seq <= handled {
			delete(o.puts, id)
		}
	}
}

// get answers a get of id from a put of this client that the daemon has
// not handled, pinned as the directory pins (the put's number checked
// against the handled count once id is pinned). A put of id the daemon
// handled since (forgotten now) is in the directory, which missed it a
// moment before: the directory answers. c.state must be held.
func (o *ownPuts) get(id ids.ObjectID, pin bool) ([]byte, []ids.ObjectID, bool) {
	c := o.c
	op, ok := o.puts[id]
	if !ok || c.dir == nil {
		return nil, nil, false
	}
	if c.dir.pins.Handled() >= op.seq {
		delete(o.puts, id)
		return o.dir.get(id, pin)
	}
	sh := op.shape
	if sh.tmpl == nil && !sh.bad {
		sh.tmpl, ok = newOwnTemplate(sh.tree, c.instanceID, len(op.blobs))
		sh.bad = !ok
	}
	if sh.bad {
		delete(o.puts, id)
		return nil, nil, false
	}
	rec := shm.Record{Tree: sh.tmpl.render(id, op.blobs), Blobs: op.blobs}
	if !pin {
		return rec.Tree, nil, true
	}
	return o.dir.pin(id, rec, op.seq, 0, 0)
}

// ownTreeable reports whether newOwnTemplate can rebuild the tree of a put of n
// blobs: an object of plain keys whose members are all {"inline": i}.
func ownTreeable(tree []byte, n int) bool {
	ok := true
	err := jsonscan.ObjectFieldBytes(tree, func(key, raw []byte) error {
		ok = ok && plainKey(key)
		if ok && len(raw) > 0 && raw[0] == '{' {
			_, ok = inlineIndex(raw, n)
		}
		return nil
	})
	return err == nil && ok
}

// inlineIndex returns i of the member {"inline": i} (that key alone, plain
// digits, below n).
func inlineIndex(raw []byte, n int) (int, bool) {
	i, keys := -1, 0
	err := jsonscan.ObjectFieldBytes(raw, func(key, v []byte) error {
		keys++
		if string(key) == "inline" && len(v) > 0 && v[0] >= '0' && v[0] <= '9' {
			if x, err := strconv.Atoi(string(v)); err == nil {
				i = x
			}
		}
		return nil
	})
	return i, err == nil && keys == 1 && i >= 0 && i < n
}

// plainKey: printable ASCII that JSON and Go quote alike, unescaped.
func plainKey(key []byte) bool {
	for _, c := range key {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// ownTemplate is the tree the daemon makes of a leased put of one tree
// text (store.Session.CreateLeased), for one instance and blob count: its
// scalar fields sorted by key (of a repeated key the last one), with id,
// signature (unless given: the id's value), instance_id, transient and
// nbytes (unless given: 0) set as the daemon sets them, then its members
// in key order, each the tree of its blob. It is cut where puts of that
// text differ (ids, blob sizes): lits[i] comes before holes[i],
// and the last of lits ends the tree. Rendering one is a few appends;
// making it sorts and scans the tree (3-4 µs of a get of one's own put).
type ownTemplate struct {
	lits  [][]byte
	holes []ownHole
	size  int // bytes of lits, and room for the holes
}

// ownHole is what a hole of an ownTemplate takes: the object's id (quoted)
// or signature, or a blob's id or size.
type ownHole struct {
	kind int
	blob int
}

const (
	holeID = iota
	holeSignature
	holeBlobID
	holeBlobSize
)

// newOwnTemplate makes the template of tree for puts of n blobs; false for
// a tree ownTreeable refuses.
func newOwnTemplate(tree []byte, instance uint64, n int) (*ownTemplate, bool) {
	type field struct {
		key  string
		raw  []byte
		hole int // with raw nil: the hole of the value
	}
	var all []field
	ok := true
	if jsonscan.ObjectFieldBytes(tree, func(key, raw []byte) error {
		ok = ok && plainKey(key)
		all = append(all, field{key: string(key), raw: raw})
		return nil
	}) != nil || !ok {
		return nil, false
	}
	slices.SortStableFunc(all, func(a, b field) int { return strings.Compare(a.key, b.key) })
	var fields, members []field
	for i, f := range all {
		switch {
		case i+1 < len(all) && all[i+1].key == f.key: // a later value counts
		case len(f.raw) > 0 && f.raw[0] == '{':
			members = append(members, f)
		default:
			fields = append(fields, f)
		}
	}
	set := func(f field, keep bool) {
		i, found := slices.BinarySearchFunc(fields, f.key, func(g field, k string) int { return strings.Compare(g.key, k) })
		switch {
		case found && keep:
		case found:
			fields[i] = f
		default:
			fields = slices.Insert(fields, i, f)
		}
	}
	set(field{key: "id", hole: holeID}, false)
	set(field{key: "signature", hole: holeSignature}, true)
	set(field{key: "instance_id", raw: strconv.AppendUint(nil, instance, 10)}, false)
	set(field{key: "transient", raw: []byte("true")}, false)
	set(field{key: "nbytes", raw: []byte("0")}, true)
	t := &ownTemplate{}
	var lit []byte
	hole := func(h ownHole) {
		t.lits, t.holes, t.size = append(t.lits, lit), append(t.holes, h), t.size+len(lit)+24
		lit = nil
	}
	lit = append(lit, '{')
	for i, f := range fields {
		if i > 0 {
			lit = append(lit, ',')
		}
		lit = append(jsontext.AppendString(lit, f.key), ':')
		if f.raw == nil {
			hole(ownHole{kind: f.hole})
		} else {
			lit = append(lit, f.raw...)
		}
	}
	for _, m := range members {
		i, ok := inlineIndex(m.raw, n)
		if !ok {
			return nil, false
		}
		lit = append(strconv.AppendQuote(append(lit, ','), m.key), ':')
		lit = append(lit, `{"id":"`...)
		hole(ownHole{kind: holeBlobID, blob: i})
		lit = append(lit, `","typename":"vineyard::Blob","length":`...)
		hole(ownHole{kind: holeBlobSize, blob: i})
		lit = append(lit, `,"nbytes":`...)
		hole(ownHole{kind: holeBlobSize, blob: i})
		lit = append(lit, `,"instance_id":`...)
		lit = strconv.AppendUint(lit, instance, 10)
		lit = append(lit, `,"transient":true}`...)
	}
	lit = append(lit, '}')
	t.lits, t.size = append(t.lits, lit), t.size+len(lit)
	return t, true
}

// render is the daemon's tree of the put of the template's text as id with
// blobs (as many as the template was made for).
func (t *ownTemplate) render(id ids.ObjectID, blobs []shm.DirBlob) []byte {
	out := make([]byte, 0, t.size)
	for i, h := range t.holes {
		out = append(out, t.lits[i]...)
		switch h.kind {
		case holeID:
			out = append(id.AppendText(append(out, '"')), '"')
		case holeSignature:
			out = strconv.AppendUint(out, uint64(id), 10)
		case holeBlobID:
			out = ids.ObjectID(blobs[h.blob].ID).AppendText(out)
		case holeBlobSize:
			out = strconv.AppendUint(out, blobs[h.blob].Size, 10)
		}
	}
	return append(out, t.lits[len(t.holes)]...)
}
