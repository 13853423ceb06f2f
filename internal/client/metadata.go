package client

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/jsonscan"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
)

// CreateMetadata creates an object from a metadata tree (a JSON object with a
// "typename"; members are nested trees: with an "id", existing objects; without,
// new objects created with it) in one round trip. The blobs of seal, which
// this client created, are sealed first in the same round trip (the empty
// blob is skipped); each then holds a reference, as after Seal, which
// Release(id) drops (as does Release of each blob). It returns the new id and
// the stored tree, which the caller owns.
func (c *Client) CreateMetadata(tree []byte, seal []ids.ObjectID) (ids.ObjectID, json.RawMessage, error) {
	return c.create(tree, seal, true)
}

// Create is CreateMetadata without the stored tree, which then never crosses
// the socket: what a put needs.
func (c *Client) Create(tree []byte, seal []ids.ObjectID) (ids.ObjectID, error) {
	id, _, err := c.create(tree, seal, false)
	return id, err
}

func (c *Client) create(tree []byte, seal []ids.ObjectID, withTree bool) (ids.ObjectID, json.RawMessage, error) {
	if !jsonscan.Valid(tree) {
		return 0, nil, status.Errorf(status.MetaTreeInvalid, "metadata is not valid JSON")
	}
	toSeal := make([]ids.ObjectID, 0, len(seal))
	seen := make(map[ids.ObjectID]bool, len(seal))
	for _, id := range seal {
		if id != ids.EmptyBlob && !seen[id] {
			seen[id] = true
			toSeal = append(toSeal, id)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.d.create(tree, toSeal, withTree)
}

// create is the create of ours: create_data, which seals the blobs it
// names first, in one round trip.
func (o ours) create(tree []byte, toSeal []ids.ObjectID, withTree bool) (ids.ObjectID, json.RawMessage, error) {
	c := o.c
	last, err := o.sealAheadLocked(toSeal)
	if err != nil {
		return 0, nil, err
	}
	var reply protocol.CreateDataReply
	req := &protocol.CreateDataRequest{Content: tree, Seal: last, WithContent: withTree}
	if err := c.callLocked(req, &reply); err != nil {
		if len(last) < len(toSeal) {
			o.rollbackLocked(toSeal[:len(toSeal)-len(last)]) // sealed ahead: deleted again
		}
		return 0, nil, err
	}
	for _, a := range c.accels {
		a.created(req, &reply)
	}
	if len(toSeal) > 0 {
		c.state.Lock()
		for _, id := range last { // those sealed ahead are counted already
			c.state.sealedLocked(id)
		}
		c.state.objects[reply.ID] = append(c.state.objects[reply.ID], toSeal)
		c.state.Unlock()
	}
	return reply.ID, reply.Content, nil
}

// sealAheadLocked seals all but the last protocol.MaxItems blobs of toSeal,
// which a create_data cannot carry, in requests of their own (a
// create_datas of no tree seals its list), and returns the rest for the
// create. On failure nothing of toSeal stays sealed. c.mu must be held.
func (o ours) sealAheadLocked(toSeal []ids.ObjectID) ([]ids.ObjectID, error) {
	c := o.c
	n := len(toSeal) - protocol.MaxItems
	if n <= 0 {
		return toSeal, nil
	}
	for start := 0; start < n; start += protocol.MaxItems {
		part := toSeal[start:min(start+protocol.MaxItems, n)]
		var reply protocol.CreateDatasReply
		if err := c.callLocked(&protocol.CreateDatasRequest{Contents: []json.RawMessage{}, Seal: part}, &reply); err != nil {
			o.rollbackLocked(toSeal[:start+len(part)])
			return nil, err
		}
		c.state.Lock()
		for _, id := range part {
			c.state.sealedLocked(id)
		}
		c.state.Unlock()
	}
	return toSeal[n:], nil
}

// GetMetadata returns the metadata tree of an object (or blob), which the
// caller owns. Blobs in it are not pinned. A missing object is
// ObjectNotExists.
func (c *Client) GetMetadata(id ids.ObjectID) (json.RawMessage, error) {
	if err := c.liveLocal(); err != nil {
		return nil, err
	}
	c.state.Lock()
	tree, ok := c.state.cachedTreeLocked(id, false)
	if !ok {
		tree, _, ok = c.accels.get(id, false)
		tree = bytes.Clone(tree) // the lookup's buffer
	}
	c.state.Unlock()
	if !ok && c.accels.settle() { // it may be a put of this client's in flight
		c.state.Lock()
		tree, _, ok = c.accels.get(id, false)
		tree = bytes.Clone(tree)
		c.state.Unlock()
	}
	if ok {
		return tree, nil
	}
	var reply protocol.GetDataReply
	if err := c.call(&protocol.GetDataRequest{ID: protocol.IDList{id}}, &reply); err != nil {
		return nil, err
	}
	return treeOf(&reply, id)
}

// GetObject returns the metadata tree of an object and takes a reference to
// every blob in it, in one round trip, so that BlobPointer answers for them
// without another. Release(id) drops those references (once per GetObject).
// For a blob id the tree is the blob's own and Release(id) drops the blob's
// reference. A missing object is ObjectNotExists.
func (c *Client) GetObject(id ids.ObjectID) (json.RawMessage, error) {
	return c.getObject(id, nil)
}

// getObject is GetObject; with into, it hands the tree to into, and a tree
// from the directory is then not copied first, nor returned: into runs
// under c.state, and the tree is valid only during the call.
func (c *Client) getObject(id ids.ObjectID, into func(tree []byte, shape uint64)) (json.RawMessage, error) {
	if err := c.liveLocal(); err != nil {
		return nil, err
	}
	c.state.Lock()
	tree, ok := c.state.cachedTreeLocked(id, true)
	if !ok {
		tree, ok = c.state.accelGetObjectLocked(c.accels, id, into)
	} else if into != nil {
		into(tree, 0)
	}
	c.state.Unlock()
	if !ok && c.accels.settle() { // it may be a put of this client's in flight
		c.state.Lock()
		tree, ok = c.state.accelGetObjectLocked(c.accels, id, into)
		c.state.Unlock()
	}
	if ok {
		return tree, nil
	}
	tree, shape, err := c.d.getObject(id)
	if err == nil && into != nil {
		into(tree, shape)
	}
	return tree, err
}

// getObject is GetObject's round trip: get_data with buffers, whose reply
// carries the daemon's shape number of the tree.
func (o ours) getObject(id ids.ObjectID) (json.RawMessage, uint64, error) {
	c := o.c
	c.mu.Lock()
	defer c.mu.Unlock()
	var reply protocol.GetDataReply
	req := &protocol.GetDataRequest{ID: protocol.IDList{id}, WithBuffers: true}
	err := c.callLocked(req, &reply)
	if status.CodeOf(err) == status.NotEnoughMemory {
		// A daemon that spills found no room to load the object back: the
		// blobs this client's tree cache holds may be what fills it. Drop
		// the cache (its releases go ahead of the next request) and ask once
		// more.
		c.state.Lock()
		dropped := len(c.state.cache.entries) > 0
		c.state.dropCacheLocked()
		c.state.Unlock()
		if dropped {
			reply = protocol.GetDataReply{}
			err = c.callLocked(req, &reply)
		}
	}
	if err != nil {
		return nil, 0, err
	}
	tree, err := treeOf(&reply, id)
	if err != nil {
		return nil, 0, err
	}
	var shape uint64
	if len(reply.Shapes) == 1 {
		shape = reply.Shapes[0]
	}
	views, err := c.w.views(reply.Payloads)
	if err != nil {
		return nil, 0, err
	}
	c.state.Lock()
	defer c.state.Unlock()
	if id.IsBlob() {
		if id != ids.EmptyBlob {
			v, ok := views[id]
			if !ok {
				return nil, 0, errBadReply("no payload for blob %v", id)
			}
			c.state.pinLocked(id, v)
		}
		return tree, shape, nil
	}
	pinned := make([]ids.ObjectID, 0, len(views))
	for i := range reply.Payloads {
		bid := reply.Payloads[i].ObjectID
		if v, ok := views[bid]; ok && bid != ids.EmptyBlob {
			c.state.pinLocked(bid, v)
			pinned = append(pinned, bid)
			delete(views, bid) // once per blob, however often the tree names it
		}
	}
	c.state.objects[id] = append(c.state.objects[id], pinned)
	if reply.MetaEpoch != nil {
		c.state.cacheTreeLocked(id, tree, append([]ids.ObjectID(nil), pinned...), *reply.MetaEpoch)
	}
	return tree, shape, nil
}

// treeOf returns the tree of id in a get_data reply's content map
// {"o…": tree}. A missing id is ObjectNotExists, whose message also says
// when the daemon could not catch up with etcd (the object may then exist on
// another instance).
func treeOf(reply *protocol.GetDataReply, id ids.ObjectID) (json.RawMessage, error) {
	content := reply.Content
	// Asked for one id, the daemon writes {} or {"o…":tree}: slice the tree
	// out instead of decoding it again (decodeReply validated the JSON).
	var key [24]byte
	head := append(append(append(key[:0], '{', '"'), id.AppendText(nil)...), '"', ':')
	if n := len(content); bytes.HasPrefix(content, head) && n > len(head) && content[n-1] == '}' {
		if tree := content[len(head) : n-1]; len(tree) > 0 && tree[0] == '{' && tree[len(tree)-1] == '}' {
			return tree, nil
		}
	}
	var trees map[string]json.RawMessage
	if err := json.Unmarshal(content, &trees); err != nil {
		return nil, errBadReply("content: %v", err)
	}
	tree, ok := trees[id.String()]
	if !ok {
		if reply.SyncError != "" {
			return nil, status.Errorf(status.ObjectNotExists,
				"object %v does not exist on this instance, and the daemon could not catch up with etcd "+
					"to look for it on the others: %s", id, reply.SyncError)
		}
		return nil, status.Errorf(status.ObjectNotExists, "object %v does not exist", id)
	}
	return tree, nil
}

// List returns the trees of objects whose typename matches pattern (a glob,
// or a full-match regular expression when regex is set), at most limit of
// them (0: no limit), as a JSON object {"o…": tree}.
func (c *Client) List(pattern string, regex bool, limit uint64) (json.RawMessage, error) {
	var reply protocol.GetDataReply
	req := &protocol.ListDataRequest{Pattern: pattern, Regex: regex, Limit: limit}
	if err := c.call(req, &reply); err != nil {
		return nil, err
	}
	if len(reply.Content) == 0 || string(reply.Content) == "null" {
		return json.RawMessage("{}"), nil
	}
	return reply.Content, nil
}

// Delete deletes objects, with upstream's rules: force also deletes every
// object that uses them, deep deletes members no other object uses,
// memoryTrim returns freed pages to the kernel. Missing ids are ignored.
// Blobs another client still holds stay readable for it until its release.
// It returns the ids of the blobs deleted, sorted.
//
// A list longer than a request may carry (protocol.MaxItems) goes in
// parts, in order, with the result of one request of the whole list: with
// force or deep, a member kept by one part because a later part's object
// still used it is deleted with that object, so one pass does it. Without
// either, an object kept because an object of a later part used it stays,
// so the parts are sent again until a pass removes nothing (the reply's
// count; as many passes as the list's objects nest, plus one). Each part
// is atomic, not the whole list.
func (c *Client) Delete(idl []ids.ObjectID, force, deep, memoryTrim bool) ([]ids.ObjectID, error) {
	if len(idl) <= protocol.MaxItems {
		var reply protocol.DelDataReply
		if err := c.call(protocol.NewDelDataRequest(idl, force, deep, memoryTrim), &reply); err != nil {
			return nil, err
		}
		return reply.DeletedBids, nil
	}
	var blobs []ids.ObjectID
	for {
		removed := 0
		for part := range slices.Chunk(idl, protocol.MaxItems) {
			var reply protocol.DelDataReply
			if err := c.call(protocol.NewDelDataRequest(part, force, deep, memoryTrim), &reply); err != nil {
				return blobs, err
			}
			blobs = append(blobs, reply.DeletedBids...)
			if reply.Deleted != nil {
				removed += *reply.Deleted
			} else {
				removed += len(reply.DeletedBids) // a daemon that does not count
			}
		}
		if force || deep || removed == 0 {
			slices.Sort(blobs)
			return blobs, nil
		}
	}
}

// Exists reports whether an object (or blob) exists.
func (c *Client) Exists(id ids.ObjectID) (bool, error) {
	var reply protocol.ExistsReply
	if err := c.call(&protocol.ExistsRequest{ID: id}, &reply); err != nil {
		return false, err
	}
	return reply.Exists, nil
}

// Persist persists an object and its members, so names may point to it.
func (c *Client) Persist(id ids.ObjectID) error {
	var reply protocol.AckReply
	return c.call(&protocol.PersistRequest{ID: id}, &reply)
}

// IfPersist reports whether an object is persisted.
func (c *Client) IfPersist(id ids.ObjectID) (bool, error) {
	var reply protocol.IfPersistReply
	if err := c.call(&protocol.IfPersistRequest{ID: id}, &reply); err != nil {
		return false, err
	}
	return reply.Persist, nil
}

// ShallowCopy makes a new object with the metadata and members of id, plus
// the keys of extra (a JSON object of scalars, or nil), and returns its id.
func (c *Client) ShallowCopy(id ids.ObjectID, extra json.RawMessage) (ids.ObjectID, error) {
	if len(extra) > 0 && !json.Valid(extra) {
		return 0, status.Errorf(status.Invalid, "extra is not valid JSON")
	}
	var reply protocol.ShallowCopyReply
	if err := c.call(&protocol.ShallowCopyRequest{ID: id, Extra: extra}, &reply); err != nil {
		return 0, err
	}
	return reply.TargetID, nil
}

// Label sets labels keys[i]=values[i] on an object.
func (c *Client) Label(id ids.ObjectID, keys, values []string) error {
	if len(keys) != len(values) {
		return status.Errorf(status.Invalid, "%d label keys for %d values", len(keys), len(values))
	}
	var reply protocol.AckReply
	return c.call(&protocol.LabelRequest{ID: id, Keys: keys, Values: values}, &reply)
}

// MaxInline bounds the bytes of one CreateInline: they travel through the
// socket, which pays for small data (one round trip instead of two) but not
// for large data, written faster in place through CreateBuffer. It is the
// daemon's default frame limit, which also bounds the bytes a request may
// announce after its frame (a daemon configured lower refuses more).
const MaxInline = protocol.DefaultMaxFrame

// CreateInline puts small data in one round trip: each of data becomes a new
// sealed blob (the bytes are copied through the socket), and, unless tree is
// empty, the object of tree is created with them, a member {"inline": i}
// standing for the i-th blob. It returns the object's id (0 without a tree)
// and the blobs' ids. The client holds no reference to what it created.
// Bytes of more than MaxInline in all are Invalid.
//
// With our daemon over its UNIX socket, a put with a tree the daemon
// cannot refuse for what it names is pipelined (pipelined.go): it returns
// without waiting for the daemon. Should the daemon refuse it all the same
// (a client bug, a daemon going away), the failure is returned by the next
// CreateInline of this client, whose own put is then not made.
func (c *Client) CreateInline(tree []byte, data [][]byte) (ids.ObjectID, []ids.ObjectID, error) {
	if len(tree) > 0 && !jsonscan.Valid(tree) {
		return 0, nil, status.Errorf(status.MetaTreeInvalid, "metadata is not valid JSON")
	}
	if len(data) == 0 {
		return 0, nil, status.Errorf(status.Invalid, "an inline create needs at least one blob")
	}
	sizes := make([]uint64, len(data))
	var total uint64
	for i, d := range data {
		sizes[i] = uint64(len(d))
		total += sizes[i]
	}
	if total > MaxInline {
		return 0, nil, status.Errorf(status.Invalid,
			"%d bytes are too many to send inline (at most %d): create buffers for them", total, MaxInline)
	}
	return c.d.putInline(tree, data, sizes)
}

// putInline is CreateInline of ours: the accelerators (a pipelined put),
// else create_data with the bytes after it, in one round trip.
func (o ours) putInline(tree []byte, data [][]byte, sizes []uint64) (ids.ObjectID, []ids.ObjectID, error) {
	c := o.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usableLocked(); err != nil {
		return 0, nil, err
	}
	if err := c.w.takePutError(); err != nil {
		return 0, nil, err
	}
	if len(tree) > 0 {
		for _, a := range c.accels {
			if id, bids, ok, err := a.put(tree, data); ok || err != nil {
				return id, bids, err
			}
		}
	}
	var reply protocol.CreateDataReply
	req := &protocol.CreateDataRequest{Content: tree, Inline: sizes}
	if err := c.callLocked(req, &reply, data...); err != nil {
		return 0, nil, err
	}
	if len(reply.InlineIDs) != len(data) {
		return 0, nil, errBadReply("%d inline blob ids for %d blobs", len(reply.InlineIDs), len(data))
	}
	return reply.ID, reply.InlineIDs, nil
}

// accelGetObjectLocked is GetObject answered by the accelerators a (the
// directory): the references are those a get with buffers takes, dropped
// by Release(id). c.state must be held.
func (r *refs) accelGetObjectLocked(a accelList, id ids.ObjectID, into func(tree []byte, shape uint64)) (json.RawMessage, bool) {
	tree, bids, ok := a.get(id, true)
	if !ok {
		return nil, false
	}
	if !id.IsBlob() {
		r.objects[id] = append(r.objects[id], bids)
	}
	if into != nil {
		into(tree, r.dir.shape)
		return nil, true
	}
	return bytes.Clone(tree), true
}
