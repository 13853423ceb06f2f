package arrowc

import (
	"encoding/binary"
	"strconv"
	"strings"

	flatbuffers "github.com/google/flatbuffers/go"
)

// Upstream's record batches carry their schema as a member
// "schema_": {"typename": "vineyard::SchemaProxy", "schema_binary_":
// "{\"bytes\": [...]}"}, the bytes an Arrow IPC Schema message, and
// upstream's reader needs it. Ours write one for batches whose columns are
// all of the types upstream's reader knows (those upstreamAliases names);
// our decoder does not read it. The message is encoded here, by hand, for
// just those types: the Arrow IPC package would bring its compression
// codecs into libv6d for a few hundred bytes.

// Arrow IPC flatbuffer constants (format/Schema.fbs, format/Message.fbs).
const (
	fbTypeNull            = 1
	fbTypeInt             = 2
	fbTypeFloatingPoint   = 3
	fbTypeBool            = 6
	fbTypeFixedSizeBinary = 15
	fbTypeLargeBinary     = 19
	fbTypeLargeUtf8       = 20
	fbTypeLargeList       = 21
	fbHeaderSchema        = 1
	fbMetadataV5          = 4
)

// fbType is the flatbuffer Type union member of a column format: its tag and
// a function writing its table; ok is false for a type not encoded here.
func fbType(format string) (tag byte, write func(*flatbuffers.Builder) flatbuffers.UOffsetT, ok bool) {
	intType := func(bits int32, signed bool) func(*flatbuffers.Builder) flatbuffers.UOffsetT {
		return func(b *flatbuffers.Builder) flatbuffers.UOffsetT {
			b.StartObject(2)
			b.PrependBoolSlot(1, signed, false)
			b.PrependInt32Slot(0, bits, 0)
			return b.EndObject()
		}
	}
	float := func(precision int16) func(*flatbuffers.Builder) flatbuffers.UOffsetT {
		return func(b *flatbuffers.Builder) flatbuffers.UOffsetT {
			b.StartObject(1)
			b.PrependInt16Slot(0, precision, -1) // -1: never the default, always written
			return b.EndObject()
		}
	}
	empty := func(b *flatbuffers.Builder) flatbuffers.UOffsetT {
		b.StartObject(0)
		return b.EndObject()
	}
	switch format {
	case "c", "s", "i", "l":
		return fbTypeInt, intType(map[string]int32{"c": 8, "s": 16, "i": 32, "l": 64}[format], true), true
	case "C", "S", "I", "L":
		return fbTypeInt, intType(map[string]int32{"C": 8, "S": 16, "I": 32, "L": 64}[format], false), true
	case "e", "f", "g":
		return fbTypeFloatingPoint, float(map[string]int16{"e": 0, "f": 1, "g": 2}[format]), true
	case "b":
		return fbTypeBool, empty, true
	case "n":
		return fbTypeNull, empty, true
	case "U", "u": // a 32-bit string column is read back as upstream reads it: large
		return fbTypeLargeUtf8, empty, true
	case "+l", "+L": // as for strings
		return fbTypeLargeList, empty, true
	case "Z":
		return fbTypeLargeBinary, empty, true
	}
	if w, found := strings.CutPrefix(format, "w:"); found {
		width, err := strconv.ParseInt(w, 10, 32)
		if err != nil || width < 0 {
			return 0, nil, false
		}
		return fbTypeFixedSizeBinary, func(b *flatbuffers.Builder) flatbuffers.UOffsetT {
			b.StartObject(1)
			b.PrependInt32Slot(0, int32(width), -1)
			return b.EndObject()
		}, true
	}
	return 0, nil, false
}

// schemaMessage returns the encapsulated Arrow IPC Schema message of the
// columns, or nil when a column's type is not one encoded here (or is
// dictionary-encoded).
func schemaMessage(columns []*field) []byte {
	b := flatbuffers.NewBuilder(256)
	vec, ok := fbFields(b, columns)
	if !ok {
		return nil
	}
	b.StartObject(4)
	b.PrependUOffsetTSlot(1, vec, 0)
	schema := b.EndObject()
	b.StartObject(5)
	b.PrependUOffsetTSlot(2, schema, 0)
	b.PrependByteSlot(1, fbHeaderSchema, 0)
	b.PrependInt16Slot(0, fbMetadataV5, 0)
	b.Finish(b.EndObject())
	body := b.FinishedBytes()
	padded := (len(body) + 7) &^ 7
	msg := make([]byte, 8+padded)
	binary.LittleEndian.PutUint32(msg[0:], 0xFFFFFFFF) // continuation marker
	binary.LittleEndian.PutUint32(msg[4:], uint32(padded))
	copy(msg[8:], body)
	return msg
}

// schemaProxy writes the "schema_" member of a record batch whose columns
// are fields, as upstream's SchemaProxy, when schemaMessage can encode them.
func (e *encoder) schemaProxy(columns []*field) {
	msg := schemaMessage(columns)
	if msg == nil {
		return
	}
	text := make([]byte, 0, 12+4*len(msg))
	text = append(text, `{"bytes": [`...)
	for i, c := range msg {
		if i > 0 {
			text = append(text, ", "...)
		}
		text = strconv.AppendUint(text, uint64(c), 10)
	}
	text = append(text, "]}"...)
	e.key(keySchema)
	e.buf = append(e.buf, '{')
	e.str("typename", "vineyard::SchemaProxy")
	e.str("schema_binary_", string(text))
	e.int("nbytes", int64(len(msg)))
	e.buf = append(e.buf, '}')
}

// fbFields writes the vector of Field tables of fs (children first: a
// flatbuffer table cannot be built inside another); ok is false when a type
// is not encoded here.
func fbFields(b *flatbuffers.Builder, fs []*field) (vec flatbuffers.UOffsetT, ok bool) {
	fields := make([]flatbuffers.UOffsetT, len(fs))
	for i, f := range fs {
		tag, write, ok := fbType(f.format)
		if !ok || f.dict != nil || (len(f.children) > 0) != (tag == fbTypeLargeList) {
			return 0, false
		}
		children, ok := fbFields(b, f.children) // required by readers, even when empty
		if !ok {
			return 0, false
		}
		name := b.CreateString(f.name)
		typ := write(b)
		b.StartObject(7)
		b.PrependUOffsetTSlot(5, children, 0)
		b.PrependUOffsetTSlot(3, typ, 0)
		b.PrependByteSlot(2, tag, 0)
		b.PrependBoolSlot(1, f.flags&flagNullable != 0, false)
		b.PrependUOffsetTSlot(0, name, 0)
		fields[i] = b.EndObject()
	}
	b.StartVector(4, len(fields), 4)
	for i := len(fields) - 1; i >= 0; i-- {
		b.PrependUOffsetT(fields[i])
	}
	return b.EndVector(len(fields)), true
}
