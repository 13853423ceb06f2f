package store

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"unsafe"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/jsonscan"
	"github.com/v6d-io/v6d-go/internal/meta"
	"github.com/v6d-io/v6d-go/internal/status"
	"github.com/v6d-io/v6d-go/internal/tree"
)

// treeWriter writes the trees the store returns and persists: get_data's,
// the directory's records, the backend's.
type treeWriter struct{ s *Store }

// treeBuilder validates a tree put by a client and makes objects of it.
type treeBuilder struct{ s *Store }

// BlobTypename is the typename of blobs in metadata trees.
const BlobTypename = tree.BlobTypename

// member is one member link of an object.
type member struct {
	key string
	id  ids.ObjectID
}

// field is one scalar field of an object: its key and its raw JSON value,
// canonical (internal/tree). Neither is ever written after it is made
// (values are replaced, not changed), so both may share memory with the
// tree they came from.
type field = tree.Field

// fieldList is an object's scalar fields, sorted by key, each key once. An
// object has a dozen of them: a sorted slice costs one allocation where a
// map costs several, and encodes without sorting (BenchmarkPutInline in
// internal/server).
type fieldList []field

// find returns where key is or would be, and whether it is there.
func (l fieldList) find(key string) (int, bool) {
	return tree.Find(l, key)
}

// get returns the raw value of key.
func (l fieldList) get(key string) ([]byte, bool) {
	if i, ok := l.find(key); ok {
		return l[i].Raw, true
	}
	return nil, false
}

// set sets the raw value of key.
func (l *fieldList) set(key string, raw []byte) {
	i, ok := l.find(key)
	if ok {
		(*l)[i].Raw = raw
		return
	}
	*l = slices.Insert(*l, i, field{Key: key, Raw: raw})
}

// del removes key.
func (l *fieldList) del(key string) {
	if i, ok := l.find(key); ok {
		*l = slices.Delete(*l, i, i+1)
	}
}

// object is a stored metadata tree. Its own scalar fields are kept as raw
// JSON; members are links, spliced into replies, so a tree is never decoded
// again after creation.
type object struct {
	id        ids.ObjectID
	typename  string
	fields    fieldList            // own scalar fields, incl. id, typename, ...
	encoded   []byte               // fields encoded as `"k":v,...` (sorted), cache
	members   []member             // sorted by key
	users     map[ids.ObjectID]int // objects that have this one as a member (nil: none)
	persisted bool
	names     map[string]struct{}
	// fromShape is the put text's shape o was made from (shape.go), while
	// its fields are what the shape made: it numbers o's tree without
	// cutting it again (treeShapeLocked). nil: none, or fields changed.
	fromShape *shape
}

// encodeFields refreshes o.encoded from o.fields.
func (o *object) encodeFields() {
	o.fromShape = nil
	size := 0
	for _, f := range o.fields {
		size += len(f.Key) + len(f.Raw) + 4
	}
	o.encoded = tree.AppendFields(make([]byte, 0, size), o.fields)
}

// isGlobal reports whether o is a global object (the field "global" is
// true): its members may be persisted objects of other instances.
func (o *object) isGlobal() bool {
	raw, _ := o.fields.get("global")
	return string(raw) == "true"
}

func (o *object) setField(key string, value any) {
	var raw []byte
	switch v := value.(type) { // the fields the daemon sets on every object, without reflection
	case string:
		raw = tree.AppendString(nil, v)
	case uint64:
		raw = strconv.AppendUint(nil, v, 10)
	case int:
		raw = strconv.AppendInt(nil, int64(v), 10)
	case bool:
		raw = strconv.AppendBool(nil, v)
	default:
		raw, _ = tree.Marshal(value)
	}
	o.fields.set(key, raw)
}

// appendBlobTree appends the metadata tree of blob b.
func (part *treeWriter) appendBlobTree(dst []byte, b *blob) []byte {
	s := part.s
	return tree.AppendBlob(dst, b.id, b.size, s.instance)
}

// appendTreeLocked appends the full tree of id (object or blob). Missing
// members (possible only for blobs retired by a forced delete of a member) are
// written as null.
func (part *treeWriter) appendTreeLocked(dst []byte, id ids.ObjectID) []byte {
	s := part.s
	if id.IsBlob() {
		if b, ok := s.lookupBlobLocked(id); ok {
			return s.text.appendBlobTree(dst, b)
		}
		return append(dst, "null"...)
	}
	o, ok := s.objects[id]
	if !ok {
		if r, ok := s.remote[id]; ok {
			return s.rtext.appendRemoteTreeLocked(dst, r, 0)
		}
		return append(dst, "null"...)
	}
	dst = append(dst, '{')
	dst = append(dst, o.encoded...)
	for i, m := range o.members {
		dst = tree.AppendFieldKey(dst, len(o.encoded)+i, m.key)
		dst = s.text.appendTreeLocked(dst, m.id)
	}
	return append(dst, '}')
}

// blobsOfLocked appends every blob reachable from id.
func (part *treeWriter) blobsOfLocked(dst []*blob, id ids.ObjectID, seen map[ids.ObjectID]bool) []*blob {
	s := part.s
	if seen[id] {
		return dst
	}
	seen[id] = true
	if id.IsBlob() {
		if b, ok := s.lookupBlobLocked(id); ok {
			dst = append(dst, b)
		}
		return dst
	}
	if o, ok := s.objects[id]; ok {
		for _, m := range o.members {
			dst = s.text.blobsOfLocked(dst, m.id, seen)
		}
	}
	return dst
}

// Created is what CreateData returns.
type Created struct {
	ID        ids.ObjectID
	Signature uint64
	Inline    []ids.ObjectID // the blobs of an inline create
}

// Tree returns the full tree of an object or blob, and whether it exists.
func (s *Store) Tree(id ids.ObjectID) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.rtext.knownLocked(id) {
		return nil, false
	}
	return s.text.appendTreeLocked(nil, id), true
}

// CreateData stores a metadata tree. The blobs in seal, created by this
// session, are sealed first. Members are nested trees: one with an "id" links
// an existing object; one without an "id" (but with a "typename") is a new
// object, created in the same call. Either the whole tree is stored or, on
// error, nothing of it.
func (ss *Session) CreateData(content json.RawMessage, seal []ids.ObjectID) (Created, error) {
	s := ss.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range seal {
		if err := ss.sealLocked(id); err != nil {
			return Created{}, err
		}
	}
	objs, err := s.build.buildTreeLocked(content, nil, 0, 0)
	if err != nil {
		return Created{}, err
	}
	o := s.build.insertAllLocked(objs)
	sig, _ := parseSignature(o)
	return Created{ID: o.id, Signature: sig}, nil
}

// CreateDatas stores several trees; on error none of the trees after the
// failing one is stored, the earlier ones stay.
func (ss *Session) CreateDatas(contents []json.RawMessage, seal []ids.ObjectID) ([]Created, error) {
	if err := checkItems("trees", len(contents)); err != nil {
		return nil, err
	}
	s := ss.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range seal {
		if err := ss.sealLocked(id); err != nil {
			return nil, err
		}
	}
	out := make([]Created, 0, len(contents))
	for _, c := range contents {
		objs, err := s.build.buildTreeLocked(c, nil, 0, 0)
		if err != nil {
			return out, err
		}
		o := s.build.insertAllLocked(objs)
		sig, _ := parseSignature(o)
		out = append(out, Created{ID: o.id, Signature: sig})
	}
	return out, nil
}

// MaxTypenameBytes bounds the typename of an object in a metadata tree.
const MaxTypenameBytes = 1024

// maxTreeDepth bounds the nesting of new member trees in one create_data.
const maxTreeDepth = 128

// parseSignature returns the signature field of o.
func parseSignature(o *object) (uint64, error) {
	raw, _ := o.fields.get("signature")
	return strconv.ParseUint(string(raw), 10, 64)
}

// treeBuild is one tree being validated and turned into objects.
type treeBuild struct {
	objs   []*object      // built so far: new members first, depth-first
	inline []ids.ObjectID // the blobs of an inline create, for {"inline": i} members
	root   ids.ObjectID   // the root's id; 0: a fresh one
	sig    uint64         // the root's signature unless its tree has one; 0: a fresh one
	shape  *shape         // the root's shape being recorded (shape.go); nil: not kept (memberLocked drops it before building a member)
}

// leasedSignature is the signature of a put whose client named its root
// (CreateLeased): the root's own value, which the generator never hands
// out (the lease reserved it), so the client knows the tree the daemon
// makes without asking. 0 (a fresh one) for other puts.
func leasedSignature(root ids.ObjectID) uint64 { return uint64(root) }

// buildTreeLocked validates a tree and makes objects of it, not yet inserted:
// the new members first (depth-first), the root last. inline are the blobs
// of an inline create (nil otherwise); root is the id of the root (0: a
// fresh one), sig its signature when the tree gives none (0: a
// fresh one).
func (part *treeBuilder) buildTreeLocked(content json.RawMessage, inline []ids.ObjectID, root ids.ObjectID, sig uint64) ([]*object, error) {
	s := part.s
	tb := &treeBuild{inline: inline, root: root, sig: sig}
	if inline != nil {
		if sh := s.shapes[string(content)]; sh != nil && sh.fits(inline) {
			s.shapec.objectOfShapeLocked(sh, tb)
			return tb.objs, nil
		}
		tb.shape = &shape{}
	}
	if !jsonscan.Valid(content) {
		return nil, status.Errorf(status.MetaTreeInvalid, "metadata must be a JSON object")
	}
	if err := tree.CheckText(content); err != nil {
		return nil, status.Errorf(status.MetaTreeInvalid, "metadata: %v", err)
	}
	// The objects keep slices of the tree (their raw fields): give them a
	// copy of their own, not the connection's read buffer.
	content = append(json.RawMessage(nil), content...)
	if _, err := s.build.buildObjectLocked(content, 0, tb); err != nil {
		return nil, err
	}
	if tb.shape != nil {
		root := tb.objs[len(tb.objs)-1]
		tb.shape.finishShape(root)
		root.fromShape = tb.shape
		s.shapec.keepShapeLocked(content, tb.shape)
	}
	return tb.objs, nil
}

// insertAllLocked inserts objects built by buildTreeLocked and returns the
// root.
func (part *treeBuilder) insertAllLocked(objs []*object) *object {
	s := part.s
	root := objs[len(objs)-1]
	for _, o := range objs {
		f := FlagInTree
		if o == root {
			f = 0 // the directory publishes the root, its record lists the rest
		}
		s.insertLocked(o, f)
	}
	return root
}

// buildObjectLocked validates the tree content at nesting depth and makes an
// object of it, appending it (after its new members) to objs.
func (part *treeBuilder) buildObjectLocked(content json.RawMessage, depth int, tb *treeBuild) (*object, error) {
	s := part.s
	if depth > maxTreeDepth {
		return nil, status.Errorf(status.MetaTreeInvalid, "metadata nests new members deeper than %d", maxTreeDepth)
	}
	o := &object{}
	if o.id = tb.root; depth > 0 || o.id == 0 {
		o.id = s.gen.Object()
	}
	// Every entry in the order written, room left for the fields the daemon
	// adds; then sorted (stably: of a repeated key, the last one counts)
	// and split into scalar fields and member trees (values that are
	// objects), both in key order. Keys share the memory of content, which
	// the object keeps and nobody writes (buildTreeLocked copied it).
	all := make(fieldList, 0, 16)
	if err := jsonscan.ObjectFieldBytes(content, func(key, raw []byte) error {
		all = append(all, field{Key: unsafe.String(unsafe.SliceData(key), len(key)), Raw: raw})
		return nil
	}); err != nil {
		return nil, status.Errorf(status.MetaTreeInvalid, "metadata must be a JSON object")
	}
	var memberTrees []field
	o.fields, memberTrees = tree.Split(all)
	tree.Canon(o.fields)
	if raw, ok := o.fields.get("typename"); !ok || !readString(raw, &o.typename) || o.typename == "" {
		return nil, status.Errorf(status.MetaTreeInvalid, "no 'typename' field in the metadata")
	}
	if len(o.typename) > MaxTypenameBytes {
		return nil, status.Errorf(status.Invalid, "typename is %d bytes long, at most %d are allowed", len(o.typename), MaxTypenameBytes)
	}
	if o.typename == BlobTypename {
		return nil, status.Errorf(status.MetaTreeInvalid, "blobs cannot be created as metadata")
	}
	if tb.shape != nil { // only the root gets here with one (memberLocked)
		_, tb.shape.sigGiven = o.fields.get("signature")
		tb.shape.typename = o.typename
	}
	global := o.isGlobal()
	if len(memberTrees) > 0 {
		o.members = make([]member, 0, len(memberTrees))
	}
	for _, m := range memberTrees {
		if tree.IsDaemonField(m.Key) {
			return nil, status.Errorf(status.MetaTreeInvalid, "member %q: the daemon sets the field %q, it cannot be a member", m.Key, m.Key)
		}
		mid, err := s.build.memberLocked(m.Key, m.Raw, depth, tb, global)
		if err != nil {
			return nil, err
		}
		o.members = append(o.members, member{key: m.Key, id: mid})
	}
	s.build.finishObjectLocked(o, depth, tb)
	return o, nil
}

// finishObjectLocked sets the fields the daemon sets on a new object (id,
// signature unless the tree gives one, instance_id, transient, nbytes unless
// given), encodes its fields and appends it to tb.objs.
func (part *treeBuilder) finishObjectLocked(o *object, depth int, tb *treeBuild) {
	s := part.s
	// The fields the daemon sets, their values in one buffer.
	vals := make([]byte, 0, 64)
	vals = append(vals, '"')
	vals = append(o.id.AppendText(vals), '"')
	o.fields.set("id", vals[:len(vals):len(vals)])
	if _, ok := o.fields.get("signature"); !ok {
		sig := tb.sig
		if depth > 0 || sig == 0 {
			sig = s.gen.Signature()
		}
		at := len(vals)
		vals = strconv.AppendUint(vals, sig, 10)
		o.fields.set("signature", vals[at:len(vals):len(vals)])
	}
	at := len(vals)
	vals = strconv.AppendUint(vals, s.instance, 10)
	o.fields.set("instance_id", vals[at:len(vals):len(vals)])
	o.fields.set("transient", rawTrue)
	if _, ok := o.fields.get("nbytes"); !ok {
		o.fields.set("nbytes", rawZero)
	}
	o.encodeFields()
	tb.objs = append(tb.objs, o)
}

// rawTrue and rawZero are shared raw values of fields (never written).
var (
	rawTrue = []byte("true")
	rawZero = []byte("0")
)

// readString decodes the JSON string raw into out as encoding/json does,
// plain ASCII strings without a copy beyond the string's own; false if raw
// is not a string.
func readString(raw []byte, out *string) bool {
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' {
		plain := true
		for _, c := range raw[1 : n-1] {
			if c < 0x20 || c >= 0x80 || c == '\\' || c == '"' {
				plain = false
				break
			}
		}
		if plain {
			*out = string(raw[1 : n-1])
			return true
		}
	}
	return json.Unmarshal(raw, out) == nil
}

// memberLocked resolves the member tree raw under key: the id of an existing
// object it links, or of a new object built from it (appended to objs). A
// global object (global: true) may also link objects persisted by other
// instances (its partitions), as upstream's global objects do.
func (part *treeBuilder) memberLocked(key string, raw json.RawMessage, depth int, tb *treeBuild, global bool) (ids.ObjectID, error) {
	s := part.s
	var link struct {
		ID, Typename, Inline json.RawMessage
	}
	if err := jsonscan.ObjectFields(raw, func(k string, v []byte) error {
		switch k {
		case "id":
			link.ID = v
		case "typename":
			link.Typename = v
		case "inline":
			link.Inline = v
		}
		return nil
	}); err != nil {
		return 0, status.Errorf(status.MetaTreeInvalid, "member %q: %v", key, err)
	}
	if link.Inline != nil && tb.inline != nil {
		i, err := inlineMember(key, link.Inline, tb.inline)
		if err != nil {
			return 0, err
		}
		if tb.shape != nil {
			tb.shape.members = append(tb.shape.members, shapeMember{key: key, inline: i})
		}
		return tb.inline[i], nil
	}
	tb.shape = nil // a member that names an object or is a new one: kept by id, not by position
	if link.ID == nil {
		if link.Typename == nil {
			return 0, status.Errorf(status.MetaTreeInvalid,
				"member %q has neither an \"id\" (an existing object) nor a \"typename\" (a new one)", key)
		}
		o, err := s.build.buildObjectLocked(raw, depth+1, tb)
		if err != nil {
			return 0, err
		}
		return o.id, nil
	}
	mid, err := parseTreeID(link.ID)
	if err != nil {
		return 0, status.Errorf(status.MetaTreeInvalid, "member %q: %v", key, err)
	}
	if !s.existsLocked(mid) {
		if _, remote := s.remote[mid]; !global || !remote {
			return 0, status.Errorf(status.ObjectNotExists, "member %q (%v) does not exist", key, mid)
		}
		return mid, nil
	}
	if mid.IsBlob() {
		if b, _ := s.lookupBlobLocked(mid); b.state == stateUnsealed {
			return 0, status.Errorf(status.ObjectNotSealed, "member %q (%v) is not sealed", key, mid)
		}
	}
	return mid, nil
}

// parseTreeID reads an id written in a tree: "o…" text or a number.
func parseTreeID(raw json.RawMessage) (ids.ObjectID, error) {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return ids.Parse(text)
	}
	var n uint64
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, ids.ErrBadID
	}
	return ids.ObjectID(n), nil
}

// insertLocked inserts o and emits its EventCreated with flags f.
func (s *Store) insertLocked(o *object, f EventFlags) {
	for _, m := range o.members {
		s.users.linkLocked(o.id, m.id)
	}
	s.objects[o.id] = o
	s.emitIDLocked(EventCreated, o.id, f)
}

func (s *Store) existsLocked(id ids.ObjectID) bool {
	if id.IsBlob() {
		_, ok := s.lookupBlobLocked(id)
		return ok
	}
	_, ok := s.objects[id]
	return ok
}

// Exists reports whether an object or blob exists, here or (persisted) on
// another instance.
func (s *Store) Exists(id ids.ObjectID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rtext.knownLocked(id)
}

// GetData returns the JSON object {"o…": tree} of those ids that exist, and
// whether all of them did. A repeated id is written once. A reply larger
// than Config.MaxReplyBytes fails with status.Invalid.
func (s *Store) GetData(idl []ids.ObjectID) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.text.contentLocked(dedupe(idl), 0, nil)
}

// contentLocked writes the trees of idl (without repeats), failing once the
// reply, with reserve bytes more, would exceed the limit. With shapes, it
// appends to *shapes the shape number of each tree written, in order
// (treeShapeLocked; 0 without a directory).
func (part *treeWriter) contentLocked(idl []ids.ObjectID, reserve uint64, shapes *[]uint64) ([]byte, bool, error) {
	s := part.s
	all := true
	out := make([]byte, 0, 256)
	out = append(out, '{')
	first := true
	for _, id := range idl {
		if !s.rtext.knownLocked(id) {
			all = false
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, '"')
		out = id.AppendText(out)
		out = append(out, '"', ':')
		at := len(out)
		out = s.text.appendTreeLocked(out, id)
		if err := s.checkReplyLocked(uint64(len(out)) + reserve); err != nil {
			return nil, false, err
		}
		if shapes != nil {
			n := uint64(0)
			if s.dir != nil {
				n = s.shapec.treeShapeLocked(id, out[at:])
			}
			*shapes = append(*shapes, n)
		}
	}
	return append(out, '}'), all, nil
}

// GetDataWithBuffers returns the trees of the ids that exist, like GetData,
// the extents of every blob in them, taking a reference to each, and the
// meta epoch the trees belong to. A repeated id is written once; a reply
// larger than Config.MaxReplyBytes fails with status.Invalid, taking no
// reference.
func (ss *Session) GetDataWithBuffers(idl []ids.ObjectID) ([]byte, []Extent, uint64, error) {
	content, extents, _, epoch, err := ss.getDataWithBuffers(idl, false)
	return content, extents, epoch, err
}

// GetDataWithShapes is GetDataWithBuffers that also returns the shape
// number of each tree of the content, in its order (the directory's
// numbers, as its records carry them; 0s without a directory).
func (ss *Session) GetDataWithShapes(idl []ids.ObjectID) ([]byte, []Extent, []uint64, uint64, error) {
	return ss.getDataWithBuffers(idl, true)
}

func (ss *Session) getDataWithBuffers(idl []ids.ObjectID, withShapes bool) ([]byte, []Extent, []uint64, uint64, error) {
	s := ss.s
	s.mu.Lock()
	defer s.mu.Unlock()
	idl = dedupe(idl)
	var bl []*blob
	for round := 0; ; round++ {
		seen := map[ids.ObjectID]bool{}
		bl = bl[:0]
		for _, id := range idl {
			bl = s.text.blobsOfLocked(bl, id, seen)
		}
		if !needsLoad(bl) {
			break
		}
		if round == maxLoadRounds {
			return nil, nil, nil, 0, errLoadRace
		}
		if err := s.sp.loadLocked(bl); err != nil {
			return nil, nil, nil, 0, err
		}
	}
	var shapes []uint64
	var into *[]uint64
	if withShapes {
		into = &shapes
	}
	content, _, err := s.text.contentLocked(idl, uint64(len(bl))*extentBytes, into)
	if err != nil {
		return nil, nil, nil, 0, err
	}
	extents := make([]Extent, 0, len(bl))
	for _, b := range bl {
		if b.state == stateUnsealed {
			continue
		}
		ss.addRefLocked(b)
		extents = append(extents, s.extent(b))
	}
	return content, extents, shapes, s.ep.epochLocked(), nil
}

// Persist marks an object and its non-blob members persisted. The backend
// is called without the store lock (with etcd it is a network round trip,
// which local put and get must not wait for); what changed meanwhile is
// reconciled after: an object deleted in between has its tree taken back,
// one changed in between (a label) is written again.
func (s *Store) Persist(id ids.ObjectID) error {
	s.mu.Lock()
	if id.IsBlob() {
		s.mu.Unlock()
		return status.Errorf(status.AssertionFailed, "blobs cannot be persisted: %v", id)
	}
	o, ok := s.objects[id]
	if !ok {
		_, remote := s.remote[id]
		s.mu.Unlock()
		if remote {
			return nil // persisted by its own instance
		}
		return status.Errorf(status.ObjectNotExists, "object %v does not exist", id)
	}
	var fresh []*object
	s.text.collectTransientLocked(o, map[*object]bool{}, &fresh)
	if len(fresh) == 0 {
		s.mu.Unlock()
		return nil
	}
	trees := make([]meta.Tree, len(fresh))
	for i, o := range fresh {
		o.setField("transient", false)
		o.encodeFields()
		trees[i] = meta.Tree{ID: o.id, Content: s.text.persistedTreeLocked(o)}
		o.setField("transient", true) // until the backend has it
		o.encodeFields()
	}
	s.mu.Unlock()
	if err := s.meta.Persist(trees); err != nil {
		return backendError(err) // nothing changed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone []ids.ObjectID
	for i, o := range fresh {
		if s.objects[o.id] != o {
			gone = append(gone, o.id)
			continue
		}
		if o.persisted {
			continue // a concurrent persist got there first
		}
		o.setField("transient", false)
		o.encodeFields()
		o.persisted = true
		if !bytes.Equal(s.text.persistedTreeLocked(o), trees[i].Content) {
			_ = s.persistTreesLocked(o) // changed meanwhile: queued like a label
		}
		s.emitIDLocked(EventTreeChanged, o.id, 0)
	}
	if len(gone) > 0 {
		_ = s.meta.Delete(gone) // deleted meanwhile: queued as delete does
	}
	return nil
}

// collectTransientLocked appends o and its non-blob members, recursively,
// that are not persisted yet, each once.
func (part *treeWriter) collectTransientLocked(o *object, seen map[*object]bool, out *[]*object) {
	s := part.s
	if o.persisted || seen[o] {
		return
	}
	seen[o] = true
	*out = append(*out, o)
	for _, m := range o.members {
		if mo, ok := s.objects[m.id]; ok {
			s.text.collectTransientLocked(mo, seen, out)
		}
	}
}

// persistedTreeLocked returns what the backend keeps of o: its own fields
// and its members as links {"id":"o…"}; blobs, which are never persisted on
// their own, are written whole (with their instance_id), so other instances
// know their size and where they live.
func (part *treeWriter) persistedTreeLocked(o *object) []byte {
	s := part.s
	dst := append([]byte{'{'}, o.encoded...)
	for i, m := range o.members {
		dst = tree.AppendFieldKey(dst, len(o.encoded)+i, m.key)
		if b, ok := s.lookupBlobLocked(m.id); m.id.IsBlob() && ok {
			dst = s.text.appendBlobTree(dst, b)
			continue
		}
		dst = append(dst, `{"id":"`...)
		dst = m.id.AppendText(dst)
		dst = append(dst, `"}`...)
	}
	return append(dst, '}')
}

// persistTreesLocked updates the backend's tree of o after its fields
// changed, if o is persisted. The backend writes it now or queues it until
// it can (meta.Backend.Update); it refuses only a tree too large for it, or
// once closed, and then keeps the older tree.
func (s *Store) persistTreesLocked(o *object) error {
	if o.persisted {
		return s.meta.Update([]meta.Tree{{ID: o.id, Content: s.text.persistedTreeLocked(o)}})
	}
	return nil
}

// MetaPending returns how many changes of persisted objects (deletes,
// labels, names of deleted objects) wait for the metadata backend to answer
// again (etcd away): instance_status's meta_pending.
func (s *Store) MetaPending() int { return s.meta.Pending() }

// IfPersist reports whether an object is persisted.
func (s *Store) IfPersist(id ids.ObjectID) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id.IsBlob() {
		if _, ok := s.lookupBlobLocked(id); ok {
			return false, nil
		}
	}
	o, ok := s.objects[id]
	if !ok {
		if _, remote := s.remote[id]; remote {
			return true, nil
		}
		return false, status.Errorf(status.ObjectNotExists, "object %v does not exist", id)
	}
	return o.persisted, nil
}

// Label merges labels into the object's "__labels" (a JSON string, as
// upstream).
func (s *Store) Label(id ids.ObjectID, keys, values []string) error {
	if len(keys) != len(values) {
		return status.Errorf(status.Invalid, "label: %d keys but %d values", len(keys), len(values))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[id]
	if !ok {
		if id.IsBlob() {
			return status.Errorf(status.ObjectIsBlob, "blobs cannot be labelled: %v", id)
		}
		return status.Errorf(status.ObjectNotExists, "object %v does not exist", id)
	}
	labels := map[string]string{}
	if raw, ok := o.fields.get("__labels"); ok {
		var text string
		if json.Unmarshal(raw, &text) == nil {
			_ = json.Unmarshal([]byte(text), &labels)
		}
	}
	for i, k := range keys {
		labels[k] = values[i]
	}
	text, _ := json.Marshal(labels)
	old, had := o.fields.get("__labels")
	o.setField("__labels", string(text))
	o.encodeFields()
	if err := s.persistTreesLocked(o); err != nil {
		if had {
			o.fields.set("__labels", old)
		} else {
			o.fields.del("__labels")
		}
		o.encodeFields()
		return backendError(err)
	}
	s.emitIDLocked(EventTreeChanged, o.id, 0)
	return nil
}

// ShallowCopy makes a new object with the fields and members of id, plus the
// scalar fields of extra (a JSON object, may be empty).
func (s *Store) ShallowCopy(id ids.ObjectID, extra json.RawMessage) (ids.ObjectID, error) {
	var add map[string]json.RawMessage
	if len(bytes.TrimSpace(extra)) > 0 && string(bytes.TrimSpace(extra)) != "null" {
		if err := json.Unmarshal(extra, &add); err != nil {
			return 0, status.Errorf(status.Invalid, "shallow_copy: extra must be a JSON object: %v", err)
		}
	}
	if err := tree.CheckText(extra); err != nil {
		return 0, status.Errorf(status.Invalid, "shallow_copy: extra: %v", err)
	}
	for k, v := range add {
		if t := bytes.TrimSpace(v); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
			return 0, status.Errorf(status.Invalid, "shallow_copy: extra value %q is not a scalar", k)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if id.IsBlob() {
		return 0, status.Errorf(status.ObjectIsBlob, "blobs cannot be shallow-copied: %v", id)
	}
	src, ok := s.objects[id]
	if !ok {
		return 0, status.Errorf(status.ObjectNotExists, "object %v does not exist", id)
	}
	o := &object{
		id:       s.gen.Object(),
		typename: src.typename,
		fields:   slices.Clone(src.fields),
		members:  append([]member(nil), src.members...),
	}
	for k, v := range add {
		for _, m := range src.members {
			if m.key == k {
				return 0, status.Errorf(status.Invalid, "shallow_copy: extra field %q names a member", k)
			}
		}
		o.fields.set(k, tree.AppendValue(nil, v))
	}
	o.fields.del("__name")
	o.setField("id", o.id.String())
	o.setField("signature", s.gen.Signature())
	o.setField("transient", true)
	o.encodeFields()
	s.insertLocked(o, 0)
	return o.id, nil
}
