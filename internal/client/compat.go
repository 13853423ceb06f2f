package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
)

// Talking to upstream's daemon. At registration the client names the
// extensions it uses and the daemon the ones it has (register_reply
// "extensions"); upstream's daemon names none. For each extension the daemon
// lacks, the client uses upstream's messages instead, so that nothing it
// sends can crash or desynchronise that daemon (upstream's exits on an
// inline create_data, and then reads the trailing bytes as frames):
//
//   - create_data.seal: a seal_request per blob before create_data;
//   - create_data.inline: create_buffers, a copy, seals, then create_data;
//   - nested new members: upstream creates only one object per create_data,
//     and needs "instance_id" in every tree: members are created bottom-up
//     and referred to by id; blob members get typename and instance_id;
//   - create_data.with_content: a get_data after the create;
//   - get_data.with_buffers: get_data, then get_buffers of its blobs;
//   - release.ids: one release_request per blob.
//
// A put that fails half-way deletes what it created (objects and blobs), so
// it leaks nothing. These paths cost round trips only against upstream's
// daemon: with ours every extension is present and none of this runs.

// extSet records which extensions the daemon has.
type extSet struct {
	seal, inline, withContent, withBuffers, releaseIDs, metaEpoch, lease, pipelined, streams bool
}

// parseExtensions returns the extensions a register_reply names; unknown
// names are ignored (a newer daemon).
func parseExtensions(names []string) extSet {
	var e extSet
	for _, n := range names {
		switch n {
		case protocol.ExtSeal:
			e.seal = true
		case protocol.ExtInline:
			e.inline = true
		case protocol.ExtWithContent:
			e.withContent = true
		case protocol.ExtWithBuffers:
			e.withBuffers = true
		case protocol.ExtReleaseIDs:
			e.releaseIDs = true
		case protocol.ExtMetaEpoch:
			e.metaEpoch = true
		case protocol.ExtLease:
			e.lease = true
		case protocol.ExtPipelined:
			e.pipelined = true
		case protocol.ExtStreams:
			e.streams = true
		}
	}
	return e
}

// Upstream reports whether the daemon lacks our extensions (upstream's
// vineyardd): the client then uses only upstream's messages.
func (c *Client) Upstream() bool { return !c.ext.ours() }

// ours reports whether the daemon has every extension the dialect ours
// needs (dialect.go).
func (e extSet) ours() bool { return e.seal && e.inline && e.withContent && e.withBuffers }

// upstreamCreateLocked creates the object of tree with upstream's messages:
// it seals toSeal, turns {"inline": i} members into the blobs inline[i],
// creates new members bottom-up and then the object. On failure it deletes
// what it created, the blobs included. c.mu must be held.
func (u upstream) upstreamCreateLocked(tree []byte, toSeal, inline []ids.ObjectID) (ids.ObjectID, error) {
	c := u.c
	var root map[string]any
	dec := json.NewDecoder(bytes.NewReader(tree))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil || root == nil {
		return 0, status.Errorf(status.MetaTreeInvalid, "metadata is not a JSON object")
	}
	var created []ids.ObjectID
	fail := func(err error) (ids.ObjectID, error) {
		u.rollbackLocked(append(created, append(toSeal, inline...)...))
		return 0, err
	}
	for _, id := range toSeal {
		var ack protocol.AckReply
		if err := c.callLocked(&protocol.SealRequest{ObjectID: id}, &ack); err != nil {
			return fail(fmt.Errorf("seal blob %v: %w", id, err))
		}
		c.state.Lock()
		c.state.sealedLocked(id)
		c.state.Unlock()
	}
	id, err := u.upstreamCreateTreeLocked(root, inline, &created)
	if err != nil {
		return fail(err)
	}
	if len(toSeal) > 0 {
		c.state.Lock()
		c.state.objects[id] = append(c.state.objects[id], toSeal)
		c.state.Unlock()
	}
	return id, nil
}

// upstreamCreateTreeLocked creates the new members of node, then node, and
// returns node's id; created collects the ids of the members made.
func (u upstream) upstreamCreateTreeLocked(node map[string]any, inline []ids.ObjectID, created *[]ids.ObjectID) (ids.ObjectID, error) {
	c := u.c
	for key, v := range node {
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		sub, err := u.upstreamMemberLocked(key, m, inline, created)
		if err != nil {
			return 0, err
		}
		node[key] = sub
	}
	node["instance_id"] = c.instanceID
	if _, ok := node["transient"]; !ok {
		node["transient"] = true
	}
	if _, ok := node["nbytes"]; !ok {
		node["nbytes"] = 0
	}
	body, err := json.Marshal(node)
	if err != nil {
		return 0, status.Errorf(status.MetaTreeInvalid, "encode metadata: %v", err)
	}
	var reply protocol.CreateDataReply
	if err := c.callLocked(&protocol.CreateDataRequest{Content: body}, &reply); err != nil {
		return 0, err
	}
	return reply.ID, nil
}

// upstreamMemberLocked returns the tree to send for the member key of a
// tree: a blob (by id, or {"inline": i}) as upstream's blob link, an existing
// object as itself with an instance_id, a new object created first and
// referred to by id.
func (u upstream) upstreamMemberLocked(key string, m map[string]any, inline []ids.ObjectID, created *[]ids.ObjectID) (map[string]any, error) {
	c := u.c
	if raw, ok := m["inline"]; ok && len(m) == 1 {
		n, err := strconv.Atoi(fmt.Sprint(raw))
		if err != nil || n < 0 || n >= len(inline) {
			return nil, status.Errorf(status.MetaTreeInvalid, "member %q: inline blob %v of %d", key, raw, len(inline))
		}
		return u.blobLink(inline[n]), nil
	}
	if text, ok := m["id"].(string); ok {
		id, err := ids.Parse(text)
		if err != nil {
			return nil, status.Errorf(status.MetaTreeInvalid, "member %q: bad id %q", key, text)
		}
		if id.IsBlob() {
			link := u.blobLink(id)
			for k, v := range m {
				if _, set := link[k]; !set {
					link[k] = v
				}
			}
			return link, nil
		}
		if len(m) > 1 {
			if _, ok := m["instance_id"]; !ok {
				m["instance_id"] = c.instanceID
			}
		}
		return m, nil // an existing object: as given, or {"id"} (upstream's placeholder)
	}
	if _, ok := m["typename"]; !ok {
		return nil, status.Errorf(status.MetaTreeInvalid, "member %q has neither an id nor a typename", key)
	}
	id, err := u.upstreamCreateTreeLocked(m, inline, created)
	if err != nil {
		return nil, err
	}
	*created = append(*created, id)
	return map[string]any{"id": id.String()}, nil
}

// blobLink is a blob member as upstream's daemon requires it.
func (u upstream) blobLink(id ids.ObjectID) map[string]any {
	c := u.c
	return map[string]any{"id": id.String(), "typename": "vineyard::Blob", "instance_id": c.instanceID}
}

// rollbackLocked deletes what a failed put created; its own errors are
// dropped (the put's error is the one to report).
func (o ours) rollbackLocked(idl []ids.ObjectID) {
	c := o.c
	if len(idl) == 0 || c.usableLocked() != nil {
		return
	}
	var unsealed, rest, held []ids.ObjectID
	c.state.Lock()
	for _, id := range idl {
		b, ok := c.state.blobs[id]
		switch {
		case ok && b.owned: // never sealed: aborted, not deleted
			unsealed = append(unsealed, id)
			delete(c.state.blobs, id)
		case ok:
			held = append(held, id)
			delete(c.state.blobs, id)
			rest = append(rest, id)
		default:
			rest = append(rest, id)
		}
		delete(c.state.objects, id)
	}
	c.state.Unlock()
	for _, id := range unsealed {
		var ack protocol.AckReply
		_ = c.callLocked(&protocol.DropBufferRequest{ID: id}, &ack)
	}
	for part := range slices.Chunk(rest, protocol.MaxItems) { // deep: one pass (Delete)
		var reply protocol.DelDataReply
		_ = c.callLocked(protocol.NewDelDataRequest(part, false, true, false), &reply)
	}
	// The references sealing took: our daemon keeps a deleted blob's memory
	// while they are held.
	for _, r := range c.ext.releaseRequests(held) {
		var ack protocol.AckReply
		_ = c.callLocked(r, &ack)
	}
}

// upstreamInline is CreateInline with upstream's messages: new blobs, a
// copy of each data, seals, then (unless tree is empty) the object. c.mu
// must not be held.
func (u upstream) upstreamInline(tree []byte, data [][]byte) (ids.ObjectID, []ids.ObjectID, error) {
	c := u.c
	sizes := make([]uint64, len(data))
	for i, d := range data {
		sizes[i] = uint64(len(d))
	}
	bufs, err := c.CreateBuffers(sizes)
	if err != nil {
		return 0, nil, err
	}
	bids := make([]ids.ObjectID, len(bufs))
	var toSeal []ids.ObjectID
	for i, b := range bufs {
		copy(b.Data, data[i])
		bids[i] = b.ID
		if b.ID != ids.EmptyBlob {
			toSeal = append(toSeal, b.ID)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(tree) == 0 {
		for _, id := range toSeal {
			var ack protocol.AckReply
			if err := c.callLocked(&protocol.SealRequest{ObjectID: id}, &ack); err != nil {
				u.rollbackLocked(toSeal)
				return 0, nil, fmt.Errorf("seal blob %v: %w", id, err)
			}
		}
		return 0, bids, nil // sealed without a reference kept, as the inline create
	}
	id, err := u.upstreamCreateLocked(tree, toSeal, bids)
	if err != nil {
		return 0, nil, err
	}
	u.dropPutRefsLocked(id)
	return id, bids, nil
}

// dropPutRefsLocked drops the references sealing took for the object id, so
// that an upstream inline put, like ours, leaves the client holding nothing.
func (u upstream) dropPutRefsLocked(id ids.ObjectID) {
	c := u.c
	c.state.Lock()
	defer c.state.Unlock()
	blobs, err := c.state.toReleaseLocked(id)
	if err != nil {
		return
	}
	if zero := c.state.unpinLocked(id, blobs); len(zero) > 0 {
		c.state.deferReleaseLocked(zero)
	}
}

// upstreamGetObjectLocked is GetObject with upstream's messages: get_data,
// then get_buffers of every blob of the tree. A blob the daemon does not
// return is an error naming the object, its typename and the blob: the
// bytes never arrived, so nothing may be read as if they had. c.mu must be
// held.
func (u upstream) upstreamGetObjectLocked(id ids.ObjectID) (json.RawMessage, error) {
	c := u.c
	var tree json.RawMessage
	var blobs []ids.ObjectID
	if id.IsBlob() {
		blobs = []ids.ObjectID{id}
	} else {
		var reply protocol.GetDataReply
		if err := c.callLocked(&protocol.GetDataRequest{ID: protocol.IDList{id}, SyncRemote: true}, &reply); err != nil {
			return nil, err
		}
		t, err := treeOf(&reply, id)
		if err != nil {
			return nil, err
		}
		tree = t
		blobs = blobIDs(tree)
	}
	views := map[ids.ObjectID][]byte{}
	if len(blobs) > 0 {
		var reply protocol.BuffersReply
		if err := c.callLocked(&protocol.GetBuffersRequest{IDs: blobs}, &reply); err != nil {
			return nil, fmt.Errorf("object %v (%s): get its blobs: %w", id, typenameOf(tree), err)
		}
		v, err := c.w.views(reply.Payloads)
		if err != nil {
			return nil, err
		}
		views = v
	}
	for _, bid := range blobs {
		if _, ok := views[bid]; !ok {
			if id.IsBlob() {
				return nil, status.Errorf(status.ObjectNotExists, "blob %v does not exist", id)
			}
			return nil, status.Errorf(status.ObjectNotExists,
				"object %v (%s): the daemon returned no bytes for its blob %v (deleted, or on another instance)",
				id, typenameOf(tree), bid)
		}
	}
	c.state.Lock()
	defer c.state.Unlock()
	if id.IsBlob() {
		v := views[id]
		c.state.pinLocked(id, v)
		body, _ := json.Marshal(map[string]any{
			"id": id.String(), "typename": "vineyard::Blob", "length": len(v), "nbytes": len(v),
			"instance_id": c.instanceID, "transient": true,
		})
		return body, nil
	}
	for _, bid := range blobs {
		c.state.pinLocked(bid, views[bid])
	}
	c.state.objects[id] = append(c.state.objects[id], blobs)
	return withBlobSizes(tree, views), nil
}

// withBlobSizes returns tree with the "length" and "nbytes" of each blob
// member set from the bytes that arrived: upstream's daemon stores blob
// links with length 0 (its client fills them from get_buffers), and a reader
// trusting that 0 would see an empty blob.
func withBlobSizes(tree []byte, views map[ids.ObjectID][]byte) json.RawMessage {
	var root map[string]any
	dec := json.NewDecoder(bytes.NewReader(tree))
	dec.UseNumber()
	if dec.Decode(&root) != nil {
		return tree
	}
	var walk func(m map[string]any)
	walk = func(m map[string]any) {
		if text, ok := m["id"].(string); ok {
			if id, err := ids.Parse(text); err == nil && id.IsBlob() {
				n := len(views[id])
				m["length"], m["nbytes"] = n, n
				return
			}
		}
		for _, v := range m {
			if sub, ok := v.(map[string]any); ok {
				walk(sub)
			}
		}
	}
	walk(root)
	out, err := json.Marshal(root)
	if err != nil {
		return tree
	}
	return out
}

// blobIDs returns the distinct blob ids of a tree (values of "id" keys with
// the blob bit), the empty blob excepted.
func blobIDs(tree []byte) []ids.ObjectID {
	var out []ids.ObjectID
	seen := map[ids.ObjectID]bool{}
	var walk func(v any)
	walk = func(v any) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		if text, ok := m["id"].(string); ok {
			if id, err := ids.Parse(text); err == nil && id.IsBlob() && id != ids.EmptyBlob && !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
		for _, sub := range m {
			walk(sub)
		}
	}
	var root any
	if json.Unmarshal(tree, &root) == nil {
		walk(root)
	}
	return out
}

// typenameOf returns the typename of a tree, for error messages.
func typenameOf(tree []byte) string {
	var t struct {
		Typename string `json:"typename"`
	}
	if json.Unmarshal(tree, &t) != nil || t.Typename == "" {
		return "unknown typename"
	}
	return t.Typename
}

// upstreamCreateWithTreeLocked is create for a daemon without create_data's
// seal (or with_content) extension: upstreamCreateLocked, then, when the
// stored tree is wanted, a get_data of it. c.mu must be held.
func (u upstream) upstreamCreateWithTreeLocked(tree []byte, toSeal []ids.ObjectID, withTree bool) (ids.ObjectID, json.RawMessage, error) {
	c := u.c
	id, err := u.upstreamCreateLocked(tree, toSeal, nil)
	if err != nil || !withTree {
		return id, nil, err
	}
	var reply protocol.GetDataReply
	if err := c.callLocked(&protocol.GetDataRequest{ID: protocol.IDList{id}}, &reply); err != nil {
		return id, nil, err
	}
	stored, err := treeOf(&reply, id)
	return id, stored, err
}

// create is upstreamCreateWithTreeLocked.
func (u upstream) create(tree []byte, toSeal []ids.ObjectID, withTree bool) (ids.ObjectID, json.RawMessage, error) {
	return u.upstreamCreateWithTreeLocked(tree, toSeal, withTree)
}

// getObject is upstreamGetObjectLocked.
func (u upstream) getObject(id ids.ObjectID) (json.RawMessage, uint64, error) {
	u.c.mu.Lock()
	defer u.c.mu.Unlock()
	tree, err := u.upstreamGetObjectLocked(id)
	return tree, 0, err
}

// putInline is upstreamInline.
func (u upstream) putInline(tree []byte, data [][]byte, _ []uint64) (ids.ObjectID, []ids.ObjectID, error) {
	return u.upstreamInline(tree, data)
}
