package arrowc

import (
	"encoding/binary"
	"testing"
)

func TestSchemaMessage(t *testing.T) {
	msg := schemaMessage([]*field{{format: "l", name: "a", flags: flagNullable}, {format: "U", name: "s"}, {format: "w:4", name: "w"}})
	if len(msg) < 16 || len(msg)%8 != 0 {
		t.Fatalf("message of %d bytes", len(msg))
	}
	if binary.LittleEndian.Uint32(msg) != 0xFFFFFFFF || int(binary.LittleEndian.Uint32(msg[4:])) != len(msg)-8 {
		t.Fatalf("bad encapsulation: % x", msg[:8])
	}
	// 32-bit strings and lists as upstream reads them: large ones
	if schemaMessage([]*field{{format: "u"}, {format: "+l", children: []*field{{format: "u", name: "item"}}}}) == nil {
		t.Error("32-bit strings and lists not encoded")
	}
	for _, unsupported := range []string{"+l", "+s", "tss:", "w:x"} {
		if schemaMessage([]*field{{format: unsupported}}) != nil {
			t.Errorf("format %q encoded: upstream's reader would get a schema its columns do not match", unsupported)
		}
	}
	if schemaMessage([]*field{{format: "+l", children: []*field{{format: "+s"}}}}) != nil {
		t.Error("a list of structs was encoded")
	}
	if schemaMessage([]*field{{format: "i", dict: &field{format: "u"}}}) != nil {
		t.Error("a dictionary column was encoded")
	}
}
