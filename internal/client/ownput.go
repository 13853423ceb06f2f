package client

import (
	"slices"
	"strconv"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/jsonscan"
	"github.com/v6d-io/v6d-go/internal/shm"
	"github.com/v6d-io/v6d-go/internal/tree"
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
// waits for the puts in flight, store.Session.Visible; this client's own
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
// written by internal/tree as the daemon writes it. TestOwnTreeIsTheDaemons
// checks the rebuild against the daemon's for trees of every shape the
// rules touch.

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
	d := o.c.state.dir
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
	if !ok || c.state.dir == nil {
		return nil, nil, false
	}
	if c.state.dir.pins.Handled() >= op.seq {
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
	rec := shm.Record{Tree: sh.tmpl.render(id, op.blobs), Blobs: op.blobs} // no shape number: the daemon has not seen it
	if !pin {
		c.state.dir.shape = 0
		return rec.Tree, nil, true
	}
	return o.dir.pin(id, rec, op.seq, 0, 0)
}

// ownTreeable reports whether newOwnTemplate can rebuild the tree of a put of n
// blobs: an object, text the daemon takes (tree.CheckText), whose members
// are all {"inline": i}.
func ownTreeable(text []byte, n int) bool {
	ok := true
	err := jsonscan.ObjectFieldBytes(text, func(key, raw []byte) error {
		if ok && len(raw) > 0 && raw[0] == '{' {
			_, ok = inlineIndex(raw, n)
		}
		return nil
	})
	return err == nil && ok && tree.CheckText(text) == nil
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
	lits     [][]byte
	holes    []ownHole
	size     int    // bytes of lits, and room for the holes
	instance uint64 // the daemon's, in the blobs' trees
}

// ownHole is what a hole of an ownTemplate takes: the object's id (quoted)
// or signature, or a blob's tree.
type ownHole struct {
	kind int
	blob int
}

const (
	holeID = iota
	holeSignature
	holeBlob
)

// newOwnTemplate makes the template of text for puts of n blobs; false for
// a text ownTreeable refuses. Its fields are split, ordered and quoted by
// internal/tree, as the store's are.
func newOwnTemplate(text []byte, instance uint64, n int) (*ownTemplate, bool) {
	var all []tree.Field
	if jsonscan.ObjectFieldBytes(text, func(key, raw []byte) error {
		all = append(all, tree.Field{Key: string(key), Raw: raw})
		return nil
	}) != nil || tree.CheckText(text) != nil {
		return nil, false
	}
	fields, members := tree.Split(all)
	tree.Canon(fields)
	// The fields the daemon sets; a nil value is a hole: id's or
	// signature's.
	set := func(key string, raw []byte, keep bool) {
		i, found := tree.Find(fields, key)
		switch {
		case found && keep:
		case found:
			fields[i].Raw = raw
		default:
			fields = slices.Insert(fields, i, tree.Field{Key: key, Raw: raw})
		}
	}
	set("id", nil, false)
	set("signature", nil, true)
	set("instance_id", strconv.AppendUint(nil, instance, 10), false)
	set("transient", []byte("true"), false)
	set("nbytes", []byte("0"), true)
	t := &ownTemplate{}
	var lit []byte
	hole := func(h ownHole) {
		t.lits, t.holes, t.size = append(t.lits, lit), append(t.holes, h), t.size+len(lit)+160
		lit = nil
	}
	lit = append(lit, '{')
	for i, f := range fields {
		lit = tree.AppendFieldKey(lit, i, f.Key)
		switch {
		case f.Raw != nil:
			lit = append(lit, f.Raw...)
		case f.Key == "id":
			hole(ownHole{kind: holeID})
		default:
			hole(ownHole{kind: holeSignature})
		}
	}
	for i, m := range members {
		b, ok := inlineIndex(m.Raw, n)
		if !ok || tree.IsDaemonField(m.Key) { // the daemon refuses it
			return nil, false
		}
		lit = tree.AppendFieldKey(lit, len(fields)+i, m.Key)
		hole(ownHole{kind: holeBlob, blob: b})
	}
	lit = append(lit, '}')
	t.lits, t.size = append(t.lits, lit), t.size+len(lit)
	t.instance = instance
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
		case holeBlob:
			b := blobs[h.blob]
			out = tree.AppendBlob(out, ids.ObjectID(b.ID), b.Size, t.instance)
		}
	}
	return append(out, t.lits[len(t.holes)]...)
}
