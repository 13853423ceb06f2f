package tree

import (
	"errors"
	"slices"

	"github.com/v6d-io/v6d-go/internal/jsonscan"
)

// ErrNotTree is returned by Canonical for text that is not a JSON object.
var ErrNotTree = errors.New("tree: not a metadata tree (a JSON object)")

// maxDepth bounds the nesting Canonical follows, as jsonscan's scanner does.
const maxDepth = jsonscan.DefaultMaxDepth

// Canonical returns the canonical text of the tree text (package doc):
// what the store returns for a tree of that content. It is the decoder
// and encoder that define the form; the store builds the same text in
// place, field by field (FuzzTreeRoundTrip in internal/store checks that
// the two agree).
func Canonical(text []byte) ([]byte, error) {
	if !jsonscan.Valid(text) {
		return nil, ErrNotTree
	}
	if err := CheckText(text); err != nil {
		return nil, err
	}
	return appendCanonical(nil, text, 0)
}

func appendCanonical(dst, obj []byte, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, ErrNotTree
	}
	var all []Field
	if err := jsonscan.ObjectFields(obj, func(key string, raw []byte) error {
		all = append(all, Field{Key: key, Raw: raw})
		return nil
	}); err != nil {
		return nil, ErrNotTree
	}
	fields, members := Split(all)
	Canon(fields)
	if i, ok := Find(fields, "typename"); ok && string(fields[i].Raw) == `"`+BlobTypename+`"` {
		fields = blobFirst(fields)
	}
	dst = AppendFields(append(dst, '{'), fields)
	for i, m := range members {
		dst = AppendFieldKey(dst, i+len(fields), m.Key)
		var err error
		if dst, err = appendCanonical(dst, m.Raw, depth+1); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// blobFirst reorders the sorted fields of a blob: those of blobOrder first,
// in that order, then the rest in key order.
func blobFirst(fields []Field) []Field {
	out := make([]Field, 0, len(fields))
	for _, k := range blobOrder {
		if i, ok := Find(fields, k); ok {
			out = append(out, fields[i])
		}
	}
	for _, f := range fields {
		if !slices.Contains(blobOrder, f.Key) {
			out = append(out, f)
		}
	}
	return out
}
