package tree

import (
	"fmt"
	"strings"
	"testing"
)

// The bounds the tests use: the client's.
const (
	maxShapes     = 4096
	maxShapeBytes = 16 << 20
)

func tensorTree(id, blob string, signature int64, shape string) string {
	return fmt.Sprintf(`{"id":"%s","nbytes":8,"shape_":"%s","signature":%d,"typename":"vineyard::Tensor<int64>",`+
		`"buffer_":{"id":"%s","typename":"vineyard::Blob","length":8}}`, id, shape, signature, blob)
}

func TestShapeKeyCutsIDValuesAndSignaturesOnly(t *testing.T) {
	TreeShape := NewShapes(maxShapes, maxShapeBytes).Number
	a := TreeShape([]byte(tensorTree("o0000000000000001", "o8000000000000002", 7, "[1]")))
	b := TreeShape([]byte(tensorTree("o00000000000000ff", "oabcdef0123456789", -1234567890123, "[1]")))
	if a == 0 || a != b {
		t.Fatalf("trees differing in ids and signatures: shapes %d and %d", a, b)
	}
	if c := TreeShape([]byte(tensorTree("o0000000000000001", "o8000000000000002", 7, "[2]"))); c == a || c == 0 {
		t.Fatalf("another shape_ has shape %d (the first %d)", c, a)
	}
	pairs := [][2]string{
		// Inside a string, an escaped id is text: never cut.
		{`{"a":"x\"o0000000000000001\""}`, `{"a":"x\"o0000000000000002\""}`},
		// Not ids: upper case, too short or long, another first letter.
		{`{"a":"o000000000000000A"}`, `{"a":"o000000000000000B"}`},
		{`{"a":"o00000000000001"}`, `{"a":"o00000000000002"}`},
		{`{"a":"p0000000000000001"}`, `{"a":"p0000000000000002"}`},
		// A signature is a member's integer; a string value or an array is kept.
		{`{"signature":"1"}`, `{"signature":"2"}`},
		{`{"signature":[1]}`, `{"signature":[2]}`},
		// Only member values are cut: an id as a key or in an array is kept.
		{`{"o0000000000000001":1}`, `{"o0000000000000002":1}`},
		{`{"a":["o0000000000000001"]}`, `{"a":["o0000000000000002"]}`},
		// A colon inside a string is no member.
		{`{"a":"x:\"o0000000000000001\""}`, `{"a":"x:\"o0000000000000002\""}`},
		{`{"a":"\"signature\":1,"}`, `{"a":"\"signature\":2,"}`},
		// An id cut and a signature cut are marked apart.
		{`{"k":"o0000000000000001"}`, `{"k":1}`},
	}
	for _, p := range pairs {
		if x, y := TreeShape([]byte(p[0])), TreeShape([]byte(p[1])); x == y {
			t.Errorf("%s and %s share shape %d", p[0], p[1], x)
		}
	}
	same := [][2]string{
		{`{"a":{"id":"o0000000000000001"},"b":"o0000000000000002"}`, `{"a":{"id":"o0000000000000003"},"b":"o00000000000000ff"}`},
		{`{"x":{"signature":1},"signature":22}`, `{"x":{"signature":333},"signature":-4}`},
		{`{"a":"\\","b":"o0000000000000001"}`, `{"a":"\\","b":"o0000000000000002"}`}, // an escaped backslash ends no string
	}
	for _, p := range same {
		if x, y := TreeShape([]byte(p[0])), TreeShape([]byte(p[1])); x != y {
			t.Errorf("%s and %s: shapes %d and %d", p[0], p[1], x, y)
		}
	}
	if n := TreeShape([]byte(`{"a":"` + strings.Repeat("x", MaxShapeTree) + `"}`)); n != 0 {
		t.Errorf("a tree over %d bytes has shape %d", MaxShapeTree, n)
	}
}

// TestTreeShapesAreBoundedByBytes: long distinct trees fill the table's
// bytes before its count; it starts over and keeps its numbers new.
func TestTreeShapesAreBoundedByBytes(t *testing.T) {
	shapes := NewShapes(maxShapes, maxShapeBytes)
	TreeShape := shapes.Number
	long := strings.Repeat("x", MaxShapeTree-32)
	first := TreeShape([]byte(`{"bytes":0,"a":"` + long + `"}`))
	if first == 0 {
		t.Fatalf("a tree of %d bytes has no shape", len(long)+32)
	}
	for i := 1; i <= maxShapeBytes/len(long)+1; i++ {
		TreeShape(fmt.Appendf(nil, `{"bytes":%d,"a":"%s"}`, i, long))
		held := shapes.bytes
		if held > maxShapeBytes {
			t.Fatalf("the table holds %d bytes of skeletons, over %d", held, maxShapeBytes)
		}
	}
	if again := TreeShape([]byte(`{"bytes":0,"a":"` + long + `"}`)); again <= first {
		t.Fatalf("after the table started over, the shape numbered %d got %d", first, again)
	}
}

func TestTreeShapeNumbersAreNeverReused(t *testing.T) {
	TreeShape := NewShapes(maxShapes, maxShapeBytes).Number
	first := TreeShape([]byte(`{"reuse":0}`))
	for i := 1; i <= maxShapes; i++ { // fills the table: it starts over
		TreeShape(fmt.Appendf(nil, `{"reuse":%d}`, i))
	}
	if again := TreeShape([]byte(`{"reuse":0}`)); again == first || again < first {
		t.Fatalf("after the table started over, the shape numbered %d got %d", first, again)
	}
}

func FuzzTreeShape(f *testing.F) {
	f.Add([]byte(tensorTree("o0000000000000001", "o8000000000000002", 7, "[1]")))
	f.Add([]byte(`{"a":"\"o0000000000000001`))
	f.Add([]byte(`"signature":`))
	f.Add([]byte(`{"signature":-`))
	shapes := NewShapes(maxShapes, maxShapeBytes)
	f.Fuzz(func(t *testing.T, tree []byte) {
		TreeShape := shapes.Number
		skel := AppendShapeKey(nil, tree)
		if len(skel) > len(tree) {
			t.Fatalf("skeleton of %d bytes is longer: %d", len(tree), len(skel))
		}
		if TreeShape(tree) != TreeShape(append([]byte(nil), tree...)) {
			t.Fatal("one text, two shapes")
		}
	})
}
