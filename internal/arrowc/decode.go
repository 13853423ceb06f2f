package arrowc

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/jsonscan"
)

// The decoder reads a metadata tree (JSON, as the daemon returns it) in one
// pass into typed structs, skipping keys it does not know. It never trusts
// the tree: every malformation is an ErrInvalidLayout, never a panic.

// scanner reads JSON from Buf: the project's one scanner
// (internal/jsonscan), with the layout's own readers on top. Its syntax
// errors become ErrInvalidLayout in decodeRaw.
type scanner struct {
	jsonscan.Scanner
}

func (s *scanner) fail(what string) error {
	return errorf(ErrInvalidLayout, "malformed metadata tree at byte %d: %s", s.Pos, what)
}

// typename reads a typename; the blob's, which every buffer has, without
// allocating.
func (s *scanner) typename() (string, error) {
	raw, escaped, err := s.RawString()
	if err != nil {
		return "", err
	}
	if !escaped && string(raw[1:len(raw)-1]) == typeBlob {
		return typeBlob, nil
	}
	if !escaped {
		return string(raw[1 : len(raw)-1]), nil
	}
	return s.Unquote(raw)
}

// id reads an object id; the daemon's spelling, "o%016x", without
// allocating.
func (s *scanner) id() (ids.ObjectID, error) {
	raw, _, err := s.RawString()
	if err != nil {
		return 0, err
	}
	text := raw[1 : len(raw)-1]
	slow := func() (ids.ObjectID, error) { // any other spelling ids.Parse takes
		id, err := ids.Parse(string(text))
		if err != nil {
			return 0, s.fail("bad id")
		}
		return id, nil
	}
	if len(text) != 17 || text[0] != 'o' {
		return slow()
	}
	var v uint64
	for _, c := range text[1:] {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | uint64(c-'a'+10)
		default:
			return slow()
		}
	}
	return ids.ObjectID(v), nil
}

func (s *scanner) int() (int64, error) {
	s.WS()
	start := s.Pos
	if s.Pos < len(s.Buf) && s.Buf[s.Pos] == '-' {
		s.Pos++
	}
	for s.Pos < len(s.Buf) && s.Buf[s.Pos] >= '0' && s.Buf[s.Pos] <= '9' {
		s.Pos++
	}
	v, err := strconv.ParseInt(string(s.Buf[start:s.Pos]), 10, 64)
	if err != nil {
		return 0, s.fail("expected an integer")
	}
	return v, nil
}

// pairs reads a metadata list [[key, value], ...], base64-encoded when b64.
func (s *scanner) pairs(b64 bool) ([]kv, error) {
	if err := s.Expect('['); err != nil {
		return nil, err
	}
	out := []kv{}
	if s.Peek() == ']' {
		s.Pos++
		return out, nil
	}
	for {
		var p [2]string
		if err := s.Expect('['); err != nil {
			return nil, err
		}
		for j := range p {
			if j == 1 {
				if err := s.Expect(','); err != nil {
					return nil, err
				}
			}
			v, err := s.Str()
			if err != nil {
				return nil, err
			}
			if b64 {
				d, err := base64.StdEncoding.DecodeString(v)
				if err != nil {
					return nil, s.fail("bad base64 metadata")
				}
				v = string(d)
			}
			p[j] = v
		}
		if err := s.Expect(']'); err != nil {
			return nil, err
		}
		out = append(out, kv{p[0], p[1]})
		switch s.Peek() {
		case ',':
			s.Pos++
		case ']':
			s.Pos++
			return out, nil
		default:
			return nil, s.fail("expected , or ]")
		}
	}
}

// raw is one object of the tree with the keys the layout uses.
type raw struct {
	typename string
	id       ids.ObjectID
	hasID    bool
	format   string
	hasFmt   bool
	name     string
	flags    int64
	length   int64 // length_ (array, chunked array) or row_num_ / num_rows_
	nulls    int64
	offset   int64
	meta     []kv
	members  [5][]*raw // buffers, children, columns, partitions, chunks
	sizes    [5]int64  // their "-size" fields; -1 when absent
	dict     *raw
	schema   *raw // schema_ (table) or type_ (chunked array)
	hasLen   bool
}

var indexedKeys = [5]string{keyBuffers, keyChildren, keyColumns, keyPartitions, keyChunks}

// decodeRaw reads a tree.
func decodeRaw(b []byte) (*raw, error) {
	s := &scanner{jsonscan.Scanner{Buf: b, MaxDepth: 2*maxDepth + 8}}
	r, err := s.raw(0)
	if err != nil {
		var syntax *jsonscan.SyntaxError
		if errors.As(err, &syntax) {
			return nil, errorf(ErrInvalidLayout, "malformed metadata tree at byte %d: %s", syntax.Offset, syntax.What)
		}
		return nil, err
	}
	if s.Peek() != 0 {
		return nil, s.fail("trailing data")
	}
	return r, nil
}

func (s *scanner) raw(depth int) (*raw, error) {
	if depth > 2*maxDepth {
		return nil, s.fail("nested too deeply")
	}
	r := &raw{sizes: [5]int64{-1, -1, -1, -1, -1}}
	if err := s.Expect('{'); err != nil {
		return nil, err
	}
	if s.Peek() == '}' {
		s.Pos++
		return r, nil
	}
	for {
		key, err := s.Key()
		if err == nil {
			err = s.Expect(':')
		}
		if err == nil {
			err = s.field(r, key, depth)
		}
		if err != nil {
			return nil, err
		}
		switch s.Peek() {
		case ',':
			s.Pos++
		case '}':
			s.Pos++
			return r, nil
		default:
			return nil, s.fail("expected , or }")
		}
	}
}

// field reads the value of key into r; key is not kept.
func (s *scanner) field(r *raw, key []byte, depth int) error {
	var err error
	switch string(key) { // no allocation: the compiler compares in place
	case "typename":
		r.typename, err = s.typename()
	case "id":
		r.id, err = s.id()
		r.hasID = err == nil
	case keyFormat:
		r.format, err = s.Str()
		r.hasFmt = true
	case keyName:
		r.name, err = s.Str()
	case keyFlags:
		r.flags, err = s.int()
	case keyLength, "row_num_", "num_rows_":
		r.length, err = s.int()
		r.hasLen = true
	case "length": // a blob's size; the view's length is what counts
		err = s.Skip(depth)
	case keyNullCount:
		r.nulls, err = s.int()
	case keyOffset:
		r.offset, err = s.int()
	case keyMetadata, keySchemaMeta:
		r.meta, err = s.pairs(false)
	case keyMetadata64, keySchemaMeta4:
		r.meta, err = s.pairs(true)
	case keyDictionary:
		r.dict, err = s.raw(depth + 1)
	case keySchema, keyType:
		r.schema, err = s.raw(depth + 1)
	case keyValues:
		return s.member(r, 1, 0, key, depth)
	default:
		return s.indexed(r, key, depth)
	}
	return err
}

// indexed reads a "<prefix><i>" member or "<prefix>size" field, or skips an
// unknown key.
func (s *scanner) indexed(r *raw, key []byte, depth int) error {
	for k, prefix := range indexedKeys {
		rest, ok := bytes.CutPrefix(key, []byte(prefix))
		if !ok {
			continue
		}
		if string(rest) == "size" {
			n, err := s.int()
			if err == nil && (n < 0 || n > int64(len(s.Buf))) {
				err = s.fail("bad " + string(key))
			}
			r.sizes[k] = n
			return err
		}
		i, ok := index(rest)
		if !ok || i > len(s.Buf) {
			return s.fail("bad member key " + strconv.Quote(string(key)))
		}
		return s.member(r, k, i, key, depth)
	}
	return s.Skip(depth)
}

// member reads the i-th member of kind k (an index of indexedKeys), stored
// under key.
func (s *scanner) member(r *raw, k, i int, key []byte, depth int) error {
	m, err := s.raw(depth + 1)
	if err != nil {
		return err
	}
	list := r.members[k]
	for len(list) <= i {
		list = append(list, nil)
	}
	if list[i] != nil {
		return s.fail("repeated member " + strconv.Quote(string(key)))
	}
	list[i] = m
	r.members[k] = list
	return nil
}

// index parses a member index: decimal digits, no leading zero.
func index(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 9 || (len(b) > 1 && b[0] == '0') {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// list returns the members of kind k, checked against their "-size" field.
func (r *raw) list(k int) ([]*raw, error) {
	got := r.members[k]
	if r.sizes[k] < 0 && len(got) == 0 {
		return nil, nil
	}
	if int64(len(got)) != r.sizes[k] {
		return nil, errorf(ErrInvalidLayout, "%s: %d members for %ssize %d", r.typename, len(got), indexedKeys[k], r.sizes[k])
	}
	for i, m := range got {
		if m == nil {
			return nil, errorf(ErrInvalidLayout, "%s: member %s%d is missing", r.typename, indexedKeys[k], i)
		}
	}
	return got, nil
}

// ---- raw → object ----------------------------------------------------------

// decoder turns raw trees into objects, collecting the blobs they use.
type decoder struct {
	blobs []ids.ObjectID
}

// decodeObject reads the tree of an Arrow object (or a member subtree).
func decodeObject(tree []byte) (*object, []ids.ObjectID, error) {
	r, err := decodeRaw(tree)
	if err != nil {
		return nil, nil, err
	}
	d := &decoder{}
	o, err := d.object(r)
	if err != nil {
		return nil, nil, err
	}
	return o, d.blobs, nil
}

func (d *decoder) object(r *raw) (*object, error) {
	o := &object{typename: r.typename}
	switch r.typename {
	case typeRecordBatch:
		b, err := d.batch(r, r.meta)
		if err != nil {
			return nil, err
		}
		o.items, o.schema = []*node{b}, b.f
	case typeTable:
		parts, err := r.list(3)
		if err != nil {
			return nil, err
		}
		for _, p := range parts {
			if p.typename != typeRecordBatch {
				return nil, errorf(ErrInvalidLayout, "a partition of a table is a %q", p.typename)
			}
			b, err := d.batch(p, r.meta)
			if err != nil {
				return nil, err
			}
			o.items = append(o.items, b)
		}
		if err := d.schemaOf(o, r, typeRecordBatch, func(s *raw) (*node, error) { return d.batch(s, r.meta) }); err != nil {
			return nil, err
		}
	case typeChunkedArray:
		chunks, err := r.list(4)
		if err != nil {
			return nil, err
		}
		for _, c := range chunks {
			n, err := d.node(c, 0)
			if err != nil {
				return nil, err
			}
			o.items = append(o.items, n)
		}
		if err := d.schemaOf(o, r, "", func(s *raw) (*node, error) { return d.node(s, 0) }); err != nil {
			return nil, err
		}
	default:
		if !r.hasFmt {
			return nil, errorf(ErrNotArrow, "object of type %q is not an Arrow object", r.typename)
		}
		n, err := d.node(r, 0)
		if err != nil {
			return nil, err
		}
		o.items, o.schema = []*node{n}, n.f
	}
	return o, nil
}

// schemaOf sets the schema of a table or chunked array: its first item's, or
// the stored schema_/type_ when it has none; every item must have that type.
func (d *decoder) schemaOf(o *object, r *raw, want string, decode func(*raw) (*node, error)) error {
	if len(o.items) > 0 {
		o.schema = o.items[0].f
	} else {
		if r.schema == nil || (want != "" && r.schema.typename != want) {
			return errorf(ErrInvalidLayout, "%s without items has no %s", r.typename, map[bool]string{true: keySchema, false: keyType}[want != ""])
		}
		n, err := decode(r.schema)
		if err != nil {
			return err
		}
		o.schema = n.f
	}
	for _, it := range o.items[min(1, len(o.items)):] {
		if !sameType(it.f, o.schema) {
			return errorf(ErrInvalidLayout, "the items of a %s differ in type", r.typename)
		}
	}
	return nil
}

// batch reads a record batch as a struct node whose children are its
// columns, with the schema metadata meta.
func (d *decoder) batch(r *raw, meta []kv) (*node, error) {
	cols, err := r.list(2)
	if err != nil {
		return nil, err
	}
	if !r.hasLen || r.length < 0 {
		return nil, errorf(ErrInvalidLayout, "record batch without a valid row_num_")
	}
	n := &node{f: &field{format: "+s", metadata: meta}, length: r.length}
	for i, c := range cols {
		cn, err := d.node(c, 1)
		if err != nil {
			return nil, err
		}
		if cn.length != r.length {
			return nil, errorf(ErrInvalidLayout, "column %d has %d rows, the batch %d", i, cn.length, r.length)
		}
		n.children = append(n.children, cn)
		n.f.children = append(n.f.children, cn.f)
	}
	n.bufs = []int{-1}
	err = n.typeFromChildren()
	return n, err
}

// node reads an array node.
func (d *decoder) node(r *raw, depth int) (*node, error) {
	if depth > maxDepth {
		return nil, errorf(ErrInvalidLayout, "arrays nest deeper than %d", maxDepth)
	}
	if !r.hasFmt {
		return nil, errorf(ErrInvalidLayout, "array member of type %q has no %s", r.typename, keyFormat)
	}
	if !r.hasLen || r.length < 0 || r.offset < 0 || r.nulls < -1 || r.nulls > r.length ||
		r.offset > (1<<62)-r.length {
		return nil, errorf(ErrInvalidLayout, "array of format %q has a bad length %d, offset %d or null count %d",
			r.format, r.length, r.offset, r.nulls)
	}
	n := &node{
		f:      &field{format: r.format, name: r.name, flags: r.flags, metadata: r.meta},
		length: r.length, nulls: r.nulls, offset: r.offset,
	}
	bufs, err := r.list(0)
	if err != nil {
		return nil, err
	}
	for _, b := range bufs {
		if !b.hasID || !b.id.IsBlob() {
			return nil, errorf(ErrInvalidLayout, "a buffer of an array of format %q is not a blob", r.format)
		}
		if b.id == ids.EmptyBlob {
			n.bufs = append(n.bufs, -1)
			continue
		}
		n.bufs = append(n.bufs, len(d.blobs))
		d.blobs = append(d.blobs, b.id)
	}
	children, err := r.list(1)
	if err != nil {
		return nil, err
	}
	for _, c := range children {
		cn, err := d.node(c, depth+1)
		if err != nil {
			return nil, err
		}
		n.children = append(n.children, cn)
		n.f.children = append(n.f.children, cn.f)
	}
	if r.dict != nil {
		if n.dict, err = d.node(r.dict, depth+1); err != nil {
			return nil, err
		}
		n.f.dict = n.dict.f
	}
	err = n.typeFromChildren()
	return n, err
}

// typeFromChildren sets n.dt from its format and its children's types.
func (n *node) typeFromChildren() error {
	children := make([]arrow.Field, len(n.children))
	for i, c := range n.children {
		children[i] = arrow.Field{Name: c.f.name, Type: c.dt, Nullable: c.f.flags&flagNullable != 0}
	}
	dt, err := parseFormat(n.f.format, children, n.f.flags)
	if err != nil {
		return err
	}
	if n.dict != nil {
		if dt, err = dictionaryOf(n.f, dt, n.dict.dt); err != nil {
			return err
		}
	}
	n.dt = dt
	return nil
}

// sameType reports whether a and b describe the same type (formats, flags
// and names of the whole tree; metadata aside).
func sameType(a, b *field) bool {
	if a.format != b.format || len(a.children) != len(b.children) || (a.dict == nil) != (b.dict == nil) {
		return false
	}
	for i := range a.children {
		if a.children[i].name != b.children[i].name || a.children[i].flags != b.children[i].flags ||
			!sameType(a.children[i], b.children[i]) {
			return false
		}
	}
	return a.dict == nil || sameType(a.dict, b.dict)
}
