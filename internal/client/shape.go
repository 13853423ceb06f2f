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
