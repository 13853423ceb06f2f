package arrowc

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/cdata"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// benchTable is a table of cols int64 columns of rows rows, in one batch.
func benchTable(b *testing.B, cols, rows int) arrow.Table {
	b.Helper()
	fields := make([]arrow.Field, cols)
	arrs := make([]arrow.Array, cols)
	for i := range fields {
		fields[i] = arrow.Field{Name: fmt.Sprintf("c%d", i), Type: arrow.PrimitiveTypes.Int64}
		bld := array.NewInt64Builder(mem)
		bld.Resize(rows)
		for r := range rows {
			bld.UnsafeAppend(int64(r))
		}
		arrs[i] = bld.NewArray()
	}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, int64(rows))
	for _, a := range arrs {
		a.Release()
	}
	defer rec.Release()
	return array.NewTableFromRecords(rec.Schema(), []arrow.RecordBatch{rec})
}

// BenchmarkPutTable puts (and deletes) a 10-column table of 100 MB.
func BenchmarkPutTable(b *testing.B) {
	srv := startServer(b, 512<<20)
	c := connect(b, srv)
	tbl := benchTable(b, 10, 1_250_000)
	defer tbl.Release()
	b.SetBytes(10 * 1_250_000 * 8)
	for b.Loop() {
		s := new(cdata.CArrowArrayStream)
		cdata.ExportRecordReader(array.NewTableReader(tbl, -1), s)
		id, err := PutStream(c, unsafe.Pointer(s), 0, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Delete([]ids.ObjectID{id}, false, true, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetTable gets a 10-column table as a stream and releases it.
func BenchmarkGetTable(b *testing.B) {
	srv := startServer(b, 512<<20)
	a, c := connect(b, srv), connect(b, srv)
	tbl := benchTable(b, 10, 1000)
	defer tbl.Release()
	s := new(cdata.CArrowArrayStream)
	cdata.ExportRecordReader(array.NewTableReader(tbl, -1), s)
	id, err := PutStream(a, unsafe.Pointer(s), 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		out := new(cdata.CArrowArrayStream)
		if err := GetStream(c, id, unsafe.Pointer(out)); err != nil {
			b.Fatal(err)
		}
		cdata.ReleaseCArrowArrayStream(out)
	}
}

// BenchmarkDecodeTree decodes the tree of a 10-column table, as the daemon
// returns it (blobs in full).
func BenchmarkDecodeTree(b *testing.B) {
	srv := startServer(b, 64<<20)
	c := connect(b, srv)
	tbl := benchTable(b, 10, 1000)
	defer tbl.Release()
	s := new(cdata.CArrowArrayStream)
	cdata.ExportRecordReader(array.NewTableReader(tbl, -1), s)
	id, err := PutStream(c, unsafe.Pointer(s), 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	tree, err := c.GetMetadata(id)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(tree)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := decodeObject(tree); err != nil {
			b.Fatal(err)
		}
	}
}
