package store

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/v6d-io/v6d-go/internal/ids"
	treetext "github.com/v6d-io/v6d-go/internal/tree"
)

// FuzzTreeRoundTrip: every tree the store returns, of any text it takes,
// as create_data or as an inline create (the second time through the
// shape cache, shape.go), is valid UTF-8 JSON and its own canonical text
// (tree.Canonical: decoding and encoding it again gives the same bytes),
// and the trees of one text, put twice, have one shape key.
func FuzzTreeRoundTrip(f *testing.F) {
	for _, seed := range []string{
		`{"typename":"T","a":1}`,
		`{ "typename" : "T", "b": {"typename":"U", "z": 1, "a": [1, 2]}, "a": "\u0001", "a": "x\u007f" }`,
		`{"typename":"vineyard::Tensor<int64>","shape_":"[1]","order_":"\"C\"","nbytes":8,"buffer_":{"inline":0}}`,
		`{"typename":"T","\u007f":{"inline":0},"\u0001":{"inline":1},"k\u2028":"\u2029","l":[" \/ ",{"b":1,"a":2}]}`,
		`{"typename":"T","signature":5,"id":"o0000000000000001","transient":false,"m":{"typename":"U","signature":6}}`,
		"{\"typename\":\"T\",\"\x7f\":\"\xc3\xa9\\ud83d\\ude42\",\"e\":-0.5e-3}",
	} {
		f.Add([]byte(seed))
	}
	s, err := New(Config{Size: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	f.Fuzz(func(t *testing.T, text []byte) {
		ss := s.NewSession()
		defer ss.Close()
		var keys [][]byte
		for range 2 {
			root, ok := createEither(ss, text)
			if !ok {
				return // refused: the store's error says why (other tests)
			}
			got, ok := s.Tree(root)
			if !ok {
				t.Fatalf("%q: the tree of %v is gone", text, root)
			}
			if !utf8.Valid(got) || !json.Valid(got) {
				t.Fatalf("%q: the store returns %q, not JSON", text, got)
			}
			canon, err := treetext.Canonical(got)
			if err != nil || !bytes.Equal(canon, got) {
				t.Fatalf("%q: the store returns\n%s\nnot its canonical text\n%s (%v)", text, got, canon, err)
			}
			keys = append(keys, treetext.AppendShapeKey(nil, got))
			s.Delete([]ids.ObjectID{root}, DeleteOptions{Deep: true, Force: true})
		}
		if !bytes.Equal(keys[0], keys[1]) {
			t.Fatalf("%q: one text, two shape keys:\n%q\n%q", text, keys[0], keys[1])
		}
	})
}

// createEither stores text as an inline create of two blobs when it has
// {"inline": i} members, else by create_data; false when the store
// refuses it.
func createEither(ss *Session, text []byte) (ids.ObjectID, bool) {
	if bytes.Contains(text, []byte(`"inline"`)) {
		blobs, err := ss.AllocInline([]uint64{8, 8})
		if err != nil {
			return 0, false
		}
		c, err := ss.CreateInline(text, blobs)
		return c.ID, err == nil
	}
	c, err := ss.CreateData(text, nil)
	return c.ID, err == nil
}
