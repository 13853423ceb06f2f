package store

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/status"
	treetext "github.com/v6d-io/v6d-go/internal/tree"
)

// TestTreeTextIsJSONForEveryKey: a tree whose keys and values hold control
// characters, U+007F, U+2028 and escapes comes back, from Tree and GetData
// (and so the directory record, which holds the same text), as valid JSON.
func TestTreeTextIsJSONForEveryKey(t *testing.T) {
	s := newStore(t)
	ss := s.NewSession()
	defer ss.Close()
	keys := []string{"\x7f", "\x01", "a\u2028b", "q\"uote", "\u00e9", "tab\t"}
	for _, k := range keys {
		b := blobOf(t, ss, 8)
		key, _ := json.Marshal(k)
		text := fmt.Sprintf(`{"typename":"T","field%s":"v\u0041\/\u007f","m":{"typename":"M",%s:{"id":"%v"}},%s:{"id":"%v"}}`,
			key[1:len(key)-1], key, b, key, b)
		id := create(t, ss, text, b)
		tree, ok := s.Tree(id)
		if !ok {
			t.Fatalf("%v is gone", id)
		}
		checkTreeJSON(t, tree, k)
		if canon, err := treetext.Canonical(tree); err != nil || string(canon) != string(tree) {
			t.Fatalf("the tree of key %q is not canonical: %s\nCanonical: %s, %v", k, tree, canon, err)
		}
		all, _, err := s.GetData([]ids.ObjectID{id})
		if err != nil {
			t.Fatal(err)
		}
		checkTreeJSON(t, all, k)
	}
}

func checkTreeJSON(t *testing.T, text []byte, key string) {
	t.Helper()
	if !json.Valid(text) {
		t.Fatalf("the tree of key %q is not JSON: %s", key, text)
	}
}

// TestTreeTextRefusesWhatJSONCannotCarry: text that is not UTF-8, holds
// a lone surrogate escape, or names a member as a field the daemon sets, is
// refused with a clear error, not stored as something else.
func TestTreeTextRefusesWhatJSONCannotCarry(t *testing.T) {
	s := newStore(t)
	ss := s.NewSession()
	defer ss.Close()
	for _, text := range []string{
		"{\"typename\":\"T\",\"a\":\"\xff\"}",
		"{\"typename\":\"T\",\"\xc3\":1}",
		`{"typename":"T","a":"\ud800"}`,
		`{"typename":"T","m":{"typename":"M","a":"\udc00"}}`,
		`{"typename":"T","nbytes":{"typename":"M"}}`, // the daemon sets nbytes: the key would be there twice
		`{"typename":"T","m":{"typename":"M","id":{"typename":"N"}}}`,
	} {
		_, err := ss.CreateData(json.RawMessage(text), nil)
		if status.CodeOf(err) != status.MetaTreeInvalid {
			t.Errorf("%q: %v, want MetaTreeInvalid", text, err)
		}
	}
}

// TestDirectoryRecordsCarryShapeNumbers: each record holds its tree's
// shape number; trees of one shape key (puts of one text and blob sizes,
// through the shape cache or not) share it, others do not.
func TestDirectoryRecordsCarryShapeNumbers(t *testing.T) {
	s := newStore(t)
	ss := s.NewSession()
	defer ss.Close()
	view, err := s.dir.d.View()
	if err != nil {
		t.Fatal(err)
	}
	text := `{"typename":"vineyard::Tensor<uint8>","shape_":"[8]","buffer_":{"inline":0}}`
	record := func(id ids.ObjectID) (string, uint64) {
		t.Helper()
		rec, _, _, ok := view.Lookup(uint64(id), maxDirRecord)
		if !ok || rec.Shape == 0 {
			t.Fatalf("%v: record %v, shape %d", id, ok, rec.Shape)
		}
		return string(treetext.AppendShapeKey(nil, rec.Tree)), rec.Shape
	}
	inline := func(text string, size uint64) ids.ObjectID {
		blobs, err := ss.AllocInline([]uint64{size})
		if err != nil {
			t.Fatal(err)
		}
		c, err := ss.CreateInline(json.RawMessage(text), blobs)
		if err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	byKey := map[string]uint64{}
	byNumber := map[uint64]string{}
	for _, id := range []ids.ObjectID{
		inline(text, 8), inline(text, 8), inline(text, 16), inline(text, 8), inline(text, 16),
		create(t, ss, `{"typename":"T","a":1}`), create(t, ss, `{"typename":"T","a":1}`), create(t, ss, `{"typename":"T","a":2}`),
	} {
		key, n := record(id)
		if m, ok := byKey[key]; ok && m != n {
			t.Fatalf("%v: one shape key, numbers %d and %d", id, m, n)
		}
		if k, ok := byNumber[n]; ok && k != key {
			t.Fatalf("%v: number %d for two shape keys", id, n)
		}
		byKey[key], byNumber[n] = n, key
	}
	if len(byKey) != 4 {
		t.Fatalf("%d shape keys, want 4 (8 and 16 bytes, a:1, a:2)", len(byKey))
	}
}
