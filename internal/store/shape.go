package store

import (
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
	fields   fieldList     // the text's scalar fields, sorted, before the daemon's; they share the kept text
	typename string        // as object.typename
	members  []shapeMember // in key order, as object.members
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
// buildObjectLocked would have (TestShapesBuildWhatTheTextDoes), and appends
// it to tb.objs. sh.fits(tb.inline) must hold.
func (s *Store) objectOfShapeLocked(sh *shape, tb *treeBuild) {
	o := &object{id: tb.root, typename: sh.typename}
	if o.id == 0 {
		o.id = s.gen.Object()
	}
	// Room for the fields the daemon sets (finishObjectLocked), as the list
	// buildObjectLocked makes has.
	o.fields = append(make(fieldList, 0, len(sh.fields)+5), sh.fields...)
	if len(sh.members) > 0 {
		o.members = make([]member, len(sh.members))
		for i, m := range sh.members {
			o.members[i] = member{key: m.key, id: tb.inline[m.inline]}
		}
	}
	s.finishObjectLocked(o, 0, tb)
}
