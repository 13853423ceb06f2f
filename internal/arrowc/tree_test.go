package arrowc

import (
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/cdata"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// leaf makes an array node of a simple format over the given buffers.
func leaf(t *testing.T, format string, length, nulls, offset int64, bufs ...int) *node {
	t.Helper()
	n := &node{f: &field{format: format, flags: flagNullable}, length: length, nulls: nulls, offset: offset, bufs: bufs}
	if err := n.typeFromChildren(); err != nil {
		t.Fatal(err)
	}
	return n
}

func parent(t *testing.T, format string, length int64, bufs []int, kids ...*node) *node {
	t.Helper()
	n := &node{f: &field{format: format}, length: length, bufs: bufs, children: kids}
	for _, k := range kids {
		n.f.children = append(n.f.children, k.f)
	}
	if err := n.typeFromChildren(); err != nil {
		t.Fatal(err)
	}
	return n
}

// encodeTree encodes o with blob i named BlobBit|i+1 and sized sizes[i].
func encodeTree(o *object, empty *node, sizes []uint64) []byte {
	blobs := make([]ids.ObjectID, len(sizes))
	for i := range blobs {
		blobs[i] = ids.BlobBit | ids.ObjectID(i+1)
	}
	return (&encoder{blobs: blobs, sizes: sizes}).object(o, empty, []byte(`"producer_":"t"`))
}

// shape is what a decoded node must match: type, shape, blobs, recursively.
func shape(n *node) any {
	kids := make([]any, len(n.children))
	for i, c := range n.children {
		kids[i] = shape(c)
	}
	var dict any
	if n.dict != nil {
		dict = shape(n.dict)
	}
	return []any{n.f.format, n.f.name, n.f.flags, n.f.metadata, n.length, n.nulls, n.offset, n.bufs, kids, dict}
}

func TestCodecRoundTrip(t *testing.T) {
	named := leaf(t, "u", 3, 1, 1, 0, 1, 2)
	named.f.name, named.f.metadata = "s\"quoted\"", []kv{{"k", "v"}, {"bin\xff", "\x00raw"}}
	dict := leaf(t, "i", 5, 0, 0, -1, 3)
	dict.dict = leaf(t, "U", 2, 0, 0, -1, 4, 5)
	dict.f.dict = dict.dict.f
	dict.f.flags |= flagDictionaryOrdered
	if err := dict.typeFromChildren(); err != nil {
		t.Fatal(err)
	}
	batch := parent(t, "+s", 3, []int{-1}, named, leaf(t, "l", 3, 0, 0, -1, 6))
	batch.f.metadata = []kv{{"pandas", `{"x": 1}`}}
	sizes := []uint64{1, 16, 5, 20, 16, 2, 24}
	cases := []struct {
		name  string
		o     *object
		empty *node
	}{
		{"array", &object{typename: "x", items: []*node{named}}, nil},
		{"dictionary", &object{typename: "x", items: []*node{dict}}, nil},
		{"struct", &object{typename: "x", items: []*node{parent(t, "+s", 3, []int{0}, named)}}, nil},
		{"list", &object{typename: "x", items: []*node{parent(t, "+l", 2, []int{-1, 1}, named)}}, nil}, // values_
		{"batch", &object{typename: typeRecordBatch, items: []*node{batch}, schema: batch.f}, nil},
		{"table", &object{typename: typeTable, items: []*node{batch, batch}, schema: batch.f}, nil},
		{"empty table", &object{typename: typeTable, schema: batch.f}, batch},
		{"chunked", &object{typename: typeChunkedArray, items: []*node{named, named}, schema: named.f}, nil},
		{"empty chunked", &object{typename: typeChunkedArray, schema: named.f}, named},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tree := encodeTree(tc.o, tc.empty, sizes)
			got, blobs, err := decodeObject(tree)
			if err != nil {
				t.Fatalf("%v\n%s", err, tree)
			}
			if tc.o.typename != "x" && got.typename != tc.o.typename {
				t.Errorf("typename %q, want %q", got.typename, tc.o.typename)
			}
			if len(got.items) != len(tc.o.items) {
				t.Fatalf("%d items, want %d", len(got.items), len(tc.o.items))
			}
			// Blob indexes are renumbered in tree order: compare through the ids.
			for i, it := range got.items {
				renumber(it, blobs)
				if w, g := shape(tc.o.items[i]), shape(it); !reflect.DeepEqual(w, g) {
					t.Errorf("item %d:\n got %v\nwant %v", i, g, w)
				}
			}
			want := tc.o.schema
			if want == nil {
				want = tc.o.items[0].f
			}
			if !sameType(got.schema, want) || !reflect.DeepEqual(got.schema.metadata, want.metadata) {
				t.Errorf("schema %+v, want %+v", got.schema, want)
			}
		})
	}
}

// renumber maps the decoded buffer indexes back to the encoder's (id-1).
func renumber(n *node, blobs []ids.ObjectID) {
	for i, b := range n.bufs {
		if b >= 0 {
			n.bufs[i] = int(blobs[b]&^ids.BlobBit) - 1
		}
	}
	for _, c := range n.children {
		renumber(c, blobs)
	}
	if n.dict != nil {
		renumber(n.dict, blobs)
	}
}

func TestDecodeRejects(t *testing.T) {
	blob := `{"id":"o8000000000000001","typename":"vineyard::Blob","length":8}`
	int64Node := func(extra string) string {
		return `{"typename":"vineyard::NumericArray<int64>","format_":"l","length_":1,"null_count_":0,"offset_":0,` +
			`"buffers_-size":2,"buffers_-0":{"id":"o8000000000000000"},"buffers_-1":` + blob + extra + `}`
	}
	cases := []struct {
		name, tree string
		want       error
	}{
		{"not json", `{"typename":`, ErrInvalidLayout},
		{"trailing", int64Node("") + "x", ErrInvalidLayout},
		{"not arrow", `{"typename":"vineyard::Tensor<int64>","shape_":"[1]"}`, ErrNotArrow},
		{"bad format", strings.Replace(int64Node(""), `"l"`, `"?"`, 1), ErrNotImplemented},
		{"negative length", strings.Replace(int64Node(""), `"length_":1`, `"length_":-1`, 1), ErrInvalidLayout},
		{"huge offset", strings.Replace(int64Node(""), `"offset_":0`, `"offset_":9223372036854775807`, 1), ErrInvalidLayout},
		{"null count above length", strings.Replace(int64Node(""), `"null_count_":0`, `"null_count_":2`, 1), ErrInvalidLayout},
		{"missing buffer", strings.Replace(int64Node(""), `"buffers_-size":2`, `"buffers_-size":3`, 1), ErrInvalidLayout},
		{"buffer not a blob", strings.Replace(int64Node(""), `o8000000000000001`, `o0000000000000001`, 1), ErrInvalidLayout},
		{"bad member index", int64Node(`,"children_-01":{}`), ErrInvalidLayout},
		{"children of int64", int64Node(`,"children_-size":1,"children_-0":` + int64Node("")), ErrInvalidLayout},
		{"batch rows differ", `{"typename":"vineyard::RecordBatch","row_num_":2,"__columns_-size":1,"__columns_-0":` +
			int64Node("") + `}`, ErrInvalidLayout},
		{"table of mixed types", `{"typename":"vineyard::Table","partitions_-size":2,` +
			`"partitions_-0":{"typename":"vineyard::RecordBatch","row_num_":1,"__columns_-size":1,"__columns_-0":` + int64Node("") + `},` +
			`"partitions_-1":{"typename":"vineyard::RecordBatch","row_num_":1,"__columns_-size":0}}`, ErrInvalidLayout},
		{"empty table without schema", `{"typename":"vineyard::Table","partitions_-size":0}`, ErrInvalidLayout},
		{"deep", strings.Repeat(`{"a":`, 1000) + "1" + strings.Repeat("}", 1000), ErrInvalidLayout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := decodeObject([]byte(tc.tree)); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestCheckerRejectsShortBuffers(t *testing.T) {
	views := [][]byte{make([]byte, 1), make([]byte, 16), make([]byte, 12), make([]byte, 3), make([]byte, 64)}
	// offsets 0, 1, 3 in views[2] (3 int32: for 2 strings), data of 3 bytes.
	copy(views[2], []byte{0, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0})
	cases := []struct {
		name string
		n    *node
		ok   bool
	}{
		{"int64 fits", leaf(t, "l", 2, 0, 0, -1, 1), true},
		{"int64 too short", leaf(t, "l", 3, 0, 0, -1, 1), false},
		{"offset pushes out", leaf(t, "l", 2, 0, 1, -1, 1), false},
		{"nulls need a bitmap", leaf(t, "l", 2, 1, 0, -1, 1), false},
		{"bitmap fits", leaf(t, "l", 2, 1, 0, 0, 1), true},
		{"bool bits", leaf(t, "b", 9, 0, 0, -1, 0), false},
		{"strings fit", leaf(t, "u", 2, 0, 0, -1, 2, 3), true},
		{"offsets too short", leaf(t, "u", 3, 0, 0, -1, 2, 3), false},
		{"data shorter than last offset", leaf(t, "u", 2, 0, 0, -1, 2, 0), false},
		{"struct child too short", parent(t, "+s", 3, []int{-1}, leaf(t, "l", 2, 0, 0, -1, 1)), false},
		{"list child too short", parent(t, "+l", 2, []int{-1, 2}, leaf(t, "l", 2, 0, 0, -1, 1)), false},
		{"list fits", parent(t, "+l", 2, []int{-1, 2}, leaf(t, "c", 3, 0, 0, -1, 3)), true},
		{"fixed size list", parent(t, "+w:2", 2, []int{-1}, leaf(t, "c", 3, 0, 0, -1, 3)), false},
		{"views", leaf(t, "vu", 4, 0, 0, -1, 4), true},
		{"views too short", leaf(t, "vu", 5, 0, 0, -1, 4), false},
		{"wrong buffer count", leaf(t, "l", 1, 0, 0, -1), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := (&checker{views: views}).check(tc.n)
			if (err == nil) != tc.ok {
				t.Fatalf("check = %v, want ok %v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidLayout) {
				t.Fatalf("error %v is not ErrInvalidLayout", err)
			}
		})
	}
}

func TestParseFormat(t *testing.T) {
	i64 := arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int64}
	cases := []struct {
		format   string
		children []arrow.Field
		want     string // arrow-go's spelling, or "error"
	}{
		{"tsu:UTC", nil, "timestamp[us, tz=UTC]"},
		{"tsn:", nil, "timestamp[ns]"},
		{"d:38,10", nil, "decimal(38, 10)"},
		{"d:5,2,32", nil, "decimal32(5, 2)"},
		{"d:76,0,256", nil, "decimal256(76, 0)"},
		{"d:39,0", nil, "error"},
		{"d:1", nil, "error"},
		{"w:16", nil, "fixed_size_binary[16]"},
		{"w:0", nil, "error"},
		{"+w:3", []arrow.Field{i64}, "fixed_size_list<x: int64>[3]"},
		{"+l", nil, "error"},
		{"+ud:1,5", []arrow.Field{i64, i64}, "dense_union<x: type=int64=1, x: type=int64=5>"},
		{"+us:1,1", []arrow.Field{i64, i64}, "error"},
		{"+us:1", []arrow.Field{i64, i64}, "error"},
		{"+r", []arrow.Field{{Type: arrow.PrimitiveTypes.Float64}, i64}, "error"},
		{"l", []arrow.Field{i64}, "error"},
		{"tsx:UTC", nil, "error"},
	}
	for _, tc := range cases {
		dt, err := parseFormat(tc.format, tc.children, 0)
		got := "error"
		if err == nil {
			got = dt.String()
		}
		if got != tc.want {
			t.Errorf("parseFormat(%q) = %s (%v), want %s", tc.format, got, err, tc.want)
		}
	}
}

// FuzzDecodeTree feeds metadata trees (as a malformed daemon reply could be)
// through everything a get does before handing memory out: decode, check
// against blobs of fuzzed sizes, build, export and release. None of it may
// panic or read outside a blob.
func FuzzDecodeTree(f *testing.F) {
	batch := &node{f: &field{format: "+s"}, length: 2, bufs: []int{-1}}
	for _, n := range []*node{
		{f: &field{format: "u", name: "s"}, length: 2, nulls: 1, bufs: []int{0, 1, 2}},
		{f: &field{format: "+l"}, length: 1, bufs: []int{-1, 3},
			children: []*node{{f: &field{format: "l"}, length: 4, bufs: []int{-1, 4}}}},
	} {
		batch.children = append(batch.children, n)
		batch.f.children = append(batch.f.children, n.f)
	}
	var typed func(n *node)
	typed = func(n *node) {
		for _, c := range n.children {
			typed(c)
		}
		if err := n.typeFromChildren(); err != nil {
			f.Fatal(err)
		}
	}
	typed(batch)
	f.Add(encodeTree(&object{typename: typeTable, items: []*node{batch}, schema: batch.f}, nil,
		[]uint64{1, 12, 3, 8, 32}), []byte{3, 0, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 1, 2, 3, 0, 4, 0, 0, 0, 0, 0, 0})
	f.Add(encodeTree(&object{typename: "x", items: []*node{batch.children[1]}}, nil, []uint64{1, 12, 3, 8, 32}),
		make([]byte, 64))
	f.Add([]byte(`{"typename":"vineyard::ChunkedArray","chunks_-size":0,"type_":{"format_":"+m","length_":0,`+
		`"children_-size":1,"children_-0":{"format_":"+s","length_":0,"children_-size":2,`+
		`"children_-0":{"format_":"u","length_":0},"children_-1":{"format_":"l","length_":0}}}}`), []byte{})
	for _, tc := range arrayCases { // every type, with its real buffers in the arena
		tree, arena := fuzzSeed(f, tc.dt, tc.js)
		f.Add(tree, arena)
	}
	f.Fuzz(func(t *testing.T, tree, arena []byte) {
		o, blobs, err := decodeObject(tree)
		if err != nil {
			return
		}
		views := fuzzViews(blobs, arena)
		chk := &checker{views: views}
		for _, n := range o.items {
			if chk.check(n) != nil {
				return
			}
		}
		h := newHolder(nil)
		b := &builder{views: views, h: h}
		for _, n := range o.items {
			arr := b.array(n)
			out := new(cdata.CArrowArray)
			exportArray(arr, n, unsafe.Pointer(out))
			arr.Release()
			cdata.ReleaseCArrowArray(out)
		}
		sc := new(cdata.CArrowSchema)
		exportSchema(o.schema, unsafe.Pointer(sc))
		cdata.ReleaseCArrowSchema(sc)
		h.unref()
		if n := h.n.Load(); n != 0 {
			t.Fatalf("%d buffer references left after every release", n)
		}
	})
}

// TestEmptyOfEveryType checks that an empty table or chunked array of every
// type keeps its type (its schema batch is made by arrow-go).
func TestEmptyOfEveryType(t *testing.T) {
	for _, tc := range arrayCases {
		arr := fromJSON(t, tc.dt, tc.js)
		ca, cs := new(cdata.CArrowArray), new(cdata.CArrowSchema)
		cdata.ExportArrowArray(arr, ca, cs)
		f, err := schemaField(unsafe.Pointer(cs))
		cdata.ReleaseCArrowSchema(cs)
		cdata.ReleaseCArrowArray(ca)
		arr.Release()
		if err != nil {
			t.Fatal(err)
		}
		n, err := (&plan{}).emptyOf(f, false)
		if err != nil {
			t.Errorf("%s: %v", tc.dt, err)
			continue
		}
		if !arrow.TypeEqual(n.dt, tc.dt) || n.length != 0 {
			t.Errorf("empty %s is %s of %d", tc.dt, n.dt, n.length)
		}
	}
}

// fuzzSeed encodes an array of type dt as put would, its blobs named after
// where their bytes lie in the returned arena (see FuzzDecodeTree).
func fuzzSeed(f testing.TB, dt arrow.DataType, js string) (tree, arena []byte) {
	arr, _, err := array.FromJSON(mem, dt, strings.NewReader(js))
	if err != nil {
		f.Fatal(err)
	}
	defer arr.Release()
	ca, cs := new(cdata.CArrowArray), new(cdata.CArrowSchema)
	cdata.ExportArrowArray(arr, ca, cs)
	defer cdata.ReleaseCArrowArray(ca)
	defer cdata.ReleaseCArrowSchema(cs)
	fld, err := schemaField(unsafe.Pointer(cs))
	if err != nil {
		f.Fatal(err)
	}
	p := &plan{}
	n, err := p.node(fld, arr.Data())
	if err != nil {
		f.Fatal(err)
	}
	blobs := make([]ids.ObjectID, len(p.srcs))
	sizes := make([]uint64, len(p.srcs))
	for i, src := range p.srcs {
		blobs[i] = ids.BlobBit | ids.ObjectID(len(arena))<<16 | ids.ObjectID(len(src))
		sizes[i] = uint64(len(src))
		arena = append(arena, src...)
	}
	return (&encoder{blobs: blobs, sizes: sizes}).object(&object{items: []*node{n}}, nil, nil), arena
}

// fuzzViews gives each blob its view of the arena: blob id bits 0-15 are its
// size, bits 16-31 where it starts; each view is a copy of exactly its
// bytes, so that reading past it panics.
func fuzzViews(blobs []ids.ObjectID, arena []byte) [][]byte {
	views := make([][]byte, len(blobs))
	for i, id := range blobs {
		start := min(int(id>>16&0xffff), len(arena))
		end := min(start+int(id&0xffff), len(arena))
		views[i] = append([]byte(nil), arena[start:end]...)
	}
	return views
}

// TestFuzzSeedsReachTheBuilder makes sure the fuzz seeds of real arrays pass
// the checker, so that fuzzing starts from trees that build and export.
func TestFuzzSeedsReachTheBuilder(t *testing.T) {
	for _, tc := range arrayCases {
		tree, arena := fuzzSeed(t, tc.dt, tc.js)
		o, blobs, err := decodeObject(tree)
		if err != nil {
			t.Fatalf("%s: %v", tc.dt, err)
		}
		if err := (&checker{views: fuzzViews(blobs, arena)}).check(o.items[0]); err != nil {
			t.Errorf("%s: %v", tc.dt, err)
		}
	}
}

func TestWiden(t *testing.T) {
	src := make([]byte, 12)
	for i, v := range []int32{0, 7, 1 << 30} {
		binary.NativeEndian.PutUint32(src[4*i:], uint32(v))
	}
	dst := make([]byte, 24)
	widen(dst, src)
	for i, want := range []int64{0, 7, 1 << 30} {
		if got := int64(binary.NativeEndian.Uint64(dst[8*i:])); got != want {
			t.Errorf("offset %d: %d, want %d", i, got, want)
		}
	}
}

func TestCopyAllWidensInParallel(t *testing.T) {
	const n = 3 << 20 // 12 MiB of offsets: above parallelCopyMin
	src := make([]byte, 4*n)
	for i := range n {
		binary.NativeEndian.PutUint32(src[4*i:], uint32(i*3))
	}
	plain := []byte("plain bytes")
	dsts := [][]byte{make([]byte, 8*n), make([]byte, len(plain))}
	copyAll(dsts, [][]byte{src, plain}, []bool{true, false}, false)
	for i := range n {
		if got := binary.NativeEndian.Uint64(dsts[0][8*i:]); got != uint64(i*3) {
			t.Fatalf("offset %d: %d, want %d", i, got, i*3)
		}
	}
	if string(dsts[1]) != string(plain) {
		t.Errorf("copied %q", dsts[1])
	}
}

func TestListValuesAreUpstreamsMember(t *testing.T) {
	list := parent(t, "+l", 2, []int{-1, 0}, leaf(t, "l", 3, 0, 0, -1, 1))
	list.wide = 3 // blob 2: the widened offsets
	tree := string(encodeTree(&object{typename: "x", items: []*node{list}}, nil, []uint64{12, 24, 24}))
	for _, want := range []string{`"typename":"vineyard::LargeListArray"`, `"values_":{`,
		`"buffer_offsets_":{"id":"o8000000000000003"}`} {
		if !strings.Contains(tree, want) {
			t.Errorf("no %s in %s", want, tree)
		}
	}
	if strings.Contains(tree, `"children_-0"`) {
		t.Errorf("the values are stored twice: %s", tree)
	}
}
