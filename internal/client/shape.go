package client

import (
	"sync"

	"github.com/v6d-io/v6d-go/internal/tree"
)

// Tree shapes: a number per distinct metadata tree text once its ids and
// signatures are cut out (tree.AppendShapeKey), so that a caller making
// many gets of values of one kind (arrays of one dtype and shape) can reuse
// what it made of the first tree instead of parsing each one (the Python
// package's get plans, v6d_get_object_shaped). Two trees with one number
// differ only in those; a number is never given to another shape within a
// process.

// The bounds of the process's table: when either is reached it starts
// over, and the numbers given before are simply not given again.
const (
	maxShapes     = 4096
	maxShapeBytes = 16 << 20
)

var shapes = struct {
	mu sync.Mutex
	t  *tree.Shapes
}{t: tree.NewShapes(maxShapes, maxShapeBytes)}

// TreeShape returns the shape number of text, a tree's JSON as the daemon
// writes it: 1 or more, or 0 for a tree longer than tree.MaxShapeTree.
func TreeShape(text []byte) uint64 {
	if len(text) > tree.MaxShapeTree {
		return 0
	}
	shapes.mu.Lock()
	defer shapes.mu.Unlock()
	return shapes.t.Number(text)
}

// Shape numbers from the daemon. The daemon numbers the shapes of the
// trees it publishes (each directory record carries its tree's number), so
// a get need not cut the tree's text to learn its shape. Its numbers are
// the daemon's, though, and a process may talk to several daemons, whose
// numbers mean different shapes: TreeShapeOf maps each number of this
// client's daemon to the process's number of the same shape, found once
// from the text (TreeShape), then by a map lookup, a tenth of the cut's
// cost. Equal process numbers still mean equal shapes: the daemon gives a
// number to one shape key only, the key TreeShape cuts from the same text.

// maxShapeMap bounds a client's map; when full it starts over.
const maxShapeMap = 4096

// shapeMap maps a daemon's shape numbers to the process's.
type shapeMap struct {
	mu sync.Mutex
	m  map[uint64]uint64
}

// TreeShapeOf returns the process's shape number of text, a tree this
// client got with the daemon's shape number daemonShape (0: not known, as
// GetObjectViews hands it over): TreeShape(text), looked up by
// daemonShape when the client saw that number before.
func (c *Client) TreeShapeOf(daemonShape uint64, text []byte) uint64 {
	if daemonShape == 0 {
		return TreeShape(text)
	}
	sm := &c.shapes
	sm.mu.Lock()
	n, ok := sm.m[daemonShape]
	sm.mu.Unlock()
	if ok {
		return n
	}
	n = TreeShape(text)
	sm.mu.Lock()
	if sm.m == nil || len(sm.m) >= maxShapeMap {
		sm.m = make(map[uint64]uint64)
	}
	sm.m[daemonShape] = n
	sm.mu.Unlock()
	return n
}
