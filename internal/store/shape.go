package store

import (
	"slices"
	"strconv"
	"unsafe"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/tree"
)

// shapeCache keeps what the store made of tree texts put before, to build
// the next tree of the same text by copying (shape.go).
type shapeCache struct{ s *Store }

// Tree shapes. A client putting arrays of one dtype and shape sends the same
// tree text with every put, its members naming the put's blobs by position
// ({"inline": i}). What buildObjectLocked makes of such a text, everything but
// the object's id, signature and blobs, is kept by text, and the next tree of
// the same text is copied from it: no validating, splitting and sorting of
// the text again (15% of the daemon's samples in a loop of small puts).

// maxShapes bounds the texts kept; a store that sees more starts afresh.
const maxShapes = 64

// shape is what buildObjectLocked made of a tree text whose members are all
// {"inline": i} links and that nests no new object.
type shape struct {
	typename string        // as object.typename
	members  []shapeMember // in key order, as object.members
	sigGiven bool          // the text has its own signature

	// What finishObjectLocked made of the text (finishShape): every field,
	// sorted, the daemon's included, sharing the kept text; the positions of the two that differ between
	// objects of the shape, id and signature (-1: the text gives its own);
	// and the encoded fields cut around their values.
	done         fieldList
	idAt, sigAt  int
	encodedParts [3][]byte

	// The number of the full tree (directory.shapes) of the last object of
	// this shape published, and its blobs' sizes: the trees of objects of
	// one shape whose blobs have those sizes differ only in ids and
	// signature, so they have that number too (treeShapeLocked).
	treeShape uint64
	treeSizes []uint64
}

// shapeMember is a member of a shape: the blob at position inline of a create.
type shapeMember struct {
	key    string
	inline int
}

// fits reports whether every member of sh has a blob among inline; a tree
// that does not goes through buildObjectLocked, which says why not.
func (sh *shape) fits(inline []ids.ObjectID) bool {
	for _, m := range sh.members {
		if m.inline >= len(inline) {
			return false
		}
	}
	return true
}

// finishShape completes sh from o, the object its text made, finished
// (finishObjectLocked).
func (sh *shape) finishShape(o *object) {
	sh.done = slices.Clone(o.fields)
	sh.idAt, _ = sh.done.find("id")
	sh.sigAt = -1
	if !sh.sigGiven {
		sh.sigAt, _ = sh.done.find("signature")
	}
	// The encoding of done (encodeFields), cut before and after the values
	// of id and signature: id sorts before signature.
	var buf []byte
	part := 0
	for i, f := range sh.done {
		buf = tree.AppendFieldKey(buf, i, f.Key)
		if i == sh.idAt || i == sh.sigAt {
			sh.encodedParts[part] = buf
			part++
			buf = nil
			continue
		}
		buf = append(buf, f.Raw...)
	}
	sh.encodedParts[part] = buf
}

// keepShapeLocked keeps sh as the shape of content, a copy the objects built
// from it share and nobody writes (buildTreeLocked), so the key is a view of
// it, not another copy.
func (part *shapeCache) keepShapeLocked(content []byte, sh *shape) {
	s := part.s
	if s.shapes == nil || len(s.shapes) >= maxShapes {
		s.shapes = make(map[string]*shape)
	}
	s.shapes[unsafe.String(unsafe.SliceData(content), len(content))] = sh
}

// objectOfShapeLocked makes the object of a tree whose text has shape sh, as
// buildObjectLocked and finishObjectLocked would have
// (TestShapesBuildWhatTheTextDoes), and appends it to tb.objs.
// sh.fits(tb.inline) must hold.
func (part *shapeCache) objectOfShapeLocked(sh *shape, tb *treeBuild) {
	s := part.s
	o := &object{id: tb.root, typename: sh.typename}
	if o.id == 0 {
		o.id = s.gen.Object()
	}
	if len(sh.members) > 0 {
		o.members = make([]member, len(sh.members))
		for i, m := range sh.members {
			o.members[i] = member{key: m.key, id: tb.inline[m.inline]}
		}
	}
	// The encoded fields, the shape's parts around the values of id and
	// signature; those two fields' raw values are views of it (capped: an
	// append to one never writes into the other). encodeFields always makes
	// a new buffer, so the views stay valid. 48 bytes hold both values.
	p := &sh.encodedParts
	enc := make([]byte, 0, len(p[0])+len(p[1])+len(p[2])+48)
	enc = append(enc, p[0]...)
	at := len(enc)
	enc = append(enc, '"')
	enc = append(o.id.AppendText(enc), '"')
	id := enc[at:len(enc):len(enc)]
	enc = append(enc, p[1]...)
	var sig []byte
	if sh.sigAt >= 0 {
		v := tb.sig
		if v == 0 {
			v = s.gen.Signature()
		}
		at = len(enc)
		enc = strconv.AppendUint(enc, v, 10)
		sig = enc[at:len(enc):len(enc)]
	}
	enc = append(enc, p[2]...)
	o.encoded = enc
	o.fromShape = sh
	// Room for fields set later, as the list buildObjectLocked makes has.
	o.fields = append(make(fieldList, 0, len(sh.done)+2), sh.done...)
	o.fields[sh.idAt].Raw = id
	if sh.sigAt >= 0 {
		o.fields[sh.sigAt].Raw = sig
	}
	tb.objs = append(tb.objs, o)
}

// treeShapeLocked returns the directory's shape number of text, the full
// tree of id: by its shape when id was made from one (object.fromShape) and
// its blobs have the sizes the shape's last numbered object had, else by
// cutting the text (tree.Shapes.Number), a few hundred nanoseconds a put
// spares. s.dir must not be nil.
func (part *shapeCache) treeShapeLocked(id ids.ObjectID, text []byte) uint64 {
	s := part.s
	o, ok := s.objects[id]
	if !ok || o.fromShape == nil {
		return s.dir.shapes.Number(text)
	}
	sh := o.fromShape
	if sh.treeShape != 0 && len(sh.treeSizes) == len(o.members) && s.shapec.blobSizesAreLocked(o.members, sh.treeSizes) {
		return sh.treeShape
	}
	n := s.dir.shapes.Number(text)
	sizes := make([]uint64, 0, len(o.members))
	for _, m := range o.members {
		b, ok := s.lookupBlobLocked(m.id)
		if !ok {
			return n // not a tree of blobs the store has: not kept
		}
		sizes = append(sizes, b.size)
	}
	sh.treeShape, sh.treeSizes = n, sizes
	return n
}

// blobSizesAreLocked reports whether the blobs of members have sizes.
func (part *shapeCache) blobSizesAreLocked(members []member, sizes []uint64) bool {
	s := part.s
	for i, m := range members {
		if b, ok := s.lookupBlobLocked(m.id); !ok || b.size != sizes[i] {
			return false
		}
	}
	return true
}
