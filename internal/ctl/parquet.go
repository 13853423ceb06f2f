package ctl

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Parquet output of tables and dataframes. The columns are read in place
// from the blobs (the Arrow arrays wrap the daemon's memory, never copied
// into Go first) and written by arrow-go's pqarrow. Supported:
//
//   - vineyard::Table and vineyard::RecordBatch in this project's layout
//     (docs/protocol.md, "Arrow objects": format_, name_, buffers_-N per
//     column) with flat columns: integers, floats, bool, strings and binary
//     (32- and 64-bit offsets); and upstream's NumericArray<T>,
//     BooleanArray and LargeStringArray columns (named column_N: upstream
//     keeps the names only in its IPC schema);
//   - vineyard::DataFrame in pandas' layout (python/vineyard/data/dataframe.py):
//     one 1-D numeric or bool vineyard::Tensor per column.
//
// Nested, dictionary and temporal columns are refused (exit code 5).

// arrowFormats maps Arrow C data interface format strings to the flat types
// written here.
var arrowFormats = map[string]arrow.DataType{
	"b": arrow.FixedWidthTypes.Boolean,
	"c": arrow.PrimitiveTypes.Int8, "C": arrow.PrimitiveTypes.Uint8,
	"s": arrow.PrimitiveTypes.Int16, "S": arrow.PrimitiveTypes.Uint16,
	"i": arrow.PrimitiveTypes.Int32, "I": arrow.PrimitiveTypes.Uint32,
	"l": arrow.PrimitiveTypes.Int64, "L": arrow.PrimitiveTypes.Uint64,
	"e": arrow.FixedWidthTypes.Float16, "f": arrow.PrimitiveTypes.Float32, "g": arrow.PrimitiveTypes.Float64,
	"u": arrow.BinaryTypes.String, "U": arrow.BinaryTypes.LargeString,
	"z": arrow.BinaryTypes.Binary, "Z": arrow.BinaryTypes.LargeBinary,
}

// upstreamNumeric maps upstream's NumericArray<T> parameters to formats.
var upstreamNumeric = map[string]string{
	"int8": "c", "uint8": "C", "int16": "s", "uint16": "S", "int": "i", "int32": "i", "uint32": "I",
	"int64": "l", "uint64": "L", "float": "f", "double": "g",
}

// numpyArrow maps NumPy dtype names of 1-D tensors to Arrow types.
var numpyArrow = map[string]arrow.DataType{
	"bool": arrow.FixedWidthTypes.Boolean, "int8": arrow.PrimitiveTypes.Int8, "uint8": arrow.PrimitiveTypes.Uint8,
	"int16": arrow.PrimitiveTypes.Int16, "uint16": arrow.PrimitiveTypes.Uint16,
	"int32": arrow.PrimitiveTypes.Int32, "uint32": arrow.PrimitiveTypes.Uint32,
	"int64": arrow.PrimitiveTypes.Int64, "uint64": arrow.PrimitiveTypes.Uint64,
	"float16": arrow.FixedWidthTypes.Float16, "float32": arrow.PrimitiveTypes.Float32,
	"float64": arrow.PrimitiveTypes.Float64,
}

func writeParquet(w io.Writer, t node, b blobsOf) error {
	var (
		fields []arrow.Field
		cols   []arrow.Array
		err    error
	)
	switch tn := t.typename(); tn {
	case "vineyard::Table":
		fields, cols, err = tableColumns(t, b)
	case "vineyard::RecordBatch":
		fields, cols, err = batchColumns(t, b, nil)
	case "vineyard::DataFrame":
		fields, cols, err = dataframeColumns(t, b)
	default:
		return unsupportedf("%s is a %s; .parquet is written for vineyard::Table, vineyard::RecordBatch and "+
			"vineyard::DataFrame (a tensor goes to .npy)", t.str("id"), tn)
	}
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	if err != nil {
		return err
	}
	schema := arrow.NewSchema(fields, nil)
	chunked := make([]arrow.Column, len(cols))
	for i, c := range cols {
		ch := arrow.NewChunked(fields[i].Type, []arrow.Array{c})
		chunked[i] = *arrow.NewColumn(fields[i], ch)
		ch.Release()
	}
	rows := int64(0)
	if len(cols) > 0 {
		rows = int64(cols[0].Len())
	}
	tbl := array.NewTable(schema, chunked, rows)
	defer tbl.Release()
	for i := range chunked {
		chunked[i].Release()
	}
	props := parquet.NewWriterProperties(parquet.WithAllocator(memory.DefaultAllocator))
	return pqarrow.WriteTable(tbl, w, 1<<20, props, pqarrow.DefaultWriterProps())
}

// tableColumns concatenates the batches of a vineyard::Table, column by
// column.
func tableColumns(t node, b blobsOf) ([]arrow.Field, []arrow.Array, error) {
	n := int(t.uint("partitions_-size"))
	var fields []arrow.Field
	var parts [][]arrow.Array
	release := func() {
		for _, p := range parts {
			for _, a := range p {
				a.Release()
			}
		}
	}
	for i := range n {
		m, ok := t["partitions_-"+strconv.Itoa(i)].(map[string]any)
		if !ok {
			release()
			return nil, nil, fmt.Errorf("%s: partition %d of %d is missing", t.str("id"), i, n)
		}
		f, cols, err := batchColumns(node(m), b, fields)
		if err != nil {
			release()
			return nil, nil, err
		}
		fields = f
		parts = append(parts, cols)
	}
	if len(parts) == 1 {
		return fields, parts[0], nil
	}
	defer release()
	out := make([]arrow.Array, len(fields))
	for j := range fields {
		chunks := make([]arrow.Array, len(parts))
		for i := range parts {
			chunks[i] = parts[i][j]
		}
		var err error
		if len(chunks) == 0 {
			out[j] = array.MakeArrayOfNull(memory.DefaultAllocator, fields[j].Type, 0)
			continue
		}
		if out[j], err = array.Concatenate(chunks, memory.DefaultAllocator); err != nil {
			for _, a := range out[:j] {
				a.Release()
			}
			return nil, nil, fmt.Errorf("%s: column %s: %w", t.str("id"), fields[j].Name, err)
		}
	}
	return fields, out, nil
}

// batchColumns reads the columns of a record batch; want, when not nil, is
// the schema of the batches before it.
func batchColumns(t node, b blobsOf, want []arrow.Field) ([]arrow.Field, []arrow.Array, error) {
	n := int(t.uint("__columns_-size"))
	fields := make([]arrow.Field, 0, n)
	cols := make([]arrow.Array, 0, n)
	for j := range n {
		m, ok := t["__columns_-"+strconv.Itoa(j)].(map[string]any)
		if !ok {
			return fields, cols, fmt.Errorf("%s: column %d of %d is missing", t.str("id"), j, n)
		}
		f, a, err := arrowColumn(node(m), j, b)
		if err != nil {
			return fields, cols, err
		}
		fields = append(fields, f)
		cols = append(cols, a)
	}
	if want != nil {
		if len(want) != len(fields) {
			return fields, cols, fmt.Errorf("%s: %d columns, the batch before it %d", t.str("id"), len(fields), len(want))
		}
		for j := range want {
			if !arrow.TypeEqual(want[j].Type, fields[j].Type) || want[j].Name != fields[j].Name {
				return fields, cols, fmt.Errorf("%s: column %d is %s %s, in the batch before it %s %s",
					t.str("id"), j, fields[j].Name, fields[j].Type, want[j].Name, want[j].Type)
			}
		}
	}
	return fields, cols, nil
}

// arrowColumn wraps one flat array node's blobs in an Arrow array.
func arrowColumn(c node, j int, b blobsOf) (arrow.Field, arrow.Array, error) {
	format, name := c.str("format_"), c.str("name_")
	var bufKeys []string
	if format != "" { // ours: buffers_-N in the C data interface's order
		for i := range int(c.uint("buffers_-size")) {
			bufKeys = append(bufKeys, "buffers_-"+strconv.Itoa(i))
		}
		if c.uint("children_-size") > 0 || c["dictionary_"] != nil {
			return arrow.Field{}, nil, unsupportedf("column %d (%s, format %q): nested and dictionary columns "+
				"are not written to parquet", j, name, format)
		}
	} else { // upstream's layout
		tn := c.typename()
		switch {
		case strings.HasPrefix(tn, "vineyard::NumericArray<"):
			format = upstreamNumeric[strings.TrimSuffix(strings.TrimPrefix(tn, "vineyard::NumericArray<"), ">")]
			bufKeys = []string{"null_bitmap_", "buffer_"}
		case tn == "vineyard::BooleanArray":
			format, bufKeys = "b", []string{"null_bitmap_", "buffer_"}
		case tn == "vineyard::LargeStringArray":
			format, bufKeys = "U", []string{"null_bitmap_", "buffer_offsets_", "buffer_data_"}
		case tn == "vineyard::LargeBinaryArray":
			format, bufKeys = "Z", []string{"null_bitmap_", "buffer_offsets_", "buffer_data_"}
		}
		if name == "" {
			name = "column_" + strconv.Itoa(j)
		}
	}
	dt, ok := arrowFormats[format]
	if !ok {
		return arrow.Field{}, nil, unsupportedf("column %d (%s, %s, format %q): only integer, float, bool, "+
			"string and binary columns are written to parquet", j, name, c.typename(), format)
	}
	if name == "" {
		name = "column_" + strconv.Itoa(j)
	}
	bufs := make([]*memory.Buffer, len(bufKeys))
	for i, k := range bufKeys {
		data, err := b.bytes(c, k)
		if err != nil {
			return arrow.Field{}, nil, err
		}
		if data != nil || i > 0 {
			bufs[i] = memory.NewBufferBytes(data)
		}
	}
	length, nulls, offset := int(c.uint("length_")), int(c.uint("null_count_")), int(c.uint("offset_"))
	if bufs[0] == nil {
		nulls = 0
	}
	if err := checkBuffers(dt, bufs, length, offset); err != nil {
		return arrow.Field{}, nil, fmt.Errorf("column %d (%s): its blobs do not hold a %s array of %d values: %w",
			j, name, dt, length, err)
	}
	data := array.NewData(dt, length, bufs, nil, nulls, offset)
	defer data.Release()
	a := array.MakeFromData(data)
	if v, ok := a.(interface{ ValidateFull() error }); ok { // strings and binary: offsets within the data
		if err := v.ValidateFull(); err != nil {
			a.Release()
			return arrow.Field{}, nil, fmt.Errorf("column %d (%s): its blobs do not hold a valid %s array: %w", j, name, dt, err)
		}
	}
	return arrow.Field{Name: name, Type: dt, Nullable: true}, a, nil
}

// checkBuffers checks that the buffers of a flat array are long enough for
// its length and offset, so that no read goes past a blob.
func checkBuffers(dt arrow.DataType, bufs []*memory.Buffer, length, offset int) error {
	if length < 0 || offset < 0 {
		return fmt.Errorf("negative length or offset")
	}
	end := length + offset
	need := []int{(end + 7) / 8}
	switch t := dt.(type) {
	case *arrow.BooleanType:
		need = append(need, (end+7)/8)
	case arrow.FixedWidthDataType:
		need = append(need, end*t.BitWidth()/8)
	case arrow.BinaryDataType:
		w := 4
		if t.ID() == arrow.LARGE_STRING || t.ID() == arrow.LARGE_BINARY {
			w = 8
		}
		need = append(need, (end+1)*w, 0)
	}
	if len(bufs) != len(need) {
		return fmt.Errorf("%d buffers, the type has %d", len(bufs), len(need))
	}
	for i, n := range need {
		if bufs[i] == nil {
			continue // no validity bitmap: no nulls
		}
		if bufs[i].Len() < n && (i == 0 || length > 0) {
			return fmt.Errorf("buffer %d holds %d bytes, %d needed", i, bufs[i].Len(), n)
		}
	}
	return nil
}

// dataframeColumns reads a pandas-layout vineyard::DataFrame: key i (JSON
// text) names column i, a 1-D tensor.
func dataframeColumns(t node, b blobsOf) ([]arrow.Field, []arrow.Array, error) {
	n := int(t.uint("__values_-size"))
	var fields []arrow.Field
	var cols []arrow.Array
	for i := range n {
		key := t.str("__values_-key-" + strconv.Itoa(i))
		var name any
		if err := json.Unmarshal([]byte(key), &name); err != nil {
			name = key
		}
		colName := fmt.Sprint(name)
		m, ok := t["__values_-value-"+strconv.Itoa(i)].(map[string]any)
		if !ok {
			return fields, cols, fmt.Errorf("%s: column %d (%s) is missing", t.str("id"), i, colName)
		}
		dt, shape, _, data, err := tensorOf(node(m), b)
		if err != nil {
			return fields, cols, fmt.Errorf("column %s: %w", colName, err)
		}
		at, ok := numpyArrow[dt.name]
		if !ok || len(shape) != 1 || dt.str[0] == '>' {
			return fields, cols, unsupportedf("column %s: a %d-D tensor of %s; parquet is written for 1-D "+
				"little-endian number and bool columns", colName, len(shape), dt.str)
		}
		var a arrow.Array
		if dt.name == "bool" { // NumPy keeps a byte per bool, Arrow a bit
			bb := array.NewBooleanBuilder(memory.DefaultAllocator)
			for _, v := range data {
				bb.Append(v != 0)
			}
			a = bb.NewArray()
			bb.Release()
		} else {
			d := array.NewData(at, int(shape[0]), []*memory.Buffer{nil, memory.NewBufferBytes(data)}, nil, 0, 0)
			a = array.MakeFromData(d)
			d.Release()
		}
		fields = append(fields, arrow.Field{Name: colName, Type: at, Nullable: true})
		cols = append(cols, a)
	}
	return fields, cols, nil
}
