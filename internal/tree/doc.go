// Package tree owns the canonical text of a metadata tree: how its strings
// are quoted, in which order its fields are written, what a blob's tree
// looks like, and the shape key that tells two trees of one kind apart
// from two of different kinds. The store writes every tree it returns with
// it, the client rebuilds the daemon's trees with it (own-put gets), libv6d
// and arrowc write the trees they put with it, and the wire codec quotes
// its strings with it, so that there is one writer of tree text in the
// project (docs/design.md, "internal/tree").
//
// The canonical text of a tree is compact JSON (no white space outside
// strings), valid UTF-8, with:
//
//   - every string quoted by AppendString, as encoding/json writes it with
//     HTML escaping off: '"' and '\' escaped, control characters as \b \f
//     \n \r \t or \u00XX, U+2028 and U+2029 as \u2028 and \u2029, everything
//     else (U+007F, "<", non-ASCII) as it is;
//   - an object's scalar fields (values that are not objects) first, in
//     byte order of their keys, each key once (of a repeated key the last
//     value counts), then its members (values that are objects, nested
//     trees) in byte order of their keys, each written the same way;
//   - a blob's tree in the fixed order AppendBlob writes (id, typename,
//     length, nbytes, instance_id, transient), any other fields after it in
//     key order;
//   - values inside arrays kept in their order, numbers as written.
//
// A text that is not valid UTF-8, or holds a \u escape of a lone UTF-16
// surrogate, has no canonical form: CheckText refuses it (encoding/json
// and Python would each turn it into different text).
//
// The package is a leaf but for internal/jsonscan, the project's one JSON
// scanner, which it reads trees with.
package tree
