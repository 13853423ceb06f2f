package arrowc

import (
	"encoding/base64"
	"strconv"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/tree"
)

// The stored layout (docs/protocol.md, "Arrow objects"): one object per array
// node, recursive. The typenames and keys below are the whole format.
const (
	typeRecordBatch  = "vineyard::RecordBatch"
	typeTable        = "vineyard::Table"
	typeChunkedArray = "vineyard::ChunkedArray"
	typeBlob         = "vineyard::Blob"

	keyFormat      = "format_"
	keyName        = "name_"
	keyFlags       = "flags_"
	keyMetadata    = "metadata_"
	keyMetadata64  = "metadata_base64_"
	keyLength      = "length_"
	keyNullCount   = "null_count_"
	keyOffset      = "offset_"
	keyDictionary  = "dictionary_"
	keyBuffers     = "buffers_-"
	keyChildren    = "children_-"
	keyValues      = "values_" // children_-0 of a list array (upstream's name)
	keyColumns     = "__columns_-"
	keyPartitions  = "partitions_-"
	keyChunks      = "chunks_-"
	keySchema      = "schema_"
	keyType        = "type_"
	keySchemaMeta  = "schema_metadata_"
	keySchemaMeta4 = "schema_metadata_base64_"
)

// node is one array of an Arrow object: its type (f), its shape, and its
// buffers as indexes into the object's list of blobs (-1: absent, stored as
// the empty blob).
type node struct {
	f        *field
	dt       arrow.DataType
	length   int64
	nulls    int64
	offset   int64
	bufs     []int
	children []*node
	dict     *node
	// wide is, for a 32-bit string or list array, one more than the index
	// of the blob of its offsets widened to 64 bits, which upstream's
	// reader needs (it knows only the large types); 0: none.
	wide int
}

// object is a decoded or to-be-stored Arrow object. Every kind is a list of
// items of one type: an array is one item, a record batch one struct item
// (its columns are the children), a table one struct item per batch, a
// chunked array one item per chunk. schema describes every item; for a table
// or chunked array without items it comes from the stored schema_/type_.
type object struct {
	typename string // typeRecordBatch, typeTable, typeChunkedArray, or an array's
	items    []*node
	schema   *field
}

// ---- encoding (put) --------------------------------------------------------

// encoder writes the JSON tree of an object to store. blobs[i] is the blob of
// source buffer i, sizes[i] its size.
type encoder struct {
	buf   []byte
	blobs []ids.ObjectID
	sizes []uint64
}

func (e *encoder) key(k string) {
	if e.buf[len(e.buf)-1] != '{' {
		e.buf = append(e.buf, ',')
	}
	e.buf = tree.AppendString(e.buf, k)
	e.buf = append(e.buf, ':')
}

func (e *encoder) str(k, v string) {
	e.key(k)
	e.buf = tree.AppendString(e.buf, v)
}

func (e *encoder) int(k string, v int64) {
	e.key(k)
	e.buf = strconv.AppendInt(e.buf, v, 10)
}

func (e *encoder) blob(k string, id ids.ObjectID) {
	e.key(k)
	e.buf = append(e.buf, `{"id":"`...)
	e.buf = id.AppendText(e.buf)
	e.buf = append(e.buf, `"}`...)
}

// metadata writes kvs under k as a list of [key, value] pairs, or under k64
// as base64 pairs when some key or value is not UTF-8 (JSON strings must be).
func (e *encoder) metadata(k, k64 string, kvs []kv) {
	if kvs == nil {
		return
	}
	valid := true
	for _, p := range kvs {
		valid = valid && utf8.ValidString(p.key) && utf8.ValidString(p.value)
	}
	enc := func(s string) string { return s }
	if !valid {
		k = k64
		enc = func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	}
	e.key(k)
	e.buf = append(e.buf, '[')
	for i, p := range kvs {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf = append(e.buf, '[')
		e.buf = tree.AppendString(e.buf, enc(p.key))
		e.buf = append(e.buf, ',')
		e.buf = tree.AppendString(e.buf, enc(p.value))
		e.buf = append(e.buf, ']')
	}
	e.buf = append(e.buf, ']')
}

// field writes the type keys of an array node.
func (e *encoder) field(f *field, dt arrow.DataType) {
	e.str("typename", typenameOf(f, dt))
	e.str(keyFormat, f.format)
	e.str(keyName, f.name)
	e.int(keyFlags, f.flags)
	e.metadata(keyMetadata, keyMetadata64, f.metadata)
}

// node writes an array node and returns the bytes of blobs under it.
func (e *encoder) node(n *node) uint64 {
	e.buf = append(e.buf, '{')
	e.field(n.f, n.dt)
	e.int(keyLength, n.length)
	e.int(keyNullCount, n.nulls)
	e.int(keyOffset, n.offset)
	var nbytes uint64
	e.int(keyBuffers+"size", int64(len(n.bufs)))
	for i, b := range n.bufs {
		id := ids.EmptyBlob
		if b >= 0 {
			id = e.blobs[b]
			nbytes += e.sizes[b]
		}
		e.blob(keyBuffers+strconv.Itoa(i), id)
	}
	e.upstreamAliases(n)
	e.int(keyChildren+"size", int64(len(n.children)))
	for i, c := range n.children {
		if i == 0 && isList(n) {
			e.key(keyValues) // upstream's name of a list's values; ours read it as children_-0
		} else {
			e.key(keyChildren + strconv.Itoa(i))
		}
		nbytes += e.node(c)
	}
	if n.wide > 0 {
		nbytes += e.sizes[n.wide-1]
	}
	if n.dict != nil {
		e.key(keyDictionary)
		nbytes += e.node(n.dict)
	}
	e.int("nbytes", int64(nbytes))
	e.buf = append(e.buf, '}')
	return nbytes
}

// upstreamAliases writes, for the array types upstream's reader knows, its
// member names for the node's buffers (docs/protocol.md, "Layouts shared with
// upstream"): the same blobs again, so upstream's client reads our arrays
// without a copy or a second layout. Our decoder skips these keys.
func (e *encoder) upstreamAliases(n *node) {
	buf := func(i int) ids.ObjectID {
		if i < len(n.bufs) && n.bufs[i] >= 0 {
			return e.blobs[n.bufs[i]]
		}
		return ids.EmptyBlob
	}
	if n.f.dict != nil {
		return
	}
	wide := ids.EmptyBlob // the 64-bit offsets of a 32-bit string or list array
	if n.wide > 0 {
		wide = e.blobs[n.wide-1]
	}
	_, numeric := cppNames[n.f.format]
	switch id := n.dt.ID(); {
	case numeric || id == arrow.BOOL || id == arrow.FIXED_SIZE_BINARY:
		e.blob("null_bitmap_", buf(0))
		e.blob("buffer_", buf(1))
		if t, ok := n.dt.(*arrow.FixedSizeBinaryType); ok {
			e.int("byte_width_", int64(t.ByteWidth))
		}
	case id == arrow.LARGE_STRING || id == arrow.LARGE_BINARY:
		e.blob("null_bitmap_", buf(0))
		e.blob("buffer_offsets_", buf(1))
		e.blob("buffer_data_", buf(2))
	case id == arrow.STRING:
		e.blob("null_bitmap_", buf(0))
		e.blob("buffer_offsets_", wide)
		e.blob("buffer_data_", buf(2))
	case id == arrow.LARGE_LIST:
		e.blob("null_bitmap_", buf(0))
		e.blob("buffer_offsets_", buf(1))
	case id == arrow.LIST:
		e.blob("null_bitmap_", buf(0))
		e.blob("buffer_offsets_", wide)
	}
}

// isList reports whether n is a list or large list array, whose values
// child is stored under upstream's "values_".
func isList(n *node) bool {
	id := n.dt.ID()
	return n.f.dict == nil && (id == arrow.LIST || id == arrow.LARGE_LIST)
}

// batch writes a record batch: a struct item whose children are the columns.
// The batches of a table leave the schema metadata to the table (withMeta
// false).
func (e *encoder) batch(n *node, withMeta bool) uint64 {
	e.buf = append(e.buf, '{')
	e.str("typename", typeRecordBatch)
	e.int("row_num_", n.length)
	e.int("column_num_", int64(len(n.children)))
	if withMeta {
		e.metadata(keySchemaMeta, keySchemaMeta4, n.f.metadata)
	}
	e.schemaProxy(n.f.children)
	var nbytes uint64
	e.int(keyColumns+"size", int64(len(n.children)))
	for i, c := range n.children {
		e.key(keyColumns + strconv.Itoa(i))
		nbytes += e.node(c)
	}
	e.int("nbytes", int64(nbytes))
	e.buf = append(e.buf, '}')
	return nbytes
}

// object writes the whole tree; extra is a JSON object body (`"k":v,...`)
// of caller fields for the root, or empty.
func (e *encoder) object(o *object, empty *node, extra []byte) []byte {
	switch o.typename {
	case typeRecordBatch:
		e.batch(o.items[0], true)
		e.buf = e.buf[:len(e.buf)-1]
	case typeTable:
		e.buf = append(e.buf, '{')
		e.str("typename", typeTable)
		var rows, nbytes int64
		for _, it := range o.items {
			rows += it.length
		}
		e.int("num_rows_", rows)
		e.int("num_columns_", int64(len(o.schema.children)))
		e.int("batch_num_", int64(len(o.items)))
		e.metadata(keySchemaMeta, keySchemaMeta4, o.schema.metadata)
		e.int(keyPartitions+"size", int64(len(o.items)))
		for i, it := range o.items {
			e.key(keyPartitions + strconv.Itoa(i))
			nbytes += int64(e.batch(it, false))
		}
		if empty != nil {
			e.key(keySchema)
			nbytes += int64(e.batch(empty, false))
		}
		e.int("nbytes", nbytes)
	case typeChunkedArray:
		e.buf = append(e.buf, '{')
		e.str("typename", typeChunkedArray)
		var length, nulls, nbytes int64
		for _, it := range o.items {
			length += it.length
			nulls += it.nulls
		}
		e.int(keyLength, length)
		e.int(keyNullCount, nulls)
		e.int(keyChunks+"size", int64(len(o.items)))
		for i, it := range o.items {
			e.key(keyChunks + strconv.Itoa(i))
			nbytes += int64(e.node(it))
		}
		if empty != nil {
			e.key(keyType)
			nbytes += int64(e.node(empty))
		}
		e.int("nbytes", nbytes)
	default:
		e.node(o.items[0])
		e.buf = e.buf[:len(e.buf)-1]
	}
	if len(extra) > 0 {
		e.buf = append(e.buf, ',')
		e.buf = append(e.buf, extra...)
	}
	return append(e.buf, '}')
}
