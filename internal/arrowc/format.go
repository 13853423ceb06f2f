package arrowc

import (
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// Schema flags of the Arrow C data interface.
const (
	flagDictionaryOrdered = 1
	flagNullable          = 2
	flagMapKeysSorted     = 4
)

// simpleFormats are the formats without parameters or children.
var simpleFormats = map[string]arrow.DataType{
	"n":   arrow.Null,
	"b":   arrow.FixedWidthTypes.Boolean,
	"c":   arrow.PrimitiveTypes.Int8,
	"C":   arrow.PrimitiveTypes.Uint8,
	"s":   arrow.PrimitiveTypes.Int16,
	"S":   arrow.PrimitiveTypes.Uint16,
	"i":   arrow.PrimitiveTypes.Int32,
	"I":   arrow.PrimitiveTypes.Uint32,
	"l":   arrow.PrimitiveTypes.Int64,
	"L":   arrow.PrimitiveTypes.Uint64,
	"e":   arrow.FixedWidthTypes.Float16,
	"f":   arrow.PrimitiveTypes.Float32,
	"g":   arrow.PrimitiveTypes.Float64,
	"z":   arrow.BinaryTypes.Binary,
	"Z":   arrow.BinaryTypes.LargeBinary,
	"u":   arrow.BinaryTypes.String,
	"U":   arrow.BinaryTypes.LargeString,
	"vz":  arrow.BinaryTypes.BinaryView,
	"vu":  arrow.BinaryTypes.StringView,
	"tdD": arrow.FixedWidthTypes.Date32,
	"tdm": arrow.FixedWidthTypes.Date64,
	"tts": arrow.FixedWidthTypes.Time32s,
	"ttm": arrow.FixedWidthTypes.Time32ms,
	"ttu": arrow.FixedWidthTypes.Time64us,
	"ttn": arrow.FixedWidthTypes.Time64ns,
	"tDs": arrow.FixedWidthTypes.Duration_s,
	"tDm": arrow.FixedWidthTypes.Duration_ms,
	"tDu": arrow.FixedWidthTypes.Duration_us,
	"tDn": arrow.FixedWidthTypes.Duration_ns,
	"tiM": arrow.FixedWidthTypes.MonthInterval,
	"tiD": arrow.FixedWidthTypes.DayTimeInterval,
	"tin": arrow.FixedWidthTypes.MonthDayNanoInterval,
}

// field is the description of one node of a type: what an ArrowSchema
// holds. Array nodes of the stored layout carry one each.
type field struct {
	format   string
	name     string
	flags    int64
	metadata []kv // nil: none
	children []*field
	dict     *field // the dictionary's value type, for a dictionary-encoded node
}

// kv is one metadata entry. Arrow metadata keys and values are bytes.
type kv struct{ key, value string }

// maxDepth bounds the nesting of types and trees: deeper input is an error,
// never a stack overflow.
const maxDepth = 64

// dataType returns the arrow-go type of f, which must be valid: a format
// this package knows, with the children and dictionary it needs.
func (f *field) dataType() (arrow.DataType, error) { return f.dataTypeAt(0) }

func (f *field) dataTypeAt(depth int) (arrow.DataType, error) {
	if depth > maxDepth {
		return nil, errorf(ErrInvalidLayout, "types nest deeper than %d", maxDepth)
	}
	children := make([]arrow.Field, len(f.children))
	for i, c := range f.children {
		dt, err := c.dataTypeAt(depth + 1)
		if err != nil {
			return nil, err
		}
		children[i] = arrow.Field{Name: c.name, Type: dt, Nullable: c.flags&flagNullable != 0}
	}
	dt, err := parseFormat(f.format, children, f.flags)
	if err != nil {
		return nil, err
	}
	if f.dict != nil {
		vt, err := f.dict.dataTypeAt(depth + 1)
		if err != nil {
			return nil, err
		}
		return dictionaryOf(f, dt, vt)
	}
	return dt, nil
}

// dictionaryOf returns the type of a dictionary-encoded node of type f with
// indices of type index and values of type value.
func dictionaryOf(f *field, index, value arrow.DataType) (arrow.DataType, error) {
	if !arrow.IsInteger(index.ID()) || len(f.children) != 0 {
		return nil, errorf(ErrInvalidLayout, "dictionary indices of format %q are not an integer type", f.format)
	}
	return &arrow.DictionaryType{IndexType: index, ValueType: value, Ordered: f.flags&flagDictionaryOrdered != 0}, nil
}

// parseFormat turns an Arrow C data format string, with the fields of its
// children, into an arrow-go type.
func parseFormat(format string, children []arrow.Field, flags int64) (arrow.DataType, error) {
	if dt, ok := simpleFormats[format]; ok {
		return dt, wantChildren(format, children, 0)
	}
	key, val, hasVal := strings.Cut(format, ":")
	switch key {
	case "tss", "tsm", "tsu", "tsn":
		if !hasVal {
			break
		}
		unit := map[string]arrow.TimeUnit{"tss": arrow.Second, "tsm": arrow.Millisecond,
			"tsu": arrow.Microsecond, "tsn": arrow.Nanosecond}[key]
		return &arrow.TimestampType{Unit: unit, TimeZone: val}, wantChildren(format, children, 0)
	case "w":
		n, err := positive(format, val)
		if err != nil {
			return nil, err
		}
		return &arrow.FixedSizeBinaryType{ByteWidth: n}, wantChildren(format, children, 0)
	case "d":
		dt, err := parseDecimal(format, val)
		if err != nil {
			return nil, err
		}
		return dt, wantChildren(format, children, 0)
	case "+w":
		n, err := positive(format, val)
		if err != nil {
			return nil, err
		}
		if err := wantChildren(format, children, 1); err != nil {
			return nil, err
		}
		return arrow.FixedSizeListOfField(int32(n), children[0]), nil
	case "+ud", "+us":
		return parseUnion(format, key == "+ud", val, children)
	}
	switch format {
	case "+l", "+L", "+vl", "+vL":
		if err := wantChildren(format, children, 1); err != nil {
			return nil, err
		}
		switch format {
		case "+l":
			return arrow.ListOfField(children[0]), nil
		case "+L":
			return arrow.LargeListOfField(children[0]), nil
		case "+vl":
			return arrow.ListViewOfField(children[0]), nil
		default:
			return arrow.LargeListViewOfField(children[0]), nil
		}
	case "+s":
		return arrow.StructOf(children...), nil
	case "+m":
		if err := wantChildren(format, children, 1); err != nil {
			return nil, err
		}
		st, ok := children[0].Type.(*arrow.StructType)
		if !ok || st.NumFields() != 2 {
			return nil, errorf(ErrInvalidLayout, "the child of a map must be a struct of 2 fields, not %s", children[0].Type)
		}
		key, item := st.Field(0), st.Field(1)
		key.Nullable = false // arrow-go insists; the exported schema keeps what was stored
		dt := arrow.MapOfFields(key, item)
		dt.KeysSorted = flags&flagMapKeysSorted != 0
		return dt, nil
	case "+r":
		if err := wantChildren(format, children, 2); err != nil {
			return nil, err
		}
		switch children[0].Type.ID() {
		case arrow.INT16, arrow.INT32, arrow.INT64:
		default:
			return nil, errorf(ErrInvalidLayout, "run ends of type %s: want int16, int32 or int64", children[0].Type)
		}
		dt := arrow.RunEndEncodedOf(children[0].Type, children[1].Type)
		dt.ValueNullable = children[1].Nullable
		return dt, nil
	}
	return nil, errorf(ErrNotImplemented, "Arrow type of format %q is not supported", format)
}

func wantChildren(format string, children []arrow.Field, n int) error {
	if len(children) != n {
		return errorf(ErrInvalidLayout, "type of format %q has %d children, want %d", format, len(children), n)
	}
	return nil
}

func positive(format, val string) (int, error) {
	n, err := strconv.ParseInt(val, 10, 32)
	if err != nil || n <= 0 {
		return 0, errorf(ErrInvalidLayout, "bad size in format %q", format)
	}
	return int(n), nil
}

func parseDecimal(format, val string) (arrow.DataType, error) {
	parts := strings.Split(val, ",")
	if len(parts) < 2 || len(parts) > 3 {
		return nil, errorf(ErrInvalidLayout, "bad decimal format %q", format)
	}
	nums := make([]int64, len(parts))
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil {
			return nil, errorf(ErrInvalidLayout, "bad decimal format %q", format)
		}
		nums[i] = n
	}
	precision, scale := int32(nums[0]), int32(nums[1])
	bits := int64(128)
	if len(nums) == 3 {
		bits = nums[2]
	}
	limits := map[int64]int32{32: 9, 64: 18, 128: 38, 256: 76}
	if limit, ok := limits[bits]; !ok || precision < 1 || precision > limit {
		return nil, errorf(ErrInvalidLayout, "bad decimal format %q", format)
	}
	switch bits {
	case 32:
		return &arrow.Decimal32Type{Precision: precision, Scale: scale}, nil
	case 64:
		return &arrow.Decimal64Type{Precision: precision, Scale: scale}, nil
	case 128:
		return &arrow.Decimal128Type{Precision: precision, Scale: scale}, nil
	default:
		return &arrow.Decimal256Type{Precision: precision, Scale: scale}, nil
	}
}

func parseUnion(format string, dense bool, val string, children []arrow.Field) (arrow.DataType, error) {
	var codes []arrow.UnionTypeCode
	if val != "" {
		for _, s := range strings.Split(val, ",") {
			n, err := strconv.ParseInt(s, 10, 8)
			if err != nil || n < 0 {
				return nil, errorf(ErrInvalidLayout, "bad union type codes in format %q", format)
			}
			codes = append(codes, arrow.UnionTypeCode(n))
		}
	}
	if len(codes) != len(children) {
		return nil, errorf(ErrInvalidLayout, "union format %q names %d type codes for %d children", format, len(codes), len(children))
	}
	seen := map[arrow.UnionTypeCode]bool{}
	for _, c := range codes {
		if seen[c] {
			return nil, errorf(ErrInvalidLayout, "union format %q repeats a type code", format)
		}
		seen[c] = true
	}
	if dense {
		return arrow.DenseUnionOf(children, codes), nil
	}
	return arrow.SparseUnionOf(children, codes), nil
}

// cppNames are the type parameters of upstream's vineyard::NumericArray<T>.
var cppNames = map[string]string{
	"c": "int8", "C": "uint8", "s": "int16", "S": "uint16", "i": "int", "I": "uint32",
	"l": "int64", "L": "uint64", "e": "float16", "f": "float", "g": "double",
}

// typenameOf returns the vineyard typename of an array node of type f:
// upstream's name where upstream has the type, ours otherwise.
func typenameOf(f *field, dt arrow.DataType) string {
	if f.dict != nil {
		return "vineyard::DictionaryArray<" + cppNames[f.format] + ">"
	}
	if name, ok := cppNames[f.format]; ok {
		return "vineyard::NumericArray<" + name + ">"
	}
	switch dt.ID() {
	case arrow.NULL:
		return "vineyard::NullArray"
	case arrow.BOOL:
		return "vineyard::BooleanArray"
	case arrow.STRING, arrow.LARGE_STRING: // a string array also has upstream's 64-bit offsets (upstreamAliases)
		return "vineyard::BaseBinaryArray<arrow::LargeStringArray>"
	case arrow.BINARY:
		return "vineyard::BaseBinaryArray<arrow::BinaryArray>"
	case arrow.LARGE_BINARY:
		return "vineyard::BaseBinaryArray<arrow::LargeBinaryArray>"
	case arrow.STRING_VIEW:
		return "vineyard::BinaryViewArray<arrow::StringViewArray>"
	case arrow.BINARY_VIEW:
		return "vineyard::BinaryViewArray<arrow::BinaryViewArray>"
	case arrow.FIXED_SIZE_BINARY:
		return "vineyard::FixedSizeBinaryArray"
	case arrow.DECIMAL32, arrow.DECIMAL64, arrow.DECIMAL128, arrow.DECIMAL256:
		return "vineyard::DecimalArray<" + dt.Name() + ">"
	case arrow.DATE32, arrow.DATE64, arrow.TIME32, arrow.TIME64, arrow.TIMESTAMP, arrow.DURATION:
		return "vineyard::TemporalArray<" + dt.Name() + ">"
	case arrow.INTERVAL_MONTHS, arrow.INTERVAL_DAY_TIME, arrow.INTERVAL_MONTH_DAY_NANO:
		return "vineyard::IntervalArray<" + dt.Name() + ">"
	case arrow.LIST, arrow.LARGE_LIST: // as for strings
		return "vineyard::LargeListArray"
	case arrow.LIST_VIEW:
		return "vineyard::ListViewArray"
	case arrow.LARGE_LIST_VIEW:
		return "vineyard::LargeListViewArray"
	case arrow.FIXED_SIZE_LIST:
		return "vineyard::FixedSizeListArray"
	case arrow.MAP:
		return "vineyard::MapArray"
	case arrow.STRUCT:
		return "vineyard::StructArray"
	case arrow.SPARSE_UNION, arrow.DENSE_UNION:
		return "vineyard::UnionArray"
	case arrow.RUN_END_ENCODED:
		return "vineyard::RunEndEncodedArray"
	}
	return "vineyard::Array"
}
