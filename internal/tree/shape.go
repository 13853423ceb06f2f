package tree

import "bytes"

// Shapes. Two trees of values of one kind (arrays of one dtype and shape,
// frames of the same columns) differ only in their ids and signatures: a
// reader that made something of the first (the Python package's get plans)
// can make the same of the next without reading it. The shape key of a
// tree's text is that text with every id and signature cut out
// (AppendShapeKey); a Shapes table numbers the keys it sees.

// MaxShapeTree is the longest tree text that gets a shape number; longer
// ones get 0, and their readers parse them. An Arrow table of 10 columns is
// 10 KiB, of 64 columns about 64 KiB.
const MaxShapeTree = 64 << 10

// Marks of the cuts in a shape key: bytes that never occur in UTF-8 text.
const (
	idMark        = 0xff
	signatureMark = 0xfe
)

// AppendShapeKey appends the shape key of tree, canonical tree text, to
// dst: the text with every member value that is an id (a string "o" and
// 16 lowercase hex digits) and the integer of every "signature" member cut
// out, a mark of the cut's kind in its place. It visits each colon: in
// canonical text a colon followed by a quote, "o", 16 hex digits and a
// quote is a member whose value is an id (a colon inside a string is
// followed by an escaped quote or none), and one that follows "signature"
// with its quotes is a signature member when an integer and ',' or '}'
// follow. A text that is not JSON still gets a key, never a panic.
func AppendShapeKey(dst, tree []byte) []byte {
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

// Shapes numbers shape keys: equal numbers mean equal keys, compared byte
// for byte (interned, never a hash that may collide), and a number is never
// given to another key by the same table. It is bounded: when it holds
// maxKeys keys or maxBytes bytes of them it starts over, and the numbers
// given before are simply not given again. Not safe for concurrent use.
type Shapes struct {
	m        map[string]uint64
	bytes    int
	next     uint64
	buf      []byte // the key being looked up
	maxKeys  int
	maxBytes int
}

// NewShapes returns a table of at most maxKeys keys and maxBytes bytes of
// them.
func NewShapes(maxKeys, maxBytes int) *Shapes {
	return &Shapes{m: make(map[string]uint64), maxKeys: maxKeys, maxBytes: maxBytes}
}

// Number returns the shape number of tree, canonical tree text: 1 or
// more, or 0 for a tree longer than MaxShapeTree.
func (t *Shapes) Number(tree []byte) uint64 {
	if len(tree) > MaxShapeTree {
		return 0
	}
	key := AppendShapeKey(t.buf[:0], tree)
	t.buf = key
	if n, ok := t.m[string(key)]; ok {
		return n
	}
	if len(t.m) >= t.maxKeys || t.bytes+len(key) > t.maxBytes {
		clear(t.m)
		t.bytes = 0
	}
	t.next++
	t.m[string(key)] = t.next
	t.bytes += len(key)
	return t.next
}
