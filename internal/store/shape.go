package store

import (
	"slices"
	"strconv"
	"unsafe"

	"github.com/v6d-io/v6d-go/internal/ids"
)

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
		buf = appendFieldKey(buf, i, f.key)
		if i == sh.idAt || i == sh.sigAt {
			sh.encodedParts[part] = buf
			part++
			buf = nil
			continue
		}
		buf = append(buf, f.raw...)
	}
	sh.encodedParts[part] = buf
}

// keepShapeLocked keeps sh as the shape of content, a copy the objects built
// from it share and nobody writes (buildTreeLocked), so the key is a view of
// it, not another copy.
func (s *Store) keepShapeLocked(content []byte, sh *shape) {
	if s.shapes == nil || len(s.shapes) >= maxShapes {
		s.shapes = make(map[string]*shape)
	}
	s.shapes[unsafe.String(unsafe.SliceData(content), len(content))] = sh
}

// objectOfShapeLocked makes the object of a tree whose text has shape sh, as
// buildObjectLocked and finishObjectLocked would have
// (TestShapesBuildWhatTheTextDoes), and appends it to tb.objs.
// sh.fits(tb.inline) must hold.
func (s *Store) objectOfShapeLocked(sh *shape, tb *treeBuild) {
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
	// The values of id and signature in one buffer, as finishObjectLocked's.
	vals := make([]byte, 0, 48)
	vals = append(vals, '"')
	vals = append(o.id.AppendText(vals), '"')
	id := vals[:len(vals):len(vals)]
	var sig []byte
	if sh.sigAt >= 0 {
		v := tb.sig
		if v == 0 {
			v = s.gen.Signature()
		}
		vals = strconv.AppendUint(vals, v, 10)
		sig = vals[len(id):len(vals):len(vals)]
	}
	// Room for fields set later, as the list buildObjectLocked makes has.
	o.fields = append(make(fieldList, 0, len(sh.done)+2), sh.done...)
	o.fields[sh.idAt].raw = id
	if sh.sigAt >= 0 {
		o.fields[sh.sigAt].raw = sig
	}
	p := &sh.encodedParts
	o.encoded = make([]byte, 0, len(p[0])+len(id)+len(p[1])+len(sig)+len(p[2]))
	o.encoded = append(append(append(append(append(o.encoded, p[0]...), id...), p[1]...), sig...), p[2]...)
	tb.objs = append(tb.objs, o)
}
