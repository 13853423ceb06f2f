package client

import (
	"bytes"
	"sync"
)

// Tree shapes: a number per distinct metadata tree text once the member
// values that are object ids and the signature integers are cut out, so
// that a caller making many gets of values of one kind (arrays of one dtype
// and shape) can reuse what it made of the first tree instead of parsing
// each one (the Python package's get plans, v6d_get_object_shaped). Two
// trees with one number differ only in those; a number is never given to
// another shape within a process. The table is interned, not hashed: equal
// numbers mean equal shapes, compared byte for byte, never a hash that may
// collide.

const (
	// maxShapeTree is the longest tree that gets a shape number; longer
	// ones get 0, and their callers parse them. An Arrow table of 10
	// columns is 10 KiB, of 64 columns about 64 KiB.
	maxShapeTree = 64 << 10
	// maxShapes and maxShapeBytes bound the table: when either is reached
	// it starts over, and the numbers given before are simply not given
	// again.
	maxShapes     = 4096
	maxShapeBytes = 16 << 20
)

var shapes = struct {
	mu    sync.Mutex
	m     map[string]uint64
	bytes int // of the skeletons in m
	next  uint64
	buf   []byte // the skeleton being looked up
}{m: make(map[string]uint64)}

// TreeShape returns the shape number of tree, a tree's JSON as the daemon
// writes it (valid, without spaces): 1 or more, or 0 for a tree longer than
// maxShapeTree. What is cut out: every member value that is an id (a
// string "o" and 16 lowercase hex digits) and the integer of every
// "signature" member. What remains, with a mark for each cut and its kind,
// is the shape.
func TreeShape(tree []byte) uint64 {
	if len(tree) > maxShapeTree {
		return 0
	}
	shapes.mu.Lock()
	defer shapes.mu.Unlock()
	skel := skeleton(shapes.buf[:0], tree)
	shapes.buf = skel
	if n, ok := shapes.m[string(skel)]; ok {
		return n
	}
	if len(shapes.m) >= maxShapes || shapes.bytes+len(skel) > maxShapeBytes {
		clear(shapes.m)
		shapes.bytes = 0
	}
	shapes.next++
	shapes.m[string(skel)] = shapes.next
	shapes.bytes += len(skel)
	return shapes.next
}

// Marks of the cuts in a skeleton: bytes that never occur in UTF-8 text.
const (
	idMark        = 0xff
	signatureMark = 0xfe
)

// skeleton appends tree with its ids and signatures cut out to dst. It
// visits each colon: in JSON text a colon followed by a quote, "o", 16 hex
// digits and a quote is a member whose value is an id (a colon inside a
// string is followed by an escaped quote or none), and one that follows
// "signature" with its quotes is a signature member when an integer and
// ',' or '}' follow. A text that is not JSON still gets a skeleton, never
// a panic.
func skeleton(dst, tree []byte) []byte {
	from := 0 // tree[from:] is not appended yet
	for i := 0; ; {
		c := bytes.IndexByte(tree[i:], ':')
		if c < 0 {
			break
		}
		c += i
		i = c + 1
		switch {
		case c+20 <= len(tree) && tree[c+1] == '"' && tree[c+2] == 'o' && tree[c+19] == '"' && isHex16(tree[c+3:c+19]):
			dst = append(append(dst, tree[from:c+1]...), idMark)
			from, i = c+20, c+20
		case c >= len(signatureKey) && string(tree[c-len(signatureKey):c]) == signatureKey:
			if stop := integerEnd(tree, c+1); stop > 0 {
				dst = append(append(dst, tree[from:c+1]...), signatureMark)
				from, i = stop, stop
			}
		}
	}
	return append(dst, tree[from:]...)
}

const signatureKey = `"signature"`

// isHex16 reports whether s is 16 lowercase hex digits.
func isHex16(s []byte) bool {
	if len(s) != 16 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// integerEnd returns the end of the integer at tree[i:] when it is followed
// by ',' or '}' (a whole member value), else 0.
func integerEnd(tree []byte, i int) int {
	if i < len(tree) && tree[i] == '-' {
		i++
	}
	start := i
	for i < len(tree) && tree[i] >= '0' && tree[i] <= '9' {
		i++
	}
	if i == start || i >= len(tree) || (tree[i] != ',' && tree[i] != '}') {
		return 0
	}
	return i
}
