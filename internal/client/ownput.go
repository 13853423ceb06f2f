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
// put, would wait for the daemon (awaitOwnPuts): a wake-up of the daemon and
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
// this way (ownTree): one object whose members are all blobs of the put,
// keys of plain ASCII. TestOwnTreeIsTheDaemons checks the rebuild against
// the daemon's for trees of every shape the rules touch.

// ownPut is a pipelined put of this client, perhaps not yet handled.
type ownPut struct {
	seq   uint64        // the submitted count that includes it
	tree  []byte        // its tree as sent (the client's copy, shared with others and the verdict; never written)
	blobs []shm.DirBlob // its blobs, in the order {"inline": i} counts them
}

// maxOwnPuts bounds the puts remembered: every syncEvery-th put waits for
// its reply, after which all earlier ones are handled.
const maxOwnPuts = 2 * syncEvery

// noteOwnPutLocked remembers a pipelined put just written, whose tree v
// judged (verdictLocked), and forgets those the daemon handled. c.state
// must be held.
func (c *Client) noteOwnPutLocked(id ids.ObjectID, seq uint64, v *treeVerdict, triples []uint64) {
	d := c.dir
	if d == nil {
		return
	}
	c.pruneOwnPutsLocked(d.pins.Handled())
	if len(c.ownPuts) >= maxOwnPuts || !v.ownTreeable {
		return
	}
	op := &ownPut{seq: seq, tree: v.tree, blobs: make([]shm.DirBlob, len(triples)/3)}
	for i := range op.blobs {
		op.blobs[i] = shm.DirBlob{ID: triples[3*i], Offset: triples[3*i+1], Size: triples[3*i+2]}
	}
	if c.ownPuts == nil {
		c.ownPuts = map[ids.ObjectID]*ownPut{}
	}
	c.ownPuts[id] = op
}

// pruneOwnPutsLocked forgets the puts the daemon handled: handled is its
// count. c.state must be held.
func (c *Client) pruneOwnPutsLocked(handled uint64) {
	for id, op := range c.ownPuts {
		if op.seq <= handled {
			delete(c.ownPuts, id)
		}
	}
}

// ownGetLocked answers a get of id from a put of this client that the
// daemon has not handled: its record, and the put's sequence number, which
// the caller checks against the handled count once it pinned id. handled
// reports a put of id the daemon handled since (forgotten now): the
// directory, which missed it a moment before, has it. c.state must be held.
func (c *Client) ownGetLocked(id ids.ObjectID) (rec shm.Record, seq uint64, ok, handled bool) {
	op, ok := c.ownPuts[id]
	if !ok {
		return shm.Record{}, 0, false, false
	}
	if c.dir.pins.Handled() >= op.seq {
		delete(c.ownPuts, id)
		return shm.Record{}, 0, false, true
	}
	tree, ok := ownTree(op.tree, id, c.instanceID, op.blobs)
	if !ok {
		delete(c.ownPuts, id)
		return shm.Record{}, 0, false, false
	}
	return shm.Record{Tree: tree, Blobs: op.blobs}, op.seq, true, false
}

// ownTreeable reports whether ownTree can rebuild the tree of a put of n
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

// ownTree is the tree the daemon makes of a leased put of tree as id
// (store.Session.CreateLeased): its scalar fields sorted by key (of a
// repeated key the last one), with id, signature (unless given: the id's
// value), instance_id, transient and nbytes (unless given: 0) set as the
// daemon sets them, then its members in key order, each the tree of its
// blob. It reports false for a tree ownTreeable refuses.
func ownTree(tree []byte, id ids.ObjectID, instance uint64, blobs []shm.DirBlob) ([]byte, bool) {
	type field struct {
		key string
		raw []byte
	}
	var all []field
	ok := true
	if jsonscan.ObjectFieldBytes(tree, func(key, raw []byte) error {
		ok = ok && plainKey(key)
		all = append(all, field{string(key), raw})
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
	set := func(key string, raw []byte, keep bool) {
		i, found := slices.BinarySearchFunc(fields, key, func(f field, k string) int { return strings.Compare(f.key, k) })
		switch {
		case found && keep:
		case found:
			fields[i].raw = raw
		default:
			fields = slices.Insert(fields, i, field{key, raw})
		}
	}
	set("id", strconv.AppendQuote(nil, id.String()), false)
	set("signature", strconv.AppendUint(nil, uint64(id), 10), true)
	set("instance_id", strconv.AppendUint(nil, instance, 10), false)
	set("transient", []byte("true"), false)
	set("nbytes", []byte("0"), true)
	out := make([]byte, 0, len(tree)+160*len(members)+64)
	out = append(out, '{')
	for i, f := range fields {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(jsontext.AppendString(out, f.key), ':')
		out = append(out, f.raw...)
	}
	for _, m := range members {
		i, ok := inlineIndex(m.raw, len(blobs))
		if !ok {
			return nil, false
		}
		b := blobs[i]
		out = append(strconv.AppendQuote(append(out, ','), m.key), ':')
		out = append(out, `{"id":"`...)
		out = ids.ObjectID(b.ID).AppendText(out)
		out = append(out, `","typename":"vineyard::Blob","length":`...)
		out = strconv.AppendUint(out, b.Size, 10)
		out = append(out, `,"nbytes":`...)
		out = strconv.AppendUint(out, b.Size, 10)
		out = append(out, `,"instance_id":`...)
		out = strconv.AppendUint(out, instance, 10)
		out = append(out, `,"transient":true}`...)
	}
	return append(out, '}'), true
}
